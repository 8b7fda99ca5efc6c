"""The CUDA backend's arrays: CuPy arrays, PyTorch CUDA tensors and any ``__cuda_array_interface__``
or CUDA DLPack producer on the backend's GPU, viewed as CuPy arrays over the same memory.

Stream rules: the backend launches on its own non-blocking stream. Work on another stream is
ordered against it with events, never with a host synchronize (``before``: the backend stream
waits for the caller's current stream; ``after``: the caller's current stream waits for ours), and
an exported view names the backend's stream, as the CUDA Array Interface and DLPack ask of a
producer. Host arrays cross the bus once each way, through the backend's pinned staging slots
(``cuda.py: PinnedStaging``): the copies are asynchronous on the backend's stream, and a call's
one host wait is the read of its result.
"""
from __future__ import annotations

import functools

import numpy as np

from ..descriptors.types import bfloat16_dtype, is_bfloat16
from ..errors import InvalidArgumentError, UnsupportedTypeError
from ..runtime.interop import span_elements, type_name
from .arrays import DL_CUDA, ArrayBridge, cuda_device_of, int16_view, is_bfloat16_array


class CudaArrays(ArrayBridge):
    kind = "cuda"
    host_memory = False

    def __init__(self, backend):
        super().__init__(backend)
        import cupy
        self.cp = cupy

    @property
    def index(self) -> int:
        return self.backend.info.index

    def owns(self, x) -> bool:
        return cuda_device_of(x) == self.index

    @property
    def native_type(self):
        """The array type a repeated call reads its signature from directly (frontends/repeat.py)."""
        return self.cp.ndarray

    @staticmethod
    def native_signature(x) -> tuple:
        return x.dtype, x.shape, x.strides, x.device.id

    @staticmethod
    def native_default(x) -> str:
        """The device string the full path takes for a native array when no device is given."""
        return f"cuda:{x.device.id}"

    def view(self, x, what: str, where=None):
        """A CuPy array over ``x``'s memory (no copy). ``where``: the GPU ``x`` lives on, when the
        caller has looked it up already (``classify``). A DLPack producer is asked for its capsule
        with the backend's stream current, so that it makes that stream wait on its own pending
        work (the DLPack rule); a CUDA Array Interface v3 ``stream`` is honoured by CuPy itself."""
        if where is None:
            where = cuda_device_of(x)
        if where != self.index:
            raise InvalidArgumentError(f"{what}: the {type_name(x)} lives on cuda:{where} but the device is "
                                       f"{self.name}; move it with cupy.asarray under "
                                       f"cupy.cuda.Device({self.index}) or pass device='cuda:{where}'")
        cp = self.cp
        if isinstance(x, cp.ndarray):
            return x
        with cp.cuda.Device(self.index):
            if hasattr(x, "__dlpack__"):
                if is_bfloat16_array(x):
                    # a bfloat16 tensor (PyTorch, JAX) crosses as its int16 bits, which every CuPy
                    # reads (a CuPy without ml_dtypes' bfloat16 refuses the bfloat16 capsule itself)
                    bits = int16_view(x)
                    if bits is None:
                        raise UnsupportedTypeError(
                            f"{what}: the bfloat16 {type_name(x)} has no view as int16 (x.view(int16)) through "
                            "which CuPy can read its bits; pass a PyTorch or JAX bfloat16 tensor, or a CuPy "
                            "array of ml_dtypes.bfloat16")
                    x = bits
                with self.backend.stream:     # cupy.from_dlpack passes the current stream to __dlpack__
                    return cp.from_dlpack(x)
            return cp.asarray(x)

    def dtype_of(self, x, arr) -> np.dtype:
        dt = arr.dtype
        if dt == np.int16 and is_bfloat16_array(x):
            return bfloat16_dtype()      # the int16 bits ``view`` read a bfloat16 tensor as
        return dt

    @functools.cached_property
    def native_bfloat16(self) -> bool:
        """Whether this CuPy makes arrays of ml_dtypes.bfloat16 (cupy/cupy#9494; it needs ml_dtypes);
        without, a bfloat16 result is made as int16 bits and handed back through a bfloat16 view."""
        try:
            with self.cp.cuda.Device(self.index):
                self.cp.empty((0,), bfloat16_dtype())
        except (TypeError, ValueError, NotImplementedError):
            return False
        return True

    def _storage(self, dtype) -> np.dtype:
        return np.dtype(np.int16) if is_bfloat16(dtype) and not self.native_bfloat16 else np.dtype(dtype)

    def memory(self, arr, nbytes: int):
        return arr.data, 0, nbytes

    def empty(self, like, shape, dtype):
        with self.cp.cuda.Device(self.index):
            return self.cp.empty(shape, self._storage(dtype))

    def from_host(self, like, a: np.ndarray):
        with self.cp.cuda.Device(self.index):
            return self.cp.asarray(a.view(self._storage(a.dtype)))

    def packed(self, arr):
        with self.cp.cuda.Device(self.index):
            return self.cp.ascontiguousarray(arr)

    def before(self, arrays=()) -> None:
        """The backend stream waits for everything already queued on the caller's current stream
        (its writes to the inputs, our own copies, the output's allocation)."""
        s = self.backend.stream
        with self.cp.cuda.Device(self.index):
            cur = self.cp.cuda.get_current_stream()
            if cur.ptr != s.ptr:
                self.backend.wait_for(cur)

    def after(self, result=None) -> None:
        """The caller's current stream waits for our kernels before it may touch the result (or
        reuse the inputs' memory); the host does not wait."""
        s = self.backend.stream
        with self.cp.cuda.Device(self.index):
            cur = self.cp.cuda.get_current_stream()
            if cur.ptr != s.ptr:
                self.backend.make_wait(cur)

    def ordered(self, arrays, result, run, *args) -> None:
        """``before``, ``run(*args)`` and ``after`` in one device context: one look at the caller's
        stream, and no event where it is the backend's own."""
        be = self.backend
        with self.cp.cuda.Device(self.index):
            cur = self.cp.cuda.get_current_stream()
            if cur.ptr == be.stream.ptr:
                run(*args)
                return
            be.wait_for(cur)
            run(*args)
            be.make_wait(cur)

    def export(self, buffer, desc, offset: int, byte_strides):
        return CudaTensorView(buffer, desc, offset)

    def host_in_place(self, span, writable: bool):
        return None


class CudaTensorView:
    """A (Buffer, TensorDesc) on a CUDA device seen as an array. It holds the Buffer, and so does
    every array a consumer builds from it (CuPy and PyTorch keep the exporting object alive)."""

    def __init__(self, buffer, desc, offset: int = 0):
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
