"""The numeric semantics docs/design.md decides ("Numerics"), written once in numpy: the CPU device's implementation
and the specification every GPU kernel is compared against (tests use an independent exact oracle).

Why these formulas are correctly rounded:
* FLOAT32 mean: fl(a + b) * 0.5 is exact scaling of a correctly rounded sum unless the sum overflows
  (then both operands are >= 2^103 in magnitude and a*0.5 + b*0.5 is exact) or the half is subnormal
  (then |a + b| < 2^-125, where the sum itself is exact and the halving rounds once).
* FLOAT16 via float32: 24 >= 2*11 + 2 bits, so rounding to float32 then to float16 is innocuous
  for + and halving (Figueroa's double-rounding bound).
* Integer mean: 64-bit sum, truncation toward zero (every peer's integer ReduceMean rounding).
"""
from __future__ import annotations

import numpy as np

from ..descriptors.types import DataType

F16, F32, F64 = np.float16, np.float32, np.float64


def trunc_div(s: np.ndarray, n: int) -> np.ndarray:
    """Integer division of a 64-bit sum by n, rounding toward zero (C semantics)."""
    if s.dtype == np.uint64:
        return s // np.uint64(n)
    q = np.abs(s) // np.int64(n)
    return np.where(s < 0, -q, q)


def mean2(a: np.ndarray, b: np.ndarray, dt: DataType) -> np.ndarray:
    if dt == DataType.FLOAT32:
        with np.errstate(over="ignore", invalid="ignore"):
            s = a + b
            r = s * F32(0.5)
            ovf = np.isinf(s) & np.isfinite(a) & np.isfinite(b)
            if np.any(ovf):
                r = np.where(ovf, a * F32(0.5) + b * F32(0.5), r)
        return r.astype(F32, copy=False)
    if dt == DataType.FLOAT16:
        with np.errstate(over="ignore", invalid="ignore"):
            return ((a.astype(F32) + b.astype(F32)) * F32(0.5)).astype(F16)
    if dt == DataType.INT32:
        s = a.astype(np.int64) + b.astype(np.int64)
        return ((s + (s < 0)) >> 1).astype(np.int32)
    if dt == DataType.UINT32:
        return ((a.astype(np.uint64) + b.astype(np.uint64)) >> np.uint64(1)).astype(np.uint32)
    raise TypeError(f"mean of {dt.name}")


def add2(a: np.ndarray, b: np.ndarray, dt: DataType) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if dt == DataType.FLOAT16:
            return (a.astype(F32) + b.astype(F32)).astype(F16)
        return np.add(a, b, dtype=a.dtype)  # integers wrap modulo 2^bits


def identity(x: np.ndarray, dt: DataType, scale_bias: tuple | None) -> np.ndarray:
    """A copy, or x * scale + bias with ``scale_bias = (scale, bias)``."""
    if scale_bias is None:
        return x.copy()
    scale, bias = F32(scale_bias[0]), F32(scale_bias[1])
    with np.errstate(over="ignore", invalid="ignore"):
        if dt == DataType.FLOAT64:
            return x * F64(scale) + F64(bias)
        # two roundings in float32, no fused multiply-add: kernels are built with contraction off
        return (x.astype(F32) * scale + bias).astype(dt.numpy_dtype)


def nary_mean(xs: list, dt: DataType) -> np.ndarray:
    n = len(xs)
    if dt in (DataType.INT32, DataType.UINT32):
        acc_t = np.int64 if dt == DataType.INT32 else np.uint64
        s = xs[0].astype(acc_t)
        for x in xs[1:]:
            s = s + x.astype(acc_t)
        return trunc_div(s, n).astype(dt.numpy_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        s = xs[0].astype(F64)
        for x in xs[1:]:
            s = s + x.astype(F64)
        return (s / F64(n)).astype(dt.numpy_dtype)


def reduce_mean(x: np.ndarray, axes: tuple, dt: DataType) -> np.ndarray:
    """REDUCE AVERAGE (floats) and the exact integer mean, keeping the rank."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    if dt in (DataType.INT32, DataType.UINT32):
        acc_t = np.int64 if dt == DataType.INT32 else np.uint64
        s = np.sum(x, axis=axes, dtype=acc_t, keepdims=True)
        return trunc_div(s, n).astype(dt.numpy_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.sum(x, axis=axes, dtype=F64, keepdims=True)
        return (s / F64(n)).astype(dt.numpy_dtype)


def reduce_sum(x: np.ndarray, axes: tuple, out_dt: DataType) -> np.ndarray:
    """The gm.ext wide sum: FLOAT64, INT64 or UINT64 totals, keeping the rank."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sum(x, axis=axes, dtype=out_dt.numpy_dtype, keepdims=True)


def two_sum(a: np.ndarray, b: np.ndarray):
    """(s, e) with s + e == a + b exactly and s = fl(a + b) (Knuth's TwoSum), for finite a and b;
    no branch, so it vectorizes. Partial sums of split calls add in double-double with it."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def add_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b of INT64 / UINT64 totals, exact: in 64 bits while no element wraps, else as Python
    integers (an object array)."""
    if a.dtype != object and b.dtype != object:
        s = a + b
        if a.dtype == np.uint64:
            wrapped = s < a
        else:
            # both operands' signs differ from the sum's; INT64_MIN itself has no 64-bit magnitude
            # for the truncating division that follows
            wrapped = (((a ^ s) & (b ^ s)) < 0) | (s == np.iinfo(np.int64).min)
        if not bool(np.any(wrapped)):
            return s
    return np.asarray(a).astype(object) + np.asarray(b).astype(object)
