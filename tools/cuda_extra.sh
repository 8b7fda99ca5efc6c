#!/usr/bin/env bash
# Which CUDA extra tools/setup.sh installs, by the CUDA version the NVIDIA driver reports: prints
# cuda13 or cuda12 on stdout (nothing when no CUDA extra fits) and, on stderr, one line saying which
# and why. CUDA 13 or newer -> cuda13 (CuPy and NVRTC for CUDA 13); CUDA 12 -> cuda12; no nvidia-smi,
# a failing one (no driver loaded) or an older CUDA -> none (CuPy 14 needs CUDA 12 or newer).
# GPU_MEAN_CUDA_EXTRA=cuda13|cuda12|none overrides the choice.
set -uo pipefail
say() { echo "setup: $*" >&2; }
if [ -n "${GPU_MEAN_CUDA_EXTRA:-}" ]; then
  case "$GPU_MEAN_CUDA_EXTRA" in
    cuda13|cuda12) echo "$GPU_MEAN_CUDA_EXTRA"; say "GPU_MEAN_CUDA_EXTRA=$GPU_MEAN_CUDA_EXTRA: installing the $GPU_MEAN_CUDA_EXTRA extra (CuPy for the CUDA backend)" ;;
    none) say "GPU_MEAN_CUDA_EXTRA=none: installing without the CUDA backend (no CuPy)" ;;
    *) say "GPU_MEAN_CUDA_EXTRA must be cuda13, cuda12 or none, not '$GPU_MEAN_CUDA_EXTRA'"; exit 2 ;;
  esac
  exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "no nvidia-smi (no NVIDIA driver): installing without the CUDA backend (no CuPy)"
  exit 0
fi
if ! out=$(nvidia-smi 2>&1); then
  say "nvidia-smi failed ($(printf '%s' "$out" | head -n 1)): no usable NVIDIA driver, installing without the CUDA backend (no CuPy)"
  exit 0
fi
cuda=$(printf '%s\n' "$out" | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)
driver=$(printf '%s\n' "$out" | sed -n 's/.*Driver Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
major=${cuda%%.*}
if [ -z "$cuda" ]; then
  say "nvidia-smi reports no CUDA version: installing without the CUDA backend (no CuPy); GPU_MEAN_CUDA_EXTRA=cuda13 or cuda12 chooses one"
elif [ "$major" -ge 13 ]; then
  echo cuda13
  say "nvidia-smi reports driver ${driver:-?} for CUDA $cuda: installing the cuda13 extra (CuPy and NVRTC for CUDA 13)"
elif [ "$major" -eq 12 ]; then
  echo cuda12
  say "nvidia-smi reports driver ${driver:-?} for CUDA $cuda: installing the cuda12 extra (CuPy and NVRTC for CUDA 12)"
else
  say "nvidia-smi reports driver ${driver:-?} for CUDA $cuda, older than the CUDA 12 that CuPy 14 needs: installing without the CUDA backend (no CuPy); update the driver"
fi
