"""Macro sets and by-value argument structs for cuda_kernels/elementwise.cu from a plan: pure, so CI
(no GPU) compiles every variant, and the kernels' static_asserts check that each struct's numpy
layout here is the C layout there. (The reduction family is portable: backends/reduce_kernels.py.)"""
from __future__ import annotations

import functools

import numpy as np

from ..descriptors.types import DataType, KernelOp
from ..runtime import planning
from .typespell import CUDA as spell
from .typespell import OP_CODE

D = DataType
INT31 = 1 << 31


def ew_index_is_32bit(plan: planning.ElementwisePlan) -> bool:
    """32-bit index arithmetic is exact when every flat index and every operand offset is below 2^31
    (the magic-number division needs n < 2^31 for its add not to overflow)."""
    if plan.count >= INT31:
        return False
    return all(sum((s - 1) * st for s, st in zip(plan.shape, strides)) < INT31 for strides in plan.strides)


def ew_macros(plan: planning.ElementwisePlan) -> dict:
    dt, ct = plan.dtype, plan.compute
    size = int(dt.element_size)
    idx32 = ew_index_is_32bit(plan)
    m = {"OP": OP_CODE[plan.op], "NIN": plan.n_inputs, "NDIM": plan.ndim, "VEC": 16 // size,
         "HAS_SCALE_BIAS": int(plan.has_scale_bias), "IS_FLOAT": int(dt.is_float and not plan.bit_copy),
         "ACC_DOUBLE": int(plan.op == KernelOp.NARY_MEAN and dt.is_float),
         "IDX32": int(idx32), "IDX": "unsigned int" if idx32 else "unsigned long long",
         "ST": _stride_ctype(plan), "DIMS_BYTES": dims_struct(plan).itemsize}
    if plan.bit_copy:
        t = spell(ct)
        m.update({"T": t, "CT": t, "TO_CT(x)": "(x)", "FROM_CT(x)": "(x)"})
    elif dt == D.FLOAT16:
        m.update({"T": "__half", "CT": "float", "TO_CT(x)": "__half2float(x)", "FROM_CT(x)": "__float2half_rn(x)",
                  "FROM_ACC(x)": "__double2half(x)"})
    elif dt.is_float:
        t = spell(dt)
        m.update({"T": t, "CT": t, "TO_CT(x)": "(x)", "FROM_CT(x)": "(x)", "FROM_ACC(x)": f"(({t})(x))"})
    elif plan.op in (KernelOp.MEAN, KernelOp.NARY_MEAN):
        c = spell(ct)
        m.update({"T": spell(dt), "CT": c, "TO_CT(x)": f"(({c})(x))", "FROM_CT(x)": f"(({spell(dt)})(x))"})
    else:  # integer ADD wraps: compute in 64-bit unsigned, truncate through the unsigned type of the width
        m.update({"T": spell(dt), "CT": spell(ct), "TO_CT(x)": f"(({spell(ct)})(x))",
                  "FROM_CT(x)": f"(({spell(dt)})({spell.unsigned(dt)})(x))"})
    return m


def _stride_ctype(plan) -> str:
    wide = any(s >= 1 << 32 for st in plan.strides for s in st)
    return "unsigned long long" if wide else "unsigned int"


def dims_struct(plan: planning.ElementwisePlan) -> np.dtype:
    """numpy twin of the kernels' ``gm_dims``: sizes, magic divisors, then every operand's strides."""
    idx = np.uint32 if ew_index_is_32bit(plan) else np.uint64
    st = np.uint64 if _stride_ctype(plan) == "unsigned long long" else np.uint32
    nd = plan.ndim
    return np.dtype([("size", idx, (nd,)), ("magic", np.uint32, (nd,)), ("shift", np.uint32, (nd,)),
                     ("stride", st, (plan.n_inputs + 1, nd))], align=True)


def magic_divisor(d: int) -> tuple[int, int]:
    """(magic, shift) with n // d == (umulhi(n, magic) + n) >> shift for 0 <= n < 2^31, 1 <= d < 2^31
    (Granlund and Montgomery's round-up method; the add cannot overflow 32 bits below 2^31)."""
    if not 1 <= d < INT31:
        raise ValueError(f"magic divisor {d} out of range")
    shift = (d - 1).bit_length()
    return ((1 << 32) * ((1 << shift) - d)) // d + 1, shift


def magic_div(n: int, magic: int, shift: int) -> int:
    """The kernels' 32-bit division, on the host (tests compare it with ``//``)."""
    t = (n * magic) >> 32
    return ((t + n) & 0xFFFFFFFF) >> shift


def pack_dims(plan: planning.ElementwisePlan) -> np.ndarray:
    arr = np.zeros(1, dims_struct(plan))
    arr["size"][0] = plan.shape
    if ew_index_is_32bit(plan):
        arr["magic"][0], arr["shift"][0] = zip(*(magic_divisor(s) for s in plan.shape))
    arr["stride"][0] = plan.strides
    return arr


@functools.cache
def inputs_struct(n_inputs: int) -> np.dtype:
    """The by-value ``gm_inputs`` struct: NIN 64-bit pointers (binding offsets already added)."""
    return np.dtype([("p", np.uint64, (n_inputs,))], align=True)


def pack_inputs(pointers) -> np.ndarray:
    arr = np.zeros(1, inputs_struct(len(pointers)))
    arr["p"][0] = pointers
    return arr
