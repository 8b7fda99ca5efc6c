"""Field types and field widths of the descriptors: integer-typed fields, DirectML's 32- and 64-bit
field widths, the element cap, flag bits and axes.

DML_BUFFER_TENSOR_DESC declares Sizes and Strides as UINT32 arrays and TotalTensorSizeInBytes as
UINT64; a value that does not fit is invalid at create_operator. Integer fields take int and numpy
integers only: anything else raises InvalidArgumentTypeError (both InvalidArgumentError and
TypeError) at construction, naming the field. Each test fails when its rule is removed.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import DataType as D

T = gm.TensorDesc
F = D.FLOAT32
AVG = gm.ReduceFunction.AVERAGE


def rejected(device, desc, pattern):
    with pytest.raises(gm.InvalidArgumentError, match=pattern):
        device.create_operator(desc)
    assert device.get_device_removed_reason() is None


# --- item 4: 32-bit fields

@pytest.mark.parametrize("stride", [2**62, 2**32])
def test_output_stride_beyond_uint32_rejected(device, stride):
    y = T(F, (1,), strides=(stride,))
    rejected(device, gm.ReduceDesc(AVG, T(F, (6,)), y, (0,)),
             rf"DML_OPERATOR_REDUCE: OutputTensor Strides\[0\] = {stride} does not fit .*UINT32")


def test_input_stride_beyond_uint32_rejected(device):
    x = T(F, (1, 6), strides=(2**40, 1))
    rejected(device, gm.ReduceDesc(AVG, x, T(F, (1, 1)), (1,)), r"InputTensor Strides\[0\] = 1099511627776")


def test_largest_uint32_stride_is_valid_for_a_size_1_dimension(device):
    # size 1: the stride is never multiplied by a nonzero index, so the tensor addresses 6 elements
    x = T(F, (1, 6), strides=(2**32 - 1, 1))
    device.create_operator(gm.ReduceDesc(AVG, x, T(F, (1, 1)), (1,)))


def test_size_beyond_uint32_rejected(device):
    t = T(F, (2**32, 1), strides=(0, 0))
    rejected(device, gm.ElementWiseIdentityDesc(t, T(F, (2**32, 1))), r"InputTensor Sizes\[0\] = 4294967296")


def test_total_size_beyond_uint64_rejected(device):
    t = T(F, (4,))
    big = T(F, (4,), total_size_in_bytes=2**64)
    rejected(device, gm.ElementWiseMeanDesc(big, t, t), "ATensor TotalTensorSizeInBytes = 18446744073709551616")


def test_alignment_beyond_uint32_rejected(device):
    t = T(F, (4,))
    a = T(F, (4,), guaranteed_base_offset_alignment=2**32)
    rejected(device, gm.ElementWiseMeanDesc(a, t, t), "GuaranteedBaseOffsetAlignment = 4294967296 does not fit")


# --- item 5: axes are integers, stored as Python ints

@pytest.mark.parametrize("axis", [1.0, np.float32(1), True, np.bool_(True), 1.5, "1", 0.99999, None])
def test_non_integer_axis_rejected(axis):
    for make in (lambda ax: gm.ReduceDesc(AVG, T(F, (2, 3)), T(F, (2, 1)), ax),
                 lambda ax: gm.ext.IntegerReduceMeanDesc(T(D.INT32, (2, 3)), T(D.INT32, (2, 1)), ax)):
        with pytest.raises(gm.InvalidArgumentTypeError, match=r"Axes\[0\] must be an int") as e:
            make((axis,))
        assert isinstance(e.value, gm.InvalidArgumentError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize("axes", [1, 1.0, "1", b"\x01"])
def test_axes_not_a_sequence_names_the_field(axes):
    with pytest.raises(gm.InvalidArgumentTypeError, match="DML_OPERATOR_REDUCE: Axes must be a sequence"):
        gm.ReduceDesc(AVG, T(F, (2, 3)), T(F, (2, 1)), axes)


def test_numpy_integer_axes_are_normalized_and_execute(device):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for axes in ((np.int64(1),), np.array([1], np.uint8), [np.int32(1)]):
        desc = gm.ReduceDesc(AVG, T(F, (2, 3)), T(F, (2, 1)), axes)
        assert desc.axes == (1,) and type(desc.axes[0]) is int
        cop = device.compile_operator(device.create_operator(desc))
        xb, yb = device.create_buffer(24), device.create_buffer(8)
        xb.write(x)
        cop.execute(inputs=[xb], outputs=[yb])
        np.testing.assert_array_equal(yb.read_tensor(desc.output), [[1.0], [4.0]])


# --- item 7: the element count is capped as well as the last index

def test_broadcast_input_over_element_cap_rejected(device):
    x = T(F, (65536, 65537), strides=(0, 0))    # addresses one element, holds 2^32 + 65536
    rejected(device, gm.ReduceDesc(AVG, x, T(F, (65536, 1)), (1,)), "4295032832 elements.*2\\^32 - 1 elements")


def test_integer_reduce_broadcast_over_element_cap_rejected(device):
    x = T(D.INT32, (2**20, 2**20), strides=(0, 0))
    rejected(device, gm.ext.IntegerReduceMeanDesc(x, T(D.INT32, (2**20, 1)), (1,)), "InputTensor has 1099511627776")


def test_element_count_does_not_wrap_at_2_64(device):
    # 65536^4 = 2^64: an int64 product wraps to 0 and would pass the cap
    x = T(F, (65536,) * 4, strides=(0,) * 4)
    rejected(device, gm.ReduceDesc(AVG, x, T(F, (1,) * 4), (0, 1, 2, 3)), "has 18446744073709551616 elements")


def test_broadcast_at_the_element_cap_accepted(device):
    x = T(F, (65535, 65537), strides=(0, 0))    # 2^32 - 1 elements exactly
    device.create_operator(gm.ReduceDesc(AVG, x, T(F, (65535, 1)), (1,)))


# --- item 9: unknown flag bits

@pytest.mark.parametrize("flags", [2, 3, 4, 256, -1, 2**32 + 1, np.uint32(5)])
@pytest.mark.parametrize("role", ["input", "output"])
def test_unknown_tensor_flag_bits_rejected(device, flags, role):
    t = T(F, (4,))
    f = T(F, (4,), flags=flags)
    desc = gm.ElementWiseMeanDesc(f, t, t) if role == "input" else gm.ElementWiseMeanDesc(t, t, f)
    rejected(device, desc, "Flags = .* bits other than DML_TENSOR_FLAG_OWNED_BY_DML")


def test_negative_flags_are_kept_not_folded_into_owned_by_dml():
    # TensorFlags(-1) is OWNED_BY_DML on Python 3.11: the raw int is kept for create_operator to reject
    assert T(F, (4,), flags=-1).flags == -1
    assert T(F, (4,), flags=5).flags == 5


# --- item 10: no silent int() truncation

BAD_INTEGERS = [np.float32(2.5), Fraction(5, 2), Decimal("2.5"), "3", b"3", 2.0, True, float("inf"), float("nan"),
                None, np.array(2), 2 + 0j]


@pytest.mark.parametrize("value", BAD_INTEGERS, ids=repr)
@pytest.mark.parametrize("field", ["Sizes", "Strides", "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment",
                                   "Flags", "DataType"])
def test_tensor_desc_integer_fields_refuse_other_types(field, value):
    kw = {"Sizes": dict(sizes=(2, value)), "Strides": dict(sizes=(2, 2), strides=(2, value)),
          "TotalTensorSizeInBytes": dict(total_size_in_bytes=value),
          "GuaranteedBaseOffsetAlignment": dict(guaranteed_base_offset_alignment=value),
          "Flags": dict(flags=value), "DataType": dict(data_type=value)}[field]
    if field == "TotalTensorSizeInBytes" and value is None:
        pytest.skip("total_size_in_bytes=None means: compute it")
    args = {"data_type": F, "sizes": (2, 2), **kw}
    with pytest.raises(gm.InvalidArgumentTypeError, match=f"TensorDesc: {field}") as e:
        T(**args)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize("sizes", ["23", b"\x02\x03", 6, 6.0])
def test_sizes_must_be_a_sequence_of_integers(sizes):
    with pytest.raises(gm.InvalidArgumentTypeError, match="TensorDesc: Sizes"):
        T(F, sizes)


def test_numpy_integer_fields_are_stored_as_ints():
    t = T(np.int64(1), (np.int64(2), np.uint32(3)), (np.uint64(3), np.int8(1)), np.int32(24), np.uint16(4),
          np.uint8(0))
    assert t == T(F, (2, 3), (3, 1), 24, 4)
    assert all(type(v) is int for v in t.sizes + t.strides + (t.total_size_in_bytes,
                                                               t.guaranteed_base_offset_alignment))
    assert t.data_type is F


def test_calc_buffer_tensor_size_refuses_floats():
    with pytest.raises(gm.InvalidArgumentTypeError, match=r"Sizes\[0\]"):
        gm.calc_buffer_tensor_size(F, (2.5,))


@pytest.mark.parametrize("fn", [2.0, True, "AVERAGE", None])
def test_reduce_function_must_be_an_integer(fn):
    with pytest.raises(gm.InvalidArgumentTypeError, match="DML_OPERATOR_REDUCE: Function must be"):
        gm.ReduceDesc(fn, T(F, (2, 3)), T(F, (2, 1)), (1,))


def test_reduce_function_is_stored_as_the_enum():
    desc = gm.ReduceDesc(np.int64(2), T(F, (2, 3)), T(F, (2, 1)), (1,))
    assert desc.function is gm.ReduceFunction.AVERAGE
    assert gm.ReduceDesc(42, T(F, (2, 3)), T(F, (2, 1)), (1,)).function == 42


@pytest.mark.parametrize("field,value", [("scale", "2"), ("bias", None), ("scale", True), ("bias", 1j)])
def test_scale_bias_must_be_real_numbers(field, value):
    with pytest.raises(gm.InvalidArgumentTypeError, match=f"DML_SCALE_BIAS: {field.capitalize()}"):
        gm.ScaleBias(**{field: value})


def test_scale_bias_stores_floats():
    sb = gm.ScaleBias(np.float32(0.5), 2)
    assert type(sb.scale) is float and type(sb.bias) is float and sb == gm.ScaleBias(0.5, 2.0)


@pytest.mark.parametrize("inputs", [5, None, "ab"])
def test_nary_mean_inputs_must_be_a_sequence(inputs):
    with pytest.raises(gm.InvalidArgumentTypeError, match="GM_OPERATOR_NARY_MEAN: InputTensors"):
        gm.ext.NaryMeanDesc(inputs, T(F, (2,)))


# --- issue 23, point 3: sizes, strides and axes are sequences of integers

@pytest.mark.parametrize("bad", [{2: 3}, {2, 3}, frozenset({2}), "23", b"23", 2.0, iter([2, 3])],
                         ids=["dict", "set", "frozenset", "str", "bytes", "float", "iterator"])
def test_sizes_strides_axes_refuse_containers_that_are_not_sequences(bad):
    """A dict iterates its keys ({2: 3} would become sizes (2,)) and a set has no order: both, and
    strings, scalars and one-shot iterators, are refused at construction, naming the field."""
    with pytest.raises(gm.InvalidArgumentError, match=r"TensorDesc: Sizes must be a sequence of integers"):
        T(D.UINT32, bad)
    with pytest.raises(gm.InvalidArgumentError, match=r"TensorDesc: Strides must be a sequence of integers"):
        T(F, (2, 3), strides=bad)
    with pytest.raises(gm.InvalidArgumentError, match=r"DML_OPERATOR_REDUCE: Axes must be a sequence of integers"):
        gm.ReduceDesc(AVG, T(F, (2, 3)), T(F, (2, 1)), axes=bad)
    with pytest.raises(gm.InvalidArgumentError, match=r"Axes must be a sequence of integers"):
        gm.ext.ReduceSumDesc(T(F, (2, 3)), T(D.FLOAT64, (2, 1)), axes=bad)


def test_sizes_take_the_ordinary_sequences():
    for sizes in ((2, 3), [2, 3], range(2, 4), np.array([2, 3]), np.array([2, 3], np.uint32)):
        assert T(F, sizes).sizes == (2, 3)
    assert gm.ReduceDesc(AVG, T(F, (2, 3)), T(F, (2, 1)), axes=np.array([1])).axes == (1,)
