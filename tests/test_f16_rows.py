"""The CPU shape's exact FLOAT16 row sums (issue 24, reduce_cpu.cl: GM_H16, reduce_kernels.h16_rows):
FLOAT16 REDUCE AVERAGE through the row kernel with fp64 sums each run exactly (blocks of halves in
double lanes, their totals in integer lanes) and keeps no largest magnitude. Every device variant
against the exact oracle, bit for bit, on the runs that path cuts differently: tails that are no
multiple of 8 or 32, more than one block, runs cut into chunks (the finalize pass), interleaved axes
(a run per outer index), means beside and on half midpoints past 2^13 values (the bound then leaves
outputs to the exact pass), the zero rule, infinities and NaN."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check_reduce_mean, cpu_reduce_choice, reduce_mean_desc, reduce_plan, run, zero_rule_rows
from test_fast_paths_exact import _near_midpoints

from gpu_mean import DataType as D
from gpu_mean.kernels import opencl_geometry, reduce_kernels


def _mean(device, x: np.ndarray, axes) -> np.ndarray:
    return run(device, reduce_mean_desc(D.FLOAT16, x.shape, axes), [x])


def _check(device, x: np.ndarray, axes) -> None:
    check_reduce_mean(device, D.FLOAT16, x, axes)


def _plan(shape, axes):
    return reduce_plan(D.FLOAT16, shape, axes)


@pytest.mark.parametrize("shape, axes, fp64, want", [
    ((1 << 20,), (0,), True, True),                 # a full reduction: chunks and the finalize pass
    ((4, 20000), (1,), True, True),                 # rows past 2^13 values
    ((64, 4096), (1,), True, True),                 # rows of at most 2^13 (f16_direct)
    ((16, 8, 40, 40), (0, 2, 3), True, True),       # interleaved axes: a run per outer index
    ((1 << 20,), (0,), False, False),               # no fp64: the float-float path
    ((4096, 8), (1,), True, False),                 # short rows: their own kernel
    ((64, 4096), (0,), True, False),                # columns
])
def test_h16_rows_chosen(shape, axes, fp64, want):
    """The planner's choice: the row kernel with fp64 only (a test of this file would pass vacuously
    if the shapes below never reached GM_H16)."""
    plan, g, v = cpu_reduce_choice(D.FLOAT16, shape, axes, fp64)
    assert bool(v.macros.get("GM_H16")) == want
    if want:
        assert g.kernel == "row" and reduce_kernels.h16_rows(plan, fp64, g)


def test_h16_long_runs_keep_the_bound_path():
    """Runs of 2^22 values or more would pass a long's range in the integer lanes: the old loop."""
    plan = _plan((1, 1 << 23), (1,))
    g = opencl_geometry.reduce_geometry(plan, compute_units=1)
    run_len = g.length if g.row_multi else g.chunk
    assert (run_len >= reduce_kernels.H16_RUN) != reduce_kernels.h16_rows(plan, True, g)


@pytest.mark.parametrize("n", [1, 7, 8, 31, 33, 511, 513, 8193, 20011])
def test_row_tails(device, n):
    """Rows whose length cuts the blocks, the passes of 32 and of 8 anywhere; normal and wide values."""
    rng = np.random.default_rng(n)
    x = np.stack([rng.standard_normal(n), rng.standard_normal(n) * 3000.0,
                  rng.standard_normal(n) * 2.0 ** -18, np.where(rng.random(n) < 0.5, 65504.0, -65504.0)])
    _check(device, x.astype(np.float16), (1,))


def test_full_reduction_in_chunks(device):
    """One output of 2^20 + 13 values: the row kernel's chunks and the finalize pass."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((1 << 20) + 13) * 100.0).astype(np.float16)
    _check(device, x, (0,))
    _check(device, np.concatenate([x, -x]), (0,))      # an exact zero total: +0.0


def test_interleaved_axes(device):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((16, 8, 40, 41)) * 40.0).astype(np.float16)
    _check(device, x, (0, 2, 3))


@pytest.mark.parametrize("n", [8194, 20002])
def test_means_beside_midpoints_past_2_13(device, n):
    """Means 2^-24 / n beside a midpoint or on it: the sum is exact, the rounding of its quotient is not
    decided by the bound alone (the exact pass), and every answer is the correctly rounded one."""
    x, want = _near_midpoints(np.random.default_rng(n), n, binades=(15, 0, -10))
    got = _mean(device, x, (1,)).reshape(-1)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("n", [40, 20000, 1 << 20])
def test_zero_rule_and_specials(device, n):
    """-0.0 from -0.0s alone, +0.0 for any other zero total; inf, NaN, inf with -inf as IEEE."""
    x = zero_rule_rows(n).astype(np.float16)
    got = _mean(device, x, (1,)).reshape(-1)
    assert got[0].view(np.uint16) == 0x8000 and got[1].view(np.uint16) == 0 and got[2].view(np.uint16) == 0
    assert got[3] == np.inf and np.isnan(got[4]) and np.isnan(got[5]) and got[6] == -np.inf
    _check(device, x, (1,))


# -- columns (reduce_cpu_cols.h: GM_H16C, reduce_kernels.h16_cols) ------------------------------------------

@pytest.mark.parametrize("shape, axes, fp64, want", [
    ((1 << 19, 16), (0,), True, True),      # few long columns (R5): 64 chunks of 2^13 rows
    ((32, 16384, 8), (1,), True, True),     # one chunk per column before the cap, two of 2^13 after
    ((20000, 24), (0,), True, True),
    ((256, 4096), (0,), True, False),       # at most 2^13 rows: f16_direct
    ((20000, 20), (0,), True, False),       # a column block past the last whole one
    ((1 << 19, 16), (0,), False, False),    # no fp64: the float-float path (the same chunks)
])
def test_h16_cols_chosen(shape, axes, fp64, want):
    """The planner's choice, and the chunks of FLOAT16 columns past 2^13 rows capped at 2^13 (a
    column's FLOAT64 sum of that many halves is exact)."""
    plan, g, v = cpu_reduce_choice(D.FLOAT16, shape, axes, fp64)
    assert g.kernel == "col" and bool(v.macros.get("GM_H16C")) == want
    if plan.n_reduce > reduce_kernels.F16_DIRECT:
        assert g.chunk <= 1 << 13     # 2^13 halves: a FLOAT64 sum below 2^29 in units of 2^-24
    if want:
        assert v.depth == min(plan.n_reduce - 1, 1 + g.n_chunks + 2)    # per chunk 1, then the finalize


def test_columns_in_exact_chunks(device):
    """Columns of 3 * 2^13 + 6 halves: means 2^-24 / n beside a midpoint or on it (the transposed
    rows of _near_midpoints), the zero rule and specials, wide and tiny values, normal ones."""
    rng = np.random.default_rng(16)
    n = 3 * 8192 + 6
    mid, want = _near_midpoints(rng, n, binades=(15, 0, -10))
    other = np.stack([rng.standard_normal(n) * 100.0, rng.standard_normal(n) * 2.0 ** -20,
                      np.where(rng.random(n) < 0.5, 65504.0, -65504.0),
                      np.where(rng.random(n) < 0.01, 2.0 ** -24, 65504.0)]).astype(np.float16)
    specials = zero_rule_rows(n).astype(np.float16)
    x = np.concatenate([mid, other, specials, other, other[:1]]).T    # 72 + 4 + 7 + 5 columns: 88, one block
    plan, g, v = cpu_reduce_choice(D.FLOAT16, x.shape, (0,), True)
    assert v.macros.get("GM_H16C")
    got = check_reduce_mean(device, D.FLOAT16, np.ascontiguousarray(x), (0,))
    assert np.array_equal(got[:len(want)].view(np.uint16), want.view(np.uint16))


def test_columns_of_full_chunks(device):
    """Chunks of exactly 2^13 rows whose column sums need all 53 bits (65504s of both signs beside
    2^-24s: a chunk of 2^14 rows would round them), and a column of the largest half alone."""
    rng = np.random.default_rng(17)
    x = np.where(rng.random((32, 16384, 8)) < 0.5, 65504.0, -65504.0)
    x[rng.random(x.shape) < 0.02] = 2.0 ** -24
    x[:, :, 7] = 65504.0
    x = x.astype(np.float16)
    got = check_reduce_mean(device, D.FLOAT16, x, (1,))
    assert (got.reshape(32, 8)[:, 7] == np.float16(65504.0)).all()
