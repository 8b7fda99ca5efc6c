"""The three steps of a Dask reduction for ReduceMean: chunk, combine, aggregate. No Dask import here.

A partial is a sum, never a mean: ``PartialSum(hi, lo, count)`` holds, for every output element, the
total of ``count`` inputs in the wide type of ``gm.ext.ReduceSumDesc``. FLOAT32, FLOAT16 and BFLOAT16
chunks on an OpenCL or CUDA device with fp64 give exact double-doubles (``PartialSum.exact_dd``:
``Device.dd_partials``, one pass of opencl_kernels/reduce_cpu_ddp.h or, on GPUs, reduce_gpu_ddp.h,
which reads a CuPy chunk where it lies; the outputs a pair cannot hold as digits,
``PartialSum.sparse``; docs/design.md, "Dask: exact double-double partials"), 16 bytes an output on
the host. Other float numpy chunks give exact totals as digits (``PartialSum.digits``: runtime/exact.py's
superaccumulator digits and flags;
on the CPU device from numpy, on OpenCL and CUDA devices from the kernels' superaccumulator,
``Device.exact_partials``: FLOAT32/FLOAT16/BFLOAT16 with or without fp64, FLOAT64 with fp64; a
device without fp64 has FLOAT64 chunks summed by the CPU device, with a warning), added exactly and
rounded once: the correctly rounded mean at any chunking and ``split_every`` (issue 22). The rest
of this docstring is about the wide partials (integers; FLOAT64 CuPy chunks, and CuPy chunks whose
reduced axes the pairs' kernel does not take).

* chunk: one ``ReduceSumDesc`` launch on the worker's device per chunk. FLOAT32/FLOAT16/BFLOAT16 give
  FLOAT64 totals accumulated as REDUCE AVERAGE accumulates; INT32/UINT32 give exact INT64/UINT64 totals
  (a chunk is one device tensor, at most 2^32 - 1 elements, so its 64-bit total cannot overflow);
  FLOAT64 gives a double-double total (hi, lo) and INT64/UINT64 an exact 128-bit one (high and low
  64-bit words), the two output tensors of ``ReduceSumDesc`` for those types.
* combine: floats add in double-double (``hi + lo``, Knuth's TwoSum), so combining k partials adds a
  relative error near 2^-104 whatever k, the tree shape or the order; plain float64 adds would add up
  to (k - 1) * 2^-53, harmless for any real chunk count but not independent of it. Integers add
  exactly in 64 bits and move to Python integers (object arrays) for the elements whose sum would
  wrap: a Dask array can sum more than 2^32 values per output, a device tensor cannot. 128-bit
  totals add as two words with a carry.
* aggregate: one division of the total by the count, one rounding to the output type; integers
  truncate toward zero once (C semantics, as gm.reduce_mean). FLOAT64 divides its double-double
  as the device does (``runtime.wide.dd_div``), BFLOAT16 rounds once from float64.

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
from functools import partial

import numpy as np

from ..descriptors.ext import ReduceSumDesc
from ..descriptors.tables import WIDE_SUM_LOW_TYPE, WIDE_SUM_TYPE
from ..descriptors.tensor import TensorDesc, packed_strides
from ..descriptors.types import DataType, is_bfloat16
from ..errors import InvalidArgumentError
from ..frontends import split
from ..frontends.arrays import Call, data_type_of, get_device
from ..frontends.functional import merge_dims, reduce_desc
from ..runtime import exact, numerics, wide
from ..runtime.numerics import trunc_div
from ..runtime.objects import Buffer


@dataclass
class PartialSum:
    hi: object            # FLOAT64 / INT64 / UINT64 (or object, past 64 bits) totals, reduced axes kept as size 1
    lo: object | None     # FLOAT64 compensation term of a float total, the UINT64 low word of a 128-bit
    #                       integer total (hi then counts units of 2^64); None means zero / a one-word total
    count: int            # how many inputs each output element's total holds (the same for every element)
    cupy: bool = False    # the chunks were CuPy arrays: the mean goes back to the GPU even after a host detour
    digits: object = None  # the exact total of float values summed on the CPU device: superaccumulator
    #                        digits (runtime/exact.py), hi and lo then None
    flags: object = None   # with digits: NaN, +inf, -inf present and every value -0.0 (exact.nonfinite_flags)
    of: object = None      # with digits or exact_dd: the values' numpy dtype (the digits' unit)
    exact_dd: bool = False  # hi + lo is each output's exact total (a FLOAT64 double-double), but for
    #                        the outputs in sparse
    sparse: tuple | None = None  # with exact_dd: (sorted flat indices, their digits (K, m), flags (4, m)):
    #                              the outputs a double-double could not hold exactly


# this worker process's launches made (one per chunk signature and device) and chunks launched
stats = {"compiled": 0, "launched": 0, "cpu_fallback": 0, "dd_chunks": 0, "dd_digits": 0, "folded": 0}

# Outputs from which the combine and aggregate add pairs on the worker's device (``_fold_dd``), where
# it has the kernel; fewer go through numpy (a launch costs about what numpy's passes over them cost)
FOLD_MIN_OUTPUTS = 1 << 12


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
    # (numpy float chunks never come here: chunk_sum gives their exact totals, on a device without
    # fp64 too)
    return dev


def run_sum(block, axes, device):
    """The wide total of one chunk over ``axes``, reduced axes kept as size 1, on the chunk's side
    (numpy in, numpy out; CuPy in, CuPy out on the CUDA device); for FLOAT64, INT64 and UINT64 chunks
    the 128-bit total as a tuple (high word, low word).

    The chunk takes the path of ``gm.reduce_mean`` (``frontends/arrays.py: Call``): viewed in place
    with its strides (a numpy chunk on a device that works in host memory is bound where it lies, a
    CuPy chunk on its GPU, ordered against the caller's stream), otherwise copied through the
    device's pooled buffers; the launch is cached per chunk signature and device. A two-word total
    has two output tensors, which that path (one result per call) does not bind: it launches
    directly (``_run_two_words``)."""
    dt = data_type_of(block.dtype, "ReduceMean")
    wide = WIDE_SUM_TYPE[dt]
    cp = cupy_module(block)
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(block.shape))
    low = WIDE_SUM_LOW_TYPE.get(dt)
    if block.size == 0 or math.prod(out_shape) == 0:
        zeros = (cp or np).zeros(out_shape, wide.numpy_dtype)   # nothing to sum: no launch, as gm.reduce_mean
        return zeros if low is None else (zeros, (cp or np).zeros(out_shape, low.numpy_dtype))
    if low is not None:
        dev = _sum_device(device, wide, cp)
        if cp is None and dt in split.WORD_TYPES and _past_one_buffer(block, dev):
            # an INT64 / UINT64 chunk past one buffer of the device: its pieces' two-word totals,
            # added with carries (frontends/split.py: word_totals)
            call = Call([block], dev, "ReduceMean")
            if call.mode == "split":
                stats["launched"] += 1
                return split.word_totals(call, axes).words()
        return _run_two_words(block, axes, dev, dt, out_shape, cp)
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


def _past_one_buffer(block, dev) -> bool:
    """Whether a numpy chunk is past one buffer of ``dev`` or a DirectML tensor (split.too_big's limits)."""
    limit = dev.max_alloc_bytes
    return block.size > split.MAX_ELEMENTS or (limit is not None and block.nbytes > limit)


def _run_two_words(block, axes, dev, dt, out_shape, cp) -> tuple:
    """A chunk's 128-bit total on ``dev``: the block packed (a host chunk copied into device buffers, a
    CuPy chunk on its GPU), one ReduceSumDesc with two outputs (split.two_word_op), the words read back."""
    if cp is None:
        stats["launched"] += 1
        return split.two_words(dev, block, axes, dt, stats)
    sizes, _, red = merge_dims(block.shape, packed_strides(block.shape), axes)
    cop, in_desc, out_descs, compiled = split.two_word_op(dev, sizes, red, dt)
    stats["compiled"] += compiled
    stats["launched"] += 1
    with cp.cuda.Device(dev.info.index):
        arr = cp.ascontiguousarray(block)
        outs = [cp.empty(math.prod(out_shape), t.numpy_dtype) for t in out_descs]
    inp = Buffer(dev, arr.data, max(in_desc.total_size_in_bytes, arr.nbytes), arr.nbytes)
    dev.backend.arrays.before([arr])
    cop.execute(inputs=[inp], outputs=[Buffer(dev, o.data, o.nbytes) for o in outs])
    return tuple(o.reshape(out_shape) for o in outs)


def chunk_sum(block, axis=None, keepdims=True, device=None, computing_meta=False):
    """Dask's ``chunk``: a PartialSum of one block over ``axis`` (a normalized tuple)."""
    if computing_meta:
        return block
    axes = tuple(axis) if axis is not None else tuple(range(block.ndim))
    count = math.prod(block.shape[a] for a in axes)
    if _exact_chunk(block, device):
        stats["launched"] += 1
        dev = get_device(device)
        dt = data_type_of(block.dtype, "ReduceMean")
        if dev.info.backend != "cpu" and dt == DataType.FLOAT64 and not dev.info.fp64:
            # FLOAT64 on a device without fp64, which holds no FLOAT64 tensor: the CPU device's exact
            # total (the same digits the device would give)
            warnings.warn(f"gpu_mean.dask: {dev.name} has no fp64, so {dt.name} chunks are summed on the CPU "
                          "device", RuntimeWarning, stacklevel=2)
            stats["cpu_fallback"] += 1
            dev = get_device("cpu")
        dd = dev.dd_partials(block, axes, dt)      # None on the CPU device, and where no kernel takes the layout
        if dd is not None:
            return _dd_partial(block, axes, count, *dd)
        if dev.info.backend == "cpu":
            digits, flags = exact.limbs(block, axes, block.dtype), exact.nonfinite_flags(block, axes)
        else:   # the device's superaccumulator, chunk by chunk of what one buffer takes
            totals = split.exact_totals(Call([block], dev, "ReduceMean"), axes)
            digits, flags = totals.digits, totals.flags
        return PartialSum(None, None, count, False, digits, flags, block.dtype)
    if cupy_module(block) is not None and block.size:
        p = _cupy_dd(block, axes, count, device)
        if p is not None:
            return p
    total = run_sum(block, axes, device)
    hi, lo = total if isinstance(total, tuple) else (total, None)
    return PartialSum(hi, lo, count, cupy_module(block) is not None)


def _cupy_dd(block, axes, count: int, device) -> PartialSum | None:
    """A CuPy chunk's exact double-double totals on its GPU (``Device.dd_partials``: the GPU shape's
    kernel reads the chunk where it lies), as a PartialSum on the host marked ``cupy``; None where
    the device has no such kernel, type (integers, FLOAT64) or layout (the chunk then takes the wide
    partials)."""
    dev = _sum_device(device, None, cupy_module(block))
    dd = dev.dd_partials(block, axes, data_type_of(block.dtype, "ReduceMean"))
    if dd is None:
        return None
    stats["launched"] += 1
    p = _dd_partial(block, axes, count, *dd)
    p.cupy = True
    return p


def _dd_partial(block, axes, count: int, h, c, inexact) -> PartialSum:
    """A chunk's exact double-double totals (``Device.dd_partials``) as a PartialSum; the outputs it
    flags inexact (an inf or NaN, values over too many binades) get their digits and flags from their
    own values here (``sparse``; a CuPy chunk's values copied to the host for them)."""
    stats["dd_chunks"] += 1
    idx = np.flatnonzero(inexact)
    sparse = None
    if idx.size:
        stats["dd_digits"] += int(idx.size)
        block = _host(block)
        vals = exact.columns(block, axes, idx)                  # (values, m): those outputs alone
        sparse = (idx, exact.limbs(vals, (0,), block.dtype).reshape(-1, idx.size),
                  exact.nonfinite_flags(vals, (0,)).reshape(4, idx.size))
        h, c = h.copy(), c.copy()
        h.flat[idx], c.flat[idx] = 0.0, 0.0
    return PartialSum(h, c, count, False, None, None, block.dtype, True, sparse)


def _dd_digits(p: PartialSum, idx: np.ndarray) -> tuple:
    """(digits (K, m), flags (4, m)) of outputs ``idx`` (flat, sorted) of an exact_dd partial: its pairs'
    digits (exact: both halves are multiples of the unit), -0.0 for a -0.0 total, the sparse ones' own."""
    h, c = p.hi.reshape(-1)[idx], p.lo.reshape(-1)[idx]
    d = exact.add_limbs(exact.f64_limbs(h, p.of), exact.f64_limbs(c, p.of))
    z = np.zeros(idx.size, bool)
    flags = np.stack([z, z, z, (h == 0) & np.signbit(h)])
    if p.sparse is not None:
        sidx, sd, sf = p.sparse
        pos = np.minimum(np.searchsorted(sidx, idx), sidx.size - 1)
        hit = sidx[pos] == idx
        d[:, hit], flags[:, hit] = sd[:, pos[hit]], sf[:, pos[hit]]
    return d, flags


def _sparse_sum(parts: list, h, c, inexact):
    """The ``sparse`` of the sum (h, c) of exact_dd ``parts``: the outputs its pair additions flag
    ``inexact``, or that any part holds as digits, added in digits (integers: exact) from every part;
    their pairs in h and c set to 0. None where there are none."""
    idx = np.flatnonzero(inexact)
    for x in parts:
        if x.sparse is not None:
            idx = np.union1d(idx, x.sparse[0])
    if not idx.size:
        return None
    d, flags = _dd_digits(parts[0], idx)
    for x in parts[1:]:
        dx, fx = _dd_digits(x, idx)
        d, flags = exact.add_limbs(d, dx), exact.merge_flags(flags, fx)
    h.flat[idx], c.flat[idx] = 0.0, 0.0
    return idx, d, flags


def _add_dd(p: PartialSum, q: PartialSum) -> PartialSum:
    """Two exact_dd partials added exactly: pairs by error-free sums (``wide.dd_add_exact``); where one
    could err, or either side is sparse, the digits of both (integers) instead."""
    h, c, inexact = wide.dd_add_exact(p.hi, p.lo, q.hi, q.lo)
    sparse = _sparse_sum([p, q], h, c, inexact)
    return PartialSum(h, c, p.count + q.count, p.cupy or q.cupy, None, None, p.of, True, sparse)


def _dd_as_digits(p: PartialSum) -> PartialSum:
    """An exact_dd partial as dense digits (to add to a CPU device's partial)."""
    d, flags = _dd_digits(p, np.arange(p.hi.size))
    shape = p.hi.shape
    return PartialSum(None, None, p.count, p.cupy, d.reshape((d.shape[0],) + shape), flags.reshape((4,) + shape),
                      p.of)


def _exact_chunk(block, device) -> bool:
    """Whether a numpy chunk's total is exact: float values summed by the CPU device, and by an
    OpenCL or CUDA device's pairs or superaccumulator (``Device.dd_partials``, ``exact_partials``:
    FLOAT32, FLOAT16 and BFLOAT16 with or without fp64; FLOAT64 with fp64). CuPy chunks take
    ``_cupy_dd``, else the wide partials."""
    if cupy_module(block) is not None or block.size == 0:
        return False
    dt = data_type_of(block.dtype, "ReduceMean")
    return dt.is_float and (get_device(device).info.backend == "cpu" or dt in split.DEVICE_EXACT)


def _as_words(p: PartialSum) -> PartialSum:
    """An exact partial as a double-double total, to add to the FLOAT64 partials of another device
    (a cluster whose workers resolved different devices: the FLOAT64 partials' accuracy then)."""
    if p.exact_dd:
        p = _dd_as_digits(p)
    if p.digits is None:
        return p
    hi, lo = exact.limbs_to_dd(p.digits, p.flags, p.of)
    if p.cupy:      # a CuPy chunk's exact partial beside another's FLOAT64 partials (on its GPU)
        cp = sys.modules["cupy"]
        hi, lo = cp.asarray(hi), cp.asarray(lo)
    return PartialSum(hi, lo, p.count, p.cupy)


def _flatten(parts):
    if isinstance(parts, PartialSum):
        return [parts]
    return [p for item in parts for p in _flatten(item)]


def _host(x):
    return x.get() if cupy_module(x) is not None else x


def _add_words(p: PartialSum, q: PartialSum):
    """Two 128-bit integer totals (hi * 2^64 + lo) added with a carry; hi cannot wrap (2^63 * 2^64
    would take more values than any array holds)."""
    lo = p.lo + q.lo
    carry = (lo < p.lo).astype(p.hi.dtype)
    return p.hi + q.hi + carry, lo


def add(p: PartialSum, q: PartialSum) -> PartialSum:
    if p.exact_dd and q.exact_dd:
        return _add_dd(p, q)
    if (p.exact_dd or p.digits is not None) and (q.exact_dd or q.digits is not None):
        p, q = (_dd_as_digits(x) if x.exact_dd else x for x in (p, q))
    if p.digits is not None and q.digits is not None:
        return PartialSum(None, None, p.count + q.count, p.cupy or q.cupy, exact.add_limbs(p.digits, q.digits),
                          exact.merge_flags(p.flags, q.flags), p.of)
    p, q = _as_words(p), _as_words(q)
    if p.lo is not None and p.hi.dtype.kind in "iu":
        hi, lo = _add_words(p, q)
        return PartialSum(hi, lo, p.count + q.count, p.cupy or q.cupy)
    if p.hi.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            hi, err = wide.two_sum(p.hi, q.hi)
            lo = err
            for extra in (p.lo, q.lo):
                if extra is not None:
                    lo = lo + extra
        return PartialSum(hi, lo, p.count + q.count, p.cupy or q.cupy)
    return PartialSum(numerics.add_exact(p.hi, q.hi, _host), None, p.count + q.count, p.cupy or q.cupy)


def combine_sums(parts, axis=None, keepdims=True, computing_meta=False, device=None):
    """Dask's ``combine`` (concatenate=False): the partials of a group of blocks along the reduced
    axes, a nested list of same-shaped PartialSums, added into one (pairs of many outputs on the
    worker's device where it can: ``_fold_dd``)."""
    if computing_meta:
        return parts
    flat = _flatten(parts)
    folded = _fold_dd(flat, device, None) if len(flat) > 1 else None
    return folded[0] if folded is not None else _add_all(flat)


def _add_all(flat: list) -> PartialSum:
    """Partials added one after another on the host (``add``)."""
    total = flat[0]
    for p in flat[1:]:
        total = add(total, p)
    return total


def _fold_dd(flat: list, device, dtype):
    """Exact double-double partials of at least FOLD_MIN_OUTPUTS outputs added in one pass on the
    worker's device (``Device.dd_fold``: gm_dd_fold, a CPU-shaped OpenCL device with fp64 working in
    host memory), and for a FLOAT32 ``dtype`` their means rounded where the kernel settles them:
    (total, near), near None or (means, settled) for ``finish``. The outputs an addition could err on,
    or that a partial holds as digits, are added in digits here (``sparse``), as ``_add_dd`` does.
    None where the partials are not all pairs, are few, or no such kernel is at hand."""
    if not all(p.exact_dd for p in flat) or flat[0].hi.size < FOLD_MIN_OUTPUTS:
        return None
    count = sum(p.count for p in flat)
    want = dtype is not None and np.dtype(dtype) == np.float32 and count > 0
    res = get_device(device).dd_fold([p.hi for p in flat], [p.lo for p in flat], count if want else 0)
    if res is None:
        return None
    stats["folded"] += 1
    h, c, flag, means = res
    sparse = _sparse_sum(flat, h, c, flag & 1)
    shape = flat[0].hi.shape
    total = PartialSum(h.reshape(shape), c.reshape(shape), count, any(p.cupy for p in flat), None, None, flat[0].of,
                       True, sparse)
    return total, ((means, (flag & 2) != 0) if want else None)


def finish(p: PartialSum, dtype, near=None):
    """The mean from a total: one division, one rounding (floats), truncation toward zero (integers).
    A count of 0 (a zero-size reduced dimension) gives NaN for floats and 0 for integers. ``near``:
    an exact_dd partial's means already settled (``_fold_dd``)."""
    dtype = np.dtype(dtype)
    if p.exact_dd or p.digits is not None:
        if p.exact_dd:
            res = _finish_dd(p, dtype, near)
        else:
            res = (np.full(p.digits.shape[1:], np.nan, dtype) if p.count == 0
                   else exact.mean_from_limbs(p.digits, p.flags, p.count, p.of, dtype))
        # a CuPy graph's mean back on the GPU; BFLOAT16 stays on the host, as the FLOAT64 partials'
        # (a CuPy without ml_dtypes' bfloat16 holds none)
        return sys.modules["cupy"].asarray(res) if p.cupy and not is_bfloat16(dtype) else res
    hi = p.hi
    cp = sys.modules["cupy"] if p.cupy else None
    xp = cp or np
    floating = dtype.kind == "f" or is_bfloat16(dtype)
    if p.count == 0:
        return xp.full(hi.shape, np.nan if floating else 0, dtype)
    if dtype == np.float64 or (p.lo is not None and dtype.kind in "iu"):
        return _finish_wide(p, dtype, cp)
    if floating:
        with np.errstate(invalid="ignore", over="ignore"):
            total = hi if p.lo is None else xp.where(xp.isfinite(hi), hi + p.lo, hi)   # inf/NaN: lo is noise
            q = total / np.float64(p.count)
            if is_bfloat16(dtype):   # rounded once from float64 (a cast through float32 would round twice)
                return wide.f64_to_bf16(_host(q))
            return q.astype(dtype)
    if hi.dtype == object:
        q = np.vectorize(lambda s: -(-s // p.count) if s < 0 else s // p.count, otypes=[object])(hi)
        res = q.astype(dtype)
        return cp.asarray(res) if cp is not None else res
    if cp is not None:
        n = hi.dtype.type(p.count)
        return (hi // n if hi.dtype == np.uint64 else cp.where(hi < 0, -(-hi // n), hi // n)).astype(dtype)
    return trunc_div(hi, p.count).astype(dtype)


def _finish_dd(p: PartialSum, dtype, near=None) -> np.ndarray:
    """The correctly rounded means of exact double-double totals: ``exact.settle_near`` where the double
    quotient is far from a midpoint, ``exact.settle_dd`` for the rest (err 0: exact ties by error-free sums);
    what it leaves (zero totals, means near zero or past the range) and the sparse outputs go through
    the digits (``exact.mean_from_limbs``). A count of 0 gives NaN. ``near``: (means, settled) that
    the device's gm_dd_fold computed as ``settle_near`` does (flat)."""
    shape = p.hi.shape
    if p.count == 0:
        return np.full(shape, np.nan, dtype)
    h, c = p.hi.reshape(-1), p.lo.reshape(-1)
    # far from a midpoint: most outputs (by blocks: wide.BLOCK); the sparse ones are their digits'
    out, ok = near if near is not None else wide.by_blocks(partial(exact.settle_near, n=p.count, dtype=dtype), h, c)
    if p.sparse is not None:
        ok[p.sparse[0]] = False
    elif ok.all():
        return out.reshape(shape)
    ti = np.flatnonzero(~ok)
    hh, cc = h[ti], c[ti]
    with np.errstate(invalid="ignore", over="ignore"):
        nh, nc = wide.two_sum(hh, cc)                          # normalized (a -0.0 total kept as it is)
        hh, cc = np.where(cc == 0, hh, nh), np.where(cc == 0, 0.0, nc)
        res, ok = exact.settle_dd(hh, cc, 0.0, p.count, dtype)
    out[ti[ok]] = res[ok]
    rest = ti[~ok]
    if p.sparse is not None:
        rest = np.union1d(rest, p.sparse[0])
    if rest.size:
        d, flags = _dd_digits(p, rest)
        out[rest] = exact.mean_from_limbs(d, flags, p.count, p.of, dtype)
    return out.reshape(shape)


def _finish_wide(p: PartialSum, dtype, cp):
    """The mean of a two-word total: FLOAT64 divides its double-double once (as the CPU device does);
    INT64/UINT64 truncate (hi * 2^64 + lo) / count, in 32-bit digits where that fits, else in Python
    integers."""
    hi, lo = _host(p.hi), _host(p.lo if p.lo is not None else np.zeros_like(p.hi))
    n = p.count
    if dtype == np.float64:
        with np.errstate(invalid="ignore", over="ignore"):
            fin = np.isfinite(hi)
            h, t = wide.two_sum(hi, np.where(fin, lo, 0.0))    # combined partials: normalized again
            res = np.where(fin, wide.dd_div(h, t, n), hi / np.float64(n))
    else:
        ab = wide.from_words128(hi, lo) if n < 1 << 32 else None
        if ab is not None:
            res = wide.trunc_div128(*ab, n).astype(dtype)
        else:
            total = hi.astype(object) * (1 << 64) + lo.astype(object)
            res = np.vectorize(lambda s: -(-s // n) if s < 0 else s // n, otypes=[object])(total).astype(dtype)
    return cp.asarray(res) if cp is not None else res


def aggregate_mean(parts, axis=None, keepdims=False, dtype=None, computing_meta=False, device=None):
    """Dask's ``aggregate``: combine the last group, then the mean in the input's type (pairs of many
    outputs added and, FLOAT32, rounded on the worker's device where it can: ``_fold_dd``)."""
    if computing_meta:
        return parts
    flat = _flatten(parts)
    folded = _fold_dd(flat, device, dtype)
    res = finish(folded[0], dtype, folded[1]) if folded is not None else finish(_add_all(flat), dtype)
    if not keepdims:
        res = res.reshape(tuple(s for d, s in enumerate(res.shape) if d not in axis))
    return res
