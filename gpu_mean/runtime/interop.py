"""Device memory shared with other array libraries, both ways, without copies.

* ``export_tensor(buffer, desc, offset)``: a Buffer seen as a tensor. CUDA: a ``CudaTensorView``
  with ``__cuda_array_interface__`` (v3) and ``__dlpack__`` that CuPy, PyTorch and Numba read in
  place; OpenCL: a ``pyopencl.array.Array`` on the device's queue; CPU: a numpy view.
* ``wrap_array(device, array)``: a caller's array as a ``(BufferBinding, TensorDesc)`` to bind.

Lifetimes: a view holds the Buffer (and so its memory) for as long as the view or anything made
from it lives; a wrapped array's memory is held by the Buffer's native handle (CuPy MemoryPointer,
pyopencl Buffer, numpy array), so the Buffer keeps the caller's memory alive, not the reverse.

Stream rules (CUDA): the backend launches on its own non-blocking stream. Work on another stream
is ordered against it with events, never with a host synchronize (``wait_for_current`` on entry,
``current_waits`` before a device array goes back), and an exported view names the backend's
stream, as the CUDA Array Interface and DLPack ask of a producer.
"""
from __future__ import annotations

import sys

import numpy as np

from ..descriptors.tensor import MAX_ELEMENTS, TensorDesc
from ..descriptors.types import DataType
from ..errors import InvalidArgumentError, UnsupportedError
from .objects import Buffer, BufferBinding

# DLDeviceType values (dlpack.h)
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_OPENCL, DL_CUDA_MANAGED = 1, 2, 3, 4, 13


def type_name(x) -> str:
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__qualname__}"


def element_strides(shape, byte_strides, itemsize: int):
    """Byte strides as element strides, or None where a TensorDesc cannot describe them: negative
    strides (DirectML's are unsigned) or strides that are not whole elements. Size-1 dimensions
    take stride 0, whatever the array says, since no step is ever taken along them."""
    if len(shape) == 1 and byte_strides[0] == itemsize:
        return (1,) if shape[0] != 1 else (0,)     # the common 1-D case, without the loop
    out = []
    for n, s in zip(shape, byte_strides):
        if n == 1:
            out.append(0)
            continue
        if s < 0 or s % itemsize:
            return None
        out.append(s // itemsize)
    if shape and sum((n - 1) * s for n, s in zip(shape, out)) + 1 > MAX_ELEMENTS:
        return None
    return tuple(out)


def span_elements(shape, strides) -> int:
    """Elements from the first through the last one addressed (0 for an empty array)."""
    if any(n == 0 for n in shape):
        return 0
    return sum((n - 1) * s for n, s in zip(shape, strides)) + 1


class _HostSpan:
    """A uint8 window over the memory a strided host array spans; it holds the array."""

    def __init__(self, array: np.ndarray, nbytes: int):
        self.array = array
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 3,
                                    "data": (array.ctypes.data, not array.flags.writeable)}


def host_span(array: np.ndarray, nbytes: int) -> np.ndarray:
    """The bytes from ``array``'s first element on, as a uint8 array sharing its memory (strides >= 0)."""
    if array.flags.c_contiguous and array.nbytes == nbytes:
        return array.reshape(-1).view(np.uint8)     # the common case, without the interface object
    return np.asarray(_HostSpan(array, nbytes))


def _desc_for(dt: DataType, shape, strides, align: int = 0) -> TensorDesc:
    shape = tuple(shape) or (1,)
    strides = tuple(strides) or (1,)
    return TensorDesc(dt, shape, strides, guaranteed_base_offset_alignment=align)


def _data_type(dtype, what: str) -> DataType:
    try:
        return DataType.from_numpy(dtype)
    except KeyError as e:
        raise InvalidArgumentError(f"{what}: data type {np.dtype(dtype)} has no DirectML data type") from e


# -- CUDA ---------------------------------------------------------------------------------------

def cuda_device_of(x) -> int | None:
    """The CUDA ordinal an array lives on, or None when it is not a CUDA array."""
    cp = sys.modules.get("cupy")
    if cp is not None and isinstance(x, cp.ndarray):
        return int(x.device.id)
    if hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray):
        kind, idx = x.__dlpack_device__()
        return int(idx) if int(kind) in (DL_CUDA, DL_CUDA_MANAGED) else None
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        import cupy
        ptr = int(cai["data"][0])
        return int(cupy.cuda.runtime.pointerGetAttributes(ptr).device) if ptr else 0
    return None


def check_cuda_device(x, dev, what: str) -> None:
    where = cuda_device_of(x)
    if dev.info.backend != "cuda":
        raise InvalidArgumentError(f"{what}: a {type_name(x)} on cuda:{where} was given but the device is "
                                   f"{dev.name}; pass device='cuda:{where}' or a host array")
    if where != dev.info.index:
        raise InvalidArgumentError(f"{what}: the {type_name(x)} lives on cuda:{where} but the device is "
                                   f"{dev.name}; move it with cupy.asarray under cupy.cuda.Device({dev.info.index}) "
                                   f"or pass device='cuda:{where}'")


def to_cupy(x, dev):
    """A CuPy array over ``x``'s memory (no copy) on ``dev``'s GPU. A DLPack producer is asked for
    its capsule with the backend's stream, so that it makes that stream wait on its own pending
    work (the DLPack rule); a CUDA Array Interface v3 ``stream`` is honoured by CuPy itself."""
    import cupy
    if isinstance(x, cupy.ndarray):
        return x
    with cupy.cuda.Device(dev.info.index):
        if hasattr(x, "__dlpack__"):
            with dev.backend.stream:     # cupy.from_dlpack passes the current stream to __dlpack__
                return cupy.from_dlpack(x)
        return cupy.asarray(x)


def wait_for_current(dev) -> None:
    """Entry rule: the backend stream waits for everything already queued on the caller's current
    CuPy stream (its writes to the inputs, our own copies, the output's allocation)."""
    import cupy
    s = dev.backend.stream
    with cupy.cuda.Device(dev.info.index):
        cur = cupy.cuda.get_current_stream()
        if cur.ptr != s.ptr:
            dev.backend.wait_for(cur)


def current_waits(dev) -> None:
    """Exit rule: the caller's current stream waits for our kernels before it may touch the result
    (or reuse the inputs' memory); the host does not wait."""
    import cupy
    s = dev.backend.stream
    with cupy.cuda.Device(dev.info.index):
        cur = cupy.cuda.get_current_stream()
        if cur.ptr != s.ptr:
            dev.backend.make_wait(cur)


class CudaTensorView:
    """A (Buffer, TensorDesc) on a CUDA device seen as an array. It holds the Buffer, and so does
    every array a consumer builds from it (CuPy and PyTorch keep the exporting object alive)."""

    def __init__(self, buffer: Buffer, desc: TensorDesc, offset: int = 0):
        self.buffer, self.desc, self.offset = buffer, desc, int(offset)
        self.shape = tuple(desc.sizes)
        self.dtype = desc.numpy_dtype
        self.strides = tuple(s * self.dtype.itemsize for s in desc.effective_strides)
        self.ptr = int(buffer.native.ptr) + self.offset

    @property
    def __cuda_array_interface__(self) -> dict:
        # "stream" tells the consumer which stream to order its work after (CAI v3)
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": self.strides, "stream": int(self.buffer.device.backend.stream.ptr)}

    def __dlpack_device__(self):
        return (DL_CUDA, self.buffer.device.info.index)

    def __dlpack__(self, *, stream=None, **kwargs):
        # CuPy builds the capsule; with the backend stream current, CuPy makes the consumer's
        # ``stream`` wait on it (stream=-1: the consumer asked for no synchronization)
        import cupy
        dev = self.buffer.device
        with cupy.cuda.Device(dev.info.index), dev.backend.stream:
            return self.to_cupy().__dlpack__(stream=stream, **kwargs)

    def to_cupy(self):
        import cupy
        dev = self.buffer.device
        nbytes = span_elements(self.shape, self.desc.effective_strides) * self.dtype.itemsize
        mem = cupy.cuda.UnownedMemory(self.ptr, max(nbytes, 1), self, dev.info.index)
        return cupy.ndarray(self.shape, self.dtype, cupy.cuda.MemoryPointer(mem, 0), strides=self.strides)


# -- export and wrap ----------------------------------------------------------------------------

def export_tensor(buffer: Buffer, desc: TensorDesc, offset: int = 0):
    """``buffer`` at ``offset`` bytes, laid out as ``desc``, as the device's native array type."""
    if not isinstance(desc, TensorDesc):
        raise InvalidArgumentError(f"as_tensor: desc must be a TensorDesc, got {type_name(desc)}")
    dt = desc.numpy_dtype
    nbytes = span_elements(desc.sizes, desc.effective_strides) * dt.itemsize
    buffer.check_range(int(offset), nbytes, "as_tensor")
    dev = buffer.device
    dev.executor.check_alive()
    byte_strides = tuple(s * dt.itemsize for s in desc.effective_strides)
    kind = dev.info.backend
    if kind == "cuda":
        return CudaTensorView(buffer, desc, offset)
    if kind == "opencl":
        import pyopencl.array as cla
        return cla.Array(dev.cl_queue, desc.sizes, dt, data=buffer.native, offset=int(offset), strides=byte_strides)
    return np.ndarray(desc.sizes, dt, buffer=buffer.native, offset=int(offset), strides=byte_strides)


def wrap_array(dev, x, what: str = "Buffer.wrap_array"):
    """A caller's array on ``dev`` as ``(BufferBinding, TensorDesc)``, its strides kept, no copy.
    CPU device: numpy arrays; CUDA: CuPy, DLPack or CUDA Array Interface arrays on that GPU;
    OpenCL: pyopencl arrays made in the device's context (``dev.cl_context``)."""
    kind = dev.info.backend
    if kind == "cpu":
        if not isinstance(x, np.ndarray):
            raise InvalidArgumentError(f"{what}: the CPU device wraps numpy arrays, got {type_name(x)}")
        arr = x
    elif kind == "cuda":
        check_cuda_device(x, dev, what)
        arr = to_cupy(x, dev)
    else:
        arr = check_cl_array(x, dev, what)
    dt = _data_type(arr.dtype, what)
    shape = tuple(arr.shape)
    strides = element_strides(shape, arr.strides, arr.dtype.itemsize)
    if strides is None:
        raise UnsupportedError(f"{what}: strides {arr.strides} (bytes) of a {arr.dtype} array are negative or not "
                               "whole elements; a TensorDesc cannot describe them; pass a copy")
    nbytes = span_elements(shape, strides) * arr.dtype.itemsize
    buf, off = native_buffer(dev, arr, max(nbytes, 1))
    desc = _desc_for(dt, shape, strides, offset_alignment(off, arr.dtype.itemsize))
    size = max(desc.total_size_in_bytes, nbytes)
    return BufferBinding(buf, off, size), desc


def offset_alignment(off: int, itemsize: int) -> int:
    # DirectML binds at a multiple of 16 unless the tensor promises a smaller power-of-two alignment
    if off % 16 == 0:
        return 0
    a = 16
    while off % a:
        a //= 2
    return max(a, itemsize)


def native_buffer(dev, arr, nbytes: int):
    """(Buffer over ``arr``'s memory, byte offset of its first element in that Buffer). The Buffer
    claims at least the 4-byte-rounded size a TensorDesc asks for; kernels never touch bytes past
    the last element, so the claim is never read or written."""
    kind = dev.info.backend
    size = (nbytes + 3) & ~3
    if kind == "cpu":
        return Buffer(dev, host_span(arr, nbytes), size, nbytes), 0
    if kind == "cuda":
        return Buffer(dev, arr.data, size, nbytes), 0
    off = int(arr.offset)
    real = arr.base_data.size
    return Buffer(dev, arr.base_data, max(off + size, real), real), off


def check_cl_array(x, dev, what: str):
    cla = sys.modules.get("pyopencl.array")
    if cla is None or not isinstance(x, cla.Array):
        raise InvalidArgumentError(f"{what}: {dev.name} wraps pyopencl arrays, got {type_name(x)}")
    if dev.info.backend != "opencl":
        raise InvalidArgumentError(f"{what}: a pyopencl array was given but the device is {dev.name}; pass "
                                   "device='opencl' or a host array")
    if x.context != dev.cl_context:
        raise InvalidArgumentError(f"{what}: the pyopencl array belongs to another OpenCL context than "
                                   f"{dev.name}'s; make it with dev.cl_queue (pyopencl.array.to_device(dev.cl_queue, "
                                   "a))")
    return x
