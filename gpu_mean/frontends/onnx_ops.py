"""ONNX Mean and ReduceMean, one small class per opset version, picked from a registry by opset."""
from __future__ import annotations

import numpy as np

from . import functional as F


class OnnxOp:
    op_type = ""
    since_version = 1

    def __init__(self, attrs: dict):
        self.attrs = attrs

    def run(self, inputs: list, device):
        raise NotImplementedError


class Mean_1(OnnxOp):
    """Mean-1: same-shaped inputs; the legacy ``consumed_inputs`` attribute is accepted and ignored."""

    op_type, since_version = "Mean", 1

    def run(self, inputs, device):
        return F.mean_op(inputs, device, broadcast=False, what=f"Mean-{self.since_version}")


class Mean_6(Mean_1):
    """Mean-6: same-shaped inputs, no legacy attribute."""

    since_version = 6


class Mean_8(OnnxOp):
    """Mean-8: multidirectional (numpy-style) broadcasting."""

    op_type, since_version = "Mean", 8

    def run(self, inputs, device):
        return F.mean_op(inputs, device, what=f"Mean-{self.since_version}")


class Mean_13(Mean_8):
    """Mean-13: as Mean-8 (bfloat16 added to the type list, which gpu_mean does not take)."""

    since_version = 13


class ReduceMean_1(OnnxOp):
    """ReduceMean-1: axes attribute in [0, r-1]; keepdims (default 1); no axes reduces everything."""

    op_type, since_version = "ReduceMean", 1
    allow_negative = False

    def axes(self, inputs):
        return self.attrs.get("axes")

    def run(self, inputs, device):
        axes = self.axes(inputs)
        return F.reduce_mean_op(inputs[0], axes=axes, keepdims=bool(self.attrs.get("keepdims", 1)),
                             noop_with_empty_axes=bool(self.attrs.get("noop_with_empty_axes", 0)), device=device,
                             allow_negative=self.allow_negative, what=f"ReduceMean-{self.since_version}")


class ReduceMean_11(ReduceMean_1):
    """ReduceMean-11: negative axes count from the back."""

    since_version = 11
    allow_negative = True


class ReduceMean_13(ReduceMean_11):
    since_version = 13


class ReduceMean_18(ReduceMean_11):
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
