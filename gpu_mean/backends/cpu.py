"""The CPU device: numpy over byte buffers. It is the readable specification of every operator
(gpu_mean/runtime/numerics.py holds the formulas); results are computed whole before the output is
written, so in-place execution is safe by construction."""
from __future__ import annotations

import os

import numpy as np

from ..descriptors.ext import IntegerReduceMeanDesc, NaryMeanDesc
from ..descriptors.operators import ElementWiseAddDesc, ElementWiseIdentityDesc, ElementWiseMeanDesc, ReduceDesc
from ..runtime import numerics
from ..runtime.device import DeviceInfo
from .base import Backend, Program


def tensor_view(native: np.ndarray, offset: int, desc) -> np.ndarray:
    dt = desc.numpy_dtype
    return np.ndarray(desc.sizes, dt, buffer=native, offset=offset,
                      strides=tuple(s * dt.itemsize for s in desc.effective_strides))


class CpuProgram(Program):
    def __init__(self, desc):
        self.desc = desc

    def run(self, inputs, outputs, temporary) -> None:
        d = self.desc
        xs = [tensor_view(n, off, t) for (n, off), t in zip(inputs, d.input_tensors())]
        out_t = d.output_tensors()[0]
        dt = out_t.data_type
        if isinstance(d, ElementWiseMeanDesc):
            r = numerics.mean2(xs[0], xs[1], dt)
        elif isinstance(d, ElementWiseAddDesc):
            r = numerics.add2(xs[0], xs[1], dt)
        elif isinstance(d, ElementWiseIdentityDesc):
            r = numerics.identity(xs[0], dt, d.scale_bias)
        elif isinstance(d, NaryMeanDesc):
            r = numerics.nary_mean(xs, dt)
        elif isinstance(d, (ReduceDesc, IntegerReduceMeanDesc)):
            r = numerics.reduce_mean(xs[0], tuple(d.axes), dt)
        else:
            raise TypeError(f"no CPU implementation of {type(d).__name__}")
        out = tensor_view(outputs[0][0], outputs[0][1], out_t)
        out[...] = r


class CpuBackend(Backend):
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

    def compile(self, desc, flags):
        return CpuProgram(desc)


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
