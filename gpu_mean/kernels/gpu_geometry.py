"""Launch geometry of the GPU-shaped kernels: pure functions of a plan and the device's width,
tested without a GPU, shared by the CUDA backend and the OpenCL backend on GPUs (and on the
opencl:0-gpupaths test device, which runs them on PoCL with the geometry of a 132-SM GPU).

In CUDA's words (OpenCL: work-groups = blocks, local size = blockDim, global size = grid * block):
gridDim.x <= 2^31 - 1, gridDim.y and gridDim.z <= 65535, at most 1024 threads per block, 48 KB of
static shared memory. Every kernel loops over its grid in each dimension, so a grid is capped at the
limits (or at a few waves) and the loops take the rest. ``sms`` is the number of multiprocessors
(OpenCL: compute units).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..descriptors.types import DataType
from ..runtime import planning

MAX_X = (1 << 31) - 1
MAX_YZ = 65535
MAX_THREADS = 1024
MAX_STATIC_SMEM = 48 << 10
BLOCK = 256
# the rows kernel needs rows of at least this many bytes: shorter ones leave most of a warp idle,
# and the strided kernel (one element per thread) serves them better
ROWS_MIN_BYTES = 256
# the row kernel gives each run of at most this many values a warp (WARP_ROWS), longer ones a block
ROW_WARP_MAX = 4096
# reductions over rows of at most this many values take gm_reduce_short: a few lanes per row (the
# next power of two of the row's length), SHORT_U rows per work-item at once
SHORT_MAX = 32
SHORT_U = 4
# a split reduction's second pass takes an output per thread when no output has more chunks than this
# and there are at least this many outputs (ReduceGeometry.fin_lanes)
FIN_LANES_MAX = 32
FIN_LANES_MIN_OUT = 4096


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def ew_grid(n: int, vec: int, block: int, sms: int) -> tuple:
    """Grid-stride element-wise launch: one pass when small, at most 8 blocks of 256 per SM (and never
    past CUDA's grid limit)."""
    items = max(1, _cdiv(n, vec))
    return (max(1, min(_cdiv(items, block), sms * 8, MAX_X)),)


def ew_uses_rows(plan: planning.ElementwisePlan) -> bool:
    """The rows kernel: every operand's innermost dimension dense and rows long enough to fill a warp."""
    return (not plan.contiguous and plan.ndim >= 2 and plan.rows_dense
            and plan.shape[-1] * int(plan.dtype.element_size) >= ROWS_MIN_BYTES)


def ew_rows_vectorizable(plan: planning.ElementwisePlan) -> bool:
    """16-byte vectors along rows need every row start aligned: every outer stride a multiple of the
    vector (the base pointers are checked at launch)."""
    vec = 16 // int(plan.dtype.element_size)
    return all(s % vec == 0 for st in plan.strides for s in st[:-1])


def ew_rows_geometry(plan: planning.ElementwisePlan, w: int, sms: int) -> tuple[tuple, tuple]:
    """(grid, block) of the rows kernel moving ``w`` elements per piece: threadIdx.x over a row's
    pieces (a power of two from 32 to 256), threadIdx.y over rows; about 16 blocks per SM."""
    inner = plan.shape[-1]
    rows = plan.count // inner
    pieces = inner // w + inner % w
    bx = min(BLOCK, max(32, 1 << (pieces - 1).bit_length()))
    by = BLOCK // bx
    gy = min(_cdiv(rows, by), MAX_YZ)
    gx = min(_cdiv(pieces, bx), max(1, _cdiv(sms * 16, gy)), MAX_X)
    return (gx, gy), (bx, by)


@dataclass(frozen=True)
class ReduceGeometry:
    kernel: str          # "row" | "short" | "tile" | "col" | "general"
    grid: tuple          # gridDim, capped at CUDA's limits (the kernels loop over the rest)
    block: tuple         # blockDim
    warp_rows: bool      # row kernel: a warp per row (short rows) instead of a block per row
    length: int          # elements per run (row, general), rows (col)
    chunk: int           # elements (row, general), rows (col) or whole runs (row_multi) per chunk
    n_chunks: int        # > 1: partials in the temporary resource and a finalize pass
    row_multi: bool = False   # row kernel over interleaved axes: `runs` dense runs per output
    runs: int = 1
    smem: int = 0        # static shared memory per block, bytes
    lanes: int = 0       # short: work-items per row (SHORT_LPR)
    col_w: int = 32      # col: adjacent columns per block (COL_W; the other lanes take further rows)

    def fin_lanes(self, n_out: int) -> bool:
        """The second pass takes an output per thread (FIN_LANES) when each has at most FIN_LANES_MAX
        chunks and the outputs are many (FIN_LANES_MIN_OUT): a warp reads 32 adjacent outputs'
        partials of a chunk at once (coalesced), and there is no block per output whose threads
        mostly idle (a column split in 3 chunks ran 32-thread blocks for 32768 outputs: 71 us for
        1.5 MiB of partials on an H200). Fewer outputs take the FIN_W form: a group redoes its open
        outputs one after another, so a few large outputs in a lanes block of 256 would be redone
        by one group, on one SM, instead of by several."""
        return self.n_chunks <= FIN_LANES_MAX and n_out >= FIN_LANES_MIN_OUT

    @staticmethod
    def fin_w(n_out: int) -> int:
        """FIN_W, the outputs a block of the second pass takes when not fin_lanes: 32, or the outputs'
        power of two when they are fewer (a warp then reads 32 / FIN_W chunks of each)."""
        return min(32, 1 << max(0, n_out - 1).bit_length())

    def finalize_geometry(self, n_out: int) -> tuple[tuple, tuple]:
        """(grid, block) of the second pass. FIN_LANES: a thread per output, as many threads as
        outputs in whole warps, at most BLOCK per block. Otherwise BLOCK threads per FIN_W adjacent
        outputs, which take each output's chunks in BLOCK / FIN_W phases and add the phases with a
        tree. The kernel loops past CUDA's grid limit."""
        if self.fin_lanes(n_out):
            block = min(BLOCK, _cdiv(n_out, 32) * 32)
            return (max(1, min(_cdiv(n_out, block), MAX_X)),), (block,)
        return (max(1, min(_cdiv(n_out, self.fin_w(n_out)), MAX_X)),), (BLOCK,)


def _row(plan, n_units: int, length: int, runs: int, target: int, multi: bool) -> ReduceGeometry:
    # a warp per run up to 4096 values (128 a lane, eight passes of four 16-byte loads): its warps run
    # on without the block's barriers between runs; a block per run of 4096 took 129 us for 256 MiB of
    # them on an H200 (0.63 of the read bandwidth: each block waits for its tree before its next run)
    warp_rows = length <= ROW_WARP_MAX
    tpr = 32 if warp_rows else BLOCK
    if warp_rows:
        # warps that each stream a whole run keep the memory busy at half the target's threads: the
        # H200 profile split 16384 runs of 4096 (524288 threads, 3 % short of the target) in two
        # chunks, a finalize pass and partials for nothing
        target //= 2
    if multi:   # chunks of whole runs
        n_chunks = planning.split_count(n_units * tpr, runs, target_units=target,
                                        min_chunk=max(1, _cdiv(tpr * 16, length)))
        chunk = planning.chunk_length(runs, n_chunks)
        n_chunks = _cdiv(runs, chunk)
    else:
        n_chunks = planning.split_count(n_units * tpr, length, target_units=target, min_chunk=tpr * 16)
        chunk = planning.chunk_length(length, n_chunks, 8)
        n_chunks = _cdiv(length, chunk)
    # a warp per row: at most 8 warps per block, fewer when there are fewer rows (idle warps would
    # only hold a block slot)
    per_block = min(BLOCK // 32, n_units) if warp_rows else 1
    block = 32 * per_block if warp_rows else BLOCK
    grid = (min(_cdiv(n_units, per_block), MAX_X), min(n_chunks, MAX_YZ))
    smem = 0 if warp_rows else BLOCK // 32 * plan.acc_bytes
    return ReduceGeometry("row", grid, (block, 1), warp_rows, length, chunk, n_chunks, multi, runs, smem)


def _short(plan, sms: int) -> ReduceGeometry:
    """Rows of at most SHORT_MAX values (gm_reduce_short): ``lanes`` work-items per row, BLOCK // lanes
    rows per pass of a block and SHORT_U passes' rows per work-item; never split (a row is short);
    about 16 blocks per SM, the kernel looping over the rest."""
    lanes = 1 << max(0, plan.n_reduce - 1).bit_length()
    per_block = BLOCK // lanes * SHORT_U
    grid = (max(1, min(_cdiv(plan.n_out, per_block), sms * 16, MAX_X)), 1)
    return ReduceGeometry("short", grid, (BLOCK, 1), False, plan.n_reduce, plan.n_reduce, 1,
                          smem=BLOCK * (plan.acc_bytes + 8), lanes=lanes)


# gm_reduce_tile's types, those with an element form in reduce_kernels.EL_FORMS
TILE_TYPES = frozenset({DataType.FLOAT32, DataType.FLOAT16, DataType.BFLOAT16})


def tile_rows(plan: planning.ReducePlan) -> bool:
    """Short rows gm_reduce_tile takes: a power-of-two length from 2 to SHORT_MAX, the rows dense and
    adjacent (row k at k * length: one kept dimension of that stride, the reduced one of stride 1), in
    FLOAT32, FLOAT16 or BFLOAT16."""
    n = plan.n_reduce
    return (plan.cls == "row" and 2 <= n <= SHORT_MAX and n & (n - 1) == 0 and plan.dtype in TILE_TYPES
            and plan.red_strides == (1,) and len(plan.keep_shape) == 1 and plan.keep_in_strides == (n,))


def _tile(plan, sms: int) -> ReduceGeometry:
    """gm_reduce_tile: a row per thread, BLOCK rows per pass of a block staged in shared memory (the
    row's length plus one per row); about 16 blocks per SM, the kernel looping over the rest."""
    grid = (max(1, min(_cdiv(plan.n_out, BLOCK), sms * 16, MAX_X)), 1)
    return ReduceGeometry("tile", grid, (BLOCK, 1), False, plan.n_reduce, plan.n_reduce, 1,
                          smem=BLOCK * (plan.n_reduce + 1) * int(plan.dtype.element_size))


def reduce_geometry(plan: planning.ReducePlan, *, sms: int) -> ReduceGeometry:
    """GPU mapping: never one block in total, never one block per output when outputs are few:
    the reduced run is split across blocks until the grid has ~4 waves of 256-thread blocks."""
    target = sms * 2048 * 2
    if plan.cls == "col":
        inner, n_outer, length = plan.inner, plan.n_out // plan.inner, plan.red_shape[0]
        col_y = 8
        # columns per block: 32, or the inner width's power of two when narrower (the other lanes take
        # further rows of the same columns)
        col_w = min(32, 1 << max(0, inner - 1).bit_length())
        blocks = _cdiv(inner, col_w) * n_outer
        n_chunks = planning.split_count(blocks * 256, length, target_units=target, min_chunk=64)
        chunk = planning.chunk_length(length, n_chunks)
        n_chunks = _cdiv(length, chunk)
        grid = (min(_cdiv(inner, col_w), MAX_X), min(n_outer, MAX_YZ), min(n_chunks, MAX_YZ))
        return ReduceGeometry("col", grid, (32, col_y), False, length, chunk, n_chunks,
                              smem=col_y * 33 * plan.acc_bytes, col_w=col_w)
    if plan.cls == "row" and plan.n_reduce <= SHORT_MAX:
        return _tile(plan, sms) if tile_rows(plan) else _short(plan, sms)
    if plan.cls == "row":
        return _row(plan, plan.n_out, plan.n_reduce, 1, target, False)
    if len(plan.red_shape) >= 2 and plan.red_strides[-1] == 1 and plan.red_shape[-1] >= 32:
        # interleaved axes with a dense innermost reduced run (per-channel statistics of NCHW data):
        # the row kernel reads each run coalesced; the general kernel would read runs H*W apart
        inner = plan.red_shape[-1]
        return _row(plan, plan.n_out, inner, plan.n_reduce // inner, target, True)
    length = plan.n_reduce
    n_chunks = planning.split_count(plan.n_out, length, target_units=target, min_chunk=256)
    chunk = planning.chunk_length(length, n_chunks)
    n_chunks = _cdiv(length, chunk)
    # a block no wider than the outputs (rounded to a warp): idle threads would only cost occupancy
    block = min(BLOCK, _cdiv(plan.n_out, 32) * 32)
    grid = (min(_cdiv(plan.n_out, block), MAX_X), min(n_chunks, MAX_YZ))
    return ReduceGeometry("general", grid, (block, 1), False, length, chunk, n_chunks)
