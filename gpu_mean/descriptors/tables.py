"""Tensor-support tables, transcribed from the DirectML operator pages.

Each table lists rows newest first: (minimum feature level, allowed dimension counts, data types).
The first row whose level is <= the device's level applies (docs/design.md, "DirectML rules enforced").
"""
from __future__ import annotations

from .types import DataType as D
from .types import FeatureLevel as FL

F32, F16, F64, BF16 = D.FLOAT32, D.FLOAT16, D.FLOAT64, D.BFLOAT16
I8, I16, I32, I64 = D.INT8, D.INT16, D.INT32, D.INT64
U8, U16, U32, U64 = D.UINT8, D.UINT16, D.UINT32, D.UINT64

DIMS_1_8 = frozenset(range(1, 9))
DIMS_4 = frozenset({4})
DIMS_4_5 = frozenset({4, 5})

# DML_ELEMENT_WISE_MEAN_OPERATOR_DESC [MEAN]. Release notes say 5D before FL 3.0; the table says 4: we follow the table.
ELEMENT_WISE_MEAN = (
    (FL.FL_3_0, DIMS_1_8, frozenset({F32, F16, I32, U32})),
    (FL.FL_2_1, DIMS_4, frozenset({F32, F16, I32, U32})),
    (FL.FL_1_0, DIMS_4, frozenset({F32, F16})),
)

# DML_REDUCE_OPERATOR_DESC, function AVERAGE (same group as L2, LOG_SUM, LOG_SUM_EXP) [RED]
REDUCE_AVERAGE = (
    (FL.FL_3_0, DIMS_1_8, frozenset({F32, F16})),
    (FL.FL_1_0, DIMS_4, frozenset({F32, F16})),
)

# DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC [ID]
ELEMENT_WISE_IDENTITY = (
    (FL.FL_4_1, DIMS_1_8, frozenset({F64, F32, F16, I64, I32, I16, I8, U64, U32, U16, U8})),
    (FL.FL_3_0, DIMS_1_8, frozenset({F32, F16, I32, I16, I8, U32, U16, U8})),
    (FL.FL_2_1, DIMS_4_5, frozenset({F32, F16, I32, I16, I8, U32, U16, U8})),
    (FL.FL_1_0, DIMS_4_5, frozenset({F32, F16})),
)

# DML_ELEMENT_WISE_ADD_OPERATOR_DESC, current learn page [ADD]
ELEMENT_WISE_ADD = (
    (FL.FL_5_1, DIMS_1_8, frozenset({F32, F16, I64, I32, I16, I8, U64, U32, U16, U8})),
    (FL.FL_4_1, DIMS_1_8, frozenset({F32, F16, I64, I32, U64, U32})),
    (FL.FL_3_0, DIMS_1_8, frozenset({F32, F16, I32, U32})),
    (FL.FL_2_1, DIMS_4_5, frozenset({F32, F16, I32, U32})),
    (FL.FL_1_0, DIMS_4_5, frozenset({F32, F16})),
)

# gm.ext operators are not DirectML's: they follow the FL 3.0 shape rules and take the types the
# frontends need. They have no rows below FL 3.0.
# The four types DirectML's mean operators take, and the four the extension adds (docs/design.md,
# "Extension types"): the ONNX operators' other types.
DIRECTML_MEAN_TYPES = frozenset({F32, F16, I32, U32})
EXTENSION_TYPES = frozenset({BF16, F64, I64, U64})
EXT_NARY_MEAN = ((FL.FL_3_0, DIMS_1_8, DIRECTML_MEAN_TYPES | EXTENSION_TYPES),)
EXT_INTEGER_REDUCE_MEAN = ((FL.FL_3_0, DIMS_1_8, frozenset({I32, U32})),)
# ext.MeanDesc and ext.ReduceMeanDesc: the extension types only (the DirectML types have DirectML's
# ELEMENT_WISE_MEAN and REDUCE, and IntegerReduceMeanDesc)
EXT_MEAN = ((FL.FL_3_0, DIMS_1_8, EXTENSION_TYPES),)
EXT_REDUCE_MEAN = ((FL.FL_3_0, DIMS_1_8, EXTENSION_TYPES),)
# ReduceSumDesc: inputs, each summed into its wide type (the output's only valid type). FLOAT64, INT64
# and UINT64 totals need 128 bits: a high and a low word, in two output tensors (WIDE_SUM_LOW_TYPE)
EXT_REDUCE_SUM = ((FL.FL_3_0, DIMS_1_8, DIRECTML_MEAN_TYPES | EXTENSION_TYPES),)
EXT_REDUCE_SUM_OUTPUT = ((FL.FL_3_0, DIMS_1_8, frozenset({F64, I64, U64})),)
WIDE_SUM_TYPE = {F32: F64, F16: F64, BF16: F64, I32: I64, U32: U64, F64: F64, I64: I64, U64: U64}
# the low word of a two-word total: FLOAT64 hi + lo (double-double), INT64/UINT64 hi * 2^64 + lo
WIDE_SUM_LOW_TYPE = {F64: F64, I64: U64, U64: U64}


def support_row(table, level: FL):
    """The row of ``table`` in force at ``level``, or None when the operator does not exist there."""
    for row in table:
        if level >= row[0]:
            return row
    return None


def describe_row(row) -> str:
    lvl, dims, types = row
    d = sorted(dims)
    dims_s = f"{d[0]}-{d[-1]}" if len(d) > 1 else str(d[0])
    return f"FL {lvl.label}: {dims_s} dimensions, " + ", ".join(sorted(t.name for t in types))
