"""Macro sets for cuda_kernels/*.cu from a plan: pure, so CI (no GPU) compile-checks every variant."""
from __future__ import annotations

import numpy as np

from ..descriptors.types import DataType, KernelOp
from ..runtime import planning
from .typespell import CUDA as spell

D = DataType
OP_CODE = {KernelOp.MEAN: 1, KernelOp.ADD: 2, KernelOp.IDENTITY: 3, KernelOp.NARY_MEAN: 4}


def ew_macros(plan: planning.ElementwisePlan) -> dict:
    dt, ct = plan.dtype, plan.compute
    size = int(dt.element_size)
    m = {"OP": OP_CODE[plan.op], "NIN": plan.n_inputs, "NDIM": plan.ndim, "VEC": 16 // size,
         "HAS_SCALE_BIAS": int(plan.has_scale_bias), "IS_FLOAT": int(dt.is_float and not plan.bit_copy),
         "ACC_DOUBLE": int(plan.op == KernelOp.NARY_MEAN and dt.is_float)}
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


def reduce_macros(plan: planning.ReducePlan, block: int, warp_rows: bool, col_y: int) -> dict:
    dt, acc = plan.dtype, spell(plan.acc)
    m = {"KN": len(plan.keep_shape), "RN": len(plan.red_shape), "BLOCK": block, "WARP_ROWS": int(warp_rows),
         "COL_Y": col_y, "T": spell(dt), "ACC": acc, "OUT_T": spell(plan.output_type)}
    m["TO_ACC(x)"] = f"(({acc})__half2float(x))" if dt == D.FLOAT16 else f"(({acc})(x))"
    if plan.op == KernelOp.REDUCE_SUM:
        m["STORE_RESULT(t, n, p)"] = "(*(p) = (t))"
    elif dt == D.FLOAT16:
        m["STORE_RESULT(t, n, p)"] = "(*(p) = __double2half((t) / (double)(n)))"
    elif dt == D.FLOAT32:
        m["STORE_RESULT(t, n, p)"] = "(*(p) = __double2float_rn((t) / (double)(n)))"
    else:   # C division truncates toward zero
        m["STORE_RESULT(t, n, p)"] = f"(*(p) = ({spell(dt)})((t) / ({acc})(n)))"
    return m


def inputs_struct(n_inputs: int) -> np.dtype:
    """The by-value ``gm_inputs`` struct: NIN 64-bit pointers (binding offsets already added)."""
    return np.dtype([("p", np.uint64, (n_inputs,))], align=True)


def pack_inputs(pointers) -> np.ndarray:
    arr = np.zeros(1, inputs_struct(len(pointers)))
    arr["p"][0] = pointers
    return arr
