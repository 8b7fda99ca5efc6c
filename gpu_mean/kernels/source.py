"""Finding kernel source files (from a source checkout or an installed wheel), the text each API's
compiler receives, and the bounded cache of programs built from them."""
from __future__ import annotations

import re
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
# a line that names another file of opencl_kernels/, which the host puts in its place
_INCLUDE = re.compile(r'^#include "([\w.]+)"[ \t]*\n', re.M)


def includes(name: str) -> list[str]:
    """The files of opencl_kernels/ that ``name`` includes (its ``#include "..."`` lines, then theirs,
    depth first, in the order the assembled text holds them), ``name`` excluded."""
    out: list[str] = []
    for m in _INCLUDE.finditer(kernel_source("opencl_kernels", name)):
        out += [m.group(1)] + includes(m.group(1))
    return out


@cache
def assembled(name: str) -> str:
    """A kernel file of opencl_kernels/ with each ``#include "file"`` line replaced by that file,
    itself assembled: the text after the dialect header, the same for both APIs. Every file is
    included once at most (a second include is an error, not skipped: an include under an ``#if``
    is then never the only one); what the compilers receive has no include of its own."""
    seen = includes(name)
    dup = {f for f in seen if seen.count(f) > 1}
    if dup or name in seen:
        raise ValueError(f"gpu_mean: {name} includes {sorted(dup | ({name} & set(seen)))} more than once")

    def expand(text: str) -> str:
        return _INCLUDE.sub(lambda m: expand(kernel_source("opencl_kernels", m.group(1))), text)

    return expand(kernel_source("opencl_kernels", name))


def kernel_text(api: str, filename: str, macros: dict) -> str:
    """What ``api``'s compiler receives for one variant of a portable kernel file in opencl_kernels/:
    the variant's ``#define`` lines, the API's dialect header, then the file with its includes in
    place (``assembled``: opencl_kernels/common.h and the family's headers), byte for byte the same
    for both APIs."""
    folder, dialect = DIALECT[api]
    return header(macros) + kernel_source(folder, dialect) + assembled(filename)


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

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        return len(self._items)
