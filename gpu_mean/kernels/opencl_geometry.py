"""OpenCL launch geometry of the CPU-shaped kernels (OpenCL CPU devices): pure functions of a plan,
the device's shape and the tuning values, tested without a device. Tuning values travel in a frozen
``OpenCLTuning`` (the retired tools/bench_prefetch.py built a backend with prefetch off by passing another one,
never by patching this module). GPU-shaped launches: gpu_geometry.py."""
from __future__ import annotations

from dataclasses import dataclass

from ..descriptors.types import DataType, KernelOp
from ..runtime import planning


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def ew_contig_geometry(n: int, vec: int) -> tuple[tuple, tuple]:
    """1-D NDRange: one work-item per ``vec`` elements, a fixed local size (PoCL specializes per size)."""
    local = 256
    items = max(1, -(-n // vec))
    return (round_up(items, local),), (local,)


def round_up_geometry(n: int, local: int) -> tuple[tuple, tuple]:
    return (round_up(max(n, 1), local),), (local,)


@dataclass(frozen=True)
class ReduceGeometry:
    kernel: str          # "row" | "col" | "general" | "short"
    grid: tuple          # global size
    length: int          # reduced run length (elements for row/general, rows for col)
    chunk: int           # elements (or rows) per chunk
    n_chunks: int        # > 1: partials in the temporary resource and a finalize pass
    cols: int            # columns per work-item (col kernel)
    local: tuple | None = None   # work-group size (None: the runtime's choice)
    row_multi: bool = False      # row kernel over interleaved axes (chunk = outer reduced index)
    prefetch: int = 0            # CPU software prefetch: row kernel bytes ahead, col kernel rows ahead


@dataclass(frozen=True)
class OpenCLTuning:
    """Software prefetch on CPU devices (measured on PoCL, 2-core CI VM, 256 MB inputs, side by side):
    row kernel 2 KB ahead, axes [2] 18.3 -> 21.1 GB/s; column kernel the next 4 rows, axes [1]
    19.6 -> 21.4 GB/s. A prefetch that runs past what the work-item reads is wasted bandwidth, so it
    is only issued where that waste is a small share: rows that are adjacent (the next run is the next
    work-item's) or long, and column chunks of many rows. Zero distances turn prefetch off."""

    row_prefetch_bytes: int = 2048
    col_prefetch_rows: int = 4
    prefetch_min_run_bytes: int = 64 << 10
    prefetch_min_col_rows: int = 256
    # element-wise outputs from this size on take streaming stores (elementwise.cl: STOREV_NT): half
    # the CI machine's 32 MiB last-level cache, past which the output would not stay cached anyway
    nt_store_min_bytes: int = 16 << 20


DEFAULT_TUNING = OpenCLTuning()


def ew_prefetch(plan, tuning: OpenCLTuning = DEFAULT_TUNING) -> int:
    """Bytes of software prefetch ahead for an element-wise kernel (CPU devices): dense operands, and
    rows of dense runs long enough that what runs past a row's end is a small share (the strided
    kernel takes one element at a time and gets none). Measured on PoCL, side by side: copy
    20.2 -> 22.5 GB/s, mean 19.9 -> 22.6 GB/s."""
    if plan.contiguous:
        return tuning.row_prefetch_bytes
    long_rows = plan.shape[-1] * int(plan.dtype.element_size) >= tuning.prefetch_min_run_bytes
    return tuning.row_prefetch_bytes if plan.rows_dense and long_rows else 0


def _row_prefetch(plan: planning.ReducePlan, length: int, adjacent: bool, tuning: OpenCLTuning) -> int:
    itemsize = int(plan.dtype.element_size)
    long_run = length * itemsize >= tuning.prefetch_min_run_bytes
    return tuning.row_prefetch_bytes if adjacent or long_run else 0


def reduce_geometry(plan: planning.ReducePlan, *, compute_units: int, tuning: OpenCLTuning = DEFAULT_TUNING,
                    cols: int | None = None) -> ReduceGeometry:
    """Pick the CPU-shaped kernel for the plan's class and cut the reduced run when outputs are too few
    (GPU-shaped launches: gpu_geometry.reduce_geometry).

    ~16 work-items per core are enough, and chunks stay long (>= 32K elements, >= 64 rows) so each
    work-item streams. A work-group of one work-item when work-items are few, so that PoCL spreads
    them over the cores (a (1, 32) NDRange would otherwise be one work-group, one core). The column
    kernel takes up to 1024 columns per work-item: every row read is up to 4 KB contiguous and the
    accumulators (8 KB of doubles) stay in L1 beside the four row streams. Measured on PoCL (CI VM,
    tools/bench.py kernels --only R4, 32 MiB, 9 rounds side by side): (256, 32768) over axis 0,
    FLOAT32, 2048 -> 1024 columns 24.3 -> 49.2 GB/s; in another run 2048 -> 512 25.2 -> 43.0.
    """
    if cols is None:
        # whole rows up to 1024 columns, so each row read is one contiguous run
        cols = min(1024, round_up(plan.inner, 8)) if plan.cls == "col" else 32
    target = compute_units * 16
    if plan.cls == "col":
        n_cb = -(-plan.inner // cols)
        n_outer = plan.n_out // plan.inner
        length = plan.red_shape[0]
        n_chunks = planning.split_count(n_cb * n_outer, length, target_units=target, min_chunk=64)
        if plan.dtype == DataType.FLOAT16 and plan.op == KernelOp.REDUCE_MEAN:
            # chunks of at most planning.F16_EXACT_SUM rows: each column's FLOAT64 chunk sum is then
            # exact (reduce_kernels.h16_cols; the float-float path without fp64 takes the same chunks)
            n_chunks = max(n_chunks, -(-length // planning.F16_EXACT_SUM))
        chunk = planning.chunk_length(length, n_chunks)
        n_chunks = -(-length // chunk)
        pf = tuning.col_prefetch_rows if chunk >= tuning.prefetch_min_col_rows else 0
        return ReduceGeometry("col", (n_cb, n_outer, n_chunks), length, chunk, n_chunks, cols, (1, 1, 1), prefetch=pf)
    if plan.cls == "general" and len(plan.red_shape) >= 2 and plan.red_strides[-1] == 1 \
            and plan.red_shape[-1] >= 32 and plan.n_reduce // plan.red_shape[-1] * plan.n_out <= 1 << 25:
        # interleaved axes with a dense innermost reduced run: reduce each run with the row kernel
        # into partials, then let the finalize pass add the runs
        runs = plan.n_reduce // plan.red_shape[-1]
        l0 = 64 if plan.n_out >= 64 else 1
        # adjacent: the next output's run starts where this one's ends (no kept axis: one output)
        adjacent = bool(plan.keep_shape) and plan.keep_in_strides[-1] == plan.red_shape[-1]
        return ReduceGeometry("row", (round_up(plan.n_out, l0), runs), plan.red_shape[-1], plan.red_shape[-1], runs,
                              cols, (l0, 1), True, _row_prefetch(plan, plan.red_shape[-1], adjacent, tuning))
    length = plan.n_reduce
    n_chunks = planning.split_count(plan.n_out, length, target_units=target, min_chunk=32768)
    chunk = planning.chunk_length(length, n_chunks, 8)
    n_chunks = -(-length // chunk)
    l0 = 64 if plan.n_out >= compute_units * 64 * 4 else 1
    pf = 0
    if plan.cls == "row":
        # a work-group's work-items take consecutive rows: adjacent when the kept stride is the run
        adjacent = n_chunks == 1 and plan.n_out > 1 and plan.keep_in_strides[-1] == length
        pf = _row_prefetch(plan, chunk, adjacent, tuning)
    return ReduceGeometry(plan.cls if plan.cls == "row" else "general", (round_up(plan.n_out, l0), n_chunks), length,
                          chunk, n_chunks, cols, (l0, 1), prefetch=pf)


def short_geometry(plan: planning.ReducePlan, *, compute_units: int,
                   tuning: OpenCLTuning = DEFAULT_TUNING) -> ReduceGeometry:
    """The short-rows kernel (reduce_kernels.short_rows): each work-item a contiguous block of whole
    rows, a multiple of 8 of them, about 16 work-items per core and at least 64 rows each, so that
    each streams a long run (one work-item per work-group: PoCL spreads them over the cores)."""
    per = round_up(max(64, -(-plan.n_out // (compute_units * 16))), 8)
    items = -(-plan.n_out // per)
    return ReduceGeometry("short", (items,), plan.n_reduce, per, 1, 32, (1,), prefetch=tuning.row_prefetch_bytes)
