"""What a device must do with a data type, in the tests' own table (not the code's,
gpu_mean/kernels/support.py, which create_operator reads): compute it (the tests then check the
exact oracle) or refuse it at create_operator with an UnsupportedTypeError saying why. Every
backend's kernels compute every mean operation over every type of DirectML's four and the four
extension types (issue 21, built); the one refusal is FLOAT64 on a device without fp64. When a
backend drops a type, these tests fail until this table says so too."""
from __future__ import annotations

import pytest

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.descriptors.types import KernelOp

EXT_TYPES = [D.BFLOAT16, D.FLOAT64, D.INT64, D.UINT64]
MEAN, NARY, REDUCE, SUM = KernelOp.MEAN, KernelOp.NARY_MEAN, KernelOp.REDUCE_MEAN, KernelOp.REDUCE_SUM
_EVERY = frozenset({D.FLOAT32, D.FLOAT16, D.INT32, D.UINT32, *EXT_TYPES})
# (backend, operation) -> the types its kernels must compute; operations not listed (ADD, IDENTITY)
# compute every type their descriptors' tables allow
MUST_COMPUTE = {(backend, op): _EVERY for backend in ("cpu", "opencl", "cuda") for op in (MEAN, NARY, REDUCE, SUM)}
API_NAMES = {"cpu": "CPU", "opencl": "OpenCL", "cuda": "CUDA"}


def computes(backend: str, op, dt) -> bool:
    types = MUST_COMPUTE.get((backend, op))
    return types is None or dt in types


def refusal(device, op, dt, also=()) -> str | None:
    """None when ``device`` must compute ``op`` over ``dt`` (with tensors of the types ``also`` beside
    it, a wide sum's FLOAT64 output); else a pattern its refusal must match."""
    if D.FLOAT64 in (dt, *also) and not device.info.fp64:
        return "cl_khr_fp64" if device.info.backend == "opencl" else "fp64"
    if not computes(device.info.backend, op, dt):
        return (f"{dt.name}, which {device.info.id} .* does not support: the .* kernel for {dt.name} is not built "
                f"yet on the {API_NAMES[device.info.backend]} backend")
    return None


def run_or_refused(device, op, dt, fn, also=()):
    """``fn()``'s result where the device computes ``op`` over ``dt``; else None, after checking that
    ``fn()`` raises the refusal (an UnsupportedTypeError, which is a TypeError, naming the device)."""
    pattern = refusal(device, op, dt, also)
    if pattern is None:
        return fn()
    with pytest.raises(gm.UnsupportedTypeError, match=pattern) as e:
        fn()
    assert isinstance(e.value, TypeError) and e.value.hresult == 0x887A0004
    return None
