#!/usr/bin/env bash
# The whole GPU verification in one call of at most 10 minutes, on a machine with an NVIDIA GPU,
# CuPy, PyTorch, onnx, onnxruntime, pytest and compute-sanitizer (no network needed):
#   1. the test suite with the CUDA device (and the CPU reference),
#   2. the full conformance suite on the GPU,
#   3. the quick conformance pass under compute-sanitizer memcheck (every CUDA kernel, every variant),
#   4. the profile of every shape class against CuPy and PyTorch, then a size sweep with a plot.
# Usage: bash tools/gpu_pass.sh [OUTDIR]   (default: $OUT, else out/gpu-<UTC date>)
# Writes *.log, *.json, sweep.png and SUMMARY.md (date, device, each command and its exit status)
# into OUTDIR, ready to copy under docs/results/. Each step has its own time limit and the script
# goes on after a failing step; its exit status is 1 if any step failed.
# GPU_PASS_DEVICE=cpu runs the same steps on the CPU device (a dry run of the script itself).
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-out/gpu-$(date -u +%Y%m%d-%H%M)}}
mkdir -p "$OUTDIR"
DEV=${GPU_PASS_DEVICE:-cuda}
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
GM="$PY -m gpu_mean"
SUMMARY="$OUTDIR/SUMMARY.md"
FAILED=0

{
  echo "# GPU verification, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- python: $($PY --version 2>&1)"
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
  echo "- libraries: $($PY -c 'import importlib
for m in ("numpy", "cupy", "torch", "onnx", "onnxruntime"):
    try:
        print(m, importlib.import_module(m).__version__, end="; ")
    except Exception as e:
        print(m, "absent", end="; ")' 2>&1)"
  echo
  echo "| step | command | exit | seconds |"
  echo "|---|---|---|---|"
} > "$SUMMARY"

step() {   # step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name: $*" | tee -a "$OUTDIR/steps.log"
  timeout "$limit" "$@" > "$OUTDIR/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || FAILED=1
  echo "| $name | \`$*\` | $rc$([ $rc -eq 124 ] && echo ' (time limit)') | $((SECONDS - t0)) |" >> "$SUMMARY"
  tail -n 3 "$OUTDIR/$name.log" | tee -a "$OUTDIR/steps.log"
}

$GM devices > "$OUTDIR/devices.log" 2>&1
step tests 200 env GPU_MEAN_TEST_DEVICES="cpu,${DEV}:0" $PY -m pytest -q -ra -p no:cacheprovider ${GPU_PASS_TESTS:-tests}
step conformance 120 $GM conformance --device "$DEV" --json "$OUTDIR/conformance.json"
if command -v compute-sanitizer >/dev/null 2>&1 && [ "$DEV" = cuda ]; then
  step sanitizer 120 compute-sanitizer --tool memcheck --error-exitcode 9 $GM conformance --device cuda --quick
else
  echo "| sanitizer | skipped: no compute-sanitizer or not CUDA | - | 0 |" >> "$SUMMARY"
fi
# CuPy and PyTorch are the peers on a GPU (numpy and onnxruntime would time the host CPU)
PEERS=${GPU_PASS_PEERS:-cupy,torch}
step profile 75 $GM profile --device "$DEV" --size-mb "${GPU_PASS_MB:-1024}" --repeat 20 --peers "$PEERS" \
  --json "$OUTDIR/profile.json"
step sweep 75 $GM profile --device "$DEV" --sweep --size-mb "${GPU_PASS_SWEEP_MB:-512}" --dtype f32 \
  --op mean --op reduce --repeat 10 --peers "$PEERS" --json "$OUTDIR/sweep.json" --plot "$OUTDIR/sweep.png"
{
  echo
  echo "Logs: one per step (\`<step>.log\`); conformance.json, profile.json, sweep.json, sweep.png."
  echo "Overall: $([ $FAILED -eq 0 ] && echo PASS || echo 'FAIL (see the steps above)')"
} >> "$SUMMARY"
cat "$SUMMARY"
exit $FAILED
