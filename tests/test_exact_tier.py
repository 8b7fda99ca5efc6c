"""The exact pass's second tier (reduce_cpu_exact.h: gm_dd_output, exact.h: gm_dd2_add / gm_dd2_settle): the
outputs the bound test leaves open are summed again as an exact pair h + c, and the quotient's
rounding is decided from it: the bound with the pair's own error, then, near a midpoint of the output
format, the sign of S - n b by one fma. Outputs whose pair is not exact (errors of c that round),
zero sums and infinities go on to the superaccumulator. Every case is built so that a wrong decision
changes the result: exact ties (rounded to even, down and up), a tie broken by a value far below the
sum's last bit (the pair's low word decides), a tie broken by a bit inside the double sum (the fma
decides), a tie broken by a value lost from the plain sum that is tried first (its exactness test
must refuse it), a tie broken by a value lost from c (the pair must be refused), a column of -0.0
beside an infinity (the zero's sign must come from the values). Rows (the row kernel) and columns (the column
kernel), FLOAT32, FLOAT16 and BFLOAT16, every device variant, against the exact oracle bit for bit."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from helpers import check_reduce_mean, cpu_reduce_choice, exact_values

from gpu_mean import DataType as D

TYPES = {"FLOAT32": (D.FLOAT32, np.dtype(np.float32), 24), "FLOAT16": (D.FLOAT16, np.dtype(np.float16), 11),
         "BFLOAT16": (D.BFLOAT16, np.dtype(ml_dtypes.bfloat16), 8)}


def _cases(p: int, wide: bool) -> dict[str, list[float]]:
    """Named runs of values whose mean lies on or next to a midpoint of a format of p bits
    (wide: the format has FLOAT32's exponent range)."""
    eps = 2.0 ** (1 - p)
    cases = {
        "tie to even, down": [1.0, 1.0 + eps, 1.0, 0.0],            # 0.75 + eps / 4: 0.75 is even
        "tie to even, up": [1.0, 1.0 + 3 * eps, 1.0, 0.0],          # 0.75 + 3 eps / 4
        "negative tie": [-1.0, -1.0 - 3 * eps, -1.0, 0.0],
        "cancelled to a tie": [4.0, 1.0 + eps, -4.0, 3.0],
    }
    if wide:
        tiny = 2.0 ** -149 if p == 24 else 2.0 ** -133
        cases |= {
            # the low word e decides: far below the double sum's last bit
            "tie broken up by the low word": [1.0, 1.0 + eps, 1.0, tiny],
            "tie broken down by the low word": [1.0, 1.0 + eps, 1.0, -tiny],
            # the fma decides: a bit inside the double sum, within the bound's pad of the midpoint
            "tie broken up inside the sum": [1.0, 1.0 + eps, 2.0 ** -50, 1.0],
            "tie broken down inside the sum": [1.0, 1.0 + eps, -(2.0 ** -50), 1.0],
            # 2^-48 eps is lost from the plain double sum, which must not be taken as exact (its
            # values span more binades than gm_sum_is_exact allows), else a tie
            "tie broken by a bit lost from the plain sum": [1.0 + eps, 1.0, 2.0 ** -48 * (1.0 + eps), -(2.0 ** -48)],
            # 2^-100 is lost from c (its addition rounds): the pair must be refused, else a tie
            "error of c rounds": [2.0 ** 100, 1.0, -(2.0 ** 100), 2.0 ** -24 if p == 24 else 2.0 ** -8,
                                  2.0 ** -100, 0.0, 0.0, 0.0],
        }
    return cases


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("axis", [1, 0], ids=["rows", "columns"])
def test_open_outputs_settled_exactly(device, name, axis):
    dt, npdt, p = TYPES[name]
    cases = _cases(p, wide=name != "FLOAT16")
    runs = [exact_values(v, npdt) for v in cases.values()]
    n = max(len(r) for r in runs)
    # every run padded with zeros to one length, each twice (in a block of 64 outputs) and scaled by
    # 2^-3 (still exact), next to ordinary outputs: the bound settles those, the tier the others
    rng = np.random.default_rng(12)
    rows = []
    for r in runs:
        for scale in (1.0, 0.125):
            rows.append(np.concatenate([r.astype(np.float64) * scale, np.zeros(n - len(r))]))
    while len(rows) % 64:
        rows.append(rng.standard_normal(n))
    x = np.asarray(rows).astype(npdt)
    if axis == 0:
        x = np.ascontiguousarray(x.T)
    check_reduce_mean(device, dt, x, (axis,))


@pytest.mark.parametrize("name", list(TYPES))
def test_zero_column_beside_an_infinity_keeps_its_sign(device, name):
    """A column of -0.0 in the block of a column with an infinity: the bound leaves it open, and its
    mean is -0.0 (IEEE's sum of -0.0s), which the pair (started from +0.0) cannot give."""
    dt, npdt, _ = TYPES[name]
    x = np.zeros((4, 64))
    x[:, 1] = -0.0
    x[0, 0] = np.inf
    x[:, 2:] = np.random.default_rng(3).standard_normal((4, 62))
    x[:, 5] = [1.0, -1.0, 0.5, -0.5]       # cancels to +0.0
    check_reduce_mean(device, dt, x.astype(npdt), (0,))


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("axis", [1, 0], ids=["rows", "columns"])
def test_short_runs_of_normal_values(device, name, axis):
    """Eight values per output: about one output in ten is an exact tie of the format (the double sum
    has three more bits than the values), all decided by the tier."""
    dt, npdt, _ = TYPES[name]
    x = np.random.default_rng(8).standard_normal((8, 4096) if axis == 0 else (4096, 8)).astype(npdt)
    check_reduce_mean(device, dt, x, (axis,))


TINY = {"FLOAT32": 2.0 ** -149, "FLOAT16": 2.0 ** -24, "BFLOAT16": 2.0 ** -133}


def _tie_run(name: str, n: int, rng, pairs: int = 0) -> tuple[np.ndarray, float]:
    """A run of n values of the format whose exact mean lies just off a midpoint b of the format:
    random values in [0.5, 1) everywhere but at positions 9 and the last four, whose values make the
    sum exactly n b, and the format's least subnormal at position 9 (lane 1 of eight, beside position
    1's value ~1: it is lost from lane 1's sum and lives in the lane's low word), signed towards b's odd
    neighbour. So the mean rounds to that neighbour, and to the even one if the least value were lost.
    The last position is in the tail for n not a multiple of eight. ``pairs``: that many values near
    the format's largest and their negatives at positions 20 on (a zero sum; the pair's low word then
    takes values whose sum rounds, so the pair is not exact and the superaccumulator decides).
    Returns the run (float64) and the neighbour."""
    _, npdt, p = TYPES[name]
    run = (rng.uniform(0.5, 1.0, n)).astype(npdt).astype(np.float64)
    if pairs:
        v = (rng.uniform(0.5, 1.0, pairs) * float(ml_dtypes.finfo(npdt).max)).astype(npdt).astype(np.float64)
        run[20:20 + 2 * pairs] = np.ravel(np.column_stack([v, -v]))
    fixed = [9, n - 1, n - 2, n - 3, n - 4]
    run[fixed] = 0.0
    rest = sum(Fraction(float(v)) for v in run)
    q = rest / n
    e = q.numerator.bit_length() - q.denominator.bit_length()
    e -= Fraction(2) ** e > q                                # 2^e <= q < 2^(e + 1)
    half = Fraction(2) ** (e - p)                            # half the spacing of the format there
    k = round((q - half) / (2 * half))                       # b = (2k + 1) half, the midpoint nearest q
    b = (2 * k + 1) * half
    diff, parts = n * b - rest, []
    while diff != 0:                                         # n b - rest as a few values of the format
        v = Fraction(float(np.float64(float(diff)).astype(npdt)))
        parts.append(v)
        diff -= v
    assert len(parts) <= 4
    run[fixed[1:1 + len(parts)]] = [float(v) for v in parts]
    assert Fraction(2) ** e <= b - half and b + half <= Fraction(2) ** (e + 1)
    lo_even = k % 2 == 0                                     # b - half = k (2 half): even when k is
    run[9] = TINY[name] if lo_even else -TINY[name]
    return run, float(b + half if lo_even else b - half)


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("layout", ["whole", "rows", "columns", "two axes"])
def test_ties_broken_in_lanes(device, name, layout):
    """Open outputs whose innermost reduced run has at least 32 values: the tier's two passes go over
    eight lanes (reduce_cpu_exact.h: gm_dd_output_lanes), a run's last n % 8 values through the scalar
    statement. Every output is a tie of the format broken by the least subnormal, which sits in a
    lane's low word (_tie_run), with the sum's last part in the tail: a lane's low word not merged,
    a lost tail or a wrong stride gives the other neighbour. Layouts: a whole reduction (one output,
    1003 values), rows (64 of 67 values), columns (64 of 1003 rows, the runs strided by the row
    length: eight separate loads) and two reduced axes (each output two runs of 67 of the innermost)."""
    dt, npdt, _ = TYPES[name]
    rng = np.random.default_rng([len(name), len(layout)])
    n = {"whole": 1003, "rows": 67, "columns": 1003, "two axes": 134}[layout]
    runs, want = zip(*(_tie_run(name, n, rng) for _ in range(1 if layout == "whole" else 64)))
    m = np.asarray(runs).astype(npdt)
    if layout == "whole":
        x, axes = m[0], (0,)
    elif layout == "rows":
        x, axes = m, (1,)
    elif layout == "columns":
        x, axes = np.ascontiguousarray(m.T), (0,)
    else:
        x, axes = np.ascontiguousarray(m.reshape(64, 2, 67).transpose(1, 0, 2)), (0, 2)   # (2, 64, 67)
    got = check_reduce_mean(device, dt, x, axes)
    assert np.array_equal(got.astype(np.float64), np.asarray(want))     # the exact oracle agrees: off the tie


@pytest.mark.parametrize("name", list(TYPES))
@pytest.mark.parametrize("layout", ["whole", "rows", "columns"])
def test_cancelling_runs_through_the_superaccumulator(device, name, layout):
    """Values near the format's largest, cancelling in pairs, with three small ones 60 and 100 binades
    apart: the bound and the pair (its low word's additions round) leave every output to the
    superaccumulator, which the CPU
    shape's redo fills block by block (reduce_limbs.h: gm_limbs_range; blocks of 1024 values within 29
    binades summed in a long, the block holding a small value value by value). Runs of 2500 values:
    two whole blocks and a partial one; whole reductions, rows and columns (strided loads)."""
    dt, npdt, _ = TYPES[name]
    big = float(ml_dtypes.finfo(npdt).max)
    rng = np.random.default_rng([len(name), len(layout), 7])
    n, outs = 2500, {"whole": 1, "rows": 8, "columns": 16}[layout]
    small = np.array([1.0, -(2.0 ** -60), 2.0 ** -100] if name != "FLOAT16" else [1.0, -(2.0 ** -14), 2.0 ** -24])
    x = np.empty((outs, n))
    for k in range(outs):
        v = (rng.uniform(0.5, 1.0, n // 2 - 2) * big).astype(npdt).astype(np.float64)
        run = np.concatenate([v, -v, small * (k + 1), [0.0]])   # the pair's low word takes 1 and 2^-60
        x[k] = run[rng.permutation(n)]
    x = x.astype(npdt)
    if layout == "whole":
        check_reduce_mean(device, dt, x[0], (0,))
    elif layout == "rows":
        check_reduce_mean(device, dt, x, (1,))
    else:
        check_reduce_mean(device, dt, np.ascontiguousarray(x.T), (0,))


@pytest.mark.parametrize("name", list(TYPES))
def test_open_columns_redone_together(device, name):
    """The column kernel's own redo (one chunk of rows: reduce_cpu_exact.h gm_redo_open_cols, eight adjacent
    columns with an open one among them down their rows together): 100 rows and 1027 columns, so a
    block of 1024 and one of 3 (a group of eight with three columns). Ties of _tie_run broken by a
    least subnormal in the pair's low word, such ties among values near the format's largest that
    cancel (the pair is not exact: the superaccumulator, strided), normal columns between them, and
    the last three columns ties."""
    dt, npdt, _ = TYPES[name]
    rows, cols = 100, 1027
    rng = np.random.default_rng([len(name), 11])
    x = rng.standard_normal((cols, rows))
    kinds = np.full(cols, "normal", object)
    tie = np.r_[rng.choice(cols - 3, 40, replace=False), [cols - 3, cols - 2, cols - 1]]
    kinds[tie] = "tie"
    kinds[rng.choice(np.flatnonzero(kinds == "normal"), 12, replace=False)] = "cancelling"
    want = {}
    for c in range(cols):
        if kinds[c] != "normal":
            x[c], want[c] = _tie_run(name, rows, rng, pairs=20 if kinds[c] == "cancelling" else 0)
    plan, g, v = cpu_reduce_choice(dt, (rows, cols), (0,), True)
    assert g.kernel == "col" and g.n_chunks == 1        # the column kernel redoes its own outputs
    got = check_reduce_mean(device, dt, np.ascontiguousarray(x.T).astype(npdt), (0,))
    assert all(got[c] == w for c, w in want.items())


@pytest.mark.parametrize("name", list(TYPES))
def test_open_columns_finalized_together(device, name):
    """Columns cut into chunks of rows (partials, then the finalize pass): the finalize pass's work-item
    of each group of eight outputs whose inputs are adjacent columns finalizes and redoes the eight
    (reduce_cpu.cl: gm_reduce_finalize_serial, gm_redo_open_cols); a group that is not adjacent goes output
    by output. A (2, 1003, 36) tensor over axis 1: 72 outputs, groups of eight adjacent but 32-39
    across the outer index (columns 32-35 of the first slab, 0-3 of the second). Every column a tie of
    _tie_run broken in the pair's low word, a third of them among cancelling values near the largest."""
    dt, npdt, _ = TYPES[name]
    rng = np.random.default_rng([len(name), 13])
    runs, want = zip(*(_tie_run(name, 1003, rng, pairs=20 if c % 3 == 0 else 0) for c in range(72)))
    x = np.asarray(runs).reshape(2, 36, 1003).transpose(0, 2, 1)       # (2, 1003, 36): output (a, c)
    plan, g, v = cpu_reduce_choice(dt, x.shape, (1,), True)
    assert g.kernel == "col" and g.n_chunks > 1         # the finalize pass redoes the open outputs
    got = check_reduce_mean(device, dt, np.ascontiguousarray(x).astype(npdt), (1,))
    assert np.array_equal(got.astype(np.float64), np.asarray(want))


@pytest.mark.parametrize("name", ["FLOAT32", "BFLOAT16"])
def test_lane_block_span_limit(device, name):
    """The lanes' blocks (reduce_cpu_exact.h: GM_DD_BLOCK): a lane's plain sum of its 64 values is taken as exact
    only within 53 - (p - 1) - 7 binades of the largest. Lane 0 of the first block: 63 values v just
    below 2 and one of 2^emn (1 + 2^-(p-1)), one binade past the limit, whose last bit (2^-47) the
    plain double sum (about 125.5, ulp 2^-46) would lose; a few values at the run's end (another
    block) make the total a tie of the format, which that bit breaks up, towards the odd neighbour. A
    limit one binade looser takes the plain sum and gives the even one."""
    dt, npdt, p = TYPES[name]
    n, emn = 1024, -(47 - (p - 1))
    half = Fraction(1, 2 ** (4 + p))                           # in [2^-4, 2^-3): spacing 2^(-4 - (p - 1))
    for v in (1.9921875, 1.984375, 1.96875, 1.9375):           # one whose tie's lower neighbour is even
        main = 63 * Fraction(v) + Fraction(2) ** emn           # the total without the breaking bit
        k = round((main / n - half) / (2 * half))
        if k % 2 == 0:
            break
    assert k % 2 == 0
    b = (2 * k + 1) * half                                     # the midpoint nearest main / n; b - half even
    up = True                                                  # the bit breaks the tie up, to the odd one
    t = Fraction(2) ** emn * (1 + Fraction(1, 2 ** (p - 1)))
    rest, parts = n * b - main, []
    while rest != 0:                                           # n b - main as a few values of the format
        parts.append(Fraction(float(np.float64(float(rest)).astype(npdt))))
        rest -= parts[-1]
    run = np.zeros(n)
    run[0:504:8] = v
    run[504] = float(t)
    run[n - len(parts):] = [float(w) for w in parts]
    x = exact_values(run, npdt)
    got = check_reduce_mean(device, dt, x, (0,))
    assert float(got[0]) == float(b + half if up else b - half)
