#!/usr/bin/env bash
# The main job: set up, list the devices, run the conformance suite on the best device present
# (CUDA, else OpenCL -- PoCL on a CPU-only machine -- else the numpy CPU device), then profile it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/gpu-mean devices
.venv/bin/gpu-mean conformance --device "${GPU_MEAN_DEVICE:-auto}"
.venv/bin/gpu-mean profile --device "${GPU_MEAN_DEVICE:-auto}" --size-mb 64 --repeat 5
