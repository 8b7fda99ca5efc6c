"""Calls larger than the device takes in one piece (docs/design.md, "arrays larger than one
allocation"): ``gm.mean`` and ``gm.reduce_mean`` cut them along their outer dimensions.

Every tensor a piece binds -- each input, the result or the partial sums -- must fit:

* the largest single buffer of the device (``Device.max_alloc_bytes``: OpenCL's
  CL_DEVICE_MAX_MEM_ALLOC_SIZE, which PoCL enforces on buffers over numpy memory too; a lower
  ``max_alloc_bytes`` given to the Device; on CUDA, for host arrays copied in, a share of the
  free memory: ``Call._mode``);
* DirectML's tensor limit: at most 2^32 - 1 elements, counted and addressed.

``plan_chunks`` cuts, again and again, the dimension whose steps cover the most memory of the
tensor furthest past its limit, into equal pieces that fit: a box of whole outer dimensions, a
range of one, and whole inner ones. Pieces have at most two lengths per dimension, so few distinct
launches are compiled and cached.

Element-wise means, and reductions whose reduced axes are never cut, run each piece as a call of
its own (``Call.piece``) that writes its part of the result where it belongs: bit for bit the same
arithmetic as one launch, element by element. When a reduced axis is cut, float pieces (FLOAT32,
FLOAT16, BFLOAT16 and FLOAT64 on every device that holds them) give exact totals
(``exact_totals``: ``Device.exact_partials``, the kernels' superaccumulator on OpenCL and CUDA with
or without fp64, numpy's on the CPU device), added digit by digit and rounded once: the correctly
rounded mean, one launch's bits (issue 22; docs/design.md, "Partials across boundaries"). INT32 and
UINT32 pieces give the wide partial sums of ``gm.ext.ReduceSumDesc`` (INT64, UINT64: the partials
gpu_mean.dask combines), read back and added exactly (64 bits, then Python integers), and the mean
truncates toward zero once: one launch's result. INT64 and UINT64 pieces give their 128-bit totals
in two words (``word_totals``: ReduceSumDesc's high and low word, the kernels' on OpenCL and CUDA),
added with carries, truncated once: one launch's result. Other types with a cut reduced axis are
refused.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..bridges.arrays import aligned_empty, hand_back
from ..descriptors.ext import ReduceSumDesc
from ..descriptors.tables import EXTENSION_TYPES, WIDE_SUM_LOW_TYPE, WIDE_SUM_TYPE
from ..descriptors.tensor import MAX_ELEMENTS, TensorDesc, packed_strides
from ..descriptors.types import DataType
from ..errors import InvalidArgumentError, UnsupportedError
from ..runtime import exact, numerics, wide
from .arrays import Call, Operand, data_type_of

PAGE = 4096
# the float types whose pieces an OpenCL or CUDA device sums exactly (opencl_kernels/reduce_limbs.h and
# gm_reduce_limbs), and the superaccumulator's limbs per output (exact.h: GM_XK_F, GM_XK_H, GM_XK_D;
# FLOAT64 tensors exist only on devices with fp64)
DEVICE_LIMBS = {DataType.FLOAT32: 10, DataType.BFLOAT16: 10, DataType.FLOAT16: 3, DataType.FLOAT64: 68}
DEVICE_EXACT = tuple(DEVICE_LIMBS)
# the integer types whose pieces give 128-bit totals in two words (ReduceSumDesc's high and low word)
WORD_TYPES = (DataType.INT64, DataType.UINT64)


def plan_chunks(shape, tensors, max_bytes: int | None, max_elements: int = MAX_ELEMENTS) -> tuple:
    """The piece length in each dimension of ``shape`` so that every tensor fits.

    ``tensors``: (element strides over ``shape``, bytes per element) for each tensor a piece binds;
    stride 0 where the tensor does not step along a dimension (broadcast, or reduced away). A piece
    of lengths ``c`` spans ``sum((c[d] - 1) * stride[d]) + 1`` elements of a tensor, which must stay
    within ``max_elements`` and ``max_bytes``; a piece also counts at most ``max_elements`` elements.
    Returns ``shape`` itself when one piece takes it all."""
    shape = tuple(int(n) for n in shape)
    chunk = list(shape)
    while True:
        worst, worst_ratio = None, 1.0
        for strides, itemsize in tensors:
            cap = max_elements if max_bytes is None else min(max_elements, max_bytes // itemsize)
            if cap < 1:
                raise InvalidArgumentError(f"one element of {itemsize} bytes does not fit the {max_bytes}-byte "
                                           "buffer limit")
            span = sum((c - 1) * s for c, s in zip(chunk, strides)) + 1
            if span > cap and span / cap > worst_ratio:
                worst, worst_ratio = (strides, cap, span), span / cap
        if worst is None:
            count = math.prod(chunk)
            if count <= max_elements:
                return tuple(chunk)
            # a tensor that repeats elements (stride 0) counts more than it addresses: cut the outermost
            d = next(d for d, c in enumerate(chunk) if c > 1)
            rest = count // chunk[d]
            _cut(chunk, shape, d, max(1, max_elements // rest))
            continue
        strides, cap, span = worst
        # the dimension whose steps cover the most memory: cutting it shrinks the span most
        d = max((d for d, c in enumerate(chunk) if c > 1 and strides[d]),
                key=lambda d: (chunk[d] - 1) * strides[d])
        rest = span - (chunk[d] - 1) * strides[d]
        fit = (cap - rest) // strides[d] + 1 if cap >= rest else 1
        _cut(chunk, shape, d, fit)


def _cut(chunk: list, shape: tuple, d: int, fit: int) -> None:
    """Cut dimension ``d`` into equal pieces of at most ``fit`` (and fewer than now) elements."""
    fit = max(1, min(fit, chunk[d] - 1))
    pieces = -(-shape[d] // fit)
    chunk[d] = -(-shape[d] // pieces)


def boxes(shape, chunks):
    """The pieces, one slice per dimension each, in row-major order."""
    ranges = [[slice(a, min(a + c, n)) for a in range(0, n, c)] for n, c in zip(shape, chunks)]
    return itertools.product(*ranges)


def too_big(call: Call, count: int, nbytes: int) -> bool:
    """Whether a tensor of ``count`` elements and ``nbytes`` bytes (the result, or an input's
    element count) is past what one launch of ``call``'s device binds."""
    return count > MAX_ELEMENTS or (call.limit is not None and nbytes > call.limit)


def _result(call: Call, shape, dtype):
    """The whole result, made once; pieces write their parts into it."""
    dtype = np.dtype(dtype)
    if call.kind == "host":
        n = math.prod(shape)
        return aligned_empty(n * dtype.itemsize, PAGE).view(dtype).reshape(shape)
    return call.bridge.empty(call.ops[0].array, tuple(shape), dtype)


def _layout(pc: Call, dest):
    """How a piece's result tensor is laid out: packed where the piece copies through pooled
    buffers (``Launch.run_host`` reads a packed output), else the view ``dest`` it writes in place."""
    if pc.mode == "host":
        return None
    itemsize = np.dtype(dest.dtype).itemsize
    strides = tuple(0 if n == 1 else int(s) // itemsize for n, s in zip(dest.shape, dest.strides))
    return strides, (0 if pc.kind == "host" else pc.bridge.alignment(dest))


# -- Mean -------------------------------------------------------------------------------------------

def _broadcast_strides(op: Operand, out_shape) -> tuple:
    pad = len(out_shape) - len(op.shape)
    return tuple(0 if d < pad or op.shape[d - pad] == 1 else op.strides[d - pad] for d in range(len(out_shape)))


def _operand_index(op: Operand, box, out_shape) -> tuple:
    """A box of the result as the slices of one (right-aligned, broadcast) operand's dimensions."""
    pad = len(out_shape) - len(op.shape)
    return tuple(slice(None) if op.shape[k] == 1 else box[k + pad] for k in range(len(op.shape)))


def run_mean(call: Call, out_shape, make_descs):
    """``gm.mean`` piece by piece; ``make_descs(pc, ops, shape, layout)`` gives one piece's launch
    (descriptor, result shape)."""
    ops = call.ops
    dtype = ops[0].dtype
    tensors = [(_broadcast_strides(o, out_shape), dtype.itemsize) for o in ops]
    tensors.append((packed_strides(out_shape), dtype.itemsize))
    chunks = plan_chunks(out_shape, tensors, call.limit)
    res = _result(call, out_shape, dtype)
    for box in boxes(out_shape, chunks):
        dest = res[box]
        pc = Call.piece(call, [o.piece(_operand_index(o, box, out_shape)) for o in ops], dest)
        shape = tuple(s.stop - s.start for s in box)
        layout = _layout(pc, dest)
        pc.run(("mean piece", pc.signature, shape, layout),
               lambda pc=pc, shape=shape, layout=layout: make_descs(pc, pc.ops, shape, layout), dest=dest)
    return hand_back(res, call.rule, dtype)


# -- ReduceMean -------------------------------------------------------------------------------------

def run_reduce(call: Call, axes: tuple, out_shape, make_desc):
    """``gm.reduce_mean`` piece by piece. ``make_desc(pc, op, axes, layout, wide)`` gives one piece's
    launch: REDUCE AVERAGE (or the integer mean) into its part of the result, or with ``wide`` the
    partial sums of ReduceSumDesc."""
    op = call.ops[0]
    shape, dtype = op.shape, op.dtype
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    out_strides = tuple(0 if d in axes else s for d, s in enumerate(packed_strides(out_keep)))
    chunks = plan_chunks(shape, [(op.strides, dtype.itemsize), (out_strides, dtype.itemsize)], call.limit)
    crossing = any(chunks[d] < shape[d] for d in axes)
    if not crossing:
        res = _result(call, out_keep, dtype)
        for box in boxes(shape, chunks):
            dest = res[tuple(slice(None) if d in axes else b for d, b in enumerate(box))]
            pc = Call.piece(call, [op.piece(box)], dest)
            layout = _layout(pc, dest)
            pc.run(("reduce piece", pc.signature, axes, layout),
                   lambda pc=pc, layout=layout: make_desc(pc, pc.ops[0], axes, layout, False), dest=dest)
        return hand_back(res.reshape(out_shape), call.rule, dtype)

    n = math.prod(shape[d] for d in axes)
    res = device_means(call, axes, n)
    if res is None:
        res = sum_pieces(call, axes, make_desc).mean(n, dtype, call.dev.info.fp64)
    res = res.reshape(out_shape)
    if call.kind != "host":
        res = call.bridge.from_host(op.array, np.ascontiguousarray(res))
    return hand_back(res, call.rule, dtype)


def sum_pieces(call: Call, axes: tuple, make_desc, exact_ok: bool = True) -> Totals | WordTotals:
    """The totals over ``axes`` of a call's one operand, piece by piece: each piece's wide partial sums
    (ReduceSumDesc) added in ``Totals``; on the CPU device (``exact_ok``), each float piece's exact
    total (``runtime/exact.py``: superaccumulator digits and the inf/NaN/-0 flags); INT64 and UINT64
    pieces' two-word totals in ``WordTotals`` (``word_totals``)."""
    op = call.ops[0]
    shape, dtype = op.shape, op.dtype
    dt = data_type_of(dtype, call.what)
    # float pieces give exact totals (docs/design.md, "Partials across boundaries"): on the CPU device
    # in numpy, on OpenCL and CUDA devices from the kernels' superaccumulator (FLOAT32, FLOAT16,
    # BFLOAT16 with or without fp64; FLOAT64, which only devices with fp64 hold)
    exact_parts = exact_ok and dt.is_float and (call.dev.info.backend == "cpu" or dt in DEVICE_EXACT)
    if dt in WORD_TYPES:
        return word_totals(call, axes)
    if dt in EXTENSION_TYPES and not exact_parts:
        raise UnsupportedError(f"{call.what}: a {dt.name} tensor past one launch of {call.dev.name} (a buffer of at "
                               f"most {call.limit} bytes, a tensor of at most 2^32 - 1 elements) with a reduced axis "
                               "cut into pieces: the extension types' partial sums are not combined yet; reduce over "
                               "inner axes first, or use a Device without max_alloc_bytes")
    if exact_parts:
        return exact_totals(call, axes)
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    wide = WIDE_SUM_TYPE[dt]
    out_strides = tuple(0 if d in axes else s for d, s in enumerate(packed_strides(out_keep)))
    chunks = plan_chunks(shape, [(op.strides, dtype.itemsize), (out_strides, int(wide.element_size))], call.limit)
    # (float pieces reach this loop only from gpu_mean.dask's CuPy chunks, on CUDA devices, which have
    # fp64: numpy float chunks and split calls take exact_totals)
    totals = Totals(out_keep, np.dtype(wide.numpy_dtype))
    for box in boxes(shape, chunks):
        pc = Call.piece(call, [op.piece(box)], None)
        part = pc.run(("sum piece", pc.signature, axes),
                      lambda pc=pc: make_desc(pc, pc.ops[0], axes, None, True), to_host=True)
        totals.add(tuple(slice(None) if d in axes else b for d, b in enumerate(box)), part)
    return totals


def exact_totals(call: Call, axes: tuple) -> Totals:
    """The exact totals over ``axes`` of a call's one float operand, piece by piece (pieces that fit
    one buffer of the device, their limbs too): each piece's superaccumulator digits and flags
    (``Device.exact_partials``: the device's kernel, or numpy on the CPU device), added exactly."""
    op = call.ops[0]
    shape, dtype = op.shape, op.dtype
    dt = data_type_of(dtype, call.what)
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    tensors = [(op.strides, dtype.itemsize)]
    if call.dev.info.backend != "cpu":      # a device writes K + 1 longs per output (and per run)
        out_strides = tuple(0 if d in axes else s for d, s in enumerate(packed_strides(out_keep)))
        tensors.append((out_strides, 8 * (DEVICE_LIMBS[dt] + 1)))
    chunks = plan_chunks(shape, tensors, call.limit)
    totals = Totals(out_keep, None, dtype)
    for box in boxes(shape, chunks):
        piece = op.piece(box)
        arr = piece.array if piece.kind == "host" else call.host_copy(piece)
        digits, flags = call.dev.exact_partials(arr, axes, dt)
        totals.add_exact(tuple(slice(None) if d in axes else b for d, b in enumerate(box)), digits, flags)
    return totals


def word_totals(call: Call, axes: tuple) -> WordTotals:
    """The exact totals over ``axes`` of a call's one INT64 or UINT64 operand, piece by piece: each
    piece's 128-bit total from ``gm.ext.ReduceSumDesc`` on the call's device (two words: the kernels'
    GM_WIDE_SUM on OpenCL and CUDA, numpy on the CPU device), read back and added with carries
    (``WordTotals``). Device operands are read back for it, as for ``exact_totals``."""
    op = call.ops[0]
    shape, dtype = op.shape, op.dtype
    dt = data_type_of(dtype, call.what)
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    out_strides = tuple(0 if d in axes else s for d, s in enumerate(packed_strides(out_keep)))
    # a piece binds its values packed (a copy) and the two words of its totals
    chunks = plan_chunks(shape, [(packed_strides(shape), dtype.itemsize), (out_strides, 8)], call.limit)
    totals = WordTotals(out_keep, np.dtype(WIDE_SUM_TYPE[dt].numpy_dtype))
    for box in boxes(shape, chunks):
        piece = op.piece(box)
        arr = piece.array if piece.kind == "host" else call.host_copy(piece)
        totals.add(tuple(slice(None) if d in axes else b for d, b in enumerate(box)),
                   *two_words(call.dev, arr, axes, dt))
    return totals


_two_word_ops: dict = {}    # compiled two-word sums, by (device, descriptor)


def two_words(dev, arr: np.ndarray, axes: tuple, dt: DataType, stats: dict | None = None) -> tuple:
    """(high word, low word) of the host array ``arr``'s totals over ``axes`` (kept as size 1) on
    ``dev``: one ReduceSumDesc with two outputs over a packed copy (``stats["compiled"]`` counts a
    compile)."""
    arr = np.ascontiguousarray(arr)
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(arr.shape))
    # packed: neighbours of the same kind (both reduced or both kept) merge, size-1 dims drop
    sizes, kinds = [], []
    for d, n in enumerate(arr.shape):
        if n != 1:
            if kinds and kinds[-1] == (d in axes):
                sizes[-1] *= n
            else:
                sizes.append(n)
                kinds.append(d in axes)
    sizes, kinds = sizes or [1], kinds or [False]
    cop, in_desc, outs, compiled = two_word_op(dev, sizes, tuple(i for i, r in enumerate(kinds) if r), dt)
    if stats is not None:
        stats["compiled"] += compiled
    inp = dev.create_buffer(max(in_desc.total_size_in_bytes, 4))
    inp.write(arr.reshape(-1).view(np.uint8))
    bufs = [dev.create_buffer(max(t.total_size_in_bytes, 4)) for t in outs]
    cop.execute(inputs=[inp], outputs=bufs)
    return tuple(b.read_tensor(t).reshape(out_shape) for b, t in zip(bufs, outs))


def two_word_op(dev, sizes, red: tuple, dt: DataType) -> tuple:
    """The compiled ReduceSumDesc with two outputs (high and low word) over packed ``sizes`` of ``dt``
    reduced over dims ``red`` on ``dev``, kept per process (at most 64): (operator, input desc, output
    descs, whether it was compiled now). Split pieces and gpu_mean.dask chunks share it."""
    in_desc = TensorDesc(dt, sizes)
    outs = [TensorDesc(t, tuple(1 if d in red else s for d, s in enumerate(sizes)))
            for t in (WIDE_SUM_TYPE[dt], WIDE_SUM_LOW_TYPE[dt])]
    key = (dev, ReduceSumDesc(in_desc, outs[0], red, outs[1]))
    cop = _two_word_ops.get(key)
    if cop is not None:
        return cop, in_desc, outs, False
    if len(_two_word_ops) >= 64:
        _two_word_ops.clear()
    cop = _two_word_ops[key] = dev.compile_operator(dev.create_operator(key[1]))
    return cop, in_desc, outs, True


class WordTotals:
    """Exact INT64 / UINT64 totals as two 64-bit words, hi * 2^64 + lo (hi of the type, lo UINT64),
    added with a carry (hi cannot wrap: 2^63 * 2^64 would take more values than any array holds)."""

    def __init__(self, shape, wide: np.dtype):
        self.hi = np.zeros(shape, wide)
        self.lo = np.zeros(shape, np.uint64)

    def add(self, index: tuple, hi: np.ndarray, lo: np.ndarray) -> None:
        s = self.lo[index] + lo
        carry = (s < lo).astype(self.hi.dtype)
        self.hi[index] = self.hi[index] + hi + carry
        self.lo[index] = s

    def words(self) -> tuple:
        return self.hi, self.lo

    def mean(self, n: int, dtype, fp64: bool = True) -> np.ndarray:
        """(hi * 2^64 + lo) / n truncated toward zero once (as the kernels and the CPU device do): in
        32-bit digits where that fits (``wide.trunc_div128``), else in Python integers."""
        dtype = np.dtype(dtype)
        ab = wide.from_words128(self.hi, self.lo) if n < 1 << 32 else None
        if ab is not None:
            return wide.trunc_div128(*ab, n).astype(dtype)
        total = self.hi.astype(object) * (1 << 64) + self.lo.astype(object)
        return np.vectorize(lambda t: -(-t // n) if t < 0 else t // n, otypes=[object])(total).astype(dtype)


def device_means(call: Call, axes: tuple, n: int):
    """The means of a call whose reduced axis is cut, its pieces combined on the device (issue 26):
    each piece's exact totals added into running totals kept on the device (``Device.device_totals``:
    reduce_gpu.cl's gm_reduce_limbs then gm_limbs_add), rounded there once (gm_limbs_round); only the
    means are read back. None where that does not apply: the CPU device, a type without device
    limbs, 2^32 values per output or more, or running totals past one buffer of the device."""
    op = call.ops[0]
    shape, dtype = op.shape, op.dtype
    dt = data_type_of(dtype, call.what)
    if call.dev.info.backend == "cpu" or dt not in DEVICE_LIMBS or n >= 1 << 32:
        return None
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    n_total = math.prod(out_keep)
    words = 8 * (DEVICE_LIMBS[dt] + 1)
    if too_big(call, n_total, n_total * words):
        return None
    totals = call.dev.device_totals(dt, n_total)
    if totals is None:
        return None
    out_strides = tuple(0 if d in axes else s for d, s in enumerate(packed_strides(out_keep)))
    chunks = plan_chunks(shape, [(op.strides, dtype.itemsize), (out_strides, words)], call.limit)
    index = np.arange(n_total, dtype=np.int64).reshape(out_keep)
    for box in boxes(shape, chunks):
        piece = op.piece(box)
        arr = piece.array if piece.kind == "host" else call.host_copy(piece)
        totals.add(arr, axes, index[tuple(slice(None) if d in axes else b for d, b in enumerate(box))])
    return totals.mean(n, dtype).reshape(out_keep)


def run_sum(call: Call, axes: tuple, make_desc):
    """A gpu_mean.dask chunk past one launch: its wide total over ``axes`` (reduced axes kept as 1),
    on the chunk's side (numpy, or the device array type), from its pieces' exact totals."""
    total = sum_pieces(call, axes, make_desc, exact_ok=False).total()
    if call.kind != "host" and total.dtype != object:
        total = call.bridge.from_host(call.ops[0].array, total)
    return total


class Totals:
    """Exact sums of partial sums over the result's elements: floats in double-double (``hi`` +
    ``lo``), integers in 64 bits until one would wrap, then Python integers."""

    def __init__(self, shape, wide: np.dtype | None, exact_of=None):
        self.digits = self.flags = None
        if wide is None:       # exact totals of ``exact_of`` values: superaccumulator digits and flags
            self.dtype = np.dtype(exact_of)
            self.digits = np.zeros((exact.fmt(exact_of).digits,) + tuple(shape), np.int64)
            self.flags = np.zeros((4,) + tuple(shape), bool)
            self.flags[3] = True
            return
        self.hi = np.zeros(shape, wide)
        self.lo = np.zeros(shape, np.float64) if wide.kind == "f" else None
        self.seen: set = set()

    def add_exact(self, index: tuple, digits: np.ndarray, flags: np.ndarray) -> None:
        at = (slice(None),) + index
        self.digits[at] = exact.add_limbs(self.digits[at], digits)
        self.flags[at] = exact.merge_flags(self.flags[at], flags)

    def add(self, index: tuple, part: np.ndarray) -> None:
        key = tuple((s.start, s.stop) for s in index)
        if key not in self.seen:
            # the first partial is taken as it is (0 + -0.0 would lose the sign of a zero total)
            self.seen.add(key)
            self.hi[index] = part
            return
        hi = self.hi[index]
        if self.lo is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                s, e = wide.two_sum(hi, part)
                self.hi[index] = s
                self.lo[index] += e
            return
        s = numerics.add_exact(hi, part)
        if s.dtype == object and self.hi.dtype != object:
            self.hi = self.hi.astype(object)
        self.hi[index] = s

    def total(self) -> np.ndarray:
        """The totals rounded once to the wide type (integers: exact, Python integers past 64 bits)."""
        if self.lo is None:
            return self.hi
        with np.errstate(invalid="ignore", over="ignore"):
            # inf and NaN totals carry noise in lo; a zero lo keeps the sign of a zero total
            return np.where(np.isfinite(self.hi) & (self.lo != 0), self.hi + self.lo, self.hi)

    def mean(self, n: int, dtype, fp64: bool) -> np.ndarray:
        dtype = np.dtype(dtype)
        if self.digits is not None:
            return exact.mean_from_limbs(self.digits, self.flags, n, self.dtype, dtype)
        hi = self.hi
        if self.lo is None:
            if hi.dtype == object:
                q = np.vectorize(lambda s: -(-s // n) if s < 0 else s // n, otypes=[object])(hi)
                return q.astype(dtype)
            return numerics.trunc_div(hi, n).astype(dtype)
        total = self.total()
        with np.errstate(invalid="ignore", over="ignore"):
            if fp64:
                return (total / np.float64(n)).astype(dtype)
            return (total.astype(np.float32) / np.float32(n)).astype(dtype)
