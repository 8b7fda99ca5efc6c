"""Type names and macro headers for the kernel languages: one table, one speller per language.

The plan (gpu_mean/runtime/planning.py) decides every type: storage, compute, accumulator, output.
This module only spells them. Both languages take macros in one style: a key is a name, or a
function-like macro written with its parameters (``"LOAD1(p)"``), and ``header`` turns the dict into
``#define`` lines.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..descriptors.types import DataType as D
from ..descriptors.types import KernelOp
from ..runtime.planning import unsigned_of

# DataType -> (OpenCL C, CUDA C++)
_NAMES = {
    D.FLOAT32: ("float", "float"), D.FLOAT16: ("half", "__half"), D.FLOAT64: ("double", "double"),
    D.INT8: ("char", "signed char"), D.INT16: ("short", "short"), D.INT32: ("int", "int"),
    D.INT64: ("long", "long long"), D.UINT8: ("uchar", "unsigned char"), D.UINT16: ("ushort", "unsigned short"),
    D.UINT32: ("uint", "unsigned int"), D.UINT64: ("ulong", "unsigned long long"),
}
# the element-wise kernels' OP macro, the same in both languages
OP_CODE = {KernelOp.MEAN: 1, KernelOp.ADD: 2, KernelOp.IDENTITY: 3, KernelOp.NARY_MEAN: 4}


@dataclass(frozen=True)
class Speller:
    column: int     # which name of _NAMES this language uses

    def __call__(self, dt: D) -> str:
        return _NAMES[dt][self.column]

    def unsigned(self, dt: D) -> str:
        """The unsigned type of ``dt``'s width (bit copies, wrapping integer arithmetic)."""
        return self(unsigned_of(dt))


OPENCL = Speller(0)
CUDA = Speller(1)


def header(macros: dict) -> str:
    """``#define`` lines; a key with parentheses is a function-like macro (no space before them)."""
    return "".join(f"#define {k} {v}\n" for k, v in macros.items())


def cache_key(filename: str, macros: dict) -> tuple:
    return filename, tuple(sorted((k, str(v)) for k, v in macros.items()))
