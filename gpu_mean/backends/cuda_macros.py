"""Macro sets for cuda_kernels/*.cu: pure, so CI (no GPU) compile-checks every variant with nvcc."""
from __future__ import annotations

import numpy as np

from ..descriptors.types import DataType
from ..runtime import planning

D = DataType
_T = {D.FLOAT32: "float", D.FLOAT16: "__half", D.FLOAT64: "double", D.INT32: "int", D.UINT32: "unsigned int",
      D.INT8: "signed char", D.UINT8: "unsigned char", D.INT16: "short", D.UINT16: "unsigned short",
      D.INT64: "long long", D.UINT64: "unsigned long long"}
_U = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


def ew_macros(op: str, dt: DataType, n_inputs: int, ndim: int, has_scale_bias: bool) -> dict:
    code = {"mean": 1, "add": 2, "identity": 3, "nary_mean": 4}[op]
    size = int(dt.element_size)
    m = {"OP": code, "NIN": n_inputs, "NDIM": ndim, "VEC": 16 // size, "HAS_SCALE_BIAS": int(has_scale_bias),
         "IS_FLOAT": int(dt.is_float), "ACC_DOUBLE": int(op == "nary_mean" and dt.is_float)}
    if op == "identity" and not has_scale_bias:
        t = _U[size]   # a bit copy
        m.update(T=t, CT=t, IS_FLOAT=0, **{"TO_CT(x)": "(x)", "FROM_CT(x)": "(x)"})
    elif dt == D.FLOAT16:
        m.update(T="__half", CT="float", **{"TO_CT(x)": "__half2float(x)", "FROM_CT(x)": "__float2half_rn(x)",
                                            "FROM_ACC(x)": "__double2half(x)"})
    elif dt in (D.FLOAT32, D.FLOAT64):
        t = _T[dt]
        m.update(T=t, CT=t, **{"TO_CT(x)": "(x)", "FROM_CT(x)": "(x)", "FROM_ACC(x)": f"(({t})(x))"})
    elif op in ("mean", "nary_mean"):
        ct = "long long" if dt == D.INT32 else "unsigned long long"
        m.update(T=_T[dt], CT=ct, **{"TO_CT(x)": f"(({ct})(x))", "FROM_CT(x)": f"(({_T[dt]})(x))"})
    else:  # integer ADD wraps: compute in 64-bit unsigned, truncate through the unsigned type of the width
        m.update(T=_T[dt], CT="unsigned long long",
                 **{"TO_CT(x)": "((unsigned long long)(x))", "FROM_CT(x)": f"(({_T[dt]})({_U[size]})(x))"})
    return m


def reduce_macros(dt: DataType, plan: planning.ReducePlan, block: int, warp_rows: bool, col_y: int) -> dict:
    m = {"KN": len(plan.keep_shape), "RN": len(plan.red_shape), "BLOCK": block, "WARP_ROWS": int(warp_rows),
         "COL_Y": col_y}
    if dt in (D.INT32, D.UINT32):
        acc = "long long" if dt == D.INT32 else "unsigned long long"
        m.update(T=_T[dt], ACC=acc, **{"TO_ACC(x)": f"(({acc})(x))",
                                       "STORE_RESULT(t, n, p)": f"(*(p) = ({_T[dt]})((t) / ({acc})(n)))"})
    elif dt == D.FLOAT16:
        m.update(T="__half", ACC="double", **{"TO_ACC(x)": "((double)__half2float(x))",
                                              "STORE_RESULT(t, n, p)": "(*(p) = __double2half((t) / (double)(n)))"})
    else:
        m.update(T="float", ACC="double", **{"TO_ACC(x)": "((double)(x))",
                                             "STORE_RESULT(t, n, p)": "(*(p) = __double2float_rn((t) / (double)(n)))"})
    return m


def header(macros: dict) -> str:
    return "".join(f"#define {k} {v}\n" for k, v in macros.items())


def inputs_struct(n_inputs: int) -> np.dtype:
    """The by-value ``gm_inputs`` struct: NIN 64-bit pointers (binding offsets already added)."""
    return np.dtype([("p", np.uint64, (n_inputs,))], align=True)


def pack_inputs(pointers) -> np.ndarray:
    arr = np.zeros(1, inputs_struct(len(pointers)))
    arr["p"][0] = pointers
    return arr
