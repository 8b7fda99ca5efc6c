"""Operators DirectML does not have, under their own names (never by loosening a DirectML one).

* NaryMeanDesc: the mean of 1..64 same-shaped inputs in one pass: every input read once, summed in a
  wide accumulator, divided once and rounded once. Integers truncate toward zero. Takes the four
  DirectML mean types and the four extension types (BFLOAT16, FLOAT64, INT64, UINT64).
* IntegerReduceMeanDesc: REDUCE AVERAGE for INT32 and UINT32, exact: 64-bit accumulation, truncation
  toward zero.
* MeanDesc: ELEMENT_WISE_MEAN for the extension types: BFLOAT16 computed in FLOAT32 and rounded once,
  FLOAT64 correctly rounded, INT64/UINT64 exact and truncated toward zero, never an intermediate
  overflow.
* ReduceMeanDesc: REDUCE AVERAGE for the extension types: BFLOAT16 accumulated in FLOAT64, FLOAT64
  in double-double, INT64/UINT64 exactly in 128 bits; one division, one rounding (integers truncate).
* ReduceSumDesc: the sum over axes into the input's wide type (FLOAT32/FLOAT16/BFLOAT16 -> FLOAT64,
  INT32 -> INT64, UINT32 -> UINT64), accumulated as the mean reductions accumulate and never rounded
  to the narrow type. FLOAT64, INT64 and UINT64 totals take 128 bits: a high word in OutputTensor
  and a low word in OutputLowTensor (``output_low``): FLOAT64 hi + lo (double-double, |lo| <= half an
  ulp of hi), INT64 hi * 2^64 + lo (hi INT64, lo UINT64), UINT64 the same with a UINT64 hi. Partial
  sums of this kind combine into a mean with the one-device accuracy (gpu_mean.dask builds on it).
  FLOAT64 outputs need a device with fp64.

Which data types each device computes is the device's business (``Device.create_operator`` refuses a
type whose kernel its backend lacks with UnsupportedTypeError); these descriptors state what is valid.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentTypeError
from . import tables
from .operators import (
    IN_PLACE_ANY,
    IN_PLACE_NONE,
    IN_PLACE_ONE,
    BinaryElementWise,
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
class MeanDesc(BinaryElementWise):
    """ELEMENT_WISE_MEAN over the extension types: out = (a + b) / 2, rounded once (BFLOAT16 via
    FLOAT32, FLOAT64 correctly rounded), integers exact and truncated toward zero; no overflow."""

    a: TensorDesc
    b: TensorDesc
    output: TensorDesc
    kernel_op = KernelOp.MEAN
    operator_type = OperatorType.INVALID
    name = "GM_OPERATOR_ELEMENT_WISE_MEAN"
    table = tables.EXT_MEAN
    in_place = IN_PLACE_ONE


@dataclass(frozen=True)
class ReduceMeanDesc(ReduceLike):
    """REDUCE AVERAGE over the extension types (see the module's docstring for the accumulators)."""

    input: TensorDesc
    output: TensorDesc
    axes: tuple = ()
    kernel_op = KernelOp.REDUCE_MEAN
    operator_type = OperatorType.INVALID
    name = "GM_OPERATOR_REDUCE_MEAN"
    table = tables.EXT_REDUCE_MEAN
    in_place = IN_PLACE_NONE


@dataclass(frozen=True)
class ReduceSumDesc(ReduceLike):
    input: TensorDesc
    output: TensorDesc
    axes: tuple = ()
    output_low: TensorDesc | None = None    # the low word of a 128-bit total (FLOAT64, INT64, UINT64 inputs)
    kernel_op = KernelOp.REDUCE_SUM
    operator_type = OperatorType.INVALID
    name = "GM_OPERATOR_REDUCE_SUM_WIDE"
    table = tables.EXT_REDUCE_SUM
    output_table = tables.EXT_REDUCE_SUM_OUTPUT
    in_place = IN_PLACE_NONE

    def output_tensors(self):
        return (self.output,) if self.output_low is None else (self.output, self.output_low)

    def output_names(self):
        return ("OutputTensor",) if self.output_low is None else ("OutputTensor", "OutputLowTensor")

    def validate(self, level):
        inp = self.input
        if isinstance(inp, TensorDesc):
            low = tables.WIDE_SUM_LOW_TYPE.get(inp.data_type)
            if low is not None and self.output_low is None:
                fail(self.name, f"OutputLowTensor is missing; the sum of a {inp.data_type.name} InputTensor takes "
                                f"128 bits: a high word (OutputTensor, {tables.WIDE_SUM_TYPE[inp.data_type].name}) "
                                f"and a low word (OutputLowTensor, {low.name})")
            if low is None and self.output_low is not None and inp.data_type in tables.WIDE_SUM_TYPE:
                fail(self.name, f"OutputLowTensor is given, but the sum of a {inp.data_type.name} InputTensor is one "
                                f"{tables.WIDE_SUM_TYPE[inp.data_type].name} tensor; leave output_low None")
        super().validate(level)

    def _check_output_type(self) -> bool:
        dt = self.input.data_type
        want = tables.WIDE_SUM_TYPE[dt]
        if self.output.data_type != want:
            fail(self.name, f"OutputTensor has data type {self.output.data_type.name}; the sum of a "
                            f"{dt.name} InputTensor is {want.name}")
        low = self.output_low
        if low is not None:
            want_low = tables.WIDE_SUM_LOW_TYPE[dt]
            if low.data_type != want_low:
                fail(self.name, f"OutputLowTensor has data type {low.data_type.name}; the low word of the sum of a "
                                f"{dt.name} InputTensor is {want_low.name}")
            if low.sizes != self.output.sizes:
                fail(self.name, f"OutputLowTensor has Sizes {low.sizes} but OutputTensor has {self.output.sizes}; "
                                "the two words of a total have one shape")
        return False
