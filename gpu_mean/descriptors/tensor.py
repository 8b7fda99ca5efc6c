"""DML_BUFFER_TENSOR_DESC as a frozen value type, and DMLCalcBufferTensorSize."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidArgumentError, InvalidArgumentTypeError
from .types import DataType, TensorFlags

MAX_ELEMENTS = 2**32 - 1  # DirectML: a buffer tensor holds at most 2^32 - 1 elements
# DML_BUFFER_TENSOR_DESC declares Sizes, Strides, Flags and GuaranteedBaseOffsetAlignment as UINT
# and TotalTensorSizeInBytes as UINT64: values that do not fit are invalid, never wrapped.
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1


def packed_strides(sizes) -> tuple[int, ...]:
    """Row-major strides in elements: the last dimension is contiguous."""
    strides, acc = [], 1
    for s in reversed(tuple(sizes)):
        strides.append(acc)
        acc *= int(s)
    return tuple(reversed(strides))


def _last_index(sizes, strides) -> int:
    return sum((int(s) - 1) * int(st) for s, st in zip(sizes, strides))


def calc_buffer_tensor_size(data_type: DataType, sizes, strides=None) -> int:
    """DMLCalcBufferTensorSize: roundup4((dot(sizes - 1, strides) + 1) * element size) bytes.

    Works in bits so that the 4-bit types round as DirectMLX does; returns 0 for a data type
    without an element size, as the reference helper does. Python integers: no 32-bit wrap.
    """
    data_type = DataType(data_type)
    bits = data_type.size_in_bits
    if bits == 0:
        return 0
    sizes = as_int_tuple("calc_buffer_tensor_size", "Sizes", sizes)
    if strides is not None:
        strides = as_int_tuple("calc_buffer_tensor_size", "Strides", strides)
    if strides is None:
        count = int(np.prod(sizes, dtype=object)) if sizes else 1
    else:
        count = _last_index(sizes, strides) + 1
    nbytes = (count * bits + 7) // 8
    return (nbytes + 3) & ~3


def is_integer(value) -> bool:
    """The integer types a descriptor field takes: int and the numpy integers, never bool.

    Floats (even integral ones), Fraction, Decimal, strings and bytes are refused rather than
    truncated by ``int()``: a silently truncated size or axis addresses the wrong memory.
    """
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def as_int(owner: str, field_name: str, value) -> int:
    if not is_integer(value):
        raise InvalidArgumentTypeError(f"{owner}: {field_name} must be an int or a numpy integer, got "
                                       f"{type(value).__name__} {value!r}")
    return int(value)


def is_int_sequence_container(values) -> bool:
    """An ordered sequence that may hold the integers of Sizes, Strides or Axes: a tuple, a list, a
    range, a 1-D numpy array, ... Never a mapping (it iterates its keys: ``{2: 3}`` would become sizes
    ``(2,)``), a set (no order), a string or bytes, a scalar, or a one-shot iterator."""
    if isinstance(values, np.ndarray):
        return values.ndim == 1
    return isinstance(values, Sequence) and not isinstance(values, (str, bytes, bytearray))


def as_int_tuple(owner: str, field_name: str, values) -> tuple[int, ...]:
    """A sequence of integers as a tuple of Python ints; the range is checked by create_operator."""
    if not is_int_sequence_container(values):
        raise InvalidArgumentTypeError(f"{owner}: {field_name} must be a sequence of integers (a tuple or a "
                                       f"list), got {type(values).__name__} {values!r}")
    return tuple(as_int(owner, f"{field_name}[{i}]", v) for i, v in enumerate(values))


@dataclass(frozen=True)
class TensorDesc:
    """A buffer tensor: sizes and strides in elements, as DML_BUFFER_TENSOR_DESC.

    ``strides=None`` means packed row-major. ``total_size_in_bytes=None`` takes the size that
    ``calc_buffer_tensor_size`` computes. Validity against an operator is checked by
    ``create_operator``, which knows the operator, the tensor's role and the feature level.

    Integer fields (sizes, strides, total_size_in_bytes, guaranteed_base_offset_alignment, flags
    and data_type) take ``int``, numpy integers or the field's enum only; anything else (bool,
    floats even when integral, Fraction, Decimal, str, bytes) raises ``InvalidArgumentTypeError``
    (an ``InvalidArgumentError`` and a ``TypeError``) here, naming the field. The stored fields are
    plain Python ints. Ranges (UINT32 sizes and strides, UINT64 total size, known flag bits) are
    checked by ``create_operator``.
    """

    data_type: DataType
    sizes: tuple
    strides: tuple | None = None
    total_size_in_bytes: int | None = None
    guaranteed_base_offset_alignment: int = 0
    flags: TensorFlags = TensorFlags.NONE
    _computed: int = field(default=0, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.data_type, DataType) and not is_integer(self.data_type):
            raise InvalidArgumentTypeError(f"TensorDesc: DataType must be a DataType or an integer, got "
                                           f"{type(self.data_type).__name__} {self.data_type!r}")
        try:
            dt = DataType(int(self.data_type))
        except ValueError as e:
            raise InvalidArgumentError(f"TensorDesc: unknown data type {self.data_type!r}") from e
        object.__setattr__(self, "data_type", dt)
        object.__setattr__(self, "sizes", as_int_tuple("TensorDesc", "Sizes", self.sizes))
        if self.strides is not None:
            object.__setattr__(self, "strides", as_int_tuple("TensorDesc", "Strides", self.strides))
        flags = as_int("TensorDesc", "Flags", self.flags)
        # a negative value has no TensorFlags form (TensorFlags(-1) is OWNED_BY_DML): keep the int,
        # which create_operator rejects as unknown bits
        object.__setattr__(self, "flags", TensorFlags(flags) if flags >= 0 else flags)
        object.__setattr__(self, "guaranteed_base_offset_alignment",
                           as_int("TensorDesc", "GuaranteedBaseOffsetAlignment",
                                  self.guaranteed_base_offset_alignment))
        ok = all(s >= 0 for s in self.sizes) and (
            self.strides is None or (len(self.strides) == len(self.sizes) and all(s >= 0 for s in self.strides)))
        computed = calc_buffer_tensor_size(dt, self.sizes, self.strides) if ok else 0
        object.__setattr__(self, "_computed", computed)
        if self.total_size_in_bytes is None:
            object.__setattr__(self, "total_size_in_bytes", computed)
        else:
            object.__setattr__(self, "total_size_in_bytes",
                               as_int("TensorDesc", "TotalTensorSizeInBytes", self.total_size_in_bytes))

    @property
    def dimension_count(self) -> int:
        return len(self.sizes)

    @property
    def element_count(self) -> int:
        # Python ints: an int64 product wraps for sizes near 2^32 and would pass the element cap
        return math.prod(self.sizes)

    @property
    def minimum_size_in_bytes(self) -> int:
        return self._computed

    @property
    def effective_strides(self) -> tuple[int, ...]:
        return self.strides if self.strides is not None else packed_strides(self.sizes)

    @property
    def is_packed(self) -> bool:
        return self.effective_strides == packed_strides(self.sizes)

    @property
    def numpy_dtype(self) -> np.dtype:
        return self.data_type.numpy_dtype

    @property
    def last_index(self) -> int:
        return _last_index(self.sizes, self.effective_strides)

    def has_overlap(self) -> bool:
        """True when two logical elements map to one offset (only legal for inputs)."""
        dims = sorted((st, sz) for sz, st in zip(self.sizes, self.effective_strides) if sz > 1)
        extent, disjoint = 0, True
        for st, sz in dims:
            if st == 0 or st <= extent:
                disjoint = False
                break
            extent += (sz - 1) * st
        if disjoint:
            return False
        if any(st == 0 for st, _ in dims) or self.element_count > 1 << 22:
            return True
        offs = np.zeros(1, np.int64)
        for sz, st in zip(self.sizes, self.effective_strides):
            offs = (offs[:, None] + np.arange(sz, dtype=np.int64) * st).ravel()
        return np.unique(offs).size != offs.size

    @classmethod
    def from_array(cls, array: np.ndarray) -> TensorDesc:
        return cls(DataType.from_numpy(array.dtype), array.shape if array.ndim else (1,))
