"""What a device must do with a data type, read from the one table of the types each backend's
kernels compute (gpu_mean/backends/support.py): compute it (the tests then check the exact oracle)
or refuse it at create_operator with an UnsupportedTypeError saying why. When a backend's kernels
for the extension types land, its row in that table changes and these tests compute there."""
from __future__ import annotations

import pytest

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.backends import support
from gpu_mean.descriptors.tables import EXTENSION_TYPES
from gpu_mean.descriptors.types import KernelOp

EXT_TYPES = sorted(EXTENSION_TYPES, key=lambda d: d.name)
MEAN, NARY, REDUCE, SUM = KernelOp.MEAN, KernelOp.NARY_MEAN, KernelOp.REDUCE_MEAN, KernelOp.REDUCE_SUM


def refusal(device, op, dt, also=()) -> str | None:
    """None when ``device`` must compute ``op`` over ``dt`` (with tensors of the types ``also`` beside
    it, a wide sum's FLOAT64 output); else a pattern its refusal must match."""
    if D.FLOAT64 in (dt, *also) and not device.info.fp64:
        return "cl_khr_fp64" if device.info.backend == "opencl" else "fp64"
    if not support.computes(device.info.backend, op, dt):
        return (f"{dt.name}, which {device.info.id} .* does not support: the .* kernel for {dt.name} is not built "
                f"yet on the {support.API_NAMES[device.info.backend]} backend")
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
