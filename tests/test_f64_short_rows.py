"""FLOAT64 REDUCE AVERAGE over short rows (8, 16 or 32 values) in the CPU shape's short-rows kernel
(reduce_cpu_short_f64.h: gm_d8_rows, issue 22 point 5 / issue 21: speed): eight rows per step in a TwoSum tree,
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
from gpu_mean.kernels import programs, reduce_kernels
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
        r = np.concatenate([[a, 2.0 ** -54, 2.0 ** -54] + [0.0] * (n - 2 * (n // 2 - 2) - 3), v, -v])
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


def _fast_only(v):
    """A variant without its exact redo (reduce_cpu_exact.h: GM_FAST_ONLY: the open outputs are left as
    the fast path stored them)."""
    return dataclasses.replace(v, macros={**v.macros, "GM_FAST_ONLY": 1})


@pytest.mark.parametrize("n", LENGTHS)
def test_f64_short_rows_fast_path_alone(device, n, monkeypatch):
    """The fast path without the exact pass: the rows it may decide are right, so it decides them
    itself (normal rows, exact ties, zeros, cancellation, DBL_MAX cancelling at once); the rows it
    must open come out wrong, so the test above fails if an open condition is dropped."""
    _need_fp64(device)
    if device.info.backend != "opencl" or not device.backend.cpu_shaped:
        pytest.skip("the short-rows kernel is the CPU-shaped OpenCL devices'")
    real = programs.reduce_variant
    monkeypatch.setattr(programs, "reduce_variant", lambda be, plan: _fast_only(real(be, plan)))
    rng = np.random.default_rng(n)
    fast = fast_rows(n, rng)
    x = np.stack(list(fast.values()) * 3)[:-3]      # a tail of rows after the last eight
    check_bits(_mean(device, x), want_reduce(x, (1,), np.float64).reshape(-1), f"rows of {n}, decided by the fast path")
    opened = open_rows(n)
    x = np.stack(list(opened.values()) * 2)
    got, want = _mean(device, x), want_reduce(x, (1,), np.float64).reshape(-1)
    wrong = got.view(np.int64) != want.view(np.int64)
    assert wrong.all(), f"rows of {n}: {[k for k, w in zip(list(opened) * 2, wrong) if not w]} came out right unopened"


def _columns(device, cols: np.ndarray) -> np.ndarray:
    return gm.reduce_mean(np.ascontiguousarray(cols.T), axes=[0], device=device).reshape(-1)


@pytest.mark.parametrize("n", [8, 9, 14, 35])
def test_f64_columns_exact(device, cpu, n):
    """The same named data as columns of n values (the column kernel: four rows per pass, 1 to 3
    rows after the last four; eight results at once through gm_settle_dd_f64_8 where no value in the
    work-item's columns is from 2^960 on, inf or NaN, else gm_store one by one): exact ties and
    near-ties, zeros, DBL_MAX cancelling, subnormals, values past 2^960 inside a four-row pass, inf
    and NaN; the exact oracle's bits and the CPU device's. First each named column of finite values
    alone, in 96 columns of its own values in other orders (one work-item, one largest magnitude:
    the bound as tight as the column's own, so the vector test decides), then all of them mixed."""
    _need_fp64(device)
    rng = np.random.default_rng(9000 + n)
    named = specials(n, rng)
    for name, row in named.items():
        if not np.all(np.abs(row) < 2.0 ** 960):
            continue
        cols = np.stack([row] + [rng.permutation(row) for _ in range(95)])
        check_bits(_columns(device, cols), want_reduce(cols, (1,), np.float64).reshape(-1), f"columns of {n}: {name}")
    names = (list(named) * 4)[:96]
    cols = np.stack([named[k] for k in names])
    want = want_reduce(cols, (1,), np.float64).reshape(-1)
    got = _columns(device, cols)
    assert oracle.equal_bits(got, want), (
        f"columns of {n}: wrong at {[names[i] for i in np.flatnonzero(got.view(np.int64) != want.view(np.int64))]}")
    check_bits(_columns(cpu, cols), want, f"columns of {n}, CPU device")


SETTLE_KERNEL = r"""
__kernel void gm_test_settle8(__global const double* hi, __global const double* lo, __global const double* mx,
                              const long depth, const ulong n, __global ulong* bits1, __global int* ok1,
                              __global ulong* bits8, __global int* ok8) {
    const size_t g = get_global_id(0);      // eight lanes from 8 g
    long8 b8;
    const long8 open = gm_settle_dd_f64_8(vload8(g, hi), vload8(g, lo), mx[8 * g], depth, n, &b8);
    long o[8], b[8];
    vstore8(open, 0, o); vstore8(b8, 0, b);
    for (int j = 0; j < 8; ++j) {
        const size_t i = 8 * g + j;
        ulong u;
        const double err = (double)depth * 0x1p-103 * (double)n * mx[8 * g];
        ok1[i] = gm_settle_dd_f64(hi[i], lo[i], err, (uint)n, &u) | (mx[8 * g] == 0.0);
        bits1[i] = u;
        ok8[i] = o[j] == 0;
        bits8[i] = (ulong)b[j];
    }
}
"""


def _settle8_inputs(rng, n: int):
    """Double-double totals S = hi + lo of n values around every case of the test: random means,
    means within a hair of a midpoint or on it (random and power-of-two candidates, whose gaps above
    and below differ), zeros, subnormal and huge means; each block of eight with one largest magnitude."""
    his, los, mxs = [], [], []
    for _ in range(64):
        kind = int(rng.integers(0, 4))
        k = int(rng.integers(-30, 30)) if kind < 3 else int(rng.choice([-1030, -1010, 990, 1000]))
        for _ in range(8):
            m0 = (1.0 if rng.random() < 0.4 else 1.0 + float(rng.integers(0, 1 << 52)) * 2.0 ** -52) * 2.0 ** k
            gap = np.nextafter(m0, np.inf) - m0 if rng.random() < 0.5 else np.nextafter(m0, 0.0) - m0
            eps = (Fraction(int(rng.integers(-3, 4)), 7) if kind == 2 else
                   Fraction(int(rng.choice([0, 1, -1])), 1 << int(rng.choice([30, 45, 60]))))
            t = (Fraction(m0) + Fraction(gap) / 2 * (1 + eps)) * (-1 if rng.random() < 0.5 else 1)
            s = t * n if kind != 3 or rng.random() < 0.5 else Fraction(0)
            h = float(s)
            his.append(h)
            los.append(float(s - Fraction(h)) if np.isfinite(h) else 0.0)
        mx = abs(max(his[-8:], key=abs)) / n * float(rng.choice([0.0, 1.0, 2.0 ** 40])) if np.isfinite(his[-1]) else 0
        mxs += [mx] * 8
    return np.array(his), np.array(los), np.array(mxs)


@pytest.mark.parametrize("n", [1, 3, 8, 14, 255, 4096])
def test_f64_settle8_is_the_scalar_test(n):
    """reduce_cpu_cols.h's gm_settle_dd_f64_8 (the column kernel's eight results at once) gives exactly what
    exact.h's gm_settle_dd_f64 with gm_settle's err gives lane by lane: the same verdicts and, where
    settled, the same bits (the scalar test is exact.h's, held to the oracle by tests/test_exact_kernel.py)."""
    import re

    from test_exact_kernel import program_text

    from gpu_mean.kernels.source import kernel_source
    cl = pytest.importorskip("pyopencl")
    from gpu_mean.backends import opencl
    try:
        b = opencl.make_backend(0)
    except RuntimeError as e:
        pytest.skip(f"no OpenCL device: {e}")
    if not b.fp64:
        pytest.skip("no fp64")
    src = kernel_source("opencl_kernels", "reduce_cpu_cols.h")
    fn = re.search(r"GM_INLINE long8 gm_settle_dd_f64_8\(.*?\n}\n", src, re.S).group(0)
    prg = cl.Program(b.ctx, program_text("opencl", True) + fn + SETTLE_KERNEL).build(options=list(opencl.BUILD_OPTIONS))
    hi, lo, mx = _settle8_inputs(np.random.default_rng(n), n)
    mf = cl.mem_flags
    ins = [cl.Buffer(b.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a) for a in (hi, lo, mx)]
    outs = [np.empty(hi.size, d) for d in (np.uint64, np.int32, np.uint64, np.int32)]
    bufs = [cl.Buffer(b.ctx, mf.WRITE_ONLY, o.nbytes) for o in outs]
    prg.gm_test_settle8(b.queue, (hi.size // 8,), None, *ins, np.int64(max(n - 1, 0)), np.uint64(n), *bufs)
    for o, buf in zip(outs, bufs):
        cl.enqueue_copy(b.queue, o, buf)
    bits1, ok1, bits8, ok8 = outs
    assert np.array_equal(ok1, ok8), f"verdicts differ at {np.flatnonzero(ok1 != ok8)[:8]}"
    assert 0 < ok1.sum() < ok1.size, "the inputs should settle some and leave some open"
    assert np.array_equal(bits1[ok1 == 1], bits8[ok8 == 1])
