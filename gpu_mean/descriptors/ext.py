"""Operators DirectML does not have, under their own names (never by loosening a DirectML one).

* NaryMeanDesc: the mean of 1..64 same-shaped inputs in one pass: every input read once, summed in a
  wide accumulator (fp64 for floats where the device has it, int64/uint64 for integers), divided once
  and rounded once. Integers truncate toward zero.
* IntegerReduceMeanDesc: REDUCE AVERAGE for INT32 and UINT32, exact: 64-bit accumulation, truncation
  toward zero.
* ReduceSumDesc: the sum over axes into the input's wide type (FLOAT32/FLOAT16 -> FLOAT64,
  INT32 -> INT64, UINT32 -> UINT64), accumulated as REDUCE AVERAGE accumulates and never rounded
  to the narrow type. Partial sums of this kind combine into a mean with the one-device accuracy
  (gpu_mean.dask builds on it). FLOAT64 outputs need a device with fp64.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentTypeError
from . import tables
from .operators import (
    IN_PLACE_ANY,
    IN_PLACE_NONE,
    OperatorDesc,
    ReduceLike,
    check_same_shape,
    fail,
)
from .tensor import TensorDesc
from .types import KernelOp, OperatorType

MAX_NARY_INPUTS = 64


@dataclass(frozen=True)
class NaryMeanDesc(OperatorDesc):
    inputs: tuple
    output: TensorDesc
    kernel_op = KernelOp.NARY_MEAN
    operator_type = OperatorType.INVALID
    name = "GM_OPERATOR_NARY_MEAN"
    table = tables.EXT_NARY_MEAN
    in_place = IN_PLACE_ANY

    def __post_init__(self):
        if isinstance(self.inputs, (str, bytes, TensorDesc)) or not hasattr(self.inputs, "__iter__"):
            raise InvalidArgumentTypeError(f"{self.name}: InputTensors must be a sequence of TensorDesc, got "
                                           f"{type(self.inputs).__name__}")
        object.__setattr__(self, "inputs", tuple(self.inputs))

    def input_tensors(self):
        return self.inputs

    def input_names(self):
        return tuple(f"InputTensors[{i}]" for i in range(len(self.inputs)))

    def output_tensors(self):
        return (self.output,)

    def validate(self, level):
        if not 1 <= len(self.inputs) <= MAX_NARY_INPUTS:
            fail(self.name, f"{len(self.inputs)} inputs; the operator takes 1 to {MAX_NARY_INPUTS}")
        super().validate(level)

    def _validate_op(self, level):
        check_same_shape(self.name, list(zip(self.input_names() + ("OutputTensor",), self.inputs + (self.output,))))


@dataclass(frozen=True)
class IntegerReduceMeanDesc(ReduceLike):
    input: TensorDesc
    output: TensorDesc
    axes: tuple = ()
    kernel_op = KernelOp.REDUCE_MEAN
    operator_type = OperatorType.INVALID
    name = "GM_OPERATOR_INTEGER_REDUCE_MEAN"
    table = tables.EXT_INTEGER_REDUCE_MEAN
    in_place = IN_PLACE_NONE


@dataclass(frozen=True)
class ReduceSumDesc(ReduceLike):
    input: TensorDesc
    output: TensorDesc
    axes: tuple = ()
    kernel_op = KernelOp.REDUCE_SUM
    operator_type = OperatorType.INVALID
    name = "GM_OPERATOR_REDUCE_SUM_WIDE"
    table = tables.EXT_REDUCE_SUM
    output_table = tables.EXT_REDUCE_SUM_OUTPUT
    in_place = IN_PLACE_NONE

    def _check_output_type(self) -> bool:
        want = tables.WIDE_SUM_TYPE[self.input.data_type]
        if self.output.data_type != want:
            fail(self.name, f"OutputTensor has data type {self.output.data_type.name}; the sum of a "
                            f"{self.input.data_type.name} InputTensor is {want.name}")
        return False
