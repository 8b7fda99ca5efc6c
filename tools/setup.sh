#!/usr/bin/env bash
# Set up a fresh machine: Debian's PoCL (the OpenCL CPU device) and a virtual environment at .venv
# with gpu_mean installed editable plus its OpenCL, ONNX, test and plot extras and the CUDA compiler (NVRTC
# and headers as wheels: CI compile-checks every CUDA kernel variant without a GPU). With an NVIDIA
# driver, the CUDA extra that matches the CUDA version nvidia-smi reports (tools/cuda_extra.sh says
# which and why) instead of the compiler alone: CuPy, NVRTC and headers. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null 2>&1 && ! dpkg -s pocl-opencl-icd >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq pocl-opencl-icd ocl-icd-libopencl1 >/dev/null
fi
CUDA_EXTRA=$(bash tools/cuda_extra.sh)
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# cuda-compile is NVRTC 13 alone; cuda13 and cuda12 bring their own NVRTC (12's and 13's are versions
# of one package: the two extras cannot be installed together)
.venv/bin/python -m pip install -q -e ".[opencl,test,plot,${CUDA_EXTRA:-cuda-compile}]"
# NVRTC 12.0 and its headers in .nvrtc12 (outside the venv, not importable): tests/test_cuda_nvrtc.py
# compiles every reduction variant with it as well, the oldest NVRTC the cuda12 extra allows
if [ ! -f .nvrtc12/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 ]; then
  .venv/bin/python -m pip install -q --no-deps --target .nvrtc12 "nvidia-cuda-nvrtc-cu12==12.0.*" \
    "nvidia-cuda-runtime-cu12==12.0.*"
fi
