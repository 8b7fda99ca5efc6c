"""The CPU device's span proof (runtime/exact.py: magnitude_span, exact_f64_sum): a FLOAT64 sum of
narrow floats is exact when n times the largest magnitude fits in 53 bits above the smallest
nonzero magnitude's ulp; then the bound is zero, an exact mean over a power of two is rounded once
(ties to even), and what the quotient's rounding leaves open is decided from the sum alone."""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_mean as gm
from gpu_mean.runtime import exact

BF16 = ml_dtypes.bfloat16
F32_TIES = {
    # mean 1 + 2^-24, halfway between 1 and 1 + 2^-23: ties to even give 1
    "two values, a tie": ([1.0, 1.0 + 2.0 ** -23], 1.0),
    # sum 3 + 3 * 2^-24 over three: the same tie, through a quotient FLOAT64 rounds
    "three values, a tie": ([1.0 + 2.0 ** -23, 1.0 + 2.0 ** -23, 1.0 - 2.0 ** -24], 1.0),
    # mean 1 + 3 * 2^-24, halfway between 1 + 2^-23 and 1 + 2^-22: to even, up
    "two values, a tie rounding up": ([1.0 + 2.0 ** -23, 1.0 + 2.0 ** -22], 1.0 + 2.0 ** -22),
    # a tie among subnormal results: (2^-149 + 2^-148) / 2 = 1.5 * 2^-149, to even: 2^-148
    "subnormal tie": ([2.0 ** -149, 2.0 ** -148], 2.0 ** -148),
}


@pytest.mark.parametrize("name", list(F32_TIES))
def test_exact_ties_round_to_even_on_every_device(device, name):
    values, want = F32_TIES[name]
    x = np.array([values], np.float32)
    got = gm.reduce_mean(x, [1], device=device)
    assert got.reshape(()).view(np.uint32) == np.float32(want).view(np.uint32), (got, want)


def test_ties_are_settled_without_the_digits(monkeypatch):
    """The proof decides exact ties from the FLOAT64 sum: the values' digits (the superaccumulator)
    and the double-double pass are never reached for them."""
    def refuse(*a, **k):
        raise AssertionError("an output the span proof settles went to the exact digits")
    monkeypatch.setattr(exact, "open_means", refuse)
    for values, want in F32_TIES.values():
        x = np.array([values], np.float32)
        assert exact.reduce_narrow(x, (1,), np.float32).reshape(()) == np.float32(want)
    rng = np.random.default_rng(0)
    for n in (3, 16, 256):        # normal data: every sum exact, every output settled
        x = rng.standard_normal((64, n)).astype(np.float32)
        exact.reduce_narrow(x, (1,), np.float32)


def test_the_span_limit():
    """Exact up to n * m == 2^(e + 53), not one step past it; all zeros are exact; an inf or NaN
    gives no span."""
    assert exact.exact_f64_sum(2, 2.0 ** 52, 0)
    assert not exact.exact_f64_sum(2, math.nextafter(2.0 ** 52, math.inf), 0)
    assert exact.exact_f64_sum(4, 1.0, -51) and not exact.exact_f64_sum(4, 1.0, -52)
    assert exact.exact_f64_sum(10 ** 9, 1e30, None)
    assert exact.magnitude_span(np.zeros(3, np.float32), np.float32) == (0.0, None)
    assert exact.magnitude_span(np.array([1, np.nan], np.float32), np.float32) is None
    assert exact.magnitude_span(np.array([1, -np.inf], BF16), BF16) is None
    for dt, ulp in ((np.float32, -23), (np.float16, -10), (BF16, -7)):
        m, e = exact.magnitude_span(np.array([0.0, -1.0, 0.5], dt), dt)
        assert (m, e) == (1.0, ulp - 1)


@settings(max_examples=300, deadline=None)
@given(st.integers(-160, 90), st.lists(st.tuples(st.integers(0, 36), st.integers(0, (1 << 23) - 1), st.booleans()),
                                       min_size=1, max_size=40))
def test_a_sum_the_proof_calls_exact_is_exact(base, parts):
    """Soundness: wherever exact_f64_sum holds, numpy's FLOAT64 sum (any order it takes) equals the
    exact sum; float32 values of any significands, their exponents within 36 binades of each other
    (around the limit) from the subnormals up."""
    vals = []
    for off, frac, neg in parts:
        e = base + off
        v = math.ldexp(1 + frac / 2 ** 23, e) if e > -127 else math.ldexp(frac, -149)
        v = float(np.float32(v)) if np.isfinite(np.float32(v)) else 0.0
        vals.append(-v if neg else v)
    x = np.array(vals, np.float32)
    span = exact.magnitude_span(x, np.float32)
    assert span is not None
    if exact.exact_f64_sum(x.size, *span):
        assert Fraction(float(np.sum(x, dtype=np.float64))) == sum(Fraction(float(v)) for v in x)


# a reducer prepared for one shape (exact.narrow_reducer: the CPU device's repeated calls) against
# reduce_narrow, bit for bit: named sets (zeros, ties, a span too wide, inf and NaN, zero means) and
# seeded random data, over trailing, leading and middle axes, packed and strided
PREPARED_SETS = {
    "normal": lambda rng, s: rng.standard_normal(s),
    "a zero among them": lambda rng, s: np.where(np.arange(math.prod(s)).reshape(s) == 5, 0.0, rng.standard_normal(s)),
    "ties": lambda rng, s: np.where(np.arange(math.prod(s)).reshape(s) % 2, 1.0, 1.0 + 2.0 ** -23),
    "a span too wide": lambda rng, s: rng.standard_normal(s) * np.exp2(rng.integers(-60, 60, s)),
    "cancelling to zero means": lambda rng, s: np.where(np.arange(math.prod(s)).reshape(s) % 2, 1.5, -1.5),
    "an inf": lambda rng, s: np.where(np.arange(math.prod(s)).reshape(s) == 3, np.inf, rng.standard_normal(s)),
    "a NaN": lambda rng, s: np.where(np.arange(math.prod(s)).reshape(s) == 3, np.nan, rng.standard_normal(s)),
}
PREPARED_LAYOUTS = [((16, 16), (1,)), ((256, 256), (1,)), ((256, 256), (0,)), ((4, 8, 32), (1,)),
                    ((128, 64, 4), (0, 1)), ((12, 10), (1,)), ((3, 1024), (1,))]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", list(PREPARED_SETS))
def test_a_reducer_prepared_for_a_shape_gives_reduce_narrows_bits(dtype, name):
    rng = np.random.default_rng(len(name))
    for shape, axes in PREPARED_LAYOUTS:
        with np.errstate(over="ignore", invalid="ignore"):
            base = PREPARED_SETS[name](rng, shape[:-1] + (2 * shape[-1],)).astype(dtype)
        for x in (np.ascontiguousarray(base[..., ::2]), base[..., ::2]):      # packed, then strided
            reduce = exact.narrow_reducer(x.shape, axes, dtype, x.flags.c_contiguous)
            got, want = reduce(x), exact.reduce_narrow(x, axes, dtype)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (name, shape, axes)


def test_a_prepared_reducer_takes_its_own_path_for_ordinary_data(monkeypatch):
    """Ordinary data over a power-of-two count never reaches reduce_narrow; a zero, a span too wide
    and a count that is not a power of two do."""
    general = []
    real = exact.reduce_narrow
    monkeypatch.setattr(exact, "reduce_narrow", lambda *a, **k: general.append(a) or real(*a, **k))
    rng = np.random.default_rng(1)
    for shape, axes in (((16, 16), (1,)), ((256, 256), (1,)), ((256, 256), (0,)), ((8, 64, 4), (1,))):
        x = rng.standard_normal(shape).astype(np.float32)
        exact.narrow_reducer(shape, axes, np.float32, True)(x)
    assert general == []
    x = rng.standard_normal((16, 16)).astype(np.float32)
    x[3, 3] = 0
    exact.narrow_reducer(x.shape, (1,), np.float32, True)(x)
    wide = (x * np.exp2(rng.integers(-60, 60, x.shape))).astype(np.float32)
    exact.narrow_reducer(x.shape, (1,), np.float32, True)(wide)
    exact.narrow_reducer((16, 12), (1,), np.float32, True)(x[:, :12].copy())
    assert len(general) == 3


def test_a_prepared_reducer_refuses_a_sum_float64_would_round():
    """1 + 2^-24 + 2^-55 (1 + 2^-23) - 2^-55: the exact sum lies 2^-78 above a FLOAT32 tie, which a
    FLOAT64 sum in order loses (79 bits), leaving the tie, rounded to even: down. The span (55
    binades) is past what a sum of 4 proves exact, so the prepared reducer must take the exact path
    and round up."""
    row = np.array([1.0, 2.0 ** -24, 2.0 ** -55 * (1 + 2.0 ** -23), -(2.0 ** -55)], np.float32)
    want = np.float32((1 + 2.0 ** -23) / 4)
    for x, axes in ((np.tile(row, (4, 1)), (1,)), (np.tile(row, (4, 1)).T.copy(), (0,))):
        got = exact.narrow_reducer(x.shape, axes, np.float32, True)(x)
        assert np.all(got == want), got
        assert np.array_equal(got, exact.reduce_narrow(x, axes, np.float32))
