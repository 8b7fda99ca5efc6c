"""Launch geometry: pure functions shared by the OpenCL and CUDA backends, tested without a device."""
from __future__ import annotations

from dataclasses import dataclass

from ..runtime import planning


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def ew_contig_geometry(n: int, vec: int, is_cpu: bool) -> tuple[tuple, tuple]:
    """1-D NDRange: one work-item per ``vec`` elements, a fixed local size (PoCL specializes per size)."""
    local = 256
    items = max(1, -(-n // vec))
    return (round_up(items, local),), (local,)


def round_up_geometry(n: int, local: int) -> tuple[tuple, tuple]:
    return (round_up(max(n, 1), local),), (local,)


@dataclass(frozen=True)
class ReduceGeometry:
    kernel: str          # "row" | "col" | "general"
    grid: tuple          # global size
    length: int          # reduced run length (elements for row/general, rows for col)
    chunk: int           # elements (or rows) per chunk
    n_chunks: int        # > 1: partials in the temporary resource and a finalize pass
    cols: int            # columns per work-item (col kernel)


def reduce_geometry(plan: planning.ReducePlan, *, is_cpu: bool, compute_units: int,
                    cols: int = 32) -> ReduceGeometry:
    """Pick the kernel for the plan's class and cut the reduced run when outputs are too few.

    CPU devices (PoCL): ~16 work-items per core are enough, and chunks stay long (>= 32K elements,
    >= 64 rows) so each work-item streams. GPUs want far more independent work.
    """
    target = compute_units * (16 if is_cpu else 512)
    if plan.cls == "col":
        n_cb = -(-plan.inner // cols)
        n_outer = plan.n_out // plan.inner
        length = plan.red_shape[0]
        n_chunks = planning.split_count(n_cb * n_outer, length, target_units=target,
                                        min_chunk=64 if is_cpu else 16)
        chunk = planning.chunk_length(length, n_chunks)
        n_chunks = -(-length // chunk)
        return ReduceGeometry("col", (n_cb, n_outer, n_chunks), length, chunk, n_chunks, cols)
    length = plan.n_reduce
    n_chunks = planning.split_count(plan.n_out, length, target_units=target, min_chunk=32768 if is_cpu else 4096)
    chunk = planning.chunk_length(length, n_chunks, 8)
    n_chunks = -(-length // chunk)
    return ReduceGeometry(plan.cls if plan.cls == "row" else "general", (plan.n_out, n_chunks), length, chunk,
                          n_chunks, cols)
