#!/usr/bin/env bash
# The main job: set up (tools/setup.sh), then `gpu-mean demo` on the best device present (CUDA, else
# OpenCL -- PoCL on a CPU-only machine -- else the numpy CPU device): a few operators checked against
# the CPU reference, a quick conformance pass against the exact oracle, and a short profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/gpu-mean demo ${GPU_MEAN_DEVICE:+--device "$GPU_MEAN_DEVICE"}
echo "The gpu-mean command lives in .venv/bin: 'source .venv/bin/activate' puts it on PATH."
