"""The numeric semantics docs/design.md decides ("Numerics"), written once in numpy: the CPU device's implementation
and the specification every GPU kernel is compared against (tests use an independent exact oracle).

Why these formulas are correctly rounded:
* FLOAT32 mean: fl(a + b) * 0.5 is exact scaling of a correctly rounded sum unless the sum overflows
  (then both operands are >= 2^103 in magnitude and a*0.5 + b*0.5 is exact) or the half is subnormal
  (then |a + b| < 2^-125, where the sum itself is exact and the halving rounds once).
* FLOAT16 via float32: 24 >= 2*11 + 2 bits, so rounding to float32 then to float16 is innocuous
  for + and halving (Figueroa's double-rounding bound).
* Integer mean: 64-bit sum, truncation toward zero (every peer's integer ReduceMean rounding).
* The extension types (``wide.py`` holds their arithmetic): BFLOAT16 through the FLOAT32 formula and
  one rounding (24 >= 2*8 + 2); FLOAT64 with the FLOAT32 formula's argument at 53 bits; INT64/UINT64
  halves added without overflow; reductions and the n-ary mean of FLOAT64 in double-double, of
  INT64/UINT64 in 128 bits.
"""
from __future__ import annotations

import numpy as np

from ..descriptors.types import DataType
from . import exact, wide

F16, F32, F64 = np.float16, np.float32, np.float64
D = DataType


def trunc_div(s: np.ndarray, n: int) -> np.ndarray:
    """Integer division of a 64-bit sum by n, rounding toward zero (C semantics)."""
    if s.dtype == np.uint64:
        return s // np.uint64(n)
    q = np.abs(s) // np.int64(n)
    return np.where(s < 0, -q, q)


def _float_mean2(a: np.ndarray, b: np.ndarray, half) -> np.ndarray:
    """fl(a + b) * 0.5, or a*0.5 + b*0.5 where the sum overflows (the module's argument)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = a + b
        r = s * half
        ovf = np.isinf(s) & np.isfinite(a) & np.isfinite(b)
        if np.any(ovf):
            r = np.where(ovf, a * half + b * half, r)
    return r


def mean2(a: np.ndarray, b: np.ndarray, dt: DataType) -> np.ndarray:
    if dt in (DataType.BFLOAT16, DataType.FLOAT64, DataType.INT64, DataType.UINT64):
        return _blocks(lambda x, y: _mean2(x, y, dt), [a, b], dt.numpy_dtype)
    return _mean2(a, b, dt)


def _mean2(a: np.ndarray, b: np.ndarray, dt: DataType) -> np.ndarray:
    if dt == DataType.FLOAT32:
        return _float_mean2(a, b, F32(0.5)).astype(F32, copy=False)
    if dt == DataType.FLOAT64:
        return _float_mean2(a, b, F64(0.5)).astype(F64, copy=False)
    if dt == DataType.FLOAT16:
        with np.errstate(over="ignore", invalid="ignore"):
            return ((a.astype(F32) + b.astype(F32)) * F32(0.5)).astype(F16)
    if dt == DataType.BFLOAT16:
        # bfloat16's range is float32's, so the float32 sum can overflow: the float32 formula, rounded once
        return wide.f32_to_bf16(_float_mean2(a.astype(F32), b.astype(F32), F32(0.5)))
    if dt == DataType.INT32:
        s = a.astype(np.int64) + b.astype(np.int64)
        return ((s + (s < 0)) >> 1).astype(np.int32)
    if dt == DataType.UINT32:
        return ((a.astype(np.uint64) + b.astype(np.uint64)) >> np.uint64(1)).astype(np.uint32)
    if dt in (DataType.INT64, DataType.UINT64):
        # floor((a + b) / 2) without forming a + b; then toward zero where the sum is odd and negative
        one = a.dtype.type(1)
        f = (a >> one) + (b >> one) + (a & b & one)
        if dt == DataType.INT64:
            f = f + ((f < 0) & ((a ^ b) & one).astype(bool))
        return f
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
    if dt == DataType.FLOAT64:
        return _blocks(lambda *part: exact.nary_f64(list(part)), xs, dt.numpy_dtype)
    if dt in (DataType.INT64, DataType.UINT64):
        return _blocks(lambda *part: wide.trunc_div128(*wide.int_sum0(np.stack(part)), n), xs, dt.numpy_dtype)
    if dt.is_float:
        # larger blocks: the bound test's few numpy calls per block over a gathered fraction
        return _blocks(lambda *part: exact.nary_narrow(list(part), dt.numpy_dtype), xs, dt.numpy_dtype, 4 * BLOCK)
    if dt in (DataType.INT32, DataType.UINT32):
        acc_t = np.int64 if dt == DataType.INT32 else np.uint64
        s = xs[0].astype(acc_t)
        for x in xs[1:]:
            s = s + x.astype(acc_t)
        return trunc_div(s, n).astype(dt.numpy_dtype)
    raise TypeError(f"n-ary mean of {dt.name}")


def reduce_mean(x: np.ndarray, axes: tuple, dt: DataType) -> np.ndarray:
    """REDUCE AVERAGE (floats) and the exact integer mean, keeping the rank."""
    n = 1
    for a in axes:
        n *= x.shape[a]
    if dt in _EXT_WIDE:
        return _mean0(_rows0(x, axes), dt).reshape(_kept(x.shape, axes))
    if dt in (DataType.INT32, DataType.UINT32):
        acc_t = np.int64 if dt == DataType.INT32 else np.uint64
        s = np.sum(x, axis=axes, dtype=acc_t, keepdims=True)
        return trunc_div(s, n).astype(dt.numpy_dtype)
    return exact.reduce_narrow(x, axes, dt.numpy_dtype)


def reduce_sum(x: np.ndarray, axes: tuple, out_dt: DataType, in_dt: DataType | None = None) -> tuple:
    """The gm.ext wide sum, keeping the rank: (total,) in FLOAT64, INT64 or UINT64, or for FLOAT64,
    INT64 and UINT64 inputs the 128-bit total as (high word, low word)."""
    if in_dt in _EXT_WIDE:
        rows, shape = _rows0(x, axes), _kept(x.shape, axes)
        if in_dt == DataType.FLOAT64:
            hi, lo = wide.f64_sum0(rows)
        else:
            hi, lo = wide.words128(*wide.int_sum0(rows))
        return hi.reshape(shape), lo.reshape(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(x, axis=axes, dtype=out_dt.numpy_dtype, keepdims=True)
    if total.dtype.kind == "f" and np.any(total == 0):
        # an exact zero total is -0.0 when every value is -0.0 (IEEE's sum; numpy's starts at +0.0)
        neg0 = np.all((x == 0) & np.signbit(x), axis=axes, keepdims=True)
        total = np.where(neg0, -0.0, total).astype(total.dtype)
    return (total,)


# FLOAT64, INT64 and UINT64: sums of two words (wide.py)
_EXT_WIDE = (DataType.FLOAT64, DataType.INT64, DataType.UINT64)
NARROW_FLOATS = (DataType.FLOAT32, DataType.FLOAT16, DataType.BFLOAT16)    # reduce_mean: exact.reduce_narrow
# Elements per block of the extension types' arithmetic: its dozen temporaries stay in the cache and
# in memory the allocator reuses (whole-tensor temporaries are fresh mappings, each page faulted in).
# Measured on the 2-core CI VM (tools/bench.py ext_cpu): docs/results/2026-11-24-ext-cpu.md.
BLOCK = 1 << 16


def _blocks(fn, xs: list, dtype, block: int = BLOCK) -> np.ndarray:
    """``fn`` applied element-wise to the broadcast inputs ``xs``, a block of BLOCK flat elements at a
    time (inputs that are not one dense run of the result's shape are copied dense once)."""
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    flat = [np.broadcast_to(x, shape).reshape(-1) for x in xs]
    out = np.empty(flat[0].size, dtype)
    for i in range(0, out.size, block):
        out[i:i + block] = fn(*(f[i:i + block] for f in flat))
    return out.reshape(shape)


def _rows0(x: np.ndarray, axes: tuple) -> np.ndarray:
    """``x`` as (reduced elements, outputs): the reduced axes first, in order, then the kept ones."""
    keep = [d for d in range(x.ndim) if d not in axes]
    n = 1
    for a in axes:
        n *= x.shape[a]
    return np.transpose(x, list(axes) + keep).reshape(n, -1)


def _kept(shape, axes) -> tuple:
    return tuple(1 if d in axes else s for d, s in enumerate(shape))


def _mean0(rows: np.ndarray, dt: DataType) -> np.ndarray:
    """The mean over axis 0 of FLOAT64 (double-double), INT64 or UINT64 (128-bit) values, in blocks
    of outputs."""
    n, m = rows.shape
    out = np.empty(m, dt.numpy_dtype)
    step = max(1, 4 * BLOCK // n)     # the pairwise levels are many small calls: larger blocks
    for j in range(0, m, step):
        part = rows[:, j:j + step]
        if dt == DataType.FLOAT64:
            out[j:j + step] = exact.mean0_f64(part)
        else:
            out[j:j + step] = wide.trunc_div128(*wide.int_sum0(part), n)
    return out


def add_exact(a, b, host=np.asarray) -> np.ndarray:
    """a + b of INT64 / UINT64 totals, exact: in 64 bits while no element wraps, else as Python
    integers (an object array; ``host`` brings a device array to numpy first)."""
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
    return host(a).astype(object) + host(b).astype(object)
