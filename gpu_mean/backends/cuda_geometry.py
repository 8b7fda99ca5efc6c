"""CUDA launch geometry: pure functions of a plan and the device's shape, tested without a GPU."""
from __future__ import annotations

from dataclasses import dataclass

from ..runtime import planning


def cuda_ew_grid(n: int, vec: int, block: int, sms: int) -> tuple:
    """Grid-stride element-wise launch: one pass when small, at most 8 blocks of 256 per SM (H200: 132 SMs)."""
    items = max(1, -(-n // vec))
    return (max(1, min(-(-items // block), sms * 8)),)


@dataclass(frozen=True)
class CudaReduceGeometry:
    kernel: str          # "row" | "col" | "general"
    grid: tuple          # gridDim
    block: tuple         # blockDim
    warp_rows: bool      # row kernel: a warp per row (short rows) instead of a block per row
    length: int
    chunk: int
    n_chunks: int


def cuda_reduce_geometry(plan: planning.ReducePlan, *, sms: int) -> CudaReduceGeometry:
    """GPU mapping: never one block in total, never one block per output when outputs are few:
    the reduced run is split across blocks until the grid has ~4 waves of 256-thread blocks."""
    target_threads = sms * 2048 * 2
    if plan.cls == "col":
        inner, n_outer, length = plan.inner, plan.n_out // plan.inner, plan.red_shape[0]
        col_y = 8
        blocks = -(-inner // 32) * n_outer
        n_chunks = planning.split_count(blocks * 256, length, target_units=target_threads, min_chunk=64)
        chunk = planning.chunk_length(length, n_chunks)
        n_chunks = -(-length // chunk)
        return CudaReduceGeometry("col", (-(-inner // 32), n_outer, n_chunks), (32, col_y), False, length, chunk,
                                  n_chunks)
    length = plan.n_reduce
    if plan.cls == "row":
        warp_rows = length <= 2048
        threads_per_row = 32 if warp_rows else 256
        n_chunks = planning.split_count(plan.n_out * threads_per_row, length, target_units=target_threads,
                                        min_chunk=threads_per_row * 16)
        chunk = planning.chunk_length(length, n_chunks, 8)
        n_chunks = -(-length // chunk)
        rows_per_block = 8 if warp_rows else 1
        return CudaReduceGeometry("row", (-(-plan.n_out // rows_per_block), n_chunks), (256, 1), warp_rows, length,
                                  chunk, n_chunks)
    n_chunks = planning.split_count(plan.n_out, length, target_units=target_threads, min_chunk=256)
    chunk = planning.chunk_length(length, n_chunks)
    n_chunks = -(-length // chunk)
    return CudaReduceGeometry("general", (-(-plan.n_out // 256), n_chunks), (256, 1), False, length, chunk, n_chunks)
