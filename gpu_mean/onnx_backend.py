"""An ``onnx.backend.base.Backend`` that runs models made of Mean and ReduceMean nodes on any
gpu_mean device, so that ``onnx.backend.test.BackendTest(gpu_mean.onnx_backend, __name__)`` works.

``prepare(model, device)`` takes every device name ``gpu-mean devices`` lists ("cpu", "opencl:0",
"cuda:0", "auto", ...) and ONNX's own device strings: a backend bound to device X (default
``$GPU_MEAN_ONNX_DEVICE``, else ``$GPU_MEAN_DEVICE``, else auto) runs ONNX's ``"CPU"`` on X, and
claims ``"CUDA"`` only when X is a CUDA device. ``backend_for("opencl:0")`` gives a backend bound
to one device.

In ordinary use a model the backend cannot run raises a gpu_mean error naming what it cannot run:
``UnsupportedError`` for a node or an ONNX device (``UnsupportedTypeError``, also a TypeError, for a
data type), ``InvalidArgumentError`` for a device name that is not present. Only the adapter for the
ONNX backend test runner, ``runner_for(device)``, turns them into ``unittest.SkipTest`` (never
BackendIsNotSupposedToImplementIt, which the runner counts as a pass).
"""
from __future__ import annotations

import os
import unittest

import numpy as np
from onnx import ModelProto, numpy_helper
from onnx.backend.base import Backend, BackendRep

from .errors import DmlError, InvalidArgumentError, UnsupportedError
from .frontends import functional, onnx_ops


def _opset(model: ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node_name(node) -> str:
    domain = f"{node.domain}." if node.domain not in ("", "ai.onnx") else ""
    return f"{node.name!r} ({domain}{node.op_type})" if node.name else f"{domain}{node.op_type}"


def _text(e: DmlError) -> str:
    return str(e).split(" (HRESULT")[0]


def _op_for(node, opset: int):
    """The gpu_mean op that runs ``node`` at ``opset`` (its attributes read), or UnsupportedError naming it."""
    cls = onnx_ops.get_op(node.op_type, opset) if node.domain in ("", "ai.onnx") else None
    if cls is None:
        raise UnsupportedError(f"gpu_mean ONNX backend: node {_node_name(node)} cannot run: gpu_mean runs "
                               f"ONNX Mean and ReduceMean (domain ai.onnx) only")
    return cls(_attrs(node))


def _run_op(node, op, args, dev):
    """``op`` on ``args``; an unsupported input names the node and the device."""
    try:
        return op.run(args, dev)
    except UnsupportedError as e:
        raise type(e)(f"gpu_mean ONNX backend: node {_node_name(node)} on {dev.info.id}: {_text(e)}") from e


ONNX_DEVICES = ("CPU", "CUDA")


def _is_onnx_device(device: str) -> bool:
    """ONNX's own device strings ("CPU", "CUDA", "CUDA:1"), in capitals as onnx writes them."""
    return device.split(":")[0] in ONNX_DEVICES


class GpuMeanRep(BackendRep):
    def __init__(self, model: ModelProto, device):
        self.model = model
        self.device = device
        opset = _opset(model)
        g = model.graph
        self.nodes = []
        for node in g.node:
            self.nodes.append((node, _op_for(node, opset)))
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
            res = _run_op(node, op, [values[n] if n else None for n in node.input], self.device)
            values[node.output[0]] = np.asarray(res) if isinstance(res, np.ndarray) else res
        return tuple(values[n] for n in self.output_names)


class GpuMeanBackend(Backend):
    target: str | None = None     # gpu_mean device string; None: $GPU_MEAN_ONNX_DEVICE or auto

    @classmethod
    def _device(cls):
        return functional.get_device(cls.target or os.environ.get("GPU_MEAN_ONNX_DEVICE") or None)

    @classmethod
    def device_for(cls, device: str = "CPU"):
        """The gpu_mean Device that ``device`` names: ONNX's "CPU" is the bound device, "CUDA" the
        bound device when it is a CUDA device; any other string is a gpu_mean device name."""
        device = str(device)
        if _is_onnx_device(device):
            dev = cls._device()
            if device.startswith("CUDA") and dev.info.backend != "cuda":
                raise UnsupportedError(f"gpu_mean ONNX backend bound to {dev.info.id} ({dev.name}) does not run "
                                       f"ONNX device {device}; bind a CUDA device (backend_for('cuda:0'), "
                                       "$GPU_MEAN_ONNX_DEVICE=cuda) or name a gpu_mean device")
            return dev
        try:
            return functional.get_device(device)
        except DmlError as e:
            from . import backends
            present = ", ".join(["auto"] + [i.id for i in backends.list_devices()])
            raise InvalidArgumentError(f"gpu_mean ONNX backend: device {device!r} is not present ({_text(e)}); "
                                       f"devices: {present}, or ONNX's CPU and CUDA") from e

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs) -> GpuMeanRep:
        dev = cls.device_for(device)
        super().prepare(model, "CPU", **kwargs)   # runs onnx.checker.check_model
        return GpuMeanRep(model, dev)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        dev = cls.device_for(device)
        return (_run_op(node, _op_for(node, kwargs.get("opset_version", 18)), list(inputs), dev),)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            cls.device_for(device)
        except DmlError:
            return False
        return True


def backend_for(device: str) -> type:
    """A backend class bound to one gpu_mean device ("cpu", "opencl:0", "cuda:0", ...)."""
    return type(f"GpuMeanBackend_{device.replace(':', '_')}", (GpuMeanBackend,), {"target": device})


class _RunnerAdapter:
    """For ``onnx.backend.test.BackendTest`` only: what the backend cannot run is a skip there."""

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        try:
            rep = super().prepare(model, device, **kwargs)
        except UnsupportedError as e:
            raise unittest.SkipTest(str(e)) from e
        rep.__class__ = _SkippingRep
        return rep

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        try:
            return super().run_node(node, inputs, device, outputs_info, **kwargs)
        except UnsupportedError as e:
            raise unittest.SkipTest(str(e)) from e


class _SkippingRep(GpuMeanRep):
    def run(self, inputs, **kwargs):
        try:
            return super().run(inputs, **kwargs)
        except UnsupportedError as e:
            raise unittest.SkipTest(str(e)) from e


def runner_for(device: str) -> type:
    """The backend bound to ``device`` for the ONNX backend test runner: a node, data type or ONNX
    device it cannot run raises ``unittest.SkipTest`` there instead of an error."""
    return type(f"GpuMeanRunner_{device.replace(':', '_')}", (_RunnerAdapter, backend_for(device)), {})


prepare = GpuMeanBackend.prepare
run_model = GpuMeanBackend.run_model
run_node = GpuMeanBackend.run_node
supports_device = GpuMeanBackend.supports_device
