"""How arrays cross into a device: the one place each backend names the array libraries it takes.

Every backend has an ``ArrayBridge`` (``backend.arrays``), beside its alloc / copy / compile /
launch verbs. The runtime and the frontends ask it, and never name CuPy, PyTorch or pyopencl:

* ``operand(x, what, where=None, view=None, check=None)``: what a call needs of one caller's array, in one
  call: (native array, shape, dtype, element strides), the array viewed without a copy unless a
  TensorDesc cannot describe its strides (then ``packed``; ``check(dtype)`` first); ``host_operand``
  the same for host arrays on any device.
* ``view(x, what, where=None)``: a caller's device array as the backend's native array over the
  same memory (no copy), after checking that it lives on this device (``where``: the CUDA ordinal
  ``classify`` found, so that it is not looked up again); ``memory(arr, nbytes)`` the
  ``(native handle, byte offset, real bytes)`` a Buffer binds; ``alignment(arr)`` the
  GuaranteedBaseOffsetAlignment that offset allows.
* ``empty(like, shape, dtype)`` / ``from_host(like, a)``: a result in the caller's library (and,
  for OpenCL, on the caller's queue); ``packed(arr)`` the one copy, for strides a TensorDesc
  cannot describe.
* ``before(arrays)`` / ``after(result)``: the backend's queue or stream ordered against the
  caller's (CUDA: events on streams; OpenCL: markers on queues; CPU: nothing), never a host wait.
* ``export(buffer, desc, offset)``: a Buffer seen as the native array type.
* Host memory: ``host_in_place(span, writable)`` a native handle over a numpy array's own memory
  where the device works in host memory and the address allows (else None: the caller copies
  through pooled buffers), and ``host_output(nbytes)`` a result array with its handle (OpenCL).
  Waiting until the device's writes are visible there is the backend's ``host_sync``.

``classify`` (which kind of memory an array lives in, without converting it), ``result_rule`` and
``hand_back`` (the caller's library for a result) are shared by every backend.
"""
from __future__ import annotations

import importlib
import sys

import numpy as np

from ..descriptors.types import bfloat16_dtype, is_bfloat16
from ..errors import InvalidArgumentError, UnsupportedTypeError
from ..runtime.interop import element_strides, host_span, type_name

# DLDeviceType values (dlpack.h)
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_OPENCL, DL_CUDA_MANAGED = 1, 2, 3, 4, 13


def classify(x, index: int, what: str):
    """(kind, CUDA ordinal or None): "host", "cuda" or "opencl"; None when ``x`` is not an array
    (a Python object or an array-like numpy would convert). The one place a call looks up the GPU
    an array lives on: ``ArrayBridge.view`` is handed the ordinal found here."""
    if isinstance(x, (np.ndarray, np.generic)):
        return "host", None
    cla = sys.modules.get("pyopencl.array")
    if cla is not None and isinstance(x, cla.Array):
        return "opencl", None
    if hasattr(x, "__dlpack_device__") and hasattr(x, "__dlpack__"):
        kind, where = x.__dlpack_device__()
        kind = int(kind)
        if kind == DL_CPU:
            return "host", None
        if kind in (DL_CUDA, DL_CUDA_MANAGED):
            return "cuda", int(where)
        raise UnsupportedTypeError(f"{what}: input {index} ({type_name(x)}) lives on DLPack device type "
                                   f"{kind}; gpu_mean takes host (1), CUDA (2) and CUDA managed (13) memory")
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda", cuda_device_of(x)
    return None, None


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


def result_rule(x) -> tuple:
    """How a result goes back to a caller who passed ``x``: (library name, converter name)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return ("numpy", None)
    lib = sys.modules.get(type(x).__module__.split(".")[0])
    name = lib.__name__ if lib is not None else type(x).__module__
    if name in ("cupy", "pyopencl"):
        return (name, None)
    if hasattr(x, "__dlpack__") and lib is not None and hasattr(lib, "from_dlpack"):
        return (name, "from_dlpack")
    return ("cupy", None) if hasattr(x, "__cuda_array_interface__") else ("numpy", None)


def hand_back(result, rule: tuple, dtype=None):
    """A numpy, CuPy or pyopencl result as the caller's type; ``dtype``: the result's data type where
    the array's own dtype does not say it (BFLOAT16 held as int16 bits by a CuPy without bfloat16)."""
    lib, conv = rule
    if conv == "from_dlpack":
        mod = importlib.import_module(lib)
        if is_bfloat16(result.dtype if dtype is None else dtype):
            # DLPack has bfloat16 but numpy exports no such capsule (nor does every CuPy): the bits
            # go as int16 and the caller's library views them as its own bfloat16 (PyTorch, JAX:
            # same-size dtype views)
            return mod.from_dlpack(result.view(np.int16)).view(mod.bfloat16)
        return mod.from_dlpack(result)
    return result


def is_bfloat16_array(x) -> bool:
    """A DLPack producer's bfloat16 array (torch.bfloat16, jax's bfloat16, ...), by its dtype's name."""
    return str(getattr(x, "dtype", "")).rsplit(".", 1)[-1] == "bfloat16"


def int16_view(x):
    """A producer's bfloat16 array as its int16 bits, through the library's own same-size view (no
    copy), or None where the library has no such view."""
    lib = sys.modules.get(type(x).__module__.split(".")[0])
    if lib is not None and hasattr(lib, "int16") and callable(getattr(x, "view", None)):
        return x.view(lib.int16)
    return None


def _operand(arr, shape: tuple, dtype, pack, check) -> tuple:
    """(array, shape, dtype, element strides): ``check(dtype)`` first, then ``pack(arr)`` (the one
    copy) only where a TensorDesc cannot describe the strides (negative, or not whole elements)."""
    if check is not None:
        check(dtype)
    strides = element_strides(shape, arr.strides, dtype.itemsize)
    if strides is None:
        arr = pack(arr)
        strides = element_strides(shape, arr.strides, dtype.itemsize)
    return arr, shape, dtype, strides


def host_operand(x, check=None) -> tuple:
    """``ArrayBridge.operand`` for a host array (``host_array``) on any device."""
    arr = host_array(x)
    return _operand(arr, arr.shape, arr.dtype, _packed_host, check)


def _packed_host(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr) if arr.ndim else np.array(arr)


def host_array(x) -> np.ndarray:
    """A host array (numpy, numpy scalar or CPU DLPack producer) as numpy over the same memory.
    A producer's bfloat16 array, which numpy's from_dlpack refuses, is read as its int16 bits (the
    library's own same-size view, no copy) and seen as ml_dtypes.bfloat16."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    if is_bfloat16_array(x):
        bits = int16_view(x)
        if bits is not None:
            return np.from_dlpack(bits).view(bfloat16_dtype())
    return np.from_dlpack(x)


class ArrayBridge:
    """The arrays one backend's device takes in place, and how results go back. This base is the
    CPU device's: numpy is its native memory."""

    kind = "host"            # the kind of array ``view`` takes
    host_memory = True       # the device computes in host memory: numpy arrays may be bound in place

    def __init__(self, backend):
        self.backend = backend

    @property
    def name(self) -> str:
        return f"{self.backend.info.id} ({self.backend.info.name})"

    def owns(self, x) -> bool:
        """Whether ``x`` is an array ``view`` takes (for finding the device an array lives on)."""
        return isinstance(x, np.ndarray)

    def operand(self, x, what: str, where=None, view=None, check=None) -> tuple:
        """(native array, shape, dtype, element strides) of the caller's ``x`` (``view``: its view,
        where the caller took it already), packed on the device only where a TensorDesc cannot
        describe its strides; ``check(dtype)`` runs before any copy."""
        arr = self.view(x, what, where) if view is None else view
        return _operand(arr, tuple(int(n) for n in arr.shape), self.dtype_of(x, arr), self.packed, check)

    def view(self, x, what: str, where=None):
        if not isinstance(x, np.ndarray):
            raise InvalidArgumentError(f"{what}: the CPU device wraps numpy arrays, got {type_name(x)}")
        return x

    def dtype_of(self, x, arr) -> np.dtype:
        """The data type of ``arr``, the view of the caller's ``x``: its own dtype, except where a
        backend holds a bfloat16 array as int16 bits (CUDA, with a CuPy that has no bfloat16)."""
        return np.dtype(arr.dtype)

    def memory(self, arr, nbytes: int):
        """(native handle, byte offset of the first element, real bytes) of a native array."""
        return host_span(arr, nbytes), 0, nbytes

    def alignment(self, arr) -> int:
        return 0

    def empty(self, like, shape, dtype):
        return np.empty(shape, dtype)

    def from_host(self, like, a: np.ndarray):
        return a

    def packed(self, arr):
        return _packed_host(arr)

    def before(self, arrays) -> None:
        pass

    def after(self, result) -> None:
        pass

    def ordered(self, arrays, result, run, *args) -> None:
        """``before(arrays)``, ``run(*args)``, ``after(result)``: a launch over the caller's arrays."""
        self.before(arrays)
        run(*args)
        self.after(result)

    def export(self, buffer, desc, offset: int, byte_strides):
        return np.ndarray(desc.sizes, desc.numpy_dtype, buffer=buffer.native, offset=int(offset),
                          strides=byte_strides)

    def host_in_place(self, span: np.ndarray, writable: bool):
        return span


def aligned_empty(nbytes: int, align: int) -> np.ndarray:
    """``nbytes`` of uninitialised host memory starting at a multiple of ``align`` bytes."""
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes]


def wrong_device(x, kind: str, where, dev_name: str, what: str) -> InvalidArgumentError:
    """The error for an array of ``kind`` handed to a device that does not take it in place."""
    if kind == "cuda":
        return InvalidArgumentError(f"{what}: a {type_name(x)} on cuda:{where} was given but the device is "
                                    f"{dev_name}; pass device='cuda:{where}' or a host array")
    if kind == "opencl":
        return InvalidArgumentError(f"{what}: a pyopencl array was given but the device is {dev_name}; pass "
                                    "device='opencl' or a host array")
    return InvalidArgumentError(f"{what}: {dev_name} wraps its own device arrays, got {type_name(x)}")
