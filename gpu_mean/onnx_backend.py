"""An ``onnx.backend.base.Backend`` that runs models made of Mean and ReduceMean nodes on any
gpu_mean device, so that ``onnx.backend.test.BackendTest(gpu_mean.onnx_backend, __name__)`` works.

ONNX device strings map onto gpu_mean devices deliberately: a backend bound to device X (default
``$GPU_MEAN_ONNX_DEVICE`` or auto) runs the runner's ``_cpu`` cases on X, and claims ``CUDA`` only
when X is a CUDA device. ``backend_for("opencl:0")`` gives a backend bound to one device. A node it
cannot run raises ``unittest.SkipTest`` (never BackendIsNotSupposedToImplementIt, which the runner
counts as a pass).
"""
from __future__ import annotations

import os
import unittest

import numpy as np
from onnx import ModelProto, checker, numpy_helper
from onnx.backend.base import Backend, BackendRep

from .errors import UnsupportedError
from .frontends import functional, onnx_ops


def _opset(model: ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class GpuMeanRep(BackendRep):
    def __init__(self, model: ModelProto, device):
        self.model = model
        self.device = device
        opset = _opset(model)
        g = model.graph
        self.nodes = []
        for node in g.node:
            if node.domain not in ("", "ai.onnx"):
                raise unittest.SkipTest(f"gpu_mean runs ONNX Mean and ReduceMean only, not "
                                        f"{node.domain}.{node.op_type}")
            cls = onnx_ops.get_op(node.op_type, opset)
            if cls is None:
                raise unittest.SkipTest(f"gpu_mean runs ONNX Mean and ReduceMean only, not {node.op_type}")
            self.nodes.append((node, cls(_attrs(node))))
        self.initializers = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.input_names = [i.name for i in g.input if i.name not in self.initializers]
        self.output_names = [o.name for o in g.output]

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            values = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            values = dict(zip(self.input_names, inputs))
        values.update(self.initializers)
        for node, op in self.nodes:
            args = [values[n] if n else None for n in node.input]
            try:
                res = op.run(args, self.device)
            except UnsupportedError as e:
                raise unittest.SkipTest(str(e)) from e
            values[node.output[0]] = np.asarray(res) if isinstance(res, np.ndarray) else res
        return tuple(values[n] for n in self.output_names)


class GpuMeanBackend(Backend):
    target: str | None = None     # gpu_mean device string; None: $GPU_MEAN_ONNX_DEVICE or auto

    @classmethod
    def _device(cls):
        return functional.get_device(cls.target or os.environ.get("GPU_MEAN_ONNX_DEVICE") or None)

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs) -> GpuMeanRep:
        super().prepare(model, device, **kwargs)   # runs onnx.checker
        checker.check_model(model)
        if not cls.supports_device(device):
            raise unittest.SkipTest(f"gpu_mean backend bound to {cls._device().name} does not run ONNX device {device}")
        return GpuMeanRep(model, cls._device())

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        from onnx import helper
        opset = kwargs.get("opset_version", 18)
        cls_op = onnx_ops.get_op(node.op_type, opset)
        if cls_op is None:
            raise unittest.SkipTest(f"gpu_mean runs ONNX Mean and ReduceMean only, not {node.op_type}")
        res = cls_op({a.name: helper.get_attribute_value(a) for a in node.attribute}).run(list(inputs), cls._device())
        return (res,)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        d = str(device).upper()
        if d.startswith("CPU"):
            return True
        if d.startswith("CUDA"):
            try:
                return cls._device().info.backend == "cuda"
            except Exception:
                return False
        return False


def backend_for(device: str) -> type:
    """A backend class bound to one gpu_mean device ("cpu", "opencl:0", "cuda:0", ...)."""
    return type(f"GpuMeanBackend_{device.replace(':', '_')}", (GpuMeanBackend,), {"target": device})


prepare = GpuMeanBackend.prepare
run_model = GpuMeanBackend.run_model
run_node = GpuMeanBackend.run_node
supports_device = GpuMeanBackend.supports_device
