"""Every numeric test runs once per device present; absent devices are skipped with the reason.

GPU_MEAN_TEST_DEVICES restricts the set, e.g. ``GPU_MEAN_TEST_DEVICES=cpu,opencl:0``.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile

import pytest

import gpu_mean as gm
from gpu_mean import backends

# "opencl:0-nofp64" is the OpenCL device with fp64 switched off: it forces the kernels' paths for
# devices without cl_khr_fp64 (compensated float accumulation) onto every test. "opencl:0-gpupaths"
# runs the kernel variants and launch geometry an OpenCL GPU gets (4-wide vectors, short blocks, no
# prefetch, many reduction chunks) on the device present, so that a machine without a GPU tests them;
# "opencl:0-gpupaths-nofp64" the same without fp64, as an OpenCL GPU without cl_khr_fp64 runs them.
ALL_DEVICE_IDS = ["cpu", "opencl:0", "opencl:0-nofp64", "opencl:0-gpupaths", "opencl:0-gpupaths-nofp64", "cuda:0"]
# The bounds-checked kernel builds (gpu_mean/kernels/checked.py) of both kernel shapes: by default
# only the tests that ask for them (``device_or_checked``, ``checked_device``: the fuzzer, the
# conformance pass, the planted out-of-bounds kernels) run on them; naming one in
# GPU_MEAN_TEST_DEVICES runs the whole suite on it.
CHECKED_DEVICE_IDS = ["opencl:0-checked", "opencl:0-gpupaths-checked"]
# What the default run leaves out (deselected in pytest_collection_modifyitems below, to keep CI under
# 25 minutes; GPU_MEAN_TEST_DEVICES naming a device runs everything on it):
# - FP64_BLIND_MODULES on the -nofp64 devices: the modules whose checks the fp64 switch cannot change
#   (host code: planning, binding, caching, front ends, tools; the near-limit arrays' index
#   arithmetic, which the fp64 variants share);
FP64_BLIND_MODULES = {"test_large_arrays", "test_tools", "test_split", "test_frontends", "test_kernel_cache",
                      "test_pool", "test_ext_frontends", "test_interop", "test_profile_figures", "test_dask",
                      "test_runtime_regressions", "test_threads", "test_numpy_habits", "test_object_model"}
# - on opencl:N-nofp64 (the CPU-shaped kernels without fp64, a configuration no shipping OpenCL CPU
#   driver has: PoCL's, Intel's and AMD's CPU devices all have fp64), every module but those that hold
#   every kernel's rounding to the oracle; the GPU-shaped -gpupaths-nofp64 (GPUs without fp64 exist)
#   runs all but FP64_BLIND_MODULES;
NOFP64_CPU_MODULES = {"test_correct_rounding", "test_fuzz", "test_accuracy"}
# - the conformance pass's quick run but on the reference and the GPU shape (the CPU shape's kernels
#   and both checked builds meet the same operators in the fuzzer's 1000 descriptors);
CONFORMANCE_DEVICES = {"cpu", "opencl:0-gpupaths", "cuda:0"}
# - the near-limit arrays (tests/test_large_arrays.py) on the cpu device, whose indexing is numpy's;
LARGE_ARRAY_DEVICES_SKIP = {"cpu"}
# - the access model's traced reduction classes (tests/test_access_model.py) but on FLOAT16 (and any
#   strict xfail there, on every type): the main-pass loads are the same source lines and index
#   arithmetic for every type, and FLOAT16's 2-byte elements and 8-byte partials are the narrowest, the
#   type a lost sector shows most on (the finalize's partials read a chunk per lane were 0.25 against
#   FLOAT32's 0.5);
ACCESS_MODEL_TYPES = {"f16"}
# - on the two checked builds, the exact device partials' per-type tests (tests/test_exact_partials.py)
#   but on FLOAT16: the superaccumulator's loads and stores go through the same GM_AT accessors for
#   every narrow type, FLOAT16's 2-byte elements put the most elements in a piece's bounds, and
#   FLOAT64's 68-limb accumulator keeps its own checked test (test_float64_blocks_are_exact); the
#   unchecked devices run every type;
EXACT_PARTIALS_CHECKED_TYPES = {"float16"}
EXACT_PARTIALS_PER_TYPE = {"test_device_partials_are_the_exact_digits",
                           "test_split_chunkings_on_the_device_give_one_launch_bits"}
# - the Dask axis-combination test (tests/test_dask.py) but on one float and one integer type per
#   device, each of its four types once: each (device, float or integer) pair takes its own chunk
#   totals (the CPU device's exact limbs, the OpenCL device's superaccumulator, each device's integer
#   sums), and every type still meets all 16 axis sets.
DASK_AXES_KEPT = {("cpu", "float16"), ("cpu", "uint32"), ("opencl", "float32"), ("opencl", "int32")}


DEVICE_ID = re.compile(r"cpu|opencl:\d+(-gpupaths)?(-nofp64)?(-checked)?|cuda:\d+(-checked)?")


def _wanted():
    env = os.environ.get("GPU_MEAN_TEST_DEVICES")
    # unknown names are left out here (the fixture's parameters are built at import) and refused
    # as a usage error by pytest_configure, which runs before any collection
    return [d.strip() for d in env.split(",") if DEVICE_ID.fullmatch(d.strip())] if env else ALL_DEVICE_IDS


def pytest_configure(config):
    """An unknown name in GPU_MEAN_TEST_DEVICES is one usage error naming the valid ones, before any
    test is collected (otherwise every device test of the suite errors on it).

    The suite never reads or writes the user's kernel cache (~/.cache/gpu_mean): each run, and every
    subprocess it starts (they inherit the variable), uses a fresh private folder, removed at the end.
    (Discovery's probe kernel, built while this module is imported, never goes through the cache.
    PoCL's own cache is left as it is.)"""
    config.gpu_mean_cache = tempfile.mkdtemp(prefix="gpu_mean-test-cache-")
    os.environ["GPU_MEAN_CACHE_DIR"] = config.gpu_mean_cache
    _check_required()
    env = os.environ.get("GPU_MEAN_TEST_DEVICES")
    if env is None:
        return
    bad = [d for d in (x.strip() for x in env.split(",")) if not DEVICE_ID.fullmatch(d)]
    if bad or not _wanted():
        raise pytest.UsageError(
            f"GPU_MEAN_TEST_DEVICES={env!r}: unknown device {', '.join(map(repr, bad)) or '(none given)'}; "
            f"give a comma-separated list from {', '.join(ALL_DEVICE_IDS + CHECKED_DEVICE_IDS)} (another index N as "
            "opencl:N, cuda:N)")


def nvrtc_missing() -> str | None:
    """Why NVRTC or the CUDA headers cannot be used here, or None."""
    from gpu_mean.backends import cuda_compile
    try:
        cuda_compile.nvrtc()
        cuda_compile.include_dir()
    except cuda_compile.NvrtcError as e:
        return str(e)
    return None


def _nvrtc12_absent() -> str | None:
    path = os.environ.get("GPU_MEAN_NVRTC12") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".nvrtc12", "nvidia", "cuda_nvrtc", "lib",
        "libnvrtc.so.12")
    return None if os.path.isfile(path) else f"{path} is absent"


def _opencl_absent() -> str | None:
    from gpu_mean.backends import opencl
    found, why = opencl.discover()[:2]
    return None if found else f"no OpenCL device ({why})"


# what a set-up can promise the suite (GPU_MEAN_REQUIRE, comma-separated): tools/test.sh names what
# tools/setup.sh installed, so that a set-up that failed to install it stops the run instead of
# leaving the tests that need it skipped
REQUIREMENTS = {"nvrtc": nvrtc_missing, "nvrtc12": _nvrtc12_absent, "opencl": _opencl_absent}


def _check_required() -> None:
    names = [n.strip() for n in os.environ.get("GPU_MEAN_REQUIRE", "").split(",") if n.strip()]
    unknown = [n for n in names if n not in REQUIREMENTS]
    if unknown:
        raise pytest.UsageError(f"GPU_MEAN_REQUIRE: unknown {', '.join(unknown)}; give names from "
                                f"{', '.join(REQUIREMENTS)}")
    missing = [(n, why) for n in names if (why := REQUIREMENTS[n]()) is not None]
    if missing:
        raise pytest.UsageError("GPU_MEAN_REQUIRE names what the set-up should have installed, but: "
                                + "; ".join(f"{n}: {why}" for n, why in missing))


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "gpu_mean_cache", ""), ignore_errors=True)


def _checked_wanted():
    """The checked devices the tests that ask for them add (none when GPU_MEAN_TEST_DEVICES names the set)."""
    return [] if os.environ.get("GPU_MEAN_TEST_DEVICES") else CHECKED_DEVICE_IDS


def _device_params(specs):
    params = []
    for spec in specs:
        kind = spec.split(":")[0]
        found, reason = backends._discover(kind)
        index = int(spec.split(":")[1].split("-")[0]) if ":" in spec else 0
        if found and index < len(found) and found[index].open() is not None:   # e.g. a GPU another process holds
            found, reason = [], f"it cannot be used: {found[index].unavailable}"
        marks = [] if found else [pytest.mark.skip(reason=f"{spec} absent: {reason}")]
        params.append(pytest.param(spec, id=spec, marks=marks))
    return params


_devices: dict = {}


def _get(spec: str):
    dev = _devices.get(spec)
    if dev is None or dev.get_device_removed_reason() is not None:
        dev = _devices[spec] = make_device(spec)
    return dev


@pytest.fixture(params=_device_params(_wanted()))
def device(request):
    """A fresh-state device (one per spec per session; a removed device is replaced)."""
    return _get(request.param)


@pytest.fixture(params=_device_params(_wanted() + _checked_wanted()))
def device_or_checked(request):
    """Every device of ``device``, and the bounds-checked builds (the fuzzer, the conformance pass)."""
    return _get(request.param)


_CHECKED = [d for d in _wanted() + _checked_wanted() if d.endswith("-checked")]


@pytest.fixture(params=_device_params(_CHECKED) or [pytest.param(
    None, id="no-checked-device", marks=pytest.mark.skip(reason="GPU_MEAN_TEST_DEVICES names no checked device"))])
def checked_device(request):
    """The bounds-checked devices only (the planted out-of-bounds kernels)."""
    return _get(request.param)


def make_device(spec: str):
    if spec.startswith("opencl:") and spec.endswith(("-nofp64", "-gpupaths", "-checked")):
        from gpu_mean.backends import opencl
        index = int(spec.split(":")[1].split("-")[0])
        return gm.Device(opencl.make_backend(index, allow_fp64="-nofp64" not in spec,
                                             gpu_paths="-gpupaths" in spec, checked=spec.endswith("-checked")))
    return gm.create_device(spec)


@pytest.fixture
def cpu():
    return gm.create_device("cpu")


# Parallel runs (pytest-xdist, ``-n 2 --dist loadgroup`` in tools/test.sh): the tests of one device run
# in one worker, so each worker compiles only its devices' kernel variants (PoCL compiles cold in CI,
# and two workers building the same variants would each pay for it); the near-limit arrays run in one
# worker, one after another, so that two of them never hold host memory at once; the compile checks
# of one NVRTC run in one worker, which compiles every variant once (test_cuda_nvrtc.compiled).
#
# The group is read from the test's node id by the scheduler below, not from xdist_group marks:
# xdist 3.8's loadgroup passes a mark to the controller by appending "@group" to the worker's node id,
# which pytest 9.2 no longer takes (its node ids are structured; pytest-xdist issue 1386), so that with
# pytest 9.2 every test was dealt out alone and each worker compiled every device's kernels.
_PARAM_DEVICE = re.compile(rf"(?:^|-)({DEVICE_ID.pattern})(?=-|$)")
_NVRTC_IDS = ("nvrtc-env", "nvrtc12.0")     # test_cuda_nvrtc.INSTALLS


def xdist_group_of(nodeid: str) -> str | None:
    """The group a test runs in under ``--dist loadgroup`` (None: dealt out alone)."""
    path, _, name = nodeid.partition("::")
    if path.endswith("test_large_arrays.py"):
        return "large-arrays"
    params = name[name.index("[") + 1:-1] if name.endswith("]") and "[" in name else ""
    if path.endswith("test_cuda_nvrtc.py"):
        return next((i for i in _NVRTC_IDS if params == i or params.startswith(i + "-")), None)
    m = _PARAM_DEVICE.search(params)
    return m.group(1) if m else None


# the parameters that name the device a test runs on (the fixtures above; tests that build their own
# devices call theirs "spec"): a device-shaped value under another name is data, never left out
DEVICE_PARAMS = ("device", "device_or_checked", "checked_device", "spec")


def _dtype_name(dtype) -> str | None:
    import numpy as np
    return None if dtype is None else np.dtype(dtype).name


def pytest_collection_modifyitems(config, items):
    if os.environ.get("GPU_MEAN_TEST_DEVICES"):
        return
    keep, drop = [], []
    for item in items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        dev = next((params[n] for n in DEVICE_PARAMS if isinstance(params.get(n), str)), None)
        mod = item.path.stem
        left_out = dev is not None and (
            ("-nofp64" in dev and mod in FP64_BLIND_MODULES)
            or ("-nofp64" in dev and "-gpupaths" not in dev and mod not in NOFP64_CPU_MODULES)
            or (item.originalname == "test_conformance_quick" and dev not in CONFORMANCE_DEVICES)
            or (mod == "test_large_arrays" and dev in LARGE_ARRAY_DEVICES_SKIP)
            or (item.originalname == "test_every_axis_combination_matches_one_device" and mod == "test_dask"
                and (dev, _dtype_name(params.get("dtype"))) not in DASK_AXES_KEPT))
        left_out = left_out or (
            dev is not None and dev.endswith("-checked") and mod == "test_exact_partials"
            and item.originalname in EXACT_PARTIALS_PER_TYPE
            and _dtype_name(params.get("dt")) not in EXACT_PARTIALS_CHECKED_TYPES)
        left_out = left_out or (
            item.originalname == "test_every_main_pass_load_is_coalesced" and mod == "test_access_model"
            and params.get("dtype") not in ACCESS_MODEL_TYPES and item.get_closest_marker("xfail") is None)
        (drop if left_out else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class DeviceGroups(LoadScopeScheduling):
        """xdist's scope scheduler, the scope being the group above (a test of no group is its own)."""

        def _split_scope(self, nodeid: str) -> str:
            group = xdist_group_of(nodeid.split("@")[0])
            return f"group:{group}" if group else nodeid

    return DeviceGroups(config, log)
