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
    """{backend: None if present else the one-line reason it is absent}."""
    out = {}
    for kind in BACKENDS:
        found, reason = _discover(kind)
        out[kind] = None if found else reason
    return out


def list_devices() -> list[DeviceInfo]:
    """Every device present, best first (CUDA, then OpenCL GPUs, then other OpenCL, then the CPU)."""
    infos = []
    for kind in BACKENDS:
        found, _ = _discover(kind)
        infos.extend(f.info for f in found)
    return infos


def find_backend(kind: str, index: int):
    found, reason = _discover(kind)
    if not found:
        raise UnsupportedError(f"create_device: no {kind} device is present: {reason}")
    if not 0 <= index < len(found):
        raise InvalidArgumentError(f"create_device: {kind}:{index} does not exist; {len(found)} {kind} device(s) "
                                   "are present")
    return found[index]


def parse_device(spec: str | None) -> tuple[str, int]:
    spec = (spec or os.environ.get("GPU_MEAN_DEVICE") or "auto").strip().lower()
    if spec == "auto":
        for kind in BACKENDS:
            if _discover(kind)[0]:
                return kind, 0
    kind, _, idx = spec.partition(":")
    if kind not in BACKENDS:
        raise InvalidArgumentError(f"create_device: unknown device {spec!r}; use auto, cpu, opencl[:N] or cuda[:N]")
    try:
        return kind, int(idx) if idx else 0
    except ValueError as e:
        raise InvalidArgumentError(f"create_device: bad device index in {spec!r}") from e


def create_device(spec: str | None = None, feature_level=None) -> Device:
    """``"cpu" | "opencl" | "opencl:N" | "cuda" | "cuda:N" | "auto"`` (default: $GPU_MEAN_DEVICE or auto)."""
    kind, index = parse_device(spec)
    return Device(find_backend(kind, index), feature_level)
