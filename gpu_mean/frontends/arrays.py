"""Operands of ``gm.mean`` / ``gm.reduce_mean`` as callers hold them, and results handed back as
the same type.

=============================  ==========================  ====================================
input                          where it runs               result
=============================  ==========================  ====================================
numpy array or scalar          any device (host upload)    numpy
DLPack producer on the CPU     any device (host upload)    the producer's library, through its
(PyTorch CPU, array-api-strict)                            ``from_dlpack`` (numpy if it has none)
CuPy array                     CUDA, in place              CuPy
DLPack producer on CUDA        CUDA, in place              that library's ``from_dlpack``
(PyTorch CUDA, JAX, ...)                                   (PyTorch CUDA -> PyTorch CUDA)
``__cuda_array_interface__``   CUDA, in place              CuPy
only (Numba, older libraries)
pyopencl array                 OpenCL, in place            pyopencl, on the input's queue
=============================  ==========================  ====================================

Python lists and scalars are refused: numpy would infer float64 or int64, which the mean
operators do not take, and narrowing them silently would change values.
"""
from __future__ import annotations

import importlib
import sys

import numpy as np

from ..descriptors.types import DataType
from ..errors import UnsupportedTypeError
from ..runtime import interop

SUPPORTED = (DataType.FLOAT32, DataType.FLOAT16, DataType.INT32, DataType.UINT32)
_SUPPORTED_NAMES = "float32, float16, int32 or uint32"


class Operand:
    """One input: ``kind`` is "host", "cuda" or "opencl"; ``array`` the numpy, CuPy or pyopencl
    array over the caller's memory; ``strides`` in elements (>= 0); ``rule`` how a result goes back;
    ``span_bytes`` the bytes from the first element through the last."""

    __slots__ = ("kind", "array", "shape", "dtype", "strides", "rule", "source", "span_bytes")

    def __init__(self, kind, array, shape, dtype, strides, rule, source):
        self.kind, self.array, self.shape, self.dtype = kind, array, shape, dtype
        self.strides, self.rule, self.source = strides, rule, source
        self.span_bytes = interop.span_elements(shape, strides) * dtype.itemsize


_DATA_TYPES = {np.dtype(DataType(d).numpy_dtype): DataType(d) for d in SUPPORTED}


def data_type_of(dtype, what: str) -> DataType:
    dt = _DATA_TYPES.get(dtype)      # a dict lookup: DataType.from_numpy walks every type
    if dt not in SUPPORTED:
        hint = ""
        if np.dtype(dtype) in (np.float64, np.int64, np.uint64):
            narrow = {"f": "float32", "i": "int32", "u": "uint32"}[np.dtype(dtype).kind]
            hint = f"; convert with x.astype(np.{narrow}) where the values fit"
        raise UnsupportedTypeError(f"{what}: data type {np.dtype(dtype)} is not supported; the mean operators take "
                                   f"{_SUPPORTED_NAMES}{hint}")
    return dt


def _refuse_python(x, index: int, what: str):
    inferred = np.asarray(x).dtype if isinstance(x, (list, tuple, bool, int, float, complex)) else None
    said = f"numpy would infer {inferred} from it, " if inferred is not None else ""
    raise UnsupportedTypeError(f"{what}: input {index} is a Python {type(x).__name__}; {said}and gpu_mean converts "
                               f"no Python objects; pass a numpy (or CuPy, PyTorch, pyopencl) array of "
                               f"{_SUPPORTED_NAMES}, e.g. np.asarray(x, dtype=np.float32)")


def _library(x):
    return sys.modules.get(type(x).__module__.split(".")[0])


def classify(x, index: int, what: str):
    """(kind, cuda ordinal or None) without converting anything."""
    if isinstance(x, (np.ndarray, np.generic)):
        return "host", None
    cla = sys.modules.get("pyopencl.array")
    if cla is not None and isinstance(x, cla.Array):
        return "opencl", None
    if hasattr(x, "__dlpack_device__") and hasattr(x, "__dlpack__"):
        kind = int(x.__dlpack_device__()[0])
        if kind == interop.DL_CPU:
            return "host", None
        if kind in (interop.DL_CUDA, interop.DL_CUDA_MANAGED):
            return "cuda", interop.cuda_device_of(x)
        raise UnsupportedTypeError(f"{what}: input {index} ({interop.type_name(x)}) lives on DLPack device type "
                                   f"{kind}; gpu_mean takes host (1), CUDA (2) and CUDA managed (13) memory")
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda", interop.cuda_device_of(x)
    if isinstance(x, (list, tuple, bool, int, float, complex)):
        _refuse_python(x, index, what)
    raise UnsupportedTypeError(f"{what}: input {index} is a {interop.type_name(x)}, which is not an array gpu_mean "
                               "takes (numpy, CuPy, pyopencl, or anything with __dlpack__ or "
                               "__cuda_array_interface__)")


def result_rule(x) -> tuple:
    """How a result goes back to a caller who passed ``x``: (library name, converter name)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return ("numpy", None)
    lib = _library(x)
    name = lib.__name__ if lib is not None else type(x).__module__
    if name in ("cupy", "pyopencl"):
        return (name, None)
    if hasattr(x, "__dlpack__") and lib is not None and hasattr(lib, "from_dlpack"):
        return (name, "from_dlpack")
    return ("cupy", None) if hasattr(x, "__cuda_array_interface__") else ("numpy", None)


def as_operand(x, index: int, kind: str, dev, what: str, rule=None) -> Operand:
    """The caller's memory, viewed without a copy unless a TensorDesc cannot describe its strides."""
    rule = rule or result_rule(x)
    if kind == "host":
        arr = x if isinstance(x, np.ndarray) else (np.asarray(x) if isinstance(x, np.generic) else np.from_dlpack(x))
    elif kind == "cuda":
        interop.check_cuda_device(x, dev, f"{what} input {index}")
        arr = interop.to_cupy(x, dev)
    else:
        arr = interop.check_cl_array(x, dev, f"{what} input {index}")
    dtype = arr.dtype if kind == "host" else np.dtype(arr.dtype)
    data_type_of(dtype, what)
    shape = arr.shape if kind == "host" else tuple(int(n) for n in arr.shape)
    strides = interop.element_strides(shape, arr.strides, dtype.itemsize)
    if strides is None:
        arr = _packed_copy(arr, kind, dev)
        strides = interop.element_strides(shape, arr.strides, dtype.itemsize)
    return Operand(kind, arr, shape, dtype, strides, rule, x)


def _packed_copy(arr, kind: str, dev):
    # negative strides or strides that are not whole elements: the one case a copy is made
    if kind == "host":
        return np.ascontiguousarray(arr) if arr.ndim else np.array(arr)
    if kind == "cuda":
        import cupy
        with cupy.cuda.Device(dev.info.index):
            return cupy.ascontiguousarray(arr)
    # pyopencl copies strided device arrays only through the host
    import pyopencl.array as cla
    return cla.to_device(dev.cl_queue, np.ascontiguousarray(arr.get(queue=dev.cl_queue)))


def check_one_library(arrays, what: str) -> tuple:
    """The one result rule of all inputs; mixing libraries is an error naming the types."""
    rules = {result_rule(x) for x in arrays}
    if len(rules) > 1:
        kinds = sorted({interop.type_name(x) for x in arrays})
        raise UnsupportedTypeError(f"{what}: inputs mix {', '.join(kinds)}; pass arrays of one library (the "
                                   "result comes back as that library's type)")
    return rules.pop()


def hand_back(result, rule: tuple):
    """A numpy, CuPy or pyopencl result as the caller's type."""
    lib, conv = rule
    if conv == "from_dlpack":
        return importlib.import_module(lib).from_dlpack(result)
    return result
