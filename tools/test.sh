#!/usr/bin/env bash
# The test job: set up, lint, then the whole suite on every device present (CPU, OpenCL, CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/ruff check .
.venv/bin/python -m pytest -q -ra "$@"
