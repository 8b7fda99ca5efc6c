#!/usr/bin/env bash
# The suite in a minimal install: a virtual environment .venv-min with `pip install .` (numpy, tqdm,
# ml_dtypes) and pytest, hypothesis and pytest-xdist alone -- no pyopencl, CuPy, onnx, onnxruntime,
# OpenVINO, Dask, matplotlib, array-api-strict. Everything that needs an extra must skip, saying
# which, and the rest pass, so that an optional import can no longer break a user's run. On the CPU
# device only (GPU_MEAN_TEST_DEVICES=cpu; the stand-in for CuPy's tests run as everywhere). Left to the
# main run, which runs them on the same CPU device, to keep this one short (measured: 102 s with 2
# workers, the venv already made): the kernel compile checks (tests/test_cuda_static.py,
# tests/test_cuda_nvrtc.py: nvcc and a system NVRTC, no extra), the near-limit arrays
# (tests/test_large_arrays.py, 146 s), the fuzzer (50 s), the chunked full reductions of FLOAT16
# and BFLOAT16 rows (97 s), and the CPU device's long rounding sweeps (the n-ary mean's many values
# and layouts, the exact row reductions, the zero rule's long FLOAT16/BFLOAT16 rows, FLOAT16's wide
# vectors, FLOAT64's short rows: 58 s of 149 s summed); none of them imports an optional package, and
# their modules are still collected and their other tests run. pytest is run by its script, not
# `python -m pytest`, so that the installed gpu_mean is tested, not the source tree (the wheel's
# kernel files included). GPU_MEAN_REQUIRE is cleared: tools/test.sh requires what the full set-up installs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-min/bin/python ] || "$PY" -m venv .venv-min
.venv-min/bin/python -m pip install -q --upgrade pip
.venv-min/bin/python -m pip install -q --force-reinstall --no-deps . && .venv-min/bin/python -m pip install -q . \
  "pytest>=7" "pytest-xdist>=3.5" "hypothesis>=6.100"
extras=$(.venv-min/bin/python - <<'PY'
import importlib.util
print(" ".join(m for m in ("pyopencl", "cupy", "onnx", "onnxruntime", "openvino", "dask", "matplotlib",
                           "array_api_strict", "torch") if importlib.util.find_spec(m)))
PY
)
if [ -n "$extras" ]; then echo "test_minimal: .venv-min is not minimal: $extras installed" >&2; exit 2; fi
workers=$(( $(nproc) < 4 ? $(nproc) : 4 ))
GPU_MEAN_REQUIRE= GPU_MEAN_TEST_DEVICES=cpu .venv-min/bin/pytest -q -rfE -p no:cacheprovider -n "$workers" --dist loadgroup \
  --ignore=tests/test_cuda_static.py --ignore=tests/test_cuda_nvrtc.py --ignore=tests/test_large_arrays.py \
  -k "not test_fuzz_descriptors and not test_full_reduction_in_chunks and not test_nary_many_values \
      and not test_nary_layouts and not test_reduce_rows_exact and not test_zero_rule_and_specials \
      and not test_fp16_wide_vectors_and_prefetch and not test_f64_short_rows_exact" "$@" tests
