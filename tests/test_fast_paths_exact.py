"""The fast paths of issue 24 (reduction speed on the CPU shape) against the exact mean, on every
device. FLOAT16 REDUCE AVERAGE of at most 2^13 values per output with fp64 takes no bound test, no flags
and no exact pass (reduce_kernels.f16_direct, issue 24; it was 2^11): the FLOAT64 sum is exact and
its quotient, rounded once to half, is the correctly rounded mean. The rows here put the exact mean
2^-24 / n beside a half's midpoint, or on it, at the largest magnitudes (binade 2^15, where the
quotient's own rounding comes closest). FLOAT32 rows of 8: blocks of eight rows whose FLOAT64 sums
are exact are decided by one rounding (reduce_cpu_short.h: gm_rows_exact), the others by the bound test and
the exact pass."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.kernels import reduce_kernels

T = gm.TensorDesc
TINY = 2.0 ** -24       # the smallest half


def _near_midpoints(rng, n: int, binades=(15, 14, 0, -10)) -> tuple[np.ndarray, np.ndarray]:
    """Rows of n (even) halves whose exact sum is n * mid + r, mid the midpoint between two adjacent
    halves lo < hi of the binade 2^k, r in (-2^-24, 0, 2^-24): a copies of hi, b of lo and r itself
    (a = n/2 + lo/ulp makes the sum n*lo + n*ulp/2 + r). The mean rounds to hi for r > 0, to lo for
    r < 0, to the even one of them for r = 0. Rows negated too, each row shuffled. Returns the rows
    and the expected means."""
    rows, want = [], []
    for k in binades:
        ulp = 2.0 ** (k - 10)
        top = min(1022, n // 2 - 1025)      # lo / ulp = 1024 + m; a = n/2 + 1024 + m <= n - 1; hi finite
        for m in rng.integers(0, top + 1, 4):
            lo = 2.0 ** k + m * ulp
            hi, a = lo + ulp, n // 2 + 1024 + int(m)
            for r in (TINY, -TINY, 0.0):
                row = np.array([hi] * a + [lo] * (n - 1 - a) + [r])
                mean = hi if r > 0 else lo if r < 0 else (lo if (1024 + m) % 2 == 0 else hi)
                for sign in (1.0, -1.0):
                    rows.append(rng.permutation(sign * row))
                    want.append(sign * mean)
    return np.array(rows).astype(np.float16), np.array(want).astype(np.float16)


def _mean_rows(device, x: np.ndarray) -> np.ndarray:
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, T(D.FLOAT16, x.shape), T(D.FLOAT16, (x.shape[0], 1)), (1,))
    return run(device, desc, [x]).reshape(-1)


@pytest.mark.parametrize("n", [2050, 4096, 8192])
def test_float16_means_beside_midpoints(device, n):
    """Every mean the correctly rounded one, bit for bit, against the construction and the exact
    oracle. A quotient rounded twice (double, then float, then half) gives the tie's even answer for
    every row of r = +-2^-24 in the binades 2^14 and 2^15 (their float ulp, 2^-9 and 2^-8, hides
    r / n); a sum in float loses r everywhere but the smallest binade."""
    x, want = _near_midpoints(np.random.default_rng(24 + n), n)
    got = _mean_rows(device, x)
    assert np.array_equal(oracle.reduce_mean(x, (1,), np.float16).reshape(-1).view(np.uint16), want.view(np.uint16))
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_float16_direct_limit_is_needed(device, monkeypatch):
    """The direct path's limit 2^13 keeps the FLOAT64 sum exact and the quotient's rounding below the
    distance to a midpoint: raised to 2^14, the same construction with rows of 2^14 in the binade 2^15
    (sum and quotient both meet a tie of their own rounding) gives wrong means, so the data above
    could catch a limit set too high. Devices whose kernels take the direct path only (OpenCL with fp64)."""
    if device.info.backend == "cpu" or not device.info.fp64:
        pytest.skip("the direct path is the OpenCL kernels' with fp64")
    n = 1 << 14
    x, want = _near_midpoints(np.random.default_rng(7), n, binades=(15,))
    monkeypatch.setattr(reduce_kernels, "F16_DIRECT", n)
    got = _mean_rows(device, x)
    assert not np.array_equal(got.view(np.uint16), want.view(np.uint16))
    monkeypatch.undo()
    assert np.array_equal(_mean_rows(device, x).view(np.uint16), want.view(np.uint16))


def _float32_rows_of_8() -> tuple[np.ndarray, np.ndarray]:
    """FLOAT32 rows [1] * 6 + [1 + 2^-22, t], eight rows per block with the same t = +-2^-e (e = 22..149,
    subnormals at the end) or 0: the sum 7 + 2^-22 + t puts the mean 0.875 + 2^-25 + t / 8 beside the
    midpoint of 0.875 and its successor (on it for t = 0: even, 0.875). A block spans e binades; up to
    24 the short-rows kernel decides it by one rounding of its FLOAT64 sums, from 25 on the bound test
    and the exact pass do; past 54 binades the FLOAT64 sum 7 + 2^-22 + t loses t, so a span test that
    let such blocks through would round them to the tie's even answer. Blocks of zeros beside the
    values, -0.0 rows, and rows of eight subnormals too."""
    rows, want = [], []
    base = np.array([1.0] * 6 + [1.0 + 2.0 ** -22, 0.0])
    up, down = np.float32(0.875) + np.float32(2.0 ** -24), np.float32(0.875)
    for e in range(22, 150):
        for sign in (1.0, -1.0):
            for _ in range(8):
                r = base.copy()
                r[7] = sign * 2.0 ** -e
                rows.append(r)
                want.append(up if sign > 0 else down)
    rows += [base] * 8
    want += [down] * 8
    rows += [np.full(8, -0.0)] * 8
    want += [np.float32(-0.0)] * 8
    sub = np.array([2.0 ** -149] * 7 + [2.0 ** -148])      # sum 9 * 2^-149: the mean 1.125 * 2^-149 rounds to 2^-149
    rows += [sub] * 8
    want += [np.float32(2.0 ** -149)] * 8
    return np.array(rows).astype(np.float32), np.array(want, np.float32)


def test_float32_rows_of_8_exact_blocks(device):
    """Every mean the correctly rounded one, bit for bit (the construction and the exact oracle agree);
    with gm_rows_exact's limit raised from 24 to 60 binades, the blocks of e = 55..60 round to even."""
    x, want = _float32_rows_of_8()
    assert np.array_equal(oracle.reduce_mean(x, (1,), np.float32).reshape(-1).view(np.uint32)[:-24],
                          want.view(np.uint32)[:-24])
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, T(D.FLOAT32, x.shape), T(D.FLOAT32, (x.shape[0], 1)), (1,))
    got = run(device, desc, [x]).reshape(-1)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


# -- FLOAT32 columns of few rows (reduce_cpu.cl: gm_col_exact, GM_COL_SPAN) -----------------------------

@pytest.mark.parametrize("dt, shape, span", [
    (D.FLOAT32, (8, 32768), 25), (D.FLOAT32, (32, 1024), 23), (D.FLOAT32, (9, 16), 24),
    (D.FLOAT32, (256, 32768), 20), (D.FLOAT32, (300, 4096), None), (D.FLOAT32, (8, 12), None),
    (D.BFLOAT16, (8, 32768), 41), (D.BFLOAT16, (32, 16), 39), (D.BFLOAT16, (300, 4096), None),
    (D.FLOAT16, (8, 32768), None)])
def test_col_span_chosen(dt, shape, span):
    """Columns of at most 2^8 rows in one chunk, every column block whole, take the span test with
    28 - ceil(log2 n) binades (BFLOAT16: 44 - ceil(log2 n)); longer columns (chunks) and a block past
    the last whole one do not, nor FLOAT16 (its sums of at most 2^13 values are exact anyway)."""
    from helpers import cpu_reduce_choice
    _, g, v = cpu_reduce_choice(dt, shape, (0,), True)
    assert g.kernel == "col" and v.macros.get("GM_COL_SPAN") == span
    _, _, v = cpu_reduce_choice(dt, shape, (0,), False)
    assert v.macros.get("GM_COL_SPAN") is None          # no fp64: the float-float bound


def _col(vals, neg=False):
    c = np.array(vals, np.float64)
    return -c if neg else c


def test_float32_columns_of_8_exact_blocks(device):
    """Columns of eight rows, each case a reduction of its own (the span is one per column block, and
    a block is the whole row here):
    - exact ties (1 + 2^-24 as the mean of seven ones and 1 + 2^-21) round to even, and an exact
      mean (seven ones and 1 + 2^-20: 1 + 2^-23) stays -- the span test settles them without the
      exact pass; the same negated;
    - 27 binades: 1, 1, 1, 1, 1.96875 + 2^-21, 1.96875, 2^-4 - 2^-27, 2^-27 (1 + 2^-23), whose exact
      mean 1 + 2^-24 + 2^-53 lies just above a midpoint; the kernel's double sum (rows four at a time)
      loses the 2^-50 to a tie at 8, so a span limit of 27 binades would round it to 1.0;
    - zeros alone (-0.0 and +0.0 rules), subnormals, infinities, inf with -inf, normal values."""
    from helpers import check_reduce_mean, exact_values
    tie = [1.0] * 7 + [1.0 + 2.0 ** -21]
    exact = [1.0] * 7 + [1.0 + 2.0 ** -20]
    wide = [1.0] * 4 + [1.96875 + 2.0 ** -21, 1.96875, 2.0 ** -4 - 2.0 ** -27, 2.0 ** -27 * (1 + 2.0 ** -23)]
    rng = np.random.default_rng(32)

    def mean(cols):
        return check_reduce_mean(device, D.FLOAT32, exact_values(np.array(cols).T, np.float32), (0,))
    got = mean([tie, exact, _col(tie, True), _col(exact, True)] * 2)
    assert (got[0::4] == np.float32(1.0)).all() and (got[1::4] == np.float32(1.0 + 2.0 ** -23)).all()
    got = mean([wide, _col(wide, True)] * 4)
    assert (got[0::2] == np.float32(1.0 + 2.0 ** -23)).all()
    got = mean([[-0.0] * 8] * 4 + [[-0.0] * 7 + [0.0]] * 4)
    assert (got[:4].view(np.uint32) == 0x80000000).all() and (got[4:].view(np.uint32) == 0).all()
    mean([[2.0 ** -149] * 7 + [2.0 ** -148]] * 8)
    mean([[np.inf] * 8, [np.inf] * 4 + [-np.inf] * 4] * 4)
    mean(rng.standard_normal((16, 8)).astype(np.float32))


@pytest.mark.parametrize("n", [8, 9, 32, 100, 256])
def test_float32_short_columns_against_the_oracle(device, n):
    """Columns of n rows, many column blocks (one chunk): normal data, data spanning about 20 binades,
    and exact ties scaled across the range."""
    from helpers import check_reduce_mean
    rng = np.random.default_rng(n)
    x = np.concatenate([rng.standard_normal((n, 2048)),
                        rng.standard_normal((n, 1024)) * 2.0 ** rng.integers(-10, 10, (n, 1024)),
                        np.round(rng.standard_normal((n, 1024)) * 2.0 ** 20)
                        * 2.0 ** -rng.integers(20, 140, (1, 1024))],
                       axis=1).astype(np.float32)
    check_reduce_mean(device, D.FLOAT32, x, (0,))


def test_bfloat16_columns_of_8_exact_blocks(device):
    """BFLOAT16 columns of eight rows (GM_B16C with GM_COL_SPAN), each case a reduction of its own:
    exact ties (1 + 2^-8 as the mean of seven ones and 1 + 2^-5) to even, an exact mean (1 + 2^-7)
    kept, both negated; 44 binades: 1.5 four times, 1, 1.03125, 2^-44 (1 + 2^-7) and -2^-44, whose
    exact mean 1 + 2^-8 + 2^-54 lies just above a midpoint: the kernel's double sum loses the 2^-51 at
    8.03125, so a span limit three binades higher would round it to 1.0; zeros, subnormals,
    infinities, normal values."""
    import ml_dtypes
    from helpers import check_reduce_mean, exact_values
    bf = np.dtype(ml_dtypes.bfloat16)
    tie = [1.0] * 7 + [1.0 + 2.0 ** -5]
    exact = [1.0] * 7 + [1.0 + 2.0 ** -4]
    wide = [1.5] * 4 + [1.0, 1.03125, 2.0 ** -44 * (1 + 2.0 ** -7), -(2.0 ** -44)]
    rng = np.random.default_rng(16)

    def mean(cols):
        return check_reduce_mean(device, D.BFLOAT16, exact_values(np.array(cols, np.float64).T, bf), (0,))
    got = mean([tie, exact, _col(tie, True), _col(exact, True)] * 4).astype(np.float64)
    assert (got[0::4] == 1.0).all() and (got[1::4] == 1.0 + 2.0 ** -7).all()
    got = mean([wide, _col(wide, True)] * 8).astype(np.float64)
    assert (got[0::2] == 1.0 + 2.0 ** -7).all()
    got = mean([[-0.0] * 8] * 8 + [[-0.0] * 7 + [0.0]] * 8)
    assert (got[:8].view(np.uint16) == 0x8000).all() and (got[8:].view(np.uint16) == 0).all()
    mean([[2.0 ** -133] * 7 + [2.0 ** -132]] * 16)
    mean([[np.inf] * 8, [np.inf] * 4 + [-np.inf] * 4] * 8)
    mean(rng.standard_normal((32, 8)).astype(bf).astype(np.float64))
