"""Issue 22: every float mean is the exact mean rounded once (to nearest, ties to even), for every
input, against the exact rational oracle, with identical bits under permutations, other layouts and
axis groupings (docs/design.md, "Correct rounding"). Stage 1: the CPU device, REDUCE
AVERAGE and the n-ary mean of FLOAT16, FLOAT32, BFLOAT16 and FLOAT64. Stage 2: REDUCE AVERAGE and
the n-ary mean of FLOAT16, FLOAT32 and BFLOAT16 on the OpenCL devices, with and without fp64, in both
kernel shapes (opencl:0, opencl:0-nofp64, opencl:0-gpupaths, opencl:0-gpupaths-nofp64), every kernel
the planner picks, bit for bit the CPU device's (``held``)."""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import oracle
import pytest

import gpu_mean as gm
from gpu_mean.runtime import exact

BF16 = np.dtype(ml_dtypes.bfloat16)
TYPES = [np.dtype(np.float16), np.dtype(np.float32), BF16, np.dtype(np.float64)]
IDS = ["float16", "float32", "bfloat16", "float64"]
FMT = {np.dtype(np.float16): (11, -14, 15), np.dtype(np.float32): (24, -126, 127), BF16: (8, -126, 127),
       np.dtype(np.float64): (53, -1022, 1023)}


def largest(dt) -> float:
    p, _, emax = FMT[dt]
    return float((2 - 2.0 ** (1 - p)) * 2.0 ** emax)


def tiny(dt) -> float:
    p, emin, _ = FMT[dt]
    return 2.0 ** (emin - p + 1)


def as_type(v, dt) -> np.ndarray:
    """float64 values that are already values of ``dt`` (or rounded once to it)."""
    v = np.asarray(v, np.float64)
    if dt == BF16:
        return oracle.round_float64(v, BF16)[0].astype(BF16)
    return v.astype(dt)


def cancelling(rng, n, dt, scale, small) -> np.ndarray:
    """Pairs +-v near ``scale``, two copies of ``small`` and zeros, shuffled: the exact mean is
    2 * small / n while the data are of the order of ``scale`` (the +-FLT_MAX case of the issue)."""
    v = as_type(rng.uniform(0.5, 1.0, (n - 2) // 2) * scale, dt)
    x = np.concatenate([v, -v, as_type([small, small], dt), np.zeros(n - 2 - 2 * v.size, dt)])
    rng.shuffle(x)
    return x


def spanning(rng, n, dt) -> np.ndarray:
    """Random signs and exponents over the whole range of the type, subnormals included."""
    p, emin, emax = FMT[dt]
    e = rng.integers(emin - p + 1, emax + 1, n)
    m = rng.uniform(1.0, 2.0, n)
    return as_type(np.where(rng.random(n) < 0.5, -1.0, 1.0) * np.minimum(np.ldexp(m, e), largest(dt)), dt)


def adjacent(rng, n, dt, lo_exp, hi_exp) -> tuple:
    """Two neighbouring values of ``dt`` (exponent in [lo_exp, hi_exp)): their mean is a midpoint."""
    a = as_type(np.ldexp(rng.uniform(1.0, 2.0), int(rng.integers(lo_exp, hi_exp))), dt)[()]
    if dt == BF16:
        b = (np.array(a).view(np.uint16) + np.uint16(1)).view(BF16)[()]
    else:
        b = np.nextafter(a, dt.type(np.inf))
    return a, b


def rows_of(dt, rng) -> dict:
    """Named adversarial and ordinary rows (each a 1-D array of ``dt``)."""
    p, emin, emax = FMT[dt]
    big = largest(dt)
    rows = {
        "max_cancelling": cancelling(rng, 1000, dt, big, -26.6 if emax > 100 else -2.5),
        "max_cancelling_long": cancelling(rng, 4099, dt, big, 3.0),
        "spanning": spanning(rng, 777, dt),
        "spanning_long": spanning(rng, 20000, dt),
        "subnormal": as_type(rng.integers(-2 ** (p - 1), 2 ** (p - 1), 301) * tiny(dt), dt),
        "normal": as_type(rng.standard_normal(1000), dt),
        "mixed_scale": as_type(rng.standard_normal(513) * 10.0 ** rng.integers(-6, 6 if emax > 100 else 3, 513), dt),
        "near_one": as_type(rng.standard_normal(999) * 1e-3 + 1.0, dt),
        "same_sign_big": as_type(rng.uniform(0.5, 1.0, 300) * big, dt),
        "one_value": as_type([-3.25], dt),
        "cancel_to_zero": as_type([1.5, -1.5, big, -big, tiny(dt), -tiny(dt)], dt),
        "all_negative_zero": as_type([-0.0] * 5, dt),
        "mixed_zeros": as_type([-0.0, 0.0, -0.0], dt),
        "negative_tiny_mean": as_type([-tiny(dt), 0.0, 0.0, 0.0], dt),
        "positive_tiny_mean": as_type([tiny(dt), 0.0, 0.0], dt),
    }
    # Kahan- and Neumaier-defeating orders: a small value between a big one and its negation
    bk = 2.0 ** (emax - 1)
    rows["kahan"] = as_type([1.0, bk, 1.0, -bk] * 25 + [2.0 ** emin, 3.0], dt)
    rows["kahan_rev"] = as_type(([1.0, bk, 1.0, -bk] * 25 + [2.0 ** emin, 3.0])[::-1], dt)
    rows["two_sum_trap"] = as_type([bk, 1.0, -bk, 2.0 ** (emin + 1), -1.0, 2.0 ** (1 - p)], dt)
    # exact ties of the final rounding: the mean of neighbours a, b is the midpoint between them
    for name, (lo, hi) in {"tie": (-3, 3), "tie_big": (emax - 3, emax), "tie_subnormal": (emin - p + 1, emin)}.items():
        a, b = adjacent(rng, 2, dt, lo, hi)
        rows[name] = np.array([a, b] * 4, dt)
        rows[name + "_odd"] = np.array([b, a] * 3, dt)
    c, d = adjacent(rng, 2, dt, -2, 2)
    rows["tie_then_nudge"] = np.array([c, d, c, d, tiny(dt), -tiny(dt), tiny(dt), 0.0], dt)
    return rows


def nonfinite_rows(dt) -> dict:
    return {"nan": as_type([1.0, np.nan, 2.0], dt), "pinf": as_type([1.0, np.inf, -5.0], dt),
            "ninf": as_type([-np.inf, 3.0, 2.0], dt), "both_inf": as_type([np.inf, 1.0, -np.inf], dt),
            "nan_inf": as_type([np.inf, np.nan, 1.0], dt)}


def want_reduce(x, axes, dt):
    """The oracle's REDUCE AVERAGE, with the library's zero: an exact zero total is -0.0 when every
    value is -0.0 (IEEE's sum), else +0.0; a negative mean that rounds to zero is -0.0."""
    want = oracle.reduce_mean(x, axes, dt)
    x64 = x.astype(np.float64)
    zeros = np.all(x64 == 0, axis=tuple(axes), keepdims=True)
    neg0 = np.all((x64 == 0) & np.signbit(x64), axis=tuple(axes), keepdims=True)
    return np.where(zeros, np.where(neg0, -0.0, 0.0), want.astype(np.float64)).astype(dt)


def held(device, dt):
    """Skip only where the device cannot hold the type: FLOAT64 on a device without fp64 is refused (no
    storage). Every other device, CUDA included (its kernels are OpenCL's text), is held to the
    correctly rounded mean, bit for bit the cpu device's."""
    info = device.info
    if dt == np.float64 and info.backend != "cpu" and not info.fp64:
        pytest.skip(f"{info.id}: no fp64, FLOAT64 is refused")


def check_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert oracle.equal_bits(got, want), f"{what}: got {got!r}, the exact mean rounds to {want!r}"


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_reduce_rows_exact(device, dt):
    held(device, dt)
    cpu = device
    rng = np.random.default_rng(22)
    for name, row in {**rows_of(dt, rng), **nonfinite_rows(dt)}.items():
        x = row[None, :]
        got = gm.reduce_mean(x, axes=[1], device=cpu)
        check_bits(got, want_reduce(x, (1,), dt), f"{dt} {name}")
        # the same values in another order and another layout: the same bits
        perm = x[:, rng.permutation(x.shape[1])]
        check_bits(gm.reduce_mean(perm, axes=[1], device=cpu), got, f"{dt} {name} permuted")
        check_bits(gm.reduce_mean(np.ascontiguousarray(perm.T), axes=[0], device=cpu).T, got,
                   f"{dt} {name} as a column")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_reduce_many_outputs(device, dt):
    """Many outputs at once (the fast path's shared bound, the per-output bound, the exact fallback
    for a few columns), over one axis, two axes and the outer axis."""
    held(device, dt)
    cpu = device
    rng = np.random.default_rng(7)
    rows = list(rows_of(dt, rng).values())
    n = 96
    x = np.stack([np.resize(r, n) for r in rows] + [as_type(rng.standard_normal(n), dt) for _ in range(40)])
    x = x[rng.permutation(x.shape[0])]
    want = want_reduce(x, (1,), dt)
    check_bits(gm.reduce_mean(x, axes=[1], device=cpu), want, f"{dt} rows")
    check_bits(gm.reduce_mean(x.reshape(x.shape[0], 8, 12), axes=[1, 2], device=cpu).reshape(-1, 1), want,
               f"{dt} two axes")
    xt = np.ascontiguousarray(x.T)
    check_bits(gm.reduce_mean(xt, axes=[0], device=cpu).T, want, f"{dt} outer axis")
    shuffled = x[:, rng.permutation(n)]
    check_bits(gm.reduce_mean(shuffled, axes=[1], device=cpu), want, f"{dt} permuted")


def nary_device(device, dt, k=3):
    """The device for a test of ``gm.mean`` over k inputs of ``dt``, or a skip: FLOAT64 needs fp64.
    ``gm.mean`` runs one input as a copy, two as the element-wise mean (ELEMENT_WISE_MEAN, or
    gm.ext.MeanDesc for the extension types) and more as the n-ary mean."""
    if dt == np.float64 and device.info.backend != "cpu" and not device.info.fp64:
        pytest.skip("no fp64 on this device")
    return device


def exact_ties(rng, k, n, dt) -> np.ndarray:
    """(n, k) values of ``dt`` whose exact mean is a midpoint between two neighbours of ``dt``: k - 1
    values in [1.5, 2), the last t = k m - (their sum) in [0.5, 1) for the midpoint m = odd * 2^-p
    nearest to (sum + 0.75) / k (t is a multiple of 2^-p below 1: representable; the rows whose t
    falls outside [0.5, 1), which only BFLOAT16's 64 inputs can give, are dropped), then each row
    scaled by a power of two, negated at random and its order shuffled (all exact)."""
    p, emin, emax = FMT[dt]
    head = np.floor(rng.uniform(1.5, 2.0, (n, k - 1)) * 2.0 ** (p - 1)) / 2.0 ** (p - 1)
    s = head.sum(axis=1)                                   # exact: small integers times 2^(1-p)
    odd = np.floor(((s + 0.75) * 2.0 ** p / k - 1) / 2) * 2 + 1
    t = k * odd / 2.0 ** p - s
    keep = (t >= 0.5) & (t < 1.0)            # all of them but for large k of a short type
    assert keep.mean() > 0.4
    x = np.concatenate([head, t[:, None]], axis=1)[keep]
    n = x.shape[0]
    x = x * np.where(rng.random((n, 1)) < 0.5, -1.0, 1.0) * 2.0 ** rng.integers(emin + 1, emax - 6, (n, 1))
    x = np.take_along_axis(x, rng.random(x.shape).argsort(axis=1), axis=1)
    return as_type(x, dt)


def nary_rows(dt, k, rng) -> np.ndarray:
    """(elements, k): the named rows cut to k values, +-largest triples, exact ties of the final
    rounding, and seeded random rows of mixed and ordinary scale."""
    big, small = largest(dt), tiny(dt)
    rows = [np.resize(r, k) for r in rows_of(dt, rng).values()] + [np.resize(r, k) for r in nonfinite_rows(dt).values()]
    for triple in ([big, -big, small], [big, big, -big], [-big, -big, big], [big, -big, -small], [big, big, big],
                   [-big, small, small], [big, -big, 0.0], [-0.0, big, -big]):
        rows.append(np.resize(as_type(triple, dt), k))
    # exponents far apart, every bit significant: the FLOAT64 sum rounds and its errors' sum does not
    # (the kernels' TwoSum step), or that rounds too (the superaccumulator); FLOAT16: the FLOAT32 sum
    far = {np.dtype(np.float32): [(-40, -80), (-40, -100)], BF16: [(-50, -100), (-50, -120)],
           np.dtype(np.float16): [(-12, -23), (-6, -20)], np.dtype(np.float64): [(-60, -130), (-60, -200)]}[dt]
    for e1, e2 in far:
        for _ in range(6):
            u = rng.uniform(1.0, 2.0, 3) * np.where(rng.random(3) < 0.5, -1.0, 1.0)
            rows.append(np.resize(as_type(u * 2.0 ** np.array([0, e1, e2]), dt), k))
    rows += list(exact_ties(rng, k, 100, dt)) if k > 1 else []
    rows += [as_type(rng.standard_normal(k) * 10.0 ** rng.integers(-3, 3, k), dt) for _ in range(100)]
    rows += list(as_type(rng.standard_normal((500, k)), dt))
    return np.stack(rows)


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
@pytest.mark.parametrize("k", [1, 2, 3, 7, 64])
def test_nary_exact(device, cpu, dt, k):
    """``gm.mean`` of k inputs (k = 2: the element-wise mean; more: the n-ary mean) on every device
    against the oracle bit for bit, the CPU device's bits, and the same bits with the inputs permuted."""
    device = nary_device(device, dt, k)
    rng = np.random.default_rng(k)
    x = nary_rows(dt, k, rng)                              # (elements, inputs)
    xs = [np.ascontiguousarray(x[:, i]) for i in range(k)]
    got = gm.mean(*xs, device=device)
    check_bits(got, oracle.nary_mean(xs, dt), f"{dt} n-ary of {k}")
    if device is not cpu:
        check_bits(got, gm.mean(*xs, device=cpu), f"{dt} n-ary of {k}: the CPU device's bits")
    order = rng.permutation(k)
    check_bits(gm.mean(*[xs[i] for i in order], device=device), got, f"{dt} n-ary of {k}, inputs permuted")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
@pytest.mark.parametrize("k", [2, 3, 5])
def test_nary_layouts(device, dt, k):
    """The same rows through the other kernels: strided inputs (columns of one array), a broadcast
    input (rows kernels), and a long contiguous run whose vectors mix decided lanes with lanes that
    take the exact path; the oracle's bits every time."""
    device = nary_device(device, dt, k)
    rng = np.random.default_rng(100 + k)
    x = nary_rows(dt, k, rng)
    x = x[rng.permutation(x.shape[0])]
    cols = [x[:, i] for i in range(k)]                     # strided views
    check_bits(gm.mean(*cols, device=device), oracle.nary_mean(cols, dt), f"{dt} strided n-ary of {k}")
    n = x.shape[0] // 8 * 8
    grid = [np.ascontiguousarray(c[:n].reshape(8, -1)) for c in cols]
    grid[0] = np.ascontiguousarray(grid[0][:1])            # broadcast along the first axis
    check_bits(gm.mean(*grid, device=device), oracle.nary_mean(grid, dt), f"{dt} broadcast n-ary of {k}")
    ties = exact_ties(rng, k, 4000, dt)
    ties[::7] = as_type(rng.standard_normal((ties[::7].shape[0], k)), dt)
    ties[::13, 0] = as_type(largest(dt), dt)               # exponents too far apart: the exact path
    ts = [np.ascontiguousarray(ties[:, i]) for i in range(k)]
    check_bits(gm.mean(*ts, device=device), oracle.nary_mean(ts, dt), f"{dt} ties, n-ary of {k}")


def random_bits(rng, shape, dt) -> np.ndarray:
    """Finite values of ``dt`` with uniformly random bit patterns: every exponent, subnormals, both
    zeros (the exactness test fails for most of them: the exact path)."""
    u = np.dtype(f"u{dt.itemsize}")
    b = rng.integers(0, 1 << (8 * dt.itemsize), shape, dtype=np.uint64).astype(u)
    x = b.view(dt)
    with np.errstate(invalid="ignore"):             # NaN bit patterns (replaced)
        finite = np.isfinite(x.astype(np.float64))
    return np.where(finite, x, dt.type(1.5))


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
@pytest.mark.parametrize("k", [3, 5, 6, 11])
def test_nary_many_values(device, cpu, dt, k):
    """Many elements per kernel shape's vectors and runs: random bit patterns, normal values, small
    integers (exact ties galore), exact ties and values 2^-12 apart (the FLOAT32 sum of halves
    proved exact or not), in one long run; the oracle's bits and the CPU device's."""
    device = nary_device(device, dt, k)
    rng = np.random.default_rng(1000 + k)
    n = 6000
    parts = [random_bits(rng, (n, k), dt), as_type(rng.standard_normal((n, k)), dt),
             as_type(rng.integers(-40, 40, (n, k)), dt), exact_ties(rng, k, n, dt),
             as_type(rng.standard_normal((n, k)) * 2.0 ** rng.integers(-14, 1, (n, k)), dt)]
    x = np.concatenate(parts)
    x = x[rng.permutation(x.shape[0])]
    xs = [np.ascontiguousarray(x[:, i]) for i in range(k)]
    got = gm.mean(*xs, device=device)
    check_bits(got, oracle.nary_mean(xs, dt), f"{dt} n-ary of {k}, {x.shape[0]} elements")
    if device is not cpu:
        check_bits(got, gm.mean(*xs, device=cpu), f"{dt} n-ary of {k}: the CPU device's bits")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_long_rows(device, dt):
    """Past 2^13 FLOAT16 values (the FLOAT64 sum is no longer exact by itself) and a long FLOAT32 row
    of cancelling data (the int64 blocks of the superaccumulator; on the devices, a reduction split
    into chunks, the finalize pass and the exact pass over a long run)."""
    held(device, dt)
    cpu = device
    rng = np.random.default_rng(3)
    x = np.stack([as_type(rng.uniform(0, 1, 1 << 15), dt), cancelling(rng, 1 << 15, dt, largest(dt), 1.0)])
    check_bits(gm.reduce_mean(x, axes=[1], device=cpu), want_reduce(x, (1,), dt), f"{dt} long rows")


def test_flt_max_case_of_the_issue(device):
    held(device, np.dtype(np.float32))
    cpu = device
    # 1000 values near +-FLT_MAX whose exact mean is -0.0532: the correctly rounded float32 value
    x = cancelling(np.random.default_rng(1), 1000, np.dtype(np.float32), float(np.finfo(np.float32).max), -26.6)
    got = gm.reduce_mean(x[None], axes=[1], device=cpu)[0, 0]
    want = oracle.round_fraction(sum(oracle.exact_sum_rows(x[None])[0:1]) / 1000, np.float32)
    assert got == np.float32(want) and abs(float(got) + 0.0532) < 1e-6


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_round_ratio(dt):
    """The integer ratio rounding of the exact fallback against the oracle's Fraction rounding:
    random totals across the range, ties, subnormals and quotients past the largest value (inf)."""
    f = exact.fmt(dt)
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(400):
        bitsz = int(rng.integers(1, f.emax - f.unit + 40))
        t = int(rng.integers(1, 1 << 62)) << max(0, bitsz - 62)
        n = int(rng.integers(1, 1 << int(rng.integers(1, 33))))
        cases.append((t if rng.random() < 0.5 else -t, n))
    top = int((2 - Fraction(2) ** (1 - f.p)) * Fraction(2) ** f.emax / Fraction(2) ** f.unit)
    half_ulp = 1 << (f.emax - f.p + 1 - f.unit - 1)
    cases += [(top, 1), (top + half_ulp - 1, 1), (top + half_ulp, 1), (3 * top, 2), (3, 2), (1, 2), (5, 2),
              (7, 4), (1, 3), (-1, 2), ((1 << f.p) + 1, 2), (2 * top + 2 * half_ulp, 2)]
    for t, n in cases:
        want = oracle.round_fraction(Fraction(t) * Fraction(2) ** f.unit / n, dt)
        got = exact.round_ratio(t, n, f)
        assert got == want or (math.isnan(got) and math.isnan(want)), f"{t} * 2^{f.unit} / {n}: {got!r} != {want!r}"


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_limbs_add_in_any_grouping(dt):
    """Exact partial totals (the superaccumulator's digits) of any chunking give the same mean."""
    rng = np.random.default_rng(11)
    x = np.stack([np.resize(r, 240) for r in rows_of(dt, rng).values()])
    want = want_reduce(x, (1,), dt).reshape(-1)
    for cuts in ([], [1], [7, 100, 101], sorted(rng.choice(239, 12, replace=False) + 1)):
        parts = np.split(x, cuts, axis=1)
        total = exact.limbs(parts[0], (1,), dt)
        flags = exact.nonfinite_flags(parts[0], (1,))
        for p in parts[1:][::-1] if len(parts) % 2 else parts[1:]:
            total = exact.add_limbs(total, exact.limbs(p, (1,), dt))
            flags = exact.merge_flags(flags, exact.nonfinite_flags(p, (1,)))
        got = exact.mean_from_limbs(total, flags, x.shape[1], dt).reshape(-1)
        check_bits(got, want, f"{dt} cut at {cuts}")


def adversarial_matrix(dt, rng, n=240):
    rows = [np.resize(r, n) for r in rows_of(dt, rng).values()] + [np.resize(r, n) for r in nonfinite_rows(dt).values()]
    return np.stack(rows + [as_type(rng.standard_normal(n), dt) for _ in range(8)])


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_split_chunkings_give_the_same_bits(dt):
    """Calls cut into pieces along the reduced axis (lowered buffer limits): the exact totals of the
    pieces give the bits of one launch, which are the oracle's, at every limit."""
    rng = np.random.default_rng(21)
    x = np.ascontiguousarray(adversarial_matrix(dt, rng).T)          # (240 values, outputs)
    want = want_reduce(x, (0,), dt)
    check_bits(gm.reduce_mean(x, axes=[0], device="cpu"), want, f"{dt} one launch")
    for limit in (1 << 16, 12288, 8192, 4096):
        small = gm.create_device("cpu", max_alloc_bytes=limit)
        check_bits(gm.reduce_mean(x, axes=[0], device=small), want, f"{dt} pieces of at most {limit} bytes")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_dask_chunkings_give_the_same_bits(dt):
    da = pytest.importorskip("dask.array")
    import gpu_mean.dask as gmd
    rng = np.random.default_rng(23)
    x = adversarial_matrix(dt, rng)                                   # (outputs, 240 values)
    want = want_reduce(x, (1,), dt)
    for chunks, every in (((x.shape[0], 240), None), ((7, 17), 2), ((x.shape[0], 1), 3), ((5, 100), 4)):
        got = gmd.reduce_mean(da.from_array(x, chunks=chunks), [1], device="cpu",
                              split_every=every).compute(scheduler="synchronous")
        check_bits(got, want, f"{dt} Dask chunks {chunks}, split_every={every}")
    perm = x[:, rng.permutation(x.shape[1])]
    got = gmd.reduce_mean(da.from_array(perm, chunks=(9, 31)), [1], device="cpu").compute(scheduler="synchronous")
    check_bits(got, want, f"{dt} Dask, permuted")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_every_kernel_class(device, dt):
    """The adversarial rows through every reduction kernel the planner picks: rows, short rows of 8,
    16, 24 and 32 (the CPU shape's short-rows kernel), columns, two axes apart (general and
    interleaved runs), a full reduction split into chunks (finalize); each the oracle's bits, hence
    the CPU device's, whatever the kernel, layout or order of the values."""
    held(device, dt)
    rng = np.random.default_rng(2022)
    for n in (240, 8, 16, 24, 32):
        x = adversarial_matrix(dt, rng, n)
        want = want_reduce(x, (1,), dt)
        check_bits(gm.reduce_mean(x, axes=[1], device=device), want, f"{dt} rows of {n}")
        check_bits(gm.reduce_mean(np.ascontiguousarray(x.T), axes=[0], device=device).T, want,
                   f"{dt} columns of {n}")
        perm = x[:, rng.permutation(n)]
        check_bits(gm.reduce_mean(perm, axes=[1], device=device), want, f"{dt} rows of {n}, permuted")
    x = adversarial_matrix(dt, rng, 240)
    want = want_reduce(x, (1,), dt)
    # (12, outputs, 20) reduced over axes 0 and 2: the reduced axes lie apart
    apart = np.ascontiguousarray(x.reshape(x.shape[0], 12, 20).transpose(1, 0, 2))
    check_bits(gm.reduce_mean(apart, axes=[0, 2], device=device).reshape(-1, 1), want, f"{dt} axes apart")
    # a short innermost run under an interleaved outer axis (the general walk)
    apart = np.ascontiguousarray(x.reshape(x.shape[0], 60, 4).transpose(1, 0, 2))
    check_bits(gm.reduce_mean(apart, axes=[0, 2], device=device).reshape(-1, 1), want, f"{dt} short runs apart")
    # whole reductions of long cancelling and spanning data: chunks, then the finalize pass
    for name, row in (("cancelling", cancelling(rng, 1 << 16, dt, largest(dt), 3.0)),
                      ("spanning", spanning(rng, 1 << 16, dt))):
        got = gm.reduce_mean(row, axes=[0], device=device)
        check_bits(got, want_reduce(row, (0,), dt), f"{dt} whole {name}")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
def test_zero_rule(device, dt):
    """Issue 22's rule for zeros, on every kernel: an exact zero total is -0.0 when every value is
    -0.0 (IEEE's sum), +0.0 otherwise; a negative mean that rounds to zero is -0.0."""
    held(device, dt)
    t = tiny(dt)
    rows = [[-0.0] * 8, [0.0] * 8, [-0.0, 0.0] * 4, [1.5, -1.5] * 4, [-t] + [0.0] * 7, [-t, -0.0] * 4, [t] + [-0.0] * 7]
    x = as_type(rows, dt)
    sign = [True, False, False, False, True, True, False]
    for n in (8, 24, 240):
        # longer rows keep their meaning: zeros of the row's own sign added
        pad = np.where(np.array(sign)[:, None], -0.0, 0.0) * np.ones((1, n - 8))
        xs = np.concatenate([x, as_type(pad, dt)], 1)
        many = np.repeat(xs, 5, axis=0)     # enough outputs for the short-rows kernel
        got = gm.reduce_mean(many, axes=[1], device=device).reshape(-1)
        want_sign = [s for s in sign for _ in range(5)]
        assert list(np.signbit(got.astype(np.float64))) == want_sign, f"{dt} rows of {n}: {got}"
        assert np.all(got.astype(np.float64) == 0), f"{dt} rows of {n}: {got}"
        col = gm.reduce_mean(np.ascontiguousarray(many.T), axes=[0], device=device).reshape(-1)
        check_bits(col, got, f"{dt} columns of {n}")


@pytest.mark.parametrize("dt", TYPES, ids=IDS)
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("layout", ["packed", "padded_rows"])
def test_nary_in_place(device, dt, k, layout):
    """The n-ary mean executed in place (the output bound over input 0, as DirectML allows) with
    elements that take the exact path among ones that do not: the exact path reads the element's
    inputs again, so it must read them before the result overwrites input 0 (the fuzzer found a
    one-element case on the GPU shape that read the result back as an input)."""
    from helpers import upload
    device = nary_device(device, dt, k)
    rng = np.random.default_rng(31 + k)
    shape, strides = ((1000,), None) if layout == "packed" else ((8, 100), (128, 1))
    n = int(np.prod(shape))
    x = as_type(rng.standard_normal((n, k)), dt)
    big = {np.dtype(np.float16): 2.0 ** 15, np.dtype(np.float32): 2.0 ** 60}.get(dt, 2.0 ** 100)
    far = rng.random(n) < 0.3           # exponents too far apart for the fast sum: the exact path
    x[far, 0] = as_type(rng.uniform(1, 2, far.sum()) * big, dt)
    x[far, -1] = as_type(rng.uniform(-1, 1, far.sum()) * 2.0 ** -14, dt)
    xs = [np.ascontiguousarray(x[:, i]).reshape(shape) for i in range(k)]
    want = oracle.nary_mean(xs, dt)
    gt = {np.dtype(np.float16): gm.DataType.FLOAT16, np.dtype(np.float32): gm.DataType.FLOAT32,
          np.dtype(np.float64): gm.DataType.FLOAT64}.get(dt)
    t = gm.TensorDesc(gt or gm.DataType.BFLOAT16, shape, strides)
    bufs = [upload(device, t, xi, pad=32) for xi in xs]
    binds = [gm.BufferBinding(b, 32, t.total_size_in_bytes) for b in bufs]
    cop = device.compile_operator(device.create_operator(gm.ext.NaryMeanDesc([t] * k, t)))
    cop.execute(inputs=binds, outputs=[binds[0]])
    check_bits(bufs[0].read_tensor(t, 32), want, f"{dt} n-ary of {k} in place, {layout}")


@pytest.mark.parametrize("dt", [np.dtype(np.float32), BF16], ids=["float32", "bfloat16"])
def test_small_values_a_double_sum_drops_are_not_lost(device, dt):
    """Rows of (2^20, s, -2^20) triples, s about 2^-34, and two values b1, b2 that set the mean (near
    2^-11 for FLOAT32, 2^-27 for BFLOAT16, b2 nine binades below b1 so that the means fall anywhere
    within an ulp): a FLOAT64 sum drops s whenever it meets 2^20 in a partial sum, whatever the order
    the kernel adds in, and in this data dropping them changes the rounding of some rows (checked
    below: the test's premise). Only a valid error bound sends such outputs to the exact pass; a
    bound too small (the mutants gpu-running-bound-too-tight, -skips-merges) stores a wrong rounding.
    Rows and columns: both kernel shapes' loops."""
    held(device, dt)
    rng = np.random.default_rng(40)
    rows, n = 64, 3 * 512 + 2
    e = -11 if dt == np.float32 else -27
    x = np.empty((rows, n), np.float64)
    x[:, 0:-2:3], x[:, 2:-2:3] = 2.0 ** 20, -(2.0 ** 20)
    x[:, 1:-2:3] = np.ldexp(rng.uniform(1.0, 2.0, (rows, n // 3)), -34) * rng.choice([1.0, 1.0, -1.0], (rows, n // 3))
    x[:, -2] = n * np.ldexp(rng.uniform(1.0, 2.0, rows), e)
    x[:, -1] = n * np.ldexp(rng.uniform(1.0, 2.0, rows), e - 9)
    x = as_type(x, dt)
    want = want_reduce(x, (1,), dt)
    dropped = x.copy()
    dropped[:, 1:-2:3] = 0
    assert not oracle.equal_bits(want_reduce(dropped, (1,), dt), want), "no row's rounding needs the small values"
    check_bits(gm.reduce_mean(x, axes=[1], device=device), want, f"{dt} rows")
    xt = np.ascontiguousarray(x.T)
    check_bits(gm.reduce_mean(xt, axes=[0], device=device), want_reduce(xt, (0,), dt), f"{dt} columns")
