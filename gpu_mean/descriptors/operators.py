"""Operator descriptors and their validation, as DirectML's CreateOperator performs it.

Every check names the operator, the tensor, the offending value and the rule. Validation runs in
``validate(level)``, which ``Device.create_operator`` calls with the device's feature level.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError, InvalidArgumentTypeError, UnsupportedError
from . import tables
from .tensor import MAX_ELEMENTS, UINT32_MAX, UINT64_MAX, TensorDesc, as_int_tuple, is_integer
from .types import DataType, FeatureLevel, KernelOp, OperatorType, ReduceFunction, TensorFlags

IN_PLACE_NONE, IN_PLACE_ONE, IN_PLACE_ANY = "none", "one", "any"


def fail(op: str, msg: str):
    raise InvalidArgumentError(f"{op}: {msg}")


def check_tensor(op: str, name: str, t: TensorDesc, table, level: FeatureLevel, *, output: bool) -> None:
    """The buffer-tensor rules (docs/design.md, "DirectML rules enforced") for one operator tensor."""
    if not isinstance(t, TensorDesc):
        fail(op, f"{name} must be a TensorDesc, got {type(t).__name__}")
    row = tables.support_row(table, level)
    if row is None:
        first = table[-1][0]
        fail(op, f"the operator does not exist at feature level {level.label}; it needs FL {first.label} or later")
    _, dims, types = row
    if t.data_type == DataType.UNKNOWN:
        fail(op, f"{name} has data type UNKNOWN, which is never valid")
    if t.dimension_count not in dims:
        fail(op, f"{name} has DimensionCount {t.dimension_count}; at feature level {level.label} the operator "
                  f"takes {tables.describe_row(row)}")
    if t.data_type not in types:
        fail(op, f"{name} has data type {t.data_type.name}; at feature level {level.label} the operator takes "
                  f"{tables.describe_row(row)}")
    for i, s in enumerate(t.sizes):
        if s <= 0:
            fail(op, f"{name} Sizes[{i}] = {s}; every size must be > 0")
        if s > UINT32_MAX:
            fail(op, f"{name} Sizes[{i}] = {s} does not fit DML_BUFFER_TENSOR_DESC's UINT32 Sizes "
                      f"(at most {UINT32_MAX})")
    if t.strides is not None:
        if len(t.strides) != t.dimension_count:
            fail(op, f"{name} has {len(t.strides)} strides for DimensionCount {t.dimension_count}; "
                      "Strides must have one entry per dimension")
        for i, s in enumerate(t.strides):
            if s < 0:
                fail(op, f"{name} Strides[{i}] = {s}; strides are unsigned")
            if s > UINT32_MAX:
                fail(op, f"{name} Strides[{i}] = {s} does not fit DML_BUFFER_TENSOR_DESC's UINT32 Strides "
                          f"(at most {UINT32_MAX})")
    # both caps: the element count bounds broadcast and overlapping tensors, whose last index is small
    count = t.element_count
    if count > MAX_ELEMENTS:
        fail(op, f"{name} has {count} elements (Sizes {t.sizes}); a buffer tensor holds at most 2^32 - 1 elements")
    last = t.last_index
    if last + 1 > MAX_ELEMENTS:
        fail(op, f"{name} addresses {last + 1} elements; a buffer tensor holds at most 2^32 - 1 elements")
    if t.total_size_in_bytes > UINT64_MAX:
        fail(op, f"{name} TotalTensorSizeInBytes = {t.total_size_in_bytes} does not fit its UINT64 field")
    minimum = t.minimum_size_in_bytes
    if t.total_size_in_bytes < minimum:
        fail(op, f"{name} TotalTensorSizeInBytes = {t.total_size_in_bytes} is below the {minimum} bytes that "
                  f"DMLCalcBufferTensorSize gives for sizes {t.sizes} and strides {t.strides}")
    if t.total_size_in_bytes % 4:
        fail(op, f"{name} TotalTensorSizeInBytes = {t.total_size_in_bytes} is not a multiple of 4")
    a = t.guaranteed_base_offset_alignment
    if not 0 <= a <= UINT32_MAX:
        fail(op, f"{name} GuaranteedBaseOffsetAlignment = {a} does not fit its UINT32 field")
    if a != 0 and (a & (a - 1) or a < t.data_type.element_size):
        fail(op, f"{name} GuaranteedBaseOffsetAlignment = {a}; it must be 0 or a power of two >= the element "
                  f"size ({t.data_type.element_size:g} bytes)")
    # integer masks: on Python 3.11 ~TensorFlags.OWNED_BY_DML is NONE, so a flag-enum mask never fires
    if int(t.flags) & ~int(TensorFlags.OWNED_BY_DML):
        fail(op, f"{name} Flags = {int(t.flags):#x} has bits other than DML_TENSOR_FLAG_OWNED_BY_DML (0x1), "
                  "the only DML_TENSOR_FLAGS bit")
    if output and t.flags & TensorFlags.OWNED_BY_DML:
        fail(op, f"{name} is an output with DML_TENSOR_FLAG_OWNED_BY_DML; that flag is for inputs only")
    if output and t.has_overlap():
        fail(op, f"{name} strides {t.strides} for sizes {t.sizes} map two elements to one offset; output "
                  "tensors may not overlap themselves (0 or overlapping strides)")


def check_same_shape(op: str, tensors) -> None:
    """Element-wise operands share DataType, DimensionCount and Sizes (docs/design.md)."""
    (n0, t0), rest = tensors[0], tensors[1:]
    for n, t in rest:
        if t.data_type != t0.data_type:
            fail(op, f"{n} has data type {t.data_type.name} but {n0} has {t0.data_type.name}; "
                      "all tensors must share one data type")
        if t.sizes != t0.sizes:
            fail(op, f"{n} has Sizes {t.sizes} but {n0} has {t0.sizes}; element-wise tensors must have identical "
                      "Sizes (broadcast only through 0 strides)")


class OperatorDesc:
    """Base of the operator descriptors: a name, a type, what it computes (``kernel_op``), tensors
    with roles, the support table of its inputs (and of its outputs where they differ), an in-place rule."""

    operator_type = OperatorType.INVALID
    name = "OPERATOR"
    kernel_op: KernelOp
    table = ()
    output_table = None     # None: the outputs follow ``table`` too
    in_place = IN_PLACE_NONE

    def input_tensors(self) -> tuple:
        raise NotImplementedError

    def output_tensors(self) -> tuple:
        raise NotImplementedError

    def input_names(self) -> tuple:
        raise NotImplementedError

    def output_names(self) -> tuple:
        return ("OutputTensor",)

    def validate(self, level: FeatureLevel) -> None:
        for n, t in zip(self.input_names(), self.input_tensors()):
            check_tensor(self.name, n, t, self.table, level, output=False)
        for n, t in zip(self.output_names(), self.output_tensors()):
            check_tensor(self.name, n, t, self.output_table or self.table, level, output=True)
        self._validate_op(level)

    def _validate_op(self, level: FeatureLevel) -> None:
        check_same_shape(self.name, list(zip(self.input_names() + self.output_names(),
                                             self.input_tensors() + self.output_tensors())))


class BinaryElementWise(OperatorDesc):
    """Shared shape of the two-input element-wise descriptors (fields a, b, output)."""

    def input_tensors(self):
        return (self.a, self.b)

    def input_names(self):
        return ("ATensor", "BTensor")

    def output_tensors(self):
        return (self.output,)


class UnaryTensorOp(OperatorDesc):
    """Shared shape of the one-input descriptors (fields input, output)."""

    def input_tensors(self):
        return (self.input,)

    def input_names(self):
        return ("InputTensor",)

    def output_tensors(self):
        return (self.output,)


class ReduceLike(UnaryTensorOp):
    """REDUCE-shaped descriptors: axes unique and in range, output keeps the rank with reduced axes 1.
    The output has the input's data type unless a subclass names another (``_check_output_type``)."""

    def __post_init__(self):
        self._normalize_axes()

    def _normalize_axes(self):
        # the descriptor stores what it validated: Python ints, never the caller's 1.0 or True
        axes = () if self.axes is None else as_int_tuple(self.name, "Axes", self.axes)
        object.__setattr__(self, "axes", axes)

    def _check_output_type(self) -> bool:
        """Refuse a wrong output type; True when the rule is the shared one (same type as the input)."""
        return True

    def _validate_op(self, level):
        axes = check_axes(self.name, self.axes, self.input.dimension_count)
        same_type = self._check_output_type()
        check_reduce_shapes(self.name, self.input, self.output, axes, same_type=same_type)


@dataclass(frozen=True)
class ElementWiseMeanDesc(BinaryElementWise):
    """DML_ELEMENT_WISE_MEAN_OPERATOR_DESC: out = (a + b) / 2, correctly rounded, no overflow."""

    a: TensorDesc
    b: TensorDesc
    output: TensorDesc
    kernel_op = KernelOp.MEAN
    operator_type = OperatorType.ELEMENT_WISE_MEAN
    name = "DML_OPERATOR_ELEMENT_WISE_MEAN"
    table = tables.ELEMENT_WISE_MEAN
    in_place = IN_PLACE_ONE


@dataclass(frozen=True)
class ElementWiseAddDesc(BinaryElementWise):
    """DML_ELEMENT_WISE_ADD_OPERATOR_DESC: out = a + b (integers wrap, floats round once)."""

    a: TensorDesc
    b: TensorDesc
    output: TensorDesc
    kernel_op = KernelOp.ADD
    operator_type = OperatorType.ELEMENT_WISE_ADD
    name = "DML_OPERATOR_ELEMENT_WISE_ADD"
    table = tables.ELEMENT_WISE_ADD
    in_place = IN_PLACE_ANY


@dataclass(frozen=True)
class ScaleBias:
    """DML_SCALE_BIAS: g(x) = x * scale + bias, in float32."""

    scale: float = 1.0
    bias: float = 0.0

    def __post_init__(self):
        for name in ("scale", "bias"):
            v = getattr(self, name)
            if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool):
                raise InvalidArgumentTypeError(f"DML_SCALE_BIAS: {name.capitalize()} must be a real number, got "
                                               f"{type(v).__name__} {v!r}")
            object.__setattr__(self, name, float(v))


@dataclass(frozen=True)
class ElementWiseIdentityDesc(UnaryTensorOp):
    """DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC: a copy through strides, with an optional ScaleBias."""

    input: TensorDesc
    output: TensorDesc
    scale_bias: ScaleBias | None = None
    kernel_op = KernelOp.IDENTITY
    operator_type = OperatorType.ELEMENT_WISE_IDENTITY
    name = "DML_OPERATOR_ELEMENT_WISE_IDENTITY"
    table = tables.ELEMENT_WISE_IDENTITY
    in_place = IN_PLACE_ONE

    def _validate_op(self, level):
        super()._validate_op(level)
        sb = self.scale_bias
        if sb is not None:
            if not isinstance(sb, ScaleBias):
                fail(self.name, f"ScaleBias must be a ScaleBias or None, got {type(sb).__name__}")
            if self.input.data_type not in (DataType.FLOAT32, DataType.FLOAT16, DataType.FLOAT64):
                # DirectML leaves ScaleBias on integers undocumented; we refuse it (docs/design.md).
                fail(self.name, f"ScaleBias {sb} on a {self.input.data_type.name} tensor; this library applies "
                                 "ScaleBias to float tensors only")


def check_axes(op: str, axes, rank: int, *, allow_empty: bool = True) -> tuple[int, ...]:
    ax = as_int_tuple(op, "Axes", axes)
    for a in ax:
        if not 0 <= a < rank:
            fail(op, f"axis {a} is out of range; Axes must lie in [0, {rank - 1}] for a {rank}-D InputTensor")
    if len(set(ax)) != len(ax):
        fail(op, f"Axes {ax} contain a duplicate; each axis may appear once")
    if not ax and not allow_empty:
        fail(op, "Axes is empty")
    return ax


def check_reduce_shapes(op: str, inp: TensorDesc, out: TensorDesc, axes, *, same_type: bool = True) -> None:
    if same_type and out.data_type != inp.data_type:
        fail(op, f"OutputTensor has data type {out.data_type.name} but InputTensor has {inp.data_type.name}; "
                  "they must match")
    if out.dimension_count != inp.dimension_count:
        fail(op, f"OutputTensor has DimensionCount {out.dimension_count} but InputTensor has "
                  f"{inp.dimension_count}; a reduction keeps the rank")
    for d, (si, so) in enumerate(zip(inp.sizes, out.sizes)):
        want = 1 if d in axes else si
        if so != want:
            why = "a reduced axis has size 1" if d in axes else "a kept axis keeps the input's size"
            fail(op, f"OutputTensor Sizes[{d}] = {so}, expected {want}: {why} (input {inp.sizes}, axes {axes})")


@dataclass(frozen=True)
class ReduceDesc(ReduceLike):
    """DML_REDUCE_OPERATOR_DESC. Only AVERAGE exists in this library."""

    function: ReduceFunction
    input: TensorDesc
    output: TensorDesc
    axes: tuple = ()
    kernel_op = KernelOp.REDUCE_MEAN
    operator_type = OperatorType.REDUCE
    name = "DML_OPERATOR_REDUCE"
    table = tables.REDUCE_AVERAGE
    in_place = IN_PLACE_NONE

    def __post_init__(self):
        if not isinstance(self.function, ReduceFunction) and not is_integer(self.function):
            # ReduceFunction(2.0) and ReduceFunction(True) would look up AVERAGE and ARGMIN
            raise InvalidArgumentTypeError(f"{self.name}: Function must be a ReduceFunction or an integer, got "
                                           f"{type(self.function).__name__} {self.function!r}")
        try:
            object.__setattr__(self, "function", ReduceFunction(int(self.function)))
        except ValueError:
            # an unknown value stays an int for validate() to refuse with E_INVALIDARG
            object.__setattr__(self, "function", int(self.function))
        self._normalize_axes()

    def validate(self, level):
        try:
            fn = ReduceFunction(self.function)
        except ValueError as e:
            raise InvalidArgumentError(f"{self.name}: Function {self.function!r} is not a DML_REDUCE_FUNCTION") from e
        if fn != ReduceFunction.AVERAGE:
            raise UnsupportedError(f"{self.name}: Function {fn.name} is not implemented; gpu_mean implements "
                                   "DML_REDUCE_FUNCTION_AVERAGE only")
        super().validate(level)
