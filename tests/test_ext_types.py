"""The extension types (issue 21): BFLOAT16, FLOAT64, INT64 and UINT64 through gm.ext's element-wise
mean, n-ary mean, mean reduction and wide sum, on every device present.

What a device must do with each (operation, type) comes from the tests' own table
(tests/ext_support.py), not the code's: compute it, checked here against the exact oracle on seeded random
data and on named adversarial rows, or refuse it at create_operator with an UnsupportedTypeError
that names the device and the reason (the kernel is not built yet on that backend; FLOAT64 on a
device without cl_khr_fp64).
"""
from __future__ import annotations

import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import oracle
import pytest
from ext_support import EXT_TYPES, MEAN, NARY, REDUCE, SUM, computes, refusal, run_or_refused
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D

T = gm.TensorDesc
BF16 = np.dtype(ml_dtypes.bfloat16)
I64, U64 = np.iinfo(np.int64), np.iinfo(np.uint64)
BF_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
DBL_MAX, DBL_TINY = float(np.finfo(np.float64).max), 5e-324
IDS = {"ids": lambda d: d.name}


def bf(values) -> np.ndarray:
    """bfloat16 values written exactly (each must be a bfloat16 value: checked)."""
    a = np.asarray(values, np.float64)
    b = a.astype(BF16)
    assert np.array_equal(b.astype(np.float64), a, equal_nan=True), "not bfloat16 values"
    return b


# named adversarial pairs for the element-wise mean: (a, b) columns
PAIRS = {
    D.BFLOAT16: {
        "tie to even down": ([1.0, -1.0], [1 + 2**-7, -1 - 2**-7]),          # 1 + 2^-8: a midpoint, even is 1
        "tie to even up": ([1 + 2**-7, 2.0], [1 + 2 * 2**-7, 2 + 2**-6]),     # midpoints with odd below
        "float32 sum overflows": ([BF_MAX, -BF_MAX, BF_MAX], [BF_MAX, -BF_MAX, BF_MAX / 2]),
        "subnormal halves": ([2**-133, 3 * 2**-133, -2**-133], [0.0, 0.0, -0.0]),
        "signed zeros": ([-0.0, -0.0, 0.0], [-0.0, 0.0, -0.0]),
        "inf and nan": ([np.inf, np.inf, np.nan, -np.inf], [1.0, -np.inf, 1.0, -np.inf]),
    },
    D.FLOAT64: {
        "sum overflows": ([DBL_MAX, -DBL_MAX, DBL_MAX], [DBL_MAX, -DBL_MAX, DBL_MAX / 2]),
        "cancellation": ([1e308, 1.0, 2**-60], [-1e308 + 2**971, -1.0 + 2**-52, -(2**-60)]),
        "subnormal halves": ([DBL_TINY, 3 * DBL_TINY, 2.2250738585072014e-308], [0.0, 0.0, DBL_TINY]),
        "signed zeros": ([-0.0, -0.0], [-0.0, 0.0]),
        "inf and nan": ([np.inf, np.inf, np.nan], [1.0, -np.inf, 1.0]),
    },
    D.INT64: {
        "extremes": ([I64.max, I64.min, I64.min, I64.max, I64.min], [I64.max, I64.min, I64.max, I64.max - 1, -1]),
        "toward zero": ([-3, -1, 3, -5], [0, 0, 0, 2]),
    },
    D.UINT64: {
        "extremes": ([U64.max, U64.max, 0, U64.max], [U64.max, U64.max - 1, U64.max, 0]),
    },
}

# named adversarial rows for the reductions and the n-ary mean (one row = one output's inputs)
ROWS = {
    D.BFLOAT16: {
        # (2 + (2 + 2^-6) + 2^-24 + 0) / 4 = 1 + 2^-8 + 2^-26, just above a midpoint: rounded once it is
        # 1 + 2^-7; through float32 first (2^-26 is lost) it would tie down to 1.0
        "single rounding": [2.0, 2 + 2**-6, 2**-24, 0.0],
        "exact midpoint": [1.0, 1 + 2**-7, 1.0, 1 + 2**-7],
        "max values": [BF_MAX] * 4,
        "inf": [np.inf, 1.0, 2.0, 3.0],
        "nan": [1.0, np.nan, 2.0, 3.0],
        "both infinities": [np.inf, -np.inf, 1.0, 2.0],
    },
    D.FLOAT64: {
        # a plain double sum loses the 2^-60 (1 + 2^-60 rounds to 1); a double-double keeps it
        "cancellation": [1.0, 2**-60, -1.0, 2**-60],
        "huge cancellation": [1e308, 1.0, -1e308, 3.0],
        "sum past DBL_MAX": [DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX],
        "partial past DBL_MAX": [DBL_MAX, DBL_MAX, -DBL_MAX, 1.0],
        "subnormals": [DBL_TINY, DBL_TINY, 0.0, DBL_TINY * 7],
        "negative zeros": [-0.0, -0.0, -0.0, -0.0],
        "inf": [np.inf, 1.0, -DBL_MAX, -DBL_MAX],
        "both infinities": [np.inf, -np.inf, 1.0, 2.0],
    },
    D.INT64: {
        "INT64_MIN": [I64.min] * 4,
        "INT64_MAX past 2^63 and 2^64": [I64.max] * 4,
        "mixed extremes": [I64.min, I64.max, I64.min, -7],
        "toward zero": [-1, -1, -1, 2],
    },
    D.UINT64: {
        "UINT64_MAX past 2^64": [U64.max] * 4,
        "remainder": [U64.max, U64.max, U64.max, 2],
    },
}


def values(dt: D, data) -> np.ndarray:
    if dt == D.BFLOAT16:
        return bf(data)
    if dt.is_float:
        return np.asarray(data, dt.numpy_dtype)
    return np.array(data, dtype=object).astype(dt.numpy_dtype)   # Python ints, UINT64_MAX included


def random_data(dt: D, shape, seed: int, positive: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.is_float:
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))
        return (np.abs(x) if positive else x).astype(dt.numpy_dtype)
    info = np.iinfo(dt.numpy_dtype)
    return rng.integers(info.min, info.max, shape, dtype=dt.numpy_dtype, endpoint=True)


def assert_means(got, want, dt: D, max_ulp: int):
    """Integers exact; floats within ``max_ulp`` (NaN where the oracle has NaN, infinities exact)."""
    got, want = np.asarray(got).ravel(), np.asarray(want).ravel()
    if not dt.is_float:
        assert got.tolist() == want.tolist()
        return
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    for g, w in zip(got, want):
        if np.isnan(w):
            continue
        if max_ulp == 0 or not np.isfinite(w):
            assert oracle.equal_bits(np.array(g), np.array(w)), f"got {g!r}, want {w!r}"
        else:
            d = oracle.ulp_distance(g, w, dt.numpy_dtype) if np.signbit(g) == np.signbit(w) or w == 0 else 99
            assert d <= max_ulp, f"got {g!r}, the exact mean rounds to {w!r} ({d} ulp)"


# --- the element-wise mean ----------------------------------------------------------------------

@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_mean_random_against_the_oracle(device, dt):
    shape = (3, 5, 17)
    a, b = random_data(dt, shape, 1), random_data(dt, shape, 2)
    t = T(dt, shape)
    got = run_or_refused(device, MEAN, dt, lambda: run(device, gm.ext.MeanDesc(t, t, t), [a, b]))
    if got is not None:
        assert oracle.equal_bits(got, oracle.fast_mean2(a, b, dt.numpy_dtype))
        assert oracle.equal_bits(got[1, :2], oracle.mean2(a[1, :2], b[1, :2], dt.numpy_dtype))   # the Fraction path


@pytest.mark.parametrize("dt,name", [(dt, n) for dt, cases in PAIRS.items() for n in cases], ids=str)
def test_mean_adversarial_pairs(device, dt, name):
    a, b = (values(dt, v) for v in PAIRS[dt][name])
    t = T(dt, a.shape)
    got = run_or_refused(device, MEAN, dt, lambda: run(device, gm.ext.MeanDesc(t, t, t), [a, b]))
    if got is not None:
        assert oracle.equal_bits(got, oracle.mean2(a, b, dt.numpy_dtype)), (got, oracle.mean2(a, b, dt.numpy_dtype))


def test_mean_values_worked_by_hand(cpu):
    """A few results written out, so the oracle is checked too."""
    def m(dt, a, b):
        t = T(dt, (len(a),))
        return run(cpu, gm.ext.MeanDesc(t, t, t), [values(dt, a), values(dt, b)])
    assert m(D.BFLOAT16, [1.0, BF_MAX], [1 + 2**-7, BF_MAX]).astype(np.float64).tolist() == [1.0, BF_MAX]
    assert m(D.FLOAT64, [DBL_MAX, DBL_TINY], [DBL_MAX, 0.0]).tolist() == [DBL_MAX, 0.0]
    assert m(D.INT64, [I64.min, I64.min, -3], [I64.min, I64.max, 0]).tolist() == [I64.min, 0, -1]
    assert m(D.UINT64, [U64.max], [U64.max - 2]).tolist() == [U64.max - 1]


# --- the n-ary mean and the mean reduction -----------------------------------------------------------

@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
@pytest.mark.parametrize("n", [1, 3, 7])
def test_nary_random_against_the_oracle(device, dt, n):
    shape = (4, 33)
    xs = [random_data(dt, shape, 10 + k, positive=True) for k in range(n)]
    desc = gm.ext.NaryMeanDesc([T(dt, shape)] * n, T(dt, shape))
    got = run_or_refused(device, NARY, dt, lambda: run(device, desc, xs))
    if got is not None:
        assert_means(got, oracle.nary_mean(xs, dt.numpy_dtype), dt, 1)


REDUCE_CASES = {"row": ((9, 300), (1,)), "col": ((300, 9), (0,)), "full": ((5, 7, 11), (0, 1, 2)),
                "interleaved": ((6, 5, 7, 3), (0, 2)), "long": ((100003,), (0,))}


@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
@pytest.mark.parametrize("case", sorted(REDUCE_CASES))
def test_reduce_random_against_the_oracle(device, dt, case):
    shape, axes = REDUCE_CASES[case]
    x = random_data(dt, shape, zlib.crc32(case.encode()), positive=True)
    out = T(dt, tuple(1 if i in axes else s for i, s in enumerate(shape)))
    got = run_or_refused(device, REDUCE, dt, lambda: run(device, gm.ext.ReduceMeanDesc(T(dt, shape), out, axes), [x]))
    if got is not None:
        assert_means(got, oracle.reduce_mean(x, axes, dt.numpy_dtype), dt, 1)


def _rows(dt):
    names = sorted(ROWS[dt])
    return names, np.stack([values(dt, ROWS[dt][n]) for n in names])


@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_reduce_adversarial_rows(device, dt):
    """Each named row reduced (axis 1) and, as columns, by the n-ary mean. The float rows hold their
    exact mean's rounding to 0 ulp: each is a case where a weaker accumulator or a second rounding
    gives another answer."""
    names, x = _rows(dt)
    out = T(dt, (x.shape[0], 1))
    want = oracle.reduce_mean(x, (1,), dt.numpy_dtype)
    got = run_or_refused(device, REDUCE, dt, lambda: run(device, gm.ext.ReduceMeanDesc(T(dt, x.shape), out, (1,)), [x]))
    if got is not None:
        for name, g, w in zip(names, got.ravel(), want.ravel()):
            assert oracle.equal_bits(np.array(g), np.array(w)), f"{dt.name} row {name!r}: got {g!r}, want {w!r}"
    cols = [np.ascontiguousarray(c) for c in x.T]
    desc = gm.ext.NaryMeanDesc([T(dt, (x.shape[0],))] * x.shape[1], T(dt, (x.shape[0],)))
    got = run_or_refused(device, NARY, dt, lambda: run(device, desc, cols))
    if got is not None:
        for name, g, w in zip(names, got.ravel(), want.ravel()):
            assert oracle.equal_bits(np.array(g), np.array(w)), f"{dt.name} n-ary {name!r}: got {g!r}, want {w!r}"


def test_adversarial_rows_fail_the_weaker_methods():
    """The rows above can fail: a plain double sum, bfloat16 rounded through float32, and a 64-bit
    integer sum each give another answer on one of them."""
    x = values(D.FLOAT64, ROWS[D.FLOAT64]["cancellation"])
    assert np.sum(x) / 4 != oracle.reduce_mean(x, (0,), np.float64)[0]
    x = values(D.BFLOAT16, ROWS[D.BFLOAT16]["single rounding"])
    q = np.sum(x.astype(np.float64)) / 4
    assert q.astype(np.float32).astype(BF16) != oracle.reduce_mean(x, (0,), BF16)[0]
    x = values(D.INT64, ROWS[D.INT64]["INT64_MAX past 2^63 and 2^64"])
    assert np.sum(x) // 4 != oracle.reduce_mean(x, (0,), np.int64)[0]


# --- the wide sum: one or two words -------------------------------------------------------------------

@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_reduce_sum_words(device, dt):
    names, x = _rows(dt)
    x = np.concatenate([x, random_data(dt, (3, x.shape[1]), 5)])
    finite = np.all(np.isfinite(x.astype(np.float64)), axis=1) if dt.is_float else np.ones(len(x), bool)
    wide = {D.BFLOAT16: D.FLOAT64, D.FLOAT64: D.FLOAT64, D.INT64: D.INT64, D.UINT64: D.UINT64}[dt]
    low = {D.FLOAT64: D.FLOAT64, D.INT64: D.UINT64, D.UINT64: D.UINT64}.get(dt)
    o = (x.shape[0], 1)
    desc = gm.ext.ReduceSumDesc(T(dt, x.shape), T(wide, o), (1,), T(low, o) if low else None)

    def go():
        cop = device.compile_operator(device.create_operator(desc))
        bufs = [device.create_buffer(t.total_size_in_bytes) for t in desc.input_tensors() + desc.output_tensors()]
        bufs[0].write(x)
        cop.execute(inputs=bufs[:1], outputs=bufs[1:])
        return [b.read_tensor(t).ravel() for b, t in zip(bufs[1:], desc.output_tensors())]
    got = run_or_refused(device, SUM, dt, go, also=(wide,))
    if got is None:
        return
    for k, row in enumerate(x):
        if not finite[k]:
            continue
        if dt.is_float:
            exact = sum(Fraction(float(v)) for v in row)
            if np.isinf(oracle.round_fraction(exact, np.float64)):    # past DBL_MAX: the total is the infinity
                assert got[0][k] == oracle.round_fraction(exact, np.float64)
                continue
            total = Fraction(float(got[0][k])) + (Fraction(float(got[1][k])) if low else 0)
            scale = sum(abs(Fraction(float(v))) for v in row)
            assert abs(total - exact) <= scale / 2**(100 if low else 48), f"row {k}: {float(total)} vs {float(exact)}"
            if low:
                assert abs(Fraction(float(got[1][k]))) <= abs(Fraction(float(got[0][k]))) / 2**52   # normalized
        else:
            hi = int(got[0][k])
            assert hi * 2**64 + int(got[1][k]) == sum(int(v) for v in row), f"row {k}"


def test_reduce_sum_validation():
    x64, i64 = T(D.FLOAT64, (2, 3)), T(D.INT64, (2, 3))
    o = (2, 1)
    cpu = gm.create_device("cpu")
    with pytest.raises(gm.InvalidArgumentError, match="OutputLowTensor is missing; the sum of a FLOAT64 .*128 bits"):
        cpu.create_operator(gm.ext.ReduceSumDesc(x64, T(D.FLOAT64, o), (1,)))
    with pytest.raises(gm.InvalidArgumentError, match="OutputLowTensor is given, but the sum of a FLOAT32"):
        cpu.create_operator(gm.ext.ReduceSumDesc(T(D.FLOAT32, (2, 3)), T(D.FLOAT64, o), (1,), T(D.FLOAT64, o)))
    with pytest.raises(gm.InvalidArgumentError, match="OutputLowTensor has data type INT64; the low word .* UINT64"):
        cpu.create_operator(gm.ext.ReduceSumDesc(i64, T(D.INT64, o), (1,), T(D.INT64, o)))
    with pytest.raises(gm.InvalidArgumentError, match="OutputLowTensor has Sizes"):
        cpu.create_operator(gm.ext.ReduceSumDesc(i64, T(D.INT64, o), (1,), T(D.UINT64, (1, 2))))
    with pytest.raises(gm.InvalidArgumentError, match="the sum of a BFLOAT16 InputTensor is FLOAT64"):
        cpu.create_operator(gm.ext.ReduceSumDesc(T(D.BFLOAT16, (2, 3)), T(D.INT64, o), (1,)))
    # an input type the operator does not take, with a low word given: the type table's error, not a
    # KeyError from the wide-sum tables (found by the fuzzer)
    with pytest.raises(gm.InvalidArgumentError, match="InputTensor has data type UINT16"):
        cpu.create_operator(gm.ext.ReduceSumDesc(T(D.UINT16, (2, 3)), T(D.UINT64, o), (1,), T(D.UINT64, o)))


# --- descriptors and refusals -------------------------------------------------------------------------

def test_directml_descriptors_keep_directml_tables():
    cpu = gm.create_device("cpu")
    bf16 = T(D.BFLOAT16, (2, 3))
    for desc in (gm.ElementWiseMeanDesc(bf16, bf16, bf16),
                 gm.ReduceDesc(gm.ReduceFunction.AVERAGE, bf16, T(D.BFLOAT16, (2, 1)), (1,))):
        with pytest.raises(gm.InvalidArgumentError, match="data type BFLOAT16; at feature level 6.4 the operator "
                                                          "takes FL 3.0: 1-8 dimensions, FLOAT16, FLOAT32"):
            cpu.create_operator(desc)
    f32 = T(D.FLOAT32, (2, 3))
    with pytest.raises(gm.InvalidArgumentError, match="GM_OPERATOR_ELEMENT_WISE_MEAN: ATensor has data type FLOAT32; "
                                                      "at feature level 6.4 the operator takes FL 3.0: 1-8 dimensions, "
                                                      "BFLOAT16, FLOAT64, INT64, UINT64"):
        cpu.create_operator(gm.ext.MeanDesc(f32, f32, f32))
    with pytest.raises(gm.InvalidArgumentError, match="does not exist at feature level 2.1; it needs FL 3.0"):
        gm.create_device("cpu", feature_level=gm.FeatureLevel.FL_2_1).create_operator(
            gm.ext.ReduceMeanDesc(bf16, T(D.BFLOAT16, (2, 1)), (1,)))
    assert gm.calc_buffer_tensor_size(D.BFLOAT16, (3,)) == 8
    assert cpu.check_feature_support(gm.Feature.TENSOR_DATA_TYPE_SUPPORT, D.BFLOAT16)


@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_every_operation_follows_the_support_table(device, dt):
    """create_operator computes or refuses each gm.ext operation over ``dt`` as the table says."""
    t = T(dt, (4, 4))
    r = T(dt, (4, 1))
    wide = {D.BFLOAT16: D.FLOAT64}.get(dt, dt)
    low = {D.FLOAT64: D.FLOAT64, D.INT64: D.UINT64, D.UINT64: D.UINT64}.get(dt)
    descs = {MEAN: gm.ext.MeanDesc(t, t, t), NARY: gm.ext.NaryMeanDesc([t, t, t], t),
             REDUCE: gm.ext.ReduceMeanDesc(t, r, (1,)),
             SUM: gm.ext.ReduceSumDesc(t, T(wide, (4, 1)), (1,), T(low, (4, 1)) if low else None)}
    for op, desc in descs.items():
        also = (wide,) if op == SUM else ()
        if refusal(device, op, dt, also) is None:
            device.compile_operator(device.create_operator(desc))
        else:
            run_or_refused(device, op, dt, lambda desc=desc: device.create_operator(desc), also)


def test_float64_refusal_names_the_missing_extension():
    pytest.importorskip("pyopencl")
    from gpu_mean.backends import opencl
    try:
        be = opencl.make_backend(0, allow_fp64=False)
    except RuntimeError as e:
        pytest.skip(f"no OpenCL device: {e}")
    dev = gm.Device(be)
    t = T(D.FLOAT64, (3,))
    with pytest.raises(gm.UnsupportedTypeError, match=r"ATensor has data type FLOAT64, which opencl:0(-nofp64)? "
                                                      r"\(.*\) does not support: cl_khr_fp64 .*switched off"):
        dev.create_operator(gm.ext.MeanDesc(t, t, t))
    assert not dev.check_feature_support(gm.Feature.TENSOR_DATA_TYPE_SUPPORT, D.FLOAT64)
    assert dev.check_feature_support(gm.Feature.TENSOR_DATA_TYPE_SUPPORT, D.BFLOAT16)


def test_plan_names_the_accumulators():
    from gpu_mean.runtime import planning
    acc = {dt: planning.accumulator(REDUCE, dt) for dt in EXT_TYPES}
    assert acc == {D.BFLOAT16: "float64", D.FLOAT64: "double-double", D.INT64: "int128", D.UINT64: "uint128"}
    assert planning.compute_type(planning.KernelOp.MEAN, D.BFLOAT16) == D.FLOAT32
    assert planning.compute_type(planning.KernelOp.MEAN, D.INT64) == D.INT64
    plan = planning.plan_operator(gm.ext.ReduceMeanDesc(T(D.INT64, (4, 1000)), T(D.INT64, (4, 1)), (1,)))
    assert plan.acc_bytes == 16 and plan.temporary_size(8) == 8 * 4 * 16


def test_cuda_backend_follows_the_same_table():
    """The CUDA backend (no GPU here: its object without a context; create_operator compiles nothing)
    accepts what the table lists and refuses the rest naming itself (nothing since the two-word wide
    sums were built)."""
    from gpu_mean.backends import cuda
    from gpu_mean.runtime.device import DeviceInfo
    be = object.__new__(cuda.CudaBackend)
    be.info = DeviceInfo("cuda", 0, "stand-in GPU", "NVIDIA", "GPU", 1 << 30, True, True)
    be.unavailable, be.native_errors = None, ()
    dev = gm.Device(be)
    refused = 0
    for dt in EXT_TYPES:
        t, r = T(dt, (4, 4)), T(dt, (4, 1))
        wide = {D.BFLOAT16: D.FLOAT64}.get(dt, dt)
        low = {D.FLOAT64: D.FLOAT64, D.INT64: D.UINT64, D.UINT64: D.UINT64}.get(dt)
        for op, desc in ((MEAN, gm.ext.MeanDesc(t, t, t)), (NARY, gm.ext.NaryMeanDesc([t, t], t)),
                         (REDUCE, gm.ext.ReduceMeanDesc(t, r, (1,))),
                         (SUM, gm.ext.ReduceSumDesc(t, T(wide, (4, 1)), (1,), T(low, (4, 1)) if low else None))):
            pattern = refusal(dev, op, dt)
            if pattern is None:
                dev.create_operator(desc)
                continue
            refused += 1
            assert "CUDA backend" in pattern
            with pytest.raises(gm.UnsupportedTypeError, match=pattern):
                dev.create_operator(desc)
    assert refused == sum(not computes("cuda", op, dt) for op in (MEAN, NARY, REDUCE, SUM) for dt in EXT_TYPES)


def test_bfloat16_without_fp64_in_the_gpu_shape():
    """No device variant runs the GPU-shaped kernels without fp64 (CUDA always has it), yet an OpenCL
    GPU without cl_khr_fp64 would: BFLOAT16's two compensated float pairs and integer quotient there,
    on the adversarial rows (reduction and n-ary mean) and a split reduction, against the oracle."""
    pytest.importorskip("pyopencl")
    from gpu_mean.backends import opencl
    try:
        dev = gm.Device(opencl.make_backend(0, allow_fp64=False, gpu_paths=True))
    except RuntimeError as e:
        pytest.skip(f"no OpenCL device: {e}")
    dt = D.BFLOAT16
    names, x = _rows(dt)
    want = oracle.reduce_mean(x, (1,), dt.numpy_dtype)
    got = run(dev, gm.ext.ReduceMeanDesc(T(dt, x.shape), T(dt, (x.shape[0], 1)), (1,)), [x])
    cols = [np.ascontiguousarray(c) for c in x.T]
    nary = run(dev, gm.ext.NaryMeanDesc([T(dt, (x.shape[0],))] * x.shape[1], T(dt, (x.shape[0],))), cols)
    for name, g, n, w in zip(names, got.ravel(), nary.ravel(), want.ravel()):
        assert oracle.equal_bits(np.array(g), np.array(w)), f"row {name!r}: got {g!r}, want {w!r}"
        assert oracle.equal_bits(np.array(n), np.array(w)), f"n-ary {name!r}: got {n!r}, want {w!r}"
    x = random_data(dt, (100003,), 7, positive=True)
    got = run(dev, gm.ext.ReduceMeanDesc(T(dt, x.shape), T(dt, (1,)), (0,)), [x])
    assert_means(got, oracle.reduce_mean(x, (0,), dt.numpy_dtype), dt, 1)


def _long_float64_rows() -> np.ndarray:
    """Rows of 1000 whose special values sit among ordinary ones, where the kernels' vector paths
    (eight or sixteen values at once) meet them."""
    x = random_data(D.FLOAT64, (6, 1000), 21, positive=True)
    x[0, ::97] = DBL_MAX                    # a sum past DBL_MAX
    x[1, 500] = np.inf
    x[2, 123] = np.nan
    x[3, 7], x[3, 900] = np.inf, -np.inf
    x[4] = -0.0                              # the mean of -0.0s is -0.0
    x[5, 10:20], x[5, 30:40] = 2.0**1000, -2.0**1000    # large values that cancel
    return x


def test_float64_special_values_inside_long_rows(device):
    x = _long_float64_rows()
    dt = D.FLOAT64
    want = oracle.reduce_mean(x, (1,), np.float64)
    got = run_or_refused(device, REDUCE, dt, lambda: run(device, gm.ext.ReduceMeanDesc(T(dt, x.shape),
                                                                                         T(dt, (6, 1)), (1,)), [x]))
    if got is not None:
        assert oracle.equal_bits(got.ravel()[1:5], want.ravel()[1:5]), (got.ravel(), want.ravel())
        assert_means(got, want, dt, 1)
    xs = [np.ascontiguousarray(x[:, k::3][:, :333]) for k in range(3)]
    want = oracle.nary_mean(xs, np.float64)
    got = run_or_refused(device, NARY, dt, lambda: run(device, gm.ext.NaryMeanDesc([T(dt, (6, 333))] * 3,
                                                                                    T(dt, (6, 333))), xs))
    if got is not None:
        assert_means(got, want, dt, 1)
        assert oracle.equal_bits(got[4], want[4])


def test_float64_special_values_inside_long_columns(device):
    """The column reduction over FLOAT64 (the CPU shape: eight columns per vector of double-doubles,
    a vector holding a value past 2^960, inf or NaN lane by lane): each of the rows above as eight
    adjacent columns, against the oracle, the special values bit for bit."""
    x = np.ascontiguousarray(np.repeat(_long_float64_rows(), 8, axis=0).T)      # (1000, 48)
    dt = D.FLOAT64
    want = oracle.reduce_mean(x, (0,), np.float64)
    got = run_or_refused(device, REDUCE, dt, lambda: run(device, gm.ext.ReduceMeanDesc(T(dt, x.shape),
                                                                                         T(dt, (1, 48)), (0,)), [x]))
    if got is not None:
        assert oracle.equal_bits(got.ravel()[8:40], want.ravel()[8:40]), (got.ravel(), want.ravel())
        assert np.array_equal(got.ravel().view(np.uint64), np.repeat(got.ravel()[::8], 8).view(np.uint64))
        assert_means(got, want, dt, 1)


def _tiny_bfloat16_rows(n: int = 65537) -> tuple[list, np.ndarray]:
    """Rows of ``n`` (odd) bfloat16 values, multiples of the smallest subnormal 2^-133, whose means
    lie below 2^-126. Mean (j + 1/2 + 1/(2n)) 2^-133 is just above a bfloat16 midpoint by less than
    half of float's smallest subnormal 2^-149: a float quotient rounds it onto the midpoint, and ties
    to even then goes the wrong way; rounded once it goes up."""
    unit = 2.0**-133
    rows, names = [], []

    def row(name, total_units, sign=1.0):
        q, r = divmod(total_units, n)        # r elements of q + 1 units, the others q (all bfloat16)
        v = np.full(n, q, np.float64)
        v[:r] += 1
        names.append(name)
        rows.append(sign * v * unit)
    for j in (0, 1, 2, 64, 127):
        row(f"just above midpoint {j}.5", j * n + (n + 1) // 2)
        row(f"just below midpoint {j}.5", j * n + (n - 1) // 2)
    row("negative, just above midpoint 0.5", (n + 1) // 2, -1.0)
    row("negative, just above midpoint 3.5", 3 * n + (n + 1) // 2, -1.0)
    row("below 2^-149 (to zero)", 1)
    row("negative below 2^-149 (to -0.0)", 1, -1.0)
    return names, np.array(rows).astype(BF16)


@pytest.mark.parametrize("spec", ["opencl:0-nofp64", "opencl:0-gpupaths-nofp64"])
def test_bfloat16_means_below_2_126_without_fp64_round_once(spec):
    """BFLOAT16 reductions on a device without fp64 (two compensated float pairs, an integer
    quotient rounded to odd): a mean below 2^-126 is rounded once, bit for bit the exact oracle's
    and the CPU device's, in rows and in columns, in both kernel shapes."""
    pytest.importorskip("pyopencl")
    from conftest import make_device
    try:
        dev = make_device(spec)
    except RuntimeError as e:
        pytest.skip(f"no OpenCL device: {e}")
    assert not dev.info.fp64
    dt = D.BFLOAT16
    names, x = _tiny_bfloat16_rows()
    want = oracle.reduce_mean(x, (1,), dt.numpy_dtype)
    assert want.view(np.uint16)[0, 0] == 1           # the first row rounds up to 2^-133, not to 0
    cpu = gm.create_device("cpu")
    for name, xs, axes in (("rows", x, (1,)), ("columns", np.ascontiguousarray(x.T), (0,))):
        out = T(dt, tuple(1 if i in axes else s for i, s in enumerate(xs.shape)))
        desc = gm.ext.ReduceMeanDesc(T(dt, xs.shape), out, axes)
        got = run(dev, desc, [xs]).reshape(-1)
        assert np.array_equal(run(cpu, desc, [xs]).reshape(-1).view(np.uint16), want.reshape(-1).view(np.uint16))
        for row, g, w in zip(names, got, want.reshape(-1)):
            assert oracle.equal_bits(np.array(g), np.array(w)), f"{name}, {row!r}: got {g!r}, want {w!r}"


@pytest.mark.parametrize("k", [3, 4, 5, 9, 33])
def test_bfloat16_nary_sums_past_flt_max(device, k):
    """The BFLOAT16 n-ary mean's vector test in the CPU shape sends a lane to the exact path when its
    largest input has exponent 128 - c or more (c = ceil(log2 k); elementwise.cl: GM_NARY_OVF), in
    place of a test of the FLOAT32 sum for inf: k inputs just below 2^(129 - c) overflow that sum while
    their mean is finite, and inputs one binade lower never do. Both among ordinary values (whole
    vectors and the scalar tail), bit for bit the oracle's."""
    dt = D.BFLOAT16
    c = (k - 1).bit_length()
    n = 16 * 64 + 5
    rng = np.random.default_rng(k)
    x = rng.standard_normal((k, n))
    m = 1.0 + 127 / 128                                      # the largest significand of bfloat16
    over, under = m * 2.0 ** (128 - c), m * 2.0 ** (127 - c)
    assert k * over > 2.0**128 and k * under < 2.0**128
    sign = np.where(rng.random(k) < 0.2, -1.0, 1.0)[:, None]
    for j, v in enumerate((over, under, over, BF_MAX, under, over)):
        cols = rng.choice(n, 40, replace=False) if j < 5 else np.arange(n - 5, n)
        x[:, cols] = np.abs(sign) * v if j % 2 == 0 else sign * v
    xs = [np.ascontiguousarray(r) for r in x.astype(BF16)]
    want = oracle.nary_mean(xs, BF16)
    assert np.isfinite(want.astype(np.float64)).all()
    desc = gm.ext.NaryMeanDesc([T(dt, (n,))] * k, T(dt, (n,)))
    got = run_or_refused(device, NARY, dt, lambda: run(device, desc, xs))
    if got is not None:
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), np.flatnonzero(got.view(np.uint16)
                                                                                        != want.view(np.uint16))
