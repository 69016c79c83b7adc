#!/usr/bin/env bash
# Runs the given pytest arguments once per CPU kernel path this machine can be made to take, and prints one
# line per path. A tolerance that holds on only some of them holds for one CPU's kernels, not for the code.
#
#   bash scripts/kernel_paths.sh tests/circuits/test_run.py tests/circuits/test_heads.py
#
# The paths: torch's own kernels at each capability the CPU has (ATEN_CPU_CAPABILITY: default, avx2, avx512),
# and MKL's matrix products limited to AVX2 (MKL_ENABLE_INSTRUCTIONS=AVX2) or held to its conditional
# numerical reproducibility mode (MKL_CBWR=COMPATIBLE, the code path of an older SSE2 machine). Logs go to
# $OUT (default: test-artifacts/kernel-paths/, which git ignores), one file per path.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  echo "usage: bash scripts/kernel_paths.sh PYTEST_ARGS... (the tests to run on each kernel path)" >&2
  exit 2
fi
out="${OUT:-test-artifacts/kernel-paths}"
mkdir -p "$out"
python=".venv/bin/python"
[ -x "$python" ] || python=python
flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
paths=("default=ATEN_CPU_CAPABILITY=default")
case " $flags " in *" avx2 "*) paths+=("aten-avx2=ATEN_CPU_CAPABILITY=avx2") ;; esac
case " $flags " in *" avx512f "*) paths+=("aten-avx512=ATEN_CPU_CAPABILITY=avx512") ;; esac
paths+=("mkl-avx2=MKL_ENABLE_INSTRUCTIONS=AVX2" "mkl-compatible=MKL_CBWR=COMPATIBLE")
status=0
for entry in "${paths[@]}"; do
  name="${entry%%=*}"
  setting="${entry#*=}"
  log="$out/$name.txt"
  env "$setting" "$python" -m pytest -q -p no:cacheprovider "$@" >"$log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || status=1
  printf '%-15s %-40s %s\n' "$name" "$setting" "$(grep -E '^[0-9]+ (passed|failed)|^(FAILED|ERROR) |[0-9]+ (passed|failed|error)' "$log" | tail -1)"
done
exit "$status"
