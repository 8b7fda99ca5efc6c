"""Host-side planning shared by every GPU backend: pure functions, unit-tested without a device.

* Element-wise: drop size-1 dimensions, order by the output's strides, coalesce dimensions that are
  contiguous for every operand (TensorIterator-style). One 1-D contiguous run is the fast class.
* Reduction: split dimensions into kept and reduced, coalesce each group separately, and classify:
  ``row`` (one reduced run of stride 1), ``col`` (one reduced run, innermost kept run contiguous in
  input and output), ``general`` (anything else: interleaved axes, broadcast or padded inputs).
* Splitting: how many chunks the reduced run is cut into so that a device has enough independent work.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..descriptors.types import DataType

MAX_DIMS = 8


@dataclass(frozen=True)
class ElementwisePlan:
    op: str                 # "mean" | "add" | "identity" | "nary_mean"
    dtype: DataType
    n_inputs: int
    shape: tuple            # coalesced iteration shape, outermost first, at least one dimension
    strides: tuple          # one tuple per operand (inputs..., output), in elements
    scale: float = 1.0
    bias: float = 0.0
    has_scale_bias: bool = False

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
    op: str                 # "average" | "int_average"
    dtype: DataType
    cls: str                # "row" | "col" | "general"
    n_reduce: int           # elements averaged per output (N)
    keep_shape: tuple       # coalesced kept dims, outermost first (may be empty)
    keep_in_strides: tuple
    keep_out_strides: tuple
    red_shape: tuple        # coalesced reduced dims, outermost first (may be empty: N = 1)
    red_strides: tuple

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

    @property
    def outer_shape(self) -> tuple:
        return self.keep_shape[:-1] if self.cls == "col" else self.keep_shape


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


def plan_reduce(op: str, dtype: DataType, in_sizes, in_strides, out_strides, axes) -> ReducePlan:
    shape = tuple(int(s) for s in in_sizes)
    axes = set(int(a) for a in axes)
    red = [d for d in range(len(shape)) if d in axes and shape[d] != 1]
    keep = [d for d in range(len(shape)) if d not in axes and shape[d] != 1]
    n = 1
    for d in red:
        n *= shape[d]
    red_shape, (red_strides,) = _coalesce_group(red, shape, [in_strides])
    keep_shape, (kin, kout) = _coalesce_group(keep, shape, [in_strides, out_strides])
    if len(red_shape) == 1 and red_strides[0] == 1:
        cls = "row"
    elif len(red_shape) == 1 and keep_shape and kin[-1] == 1 and kout[-1] == 1:
        cls = "col"
    else:
        cls = "general"
    if len(keep_shape) > MAX_DIMS or len(red_shape) > MAX_DIMS:
        raise AssertionError("a validated descriptor has at most 8 dimensions")
    return ReducePlan(op, dtype, cls, n, keep_shape, kin, kout, red_shape, red_strides)


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
