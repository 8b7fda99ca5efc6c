"""REDUCE AVERAGE and the exact integer mean reduction against the exact oracle, on every device."""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import oracle
import pytest
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D

T = gm.TensorDesc
AVG = gm.ReduceFunction.AVERAGE


def out_desc(dt, shape, axes, strides=None, total=None):
    return T(dt, tuple(1 if i in axes else s for i, s in enumerate(shape)), strides, total)


def check_float(got, x, axes, dt, max_ulp=1):
    """Every output within ``max_ulp`` of the correctly rounded exact mean."""
    keep = [i for i in range(x.ndim) if i not in axes]
    xt = np.transpose(x, keep + list(axes)).astype(np.float64)
    n_out = int(np.prod([x.shape[i] for i in keep])) if keep else 1
    rows = xt.reshape(n_out, -1)
    sums = oracle.exact_sum_rows(rows)
    g = np.transpose(got, keep + list(axes)).reshape(n_out)
    for k, s in enumerate(sums):
        want = oracle.round_fraction(s / rows.shape[1], dt.numpy_dtype)
        if s == 0 and np.all(np.signbit(rows[k]) & (rows[k] == 0)):
            want = -0.0      # an exact zero total of -0.0s alone is -0.0 (issue 22's rule)
        d = oracle.ulp_distance(g[k], want, dt.numpy_dtype)
        assert d <= max_ulp, f"output {k}: got {g[k]!r}, exact mean rounds to {want!r} ({d} ulp)"


def check_int(got, x, axes, dt):
    keep = [i for i in range(x.ndim) if i not in axes]
    xt = np.transpose(x, keep + list(axes))
    n_out = int(np.prod([x.shape[i] for i in keep])) if keep else 1
    rows = xt.reshape(n_out, -1)
    g = np.transpose(got, keep + list(axes)).reshape(n_out)
    for k in range(n_out):
        s = sum(int(v) for v in rows[k])
        assert int(g[k]) == abs(s) // rows.shape[1] * (1 if s >= 0 else -1)


CASES = {
    # name: (shape, axes) covering each reduction class
    "row": ((64, 300), (1,)),
    "row_short": ((500, 3), (1,)),
    "col": ((300, 64), (0,)),
    "col_outer": ((5, 200, 33), (1,)),
    "full": ((7, 11, 13), (0, 1, 2)),
    "full_1d_long": ((100003,), (0,)),
    "interleaved": ((6, 5, 7, 3), (0, 2)),
    "interleaved_dense_runs": ((5, 3, 64), (0, 2)),
    "unsorted_axes": ((4, 6, 8), (2, 0)),
    "no_axes": ((3, 4), ()),
    "size_one_axis": ((3, 1, 4), (1,)),
    "eight_dims": ((2, 3, 2, 1, 2, 3, 2, 2), (1, 4, 6)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dt", [D.FLOAT32, D.FLOAT16], ids=lambda d: d.name)
def test_reduce_average(device, case, dt):
    shape, axes = CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    x = (rng.random(shape) * 100 + 1).astype(dt.numpy_dtype)
    got = run(device, gm.ReduceDesc(AVG, T(dt, shape), out_desc(dt, shape, axes), axes), [x])
    check_float(got, x, axes, dt)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dt", [D.INT32, D.UINT32], ids=lambda d: d.name)
def test_integer_reduce_mean(device, case, dt):
    shape, axes = CASES[case]
    rng = np.random.default_rng(3)
    info = np.iinfo(dt.numpy_dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dt.numpy_dtype, endpoint=True)
    got = run(device, gm.ext.IntegerReduceMeanDesc(T(dt, shape), out_desc(dt, shape, axes), axes), [x])
    check_int(got, x, axes, dt)


def test_integer_reduce_extremes(device):
    for dt, v in ((D.INT32, 2**31 - 1), (D.INT32, -2**31), (D.UINT32, 2**32 - 1)):
        x = np.full((3000,), v, dt.numpy_dtype)
        got = run(device, gm.ext.IntegerReduceMeanDesc(T(dt, (3000,)), T(dt, (1,)), (0,)), [x])
        assert int(got[0]) == v
    x = np.array([-2, -3], np.int32)
    assert run(device, gm.ext.IntegerReduceMeanDesc(T(D.INT32, (2,)), T(D.INT32, (1,)), (0,)), [x])[0] == -2


@pytest.mark.parametrize("layout", ["broadcast_input", "padded_input", "permuted_input", "padded_output"])
def test_reduce_strided(device, layout):
    dt = D.FLOAT32
    shape, axes = (6, 40, 9), (1,)
    x = (np.random.default_rng(4).random(shape) + 0.5).astype(np.float32)
    ti, to = T(dt, shape), out_desc(dt, shape, axes)
    if layout == "broadcast_input":
        ti = T(dt, shape, (9, 0, 1))
        x = np.ascontiguousarray(np.broadcast_to(x[:, :1], shape))
    elif layout == "padded_input":
        ti = T(dt, shape, (500, 12, 1))
    elif layout == "permuted_input":
        ti = T(dt, shape, (1, 6, 240))
    else:
        to = out_desc(dt, shape, axes, (32, 32, 2))
    got = run(device, gm.ReduceDesc(AVG, ti, to, axes), [x])
    check_float(got, x, axes, dt)


def test_fp32_long_same_sign_within_one_ulp(device):
    # 1e7 x 0.1: a naive float32 loop drifts by percent (onnxruntime +1 %, OpenVINO +9 %)
    n = 10_000_000
    x = np.full(n, 0.1, np.float32)
    got = run(device, gm.ReduceDesc(AVG, T(D.FLOAT32, (n,)), T(D.FLOAT32, (1,)), (0,)), [x])
    assert oracle.ulp_distance(got[0], np.float32(0.1), np.float32) <= 1


def test_fp32_long_rows_and_columns(device):
    rng = np.random.default_rng(8)
    x = (rng.random((8, 200_000)) * 3 + 1e-3).astype(np.float32)
    got = run(device, gm.ReduceDesc(AVG, T(D.FLOAT32, x.shape), T(D.FLOAT32, (8, 1)), (1,)), [x])
    check_float(got, x, (1,), D.FLOAT32)
    xt = np.ascontiguousarray(x.T)
    got = run(device, gm.ReduceDesc(AVG, T(D.FLOAT32, xt.shape), T(D.FLOAT32, (1, 8)), (0,)), [xt])
    check_float(got, xt, (0,), D.FLOAT32)


def test_fp16_wide_accumulator(device):
    # the ONNX reference accumulates in fp16 and overflows; a wide accumulator gives 65504 and 0.1
    x = np.full((2,), 65504, np.float16)
    assert run(device, gm.ReduceDesc(AVG, T(D.FLOAT16, (2,)), T(D.FLOAT16, (1,)), (0,)), [x])[0] == 65504
    n = 1_000_000
    x = np.full((n,), 0.1, np.float16)
    got = run(device, gm.ReduceDesc(AVG, T(D.FLOAT16, (n,)), T(D.FLOAT16, (1,)), (0,)), [x])
    assert got[0] == np.float16(0.1)


def test_nan_and_inf_propagate(device):
    x = np.ones((3, 50), np.float32)
    x[0, 7], x[1, 3], x[2, 1], x[2, 2] = np.nan, np.inf, np.inf, -np.inf
    got = run(device, gm.ReduceDesc(AVG, T(D.FLOAT32, x.shape), T(D.FLOAT32, (3, 1)), (1,)), [x])
    assert np.isnan(got[0, 0]) and got[1, 0] == np.inf and np.isnan(got[2, 0])


def test_fp16_rows_across_the_whole_range(device):
    # rows long enough for the float blocks of the fp16 row kernel, each row mixing subnormals,
    # mid-range values and values near 65504 (same sign): every mean within 1 ulp
    rng = np.random.default_rng(16)
    exps = rng.integers(-24, 16, (6, 4099))
    x = (np.ldexp(rng.random((6, 4099)) + 1.0, exps).clip(0, 65504)).astype(np.float16)
    x[1] = np.float16(65504)
    x[2] = np.float16(6e-08)
    x[3] = -x[3]
    got = run(device, gm.ReduceDesc(AVG, T(D.FLOAT16, x.shape), T(D.FLOAT16, (6, 1)), (1,)), [x])
    check_float(got, x, (1,), D.FLOAT16)


PREFETCH_CASES = {
    # name: (shape, axes, input strides or None); each takes a software-prefetching kernel on CPU
    # OpenCL devices (checked below against the planner), the columns with an odd count of vectors
    "col_many_rows_odd_vectors": ((32, 300, 33), (1,), None),
    "col_many_rows_padded": ((33, 260, 40), (1,), (260 * 48, 48, 1)),
    "rows_adjacent": ((300, 1000), (1,), None),
    "rows_padded_long": ((4, 40000), (1,), (40960, 1)),
}


@pytest.mark.parametrize("case", sorted(PREFETCH_CASES))
@pytest.mark.parametrize("dt", [D.FLOAT32, D.FLOAT16, D.INT32], ids=lambda d: d.name)
def test_prefetched_rows_and_columns(device, case, dt):
    from gpu_mean.descriptors.types import KernelOp
    from gpu_mean.kernels import opencl_geometry as launch
    from gpu_mean.runtime import planning
    shape, axes, strides = PREFETCH_CASES[case]
    ti, to = T(dt, shape, strides), out_desc(dt, shape, axes)
    plan = planning.plan_reduce(KernelOp.REDUCE_MEAN, dt, shape, ti.effective_strides, to.effective_strides, axes)
    assert launch.reduce_geometry(plan, compute_units=2).prefetch > 0
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    if dt == D.INT32:
        x = rng.integers(-2**31, 2**31, shape, dtype=np.int32)
        got = run(device, gm.ext.IntegerReduceMeanDesc(ti, to, axes), [x])
        check_int(got, x, axes, dt)
    else:
        x = (rng.random(shape) * 100 + 1).astype(dt.numpy_dtype)
        got = run(device, gm.ReduceDesc(AVG, ti, to, axes), [x])
        check_float(got, x, axes, dt)


@pytest.mark.parametrize("dt,wide", [(D.FLOAT32, D.FLOAT64), (D.FLOAT16, D.FLOAT64), (D.INT32, D.INT64),
                                     (D.UINT32, D.UINT64)])
@pytest.mark.parametrize("shape,axes", [((7, 3000), (1,)), ((3000, 9), (0,)), ((5, 6, 7), (0, 2)),
                                        ((4, 50000), (0, 1))])
def test_ext_reduce_sum_is_the_wide_total(device, dt, wide, shape, axes):
    """gm.ext.ReduceSumDesc: the exact integer total, and for floats the fp64 total (the partial sums
    gpu_mean.dask combines); never rounded to the input's type."""
    if wide == gm.DataType.FLOAT64 and not device.info.fp64:
        pytest.skip("FLOAT64 outputs need fp64")
    rng = np.random.default_rng(7)
    if dt.is_float:
        x = (rng.random(shape) * 100).astype(dt.numpy_dtype)
    else:
        info = np.iinfo(dt.numpy_dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dt.numpy_dtype, endpoint=True)
    out = tuple(1 if i in axes else s for i, s in enumerate(shape))
    desc = gm.ext.ReduceSumDesc(gm.TensorDesc(dt, shape), gm.TensorDesc(wide, out), axes)
    got = run(device, desc, [x])
    want = np.sum(x, axis=axes, dtype=wide.numpy_dtype, keepdims=True)
    if dt.is_float:
        # wide accumulation in any order (FLOAT16 rows add 8 halves in float first, each exact to
        # 2^-21): relative error far below one ulp of the input's type (2^-24 for FLOAT32)
        np.testing.assert_allclose(got, want, rtol=2.0**-30)
    else:
        np.testing.assert_array_equal(got, want)


def test_ext_reduce_sum_output_type_is_the_wide_type(cpu):
    x = gm.TensorDesc(gm.DataType.FLOAT32, (4, 5))
    with pytest.raises(gm.InvalidArgumentError, match="OutputTensor has data type FLOAT32"):
        cpu.create_operator(gm.ext.ReduceSumDesc(x, gm.TensorDesc(gm.DataType.FLOAT32, (4, 1)), (1,)))
    with pytest.raises(gm.InvalidArgumentError, match="the sum of a FLOAT32 InputTensor is FLOAT64"):
        cpu.create_operator(gm.ext.ReduceSumDesc(x, gm.TensorDesc(gm.DataType.INT64, (4, 1)), (1,)))


# rows of 8..32 dense elements: the CPU shape's short-rows kernel (8 rows per step, a transpose tree,
# one 8-wide store); row counts that leave 1..7 rows after the last full eight, and every type it takes
SHORT_CASES = {"len8_rows9": (9, 8), "len8_rows4099": (4099, 8), "len16_rows1001": (1001, 16),
               "len24_rows203": (203, 24), "len32_rows70": (70, 32)}


@pytest.mark.parametrize("case", sorted(SHORT_CASES))
@pytest.mark.parametrize("dt", [D.FLOAT32, D.FLOAT16, D.BFLOAT16, D.INT32, D.UINT32], ids=lambda d: d.name)
def test_short_rows(device, case, dt):
    from gpu_mean.kernels import reduce_kernels
    from gpu_mean.runtime import planning
    shape, axes = SHORT_CASES[case], (1,)
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    if dt.is_float:
        x = (rng.standard_normal(shape) * 1000).astype(dt.numpy_dtype)
        x[0] = -0.0             # a row of negative zeros: -0.0 (issue 22's rule), as every other kernel gives
        if device.info.fp64:    # without fp64 a sum past FLT_MAX still overflows: issue 22
            x[-1, ::2] = (ml_dtypes.finfo if dt == D.BFLOAT16 else np.finfo)(dt.numpy_dtype).max   # sum past the max
        if dt == D.BFLOAT16:
            desc = gm.ext.ReduceMeanDesc(T(dt, shape), out_desc(dt, shape, axes), axes)
        else:
            desc = gm.ReduceDesc(AVG, T(dt, shape), out_desc(dt, shape, axes), axes)
    else:
        info = np.iinfo(dt.numpy_dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dt.numpy_dtype, endpoint=True)
        x[-1] = info.min
        desc = gm.ext.IntegerReduceMeanDesc(T(dt, shape), out_desc(dt, shape, axes), axes)
    plan = planning.plan_operator(desc)
    # the kernel an fp64 CPU device takes (correctly rounded BFLOAT16 means: rows of 8 only, the
    # float-exact path; longer ones take the row kernel)
    want_kernel = 0 if dt == D.BFLOAT16 and shape[1] != 8 else shape[1]
    assert reduce_kernels.short_rows(plan, fp64=True) == want_kernel
    got = run(device, desc, [x])
    if dt.is_float:
        check_float(got, x, axes, dt)
        assert np.signbit(got[0, 0]) == np.True_ and got[0, 0] == 0
    else:
        check_int(got, x, axes, dt)
    # the same bits as the CPU device (issue 22: with and without fp64)
    cpu = run(gm.create_device("cpu"), desc, [x])
    assert np.array_equal(got.view(np.uint8), cpu.view(np.uint8))


def _float16_rows_of_8(rng) -> np.ndarray:
    """FLOAT16 rows of 8 (R3's class) whose exact means sit just above a midpoint of two halves, so a
    float sum that drops a small value rounds the other way: [64] * 6 + [64.125] sums to 8 times the
    midpoint 56.015625 of 56 and 56.03125; an eighth value 2^-e (e = 5..24, subnormals included)
    lifts the mean above it (rounds up, to 56.03125); lost, the tie goes to even (56). Then rows
    spanning 11 binades, one more than the float path takes, whose float sum loses its last bit
    (the mean's tie rounds to 100.0 instead of 99.9375). Blocks of eight such rows leave the float
    path; blocks of moderate values (spanning at most 10 binades) take it; zero, -0.0, infinity and
    NaN blocks, and rows past the half maximum, between them."""
    tie = np.array([64, 64, 64, 64, 64, 64, 64.125, 0], np.float16)
    blocks = []
    for e in range(5, 25):                 # eight rows of each small value, in its own block
        rows = np.tile(tie, (8, 1))
        rows[:, 7] = np.float16(2.0 ** -e)
        rng.shuffle(rows, axis=1)
        blocks.append(rows)
    edge = np.array([114.25] * 6 + [114.1875, 2.0 ** -4 - 2.0 ** -15], np.float16)
    for _ in range(2):     # 11 binades: a float sum drops 2^-15 and ties (99.96875 -> 100.0, not 99.9375)
        rows = np.tile(edge, (8, 1))
        rng.shuffle(rows, axis=1)
        blocks.append(rows)
    for lo, hi in ((-4, 6), (-9, 1), (5, 15), (-24, -14)):    # at most 10 binades apart: the float path
        mag = 2.0 ** rng.integers(lo, hi + 1, (8, 8)) * rng.uniform(1, 2, (8, 8))
        blocks.append((mag * rng.choice([-1, 1], (8, 8))).astype(np.float16))
    wide = (rng.standard_normal((64, 8)) * 2.0 ** rng.integers(-24, 16, (64, 8))).astype(np.float16)
    blocks += [wide, np.zeros((8, 8), np.float16), np.full((8, 8), -0.0, np.float16),
               np.full((8, 8), 65504, np.float16), np.full((8, 8), -65504, np.float16)]
    special = np.ones((8, 8), np.float16)
    special[0, 3], special[1] = np.inf, np.inf       # inf beside finite values; a row of inf
    special[2, :2] = [np.inf, -np.inf]               # +inf with -inf: NaN
    special[3, 5] = np.nan
    blocks += [special, np.full((8, 8), np.inf, np.float16), np.tile(tie, (3, 1))]   # rows after the last eight
    return np.concatenate(blocks)


def test_float16_rows_of_8_exact_on_both_paths(device):
    """R3's FLOAT16 kernel on CPU devices sums a block of eight rows in float when that is exact
    (reduce_cpu_short.h: gm_exact_in_float) and in double otherwise: every mean is the exact one rounded
    once, bit for bit. Without the span check (every block in float) the tie rows round to 56.0;
    with a check one binade too lax (11), the 11-binade rows to 100.0."""
    x = _float16_rows_of_8(np.random.default_rng(8))
    desc = gm.ReduceDesc(AVG, T(D.FLOAT16, x.shape), out_desc(D.FLOAT16, x.shape, (1,)), (1,))
    got = run(device, desc, [x]).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        want = (x.astype(np.float64).sum(1) / 8).astype(np.float16)   # the sum is exact in double
    zeros = np.all(x == 0, axis=1)              # an exact zero total: -0.0 from -0.0s alone, else +0.0
    want[zeros] = np.where(np.all(np.signbit(x), axis=1)[zeros], -0.0, 0.0)
    if not device.info.fp64:    # the compensated float pair keeps a tolerance until issue 22's stage 2
        finite = np.isfinite(want)
        return check_float(got[finite, None], x[finite], (1,), D.FLOAT16)
    assert np.array_equal(got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()
    assert (got[:20 * 8] == np.float16(56.03125)).all() and (got[20 * 8:22 * 8] == np.float16(99.9375)).all()


def _bfloat16_rows_of_8(rng) -> np.ndarray:
    """BFLOAT16 rows of 8 for the same kernel (13 binades: 8-bit significands): [64] * 6 + [65] sums
    to 8 times the midpoint 56.125 of 56 and 56.25; an eighth value 2^-e (e = 1..44, where the double
    sum is still exact) lifts the mean above it (56.25); lost, the tie goes to even (56). The same
    rows times 2^-106 with eighth values 2^-127..2^-133: bfloat16 subnormals, which stay float
    subnormals and must not pass for zeros. Then blocks of moderate values (at most 13 binades apart:
    the float path; subnormals among them), rows of 2^126 and of the bfloat16 maximum (their float
    sums overflow), zero, -0.0, infinity and NaN blocks."""
    bf = np.dtype(ml_dtypes.bfloat16)
    tie = np.array([64, 64, 64, 64, 64, 64, 65, 0], np.float64)
    blocks = []
    for scale, es in ((0, range(1, 45)), (-106, range(21, 28))):
        for e in es:
            rows = np.tile(tie, (8, 1)) * 2.0 ** scale
            rows[:, 7] = 2.0 ** (scale - e)
            rng.shuffle(rows, axis=1)
            blocks.append(rows.astype(bf))
    for lo, hi in ((-4, 9), (-126, -113), (100, 113), (-60, -47), (-133, -120)):    # at most 13 binades apart
        mag = 2.0 ** rng.integers(lo, hi + 1, (8, 8)) * rng.uniform(1, 2, (8, 8))
        blocks.append((mag * rng.choice([-1, 1], (8, 8))).astype(bf))
    big = float(ml_dtypes.finfo(bf).max)
    blocks += [np.full((8, 8), 2.0 ** 126).astype(bf), np.full((8, 8), big).astype(bf),
               np.full((8, 8), -big).astype(bf), np.zeros((8, 8), bf), np.full((8, 8), -0.0).astype(bf)]
    special = np.ones((8, 8))
    special[0, 3], special[1] = np.inf, np.inf
    special[2, :2] = [np.inf, -np.inf]
    special[3, 5] = np.nan
    blocks += [special.astype(bf), np.full((8, 8), np.inf).astype(bf), np.tile(tie, (3, 1)).astype(bf)]
    return np.concatenate(blocks)


def test_bfloat16_rows_of_8_exact_on_both_paths(device):
    """R3's BFLOAT16 kernel on CPU devices with fp64 sums a block of eight rows in float when that
    is exact and in double otherwise: every mean the exact one rounded once, bit for bit. Without
    the span check the tie rows round to 56.0; counting bfloat16 subnormals as zeros, those with
    subnormal eighth values; without the top bound, the rows of 2^126 and of the maximum overflow."""
    x = _bfloat16_rows_of_8(np.random.default_rng(9))
    desc = gm.ext.ReduceMeanDesc(T(D.BFLOAT16, x.shape), out_desc(D.BFLOAT16, x.shape, (1,)), (1,))
    got = run(device, desc, [x]).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        want = oracle.reduce_mean(x, (1,), x.dtype).reshape(-1)
    x32 = x.astype(np.float32)
    zeros = np.all(x32 == 0, axis=1)            # an exact zero total: -0.0 from -0.0s alone, else +0.0
    want[zeros] = np.where(np.all(np.signbit(x32), axis=1)[zeros], -0.0, 0.0).astype(x.dtype)
    nan = np.isnan(want.astype(np.float32))
    if not device.info.fp64:
        finite = np.isfinite(want.astype(np.float32))
        return check_float(got[finite, None], x[finite], (1,), D.BFLOAT16)
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(got.astype(np.float32)[nan]).all()
    assert (got[:44 * 8].astype(np.float32) == 56.25).all()
    assert (got[44 * 8:51 * 8].astype(np.float32) == np.float32(56.25 * 2.0 ** -106)).all()


def test_bfloat16_rows_of_8_double_path_span(device):
    """R3's BFLOAT16 blocks that fail the float test settle without the exact pass when their FLOAT64
    sums are exact: nonzero exponents at most 42 binades apart (reduce_cpu_short.h: GM_B16_IN_DOUBLE).
    A row at 43 binades whose FLOAT64 sum rounds: five values near 2, 1.0703125 and -2^-43 beside
    2^-43 (1 + 2^-7); in the kernel's order the tiny pair's 2^-50 meets 11.03125, half an ulp, and is
    lost to the tie, so the exact mean 1 + 97/256 + 2^-53 (just above a midpoint: 1 + 98/256) would
    round to even (1 + 96/256). The same row at 42 binades (its pair's 2^-49 is kept) and both
    permuted, among blocks of normal values."""
    bf = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(43)

    def row(e):
        return [1.9921875] * 5 + [1.0703125, -(2.0 ** -e), 2.0 ** -e * (1 + 2.0 ** -7)]
    x = rng.standard_normal((64, 8))
    x[3], x[11] = row(43), row(42)
    x[19], x[27] = rng.permutation(row(43)), rng.permutation(row(42))
    x = x.astype(bf)
    desc = gm.ext.ReduceMeanDesc(T(D.BFLOAT16, x.shape), out_desc(D.BFLOAT16, x.shape, (1,)), (1,))
    got = run(device, desc, [x]).reshape(-1)
    want = oracle.reduce_mean(x, (1,), x.dtype).reshape(-1)
    assert float(want[3]) == 1 + 98 / 256 and float(want[11]) == 1 + 98 / 256
    if not device.info.fp64:
        return check_float(got[:, None], x, (1,), D.BFLOAT16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), np.flatnonzero(got.view(np.uint16)
                                                                                    != want.view(np.uint16))


def test_bfloat16_rows_of_8_float_path_span(device):
    """R3's BFLOAT16 float test (reduce_cpu_short.h: gm_b16_block_exps, GM_B16_IN_FLOAT) on the values' own bits,
    each case a block of eight rows of its own (the test is per block). A row at 14 binades whose float
    sum rounds: 1.5 four times, 1.0, 1.03125, -2^-14 and 2^-14 (1 + 2^-7); in the kernel's order the
    tiny pair's 2^-21 meets 8.03125, half a float ulp, and is lost to the tie, so the exact mean
    1 + 2^-8 + 2^-24 (just above a bfloat16 midpoint) would round to even (1.0). The same row at 13
    binades (its pair's 2^-20 is kept); rows of eight values from 2^125 on (their float sum passes
    FLT_MAX: the largest exponent field allowed is 251) and from 2^124; zeros with one subnormal;
    subnormals alone; then blocks of normal values."""
    from helpers import check_reduce_mean, exact_values
    bf = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(14)

    def row(e):
        return [1.5] * 4 + [1.0, 1.03125, -(2.0 ** -e), 2.0 ** -e * (1 + 2.0 ** -7)]
    x = rng.standard_normal((96, 8)).astype(bf).astype(np.float64)
    for r in range(8):
        x[r], x[8 + r] = rng.permutation(row(14)), rng.permutation(row(13))
    x[0], x[8] = row(14), row(13)
    x[16:24] = 1.9921875 * 2.0 ** 125               # exponent field 252: eight pass FLT_MAX in float
    x[24:32] = 1.9921875 * 2.0 ** 124               # field 251: the float path, exact
    x[32:40] = [1.9921875 * 2.0 ** 125] * 7 + [-1.5 * 2.0 ** 125]
    x[40:48] = 0.0
    x[44, 5] = 2.0 ** -133                          # the smallest subnormal beside zeros
    x[48:56] = 2.0 ** -126 * rng.integers(-127, 128, (8, 8)) / 128.0    # subnormals only
    got = check_reduce_mean(device, D.BFLOAT16, exact_values(x, bf), (1,))
    assert (got[:16].astype(np.float64) == 1 + 2.0 ** -7).all()
    assert (got[16:24].astype(np.float64) == 1.9921875 * 2.0 ** 125).all()
    assert (got[24:32].astype(np.float64) == 1.9921875 * 2.0 ** 124).all()
