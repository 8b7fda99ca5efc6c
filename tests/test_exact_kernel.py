"""opencl_kernels/exact.h (issue 22, stage 1): the device superaccumulator and its correctly rounded
division, executed on PoCL (opencl:0) through a small test kernel against the exact rational oracle,
and compiled by NVRTC (no spills, no local memory, no .ftz; registers reported). The kernel text is
what the backends hand their compilers: the API's dialect header, common.h, exact.h, then the kernel
(written in the portable dialect). Nothing in the library launches these functions yet: stage 2
puts them into the reduction kernels (docs/design.md, "Correct rounding")."""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import oracle
import pytest
from test_correct_rounding import BF16, nonfinite_rows, rows_of

from gpu_mean.kernels.source import kernel_source
from gpu_mean.kernels.typespell import header

F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
FLT_MAX = float(np.finfo(np.float32).max)

# Each row of x: the first `cut` values go to one accumulator, the rest to another, merged in reverse
# (a work-group's partials, or two chunks); the total divided by ns[row] (the count, or any n for the
# division's own tests: overflow to inf).
TEST_KERNELS = r"""
__kernel void gm_test_exact_f32(__global const uint* x, const uint ncols, const uint cut,
                                __global const uint* ns, __global uint* out, __global ushort* out_bf16) {
    const size_t row = get_global_id(0);
    gm_xacc_f a, b;
    gm_xacc_f_init(&a);
    gm_xacc_f_init(&b);
    for (uint i = 0; i < ncols; i++) {
        if (i < cut) gm_xacc_f_add_bits(&a, x[row * ncols + i]);
        else gm_xacc_f_add_bits(&b, x[row * ncols + i]);
    }
    gm_xacc_f_merge(&b, &a);
    gm_xacc_f c = b;
    out[row] = gm_xacc_f_mean(&b, ns[row]);
    out_bf16[row] = gm_xacc_f_mean_bf16(&c, ns[row]);
}

__kernel void gm_test_exact_bf16(__global const ushort* x, const uint ncols, __global const uint* ns,
                                 __global ushort* out) {
    const size_t row = get_global_id(0);
    gm_xacc_f a;
    gm_xacc_f_init(&a);
    for (uint i = 0; i < ncols; i++) gm_xacc_f_add_bf16(&a, x[row * ncols + i]);
    out[row] = gm_xacc_f_mean_bf16(&a, ns[row]);
}

__kernel void gm_test_exact_f16(__global const ushort* x, const uint ncols, const uint cut,
                                __global const uint* ns, __global ushort* out) {
    const size_t row = get_global_id(0);
    gm_xacc_h a, b;
    gm_xacc_h_init(&a);
    gm_xacc_h_init(&b);
    for (uint i = 0; i < ncols; i++) {
        if (i < cut) gm_xacc_h_add(&a, x[row * ncols + i]);
        else gm_xacc_h_add(&b, x[row * ncols + i]);
    }
    gm_xacc_h_merge(&b, &a);
    out[row] = gm_xacc_h_mean(&b, ns[row]);
}

// the fast path without fp64: a float-float sum (TwoSum), max|x|, the float-only bound test
__kernel void gm_test_settle_ff_f32(__global const uint* x, const uint ncols, __global uint* out,
                                    __global uint* settled) {
    const size_t row = get_global_id(0);
    gm_ff a = {0.0f, 0.0f, 0.0f};
    for (uint i = 0; i < ncols; i++) gm_ff_add(&a, gm_as_float(x[row * ncols + i]));
    float h2, l2;
    gm_two_sum_f(a.hi, a.lo, &h2, &l2);
    uint bits;
    const int ok = isfinite(h2) && gm_settle_ff_f32(h2, l2, gm_ff_bound(&a, ncols), ncols, &bits);
    if (!ok) {
        gm_xacc_f e;
        gm_xacc_f_init(&e);
        for (uint i = 0; i < ncols; i++) gm_xacc_f_add_bits(&e, x[row * ncols + i]);
        bits = gm_xacc_f_mean(&e, ncols);
    }
    out[row] = bits;
    settled[row] = ok;
}

// gm_ff_merge on given accumulators (hi, lo, bound each): the merged hi, lo and bound
__kernel void gm_test_ff_merge(__global const float* x, const uint ncols, __global float* out) {
    const size_t row = get_global_id(0);
    gm_ff a = {x[row * ncols], x[row * ncols + 1], x[row * ncols + 2]};
    const gm_ff b = {x[row * ncols + 3], x[row * ncols + 4], x[row * ncols + 5]};
    gm_ff_merge(&a, &b);
    out[3 * row] = a.hi;
    out[3 * row + 1] = a.lo;
    out[3 * row + 2] = a.bound;
}

#if GM_CUDA || USE_FP64
// the fast path: a FLOAT64 sum and max|x|, accepted where the bound settles; else the exact path
__kernel void gm_test_settle_f32(__global const uint* x, const uint ncols, __global uint* out,
                                 __global uint* settled) {
    const size_t row = get_global_id(0);
    double s = 0.0, m = 0.0;
    for (uint i = 0; i < ncols; i++) {
        const float v = gm_as_float(x[row * ncols + i]);
        s += (double)v;
        m = fmax(m, fabs((double)v));
    }
    uint bits;
    const int ok = gm_settle_double_f32(s, gm_sum_error_bound(ncols, m), ncols, &bits);
    if (!ok) {
        gm_xacc_f a;
        gm_xacc_f_init(&a);
        for (uint i = 0; i < ncols; i++) gm_xacc_f_add_bits(&a, x[row * ncols + i]);
        bits = gm_xacc_f_mean(&a, ncols);
    }
    out[row] = bits;
    settled[row] = ok;
}

__kernel void gm_test_settle_f16(__global const ushort* x, const uint ncols, __global ushort* out,
                                 __global uint* settled) {
    const size_t row = get_global_id(0);
    double s = 0.0;
    for (uint i = 0; i < ncols; i++) s += (double)gm_half_to_float(x[row * ncols + i]);
    ushort bits;
    // FLOAT16 sums of at most 2^13 values are exact in FLOAT64
    const int ok = gm_settle_double_f16(s, ncols <= 8192 ? 0.0 : gm_sum_error_bound(ncols, 65504.0), ncols, &bits);
    if (!ok) {
        gm_xacc_h a;
        gm_xacc_h_init(&a);
        for (uint i = 0; i < ncols; i++) gm_xacc_h_add(&a, x[row * ncols + i]);
        bits = gm_xacc_h_mean(&a, ncols);
    }
    out[row] = bits;
    settled[row] = ok;
}

// stage 3: FLOAT64 values in gm_xacc_d (68 limbs), two accumulators merged as in the f32 kernel
__kernel void gm_test_exact_f64(__global const ulong* x, const uint ncols, const uint cut,
                                __global const uint* ns, __global ulong* out) {
    const size_t row = get_global_id(0);
    gm_xacc_d a, b;
    gm_xacc_d_init(&a);
    gm_xacc_d_init(&b);
    for (uint i = 0; i < ncols; i++) {
        if (i < cut) gm_xacc_d_add_bits(&a, x[row * ncols + i]);
        else gm_xacc_d_add_bits(&b, x[row * ncols + i]);
    }
    gm_xacc_d_merge(&b, &a);
    out[row] = gm_xacc_d_mean(&b, ns[row]);
}

// stage 3: the FLOAT64 fast path as the reduction kernels' (a double-double sum by GM_DD_ADD1, max|x|, the bound
// of n - 1 additions at 8 u^2 each, gm_settle_dd_f64); else the exact path
__kernel void gm_test_settle_f64(__global const ulong* x, const uint ncols, __global ulong* out,
                                 __global uint* settled) {
    const size_t row = get_global_id(0);
    double h = -0.0, l = 0.0, m = 0.0;
    for (uint i = 0; i < ncols; i++) {
        const double v = as_double(x[row * ncols + i]);
        GM_DD_ADD1(h, l, v)
        m = fmax(m, fabs(v));
    }
    ulong bits = 0;
    const double err = (double)(ncols - 1) * 0x1p-103 * (double)ncols * m;
    const int ok = m < 0x1p960 && gm_settle_dd_f64(h, l, err, ncols, &bits);
    if (!ok) {
        gm_xacc_d a;
        gm_xacc_d_init(&a);
        for (uint i = 0; i < ncols; i++) gm_xacc_d_add_bits(&a, x[row * ncols + i]);
        bits = gm_xacc_d_mean(&a, ncols);
    }
    out[row] = bits;
    settled[row] = ok;
}
#endif
"""


def program_text(api: str, fp64: bool) -> str:
    folder = "opencl_kernels" if api == "opencl" else "cuda_kernels"
    return (header({"USE_FP64": int(fp64)}) + kernel_source(folder, "dialect.h")
            + kernel_source("opencl_kernels", "common.h") + kernel_source("opencl_kernels", "exact.h") + TEST_KERNELS)


def expected(x: np.ndarray, ns, dt) -> np.ndarray:
    """Each row's exact total divided by ns[row], rounded once to ``dt``; IEEE for inf and NaN; an
    exact zero is -0.0 only when every value is -0.0."""
    x64 = x.astype(np.float64)
    out = np.empty(x.shape[0], np.float64)
    for r in range(x.shape[0]):
        row = x64[r]
        if np.isnan(row).any() or (np.isinf(row) & (row > 0)).any() and (np.isinf(row) & (row < 0)).any():
            out[r] = np.nan
        elif np.isinf(row).any():
            out[r] = row[np.isinf(row)][0]
        else:
            s = oracle.exact_sum_rows(row[None])[0]
            v = oracle.round_fraction(Fraction(s) / int(ns[r]), dt)
            out[r] = -0.0 if v == 0 and s == 0 and np.all(np.signbit(row)) else v
    return oracle.round_float64(out, BF16)[0].astype(BF16) if dt == BF16 else out.astype(dt)


def matrix(rows: dict, ncols: int, dt) -> np.ndarray:
    return np.stack([np.resize(r, ncols) if r.size < ncols else r[:ncols] for r in rows.values()]).astype(dt)


@pytest.fixture(scope="module")
def pocl():
    cl = pytest.importorskip("pyopencl")
    from gpu_mean.backends import opencl
    try:
        b = opencl.make_backend(0)
    except RuntimeError as e:
        pytest.skip(f"no OpenCL device: {e}")
    prg = cl.Program(b.ctx, program_text("opencl", b.fp64)).build(options=list(opencl.BUILD_OPTIONS))
    return cl, b, {k.function_name: k for k in prg.all_kernels()}


def _run(pocl, kernel: str, x: np.ndarray, ns, outs, extra=()):
    cl, b, prg = pocl
    mf = cl.mem_flags
    xb = cl.Buffer(b.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(x))
    args = [xb, np.uint32(x.shape[1]), *extra]
    if ns is not None:
        args.append(cl.Buffer(b.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.asarray(ns, np.uint32)))
    results = [np.empty(x.shape[0], d) for d in outs]
    bufs = [cl.Buffer(b.ctx, mf.WRITE_ONLY, r.nbytes) for r in results]
    prg[kernel](b.queue, (x.shape[0],), None, *args, *bufs)
    for r, buf in zip(results, bufs):
        cl.enqueue_copy(b.queue, r, buf)
    return results


def check(got: np.ndarray, want: np.ndarray, x, what):
    bad = [k for k in range(len(want)) if not oracle.equal_bits(got[k:k + 1], want[k:k + 1])]
    assert not bad, (f"{what}: rows {bad[:5]}: got {got[bad[:5]]!r}, the exact result rounds to {want[bad[:5]]!r}; "
                     f"row {bad[0]}: {x[bad[0]][:8]!r}...")


@pytest.mark.parametrize("ncols", [1, 6, 96, 1000])
def test_float32_superaccumulator(pocl, ncols):
    rng = np.random.default_rng(ncols)
    rows = {**rows_of(F32, rng), **nonfinite_rows(F32)}
    x = matrix(rows, ncols, F32)
    ns = np.full(x.shape[0], ncols)
    for cut in {0, ncols // 3, ncols}:
        got, got_bf16 = _run(pocl, "gm_test_exact_f32", x.view(np.uint32), ns, [np.uint32, np.uint16],
                             (np.uint32(cut),))
        check(got.view(F32), expected(x, ns, F32), x, f"float32, {ncols} values, cut {cut}")
        check(got_bf16.view(BF16), expected(x, ns, BF16), x, f"float32 values to bfloat16, {ncols} values")


@pytest.mark.parametrize("ncols", [1, 7, 500])
def test_bfloat16_values(pocl, ncols):
    rng = np.random.default_rng(100 + ncols)
    x = matrix({**rows_of(BF16, rng), **nonfinite_rows(BF16)}, ncols, BF16)
    ns = np.full(x.shape[0], ncols)
    (got,) = _run(pocl, "gm_test_exact_bf16", x.view(np.uint16), ns, [np.uint16])
    check(got.view(BF16), expected(x, ns, BF16), x, f"bfloat16, {ncols} values")


@pytest.mark.parametrize("ncols", [1, 5, 96, 3000])
def test_float16_superaccumulator(pocl, ncols):
    rng = np.random.default_rng(200 + ncols)
    x = matrix({**rows_of(F16, rng), **nonfinite_rows(F16)}, ncols, F16)
    ns = np.full(x.shape[0], ncols)
    for cut in {0, ncols // 2}:
        (got,) = _run(pocl, "gm_test_exact_f16", x.view(np.uint16), ns, [np.uint16], (np.uint32(cut),))
        check(got.view(F16), expected(x, ns, F16), x, f"float16, {ncols} values, cut {cut}")


def test_division_across_the_range(pocl):
    """Totals divided by any n < 2^32: quotients across the whole range, subnormal ones, exact ties,
    and quotients past FLT_MAX (n smaller than the count), which round to inf."""
    rng = np.random.default_rng(9)
    rows, ns = [], []
    for _ in range(300):
        e = rng.integers(-149, 128, 4)
        rows.append((rng.uniform(1, 2, 4) * np.ldexp(1.0, e) * rng.choice([-1, 1], 4)).astype(F32))
        ns.append(int(rng.integers(1, 1 << int(rng.integers(1, 33)))))
    below_max = float(np.nextafter(np.float32(FLT_MAX), np.float32(0)))
    for v, n in ((FLT_MAX, 1), (FLT_MAX, 3), (below_max, 1), (2.0 ** -149, 2),
                 (3 * 2.0 ** -149, 2), (2.0 ** -126, 2 ** 31), (1.0, 4294967295), (-FLT_MAX, 2)):
        rows.append(np.array([v, v, v, v], F32))
        ns.append(n)
    x = np.stack(rows)
    got, got_bf16 = _run(pocl, "gm_test_exact_f32", x.view(np.uint32), ns, [np.uint32, np.uint16], (np.uint32(2),))
    check(got.view(F32), expected(x, ns, F32), x, "float32 division")
    check(got_bf16.view(BF16), expected(x, ns, BF16), x, "bfloat16 division")
    assert got.view(F32)[-8] == np.inf and got.view(F32)[-1] == -np.inf    # 4 FLT_MAX / 1, -4 FLT_MAX / 2
    h = np.array([[65504.0, 65504.0], [65504.0, 65000.0], [2.0 ** -24, 2.0 ** -24], [-(2.0 ** -24), 0.0]], F16)
    hn = [1, 1, 4, 2]
    (goth,) = _run(pocl, "gm_test_exact_f16", h.view(np.uint16), hn, [np.uint16], (np.uint32(1),))
    check(goth.view(F16), expected(h, hn, F16), h, "float16 division")


@pytest.mark.parametrize("dt", [F32, F16], ids=["float32", "float16"])
def test_bound_settles_normal_data_and_defers_the_rest(pocl, dt):
    """The fast path's test: the results are the oracle's either way; on normal data nearly every row
    settles from the FLOAT64 sum; exact ties and zeros never do, nor do the +-FLT_MAX cancelling rows
    of FLOAT32."""
    cl, b, _ = pocl
    if not b.fp64:
        pytest.skip("the FLOAT64 bound test needs fp64 (devices without it: the design's float-float form, stage 2)")
    rng = np.random.default_rng(31)
    n = 1000
    normal = np.stack([rng.standard_normal(n) for _ in range(200)]).astype(dt)
    x = np.concatenate([normal, matrix(rows_of(dt, rng), n, dt)])
    kernel = "gm_test_settle_f32" if dt == F32 else "gm_test_settle_f16"
    udt = np.uint32 if dt == F32 else np.uint16
    got, settled = _run(pocl, kernel, x.view(udt), None, [udt, np.uint32])
    check(got.view(dt), expected(x, np.full(x.shape[0], n), dt), x, f"{dt} settled or exact")
    assert settled[:200].mean() > 0.97, settled[:200].mean()
    names = list(rows_of(dt, np.random.default_rng(31)))
    # (FLOAT16 sums of 1000 values are exact in FLOAT64: its cancelling row settles, rightly)
    for name in ("tie", "all_negative_zero") + (("max_cancelling",) if dt == F32 else ()):
        assert settled[200 + names.index(name)] == 0, name


def _fp64(pocl):
    if not pocl[1].fp64:
        pytest.skip("FLOAT64 needs fp64")


@pytest.mark.parametrize("ncols", [1, 6, 96, 1000])
def test_float64_superaccumulator(pocl, ncols):
    """Stage 3: gm_xacc_d (68 limbs) against the oracle: +-DBL_MAX cancelling rows, the whole exponent
    range, subnormals, exact ties, zeros, inf and NaN, merged from two accumulators."""
    _fp64(pocl)
    rng = np.random.default_rng(300 + ncols)
    x = matrix({**rows_of(F64, rng), **nonfinite_rows(F64)}, ncols, F64)
    ns = np.full(x.shape[0], ncols)
    for cut in {0, ncols // 3, ncols}:
        (got,) = _run(pocl, "gm_test_exact_f64", x.view(np.uint64), ns, [np.uint64], (np.uint32(cut),))
        check(got.view(F64), expected(x, ns, F64), x, f"float64, {ncols} values, cut {cut}")


def test_float64_division_across_the_range(pocl):
    """gm_xacc_d's division by any n < 2^32: quotients across the range, subnormal ones, ties, and
    totals past DBL_MAX divided by a small n (inf)."""
    _fp64(pocl)
    rng = np.random.default_rng(19)
    rows, ns = [], []
    dmax = float(np.finfo(F64).max)
    for _ in range(300):
        e = rng.integers(-1074, 1024, 4)
        rows.append(np.minimum(rng.uniform(1, 2, 4) * np.ldexp(1.0, e), dmax) * rng.choice([-1, 1], 4))
        ns.append(int(rng.integers(1, 1 << int(rng.integers(1, 33)))))
    for v, n in ((dmax, 1), (dmax, 3), (dmax, 4), (2.0 ** -1074, 2), (3 * 2.0 ** -1074, 8),
                 (2.0 ** -1022, 2 ** 31), (1.0, 4294967295), (-dmax, 2)):
        rows.append(np.array([v, v, v, v]))
        ns.append(n)
    x = np.stack(rows).astype(F64)
    (got,) = _run(pocl, "gm_test_exact_f64", x.view(np.uint64), ns, [np.uint64], (np.uint32(2),))
    check(got.view(F64), expected(x, ns, F64), x, "float64 division")
    assert got.view(F64)[-8] == np.inf and got.view(F64)[-1] == -np.inf and got.view(F64)[-6] == dmax


@pytest.mark.parametrize("n", [2, 7, 1000, 20000])
def test_float64_bound_settles_normal_data(pocl, n):
    """Stage 3's FLOAT64 fast path: the oracle's bits either way; normal and mixed-scale rows settle
    from the double-double sum; exact ties, zeros and the +-DBL_MAX cancelling rows go exact."""
    _fp64(pocl)
    rng = np.random.default_rng(51 + n)
    normal = np.stack([rng.standard_normal(n) * 10.0 ** rng.integers(-200, 200) for _ in range(150)])
    rows = rows_of(F64, rng)
    x = np.concatenate([normal, matrix(rows, n, F64)]).astype(F64)
    got, settled = _run(pocl, "gm_test_settle_f64", x.view(np.uint64), None, [np.uint64, np.uint32])
    check(got.view(F64), expected(x, np.full(x.shape[0], n), F64), x, f"float64, {n} values")
    assert settled[:150].mean() > (0.5 if n == 2 else 0.97), settled[:150].mean()
    if n == 2:      # the mean of two values is often a midpoint (a sum of 54 bits): those alone go exact
        for r in np.flatnonzero(settled[:150] == 0):
            mean = (Fraction(float(x[r, 0])) + Fraction(float(x[r, 1]))) / 2
            near = float(mean)
            gap = Fraction(float(np.nextafter(near, np.inf))) - Fraction(near)
            assert abs(mean - Fraction(near)) * 2 == gap, f"row {r} is no tie: {x[r]!r}"
    names = list(rows)
    for name in ("max_cancelling", "all_negative_zero") + (("tie",) if n % 8 == 0 else ()):
        assert settled[150 + names.index(name)] == 0, name


@pytest.mark.parametrize("n", [7, 1000, 5000])
def test_float_only_bound_settles_normal_data(pocl, n):
    """The no-fp64 fast path (float-float sum, no double, the float division only as a first guess):
    the oracle's bits either way; normal data settle, +-FLT_MAX cancelling rows and ties go exact
    (never inf or NaN for finite data)."""
    rng = np.random.default_rng(41 + n)
    normal = np.stack([rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30) for _ in range(150)]).astype(F32)
    rows = rows_of(F32, rng)
    x = np.concatenate([normal, matrix(rows, n, F32)])
    got, settled = _run(pocl, "gm_test_settle_ff_f32", x.view(np.uint32), None, [np.uint32, np.uint32])
    check(got.view(F32), expected(x, np.full(x.shape[0], n), F32), x, f"float-only, {n} values")
    assert settled[:150].mean() > 0.9, settled[:150].mean()    # 7 values: ties (~5 %); 5000: the serial bound
    names = list(rows)
    # (the tie rows are ties when their 8-value pattern repeats whole)
    for name in ("max_cancelling", "all_negative_zero") + (("tie",) if n % 8 == 0 else ()):
        assert settled[150 + names.index(name)] == 0, name


def test_float_float_merge_bounds_both_roundings(pocl):
    """gm_ff_merge's bound covers the rounding of the low words' sum t even where TwoSum's error e of
    the high words cancels t: here t = -2^-25 - 3 * 2^-50 rounds by 2^-50 and t + e is only -2^-48, so
    a bound from the final low word alone (2^-71) would be short of the true error. Random merges
    too: |hi + lo - exact| <= bound, checked in exact rationals."""
    rng = np.random.default_rng(5)
    cancel = [1.0, -2.0 ** -25, 0.0, 2.0 ** -25, -3 * 2.0 ** -50, 0.0]
    rand = [[h, h * 2.0 ** -26 * rng.uniform(-1, 1), 0.0, g, g * 2.0 ** -26 * rng.uniform(-1, 1), 0.0]
            for h, g in rng.standard_normal((200, 2)) * 2.0 ** rng.integers(-20, 20, (200, 1))]
    x = np.array([cancel] + rand, np.float32)
    assert np.float32(-2.0 ** -25) + np.float32(-3 * 2.0 ** -50) != Fraction(-2 ** -25) - 3 * Fraction(2) ** -50
    out = np.empty(3 * len(x), np.float32)
    cl, b, prg = pocl
    mf = cl.mem_flags
    xb = cl.Buffer(b.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    ob = cl.Buffer(b.ctx, mf.WRITE_ONLY, out.nbytes)
    prg["gm_test_ff_merge"](b.queue, (len(x),), None, xb, np.uint32(6), ob)
    cl.enqueue_copy(b.queue, out, ob)
    for r, (hi, lo, bound) in enumerate(out.reshape(-1, 3)):
        exact = sum(Fraction(float(v)) for v in x[r, [0, 1, 3, 4]])
        error = abs(Fraction(float(hi)) + Fraction(float(lo)) - exact)
        assert error <= Fraction(float(bound)), (r, x[r], float(hi), float(lo), float(bound), float(error))
    assert out[2] > 0.0


# -- NVRTC ------------------------------------------------------------------------------------------

def _nvrtc_resources(log: str) -> dict:
    out = {}
    for m in re.finditer(r"Function properties for (\w+)\s*\n.*?(\d+) bytes stack frame, (\d+) bytes spill stores, "
                         r"(\d+) bytes spill loads\s*\n.*?Used (\d+) registers", log, re.S):
        out[m.group(1)] = (int(m.group(5)), int(m.group(2)), int(m.group(3)) + int(m.group(4)))
    return out


def test_nvrtc_compiles_without_spills_or_ftz(capsys):
    from test_cuda_nvrtc import CC, nvrtc_missing
    from test_cuda_static import f32_ftz_lines

    from gpu_mean.backends import cuda_compile
    if nvrtc_missing() is not None:
        pytest.skip(f"NVRTC or the CUDA headers are absent: {nvrtc_missing()}")
    rtc = cuda_compile.nvrtc()
    opts = cuda_compile.options(rtc.target(CC), cuda_compile.include_dir(rtc.path)) + ("--ptxas-options=-v",)
    out = rtc.compile(program_text("cuda", True), opts, "exact_test.cu")
    res = _nvrtc_resources(out.log)
    kernels = ["gm_test_exact_f32", "gm_test_exact_bf16", "gm_test_exact_f16", "gm_test_settle_f32",
               "gm_test_settle_f16", "gm_test_settle_ff_f32", "gm_test_ff_merge", "gm_test_exact_f64",
               "gm_test_settle_f64"]
    assert sorted(res) == sorted(kernels), out.log
    for k, (_, stack, spill) in res.items():
        if k.endswith("_f64"):
            continue    # stage 3: gm_xacc_d's 68 limbs, indexed at run time, live in local memory (stack)
        assert stack == 0 and spill == 0, f"{k}: {stack} B stack, {spill} B spilled"
        assert ".local" not in out.ptx.split(f".entry {k}(")[1].split(".entry ")[0], f"{k} uses local memory"
    assert not f32_ftz_lines(out.ptx)
    with capsys.disabled():
        print(f"\nexact.h on sm_{CC}, registers per kernel: { {k: v[0] for k, v in sorted(res.items())} }")
