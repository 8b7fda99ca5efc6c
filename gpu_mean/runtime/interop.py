"""The layout arithmetic of arrays shared with other libraries (pure; no array library named):
byte strides as TensorDesc element strides, the bytes an array spans, the alignment of an offset.
Which arrays a device takes, and how, is each backend's ``ArrayBridge`` (gpu_mean/bridges/arrays.py);
``Buffer.as_tensor`` / ``Buffer.wrap_array`` (objects.py) put the two together."""
from __future__ import annotations

import numpy as np

from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType
from ..errors import InvalidArgumentError


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


def desc_for(dt: DataType, shape, strides, align: int = 0) -> TensorDesc:
    shape = tuple(shape) or (1,)
    strides = tuple(strides) or (1,)
    return TensorDesc(dt, shape, strides, guaranteed_base_offset_alignment=align)


def data_type(dtype, what: str) -> DataType:
    try:
        return DataType.from_numpy(dtype)
    except KeyError as e:
        raise InvalidArgumentError(f"{what}: data type {np.dtype(dtype)} has no DirectML data type") from e


def offset_alignment(off: int, itemsize: int) -> int:
    # DirectML binds at a multiple of 16 unless the tensor promises a smaller power-of-two alignment
    if off % 16 == 0:
        return 0
    a = 16
    while off % a:
        a //= 2
    return max(a, itemsize)
