#!/usr/bin/env bash
# The test job: set up, lint, then the whole suite on every device present (CPU, OpenCL, CUDA).
# The devices line says once which backends are absent and why; pytest's summary then lists only
# failures and errors (-rfE): the skips of absent devices are counted on its last line, not listed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/ruff check .
.venv/bin/gpu-mean devices
.venv/bin/python -m pytest -q -rfE "$@"
