"""The CPU shape's BFLOAT16 row sums (issue 21 point 6, reduce_cpu.cl: GM_B16, reduce_kernels.b16_rows):
BFLOAT16 REDUCE AVERAGE through the row kernel with fp64 widens each value to double (a shift or a
mask to float, then a conversion: exact) and adds it into eight vectors of double lanes; the bound
test and the exact path decide (rows of one run: the row kernel itself, gm_redo_open). Every device
variant against the exact oracle, bit
for bit: data that a float sum of four values would round or overflow (the float pre-sum that
session 13 removed), tails that cut the passes, runs cut into chunks, interleaved axes, ties and
rows the bound leaves open, subnormals, the zero rule, infinities and NaN."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import (
    check_reduce_mean,
    cpu_reduce_choice,
    exact_values,
    reduce_mean_desc,
    reduce_plan,
    run,
    zero_rule_rows,
)

from gpu_mean import DataType as D
from gpu_mean.kernels import opencl_geometry, reduce_kernels

BF16 = np.dtype(ml_dtypes.bfloat16)
BF_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
BLOCK = 512     # lengths that cut the passes of 64 and of 16 (reduce_cpu.cl: GM_B16)


def bf(values) -> np.ndarray:
    """bfloat16 values written exactly (each must be a bfloat16 value: checked)."""
    return exact_values(values, BF16)


def _mean(device, x: np.ndarray, axes) -> np.ndarray:
    return run(device, reduce_mean_desc(D.BFLOAT16, x.shape, axes), [x])


def _check(device, x: np.ndarray, axes) -> np.ndarray:
    return check_reduce_mean(device, D.BFLOAT16, x, axes)


def _plan(shape, axes, dt=D.BFLOAT16):
    return reduce_plan(dt, shape, axes)


@pytest.mark.parametrize("shape, axes, fp64, want", [
    ((1 << 20,), (0,), True, True),                 # a full reduction: chunks and the finalize pass
    ((4, 20000), (1,), True, True),                 # long rows
    ((64, 4096), (1,), True, True),
    ((16, 8, 40, 40), (0, 2, 3), True, True),       # interleaved axes: a run per outer index
    ((1 << 20,), (0,), False, False),               # no fp64: the float-float path
    ((4096, 8), (1,), True, False),                 # short rows: their own kernel
    ((64, 4096), (0,), True, False),                # columns
])
def test_b16_rows_chosen(shape, axes, fp64, want):
    """The planner's choice: the row kernel with fp64 only (the tests below would pass vacuously if
    their shapes never reached GM_B16); FLOAT16 never takes it."""
    plan, g, v = cpu_reduce_choice(D.BFLOAT16, shape, axes, fp64)
    assert bool(v.macros.get("GM_B16")) == want
    if want:
        assert g.kernel == "row" and reduce_kernels.b16_rows(plan, fp64, g)
    assert not reduce_kernels.cpu_variant(_plan(shape, axes, D.FLOAT16), compute_units=2, fp64=fp64).macros["GM_B16"]


def _quads(a: float, s: float, groups: int) -> np.ndarray:
    """A row of ``groups`` groups of 32 values laid out for the kernel's float sums of four (elements
    2l, 2l+1, 16+2l, 17+2l of each 32): the even groups give each of their eight sums (a + a) + (a + s),
    the odd ones (-a + -a) + (-a + 0), exact. The row's exact total is 8 s per even group."""
    g = np.zeros((groups, 32))
    for q in range(8):
        g[0::2, 2 * q] = g[0::2, 2 * q + 1] = g[0::2, 16 + 2 * q] = a
        g[0::2, 17 + 2 * q] = s
        g[1::2, 2 * q] = g[1::2, 2 * q + 1] = g[1::2, 16 + 2 * q] = -a
    return g.reshape(-1)


def test_fifteen_binades_are_added_in_double(device):
    """a = 65280 (2^15 (2 - 2^-7)) and s = 1 + 2^-7: 15 binades apart, and 2a + (a + s) needs 25 bits
    (its float sum is a tie that rounds s's last bit away), so float sums of four would give a total
    of 8 per even group for 8 (1 + 2^-7) and a mean the bound test settles on the wrong side (0.125
    for 0.1259765625): every value must reach the double lanes as itself. 14 binades apart
    (a = 32640) float sums of four would be exact: the same correct means."""
    rows = [_quads(65280.0, 1 + 2.0 ** -7, 2 * BLOCK // 32), _quads(32640.0, 1 + 2.0 ** -7, 2 * BLOCK // 32),
            _quads(-65280.0, -(1 + 2.0 ** -7), 2 * BLOCK // 32), _quads(65280.0 * 2.0 ** 80, 2.0 ** 80 + 2.0 ** 73,
                                                                          2 * BLOCK // 32)]
    x = bf(np.stack(rows))
    g = _check(device, x, (1,)).astype(np.float64)
    assert g[0] == 0.1259765625 and g[2] == -0.1259765625


def test_values_from_2_126_are_added_in_double(device):
    """Four values of the largest bfloat16 overflow a float sum, not a double one: finite means
    (values just below 2^126 beside them)."""
    big = BF_MAX
    below = 2.0 ** 126 - 2.0 ** 118               # the largest bfloat16 below 2^126
    rows = [_quads(big, 2.0 ** 120, 2 * BLOCK // 32), _quads(big, -big, 2 * BLOCK // 32),
            _quads(below, 2.0 ** 118, 2 * BLOCK // 32), np.where(np.arange(2 * BLOCK) % 2 == 0, big, -big)]
    x = bf(np.stack(rows))
    g = _check(device, x, (1,)).astype(np.float64)
    assert np.all(np.isfinite(g))


@pytest.mark.parametrize("n", [1, 15, 16, 17, 63, 64, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 48 + 5, 20011])
def test_row_tails(device, n):
    """Rows whose length cuts the blocks, the passes of 64 and of 16 anywhere: normal values, values
    spanning bfloat16's exponent range (subnormals included: the double loop), tiny normal values
    beside subnormals, and small integers (exact ties of the rounding)."""
    rng = np.random.default_rng(n)
    e = rng.integers(-133, 128, n)
    spanning = np.where(rng.random(n) < 0.5, -1.0, 1.0) * np.minimum(np.ldexp(rng.uniform(1, 2, n), e), BF_MAX)
    x = np.stack([rng.standard_normal(n), rng.standard_normal(n) * 3000.0, spanning,
                  rng.standard_normal(n) * 2.0 ** -126, rng.integers(-3, 4, n) * 1.0,
                  rng.standard_normal(n) * 2.0 ** -120])
    _check(device, x.astype(BF16), (1,))


def test_ties(device):
    """Means exactly on a bfloat16 midpoint (ties to even) and one value beside them: 1 and 1 + 2^-7
    (mean 1 + 2^-8: 1.0), 1 + 2^-7 and 1 + 2^-6 (mean 1 + 3 2^-8: 1 + 2^-6), and the first with a
    value 2^-20 added (rounds up)."""
    n = 2 * BLOCK
    a = np.resize([1.0, 1 + 2.0 ** -7], n)
    b = np.resize([1 + 2.0 ** -7, 1 + 2.0 ** -6], n)
    c = a.copy()
    c[5] = 2.0 ** -20
    c[6] = 1.0 + 2.0 ** -7
    c[7] = 1.0
    c[8] = 1.0
    x = bf(np.stack([a, b, c]))
    _check(device, x, (1,))


@pytest.mark.parametrize("shape, axes", [((64, 4096), (1,)), ((4, 20000), (1,)), ((1 << 20,), (0,)),
                                         ((16, 8, 40, 40), (0, 2, 3))])
def test_b16_rows_depth(shape, axes):
    """The bound's depth covers the loop's chains (reduce_cpu.cl: GM_B16): a lane's one addition per pass
    of 64, then at most 3 + 3 + 8 + 15 (the passes of sixteen, the lanes' tree, the horizontal sum,
    the tail), then the finalize pass's chunks."""
    plan, g, v = cpu_reduce_choice(D.BFLOAT16, shape, axes, True)
    assert v.macros["GM_B16"]
    assert v.depth == min(plan.n_reduce - 1, -(-g.chunk // 64) + 29 + (g.n_chunks + 2 if g.n_chunks > 1 else 0))


def _open_rows(n: int) -> np.ndarray:
    """Rows of n (even) values whose means the bound test cannot settle: an exact tie of the rounding
    (1 and 1 + 2^-7: mean 1 + 2^-8, ties to 1.0), the same tie missed by +-2^-133 (one pair (1 + 2^-7,
    1) made (2 + 2^-6, +-2^-133), another (1, 1): rounds up, then down), a zero mean of nonzero values
    (+0.0), and ones lost in a FLOAT64 lane beside 2^100 (cancelled by -2^100 in the same lane for
    n = 4096). The exact path must decide them."""
    tie = np.resize([1.0, 1.0 + 2.0 ** -7], n)
    up, down = tie.copy(), tie.copy()
    for r, t in ((up, 2.0 ** -133), (down, -(2.0 ** -133))):
        r[10], r[11] = 2.0 + 2.0 ** -6, t
        r[20], r[21] = 1.0, 1.0
    cancel = np.resize([3.0, -3.0], n)
    cancel[1], cancel[2] = -3.0 + 2.0 ** -6, 3.0 - 2.0 ** -6
    lost = np.zeros(n)
    lost[0], lost[n // 2] = 2.0 ** 100, -(2.0 ** 100)
    lost[16:n // 2:16] = 1.0
    lost[n - 1] = 2.0 ** -133
    return np.stack([tie, up, down, cancel, lost, -tie])


@pytest.mark.parametrize("n", [4096, 20010])
def test_open_rows(device, n):
    """The rows of _open_rows, one run each (on the CPU shape with fp64 the row kernel redoes them,
    gm_redo_open): the correctly rounded means, bit for bit (the bound test's candidates fail them)."""
    got = _check(device, bf(_open_rows(n)), (1,))
    want = np.array([1.0, 1.0 + 2.0 ** -7, 1.0, 0.0, 0.0, -1.0])
    assert np.array_equal(got.astype(np.float64)[[0, 1, 2, 3, 5]], want[[0, 1, 2, 3, 5]])
    assert got.view(np.uint16)[3] == 0      # +0.0


def test_full_reduction_in_chunks(device):
    """One output of 2^18 + 13 values (eight chunks): the row kernel's chunks and the finalize pass."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((1 << 18) + 13) * 100.0).astype(BF16)
    _check(device, x, (0,))
    _check(device, np.concatenate([x, -x]), (0,))      # an exact zero total: +0.0


def test_interleaved_axes(device):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((16, 8, 40, 41)) * 40.0).astype(BF16)
    x[3, 2, 7, 9] = 2.0 ** -130                        # one block of another run goes to the double loop
    _check(device, x, (0, 2, 3))


@pytest.mark.parametrize("n", [40, 4 * BLOCK + 3, 1 << 18])
def test_zero_rule_and_specials(device, n):
    """-0.0 from -0.0s alone, +0.0 for any other zero total; inf, NaN, inf with -inf as IEEE;
    subnormals alone."""
    subnormals = np.random.default_rng(n + 1).integers(-127, 128, n) * 2.0 ** -133     # subnormal bfloat16s
    x = np.vstack([zero_rule_rows(n), subnormals]).astype(BF16)
    got = _mean(device, x, (1,)).reshape(-1)
    bits = got.view(np.uint16)
    f = got.astype(np.float32)
    assert bits[0] == 0x8000 and bits[1] == 0 and bits[2] == 0
    assert f[3] == np.inf and np.isnan(f[4]) and np.isnan(f[5]) and f[6] == -np.inf
    _check(device, x, (1,))


# --- columns (reduce_cpu_cols.h: GM_B16C, gm_settle8_bf16; reduce_kernels.b16_cols) ----------------------

@pytest.mark.parametrize("shape, axes, fp64, want", [
    ((256, 4096), (0,), True, True),                # column blocks of 1024
    ((301, 48), (0,), True, True),
    ((64, 2, 1040), (0,), True, True),              # a last block of 16 columns: the column-by-column loop
    ((301, 40), (0,), True, False),                 # 40 columns: no multiple of 16
    ((256, 4096), (0,), False, False),              # no fp64
    ((64, 4096), (1,), True, False),                # rows
])
def test_b16_cols_chosen(shape, axes, fp64, want):
    plan = _plan(shape, axes)
    g = opencl_geometry.reduce_geometry(plan, compute_units=2)
    v = reduce_kernels.cpu_variant(plan, compute_units=2, fp64=fp64)
    assert bool(v.macros.get("GM_B16C")) == want == bool(v.macros.get("GM_SETTLE8_BF16"))
    if want:
        assert g.kernel == "col" and g.cols % 16 == 0


def _columns(rows: int, cols: int, rng) -> np.ndarray:
    """(rows, cols) with a kind of column per column index mod 16, so that every eight adjacent
    results mix them: normal values, values spanning the exponent range, ties (1 and 1 + 2^-7 in
    turn: the mean of an even count is a midpoint), cancelling values (a zero mean of nonzero values),
    -0.0 alone, one +0.0 among -0.0s, subnormals, small integers, large values, and a value beside
    one 2^-20 above a tie."""
    x = np.empty((rows, cols))
    r = np.arange(rows)
    for c in range(cols):
        kind = c % 16
        if kind == 0:
            x[:, c] = rng.standard_normal(rows)
        elif kind == 1:
            e = rng.integers(-133, 128, rows)
            sign = np.where(rng.random(rows) < 0.5, -1.0, 1.0)
            x[:, c] = sign * np.minimum(np.ldexp(rng.uniform(1, 2, rows), e), BF_MAX)
        elif kind == 2:
            x[:, c] = np.where(r % 2 == 0, 1.0, 1 + 2.0 ** -7) if rows % 2 == 0 else 1.0
        elif kind == 3:
            v = rng.uniform(1, 2, rows) * 2.0 ** 100
            x[:, c] = np.where(r % 2 == 0, v, -np.roll(v, 1)) if rows % 2 == 0 else 0.0
        elif kind == 4:
            x[:, c] = -0.0
        elif kind == 5:
            x[:, c] = -0.0
            x[rows // 2, c] = 0.0
        elif kind == 6:
            x[:, c] = rng.integers(-127, 128, rows) * 2.0 ** -133
        elif kind == 7:
            x[:, c] = rng.integers(-3, 4, rows) * 1.0
        elif kind == 8:
            x[:, c] = rng.standard_normal(rows) * 2.0 ** 120
        else:
            x[:, c] = rng.standard_normal(rows) * 10.0 ** (kind - 12)
    return x.astype(BF16)


@pytest.mark.parametrize("shape", [(7, 2048), (64, 2, 1040), (33, 4096), (64, 1024), (301, 48), (5000, 64),
                                   (1000, 1, 32)])
def test_columns(device, shape):
    """Column blocks through the sixteen-wide loads, rows left after the passes of four (7, 33, 301),
    a last block of 16 columns past the blocks of 1024, columns in one run (eight results settled at
    once, gm_settle8_bf16, or left to the exact pass) and in chunks (the partials: 301, 5000 and 1000
    rows on two compute units); bit for bit the oracle's."""
    rng = np.random.default_rng(sum(shape))
    x = _columns(shape[0], int(np.prod(shape[1:])), rng).reshape(shape)
    g = _check(device, x, (0,)).reshape(-1)
    bits = g.view(np.uint16)
    assert np.all(bits[4::16] == 0x8000) and np.all(bits[5::16] == 0)       # the zero rule


@pytest.mark.parametrize("special", ["inf", "nan", "both_inf"])
def test_columns_beside_infinities(device, special):
    """An infinity or NaN in one column: its result is IEEE's, and the other seven of its eight
    (whose largest magnitude is then no bound) go to the exact pass."""
    rng = np.random.default_rng(3)
    x = _columns(64, 1024, rng).astype(np.float64)      # one run per column (two compute units): gm_settle8_bf16
    col = 3 * 16 + 10
    if special == "inf":
        x[17, col] = np.inf
    elif special == "nan":
        x[17, col] = np.nan
    else:
        x[17, col], x[50, col] = np.inf, -np.inf
    g = _check(device, x.astype(BF16), (0,)).astype(np.float32)
    assert (g[col] == np.inf) if special == "inf" else np.isnan(g[col])
