"""gpu_mean.dask's exact double-double partials (issue 43; docs/design.md, "Dask: exact double-double
partials"): an OpenCL CPU device sums a float chunk in one pass (opencl_kernels/reduce_cpu_ddp.h,
``Device.dd_partials``) into pairs h + c that are each output's exact total or flagged; flagged
outputs, and pairs whose sum could err when partials combine, go to the digits. Every claim is
checked against exact rationals (``fractions.Fraction``) and the oracle's bits, on named, seeded data."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_correct_rounding import BF16, adversarial_matrix, as_type, check_bits, want_reduce

import gpu_mean as gm
from gpu_mean.frontends.arrays import data_type_of
from gpu_mean.runtime import exact

NARROW = [np.dtype(np.float32), np.dtype(np.float16), BF16]
IDS = ["float32", "float16", "bfloat16"]
UNIT = {np.dtype(np.float32): -149, np.dtype(np.float16): -24, BF16: -133}
# (shape, reduced axes): columns (inner a multiple of 8), rows (8 lanes and a tail of 5), every axis,
# a middle axis, the tall (rows, 16) chunk, columns of 1024 + 8 (a work-item's last, short tile); the
# GPU shape's alone (a work-item a column): an inner size of 5, rows of 3, rows of 1100 (several
# segments of 256 rows at least); rows of 100 (GPU: a work-item a row, no lanes below 256 values)
LAYOUTS = [((300, 64), (0,)), ((5, 1029), (1,)), ((40, 72), (0, 1)), ((3, 200, 16), (1,)), ((4100, 16), (0,)),
           ((70, 1032), (0,)), ((37, 5), (0,)), ((9, 3), (1,)), ((2, 1100, 3), (1,)), ((6, 100), (1,))]


def exact_totals(x: np.ndarray, axes) -> list:
    f = exact.fmt(x.dtype)
    return [Fraction(t) * Fraction(2) ** UNIT[x.dtype]
            for t in exact.to_ints(exact.limbs(x, axes, x.dtype).reshape(f.digits, -1))]


def named(dt, shape, rng) -> np.ndarray:
    """Normal values and, in the first four columns of the array seen as (-1, last axis): values near
    the largest beside a subnormal (FLOAT32, BFLOAT16: no pair holds them, flagged), an inf (flagged),
    -0.0 alone (h -0.0), +0.0 with -0.0 (h +0.0); in the last column values 30 binades apart
    (FLOAT32: 2^30 and 1 + 2^-23, a block's plain sum inexact, the pair exact)."""
    x = as_type(rng.standard_normal(shape), dt)
    cols = x.reshape(-1, shape[-1])
    if shape[-1] < 8 or cols.shape[0] < 4:
        return x
    big = float(np.finfo(np.float16 if dt == np.float16 else np.float32).max)
    cols[:, 0] = as_type(np.resize([big / 2, -big / 2, 3.0], cols.shape[0]), dt)
    cols[1, 0] = as_type(np.array([2.0 ** -20 if dt == np.float16 else 1e-40]), dt)[0]
    cols[2, 1] = np.inf
    cols[:, 2] = -0.0
    cols[:, 3] = np.where(np.arange(cols.shape[0]) % 2, 0.0, -0.0).astype(x.dtype)
    # the last column, in a vector of 8 columns without the others (the proof is a vector's)
    cols[:, -1] = as_type(np.resize([2.0 ** 30, 1 + 2.0 ** -23] if dt == np.float32 else [2.0 ** 10, 1 + 2.0 ** -7],
                                    cols.shape[0]), dt)
    return x


@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_pairs_are_the_exact_totals_or_flagged(device_or_checked, dt):
    dev = device_or_checked
    rng = np.random.default_rng(43)
    for shape, axes in LAYOUTS:
        x = named(dt, shape, rng)
        got = dev.dd_partials(x, axes, data_type_of(x.dtype, "test"))
        if not _has_pairs(dev, x.shape, axes):
            assert got is None, (shape, axes)          # the digits' path then (exact_partials)
            continue
        assert got is not None, (shape, axes)
        h, c, flagged = got
        kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
        assert h.shape == c.shape == flagged.shape == kept
        totals = exact_totals(x, axes)
        for k, (hk, ck, fk) in enumerate(zip(h.ravel(), c.ravel(), flagged.ravel())):
            if not fk:
                assert Fraction(hk) + Fraction(ck) == totals[k], (shape, axes, k)
        if shape[-1] >= 8 and axes == (0,):
            # columns: the named ones (kept in the reshaped first row of columns)
            f = flagged.reshape(-1, shape[-1])[0]
            assert f[1], "an inf: flagged"
            assert f[0] == (dt != np.float16), "a subnormal among the largest values (FLOAT16: 48 bits, exact)"
            assert not f[2] and not f[3] and not f[-1]
            hz = h.reshape(-1, shape[-1])[0]
            assert hz[2] == 0 and np.signbit(hz[2]) and hz[3] == 0 and not np.signbit(hz[3])


def test_unsupported_layouts_give_none(device):
    """Reduced axes that are not one block of neighbours: the digits' path (None); on the CPU shape
    also an inner size neither 1 nor a multiple of 8, rows shorter than 8."""
    x = np.ones((4, 6, 3), np.float32)
    dt = data_type_of(x.dtype, "test")
    assert device.dd_partials(x, (0, 2), dt) is None
    for axes in ((0,), (2,)):       # the GPU shape takes them (a work-item a column; a short row of lanes)
        got = device.dd_partials(x, axes, dt)
        assert (got is None) == (not _has_pairs(device, x.shape, axes))
        if got is not None:
            assert np.array_equal(got[0], np.sum(x, axis=axes, keepdims=True)) and not got[1].any()
    assert (device.dd_partials(np.ones((4, 8), np.float32), (0,), dt) is None) == (not _has_pairs(device))


def test_a_reduced_axis_of_one_gives_the_values(device):
    """No reduced axis past size 1 (a chunk one row deep): each total is its one value, exactly, a
    -0.0 kept, an inf flagged (its digits carry the flag)."""
    x = np.array([[[1.5, -0.0, 3e38, np.inf, 2.0 ** -140, -7.25]]], np.float32).reshape(2, 1, 3)
    got = device.dd_partials(x, (1,), data_type_of(x.dtype, "test"))
    if not _has_pairs(device):
        assert got is None
        return
    h, c, flagged = got
    assert h.shape == (2, 1, 3) and not c.any()
    assert np.array_equal(h[~flagged], x.astype(np.float64)[~flagged])
    assert list(flagged.ravel()) == [False, False, False, True, False, False]
    assert h[0, 0, 1] == 0 and np.signbit(h[0, 0, 1])


def test_a_chunk_past_one_buffer_takes_the_digits(device):
    """A Device whose largest buffer is lowered below the chunk: no pairs (exact_partials cuts the chunk
    into pieces), and gpu_mean.dask's result is still the oracle's."""
    small = gm.Device(device.backend, device.feature_level, max_alloc_bytes=4096)
    x = as_type(np.random.default_rng(3).standard_normal((256, 16)), np.dtype(np.float32))
    dt = data_type_of(x.dtype, "test")
    assert (device.dd_partials(x, (0,), dt) is None) == (not _has_pairs(device))
    assert small.dd_partials(x, (0,), dt) is None
    assert (small.dd_partials(x[:32], (0,), dt) is None) == (not _has_pairs(device))
    partials = _partials()
    got = partials.finish(partials.chunk_sum(x, (0,), device=small), np.float32)
    check_bits(got, want_reduce(x, (0,), np.dtype(np.float32)), "a chunk past one buffer")


def _has_pairs(dev, shape=None, axes=None) -> bool:
    """Whether ``dev`` has the double-double partials (an OpenCL or CUDA device with fp64), for the
    layout (shape, axes) when given: one block of reduced axes; on the CPU shape an inner size of 1
    (rows of 8 values at least) or a multiple of 8."""
    if dev.info.backend == "cpu" or not dev.info.fp64:
        return False
    if shape is None or not dev.backend.cpu_shaped:
        return True
    inner = int(np.prod(shape[max(axes) + 1:]))
    return inner % 8 == 0 or (inner == 1 and int(np.prod([shape[a] for a in axes])) >= 8)


@pytest.mark.parametrize("fold", [False, True], ids=["numpy-adds", "device-adds"])
@pytest.mark.parametrize("dt", NARROW, ids=IDS)
def test_dask_chunks_on_the_device_give_the_oracles_bits(device, dt, fold, monkeypatch):
    """gpu_mean.dask over columns, rows and a middle axis at several chunkings and fan-ins: the
    oracle's bits; on an OpenCL CPU device the double-double partials are taken, and the adversarial
    rows send some outputs to the digits (both counted). ``device-adds``: the combine and aggregate
    add the pairs (and round FLOAT32 means) on the device at any size (``partials._fold_dd``)."""
    da = pytest.importorskip("dask.array")
    import gpu_mean.dask as gmd
    from gpu_mean.dask import partials
    if fold:
        monkeypatch.setattr(partials, "FOLD_MIN_OUTPUTS", 1)
    rng = np.random.default_rng(431)
    x = np.ascontiguousarray(adversarial_matrix(dt, rng).T)             # (240 values, outputs)
    x = np.concatenate([x, as_type(rng.standard_normal((240, 64 - x.shape[1] % 8 + 8)), dt)], axis=1)
    want0 = want_reduce(x, (0,), dt)
    before = dict(partials.stats)
    for chunks, every in (((240, x.shape[1]), None), ((64, 16), 2), ((17, 24), 3), ((100, 8), None)):
        got = gmd.reduce_mean(da.from_array(x, chunks=chunks), [0], device=device,
                              split_every=every).compute(scheduler="synchronous")
        check_bits(got, want0, f"{dt} columns, chunks {chunks}, split_every={every}")
    xt = np.ascontiguousarray(x.T)
    for chunks in ((x.shape[1], 240), (9, 77), (16, 33)):
        got = gmd.reduce_mean(da.from_array(xt, chunks=chunks), [1], device=device).compute(scheduler="synchronous")
        check_bits(got, want0.T, f"{dt} rows, chunks {chunks}")
    x3 = x[:, :64].reshape(240, 8, 8).transpose(1, 0, 2).copy()          # (8, 240, 8) over the middle axis
    got = gmd.reduce_mean(da.from_array(x3, chunks=(3, 50, 8)), [1], device=device).compute(scheduler="synchronous")
    check_bits(got, want_reduce(x3, (1,), dt), f"{dt} middle axis")
    dd, digits = partials.stats["dd_chunks"] - before["dd_chunks"], partials.stats["dd_digits"] - before["dd_digits"]
    if _has_pairs(device):
        assert dd > 0 and digits > 0, (dd, digits)
    else:
        assert dd == 0
    assert (partials.stats["folded"] > before["folded"]) == (fold and _has_fold(device))


def _partials():
    """gpu_mean.dask.partials (its package imports Dask: the minimal install skips these tests)."""
    pytest.importorskip("dask.array")
    from gpu_mean.dask import partials
    return partials


def _pair(h, c, of=np.float32, count=2):
    PartialSum = _partials().PartialSum
    return PartialSum(np.array([h], np.float64), np.array([c], np.float64), count, False, None, None, np.dtype(of),
                      True, None)


def test_pairs_whose_sum_could_err_combine_in_digits():
    """Two exact pairs whose error-free sum would round (1 + 2^-80 beside 2^60) are added in digits:
    the total and the mean stay exact; a pair sum that cannot err stays a pair."""
    partials = _partials()
    p, q = _pair(1.0, 2.0 ** -80), _pair(2.0 ** 60, 0.0)
    s = partials.add(p, q)
    assert s.sparse is not None and list(s.sparse[0]) == [0]
    total = exact.to_ints(s.sparse[1])[0] * Fraction(2) ** -149
    assert total == 1 + Fraction(2) ** -80 + 2 ** 60
    assert partials.finish(s, np.float32)[0] == np.float32(float((1 + Fraction(2) ** -80 + 2 ** 60) / 4))
    t = partials.add(_pair(3.0, 2.0 ** -60), _pair(5.0, 0.0))
    assert t.sparse is None and Fraction(t.hi[0]) + Fraction(t.lo[0]) == 8 + Fraction(2) ** -60


def test_an_exact_tie_and_a_zero_total_round_from_pairs():
    """Totals that settle_dd leaves (a zero, -0.0 alone) and an exact tie, decided exactly."""
    partials = _partials()
    tie = _pair(2.0 + 2.0 ** -23, 0.0)          # mean 1 + 2^-24: halfway, ties to even -> 1.0
    assert partials.finish(tie, np.float32)[0] == np.float32(1.0)
    up = _pair(2.0 + 3 * 2.0 ** -23, 0.0)       # 1 + 1.5 ulp: halfway up from the odd 1 + 2^-23 -> 1 + 2^-22
    assert partials.finish(up, np.float32)[0] == np.float32(1 + 2.0 ** -22)
    # 2^30 + 1 values whose mean is 1 + 2^-24 (halfway) plus or minus 2^-40 / n: the double quotient
    # fl(fl(h + c) / n) is the midpoint itself, so only the pair's exact sign decides
    n, h = (1 << 30) + 1, 2.0 ** 30 + 2.0 ** 6 + 1.0            # n (1 + 2^-24) = h + 2^-24
    assert partials.finish(_pair(h, 2.0 ** -24, count=n), np.float32)[0] == np.float32(1.0)
    assert partials.finish(_pair(h, 2.0 ** -24 + 2.0 ** -40, count=n), np.float32)[0] == np.float32(1 + 2.0 ** -23)
    assert partials.finish(_pair(h, 2.0 ** -24 - 2.0 ** -40, count=n), np.float32)[0] == np.float32(1.0)
    z = partials.finish(_pair(-0.0, 0.0), np.float32)[0]
    assert z == 0 and np.signbit(z)
    z = partials.finish(_pair(0.0, 0.0), np.float32)[0]
    assert z == 0 and not np.signbit(z)


def test_a_cpu_devices_digits_and_pairs_add(device):
    """A cluster whose workers resolved different devices: the CPU device's digits and a device's
    pairs add exactly (the pairs as digits)."""
    partials = _partials()
    rng = np.random.default_rng(7)
    f32 = np.dtype(np.float32)
    x = np.ascontiguousarray(adversarial_matrix(f32, rng).T)             # (240 values, outputs): ties, cancelling
    x = x[:, :x.shape[1] // 8 * 8]
    a = partials.chunk_sum(x[:120], (0,), device="cpu")
    b = partials.chunk_sum(x[120:], (0,), device=device)
    got = partials.finish(partials.add(a, b), np.float32)
    check_bits(got, want_reduce(x, (0,), f32), "cpu digits + device pairs")


def test_a_pair_partial_sends_16_bytes_an_output(device):
    """README: on an OpenCL CPU device a float32 chunk's partial is two doubles an output (hi, lo), with
    digits only for the outputs a pair cannot hold (none in normal data)."""
    partials = _partials()
    x = as_type(np.random.default_rng(11).standard_normal((512, 1024)), np.dtype(np.float32))
    p = partials.chunk_sum(x, (0,), device=device)
    if not _has_pairs(device):
        assert not p.exact_dd and p.digits is not None
        return
    assert p.exact_dd and p.sparse is None and p.digits is None
    assert p.hi.dtype == p.lo.dtype == np.float64 and p.hi.nbytes + p.lo.nbytes == 16 * 1024


def test_f64_limbs_are_exact():
    rng = np.random.default_rng(5)
    for dt in NARROW:
        q = 2.0 ** UNIT[dt]
        v = np.concatenate([np.round(rng.standard_normal(50) * 2.0 ** rng.integers(-30, 40, 50) / q) * q,
                            [0.0, -0.0, q, -q, 2.0 ** 100 if dt != np.float16 else 2.0 ** 40]])
        d = exact.f64_limbs(v, dt)
        for val, t in zip(v, exact.to_ints(d)):
            assert Fraction(val) == t * Fraction(2) ** UNIT[dt]


def test_many_outputs_go_by_blocks(device):
    """Pair sums and the rounding run over blocks of wide.BLOCK outputs (Dask's workers serve larger
    temporaries by fresh mmaps): the blocked pair sum is the one-pass sum bit for bit (strided views,
    a scalar tail), and a chunked mean of more than three blocks of outputs, the oracle's bits, with
    the adversarial columns (ties, cancelling values) first and in the last, partial block."""
    partials = _partials()
    from gpu_mean.runtime import wide
    rng = np.random.default_rng(4301)
    n = 3 * wide.BLOCK + 16
    h3 = rng.standard_normal((n, 2)) * np.float64(2.0) ** rng.integers(-40, 40, (n, 2))
    c = rng.standard_normal(n) * 2.0 ** -60
    c[::7] = 2.0 ** -200                               # pair sums that err: flagged
    whole = wide._dd_add_exact(h3[:, 0], c, h3[:, 1], 0.0)
    got = wide.dd_add_exact(h3[:, 0], c, h3[:, 1], 0.0)
    for w, g in zip(whole, got):
        assert w.shape == g.shape == (n,) and np.array_equal(w.view(np.uint8), g.view(np.uint8))
    assert whole[2].any() and not whole[2].all()
    f32 = np.dtype(np.float32)
    adv = np.ascontiguousarray(adversarial_matrix(f32, rng).T)           # (240 values, outputs)
    x = as_type(rng.standard_normal((240, n)), f32)
    k = adv.shape[1] // 2
    x[:, :k], x[:, n - (adv.shape[1] - k):] = adv[:, :k], adv[:, k:]
    p = partials.combine_sums([partials.chunk_sum(x[a:a + 80], (0,), device=device) for a in (0, 80, 160)], (0,))
    check_bits(partials.finish(p, f32).reshape(-1), want_reduce(x, (0,), f32).reshape(-1), "by blocks")


@pytest.mark.parametrize("n", [1, 2, 3, 8, 11, 37, 64])
def test_pairs_add_along_an_axis_exactly(n):
    """Segments' and lanes' pairs added along an axis (wide.dd_add_exact_along): a few one after
    another, more pairwise a level at a time, the odd one out of a level kept for the next: every
    unflagged total is the exact sum (fractions), a flag anywhere along the axis or an erring
    addition flags the output."""
    from gpu_mean.runtime import wide
    rng = np.random.default_rng(4302 + n)
    # chunk totals as the kernels leave them: float32 values' sums, a few with a tail
    h = rng.standard_normal((4, n, 3)).astype(np.float32).astype(np.float64) * 2.0 ** 10
    c = np.where(rng.random((4, n, 3)) < 0.3, rng.integers(-8, 8, (4, n, 3)) * 2.0 ** -40, 0.0)
    bad = np.zeros((4, n, 3), bool)
    bad[0, n - 1, 0] = True                               # the last segment's flag (the odd one out)
    h[1, n - 1, 1], c[1, n - 1, 1] = 2.0 ** 80, 2.0 ** -200   # an addition that must err (n > 1)
    gh, gc, gb = wide.dd_add_exact_along(h, c, bad, 1)
    assert gh.shape == gc.shape == gb.shape == (4, 3)
    assert gb[0, 0]
    assert gb[1, 1] == (n > 1)                  # alone it is a pair like any other
    for i in range(4):
        for j in range(3):
            if not gb[i, j]:
                assert Fraction(gh[i, j]) + Fraction(gc[i, j]) == sum(Fraction(h[i, k, j]) + Fraction(c[i, k, j])
                                                                      for k in range(n)), (i, j)
    assert (~gb).sum() >= 12 - 2


def _has_fold(dev) -> bool:
    """Whether ``dev`` adds pairs itself (gm_dd_fold: a CPU-shaped OpenCL device with fp64 in host memory)."""
    be = dev.backend
    return (dev.info.backend == "opencl" and dev.info.fp64 and be.cpu_shaped
            and getattr(be.arrays, "host_memory", False))


def _fold_named(rng, n: int, k: int):
    """k pairs of n outputs and a count, named columns first: a mean exactly at a FLOAT32 midpoint (a
    tie: never settled), one 2^-47 inside it (past the margin: settled), heads cancelling near DBL_MAX
    (their TwoSum overflows: flagged), an inf, a NaN, -0.0 alone (a zero mean), a mean below 2^-1000, a
    mean past FLT_MAX, a pair whose c does not fit beside h (1 + 2^-80 beside 2^60: flagged), a mean
    2^-51 inside a midpoint (within the 2^-50 margin: open); the rest totals of float32 values, c a few
    bits far below h."""
    count = 24 * k
    hs = [np.round(rng.standard_normal(n) * 2.0 ** 20) * 2.0 ** -10 for _ in range(k)]
    cs = [np.where(rng.random(n) < 0.5, 0.0, np.round(rng.standard_normal(n) * 2.0 ** 8) * 2.0 ** -50)
          for _ in range(k)]
    mid = float(np.float32(1.5)) + 2.0 ** -24         # halfway between two FLOAT32 neighbours of 1.5
    named = [
        [mid * count] + [0.0] * (k - 1),
        [mid * count] + [0.0] * (k - 1),
        [1.7e308, 1.7e308] + [0.0] * (k - 2),
        [np.inf] + [1.0] * (k - 1),
        [np.nan] + [1.0] * (k - 1),
        [-0.0] * k,
        [2.0 ** -1010] + [0.0] * (k - 1),
        [3.5e38 * count] + [0.0] * (k - 1),
        [2.0 ** 60, 1.0] + [0.0] * (k - 2),
        [mid * count] + [0.0] * (k - 1),
    ]
    for j, col in enumerate(named):
        for i in range(k):
            hs[i][j], cs[i][j] = (col[i] if i < len(col) else 0.0), 0.0
    if k > 1:
        cs[1][8] = 2.0 ** -80
    cs[0][1] = -(2.0 ** -47) * count      # q 2^-47 inside the midpoint: past the margin, settled
    cs[0][9] = -(2.0 ** -51) * count      # q 2^-51 inside the midpoint: in the margin, open
    return hs, cs, count


@pytest.mark.parametrize("n, k", [(4099, 2), (4096, 1), (1000, 5), (4104, 16)])
def test_the_device_adds_pairs_and_settles_means_as_numpy_does(device_or_checked, n, k):
    """gm_dd_fold against numpy's adds (``wide.dd_add_exact`` in the partials' order) and
    ``exact.settle_near``: the same flags, the same pairs wherever no add could err, the same settled
    means, and the named columns where numpy's test leaves them open left open too."""
    from gpu_mean.runtime import wide
    dev = device_or_checked
    hs, cs, count = _fold_named(np.random.default_rng(n + k), n, k)
    got = dev.dd_fold(hs, cs, count)
    if not _has_fold(dev):
        assert got is None
        return
    h, c, flag, means = got
    wh, wc, bad = hs[0].copy(), cs[0].copy(), np.zeros(n, bool)
    for xh, xc in zip(hs[1:], cs[1:]):
        wh, wc, b = wide.dd_add_exact(wh, wc, xh, xc)
        bad |= b
    np.testing.assert_array_equal((flag & 1) != 0, bad)
    ok = ~bad
    np.testing.assert_array_equal(h[ok].view(np.int64), wh[ok].view(np.int64))
    np.testing.assert_array_equal(c[ok].view(np.int64), wc[ok].view(np.int64))
    wm, wok = exact.settle_near(wh, wc, count, np.float32)
    settled = (flag & 2) != 0
    np.testing.assert_array_equal(settled, wok & ok)
    np.testing.assert_array_equal(means[settled].view(np.int32), wm[settled].view(np.int32))
    named_open = [0, 2, 3, 4, 5, 6, 7, 9] + ([8] if k > 1 else [])
    assert not settled[named_open].any(), np.flatnonzero(settled[named_open])
    assert settled[1] and means[1] == np.float32(1.5)
    assert settled.mean() > 0.9
    if k > 1:
        assert bad[[2, 3, 4]].all()
    h2, c2, flag2, _ = dev.dd_fold(hs, cs, 0)            # a combine: no means
    np.testing.assert_array_equal(flag2 & 2, 0)
    np.testing.assert_array_equal(h2[ok].view(np.int64), wh[ok].view(np.int64))
