#!/usr/bin/env bash
# Set up a fresh machine: Debian's PoCL (the OpenCL CPU device) and a virtual environment at .venv
# with gpu_mean installed editable plus its OpenCL, ONNX, test and plot extras and the CUDA compiler (NVRTC
# and headers as wheels: CI compile-checks every CUDA kernel variant without a GPU). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null 2>&1 && ! dpkg -s pocl-opencl-icd >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq pocl-opencl-icd ocl-icd-libopencl1 >/dev/null
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[opencl,test,plot,cuda-compile]"
