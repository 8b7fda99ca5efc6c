"""Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean against the exact oracle, on every device."""
from __future__ import annotations

import zlib

import numpy as np
import oracle
import pytest
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D

T = gm.TensorDesc
NP = {D.FLOAT32: np.float32, D.FLOAT16: np.float16, D.INT32: np.int32, D.UINT32: np.uint32}

EXTREMES = {
    D.FLOAT32: [3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.0, -0.0, 1.4e-45, -1.4e-45, 1.1754944e-38, np.inf,
                -np.inf, np.nan, 16777217.0, 0.1, 2.8e-45],
    D.FLOAT16: [65504.0, -65504.0, 6e-08, -6e-08, 6.1e-05, 1.0, -0.0, np.inf, -np.inf, np.nan, 2049.0, 0.1],
    D.INT32: [2**31 - 1, -2**31, -1, 1, 0, -3, 3, 2**30, -2**31 + 1],
    D.UINT32: [2**32 - 1, 0, 1, 2**31, 2**31 - 1, 3],
}


def extremes_pairs(dt):
    v = np.array(EXTREMES[dt], dtype=NP[dt])
    a, b = np.meshgrid(v, v, indexing="ij")
    return a.ravel(), b.ravel()


def random_data(dt, shape, seed):
    rng = np.random.default_rng(seed)
    if dt == D.FLOAT32:
        return (rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    if dt == D.FLOAT16:
        return (rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, shape)).astype(np.float16)
    if dt == D.INT32:
        return rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
    return rng.integers(0, 2**32, shape, dtype=np.int64).astype(np.uint32)


DTYPES = [D.FLOAT32, D.FLOAT16, D.INT32, D.UINT32]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_mean_extremes_exact(device, dt):
    a, b = extremes_pairs(dt)
    t = T(dt, a.shape)
    got = run(device, gm.ElementWiseMeanDesc(t, t, t), [a, b])
    assert oracle.equal_bits(got, oracle.mean2(a, b, NP[dt]))


def test_named_overflow_cases(device):
    for dt, x, want in ((D.FLOAT32, 3.4028235e38, 3.4028235e38), (D.FLOAT16, 65504, 65504),
                        (D.INT32, 2**31 - 1, 2**31 - 1), (D.INT32, -2**31, -2**31), (D.UINT32, 2**32 - 1, 2**32 - 1)):
        t = T(dt, (1,))
        a = np.array([x], NP[dt])
        assert run(device, gm.ElementWiseMeanDesc(t, t, t), [a, a])[0] == want
    t = T(D.INT32, (3,))
    got = run(device, gm.ElementWiseMeanDesc(t, t, t), [np.array([-2, -1, -3], np.int32), np.array([-3, -2, -4],
                                                                                                     np.int32)])
    np.testing.assert_array_equal(got, [-2, -1, -3])   # -2.5, -1.5, -3.5 truncate toward zero


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("seed", [0, 1])
def test_mean_random_exact(device, dt, seed):
    a, b = random_data(dt, (3, 5, 67), seed), random_data(dt, (3, 5, 67), seed + 100)
    t = T(dt, a.shape)
    got = run(device, gm.ElementWiseMeanDesc(t, t, t), [a, b])
    assert oracle.equal_bits(got, oracle.mean2(a, b, NP[dt]))


def test_mean_subnormal_halving(device):
    # |a + b| < 2^-125: the sum is exact and the halving rounds once, to even
    v = np.array([1.4e-45, 2.8e-45, 4.2e-45, -1.4e-45, 1e-38], np.float32)
    a, b = np.meshgrid(v, v, indexing="ij")
    t = T(D.FLOAT32, a.shape)
    got = run(device, gm.ElementWiseMeanDesc(t, t, t), [a, b])
    assert oracle.equal_bits(got, oracle.mean2(a, b, np.float32))


LAYOUTS = {
    # name: (sizes, a strides, b strides, out strides)
    "broadcast_row": ((4, 3, 5), (0, 5, 1), None, None),
    "broadcast_col": ((4, 3, 5), (15, 1, 0), (0, 0, 1), None),
    "padded": ((4, 3, 5), (24, 8, 1), (16, 5, 1), (30, 10, 2)),
    "permuted": ((4, 3, 5), (1, 20, 4), (15, 1, 3), (1, 4, 12)),
    "scalar_broadcast": ((2, 3, 4, 5), (0, 0, 0, 0), None, None),
    "eight_dims": ((2, 1, 3, 1, 2, 2, 1, 3), None, (0, 36, 12, 12, 6, 3, 3, 1), None),
    "one_dim": ((1000,), (2,), None, None),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_mean_strided_layouts(device, layout, dt):
    sizes, sa, sb, so = LAYOUTS[layout]
    ta, tb, to = T(dt, sizes, sa), T(dt, sizes, sb), T(dt, sizes, so)
    a, b = random_data(dt, sizes, 7), random_data(dt, sizes, 8)
    a = np.ascontiguousarray(np.broadcast_to(a[tuple(slice(0, 1) if s == 0 else slice(None)
                                                     for s in ta.effective_strides)], sizes))
    b = np.ascontiguousarray(np.broadcast_to(b[tuple(slice(0, 1) if s == 0 else slice(None)
                                                     for s in tb.effective_strides)], sizes))
    got = run(device, gm.ElementWiseMeanDesc(ta, tb, to), [a, b])
    assert oracle.equal_bits(got, oracle.mean2(a, b, NP[dt]))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_mean_in_place_and_offsets(device, dt):
    from helpers import upload
    t = T(dt, (7, 9))
    a, b = random_data(dt, t.sizes, 3), random_data(dt, t.sizes, 4)
    A, B = upload(device, t, a, pad=48), upload(device, t, b, pad=16)
    cop = device.compile_operator(device.create_operator(gm.ElementWiseMeanDesc(t, t, t)))
    ba = gm.BufferBinding(A, 48, t.total_size_in_bytes)
    cop.execute(inputs=[ba, gm.BufferBinding(B, 16, t.total_size_in_bytes)], outputs=[ba])
    assert oracle.equal_bits(A.read_tensor(t, 48), oracle.mean2(a, b, NP[dt]))


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_add(device, dt):
    a, b = extremes_pairs(dt)
    t = T(dt, a.shape)
    got = run(device, gm.ElementWiseAddDesc(t, t, t), [a, b])
    assert oracle.equal_bits(got, oracle.add2(a, b, NP[dt]))
    a, b = random_data(dt, (5, 33), 11), random_data(dt, (5, 33), 12)
    t = T(dt, a.shape)
    got = run(device, gm.ElementWiseAddDesc(T(dt, (5, 33), (1, 5)), t, t), [a, b])
    assert oracle.equal_bits(got, oracle.add2(a, b, NP[dt]))


@pytest.mark.parametrize("dt", [D.INT8, D.UINT16, D.INT64, D.UINT64, D.INT16, D.UINT8], ids=lambda d: d.name)
def test_add_and_identity_other_integers(device, dt):
    from gpu_mean.descriptors import tables
    if dt not in tables.support_row(tables.ELEMENT_WISE_ADD, device.feature_level)[2]:
        pytest.skip(f"ADD takes {dt.name} from a higher feature level than {device.feature_level.label}")
    npt = dt.numpy_dtype
    info = np.iinfo(npt)
    rng = np.random.default_rng(5)
    a = rng.integers(info.min, info.max, (3, 17), dtype=npt, endpoint=True)
    b = rng.integers(info.min, info.max, (3, 17), dtype=npt, endpoint=True)
    a[0, 0], b[0, 0] = info.max, info.max
    t = T(dt, a.shape)
    assert oracle.equal_bits(run(device, gm.ElementWiseAddDesc(t, t, t), [a, b]), oracle.add2(a, b, npt))
    tt = T(dt, (17, 3), (1, 17))
    np.testing.assert_array_equal(run(device, gm.ElementWiseIdentityDesc(tt, T(dt, (17, 3))), [a.T]), a.T)


@pytest.mark.parametrize("dt", [D.FLOAT32, D.FLOAT16], ids=lambda d: d.name)
def test_identity_scale_bias(device, dt):
    x = random_data(dt, (4, 25), 9)
    x[0, :6] = [np.inf, -np.inf, np.nan, 0, -0.0, 1]
    t = T(dt, x.shape)
    sb = gm.ScaleBias(0.3333333, 1.5)
    got = run(device, gm.ElementWiseIdentityDesc(t, t, sb), [x])
    s, bias = np.float32(sb.scale), np.float32(sb.bias)
    want = np.empty_like(x)
    for idx in np.ndindex(x.shape):
        v = x[idx]
        if not np.isfinite(v):
            want[idx] = np.float32(v) * s + bias
            continue
        p = oracle.round_fraction(oracle.exact(v) * oracle.exact(s), np.float32)
        want[idx] = oracle.round_fraction(oracle.exact(p) + oracle.exact(bias), x.dtype) if np.isfinite(p) else p
    assert oracle.equal_bits(got, want)


def test_identity_copy_float64(device):
    if not device.info.fp64:
        pytest.skip("no fp64 on this device")
    x = np.random.default_rng(1).standard_normal((3, 4))
    t = T(D.FLOAT64, x.shape)
    np.testing.assert_array_equal(run(device, gm.ElementWiseIdentityDesc(T(D.FLOAT64, (3, 4), (1, 3)), t), [x]), x)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("n", [1, 3, 7])
def test_nary_mean(device, dt, n):
    xs = [random_data(dt, (5, 41), 20 + i) for i in range(n)]
    if dt.is_float:
        xs = [np.abs(x) for x in xs]
    t = T(dt, (5, 41))
    ins = [T(dt, (5, 41), (0, 1)) if i == 1 else t for i in range(n)]
    if n > 1:
        xs[1] = np.ascontiguousarray(np.broadcast_to(xs[1][:1], (5, 41)))
    got = run(device, gm.ext.NaryMeanDesc(ins, t), xs)
    for idx in np.ndindex(t.sizes):
        vals = [x[idx] for x in xs]
        if dt.is_float:
            want = oracle.round_fraction(sum(oracle.exact(v) for v in vals) / n, NP[dt])
            assert oracle.equal_bits(got[idx], NP[dt](want)), (idx, got[idx], want)   # correctly rounded
        else:
            s = sum(int(v) for v in vals)
            assert got[idx] == abs(s) // n * (1 if s >= 0 else -1)


def test_nary_mean_integer_extremes(device):
    t = T(D.INT32, (2,))
    xs = [np.array([2**31 - 1, -2**31], np.int32)] * 5
    np.testing.assert_array_equal(run(device, gm.ext.NaryMeanDesc([t] * 5, t), xs), [2**31 - 1, -2**31])
    tu = T(D.UINT32, (1,))
    assert run(device, gm.ext.NaryMeanDesc([tu] * 3, tu), [np.array([2**32 - 1], np.uint32)] * 3)[0] == 2**32 - 1


def test_large_1d_fast_path(device):
    n = (1 << 20) + 3   # not a multiple of the vector width
    a, b = random_data(D.FLOAT32, (n,), 1), random_data(D.FLOAT32, (n,), 2)
    t = T(D.FLOAT32, (n,))
    got = run(device, gm.ElementWiseMeanDesc(t, t, t), [a, b])
    with np.errstate(over="ignore"):
        s = a.astype(np.float64) + b.astype(np.float64)
    want = (s / 2).astype(np.float32)    # float64 then float32: innocuous double rounding (53 >= 2*24+2)
    assert oracle.equal_bits(got, want)


# FLOAT16 arithmetic runs 16 lanes wide on CPU OpenCL devices and the inputs are prefetched when
# dense or in long rows: lengths around the vector and work-item sizes, broadcast rows with a
# vector body and a tail, and rows long enough for the prefetch (named, seeded)
F16_WIDE_CASES = {
    "len_1": ((1,), None), "len_15": ((15,), None), "len_16": ((16,), None), "len_17": ((17,), None),
    "len_63": ((63,), None), "len_65": ((65,), None), "len_4099": ((4099,), None),
    "rows_broadcast_100": ((7, 100), (0, 1)),
    "rows_broadcast_long": ((3, 40000), (0, 1)),
}


@pytest.mark.parametrize("case", sorted(F16_WIDE_CASES))
@pytest.mark.parametrize("op", ["mean", "add", "scale_bias"])
def test_fp16_wide_vectors_and_prefetch(device, case, op):
    shape, b_strides = F16_WIDE_CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    a = random_data(D.FLOAT16, shape, 3)
    a.flat[:: 7] = np.float16(65504)                      # overflow candidates and subnormals mixed in
    a.flat[3:: 11] = np.float16(6e-08)
    b = np.ascontiguousarray(np.broadcast_to(random_data(D.FLOAT16, shape, 4)[:1], shape)) if b_strides \
        else random_data(D.FLOAT16, shape, 4)
    t, tb = T(D.FLOAT16, shape), T(D.FLOAT16, shape, b_strides)
    if op == "mean":
        got = run(device, gm.ElementWiseMeanDesc(t, tb, t), [a, b])
        assert oracle.equal_bits(got, oracle.mean2(a, b, np.float16))
        return
    if op == "add":
        desc, ins = gm.ElementWiseAddDesc(t, tb, t), [a, b]
    else:
        sb = gm.ScaleBias(float(rng.choice([0.3333333, 3.0, -1.25])), float(rng.choice([0.0, 1.5, -7.0])))
        desc, ins = gm.ElementWiseIdentityDesc(t, t, sb), [a]
    # the CPU device is the reference (its float16 arithmetic is tested against the oracle above)
    assert oracle.equal_bits(run(device, desc, ins), run(gm.create_device("cpu"), desc, ins))


# FLOAT16 inputs whose double mean, rounded to float32 first, lands on a half tie and then rounds the
# other way (found by search over random bit patterns): the one rounding to half must go straight
# from the wide mean (the CPU-shaped kernels go through float rounded to odd to get there fast)
DOUBLE_ROUNDING = {3: [(62356, 60031, 36602), (61734, 35807, 26489), (62712, 26677, 35426), (35104, 60317, 56366)],
                   4: [(33344, 62355, 27493, 28479), (33827, 30975, 37562, 27112), (24910, 60995, 34525, 28627),
                       (57412, 2638, 61138, 36244)]}


@pytest.mark.parametrize("n", sorted(DOUBLE_ROUNDING))
def test_nary_float16_mean_rounds_once(device, n):
    if not device.info.fp64:
        pytest.skip("without fp64 the sum is a compensated float pair, rounded to float before half: "
                    "not one rounding (correct rounding everywhere is issue 22)")
    cases = np.array(DOUBLE_ROUNDING[n], np.uint16).T                       # (n, cases)
    # 64 lanes per input, so the vector paths run; each case at several positions
    bits = np.tile(cases, (1, 64 // cases.shape[1] + 1))[:, :64].copy()
    xs = [b.view(np.float16).reshape(4, 16) for b in bits]
    t = T(D.FLOAT16, (4, 16))
    got = run(device, gm.ext.NaryMeanDesc([t] * n, t), xs)
    wide = sum(x.astype(np.float64) for x in xs) / n                     # exact sum, one division
    want = wide.astype(np.float16)                                        # numpy: one rounding to half
    assert not np.array_equal(wide.astype(np.float32).astype(np.float16), want)   # the trap is real
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
