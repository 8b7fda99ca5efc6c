"""Hypothesis strategies for tests/test_fuzz.py: random tensor and operator descriptors, valid and not.

A case is drawn as plain field values first and built into descriptors last, so that a field can be
given a wrong Python type (the case then records that construction must raise
InvalidArgumentTypeError). Shapes stay small (at most MAX_ELEMENTS elements) so that executing is
cheap; what varies is the layout (packed, padded, permuted, broadcast, overlapping), the data type,
the rank, the feature level and the fields DirectML validates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.descriptors import tables

MAX_ELEMENTS = 400
OPS = ("mean", "add", "identity", "identity_sb", "reduce", "nary", "int_reduce", "sum", "ext_mean", "ext_reduce")
TABLES = {"mean": tables.ELEMENT_WISE_MEAN, "add": tables.ELEMENT_WISE_ADD, "identity": tables.ELEMENT_WISE_IDENTITY,
          "identity_sb": tables.ELEMENT_WISE_IDENTITY, "reduce": tables.REDUCE_AVERAGE,
          "nary": tables.EXT_NARY_MEAN, "int_reduce": tables.EXT_INTEGER_REDUCE_MEAN, "sum": tables.EXT_REDUCE_SUM,
          "ext_mean": tables.EXT_MEAN, "ext_reduce": tables.EXT_REDUCE_MEAN}
REDUCE_OPS = ("reduce", "int_reduce", "sum", "ext_reduce")
ALL_TYPES = [d for d in D if d not in (D.UNKNOWN, D.UINT4, D.INT4)]
# values that int() would have truncated or parsed: each must be refused with a TypeError-and-E_INVALIDARG
BAD_INTS = [2.0, 1.0, np.float32(2), np.float64(3.0), "2", b"2", True, False, Fraction(2), Decimal(2), None, 2.5]
BAD_REALS = ["2", b"2", True, None, Fraction(1, 2), Decimal(1), 1j]   # ScaleBias takes int and float types
LEVELS = list(gm.FeatureLevel)
REDUCES = (gm.ReduceDesc, gm.ext.IntegerReduceMeanDesc, gm.ext.ReduceSumDesc, gm.ext.ReduceMeanDesc)
FLOATS = (D.FLOAT32, D.FLOAT16, D.FLOAT64, D.BFLOAT16)


@dataclass
class Case:
    op: str
    level: gm.FeatureLevel
    dtype: D
    tensors: list               # [(role name, kwargs for TensorDesc)]; inputs first, output last
    axes: object = ()
    function: object = gm.ReduceFunction.AVERAGE
    scale_bias: object = None
    bad_type: str | None = None  # the field given a wrong Python type, when there is one
    nary_inputs: object = None   # replaces the n-ary mean's list of inputs when set
    in_place: bool = False       # bind the output over an identical input where the operator allows it
    seed: int = 0
    notes: list = field(default_factory=list)

    @property
    def float_reduction(self) -> bool:
        return self.op in ("reduce", "nary", "sum", "ext_reduce") and self.dtype in FLOATS


def _row(op, level):
    return tables.support_row(TABLES[op], level)


@st.composite
def sizes_for(draw, rank):
    sizes = [draw(st.integers(1, 5)) for _ in range(rank)]
    if rank and draw(st.integers(0, 2)) == 0:
        # one long dimension: the launch planners switch kernels at runs of 32 and 64 elements
        sizes[draw(st.integers(0, rank - 1))] = draw(st.integers(30, 70))
    while math.prod(sizes) > MAX_ELEMENTS:
        sizes[sizes.index(max(sizes))] -= 1
    if rank and draw(st.integers(0, 40)) == 0:
        sizes[draw(st.integers(0, rank - 1))] = 0          # invalid: a size of 0
    return tuple(sizes)


@st.composite
def layout(draw, sizes, *, output: bool):
    """Strides for ``sizes``: packed (None or explicit), padded, permuted, broadcast or overlapping."""
    rank = len(sizes)
    kinds = ["none", "none", "packed", "padded", "padded", "padded", "permuted", "permuted", "broadcast", "overlap"]
    if output:   # an overlapping or broadcast output is invalid: keep most outputs valid
        kinds = kinds[:-2] * 3 + kinds[-2:]
    kind = draw(st.sampled_from(kinds))
    if kind == "none" or rank == 0:
        return None
    order = list(range(rank))
    if kind == "permuted":
        order = draw(st.permutations(order))
    strides, acc = [0] * rank, 1
    for d in reversed(order):
        strides[d] = acc
        pad = draw(st.integers(1, 3)) if kind == "padded" and draw(st.booleans()) else 0
        acc *= max(sizes[d], 1) + pad
    if kind == "broadcast":
        for d in range(rank):
            if draw(st.booleans()):
                strides[d] = 0
    if kind == "overlap" and rank >= 1:
        d = draw(st.integers(0, rank - 1))
        strides[d] = draw(st.integers(0, 1))
    if draw(st.integers(0, 14)) == 0:
        # a stride at or past the UINT32 edge: valid (and executed) on a size-1 dimension up to
        # 2^32 - 1, refused beyond it or where it makes the last index pass 2^32 - 1
        # (2^31 on a size-2 dimension is valid and 8 GiB: never drawn, it would be allocated)
        d = draw(st.integers(0, rank - 1))
        big = [2**31, 2**32 - 1, 2**32, 2**62] if sizes[d] == 1 else [2**32, 2**62]
        strides[d] = draw(st.sampled_from(big))
    return tuple(strides)


@st.composite
def tensor_kwargs(draw, dtype, sizes, *, output: bool):
    strides = draw(layout(sizes, output=output))
    kw = {"data_type": dtype, "sizes": sizes, "strides": strides}
    r = draw(st.integers(0, 60))
    if r < 4:
        minimum = gm.calc_buffer_tensor_size(dtype, [max(s, 1) for s in sizes], strides)
        kw["total_size_in_bytes"] = minimum + draw(st.sampled_from([0, 4, 12, 1, 2, -4]))
    elif r == 4:
        kw["strides"] = tuple(strides or (1,) * len(sizes))[:-1] or None   # one stride short
    kw["guaranteed_base_offset_alignment"] = draw(st.sampled_from([0] * 40 + [4, 8, 16, 32, 256, 2, 3, 2**32]))
    kw["flags"] = draw(st.sampled_from([0] * 60 + [1, 1, 2, 3, 256, -1]))
    return kw


@st.composite
def cases(draw, top: gm.FeatureLevel):
    op = draw(st.sampled_from(OPS))
    # most cases at FL 3.0 or later, where every operator exists in 1-8 dimensions
    levels = [lv for lv in LEVELS if lv <= top]
    level = draw(st.sampled_from(levels + [lv for lv in levels if lv >= gm.FeatureLevel.FL_3_0] * 2))
    row = _row(op, level) or _row(op, top)
    dims, types = sorted(row[1]), sorted(row[2])
    if op == "identity_sb" and draw(st.integers(0, 3)):
        types = [d for d in types if d in (D.FLOAT32, D.FLOAT16, D.FLOAT64)] or types   # ScaleBias is float-only
    if op == "int_reduce" or draw(st.integers(0, 9)):
        dtype = draw(st.sampled_from(types))
    else:
        dtype = draw(st.sampled_from(ALL_TYPES))
    rank = draw(st.sampled_from([d for d in dims if d <= 5] or dims)) if draw(st.integers(0, 19)) else \
        draw(st.sampled_from([0, 6, 8, 9]))
    sizes = draw(sizes_for(rank))
    case = Case(op, level, dtype, [], seed=draw(st.integers(0, 2**32 - 1)))

    def t(name, sz=sizes, dt=dtype, output=False):
        case.tensors.append((name, draw(tensor_kwargs(dt, sz, output=output))))

    if op in ("mean", "add", "ext_mean"):
        t("ATensor")
        t("BTensor", dt=dtype if draw(st.integers(0, 19)) else draw(st.sampled_from(ALL_TYPES)))
        t("OutputTensor", output=True)
    elif op.startswith("identity"):
        t("InputTensor")
        t("OutputTensor", output=True)
        if op == "identity_sb":
            case.scale_bias = (draw(st.sampled_from([1.0, 0.5, 2.0, -1.5, 1e-3, 3.0, 0.0])),
                               draw(st.sampled_from([0.0, 1.0, -0.25, 100.0, 0.5])))
    elif op == "nary":
        k = draw(st.sampled_from([1, 2, 2, 3, 4, 5, 0, 65]))
        for i in range(min(k, 6)):
            t(f"InputTensors[{i}]")
        if k == 65:
            case.tensors.extend([case.tensors[0]] * (k - 6))
        t("OutputTensor", output=True)
    else:
        n_axes = rank if draw(st.integers(0, 3)) == 0 else draw(st.integers(0, rank))   # full reductions are common
        axes = list(draw(st.permutations(range(rank)))[:n_axes])
        if draw(st.integers(0, 14)) == 0:
            axes.append(draw(st.sampled_from([rank, -1, axes[0] if axes else 0])))   # out of range or duplicate
        case.axes = tuple(axes)
        out = tuple(1 if d in axes else s for d, s in enumerate(sizes))
        if draw(st.integers(0, 24)) == 0 and rank:
            out = out[:-1] + (out[-1] + 1,)                 # wrong output size
        t("InputTensor")
        out_dt = dtype
        if op == "sum" and draw(st.integers(0, 14)):      # the wide type; now and then a wrong one
            out_dt = tables.WIDE_SUM_TYPE.get(dtype, dtype)
        t("OutputTensor", sz=out, dt=out_dt, output=True)
        low = tables.WIDE_SUM_LOW_TYPE.get(dtype)
        if op == "sum" and (low is not None) == bool(draw(st.integers(0, 14))):   # now and then missing or extra
            t("OutputLowTensor", sz=out, dt=low or out_dt, output=True)
        if op == "reduce" and draw(st.integers(0, 24)) == 0:
            case.function = draw(st.sampled_from([gm.ReduceFunction.SUM, gm.ReduceFunction.MAX, 42]))
    if op in ("mean", "add", "identity", "identity_sb", "nary", "ext_mean") and draw(st.integers(0, 3)) == 0:
        # in place needs identical descriptors: the output takes the first input's
        case.in_place = True
        case.tensors[-1] = ("OutputTensor", dict(case.tensors[0][1]))
    if draw(st.integers(0, 19)) == 0:
        _poison(draw, case)
    return case


def _poison(draw, case: Case) -> None:
    """Give one integer field a wrong Python type."""
    bad = draw(st.sampled_from(BAD_INTS))
    targets = ["Sizes", "Strides", "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment", "Flags", "DataType"]
    if case.op in REDUCE_OPS:
        targets.append("Axes")
    targets += {"reduce": ["Function"], "identity_sb": ["Scale"], "nary": ["InputTensors"]}.get(case.op, [])
    target = draw(st.sampled_from(targets))
    if target == "Function":
        case.function, case.bad_type = bad if bad is not None else 2.0, target
        return
    if target == "Scale":
        case.scale_bias = (draw(st.sampled_from(BAD_REALS)), 0.0)
        case.bad_type = target
        return
    if target == "InputTensors":
        case.nary_inputs, case.bad_type = draw(st.sampled_from([5, 2.0, "ab"])), target   # None means unset
        return
    i = draw(st.integers(0, len(case.tensors) - 1))
    name, kw = case.tensors[i]
    kw = dict(kw)
    if target == "Axes":
        case.axes = tuple(case.axes) + (bad,)
    elif target == "Sizes" and kw["sizes"]:
        kw["sizes"] = (bad,) + tuple(kw["sizes"][1:])
    elif target == "Strides" and kw.get("strides"):
        kw["strides"] = (bad,) + tuple(kw["strides"][1:])
    elif target == "TotalTensorSizeInBytes" and bad is not None:
        kw["total_size_in_bytes"] = bad
    elif target == "GuaranteedBaseOffsetAlignment":
        kw["guaranteed_base_offset_alignment"] = bad
    elif target == "Flags":
        kw["flags"] = bad
    elif target == "DataType":
        kw["data_type"] = bad
    else:
        return
    case.tensors[i] = (name, kw)
    case.bad_type = target


def build(case: Case):
    """The operator descriptor of ``case`` (construction may raise)."""
    ts = [gm.TensorDesc(**kw) for _, kw in case.tensors]
    if case.op == "sum" and case.tensors[-1][0] == "OutputLowTensor":
        return gm.ext.ReduceSumDesc(ts[0], ts[1], case.axes, ts[2])
    ins, out = ts[:-1], ts[-1]
    if case.op == "mean":
        return gm.ElementWiseMeanDesc(ins[0], ins[1], out)
    if case.op == "add":
        return gm.ElementWiseAddDesc(ins[0], ins[1], out)
    if case.op == "identity":
        return gm.ElementWiseIdentityDesc(ins[0], out)
    if case.op == "identity_sb":
        return gm.ElementWiseIdentityDesc(ins[0], out, gm.ScaleBias(*case.scale_bias))
    if case.op == "nary":
        return gm.ext.NaryMeanDesc(ins if case.nary_inputs is None else case.nary_inputs, out)
    if case.op == "reduce":
        return gm.ReduceDesc(case.function, ins[0], out, case.axes)
    if case.op == "sum":
        return gm.ext.ReduceSumDesc(ins[0], out, case.axes)
    if case.op == "ext_mean":
        return gm.ext.MeanDesc(ins[0], ins[1], out)
    if case.op == "ext_reduce":
        return gm.ext.ReduceMeanDesc(ins[0], out, case.axes)
    return gm.ext.IntegerReduceMeanDesc(ins[0], out, case.axes)
