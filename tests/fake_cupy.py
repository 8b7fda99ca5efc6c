"""A stand-in for CuPy and a GPU: enough of ``cupy.cuda`` for the CUDA backend's host side to run
(allocate, copy, compile, launch, order streams) with every call written to a log. Kernels do not
compute; copies move real bytes between host memory and bytearrays standing for device memory."""
from __future__ import annotations

import ctypes
import math
import sys
import threading
import types

import numpy as np

from gpu_mean.backends import cuda, cuda_compile
from gpu_mean.kernels.source import ProgramCache
from gpu_mean.runtime.device import DeviceInfo


class CudaRuntimeError(RuntimeError):
    pass


class CudaDriverError(RuntimeError):
    pass


class PoolOutOfMemory(MemoryError):
    pass


class FakeDevice:
    """A GPU context: records which device is current."""

    def __init__(self, log, index):
        self.log, self.index = log, index

    def __enter__(self):
        self.log.append(("enter", self.index))

    def __exit__(self, *exc):
        self.log.append(("exit", self.index))


class FakeGraph:
    def __init__(self, log):
        self.log = log

    def launch(self, stream):
        self.log.append(("graph", stream))


class FakeStream:
    """A CUDA stream; ``with`` makes it CuPy's current stream (a stack in ``current``)."""

    def __init__(self, log, current=None, capture=False):
        self.log, self.current = log, current if current is not None else []
        self.capture = capture     # whether a graph capture succeeds
        self.ptr = id(self)

    def __enter__(self):
        self.current.append(self)

    def __exit__(self, *exc):
        self.current.pop()

    def record(self, event=None):
        # CuPy's Stream.record: with no event given, a new one (timing on) for every call
        event = event or FakeEvent()
        event.record(self)
        return event

    def wait_event(self, event):
        self.log.append(("wait", self, event.recorded_on))

    def synchronize(self):
        self.log.append(("sync", self))

    def begin_capture(self):
        self.log.append(("begin_capture", self))

    def end_capture(self):
        if self.capture:
            self.log.append(("end_capture", self))
            return FakeGraph(self.log)
        raise CudaRuntimeError("cudaErrorStreamCaptureInvalidated: operation failed due to a previous error")


class DevPtr:
    """Device memory: a bytearray; copies run at once and record their stream and host address."""

    def __init__(self, mem, off, log):
        self.mem, self.off, self.log = mem, off, log
        self.ptr = 0x7F0000000000 + (id(mem) & 0xFFFFFF) * 0x1000 + off     # 4 KiB-aligned base

    def __add__(self, n):
        return DevPtr(self.mem, self.off + int(n), self.log)

    def copy_from_host_async(self, src, n, stream):
        self.log.append(("h2d", src, n, stream))
        ctypes.memmove((ctypes.c_char * n).from_buffer(self.mem, self.off), src, n)

    def copy_to_host_async(self, dst, n, stream):
        self.log.append(("d2h", dst, n, stream))
        ctypes.memmove(dst, (ctypes.c_char * n).from_buffer(self.mem, self.off), n)


class FakeEvent:
    made = []       # the keyword arguments of every event made

    def __init__(self, log=None, **kwargs):
        FakeEvent.made.append(kwargs)
        self.log = log
        self.recorded_on = None

    def record(self, stream=None):
        self.recorded_on = stream

    def synchronize(self):
        # a host wait, where the event has been recorded (an unrecorded event has nothing to wait for)
        if self.log is not None and self.recorded_on is not None:
            self.log.append(("event sync", self.recorded_on))


class FakeKernel:
    def __init__(self, name, log):
        self.name, self.log = name, log
        self.last_args = None

    def __call__(self, grid, block, args, stream=None):
        self.last_args = args
        self.log.append(("launch", self.name, stream))


class CPointer:
    """``cupy.cuda.function.CPointer``: a kernel argument given as the address of its bytes."""

    def __init__(self, p=0):
        self.ptr = p


def fake_backend(log, index=1):
    be = object.__new__(cuda.CudaBackend)
    pinned = []

    def alloc_pinned_memory(n):
        buf = bytearray(n)
        pinned.append(buf)
        return buf

    class Module:
        def load(self, image):
            log.append(("load", image))

        def get_function(self, name):
            log.append(("get_function", name))
            return name

    be.cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        alloc_pinned_memory=alloc_pinned_memory, Event=lambda **kw: FakeEvent(log, **kw),
        function=types.SimpleNamespace(Module=Module),
        memory=types.SimpleNamespace(OutOfMemoryError=PoolOutOfMemory)))
    be.index, be.cc, be.sms, be.driver_major, be.driver_version = index, 90, 132, 13, 13000
    be.dev = FakeDevice(log, index)
    be.stream = FakeStream(log)
    be.native_errors = (CudaRuntimeError, CudaDriverError, PoolOutOfMemory)
    be.info = types.SimpleNamespace(name="fake GPU")
    be._modules, be.staging, be.pinned = ProgramCache(), cuda.PinnedStaging(be), pinned
    be._order_lock, be._order_event, be.unavailable = threading.Lock(), None, None
    return be


def inside(log, event):
    """Whether ``event`` happened with a device context entered."""
    depth = 0
    for e in log:
        if e[0] == "enter":
            depth += 1
        elif e[0] == "exit":
            depth -= 1
        elif e == event:
            return depth > 0
    raise AssertionError(f"{event} did not happen")


# -- a whole fake CuPy module, for the functional calls on a fake CUDA device -------------------

class FakeCupyArray:
    """``cupy.ndarray``: device memory (a DevPtr) with a shape, dtype and byte strides."""

    def __init__(self, data, shape, dtype, strides=None, device=1):
        # plain Python arithmetic: CuPy's own bookkeeping is C, and the front door's benchmark times
        # gpu_mean's Python through this stand-in (tools/bench.py front_door)
        self.data, self.shape, self.dtype = data, tuple(shape), np.dtype(dtype)
        if strides is None:
            step, strides = self.dtype.itemsize, []
            for n in reversed(self.shape):
                strides.append(step)
                step *= n
            strides = tuple(reversed(strides))
        self.strides = strides
        self.ndim = len(self.shape)
        self.device = types.SimpleNamespace(id=device)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize

    def __dlpack_device__(self):
        return (2, self.device.id)

    def __dlpack__(self, stream=None):
        return self

    def view(self, dtype):
        """The same memory as another dtype of the same size."""
        assert np.dtype(dtype).itemsize == self.dtype.itemsize
        return FakeCupyArray(self.data, self.shape, dtype, self.strides, self.device.id)


class CaiProducer:
    """A CUDA array of another library, seen only through ``__cuda_array_interface__``."""

    def __init__(self, data: DevPtr, shape, dtype):
        self.data, self.shape, self.dtype = data, shape, np.dtype(dtype)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False), "version": 3,
                "strides": None}


class DlpackProducer(CaiProducer):
    """A CUDA DLPack producer (PyTorch CUDA, JAX); counts how often its device is asked for."""

    def __init__(self, data, shape, dtype, device=1):
        super().__init__(data, shape, dtype)
        self.index, self.device_queries, self.capsule_streams = device, 0, []

    def __dlpack_device__(self):
        self.device_queries += 1
        return (2, self.index)

    def __dlpack__(self, stream=None):
        self.capsule_streams.append(stream)
        return self


def fake_cupy(log, index=1):
    """(module, runtime counters): enough of CuPy for the CUDA backend and its ArrayBridge."""
    current = []
    user = FakeStream(log, current)          # the caller's stream, current unless another is entered
    counts = {"pointerGetAttributes": 0}
    pinned = []

    def alloc(n):
        return DevPtr(bytearray(max(int(n), 1)), 0, log)

    def alloc_pinned_memory(n):
        buf = bytearray(n)
        pinned.append(buf)
        return buf

    def pointer_attributes(ptr):
        counts["pointerGetAttributes"] += 1
        return types.SimpleNamespace(device=index)

    class Module:
        def load(self, image):
            log.append(("load", image))

        def get_function(self, name):
            return FakeKernel(name, log)

    class Device:
        def __init__(self, i):
            self.i = i

        def __enter__(self):
            log.append(("enter", self.i))

        def __exit__(self, *exc):
            log.append(("exit", self.i))

    def dtype(d):
        """numpy's dtype; ml_dtypes.bfloat16 only where this CuPy has it (``mod.bfloat16_arrays``)."""
        d = np.dtype(d)
        if d.kind == "V" and d.name == "bfloat16" and not mod.bfloat16_arrays:
            raise TypeError(f"Unsupported type {d}")
        return d

    def asarray(x):
        return FakeCupyArray(x.data, x.shape, dtype(x.dtype), device=index)

    def from_dlpack(x):
        x.__dlpack__(stream=(current[-1] if current else user).ptr)
        return FakeCupyArray(x.data, x.shape, dtype(x.dtype), device=index)

    def empty(shape, d):
        d = dtype(d)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        return FakeCupyArray(alloc(math.prod(shape) * d.itemsize), shape, d, device=index)

    cuda_ns = types.SimpleNamespace(
        alloc=alloc, alloc_pinned_memory=alloc_pinned_memory, Event=lambda **kw: FakeEvent(log, **kw),
        Device=Device, get_current_stream=lambda: current[-1] if current else user,
        function=types.SimpleNamespace(Module=Module, CPointer=CPointer),
        memory=types.SimpleNamespace(OutOfMemoryError=PoolOutOfMemory),
        runtime=types.SimpleNamespace(pointerGetAttributes=pointer_attributes))
    mod = types.SimpleNamespace(cuda=cuda_ns, ndarray=FakeCupyArray, asarray=asarray, from_dlpack=from_dlpack,
                                empty=empty, __version__="14.0.0-fake", bfloat16_arrays=True)
    return mod, types.SimpleNamespace(user=user, current=current, counts=counts, pinned=pinned)


def fake_cuda_backend(monkeypatch, log, index=1):
    """(CUDA backend over the fake CuPy, its state): kernels 'compile' without NVRTC, launch into
    the log, and graph captures succeed. The fake module is ``sys.modules["cupy"]``."""
    mod, state = fake_cupy(log, index)
    monkeypatch.setitem(sys.modules, "cupy", mod)
    monkeypatch.setattr(cuda_compile, "image", lambda filename, macros, cc, major, **device: b"cubin")
    be = object.__new__(cuda.CudaBackend)
    be.cp, be.index, be.cc, be.sms, be.driver_major, be.driver_version = mod, index, 90, 132, 13, 13000
    be.dev = FakeDevice(log, index)
    be.stream = FakeStream(log, state.current, capture=True)
    be.native_errors = (CudaRuntimeError, CudaDriverError, PoolOutOfMemory)
    be.info = DeviceInfo("cuda", index, "fake GPU", "NVIDIA", "GPU", 80 << 30, True, True, "CUDA, fake")
    be._modules, be.staging = ProgramCache(), cuda.PinnedStaging(be)
    be._order_lock, be._order_event, be.unavailable = threading.Lock(), None, None
    be._open_lock = threading.Lock()
    return be, state
