#!/usr/bin/env bash
# The test job: set up, lint, then the whole suite on every device present (CPU, OpenCL, CUDA), then
# the suite again in a minimal install (tools/test_minimal.sh).
# The devices line says once which backends are absent and why; pytest's summary then lists only
# failures and errors (-rfE); the last lines say per device how many tests passed, failed and were
# skipped, and why (tools/test_summary.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
.venv/bin/ruff check .
.venv/bin/gpu-mean devices
status=0
# one pytest-xdist worker per core, four at most, each taking whole devices (tests/conftest.py): the
# suite is bound by PoCL compiling and running kernels
workers=$(( $(nproc) < 4 ? $(nproc) : 4 ))
# what tools/setup.sh installed: if any is missing the run stops (a usage error naming it) instead of
# skipping the tests that need it (tests/conftest.py: GPU_MEAN_REQUIRE)
export GPU_MEAN_REQUIRE=${GPU_MEAN_REQUIRE-opencl,nvrtc,nvrtc12}
.venv/bin/python -m pytest -q -rfE -n "$workers" --dist loadgroup --junitxml=.pytest-results.xml "$@" || status=$?
.venv/bin/python tools/test_summary.py .pytest-results.xml
# the suite once more in a minimal install (`pip install .`, pytest, hypothesis, pytest-xdist): what
# needs an extra skips, the rest passes (tools/test_minimal.sh; about 2 minutes on the CPU device)
bash tools/test_minimal.sh || status=$?
exit "$status"
