"""Finding kernel source files, from a source checkout or from an installed wheel."""
from __future__ import annotations

from functools import cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent


@cache
def kernel_dir(kind: str) -> Path:
    """``kind`` is "opencl_kernels" or "cuda_kernels". A wheel puts them inside the package;
    a checkout keeps them at the repository root beside the package."""
    for cand in (_PKG / kind, _PKG.parent / kind):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"gpu_mean: kernel folder {kind!r} not found next to {_PKG}")


@cache
def kernel_source(kind: str, name: str) -> str:
    return (kernel_dir(kind) / name).read_text()
