"""Finding kernel source files (from a source checkout or an installed wheel), the text each API's
compiler receives, and the bounded cache of programs built from them."""
from __future__ import annotations

import threading
from collections import OrderedDict
from functools import cache
from pathlib import Path

from .typespell import header

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


# the dialect header of each API (docs/design.md, "Kernels"): what goes between a variant's macros
# and a kernel file written in the portable dialect
DIALECT = {"opencl": ("opencl_kernels", "dialect.h"), "cuda": ("cuda_kernels", "dialect.h")}
# what every kernel file shares, after the dialect: the global-memory accessor and the checked build
COMMON = "common.h"


# headers a kernel file needs after common.h: exact.h's superaccumulator, the correctly rounded
# means' exact path (issue 22), for both families
HEADERS = {"reduce.cl": ("exact.h",), "elementwise.cl": ("exact.h",)}


def kernel_text(api: str, filename: str, macros: dict) -> str:
    """What ``api``'s compiler receives for one variant of a portable kernel file in opencl_kernels/:
    the variant's ``#define`` lines, the API's dialect header, then opencl_kernels/common.h, the
    file's own headers (``HEADERS``) and the file, byte for byte the same for both APIs."""
    folder, dialect = DIALECT[api]
    return (header(macros) + kernel_source(folder, dialect) + kernel_source("opencl_kernels", COMMON)
            + "".join(kernel_source("opencl_kernels", h) for h in HEADERS.get(filename, ()))
            + kernel_source("opencl_kernels", filename))


class ProgramCache:
    """Built programs by (file, macro set), least recently used first out: a long-running process
    that meets many shapes (a fuzzer, a server) keeps a bounded number of programs alive."""

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, build):
        with self._lock:
            prg = self._items.get(key)
            if prg is not None:
                self._items.move_to_end(key)
                return prg
        prg = build()
        with self._lock:
            self._items[key] = prg
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return prg

    def __len__(self) -> int:
        return len(self._items)
