"""Every validation rule of the descriptor layer; each test fails when its rule is removed."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean import FeatureLevel as FL

T = gm.TensorDesc


def dev_at(level=None):
    return gm.create_device("cpu", feature_level=level)


def create(desc, level=None):
    return dev_at(level).create_operator(desc)


def mean_desc(dt=D.FLOAT32, shape=(2, 3), **kw):
    t = T(dt, shape)
    return gm.ElementWiseMeanDesc(t, t, T(dt, shape, **kw) if kw else t)


# --- enums and the size formula (docs/design.md, "DirectML rules enforced")

def test_data_type_values_and_sizes():
    # DirectML's DML_TENSOR_DATA_TYPE exactly, then gpu_mean's one extension value (docs/design.md)
    assert [(d.name, int(d)) for d in D if not d.is_extension] == [
        ("UNKNOWN", 0), ("FLOAT32", 1), ("FLOAT16", 2), ("UINT32", 3), ("UINT16", 4), ("UINT8", 5), ("INT32", 6),
        ("INT16", 7), ("INT8", 8), ("FLOAT64", 9), ("UINT64", 10), ("INT64", 11), ("UINT4", 12), ("INT4", 13)]
    assert [(d.name, int(d)) for d in D if d.is_extension] == [("BFLOAT16", 0x1000_0010)]
    assert D.FLOAT16.element_size == 2 and D.INT64.element_size == 8 and D.UINT4.element_size == 0.5
    assert D.BFLOAT16.element_size == 2 and D.BFLOAT16.is_float and not D.FLOAT64.is_extension
    assert D.BFLOAT16.numpy_dtype == np.dtype(ml_dtypes.bfloat16)
    assert D.from_numpy(ml_dtypes.bfloat16) == D.BFLOAT16 and D.from_numpy(np.float64) == D.FLOAT64


def test_feature_level_values():
    assert FL.FL_1_0 == 0x1000 and FL.FL_2_1 == 0x2100 and FL.FL_3_0 == 0x3000 and FL.FL_6_4 == 0x6400
    assert gm.Feature.TENSOR_DATA_TYPE_SUPPORT == 0 and gm.Feature.FEATURE_LEVELS == 1
    assert gm.ReduceFunction.AVERAGE == 2 and gm.ReduceFunction.SUM_SQUARE == 11
    assert gm.ExecutionFlags.DESCRIPTORS_VOLATILE == 4 and gm.TensorFlags.OWNED_BY_DML == 1


@pytest.mark.parametrize("dt,sizes,strides,expected", [
    (D.FLOAT16, (3,), None, 8),
    (D.FLOAT32, (2, 3), (0, 1), 12),
    (D.FLOAT32, (2, 3), (5, 1), 32),
    (D.UINT8, (1, 1, 1, 5), None, 8),
    (D.INT4, (3,), None, 4),
    (D.UINT32, (2, 3), (6, 2), 44),
    (D.UNKNOWN, (3,), None, 0),
    (D.FLOAT32, (70000, 70000), None, 70000 * 70000 * 4),  # no 32-bit wrap
])
def test_calc_buffer_tensor_size(dt, sizes, strides, expected):
    assert gm.calc_buffer_tensor_size(dt, sizes, strides) == expected


def test_tensor_desc_defaults():
    t = T(D.FLOAT16, (3,))
    assert t.total_size_in_bytes == 8 and t.is_packed and t.effective_strides == (1,)
    assert T(D.FLOAT32, (2, 3, 4)).effective_strides == (12, 4, 1)


# --- tensor rules

@pytest.mark.parametrize("shape", [(), (1,) * 9])
def test_dimension_count_range_fl3(shape):
    with pytest.raises(gm.InvalidArgumentError, match="DimensionCount"):
        create(mean_desc(shape=shape))


def test_dimension_count_below_fl3_is_4d_only():
    with pytest.raises(gm.InvalidArgumentError, match="DimensionCount 2.*FL 2.1"):
        create(mean_desc(shape=(2, 3)), FL.FL_2_1)
    create(mean_desc(shape=(1, 1, 2, 3)), FL.FL_2_1)
    create(mean_desc(shape=(2, 3)), FL.FL_3_0)


def test_data_type_table_by_level():
    with pytest.raises(gm.InvalidArgumentError, match="INT32"):
        create(mean_desc(D.INT32, (1, 1, 2, 3)), FL.FL_2_0)
    create(mean_desc(D.INT32, (1, 1, 2, 3)), FL.FL_2_1)
    with pytest.raises(gm.InvalidArgumentError, match="INT8"):
        create(mean_desc(D.INT8))
    with pytest.raises(gm.InvalidArgumentError, match="UNKNOWN"):
        create(mean_desc(D.UNKNOWN))


def test_identity_and_add_tables():
    t64 = T(D.INT64, (4,))
    with pytest.raises(gm.InvalidArgumentError, match="INT64"):
        create(gm.ElementWiseIdentityDesc(t64, t64), FL.FL_4_0)
    create(gm.ElementWiseIdentityDesc(t64, t64), FL.FL_4_1)
    t8 = T(D.INT8, (4,))
    with pytest.raises(gm.InvalidArgumentError, match="INT8"):
        create(gm.ElementWiseAddDesc(t8, t8, t8), FL.FL_5_0)
    create(gm.ElementWiseAddDesc(t8, t8, t8), FL.FL_5_1)
    t5 = T(D.FLOAT32, (1, 1, 1, 2, 3))
    create(gm.ElementWiseAddDesc(t5, t5, t5), FL.FL_1_0)  # ADD takes 4-5 dims at FL 1.0


def test_size_zero():
    with pytest.raises(gm.InvalidArgumentError, match="Sizes\\[1\\] = 0"):
        create(mean_desc(shape=(2, 0)))


def test_strides_length():
    t = T(D.FLOAT32, (2, 3))
    with pytest.raises(gm.InvalidArgumentError, match="strides for DimensionCount"):
        create(gm.ElementWiseMeanDesc(T(D.FLOAT32, (2, 3), (1,), 24), t, t))


def test_total_size_minimum_and_multiple_of_4():
    t = T(D.FLOAT32, (2, 3))
    with pytest.raises(gm.InvalidArgumentError, match="below the 24 bytes"):
        create(gm.ElementWiseMeanDesc(T(D.FLOAT32, (2, 3), total_size_in_bytes=20), t, t))
    with pytest.raises(gm.InvalidArgumentError, match="multiple of 4"):
        create(gm.ElementWiseMeanDesc(T(D.FLOAT32, (2, 3), total_size_in_bytes=26), t, t))
    create(gm.ElementWiseMeanDesc(T(D.FLOAT32, (2, 3), total_size_in_bytes=28), t, t))


def test_element_cap():
    big = T(D.FLOAT32, (2, 2**31), (2**31, 1))
    with pytest.raises(gm.InvalidArgumentError, match="2\\^32 - 1 elements"):
        create(gm.ElementWiseMeanDesc(big, big, big))


@pytest.mark.parametrize("align", [3, 2, 12])
def test_guaranteed_base_offset_alignment(align):
    t = T(D.FLOAT32, (4,))
    with pytest.raises(gm.InvalidArgumentError, match="GuaranteedBaseOffsetAlignment"):
        create(gm.ElementWiseMeanDesc(T(D.FLOAT32, (4,), guaranteed_base_offset_alignment=align), t, t))


def test_gboa_valid_values():
    x = np.array([1, 2, 3, 4], np.float32)
    for a in (0, 4, 8, 256):
        t = T(D.FLOAT32, (4,), guaranteed_base_offset_alignment=a)
        desc = gm.ElementWiseMeanDesc(t, t, t)
        assert create(desc).desc is desc
        # accepted means usable: bound at an offset the guarantee allows, it computes
        np.testing.assert_array_equal(run(dev_at(), desc, [x, x + 2], offset=max(a, 16)), x + 1)


def test_owned_by_dml_only_on_inputs():
    t = T(D.FLOAT32, (4,))
    owned = T(D.FLOAT32, (4,), flags=gm.TensorFlags.OWNED_BY_DML)
    create(gm.ElementWiseMeanDesc(owned, t, t))
    with pytest.raises(gm.InvalidArgumentError, match="inputs only"):
        create(gm.ElementWiseMeanDesc(t, t, owned))


@pytest.mark.parametrize("strides", [(0, 1), (1, 1), (2, 1)])
def test_output_may_not_overlap_itself(strides):
    inp = T(D.FLOAT32, (2, 3))
    out = T(D.FLOAT32, (2, 3), strides, 64)
    with pytest.raises(gm.InvalidArgumentError, match="may not overlap"):
        create(gm.ElementWiseMeanDesc(inp, inp, out))


def test_output_unique_interleaved_strides_accepted():
    inp = T(D.FLOAT32, (3, 2))
    out = T(D.FLOAT32, (3, 2), (2, 3), 32)   # offsets 0,3,2,5,4,7: unique, though not sorted-disjoint
    assert not out.has_overlap()
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(run(dev_at(), gm.ElementWiseMeanDesc(inp, inp, out), [x, x]), x)


def test_broadcast_input_allowed():
    t = T(D.FLOAT32, (2, 3))
    bc = T(D.FLOAT32, (2, 3), (0, 1))       # one row read twice: an input may overlap itself
    assert bc.has_overlap()
    row = np.array([2, 4, 6], np.float32)
    got = run(dev_at(), gm.ElementWiseMeanDesc(bc, t, t), [row, np.zeros((2, 3), np.float32)])
    np.testing.assert_array_equal(got, [[1, 2, 3], [1, 2, 3]])


def test_operands_share_type_and_sizes():
    t = T(D.FLOAT32, (2, 3))
    with pytest.raises(gm.InvalidArgumentError, match="share one data type"):
        create(gm.ElementWiseMeanDesc(T(D.FLOAT16, (2, 3)), t, t))
    with pytest.raises(gm.InvalidArgumentError, match="identical"):
        create(gm.ElementWiseMeanDesc(T(D.FLOAT32, (1, 3)), t, t))
    with pytest.raises(gm.InvalidArgumentError, match="identical"):
        create(gm.ElementWiseAddDesc(t, t, T(D.FLOAT32, (3, 2))))


def test_not_a_tensor_desc():
    t = T(D.FLOAT32, (2, 3))
    with pytest.raises(gm.InvalidArgumentError, match="must be a TensorDesc"):
        create(gm.ElementWiseMeanDesc(np.zeros(3), t, t))
    with pytest.raises(gm.InvalidArgumentError, match="operator descriptor"):
        dev_at().create_operator("mean")


def test_bad_sizes_type():
    with pytest.raises(gm.InvalidArgumentError, match="Sizes\\[0\\] must be an int"):
        T(D.FLOAT32, (2.5, 3))


# --- REDUCE

def red(inp_shape, out_shape, axes, dt=D.FLOAT32, fn=gm.ReduceFunction.AVERAGE, out_dt=None):
    return gm.ReduceDesc(fn, T(dt, inp_shape), T(out_dt or dt, out_shape), axes)


def test_reduce_valid():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for out, axes, want in (((2, 1, 4), (1,), x.mean(1, keepdims=True)),
                            ((1, 1, 1), (2, 0, 1), x.mean(keepdims=True)),     # any order
                            ((2, 3, 4), (), x)):                               # zero axes: identity
        desc = red((2, 3, 4), out, axes)
        assert create(desc).desc.axes == tuple(axes)
        np.testing.assert_array_equal(run(dev_at(), desc, [x]), want)


def test_reduce_other_functions_unsupported():
    with pytest.raises(gm.UnsupportedError, match="SUM.*AVERAGE only"):
        create(red((2, 3), (2, 1), (1,), fn=gm.ReduceFunction.SUM))
    with pytest.raises(gm.InvalidArgumentError, match="not a DML_REDUCE_FUNCTION"):
        create(red((2, 3), (2, 1), (1,), fn=42))


def test_reduce_axes_rules():
    with pytest.raises(gm.InvalidArgumentError, match="axis 3 is out of range"):
        create(red((2, 3, 4), (2, 3, 1), (3,)))
    with pytest.raises(gm.InvalidArgumentError, match="duplicate"):
        create(red((2, 3, 4), (2, 1, 4), (1, 1)))
    with pytest.raises(gm.InvalidArgumentError, match="out of range"):
        create(red((2, 3, 4), (2, 1, 4), (-2,)))


def test_reduce_output_shape_rules():
    with pytest.raises(gm.InvalidArgumentError, match="Sizes\\[1\\] = 3, expected 1"):
        create(red((2, 3, 4), (2, 3, 4), (1,)))
    with pytest.raises(gm.InvalidArgumentError, match="Sizes\\[2\\] = 1, expected 4"):
        create(red((2, 3, 4), (2, 1, 1), (1,)))
    with pytest.raises(gm.InvalidArgumentError, match="keeps the rank"):
        create(red((2, 3, 4), (2, 4), (1,)))
    with pytest.raises(gm.InvalidArgumentError, match="must match"):
        create(red((2, 3), (2, 1), (1,), out_dt=D.FLOAT16))


def test_reduce_average_is_float_only():
    with pytest.raises(gm.InvalidArgumentError, match="INT32"):
        create(red((2, 3), (2, 1), (1,), dt=D.INT32))


def test_reduce_4d_only_below_fl3():
    with pytest.raises(gm.InvalidArgumentError, match="DimensionCount 3"):
        create(red((2, 3, 4), (2, 1, 4), (1,)), FL.FL_2_1)
    create(red((1, 2, 3, 4), (1, 2, 1, 4), (2,)), FL.FL_1_0)


def test_identity_scale_bias_floats_only():
    t = T(D.INT32, (4,))
    with pytest.raises(gm.InvalidArgumentError, match="ScaleBias"):
        create(gm.ElementWiseIdentityDesc(t, t, gm.ScaleBias(0.5, 0)))
    f = T(D.FLOAT32, (4,))
    create(gm.ElementWiseIdentityDesc(f, f, gm.ScaleBias(0.5, 1)))


# --- extensions

def test_ext_rules():
    t = T(D.INT32, (4,))
    create(gm.ext.NaryMeanDesc([t, t, t], t))
    with pytest.raises(gm.InvalidArgumentError, match="1 to 64"):
        create(gm.ext.NaryMeanDesc([], t))
    with pytest.raises(gm.InvalidArgumentError, match="does not exist at feature level 2.1"):
        create(gm.ext.NaryMeanDesc([T(D.INT32, (1, 1, 1, 4))] * 2, T(D.INT32, (1, 1, 1, 4))), FL.FL_2_1)
    create(gm.ext.IntegerReduceMeanDesc(T(D.UINT32, (2, 3)), T(D.UINT32, (2, 1)), (1,)))
    with pytest.raises(gm.InvalidArgumentError, match="FLOAT32"):
        create(gm.ext.IntegerReduceMeanDesc(T(D.FLOAT32, (2, 3)), T(D.FLOAT32, (2, 1)), (1,)))


# --- devices and features

def test_create_device_levels():
    dev = dev_at(FL.FL_2_1)
    assert dev.feature_level == FL.FL_2_1
    assert dev.check_feature_support(gm.Feature.FEATURE_LEVELS, [FL.FL_1_0, FL.FL_3_0]) == FL.FL_1_0
    assert dev_at().check_feature_support(gm.Feature.FEATURE_LEVELS, [FL.FL_1_0, FL.FL_3_0]) == FL.FL_3_0
    with pytest.raises(gm.UnsupportedError, match="none of"):
        dev.check_feature_support(gm.Feature.FEATURE_LEVELS, [FL.FL_3_0])
    with pytest.raises(gm.InvalidArgumentError, match="Count is 0"):
        dev.check_feature_support(gm.Feature.FEATURE_LEVELS, [])
    with pytest.raises(gm.UnsupportedError, match="unknown DML_FEATURE"):
        dev.check_feature_support(7, None)
    assert dev.check_feature_support(gm.Feature.TENSOR_DATA_TYPE_SUPPORT, D.FLOAT16)
    assert not dev.check_feature_support(gm.Feature.TENSOR_DATA_TYPE_SUPPORT, D.UINT4)


def test_create_device_rejects_bad_specs():
    with pytest.raises(gm.InvalidArgumentError, match="unknown device"):
        gm.create_device("tpu")
    with pytest.raises(gm.InvalidArgumentError, match="not a DML_FEATURE_LEVEL"):
        gm.create_device("cpu", feature_level=0x1234)
    with pytest.raises(gm.InvalidArgumentError, match="does not exist"):
        gm.create_device("cpu:3")


def test_opencl_variants_are_public_device_strings():
    """opencl:N-gpupaths and -nofp64 (issue 40: a machine without a GPU runs the GPU-shaped kernels
    with CUDA's geometry for a 132-SM GPU), before -checked; other backends refuse them by name."""
    pytest.importorskip("pyopencl")
    from gpu_mean.backends import opencl
    if not opencl.discover()[0]:
        pytest.skip("no OpenCL device")
    for spec, gpu, fp64, checked in (("opencl:0-gpupaths", True, True, False),
                                     ("opencl:0-gpupaths-nofp64", True, False, False),
                                     ("opencl:0-nofp64", False, False, False),
                                     ("opencl:0-gpupaths-checked", True, True, True)):
        dev = gm.create_device(spec)
        be = dev.backend
        assert (dev.info.id, be.gpu_paths, be.cpu_shaped, dev.info.fp64, be.checked) == (
            spec, gpu, not gpu and be.is_cpu or False, fp64 and be.has_khr_fp64, checked)
        if gpu:
            assert be.gpu_sms == 132 and not be.cpu_shaped
        assert gm.create_device(spec).backend is be       # one backend per variant
    x = np.arange(64, dtype=np.float32).reshape(4, 16)
    got = gm.reduce_mean(x, axes=[1], device="opencl:0-gpupaths")
    assert np.array_equal(got, x.mean(axis=1, keepdims=True))
    for bad in ("cuda:0-gpupaths", "cpu-nofp64"):
        with pytest.raises(gm.InvalidArgumentError, match="OpenCL kernel variants"):
            gm.create_device(bad)


def test_errors_carry_hresults():
    assert gm.InvalidArgumentError("x").hresult == 0x80070057
    assert gm.UnsupportedError("x").hresult == 0x887A0004
    assert gm.DeviceRemovedError("x").hresult == 0x887A0005
    assert gm.OutOfMemoryError("x").hresult == 0x8007000E
    assert isinstance(gm.InvalidArgumentError("x"), ValueError)
    assert isinstance(gm.OutOfMemoryError("x"), MemoryError)
    assert "0x80070057" in str(gm.InvalidArgumentError("x"))
