#!/usr/bin/env bash
# The whole GPU verification in one call of at most 10 minutes (the steps' limits add up to 585 s),
# on a fresh machine with an NVIDIA GPU and nothing installed beyond CuPy, PyTorch and pytest
# (pytest-xdist used when present); no network needed. Two phases:
#   correctness, side by side (none of it is timed):
#     tests        the suite on the GPU (CI runs the cpu device's), in parallel workers (-n 8 --dist loadgroup)
#     conf-quick   the quick conformance pass, then
#     conf-full    the full one, then
#     sanitizer    the quick pass again under compute-sanitizer memcheck (when it is on the PATH)
#   timing, one step at a time (nothing else on the GPU):
#     profile      every shape class on random normal data, with CuPy and PyTorch beside it
#     centered     the reductions on centered data (the exact pass's worst case)
#     sweep        sizes to 4x the L2 with its plot (the plot skipped, saying so, without matplotlib)
#     ncu          Nsight Compute on the slow reductions (when ncu is on the PATH)
#     front-door   host time per small functional call on CuPy and PyTorch arrays against cupy.mean and
#                  torch.mean (tools/bench.py front_door; the dry run times the stand-in for CuPy)
#   and only when GPU_PASS_STEPS names them (they do not fit the 10 minutes: a second call):
#     ddp          gpu_mean.dask's chunk step on CuPy chunks against cupy.sum (its cold NVRTC build, about 45 s)
#     opencl       the OpenCL backend on the same GPU (NVIDIA's driver ships an OpenCL platform): the
#                  suite on opencl:N (GPU_PASS_CL_TESTS, default the rounding, GPU-shape and interop
#                  tests), where pyopencl imports or installs from GPU_PASS_WHEELS (a folder of wheels,
#                  no network needed); the dry run takes PoCL, the CPU device it has
#     opencl-profile  every shape class there on normal data (the first OpenCL GPU the project meets)
#   The GPU machine has no pyopencl and no network: fetch its wheels here for its Python, e.g.
#     python -m pip download pyopencl --python-version 3.12 --only-binary=:all: \
#       --platform manylinux_2_28_x86_64 -d wheels        (about 1 MB without numpy's wheel, 17 MB with it)
#   and carry wheels/ (ignored by git) with GPU_PASS_WHEELS=wheels.
# Usage: bash tools/gpu_pass.sh [OUTDIR]
#   OUTDIR default: docs/results/<UTC date>-<GPU name> (ready to commit); the dry run
#   (GPU_PASS_DEVICE=cpu) writes to out/gpu-pass-<date>-cpu instead. With $OUT set (the device tool's
#   folder, which brings back at most 8 files) and no OUTDIR, the outputs go to a temporary folder and
#   $OUT receives gpu-pass.tgz (all of them) and SUMMARY.md, also when the run is stopped early (a TERM
#   takes effect when the running step ends).
# Writes <step>.log for every step, conformance.json, profile.json, centered.json, sweep.json,
# sweep.png, front-door.json, ddp.json (when named), and SUMMARY.md: date, commit, machine, libraries, and each step's command, exit status
# and seconds. A failing step does not stop the others; the exit status is 1 if any step failed.
# GPU_PASS_DEVICE=cpu runs the same steps on the CPU device: the dry run of the script itself, with
# smaller defaults (three test files, conformance of mean and reduce, 16 MiB profiles).
# Knobs for a shorter run (the dry run's test uses them): GPU_PASS_TESTS (pytest's arguments, default
# tests), GPU_PASS_WORKERS (default 8), GPU_PASS_CONF_ARGS (added to both conformance runs, e.g.
# "--op mean"), GPU_PASS_MB, GPU_PASS_SWEEP_MB, GPU_PASS_REPEAT, GPU_PASS_PEERS (default cupy,torch),
# GPU_PASS_DTYPES (the profiles' types, default f32,f16,bf16), GPU_PASS_STEPS (a comma-separated list
# of the steps to run, e.g. "profile,centered,ncu"; default every step; the others are listed as skipped),
# GPU_PASS_PROFILE_ARGS (added to the profile and centered steps, e.g. "--op reduce"),
# GPU_PASS_PROFILE_LIMIT (their time limit, default 120 and 75 s).
set -uo pipefail
cd "$(dirname "$0")/.."
DEV=${GPU_PASS_DEVICE:-cuda}
if [ "$DEV" != cuda ]; then
  # the dry run checks the script, not the library (the suite's own run does that): by default a few
  # test files, two operations' conformance and small profiles, so that it ends in about a minute
  : "${GPU_PASS_TESTS:=tests/test_planning.py tests/test_descriptors.py tests/test_cli_usage.py}"
  : "${GPU_PASS_CONF_ARGS:=--op mean --op reduce}" "${GPU_PASS_MB:=16}" "${GPU_PASS_SWEEP_MB:=4}" "${GPU_PASS_REPEAT:=3}"
fi
if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=${PYTHON:-python3}; fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
PACK=
if [ -n "${1:-}" ]; then OUTDIR=$1
elif [ -n "${OUT:-}" ]; then PACK=$OUT; OUTDIR=$(mktemp -d /tmp/gpu_pass-out.XXXXXX)/gpu-pass
elif [ "$DEV" = cuda ]; then
  slug=$(printf '%s' "${GPU_NAME:-gpu}" | tr 'A-Z' 'a-z' | sed 's/^nvidia //; s/[^a-z0-9]\{1,\}/-/g; s/-$//')
  OUTDIR=docs/results/$(date -u +%Y-%m-%d)-$slug
else OUTDIR=out/gpu-pass-$(date -u +%Y%m%d-%H%M)-$DEV
fi
mkdir -p "$OUTDIR/.rows"
rm -f "$OUTDIR"/.rows/*
pack() {   # the outputs into $OUT as one archive (PACK): at the end, or when the run is stopped
  [ -n "$PACK" ] || return 0
  tar czf "$PACK/gpu-pass.tgz" -C "$(dirname "$OUTDIR")" gpu-pass 2>/dev/null
  cp "$OUTDIR/SUMMARY.md" "$PACK/SUMMARY.md" 2>/dev/null
  return 0
}
trap pack EXIT
trap 'exit 143' TERM INT
# one kernel cache for the script's own steps (the suite keeps a private one): conformance compiles
# once, the sanitizer and the profiles find the kernels built
export GPU_MEAN_CACHE_DIR=${GPU_MEAN_CACHE_DIR:-$(mktemp -d /tmp/gpu_pass-cache.XXXXXX)}
GM="$PY -m gpu_mean"
SUMMARY="$OUTDIR/SUMMARY.md"
T0=$SECONDS

{
  echo "# GPU verification, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
  echo "- python: $($PY --version 2>&1)"
  echo "- device: $DEV; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
  echo "- libraries: $($PY - <<'EOF' 2>&1
import importlib
out = []
for m in ("numpy", "cupy", "torch", "pytest", "xdist", "matplotlib", "onnx", "onnxruntime", "pyopencl", "dask"):
    try:
        out.append(f"{m} {getattr(importlib.import_module(m), '__version__', '?')}")
    except Exception:
        out.append(f"{m} absent")
print("; ".join(out))
EOF
)"
  echo
  echo "| step | command | exit | seconds |"
  echo "|---|---|---|---|"
} > "$SUMMARY"

row() {   # row N NAME RC TEXT: a summary row and the step's exit status, kept in step order whatever order
  # the steps end in (the correctness steps run side by side)
  local f; f=$OUTDIR/.rows/$(printf %02d "$1")-$2     # two digits: the glob sorts them in step order
  echo "| $2 | $4 |" > "$f.row"
  echo "$3" > "$f.rc"
}

step() {   # step N NAME LIMIT_S COMMAND...: run with a time limit, output to NAME.log, a summary row
  local n=$1 name=$2 limit=$3; shift 3
  want "$name" || { skip "$n" "$name" "not in GPU_PASS_STEPS"; return 0; }
  local t0=$SECONDS
  echo "== $name (limit ${limit} s): $*" >> "$OUTDIR/steps.log"
  timeout -k 10 "$limit" "$@" > "$OUTDIR/$name.log" 2>&1
  local rc=$?
  row "$n" "$name" "$rc" "\`$*\` | $rc$([ $rc -eq 124 ] && echo " (time limit ${limit} s)") | $((SECONDS - t0))"
  echo "== $name: exit $rc in $((SECONDS - t0)) s" >> "$OUTDIR/steps.log"
  return $rc
}

want() {   # want NAME: whether GPU_PASS_STEPS (default: every step but the extra ones) names the step
  if [ -z "${GPU_PASS_STEPS:-}" ]; then [[ " $EXTRA_STEPS " != *" $1 "* ]]
  else [[ ",$GPU_PASS_STEPS," == *",$1,"* ]]; fi
}
EXTRA_STEPS="ddp opencl opencl-profile"     # run only when named

skip() {   # skip N NAME WHY
  row "$1" "$2" 0 "skipped: $3 | - | 0"
  echo "== $2: skipped: $3" >> "$OUTDIR/steps.log"
}

$GM devices > "$OUTDIR/devices.log" 2>&1

# --- correctness, side by side -------------------------------------------------------------------
# the GPU alone: CI runs the cpu device's tests on every commit (with cuda:0,cpu the suite outran 270 s
# on an H200 with 12 workers, docs/results/2026-11-28-s19-h200/run2)
if [ "$DEV" = cuda ]; then TEST_DEVICES=cuda:0; else TEST_DEVICES=$DEV; fi
WORKERS=${GPU_PASS_WORKERS:-8}
if [ "$WORKERS" -gt 0 ] && $PY -c 'import xdist' 2>/dev/null; then PAR=(-n "$WORKERS" --dist loadgroup); else PAR=(); fi
read -r -a TESTS <<< "${GPU_PASS_TESTS:-tests}"
read -r -a CONF <<< "${GPU_PASS_CONF_ARGS:-}"
# -v: each test's verdict as it ends, so that a run cut off by its limit still names its failures
step 1 tests 240 env GPU_MEAN_TEST_DEVICES="$TEST_DEVICES" $PY -m pytest -v -rfEs -p no:cacheprovider \
  "${PAR[@]}" --durations=12 "${TESTS[@]}" &
tests_pid=$!
(
  step 2 conf-quick 90 $GM conformance --device "$DEV" --quick "${CONF[@]}" --json "$OUTDIR/conformance-quick.json"
  step 3 conf-full 90 $GM conformance --device "$DEV" "${CONF[@]}" --json "$OUTDIR/conformance.json"
  if [ "$DEV" = cuda ] && command -v compute-sanitizer >/dev/null 2>&1; then
    step 4 sanitizer 85 compute-sanitizer --tool memcheck --error-exitcode 9 $GM conformance --device cuda --quick
  else
    skip 4 sanitizer "$([ "$DEV" = cuda ] && echo 'compute-sanitizer is not on the PATH' || echo "device $DEV: memcheck is CUDA's")"
  fi
) &
conf_pid=$!
wait "$tests_pid" "$conf_pid"

# --- timing, one step at a time ------------------------------------------------------------------
# CuPy and PyTorch are the peers on a GPU (numpy and onnxruntime would time the host CPU); the ones
# not installed are left out, saying so
WANT=${GPU_PASS_PEERS-cupy,torch}
read -r -a PEERS <<< "$($PY - "$WANT" <<'EOF'
import sys
from gpu_mean.cli import PEER_MODULES, _importable
print(" ".join(p for p in sys.argv[1].split(",") if p in PEER_MODULES and _importable(*PEER_MODULES[p])))
EOF
)"
for p in ${WANT//,/ }; do
  [[ " ${PEERS[*]} " == *" $p "* ]] || echo "peer $p: not installed, profiled without it" >> "$OUTDIR/steps.log"
done
PEER_ARGS=()
if [ ${#PEERS[@]} -gt 0 ]; then PEER_ARGS=(--peers "$(IFS=,; echo "${PEERS[*]}")"); fi
PEER_NOTE=$([ ${#PEERS[@]} -gt 0 ] && echo "peers ${PEERS[*]}" || echo "no peer installed of ${WANT:-none}")
MB=${GPU_PASS_MB:-128}
DTYPES=()
IFS=, read -r -a _dts <<< "${GPU_PASS_DTYPES:-f32,f16,bf16}"
for t in "${_dts[@]}"; do DTYPES+=(--dtype "$t"); done
read -r -a PROF_ARGS <<< "${GPU_PASS_PROFILE_ARGS:-}"
REPEAT=${GPU_PASS_REPEAT:-10}
step 5 profile "${GPU_PASS_PROFILE_LIMIT:-120}" $GM profile --device "$DEV" --data normal --size-mb "$MB" \
  --repeat "$REPEAT" "${DTYPES[@]}" "${PROF_ARGS[@]}" "${PEER_ARGS[@]}" \
  --json "$OUTDIR/profile.json"
echo "profile: $PEER_NOTE" >> "$OUTDIR/profile.log"
step 6 centered "${GPU_PASS_PROFILE_LIMIT:-75}" $GM profile --device "$DEV" --data centered --op reduce \
  --size-mb "$MB" --repeat "$REPEAT" "${DTYPES[@]}" "${PROF_ARGS[@]}" \
  --json "$OUTDIR/centered.json"
PLOT=()
if $PY -c 'import matplotlib' 2>/dev/null; then PLOT=(--plot "$OUTDIR/sweep.png"); fi
step 7 sweep 45 $GM profile --device "$DEV" --sweep --data normal --size-mb "${GPU_PASS_SWEEP_MB:-128}" --dtype f32 \
  --op mean --op reduce --repeat "$(( REPEAT < 3 ? REPEAT : 3 ))" "${PEER_ARGS[@]}" --json "$OUTDIR/sweep.json" "${PLOT[@]}"
[ ${#PLOT[@]} -gt 0 ] || echo "sweep: no plot: matplotlib is not installed" | tee -a "$OUTDIR/sweep.log" >> "$OUTDIR/steps.log"
if [ "$DEV" = cuda ] && command -v ncu >/dev/null 2>&1; then
  step 8 ncu 60 ncu --target-processes all --profile-from-start off --nvtx -k regex:gm_reduce \
    --section SpeedOfLight --section LaunchStats --section Occupancy $PY tools/ncu_reductions.py
else
  skip 8 ncu "$([ "$DEV" = cuda ] && echo 'ncu is not on the PATH' || echo "device $DEV: Nsight Compute is CUDA's")"
fi

FRONT=$([ "$DEV" = cuda ] && echo cuda || echo fake)
step 9 front-door 20 $PY tools/bench.py front_door --devices "$FRONT" --before none --rounds 1 --calls 200 \
  --json "$OUTDIR/front-door.json"

if [ "$DEV" = cuda ]; then DDP=(--device cuda --mb 256); else DDP=(--device opencl --mb 4); fi
step 10 ddp 90 $PY tools/bench.py ddp "${DDP[@]}" --before none --repeat 5 --json "$OUTDIR/ddp.json"

# --- the OpenCL backend on the same GPU (extra steps) ----------------------------------------------
CLDEV=
if want opencl || want opencl-profile; then
  if ! $PY -c 'import pyopencl' 2>/dev/null && [ -n "${GPU_PASS_WHEELS:-}" ]; then
    echo "== pyopencl from $GPU_PASS_WHEELS" >> "$OUTDIR/steps.log"
    $PY -m pip install --quiet --no-index --find-links "$GPU_PASS_WHEELS" pyopencl >> "$OUTDIR/steps.log" 2>&1
  fi
  # an OpenCL GPU beside CUDA; the dry run takes any OpenCL device (PoCL here)
  CLDEV=$($PY - "$DEV" 2>> "$OUTDIR/steps.log" <<'EOF'
import sys
import gpu_mean as gm
gpu = sys.argv[1] == "cuda"
print(next((f"opencl:{d.index}" for d in gm.list_devices() if d.backend == "opencl" and not d.unavailable
            and (d.device_type == "GPU" or not gpu)), ""))
EOF
  )
fi
CLWHY="no OpenCL $([ "$DEV" = cuda ] && echo 'GPU ')device ($($PY -c 'import pyopencl' 2>/dev/null && echo 'pyopencl found none' || echo 'pyopencl absent; GPU_PASS_WHEELS may hold its wheel'))"
read -r -a CL_TESTS <<< "${GPU_PASS_CL_TESTS:-tests/test_correct_rounding.py tests/test_gpu_shape.py tests/test_interop.py}"
if [ -n "$CLDEV" ] || ! want opencl; then
  step 11 opencl 240 env GPU_MEAN_TEST_DEVICES="$CLDEV" $PY -m pytest -q -rfEs -p no:cacheprovider "${PAR[@]}" \
    "${CL_TESTS[@]}"
else skip 11 opencl "$CLWHY"; fi
if [ -n "$CLDEV" ] || ! want opencl-profile; then
  step 12 opencl-profile "${GPU_PASS_PROFILE_LIMIT:-120}" $GM profile --device "$CLDEV" --data normal \
    --size-mb "$MB" --repeat "$REPEAT" "${DTYPES[@]}" "${PROF_ARGS[@]}" --json "$OUTDIR/opencl-profile.json"
else skip 12 opencl-profile "$CLWHY"; fi

RUN=$(cat "$OUTDIR"/.rows/*.rc | wc -l)
BAD=$(grep -vcx 0 "$OUTDIR"/.rows/*.rc /dev/null | awk -F: '{s += $2} END {print s + 0}')
{
  cat "$OUTDIR"/.rows/*.row
  echo
  echo "Logs: one per step (\`<step>.log\`), \`steps.log\` (the order they ran in), \`devices.log\`;"
  echo "conformance-quick.json, conformance.json, profile.json ($PEER_NOTE), centered.json, sweep.json$([ ${#PLOT[@]} -gt 0 ] && echo ', sweep.png' || echo ' (no sweep.png: matplotlib is not installed)')."
  echo "Overall: $([ "$BAD" -eq 0 ] && echo PASS || echo "FAIL ($BAD of $RUN steps failed)") in $((SECONDS - T0)) s"
} >> "$SUMMARY"
rm -rf "$OUTDIR/.rows"
[ -n "${GPU_PASS_KEEP_CACHE:-}" ] || case "$GPU_MEAN_CACHE_DIR" in /tmp/gpu_pass-cache.*) rm -rf "$GPU_MEAN_CACHE_DIR" ;; esac
cat "$SUMMARY"
grep -q '^Overall: PASS' "$SUMMARY"
