"""The three steps of a Dask reduction for ReduceMean: chunk, combine, aggregate. No Dask import here.

A partial is a sum, never a mean: ``PartialSum(hi, lo, count)`` holds, for every output element, the
total of ``count`` inputs in the wide type of ``gm.ext.ReduceSumDesc``.

* chunk: one ``ReduceSumDesc`` launch on the worker's device per chunk. FLOAT32/FLOAT16 give FLOAT64
  totals accumulated as REDUCE AVERAGE accumulates; INT32/UINT32 give exact INT64/UINT64 totals (a
  chunk is one device tensor, at most 2^32 - 1 elements, so its 64-bit total cannot overflow).
* combine: floats add in double-double (``hi + lo``, Knuth's TwoSum), so combining k partials adds a
  relative error near 2^-104 whatever k, the tree shape or the order; plain float64 adds would add up
  to (k - 1) * 2^-53, harmless for any real chunk count but not independent of it. Integers add
  exactly in 64 bits and move to Python integers (object arrays) for the elements whose sum would
  wrap: a Dask array can sum more than 2^32 values per output, a device tensor cannot.
* aggregate: one division of the total by the count, one rounding to the output type; integers
  truncate toward zero once (C semantics, as gm.reduce_mean).

Why floats stay within 1 ulp: on same-signed data each chunk total carries the device kernel's own
relative error for that chunk's length (fp64 accumulation: far below 2^-25, half an ulp of FLOAT32),
and a sum of same-signed totals keeps the largest relative error among them. hi + lo, the division
and the final rounding then add 2^-52 and half an ulp: within 1 ulp of the exact mean, as on one device.
"""
from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from ..descriptors.ext import ReduceSumDesc
from ..descriptors.tables import WIDE_SUM_TYPE
from ..descriptors.tensor import TensorDesc
from ..errors import InvalidArgumentError
from ..frontends import split
from ..frontends.arrays import Call, data_type_of, get_device
from ..frontends.functional import merge_dims, reduce_desc
from ..runtime.numerics import trunc_div


@dataclass
class PartialSum:
    hi: object            # FLOAT64 / INT64 / UINT64 (or object, past 64 bits) totals, reduced axes kept as size 1
    lo: object | None     # FLOAT64 compensation term of a float total; None means zero (and for integers)
    count: int            # how many inputs each output element's total holds (the same for every element)
    cupy: bool = False    # the chunks were CuPy arrays: the mean goes back to the GPU even after a host detour


# this worker process's launches made (one per chunk signature and device) and chunks launched
stats = {"compiled": 0, "launched": 0, "cpu_fallback": 0}


def cupy_module(x):
    """CuPy when ``x`` is a CuPy array, else None (CuPy is never imported here for numpy chunks)."""
    cp = sys.modules.get("cupy")
    return cp if cp is not None and isinstance(x, cp.ndarray) else None


def _sum_device(device, wide, cp):
    dev = get_device(device)
    if cp is not None:
        if dev.info.backend != "cuda":
            raise InvalidArgumentError(f"gpu_mean.dask: a CuPy chunk needs a CUDA device, but the worker's device "
                                       f"is {dev.name}; pass device='cuda' or numpy chunks")
        return dev
    if wide.numpy_dtype == np.float64 and not dev.info.fp64:
        # FLOAT64 partial sums are what keeps the promise; a device without fp64 cannot write them, so the
        # numpy reference device sums this chunk instead (slower, never less accurate)
        warnings.warn(f"gpu_mean.dask: {dev.name} has no fp64, so float chunks are summed on the CPU device "
                      "to keep the accuracy promise", RuntimeWarning, stacklevel=3)
        stats["cpu_fallback"] += 1
        return get_device("cpu")
    return dev


def run_sum(block, axes, device):
    """The wide total of one chunk over ``axes``, reduced axes kept as size 1, on the chunk's side
    (numpy in, numpy out; CuPy in, CuPy out on the CUDA device).

    The chunk takes the path of ``gm.reduce_mean`` (``frontends/arrays.py: Call``): viewed in place
    with its strides (a numpy chunk on a device that works in host memory is bound where it lies, a
    CuPy chunk on its GPU, ordered against the caller's stream), otherwise copied through the
    device's pooled buffers; the launch is cached per chunk signature and device."""
    dt = data_type_of(block.dtype, "ReduceMean")
    wide = WIDE_SUM_TYPE[dt]
    cp = cupy_module(block)
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(block.shape))
    if block.size == 0 or math.prod(out_shape) == 0:
        return (cp or np).zeros(out_shape, wide.numpy_dtype)   # nothing to sum: no launch, as gm.reduce_mean
    call = Call([block], _sum_device(device, wide, cp), "ReduceMean")
    if call.mode == "split":    # a chunk past one buffer of the device: its pieces' totals, added exactly
        stats["launched"] += 1
        return split.run_sum(call, axes, reduce_desc)
    op = call.ops[0]

    def make():
        stats["compiled"] += 1
        sizes, strides, red = merge_dims(op.shape, op.strides, axes)
        in_desc = TensorDesc(dt, sizes, strides, guaranteed_base_offset_alignment=call.alignment(op))
        out_desc = TensorDesc(wide, tuple(1 if d in red else s for d, s in enumerate(sizes)))
        return ReduceSumDesc(in_desc, out_desc, red), out_shape
    stats["launched"] += 1
    return call.run(("reduce_sum", call.signature, axes), make)


def chunk_sum(block, axis=None, keepdims=True, device=None, computing_meta=False):
    """Dask's ``chunk``: a PartialSum of one block over ``axis`` (a normalized tuple)."""
    if computing_meta:
        return block
    axes = tuple(axis) if axis is not None else tuple(range(block.ndim))
    count = math.prod(block.shape[a] for a in axes)
    return PartialSum(run_sum(block, axes, device), None, count, cupy_module(block) is not None)


def _flatten(parts):
    if isinstance(parts, PartialSum):
        return [parts]
    return [p for item in parts for p in _flatten(item)]


def _two_sum(a, b):
    """s + e == a + b exactly (Knuth), for finite a and b; no branch, so it vectorizes."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _add_int(a, b):
    """a + b exact: 64 bits while no element wraps, Python integers (host object arrays) once one would."""
    if a.dtype != object and b.dtype != object:
        s = a + b
        if a.dtype == np.uint64:
            wrapped = s < a
        else:
            # both operands' signs differ from the sum's; INT64_MIN itself has no 64-bit magnitude for
            # the final truncating division
            wrapped = (((a ^ s) & (b ^ s)) < 0) | (s == np.iinfo(np.int64).min)
        if not bool(wrapped.any()):
            return s
    return _host(a).astype(object) + _host(b).astype(object)


def _host(x):
    return x.get() if cupy_module(x) is not None else x


def add(p: PartialSum, q: PartialSum) -> PartialSum:
    if p.hi.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            hi, err = _two_sum(p.hi, q.hi)
            lo = err
            for extra in (p.lo, q.lo):
                if extra is not None:
                    lo = lo + extra
        return PartialSum(hi, lo, p.count + q.count, p.cupy or q.cupy)
    return PartialSum(_add_int(p.hi, q.hi), None, p.count + q.count, p.cupy or q.cupy)


def combine_sums(parts, axis=None, keepdims=True, computing_meta=False):
    """Dask's ``combine`` (concatenate=False): the partials of a group of blocks along the reduced
    axes, a nested list of same-shaped PartialSums, added into one."""
    if computing_meta:
        return parts
    flat = _flatten(parts)
    total = flat[0]
    for p in flat[1:]:
        total = add(total, p)
    return total


def finish(p: PartialSum, dtype):
    """The mean from a total: one division, one rounding (floats), truncation toward zero (integers).
    A count of 0 (a zero-size reduced dimension) gives NaN for floats and 0 for integers."""
    dtype = np.dtype(dtype)
    hi = p.hi
    cp = sys.modules["cupy"] if p.cupy else None
    xp = cp or np
    if p.count == 0:
        return xp.full(hi.shape, np.nan if dtype.kind == "f" else 0, dtype)
    if dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            total = hi if p.lo is None else xp.where(xp.isfinite(hi), hi + p.lo, hi)   # inf/NaN: lo is noise
            return (total / np.float64(p.count)).astype(dtype)
    if hi.dtype == object:
        q = np.vectorize(lambda s: -(-s // p.count) if s < 0 else s // p.count, otypes=[object])(hi)
        res = q.astype(dtype)
        return cp.asarray(res) if cp is not None else res
    if cp is not None:
        n = hi.dtype.type(p.count)
        return (hi // n if hi.dtype == np.uint64 else cp.where(hi < 0, -(-hi // n), hi // n)).astype(dtype)
    return trunc_div(hi, p.count).astype(dtype)


def aggregate_mean(parts, axis=None, keepdims=False, dtype=None, computing_meta=False):
    """Dask's ``aggregate``: combine the last group, then the mean in the input's type."""
    if computing_meta:
        return parts
    res = finish(combine_sums(parts), dtype)
    if not keepdims:
        res = res.reshape(tuple(s for d, s in enumerate(res.shape) if d not in axis))
    return res
