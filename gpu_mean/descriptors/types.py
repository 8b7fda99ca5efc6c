"""DirectML enums with DirectML's numeric values (DML_TENSOR_DATA_TYPE, DML_FEATURE_LEVEL, ...),
plus one extension value, DataType.BFLOAT16 (see EXTENSION_BIT)."""
from __future__ import annotations

import enum

import numpy as np

# gpu_mean's own DataType values carry this bit. DirectML numbers DML_TENSOR_DATA_TYPE densely from 0
# (INT4 = 13 arrived with FL 6.3) and will number new types 14, 15, ...: a value in a range of its own
# can never collide with one DirectML adds, and 0x1000_0000 still fits the C enum's int (positive,
# below 2^31). The low bits are ONNX's TensorProto number for the type (BFLOAT16 = 16), for reading.
EXTENSION_BIT = 0x1000_0000


class DataType(enum.IntEnum):
    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13
    # not DirectML's: storage-only brain float (8 exponent bits, 7 fraction bits), computed in float32
    # or accumulated wide and rounded once (gm.ext operators only; docs/design.md, "Extension types")
    BFLOAT16 = EXTENSION_BIT | 16

    @property
    def size_in_bits(self) -> int:
        return _BITS[self]

    @property
    def element_size(self) -> float:
        """Bytes per element (0.5 for the 4-bit types, 0 for UNKNOWN)."""
        return _BITS[self] / 8

    @property
    def numpy_dtype(self) -> np.dtype:
        if self == DataType.BFLOAT16:
            return bfloat16_dtype()
        if self not in _NUMPY:
            raise KeyError(f"DataType.{self.name} has no numpy equivalent")
        return np.dtype(_NUMPY[self])

    @property
    def is_float(self) -> bool:
        return self in (DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64, DataType.BFLOAT16)

    @property
    def is_extension(self) -> bool:
        """A gpu_mean value, not one of DirectML's DML_TENSOR_DATA_TYPE values."""
        return bool(self & EXTENSION_BIT)

    @classmethod
    def from_numpy(cls, dtype) -> DataType:
        dt = np.dtype(dtype)
        for k, v in _NUMPY.items():
            if np.dtype(v) == dt:
                return k
        if is_bfloat16(dt):
            return DataType.BFLOAT16
        raise KeyError(f"numpy dtype {dt} has no DirectML data type")


def bfloat16_dtype() -> np.dtype:
    """ml_dtypes.bfloat16 as a numpy dtype (the type onnx and JAX use; numpy has none). Imported on
    first use, so that ``import gpu_mean`` does not load it."""
    try:
        import ml_dtypes
    except ImportError as e:   # a dependency of gpu_mean; only a broken install lacks it
        raise ImportError("DataType.BFLOAT16 arrays are ml_dtypes.bfloat16 arrays: pip install ml_dtypes") from e
    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype) -> bool:
    """Whether a numpy dtype is ml_dtypes.bfloat16, without importing ml_dtypes for other dtypes."""
    dt = np.dtype(dtype)
    return dt.kind == "V" and dt.name == "bfloat16" and dt.itemsize == 2 and dt == bfloat16_dtype()


def is_float_dtype(dtype) -> bool:
    """numpy's float kinds and bfloat16 (whose numpy kind is 'V')."""
    dt = np.dtype(dtype)
    return dt.kind == "f" or is_bfloat16(dt)


_BITS = {
    DataType.UNKNOWN: 0, DataType.FLOAT32: 32, DataType.FLOAT16: 16, DataType.UINT32: 32,
    DataType.UINT16: 16, DataType.UINT8: 8, DataType.INT32: 32, DataType.INT16: 16,
    DataType.INT8: 8, DataType.FLOAT64: 64, DataType.UINT64: 64, DataType.INT64: 64,
    DataType.UINT4: 4, DataType.INT4: 4, DataType.BFLOAT16: 16,
}
_NUMPY = {
    DataType.FLOAT32: np.float32, DataType.FLOAT16: np.float16, DataType.UINT32: np.uint32,
    DataType.UINT16: np.uint16, DataType.UINT8: np.uint8, DataType.INT32: np.int32,
    DataType.INT16: np.int16, DataType.INT8: np.int8, DataType.FLOAT64: np.float64,
    DataType.UINT64: np.uint64, DataType.INT64: np.int64,
}


class TensorFlags(enum.IntFlag):
    NONE = 0x0
    OWNED_BY_DML = 0x1


class FeatureLevel(enum.IntEnum):
    FL_1_0 = 0x1000
    FL_2_0 = 0x2000
    FL_2_1 = 0x2100
    FL_3_0 = 0x3000
    FL_3_1 = 0x3100
    FL_4_0 = 0x4000
    FL_4_1 = 0x4100
    FL_5_0 = 0x5000
    FL_5_1 = 0x5100
    FL_5_2 = 0x5200
    FL_6_0 = 0x6000
    FL_6_1 = 0x6100
    FL_6_2 = 0x6200
    FL_6_3 = 0x6300
    FL_6_4 = 0x6400

    @property
    def label(self) -> str:
        return self.name[3:].replace("_", ".")

    def __str__(self) -> str:
        """DirectML's name, DML_FEATURE_LEVEL_2_1 (an IntEnum would print 8448)."""
        return f"DML_FEATURE_LEVEL{self.name[2:]}"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)


class Feature(enum.IntEnum):
    TENSOR_DATA_TYPE_SUPPORT = 0
    FEATURE_LEVELS = 1


class ExecutionFlags(enum.IntFlag):
    NONE = 0x0
    ALLOW_HALF_PRECISION_COMPUTATION = 0x1
    DISABLE_META_COMMANDS = 0x2
    DESCRIPTORS_VOLATILE = 0x4


class ReduceFunction(enum.IntEnum):
    ARGMAX = 0
    ARGMIN = 1
    AVERAGE = 2
    L1 = 3
    L2 = 4
    LOG_SUM = 5
    LOG_SUM_EXP = 6
    MAX = 7
    MIN = 8
    MULTIPLY = 9
    SUM = 10
    SUM_SQUARE = 11


class OperatorType(enum.IntEnum):
    INVALID = 0
    ELEMENT_WISE_IDENTITY = 1
    ELEMENT_WISE_ADD = 4
    ELEMENT_WISE_MEAN = 22
    REDUCE = 55


class KernelOp(enum.Enum):
    """What a descriptor computes, the one fact the planner and every backend dispatch on (never the
    descriptor's class). Element-wise operations first, then reductions."""

    MEAN = "mean"               # (a + b) / 2, correctly rounded, no intermediate overflow
    ADD = "add"                 # a + b; integers wrap
    IDENTITY = "identity"       # a copy through strides, optionally x * scale + bias
    NARY_MEAN = "nary_mean"     # the mean of 1..64 inputs, one rounding
    REDUCE_MEAN = "reduce_mean"  # the mean over axes: floats wide-accumulated, integers exact
    REDUCE_SUM = "reduce_sum"   # the sum over axes into the wide type (gm.ext partial sums)

    @property
    def is_reduction(self) -> bool:
        return self in (KernelOp.REDUCE_MEAN, KernelOp.REDUCE_SUM)


class BindingType(enum.IntEnum):
    NONE = 0
    BUFFER = 1
    BUFFER_ARRAY = 2


# DirectML's alignment constants
TEMPORARY_BUFFER_ALIGNMENT = 256
PERSISTENT_BUFFER_ALIGNMENT = 256
MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16
