"""FLOAT64 REDUCE AVERAGE over short rows (8, 16 or 32 values) in the CPU shape's short-rows kernel
(reduce.cl: gm_d8_rows, issue 22 point 5 / issue 21: speed): eight rows per step in a TwoSum tree,
the mean H * (1 / n) with H = fl(h + c) wherever the errors' sum c did not round, nothing overflowed
and H / n stays normal; the other rows open (the exact pass). Every mean against the exact oracle on
every device (the CPU device and the GPU-shaped kernels give the same bits), and, on the CPU-shaped
OpenCL devices, the fast path alone (the exact pass dropped): it decides normal rows, exact ties,
zeros and cancellation itself, and the rows it must leave open would be wrong without the exact pass,
so the data below catch a missing open condition."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import oracle
import pytest
from helpers import run
from test_correct_rounding import check_bits, want_reduce

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.backends import programs, reduce_kernels
from gpu_mean.runtime import planning

T = gm.TensorDesc
DBL_MAX = float(np.finfo(np.float64).max)
SUB = 2.0 ** -1074      # the smallest subnormal
LENGTHS = (8, 16, 32)


def _row(n: int, vals: dict) -> np.ndarray:
    r = np.zeros(n)
    for i, v in vals.items():
        r[i] = v
    return r


def _naive(row: np.ndarray) -> float:
    """The fast path's answer without its open conditions: the exact sum rounded once, times 1 / n."""
    s = sum((Fraction(float(v)) for v in row), Fraction(0))
    return float(np.float64(float(s)) * np.float64(1.0 / len(row)))


def _tiny_row(n: int) -> np.ndarray:
    """A row whose exact sum S lies just above 2^-1022 n (|H| < 2^-1022 n is open): fl(S) / n
    rounded again on the subnormal grid differs from S / n rounded once (searched, then checked)."""
    for k in range(1, 200):
        r = _row(n, {0: 2.0 ** -1022 * n / 4, 3: k * SUB})
        if _naive(r) != float(oracle.reduce_mean(r[None, :], (1,), np.float64)[0, 0]):
            return r
    raise AssertionError("no double rounding found")


def open_rows(n: int) -> dict:
    """Rows the fast path must leave open: each one's naive answer (or an overflow's NaN) is wrong."""
    return {
        # 1 + 2^-53 ties to 1, so c = 2^-53 + 2^-110 rounds: fl(h + c) = 1 ties down, S is above the tie
        "errors_sum_rounds": _row(n, {0: 1.0, 1: 2.0 ** -53, 2: 2.0 ** -110}),
        "errors_sum_rounds_neg": -_row(n, {0: 1.5, 1: 2.0 ** -53, 5: 2.0 ** -200}),
        # +-DBL_MAX side by side overflow in the first level; the mean is small
        "dbl_max_cancel_overflow": _row(n, {0: DBL_MAX, 1: DBL_MAX, 2: -DBL_MAX, 3: -DBL_MAX, 4: 3.0}),
        "past_2_960_overflow": _row(n, {0: 2.0 ** 1023, 1: 1.5 * 2.0 ** 1023, 2: -2.0 ** 1023, 3: -1.25 * 2.0 ** 1023}),
        "all_dbl_max": np.full(n, DBL_MAX),
        # no addition overflows, but h = DBL_MAX and c = 2^970 (a tie) make fl(h + c) inf; the mean is 2^1021
        "h_plus_c_overflows": _row(n, {0: DBL_MAX, 2: 2.0 ** 969, 4: 2.0 ** 969}),
        "subnormal_double_rounding": _tiny_row(n),
        "subnormal_double_rounding_neg": -_tiny_row(n),
    }


def fast_rows(n: int, rng) -> dict:
    """Rows the fast path decides itself (correct without the exact pass)."""
    rows = {}
    for i in range(6):
        rows[f"normal_{i}"] = rng.standard_normal(n)
    for i in range(6):      # exact ties: a + 2^-53 ulp(a) spread over two values, beside pairs that cancel
        a = 1.0 + float(rng.integers(0, 1 << 52)) * 2.0 ** -52
        v = rng.standard_normal(n // 2 - 2) * 1e3
        r = np.concatenate([[a, 2.0 ** -54, 2.0 ** -54, 0.0], v, -v])
        r = rng.permutation(r) * (2.0 ** int(rng.integers(-1000, 1000)))
        rows[f"tie_{i}"] = r if i % 2 else -r
    rows["dbl_max_cancel"] = _row(n, {0: DBL_MAX, 1: -DBL_MAX, 2: 0.25})
    rows["past_2_960"] = _row(n, {0: 2.0 ** 1000, 4: -3.0 * 2.0 ** 990, 7: 1.0})
    rows["neg_zeros"] = np.full(n, -0.0)
    rows["mixed_zeros"] = np.resize([-0.0, 0.0], n)
    rows["cancel_to_zero"] = np.resize([2.5, -2.5, 1e300, -1e300], n)
    rows["subnormals"] = rng.integers(-1000, 1000, n) * SUB + 2.0 ** -1000     # H large enough: decided
    rows["exponents_apart"] = rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)
    return rows


def exact_pass_rows(n: int) -> dict:
    """Rows left open whose answers need no proof of wrongness here: inf, NaN, tiny means, -0.0."""
    return {"inf": _row(n, {2: np.inf, 3: 1.0}), "ninf": _row(n, {0: -np.inf}),
            "nan": _row(n, {5: np.nan}), "both_inf": _row(n, {1: np.inf, 6: -np.inf}),
            "inf_beside_overflow": _row(n, {0: np.inf, 1: -DBL_MAX, 2: -DBL_MAX}),
            "tiny_negative_mean": _row(n, {3: -SUB}), "tiny_positive_mean": _row(n, {3: 5 * SUB}),
            "all_subnormal": np.full(n, 3 * SUB)}


def specials(n: int, rng) -> dict:
    return {**open_rows(n), **fast_rows(n, rng), **exact_pass_rows(n)}


def blocks(n: int, rng, named: dict) -> tuple[np.ndarray, list]:
    """One named row per block of eight (at a different place in each), normal rows around it: a
    row that opens its whole block (an errors' sum that rounds, an inf or NaN) hides no other."""
    names = list(named)
    x = rng.standard_normal((8 * len(names), n))
    for j, name in enumerate(names):
        x[8 * j + j % 8] = named[name]
    return x, names


def _mean(device, x):
    desc = gm.ext.ReduceMeanDesc(T(D.FLOAT64, x.shape), T(D.FLOAT64, (x.shape[0], 1)), (1,))
    return run(device, desc, [x]).reshape(-1)


def _need_fp64(device):
    if device.info.backend != "cpu" and not device.info.fp64:
        pytest.skip(f"{device.info.id}: no fp64, FLOAT64 is refused")


@pytest.mark.parametrize("n", LENGTHS)
def test_f64_short_rows_take_the_kernel(n):
    """Rows of 8, 16 and 32 FLOAT64 values take the short-rows kernel; 24 (no power of two) does not."""
    for length, want in ((n, n), (24, 0)):
        desc = gm.ext.ReduceMeanDesc(T(D.FLOAT64, (64, length)), T(D.FLOAT64, (64, 1)), (1,))
        assert reduce_kernels.short_rows(planning.plan_operator(desc), fp64=True) == want


@pytest.mark.parametrize("n", LENGTHS)
def test_f64_short_rows_exact(device, cpu, n):
    """Every named row alone in its block of eight (a block of rows, then many work-items each with
    a block of rows), and in the 1 to 7 rows after the last full eight (row counts 8 + t, t = 1..7,
    the named row at each place of the tail): the exact oracle's bits and the CPU device's."""
    _need_fp64(device)
    rng = np.random.default_rng(7000 + n)
    named = specials(n, rng)
    x, names = blocks(n, rng, named)
    want = want_reduce(x, (1,), np.float64).reshape(-1)
    got = _mean(device, x)
    assert oracle.equal_bits(got, want), (
        f"rows of {n}: wrong at {[names[i // 8] for i in np.flatnonzero(got.view(np.int64) != want.view(np.int64))]}")
    big = np.concatenate([x] * 5 + [x[:3]])     # many work-items, the last with 3 rows after its last eight
    check_bits(_mean(device, big), np.concatenate([want] * 5 + [want[:3]]), f"rows of {n}, {big.shape[0]} rows")
    check_bits(_mean(cpu, big), np.concatenate([want] * 5 + [want[:3]]), f"rows of {n}, CPU device")
    base = rng.standard_normal((15, n))
    for i, (name, row) in enumerate(named.items()):
        t = 1 + i % 7
        for at in range(8, 8 + t):
            y = base[:8 + t].copy()
            y[at] = row
            check_bits(_mean(device, y), want_reduce(y, (1,), np.float64).reshape(-1),
                       f"rows of {n}, {name} at row {at} of {8 + t}")


@pytest.mark.parametrize("n", LENGTHS)
def test_f64_short_rows_fast_path_alone(device, n, monkeypatch):
    """The fast path without the exact pass: the rows it may decide are right, so it decides them
    itself (normal rows, exact ties, zeros, cancellation, DBL_MAX cancelling at once); the rows it
    must open come out wrong, so the test above fails if an open condition is dropped."""
    _need_fp64(device)
    if device.info.backend != "opencl" or not device.backend.cpu_shaped:
        pytest.skip("the short-rows kernel is the CPU-shaped OpenCL devices'")
    real = programs.reduce_variant
    monkeypatch.setattr(programs, "reduce_variant", lambda be, plan: dataclasses.replace(real(be, plan), exact=None))
    rng = np.random.default_rng(n)
    fast = fast_rows(n, rng)
    x = np.stack(list(fast.values()) * 3)[:-3]      # a tail of rows after the last eight
    check_bits(_mean(device, x), want_reduce(x, (1,), np.float64).reshape(-1), f"rows of {n}, decided by the fast path")
    opened = open_rows(n)
    x = np.stack(list(opened.values()) * 2)
    got, want = _mean(device, x), want_reduce(x, (1,), np.float64).reshape(-1)
    wrong = got.view(np.int64) != want.view(np.int64)
    assert wrong.all(), f"rows of {n}: {[k for k, w in zip(list(opened) * 2, wrong) if not w]} came out right unopened"
