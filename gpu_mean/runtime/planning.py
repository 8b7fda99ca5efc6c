"""From a validated descriptor to a plan: the one place that decides what runs. Pure functions,
unit-tested without a device; every backend compiles a plan and never looks at a descriptor.

* ``plan_operator(desc)`` reads the descriptor's ``kernel_op`` and returns an ``ElementwisePlan`` or a
  ``ReducePlan``: the operation, the data types (storage, compute/accumulator, output), the tensors as
  validated (the CPU device works on these directly) and the coalesced iteration space.
* Element-wise: drop size-1 dimensions, order by the output's strides, coalesce dimensions that are
  contiguous for every operand (TensorIterator-style). One 1-D contiguous run is the fast class.
* Reduction: split dimensions into kept and reduced, coalesce each group separately, and classify:
  ``row`` (one reduced run of stride 1), ``col`` (one reduced run, innermost kept run contiguous in
  input and output), ``general`` (anything else: interleaved axes, broadcast or padded inputs).
* Splitting: how many chunks the reduced run is cut into so that a device has enough independent work.
* Temporary sizes of split reductions (the kernels' metadata structs are each family's business:
  kernels/reduce_kernels.py, kernels/elementwise_kernels.py).

Compute and accumulator types (docs/design.md, "numerics"): FLOAT16 and BFLOAT16 compute in FLOAT32
and round once; the two-input integer mean sums in 64 bits (INT64/UINT64: halves added without
overflow); integer ADD wraps through UINT64; reductions and the n-ary mean accumulate FLOAT32,
FLOAT16 and BFLOAT16 in FLOAT64 (a device without fp64 uses a compensated float32 pair for
reductions and float32 for the n-ary mean), INT32/UINT32 in INT64/UINT64, and the 64-bit types in
128 bits (``accumulator``: FLOAT64 as a double-double, INT64/UINT64 as two 64-bit words).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType, KernelOp

MAX_DIMS = 8
ACC_BYTES = 8       # a reduction partial of the DirectML types: double, long, ulong, or float + compensation
# FLOAT16 sums of at most this many values are exact in FLOAT64, in any order: every half is a
# multiple of 2^-24 below 2^16, so such a sum is a multiple of 2^-24 below 2^29 (53 bits hold it)
F16_EXACT_SUM = 1 << 13
D = DataType
_WIDE = {D.FLOAT32: D.FLOAT64, D.FLOAT16: D.FLOAT64, D.BFLOAT16: D.FLOAT64, D.FLOAT64: D.FLOAT64,
         D.INT32: D.INT64, D.UINT32: D.UINT64, D.INT64: D.INT64, D.UINT64: D.UINT64}
# the accumulators wider than one 64-bit word: a partial of these is 16 bytes
_TWO_WORD = {D.FLOAT64: "double-double", D.INT64: "int128", D.UINT64: "uint128"}
_UNSIGNED = {1: D.UINT8, 2: D.UINT16, 4: D.UINT32, 8: D.UINT64}


def unsigned_of(dt: DataType) -> DataType:
    """The unsigned type of ``dt``'s width (bit copies, wrapping integer arithmetic)."""
    return _UNSIGNED[int(dt.element_size)]


def compute_type(op: KernelOp, dt: DataType, has_scale_bias: bool = False) -> DataType:
    """The type an operation computes or accumulates in (the table every kernel speller reads)."""
    if op in (KernelOp.NARY_MEAN, KernelOp.REDUCE_MEAN, KernelOp.REDUCE_SUM):
        return _WIDE[dt]
    if op == KernelOp.IDENTITY and not has_scale_bias:
        return unsigned_of(dt)      # a bit copy
    if dt in (D.FLOAT16, D.BFLOAT16):
        return D.FLOAT32
    if dt.is_float:
        return dt
    if op == KernelOp.MEAN:
        return D.INT64 if dt in (D.INT32, D.INT64) else D.UINT64
    return D.UINT64     # integer ADD (and IDENTITY) wraps modulo 2^bits


def accumulator(op: KernelOp, dt: DataType) -> str:
    """The accumulator's form for a reduction or the n-ary mean (with an fp64 device): the name of
    ``compute_type``'s type, or of the two-word form the 64-bit types need ("double-double",
    "int128", "uint128")."""
    wide = compute_type(op, dt)
    if op in (KernelOp.NARY_MEAN, KernelOp.REDUCE_MEAN, KernelOp.REDUCE_SUM) and dt in _TWO_WORD:
        return _TWO_WORD[dt]
    return wide.name.lower()


def acc_bytes(op: KernelOp, dt: DataType) -> int:
    """Bytes of one reduction partial (a chunk's accumulator in the temporary resource): FLOAT64's
    kernels keep two double-doubles (values past 2^960 apart, scaled: opencl_kernels/common.h, gm_dd4)."""
    if dt == D.FLOAT64:
        return 4 * ACC_BYTES
    return 2 * ACC_BYTES if dt in _TWO_WORD else ACC_BYTES


@dataclass(frozen=True)
class ElementwisePlan:
    op: KernelOp            # MEAN | ADD | IDENTITY | NARY_MEAN
    dtype: DataType         # storage type of every operand
    n_inputs: int
    shape: tuple            # coalesced iteration shape, outermost first, at least one dimension
    strides: tuple          # one tuple per operand (inputs..., output), in elements
    scale: float = 1.0
    bias: float = 0.0
    has_scale_bias: bool = False
    tensors: tuple = ()     # the validated TensorDescs (inputs..., output)

    @property
    def compute(self) -> DataType:
        return compute_type(self.op, self.dtype, self.has_scale_bias)

    @property
    def bit_copy(self) -> bool:
        return self.op == KernelOp.IDENTITY and not self.has_scale_bias

    @property
    def count(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def contiguous(self) -> bool:
        """Every operand is one dense run: the vectorized fast path applies."""
        return self.ndim == 1 and all(st[0] == 1 for st in self.strides)

    @property
    def rows_dense(self) -> bool:
        """Every operand's innermost dimension is dense: rows can move as vectors."""
        return all(st[-1] == 1 for st in self.strides)


def coalesce_elementwise(shape, operand_strides) -> tuple[tuple, tuple]:
    """Coalesced (shape, per-operand strides). The last operand (the output) sets the order."""
    shape = tuple(int(s) for s in shape)
    ops = [tuple(int(x) for x in st) for st in operand_strides]
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    out = ops[-1]
    # outermost first: larger output stride first; ties broken by the first input's strides
    dims.sort(key=lambda d: tuple(-st[d] for st in [out] + ops[:-1]))
    new_shape: list[int] = []
    new_strides: list[list[int]] = [[] for _ in ops]
    for d in dims:
        if new_shape and all(st_list[-1] == op[d] * shape[d] for st_list, op in zip(new_strides, ops)):
            new_shape[-1] *= shape[d]
            for st_list, op in zip(new_strides, ops):
                st_list[-1] = op[d]
            continue
        new_shape.append(shape[d])
        for st_list, op in zip(new_strides, ops):
            st_list.append(op[d])
    if not new_shape:
        return (1,), tuple((1,) for _ in ops)
    return tuple(new_shape), tuple(tuple(s) for s in new_strides)


@dataclass(frozen=True)
class ReducePlan:
    op: KernelOp            # REDUCE_MEAN | REDUCE_SUM
    dtype: DataType         # input storage type
    cls: str                # "row" | "col" | "general"
    n_reduce: int           # elements averaged per output (N)
    keep_shape: tuple       # coalesced kept dims, outermost first (may be empty)
    keep_in_strides: tuple
    keep_out_strides: tuple
    red_shape: tuple        # coalesced reduced dims, outermost first (may be empty: N = 1)
    red_strides: tuple
    out_dtype: DataType | None = None   # None: the input's type (REDUCE_SUM writes the wide type)
    tensors: tuple = ()     # the validated (input, output[, output low word]) TensorDescs
    axes: tuple = ()        # the descriptor's axes (the CPU device reduces over these)
    keep_lo_strides: tuple = ()     # the wide sum's low word (output_low): its kept strides (else empty)

    @property
    def acc(self) -> DataType:
        return compute_type(self.op, self.dtype)

    @property
    def output_type(self) -> DataType:
        return self.out_dtype or self.dtype

    @property
    def accumulator(self) -> str:
        return accumulator(self.op, self.dtype)

    @property
    def acc_bytes(self) -> int:
        return acc_bytes(self.op, self.dtype)

    def temporary_size(self, n_chunks: int) -> int:
        """Bytes of chunk partials for a split reduction (0: one pass, no temporary)."""
        return n_chunks * self.n_out * self.acc_bytes if n_chunks > 1 else 0

    @property
    def n_out(self) -> int:
        n = 1
        for s in self.keep_shape:
            n *= s
        return n

    @property
    def row_stride(self) -> int:
        return self.red_strides[-1] if self.red_strides else 1

    @property
    def inner(self) -> int:
        """For ``col``: the contiguous kept run (columns) that threads map onto."""
        return self.keep_shape[-1] if self.cls == "col" else 1


def _coalesce_group(dims, shape, stride_lists):
    dims = sorted(dims, key=lambda d: tuple(-st[d] for st in stride_lists))
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in stride_lists]
    for d in dims:
        if out_shape and all(s[-1] == st[d] * shape[d] for s, st in zip(out_strides, stride_lists)):
            out_shape[-1] *= shape[d]
            for s, st in zip(out_strides, stride_lists):
                s[-1] = st[d]
            continue
        out_shape.append(shape[d])
        for s, st in zip(out_strides, stride_lists):
            s.append(st[d])
    return tuple(out_shape), tuple(tuple(s) for s in out_strides)


def plan_reduce(op: KernelOp, dtype: DataType, in_sizes, in_strides, out_strides, axes, lo_strides=None,
                **extra) -> ReducePlan:
    """``lo_strides``: the wide sum's low-word output (its own strides; the kept dims coalesce only
    where every output allows it)."""
    shape = tuple(int(s) for s in in_sizes)
    axes = set(int(a) for a in axes)
    red = [d for d in range(len(shape)) if d in axes and shape[d] != 1]
    keep = [d for d in range(len(shape)) if d not in axes and shape[d] != 1]
    n = 1
    for d in red:
        n *= shape[d]
    red_shape, (red_strides,) = _coalesce_group(red, shape, [in_strides])
    lists = [in_strides, out_strides] + ([lo_strides] if lo_strides is not None else [])
    keep_shape, (kin, kout, *klo) = _coalesce_group(keep, shape, lists)
    if klo:
        extra["keep_lo_strides"] = klo[0]
    if len(red_shape) == 1 and red_strides[0] == 1:
        cls = "row"
    elif len(red_shape) == 1 and keep_shape and kin[-1] == 1 and kout[-1] == 1:
        cls = "col"
    else:
        cls = "general"
    if len(keep_shape) > MAX_DIMS or len(red_shape) > MAX_DIMS:
        raise AssertionError("a validated descriptor has at most 8 dimensions")
    return ReducePlan(op, dtype, cls, n, keep_shape, kin, kout, red_shape, red_strides,
                      axes=tuple(sorted(axes)), **extra)


def split_count(units: int, length: int, *, target_units: int, min_chunk: int) -> int:
    """How many chunks to cut a reduced run of ``length`` into, given ``units`` independent outputs.

    Split only while the device lacks ``target_units`` of independent work, and never into chunks
    shorter than ``min_chunk`` elements. Returns 1 (no split, no second pass) when splitting would not help.
    """
    if units >= target_units or length < 2 * min_chunk:
        return 1
    want = -(-target_units // max(units, 1))
    return max(1, min(want, length // min_chunk))


def chunk_length(length: int, chunks: int, multiple: int = 1) -> int:
    """Elements per chunk, rounded up to ``multiple`` so vector loads stay aligned within a chunk."""
    c = -(-length // chunks)
    return -(-c // multiple) * multiple


def plan_operator(desc):
    """The plan of a validated operator descriptor, from its ``kernel_op`` and its tensors."""
    op = desc.kernel_op
    ins, outs = tuple(desc.input_tensors()), tuple(desc.output_tensors())
    out: TensorDesc = outs[0]
    if op.is_reduction:
        x = ins[0]
        return plan_reduce(op, x.data_type, x.sizes, x.effective_strides, out.effective_strides, desc.axes,
                           out_dtype=out.data_type if out.data_type != x.data_type else None,
                           tensors=(x,) + outs, lo_strides=outs[1].effective_strides if len(outs) > 1 else None)
    ts = ins + outs
    shape, strides = coalesce_elementwise(out.sizes, [t.effective_strides for t in ts])
    sb = getattr(desc, "scale_bias", None)
    return ElementwisePlan(op, out.data_type, len(ins), shape, strides, sb.scale if sb else 1.0,
                           sb.bias if sb else 0.0, sb is not None, ts)
