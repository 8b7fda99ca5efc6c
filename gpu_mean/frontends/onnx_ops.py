"""ONNX Mean and ReduceMean, one small class per opset version, picked from a registry by opset.

Each version takes exactly its schema's type constraint T (``onnx.defs.get_schema``; a test compares
them): Mean-1/6/8 float16, float, double; Mean-13 adds bfloat16; ReduceMean-1/11 uint32, uint64,
int32, int64, float16, float, double; ReduceMean-13/18 add bfloat16. A type outside it is an
UnsupportedTypeError naming the version, even where ``gm.mean`` would take it (Mean has no integers).
"""
from __future__ import annotations

import numpy as np

from ..descriptors.types import DataType as D
from . import functional as F

# DataType -> the ONNX schema's spelling, in the schemas' own order
ONNX_NAMES = {D.UINT32: "tensor(uint32)", D.UINT64: "tensor(uint64)", D.INT32: "tensor(int32)",
              D.INT64: "tensor(int64)", D.FLOAT16: "tensor(float16)", D.FLOAT32: "tensor(float)",
              D.FLOAT64: "tensor(double)", D.BFLOAT16: "tensor(bfloat16)"}
MEAN_TYPES = frozenset({D.FLOAT16, D.FLOAT32, D.FLOAT64})
REDUCE_MEAN_TYPES = frozenset({D.UINT32, D.UINT64, D.INT32, D.INT64, D.FLOAT16, D.FLOAT32, D.FLOAT64})


class OnnxOp:
    op_type = ""
    since_version = 1
    types: frozenset = frozenset()      # the schema's type constraint T

    def __init__(self, attrs: dict):
        self.attrs = attrs

    @property
    def what(self) -> str:
        return f"{self.op_type}-{self.since_version}"

    @classmethod
    def type_list(cls) -> str:
        return ", ".join(n for d, n in ONNX_NAMES.items() if d in cls.types)

    def run(self, inputs: list, device):
        raise NotImplementedError


class Mean_1(OnnxOp):
    """Mean-1: same-shaped inputs; the legacy ``consumed_inputs`` attribute is accepted and ignored."""

    op_type, since_version = "Mean", 1
    types = MEAN_TYPES

    def run(self, inputs, device):
        return F.mean_op(inputs, device, broadcast=False, what=self.what, types=self.types,
                         type_list=self.type_list())


class Mean_6(Mean_1):
    """Mean-6: same-shaped inputs, no legacy attribute."""

    since_version = 6


class Mean_8(OnnxOp):
    """Mean-8: multidirectional (numpy-style) broadcasting."""

    op_type, since_version = "Mean", 8
    types = MEAN_TYPES

    def run(self, inputs, device):
        return F.mean_op(inputs, device, what=self.what, types=self.types, type_list=self.type_list())


class Mean_13(Mean_8):
    """Mean-13: as Mean-8, with bfloat16 added to the type list."""

    since_version = 13
    types = MEAN_TYPES | {D.BFLOAT16}


class ReduceMean_1(OnnxOp):
    """ReduceMean-1: axes attribute in [0, r-1]; keepdims (default 1); no axes reduces everything."""

    op_type, since_version = "ReduceMean", 1
    allow_negative = False
    types = REDUCE_MEAN_TYPES

    def axes(self, inputs):
        return self.attrs.get("axes")

    def run(self, inputs, device):
        axes = self.axes(inputs)
        return F.reduce_mean_op(inputs[0], axes=axes, keepdims=bool(self.attrs.get("keepdims", 1)),
                                 noop_with_empty_axes=bool(self.attrs.get("noop_with_empty_axes", 0)),
                                 device=device, allow_negative=self.allow_negative, what=self.what, types=self.types,
                                 type_list=self.type_list())


class ReduceMean_11(ReduceMean_1):
    """ReduceMean-11: negative axes count from the back."""

    since_version = 11
    allow_negative = True


class ReduceMean_13(ReduceMean_11):
    """ReduceMean-13: as ReduceMean-11, with bfloat16 added to the type list."""

    since_version = 13
    types = REDUCE_MEAN_TYPES | {D.BFLOAT16}


class ReduceMean_18(ReduceMean_13):
    """ReduceMean-18: axes is an optional int64 input; ``noop_with_empty_axes`` makes empty axes an identity."""

    since_version = 18

    def axes(self, inputs):
        if len(inputs) > 1 and inputs[1] is not None:
            return np.asarray(inputs[1]).astype(np.int64).ravel().tolist()
        return None


REGISTRY = {
    "Mean": (Mean_1, Mean_6, Mean_8, Mean_13),
    "ReduceMean": (ReduceMean_1, ReduceMean_11, ReduceMean_13, ReduceMean_18),
}


def get_op(op_type: str, opset: int):
    """The class implementing ``op_type`` at ``opset``: the newest version not above it."""
    versions = REGISTRY.get(op_type)
    if versions is None:
        return None
    best = None
    for cls in versions:
        if cls.since_version <= opset:
            best = cls
    return best
