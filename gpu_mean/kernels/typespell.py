"""Type names and macro headers for the kernels: one table of OpenCL C names, which the CUDA
dialect (cuda_kernels/dialect.h) maps, so one spelling serves both APIs.

The plan (gpu_mean/runtime/planning.py) decides every type: storage, compute, accumulator, output.
This module only spells them. Macros take one style: a key is a name, or a function-like macro
written with its parameters (``"LOAD1(p)"``), and ``header`` turns the dict into ``#define`` lines.
"""
from __future__ import annotations

from ..descriptors.types import DataType as D
from ..descriptors.types import KernelOp
from ..runtime.planning import unsigned_of

# DataType -> OpenCL C name (the CUDA dialect typedefs uchar, ushort, uint, ulong; half is CUDA's own).
# BFLOAT16 is storage only: its bits in a ushort (common.h converts them)
_NAMES = {
    D.FLOAT32: "float", D.FLOAT16: "half", D.FLOAT64: "double", D.BFLOAT16: "ushort",
    D.INT8: "char", D.INT16: "short", D.INT32: "int",
    D.INT64: "long", D.UINT8: "uchar", D.UINT16: "ushort", D.UINT32: "uint", D.UINT64: "ulong",
}
# the element-wise kernels' OP macro
OP_CODE = {KernelOp.MEAN: 1, KernelOp.ADD: 2, KernelOp.IDENTITY: 3, KernelOp.NARY_MEAN: 4}


class Speller:
    def __call__(self, dt: D) -> str:
        return _NAMES[dt]

    def unsigned(self, dt: D) -> str:
        """The unsigned type of ``dt``'s width (bit copies, wrapping integer arithmetic)."""
        return self(unsigned_of(dt))


OPENCL = Speller()


def header(macros: dict) -> str:
    """``#define`` lines; a key with parentheses is a function-like macro (no space before them)."""
    return "".join(f"#define {k} {v}\n" for k, v in macros.items())


def cache_key(filename: str, macros: dict) -> tuple:
    return filename, tuple(sorted((k, str(v)) for k, v in macros.items()))
