"""Descriptors a feature level must reject: create_operator raises InvalidArgumentError for each.

Each operator gets a data type and a dimension count outside its row at the level, a bad total size,
and its own shape rules (mismatched sizes, an overlapping output, duplicate or out-of-range axes,
a wrong reduced shape, too many n-ary inputs); an operator that does not exist at the level is
rejected whatever its tensors.
"""
from __future__ import annotations

from ..descriptors import tables
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType, FeatureLevel
from .cases import REDUCTIONS, TABLES, Case

# the order a valid or invalid type is picked in, so the choice is stable
PREFERENCE = (DataType.FLOAT32, DataType.INT32, DataType.FLOAT16, DataType.UINT32, DataType.FLOAT64, DataType.INT8,
              DataType.INT64, DataType.UINT8, DataType.INT16, DataType.UINT16, DataType.UINT64, DataType.BFLOAT16)
SHAPE4 = (2, 3, 4, 5)


def negative_cases(level: FeatureLevel) -> list:
    """[(op, what, build)] where build() returns a descriptor the level must reject."""
    out = []
    for op, table in TABLES.items():
        row = tables.support_row(table, level)
        if row is None:
            dt = next(t for t in PREFERENCE if t in table[-1][2])
            out.append((op, f"any descriptor: the operator does not exist at FL {level.label}",
                        lambda op=op, dt=dt: Case(op, dt, SHAPE4, axes=(3,)).desc()))
            continue
        _, dims, types = row
        good = next(t for t in PREFERENCE if t in types)
        bad = next((t for t in PREFERENCE if t not in types), None)
        axes = (3,) if op in REDUCTIONS else None
        if bad is not None:
            out.append((op, f"data type {bad.name}",
                        lambda op=op, bad=bad, axes=axes: Case(op, bad, SHAPE4, axes).desc()))
        nd = 9 if max(dims) == 8 else 3
        shape = (2,) * nd
        out.append((op, f"{nd} dimensions", lambda op=op, good=good, shape=shape, nd=nd: Case(
            op, good, shape, (nd - 1,) if op in REDUCTIONS else None).desc()))
        out.append((op, "TotalTensorSizeInBytes below the computed size",
                    lambda op=op, good=good, axes=axes: _with_small_input(Case(op, good, SHAPE4, axes).desc())))
        out.extend((op, what, fn) for what, fn in _shape_rules(op, good))
    return out


def _with_small_input(desc):
    import dataclasses
    t = desc.input_tensors()[0]
    small = dataclasses.replace(t, total_size_in_bytes=(t.total_size_in_bytes - 4))
    if hasattr(desc, "inputs"):
        return dataclasses.replace(desc, inputs=(small,) + tuple(desc.inputs[1:]))
    field = "a" if hasattr(desc, "a") else "input"
    return dataclasses.replace(desc, **{field: small})


def _shape_rules(op: str, dt: DataType) -> list:
    import dataclasses
    t = TensorDesc(dt, SHAPE4)
    other = TensorDesc(dt, (2, 3, 4, 6))
    overlap = TensorDesc(dt, SHAPE4, (0, 20, 5, 1))
    if op in ("mean", "add", "ext_mean"):
        d = Case(op, dt, SHAPE4).desc()
        return [("inputs of different sizes", lambda: dataclasses.replace(d, b=other)),
                ("an output with a zero stride (overlapping)", lambda: dataclasses.replace(d, output=overlap))]
    if op == "identity":
        d = Case(op, dt, SHAPE4).desc()
        return [("an output with a zero stride (overlapping)", lambda: dataclasses.replace(d, output=overlap))]
    if op == "nary":
        return [("65 inputs", lambda: Case(op, dt, SHAPE4, inputs=65).desc()),
                ("inputs of different sizes", lambda: dataclasses.replace(
                    Case(op, dt, SHAPE4).desc(), inputs=(t, other)))]
    d = Case(op, dt, SHAPE4, (1,)).desc()
    return [("duplicate axes [1, 1]", lambda: dataclasses.replace(d, axes=(1, 1))),
            ("axis 4 of a 4-D input", lambda: dataclasses.replace(d, axes=(4,))),
            ("an output that keeps the reduced size", lambda: dataclasses.replace(d, output=t))]
