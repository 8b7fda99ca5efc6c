"""The CPU device: numpy over byte buffers. It is the readable specification of every operator
(gpu_mean/runtime/numerics.py holds the formulas); results are computed whole before the output is
written, so in-place execution is safe by construction."""
from __future__ import annotations

import os

import numpy as np

from ..bridges.arrays import ArrayBridge
from ..descriptors.tensor import packed_strides
from ..descriptors.types import KernelOp
from ..kernels import support
from ..runtime import exact, interop, numerics
from ..runtime.backend import Backend, Program
from ..runtime.device import DeviceInfo


def layout(desc) -> tuple:
    """(sizes, numpy dtype, byte strides) of a tensor: what a view over a byte buffer needs."""
    dt = desc.numpy_dtype
    return desc.sizes, dt, tuple(s * dt.itemsize for s in desc.effective_strides)


def formula(plan, in_layout):
    """``xs -> result`` of a plan: ``_compute``, or for REDUCE AVERAGE of a narrow float the
    reduction prepared for the plan's one input layout (``exact.narrow_reducer``)."""
    if plan.op == KernelOp.REDUCE_MEAN and plan.dtype in numerics.NARROW_FLOATS:
        sizes, dt, strides = in_layout
        packed = tuple(s * dt.itemsize for s in packed_strides(sizes))
        reduce = exact.narrow_reducer(tuple(sizes), plan.axes, dt, tuple(strides) == packed)
        return lambda xs: reduce(xs[0])
    return lambda xs: _compute(plan, xs)


def _compute(plan, xs: list) -> np.ndarray:
    op, dt = plan.op, plan.dtype
    if op == KernelOp.MEAN:
        return numerics.mean2(xs[0], xs[1], dt)
    if op == KernelOp.ADD:
        return numerics.add2(xs[0], xs[1], dt)
    if op == KernelOp.IDENTITY:
        return numerics.identity(xs[0], dt, (plan.scale, plan.bias) if plan.has_scale_bias else None)
    if op == KernelOp.NARY_MEAN:
        return numerics.nary_mean(xs, dt)
    if op == KernelOp.REDUCE_MEAN:
        return numerics.reduce_mean(xs[0], plan.axes, dt)
    return numerics.reduce_sum(xs[0], plan.axes, plan.output_type, dt)


class CpuProgram(Program):
    def __init__(self, plan):
        self.plan = plan
        n_out = len(plan.tensors) - getattr(plan, "n_inputs", 1)
        layouts = [layout(t) for t in plan.tensors]
        self.in_layouts, self.out_layouts = layouts[:-n_out], layouts[-n_out:]
        # each input's bytes from its first element through its last
        self.in_spans = [sum((n - 1) * s for n, s in zip(sz, st)) + dt.itemsize for sz, dt, st in self.in_layouts]
        self.formula = formula(plan, self.in_layouts[0])

    def compute(self, arrays) -> np.ndarray:
        """The result as a new array, computed from the caller's input arrays where they lie (each as
        the plan describes it: strides >= 0, whole elements): the functional calls' path on this device
        (``Executor.compute``), with no copy in and no buffer out. An array laid out as the plan's
        tensor is read as it is; another (dimensions merged, broadcast) through a view of its bytes."""
        xs = []
        for a, (sz, dt, st), nbytes in zip(arrays, self.in_layouts, self.in_spans):
            if a.shape == sz and a.strides == st and a.dtype == dt:
                xs.append(a)
            else:
                xs.append(np.ndarray(sz, dt, buffer=interop.host_span(a, nbytes), strides=st))
        r = self.formula(xs)
        if isinstance(r, tuple):      # a wide sum's total: the functional calls' have one word
            (r,) = r
        dt = self.out_layouts[0][1]
        if r.dtype != dt:
            return r.astype(dt)
        if r.base is not None and any(np.may_share_memory(r, x) for x in xs):
            return r.copy()       # a formula that handed back its input (IDENTITY) or a view of it
        return r

    def run(self, inputs, outputs, temporary) -> None:
        xs = [np.ndarray(sz, dt, buffer=n, offset=off, strides=st)
              for (n, off), (sz, dt, st) in zip(inputs, self.in_layouts)]
        r = _compute(self.plan, xs)
        # a wide sum gives a tuple (its total's one or two words); every other operation one array
        for (n, off), (sz, dt, st), res in zip(outputs, self.out_layouts, r if isinstance(r, tuple) else (r,)):
            np.ndarray(sz, dt, buffer=n, offset=off, strides=st)[...] = res


class CpuBackend(Backend):
    # numpy raises MemoryError when an allocation fails; nothing else here is a device fault
    native_errors = (MemoryError,)

    def __init__(self):
        self.info = DeviceInfo("cpu", 0, "numpy reference", "numpy " + np.__version__, "CPU",
                               _host_memory(), True, True)

    def alloc(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def write(self, native, offset, data):
        native[offset:offset + data.size] = data

    def read(self, native, offset, nbytes):
        return native[offset:offset + nbytes].copy()

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        dst[dst_offset:dst_offset + nbytes] = src[src_offset:src_offset + nbytes]

    def compile(self, plan, flags):
        return CpuProgram(plan)

    def kernel_refusal(self, op, dt):
        return support.not_built("cpu", op, dt)

    def make_arrays(self):
        """numpy arrays and CPU DLPack arrays, taken in place."""
        return ArrayBridge(self)

    def is_out_of_memory(self, exc):
        return isinstance(exc, MemoryError)


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
