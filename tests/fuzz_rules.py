"""The validity rules a fuzzed case must satisfy, written in the tests' own words from DirectML's
documented rules (docs/design.md, "DirectML rules enforced") and the extension operators' rules, so
that tests/test_fuzz.py checks a refusal against the rules, not against another device running the
same validation code. Only the per-level support tables (which ranks and data types an operator takes
at a feature level: DirectML's published data) are read from gpu_mean.descriptors.tables.

``broken_rule(case)`` returns the first rule the case breaks, or None when a correct implementation
must accept it. It works on the case's plain field values (tests/fuzz_cases.py), never on a built
descriptor, and computes byte sizes, last indices and overlaps itself.
"""
from __future__ import annotations

import numpy as np

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.descriptors import tables

UINT32_MAX = 2**32 - 1
# operators whose tensors all share one data type and one shape (broadcast only through 0 strides)
ELEMENTWISE = ("mean", "add", "identity", "identity_sb", "nary", "ext_mean")
# bytes per element (the fuzzer never draws the 4-bit types)
ELEMENT_BYTES = {D.FLOAT32: 4, D.FLOAT16: 2, D.UINT32: 4, D.UINT16: 2, D.UINT8: 1, D.INT32: 4, D.INT16: 2,
                 D.INT8: 1, D.FLOAT64: 8, D.UINT64: 8, D.INT64: 8, D.BFLOAT16: 2}
# DirectML's sum types (the wide sum of gm.ext): the total's type, and its low word's where it takes two
SUM_TYPE = {D.FLOAT32: D.FLOAT64, D.FLOAT16: D.FLOAT64, D.BFLOAT16: D.FLOAT64, D.INT32: D.INT64, D.UINT32: D.UINT64,
            D.FLOAT64: D.FLOAT64, D.INT64: D.INT64, D.UINT64: D.UINT64}
SUM_LOW_TYPE = {D.FLOAT64: D.FLOAT64, D.INT64: D.UINT64, D.UINT64: D.UINT64}
FLOAT_SCALE_BIAS = (D.FLOAT32, D.FLOAT16, D.FLOAT64)
MAX_NARY_INPUTS = 64


def _strides(kw) -> tuple:
    sizes, strides = tuple(kw["sizes"]), kw.get("strides")
    if strides is not None:
        return tuple(strides)
    out, acc = [], 1
    for s in reversed(sizes):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _offsets(sizes, strides) -> np.ndarray:
    offs = np.zeros(1, np.int64)
    for n, s in zip(sizes, strides):
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    return offs


def tensor_rule(kw, table, level, *, output: bool) -> str | None:
    """The first buffer-tensor rule ``kw`` (TensorDesc's keyword arguments) breaks."""
    row = tables.support_row(table, level)
    if row is None:
        return "the operator does not exist at this feature level"
    _, dims, types = row
    dt, sizes = D(kw["data_type"]), tuple(kw["sizes"])
    if len(sizes) not in dims:
        return f"DimensionCount {len(sizes)} not in the level's table"
    if dt not in types:
        return f"data type {dt.name} not in the level's table"
    if any(s <= 0 for s in sizes):
        return "a size of 0"
    given = kw.get("strides")
    if given is not None:
        if len(given) != len(sizes):
            return "one stride per dimension"
        if any(not 0 <= s <= UINT32_MAX for s in given):
            return "a stride past UINT32"
    strides = _strides(kw)
    count = int(np.prod(sizes, dtype=object)) if sizes else 1
    last = sum((n - 1) * s for n, s in zip(sizes, strides))
    if count > UINT32_MAX or last + 1 > UINT32_MAX:
        return "more than 2^32 - 1 elements addressed"
    # DMLCalcBufferTensorSize: the bytes up to the last addressed element, rounded up to 4
    minimum = ((last + 1) * ELEMENT_BYTES[dt] + 3) // 4 * 4
    total = kw.get("total_size_in_bytes")
    total = minimum if total is None else total
    if total < minimum:
        return "TotalTensorSizeInBytes below DMLCalcBufferTensorSize"
    if total % 4:
        return "TotalTensorSizeInBytes not a multiple of 4"
    a = kw.get("guaranteed_base_offset_alignment", 0)
    if not 0 <= a <= UINT32_MAX or (a and (a & (a - 1) or a < ELEMENT_BYTES[dt])):
        return "GuaranteedBaseOffsetAlignment not 0 or a power of two >= the element size"
    flags = int(kw.get("flags", 0))
    if flags & ~1 or flags < 0:
        return "Flags bits other than OWNED_BY_DML"
    if output and flags & 1:
        return "OWNED_BY_DML on an output"
    if output:
        offs = _offsets(sizes, strides)
        if np.unique(offs).size != offs.size:
            return "an output whose elements overlap"
    return None


def broken_rule(case, table, output_table=None) -> str | None:
    """The first rule ``case`` (tests/fuzz_cases.Case without a wrongly typed field) breaks at its
    feature level, or None. ``table`` / ``output_table``: the operator's support tables."""
    tensors = case.tensors
    inputs = [kw for name, kw in tensors if not name.startswith("Output")]
    outputs = [kw for name, kw in tensors if name.startswith("Output")]
    if case.op == "reduce":
        fn = case.function
        if fn not in list(gm.ReduceFunction):
            return "Function is not a DML_REDUCE_FUNCTION"
        if gm.ReduceFunction(fn) != gm.ReduceFunction.AVERAGE:
            return "only AVERAGE is implemented"
    if case.op == "nary" and not 1 <= len(inputs) <= MAX_NARY_INPUTS:
        return "the n-ary mean takes 1 to 64 inputs"
    if case.op == "sum":
        dt = D(inputs[0]["data_type"])
        has_low = len(outputs) > 1
        if dt in SUM_LOW_TYPE and not has_low:
            return "the wide sum of a 128-bit total needs OutputLowTensor"
        if dt not in SUM_LOW_TYPE and has_low and dt in SUM_TYPE:
            return "OutputLowTensor given for a one-word total"
    for kw in inputs:
        why = tensor_rule(kw, table, case.level, output=False)
        if why:
            return f"input: {why}"
    for kw in outputs:
        why = tensor_rule(kw, output_table or table, case.level, output=True)
        if why:
            return f"output: {why}"
    if case.op in ELEMENTWISE:
        first = tensors[0][1]
        for _, kw in tensors[1:]:
            if D(kw["data_type"]) != D(first["data_type"]):
                return "element-wise tensors of different data types"
            if tuple(kw["sizes"]) != tuple(first["sizes"]):
                return "element-wise tensors of different sizes"
        if case.op == "identity_sb" and case.scale_bias is not None \
                and D(first["data_type"]) not in FLOAT_SCALE_BIAS:
            return "ScaleBias on a non-float tensor"
        return None
    inp, out = inputs[0], outputs[0]
    rank = len(inp["sizes"])
    axes = tuple(case.axes)
    if any(not 0 <= a < rank for a in axes):
        return "an axis out of range"
    if len(set(axes)) != len(axes):
        return "a duplicate axis"
    dt = D(inp["data_type"])
    if case.op == "sum":
        if D(out["data_type"]) != SUM_TYPE[dt]:
            return "the wide sum's output type"
        if len(outputs) > 1:
            if D(outputs[1]["data_type"]) != SUM_LOW_TYPE[dt]:
                return "the wide sum's low word type"
            if tuple(outputs[1]["sizes"]) != tuple(out["sizes"]):
                return "the two words of a total have one shape"
    elif D(out["data_type"]) != dt:
        return "a reduction's output type is its input's"
    if len(out["sizes"]) != rank:
        return "a reduction keeps the rank"
    want = tuple(1 if d in axes else s for d, s in enumerate(inp["sizes"]))
    if tuple(out["sizes"]) != want:
        return "a reduction's output sizes"
    return None
