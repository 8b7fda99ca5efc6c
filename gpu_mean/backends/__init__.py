"""Device discovery. GPU libraries are imported lazily, only when their backend is asked for."""
from __future__ import annotations

import os

from ..errors import InvalidArgumentError, UnsupportedError
from ..runtime.device import Device, DeviceInfo

BACKENDS = ("cuda", "opencl", "cpu")
_cache: dict = {}


def _discover(kind: str):
    """(list of backend instances, reason when none) for one backend kind; cached per process."""
    if kind in _cache:
        return _cache[kind]
    if kind == "cpu":
        from .cpu import CpuBackend
        res = ([CpuBackend()], None)
    elif kind == "opencl":
        from . import opencl
        res = opencl.discover()
    elif kind == "cuda":
        from . import cuda
        res = cuda.discover()
    else:
        raise InvalidArgumentError(f"unknown backend {kind!r}; choose one of {', '.join(BACKENDS)}")
    _cache[kind] = res
    return res


def backend_status() -> dict:
    """{backend: None if present else the one-line reason it is absent}; a backend whose every device
    is known to be unusable is absent too, with each device's reason."""
    out = {}
    for kind in BACKENDS:
        found, reason = _discover(kind)
        if found and all(f.unavailable for f in found):
            reason = "; ".join(f"{f.info.id} ({f.info.name}) is unavailable: {f.unavailable}" for f in found)
        out[kind] = None if found and reason is None else reason
    return out


def list_devices(probe: bool = False) -> list[DeviceInfo]:
    """Every device present, best first (CUDA, then OpenCL GPUs, then other OpenCL, then the CPU). A
    device that cannot be used is listed with ``info.unavailable`` saying why; ``probe=True`` first
    readies each device (a CUDA GPU's context and stream), so that this covers every reason."""
    infos = []
    for kind in BACKENDS:
        found, _ = _discover(kind)
        if probe:
            for f in found:
                f.open()
        infos.extend(f.info for f in found)
    return infos


def find_backend(kind: str, index: int):
    found, reason = _discover(kind)
    if not found:
        raise UnsupportedError(f"create_device: no {kind} device is present: {reason}")
    if not 0 <= index < len(found):
        raise InvalidArgumentError(f"create_device: {kind}:{index} does not exist; {len(found)} {kind} device(s) "
                                   "are present")
    be = found[index]
    if be.open() is not None:
        raise UnsupportedError(f"create_device: {be.info.id} ({be.info.name}) cannot be used: {be.unavailable}")
    return be


CHECKED = "-checked"     # a device string's suffix: the bounds-checked kernel build (kernels/checked.py)
# an OpenCL device string's suffixes, in this order: the GPU-shaped kernels with the launch geometry CUDA
# computes for a 132-SM GPU (on whatever device is there: how a machine without a GPU runs what a GPU
# would), and the kernels of a device without fp64
OPENCL_VARIANTS = ("-gpupaths", "-nofp64")


def _spec(spec: str | None) -> tuple[str, bool]:
    """The device string (default: $GPU_MEAN_DEVICE, else auto) without the checked suffix, and whether it had one."""
    spec = (spec or os.environ.get("GPU_MEAN_DEVICE") or "auto").strip().lower()
    return (spec[:-len(CHECKED)], True) if spec.endswith(CHECKED) else (spec, False)


def _variants(spec: str) -> tuple[str, frozenset]:
    """``spec`` (without -checked) without its OpenCL variant suffixes, and those suffixes."""
    found = set()
    for suffix in reversed(OPENCL_VARIANTS):
        if spec.endswith(suffix):
            found.add(suffix[1:])
            spec = spec[:-len(suffix)]
    return spec, frozenset(found)


def parse_device(spec: str | None) -> tuple[str, int]:
    spec, _ = _spec(spec)
    spec, variants = _variants(spec)
    if spec == "auto" and not variants:   # the first device that can be used: a GPU that cannot is passed over
        for kind in BACKENDS:
            for i, be in enumerate(_discover(kind)[0]):
                if be.open() is None:
                    return kind, i
    kind, _, idx = spec.partition(":")
    if kind not in BACKENDS:
        raise InvalidArgumentError(f"create_device: unknown device {spec!r}; use auto, cpu, opencl[:N] or cuda[:N], "
                                   f"with {CHECKED} for the bounds-checked kernels; opencl[:N] also takes "
                                   f"{' and '.join(OPENCL_VARIANTS)}")
    if variants and kind != "opencl":
        raise InvalidArgumentError(f"create_device: {' and '.join('-' + v for v in sorted(variants))} name OpenCL "
                                   f"kernel variants, not {kind}; use opencl[:N]-gpupaths or opencl[:N]-nofp64")
    try:
        return kind, int(idx) if idx else 0
    except ValueError as e:
        raise InvalidArgumentError(f"create_device: bad device index in {spec!r}") from e


_variant_backends: dict = {}


def _opencl_variant(index: int, variants: frozenset):
    """The OpenCL device ``index`` built as ``variants`` say (one backend per variant per process)."""
    key = (index, variants)
    be = _variant_backends.get(key)
    if be is None:
        find_backend("opencl", index)       # present, with the errors of a plain opencl:N
        from . import opencl
        be = _variant_backends[key] = opencl.make_backend(index, allow_fp64="nofp64" not in variants,
                                                          gpu_paths="gpupaths" in variants)
    return be


_checked: dict = {}


def create_device(spec: str | None = None, feature_level=None, *, checked: bool = False,
                  max_alloc_bytes: int | None = None) -> Device:
    """``"cpu" | "opencl" | "opencl:N" | "cuda" | "cuda:N" | "auto"`` (default: $GPU_MEAN_DEVICE or auto).
    ``checked=True``, or the suffix ``-checked`` (``"opencl:0-checked"``), gives the device with every
    kernel bounds-checked (gpu_mean/kernels/checked.py): an out-of-bounds access raises
    KernelBoundsError instead of touching memory. It is slow; use it to debug or to test kernels.
    An OpenCL device also takes ``-gpupaths`` (the GPU-shaped kernels and the launch geometry CUDA
    computes for a 132-SM GPU, whatever the device: a machine without a GPU runs what one would) and
    ``-nofp64`` (the kernels of a device without fp64), in that order, before ``-checked``
    (``"opencl:0-gpupaths-nofp64-checked"``).
    ``max_alloc_bytes`` lowers the largest single buffer the Device allocates below the hardware's
    own limit (``Device.max_alloc_bytes``); gm.mean and gm.reduce_mean split arrays past it."""
    base, suffix_checked = _spec(spec)
    checked = suffix_checked or checked
    kind, index = parse_device(spec)
    variants = _variants(base)[1]
    be = _opencl_variant(index, variants) if variants else find_backend(kind, index)
    if checked:
        if not hasattr(be, "checked_twin"):
            raise UnsupportedError(f"create_device: {be.info.id} runs no kernels (numpy computes its results), so it "
                                   "has no bounds-checked build; use opencl[:N]-checked or cuda[:N]-checked")
        twin = _checked.get(be)
        if twin is None:
            twin = _checked[be] = be.checked_twin()
        be = twin
    return Device(be, feature_level, max_alloc_bytes)
