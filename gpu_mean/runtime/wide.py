"""Wide arithmetic in numpy for the extension types (BFLOAT16, FLOAT64, INT64, UINT64): what
``numerics.py`` computes them with, vectorized over whole tensors (docs/design.md, "Extension types").

* BFLOAT16 is storage only. Widening to FLOAT32 is exact; narrowing rounds once to nearest even, NaN
  stays NaN (a quiet NaN of the same sign). From FLOAT64 the rounding goes through FLOAT32 rounded to
  odd (truncated, the last bit set when inexact): with 24 >= 8 + 2 bits that second rounding is
  correct (Boldo and Melquiond), where FLOAT64 -> FLOAT32 -> BFLOAT16 to nearest twice is not (and
  ml_dtypes' own float64 cast rounds twice).
* FLOAT64 sums are double-doubles (hi + lo): Knuth's TwoSum and the accurate double-double addition
  (Joldes, Muller and Popescu's AccurateDWPlusDW, relative error below 3 * 2^-106), added pairwise
  over a reduced axis. The mean divides the double-double once by n and rounds once. A sum that
  overflows while every input is finite is recomputed scaled by 2^-64 (exact for the values that
  matter there); rows with an inf or NaN input give NaN, or the one infinity present, whatever the order.
* INT64/UINT64 sums are exact in 128 bits, kept as A * 2^32 + B (A a 64-bit word, 0 <= B < 2^32):
  each value's high and low 32-bit halves are summed in 64 bits, which cannot wrap for the 2^32 - 1
  elements a tensor holds. The quotient by n < 2^32 is long division in 32-bit digits, truncated
  toward zero (INT64_MIN's magnitude 2^63 included).
"""
from __future__ import annotations

import math

import numpy as np

from ..descriptors.types import bfloat16_dtype

F32, F64, U64, I64 = np.float32, np.float64, np.uint64, np.int64
M32 = U64(0xFFFFFFFF)
SCALE_DOWN, SCALE_UP = F64(2.0**-64), F64(2.0**64)


# -- BFLOAT16 ---------------------------------------------------------------------------------------

def f32_to_bf16(x) -> np.ndarray:
    """FLOAT32 -> BFLOAT16, round to nearest even (overflow gives inf); NaN -> quiet NaN, sign kept."""
    x = np.ascontiguousarray(x, F32)
    b = x.view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if np.any(nan):
        r = np.where(nan, ((b >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), r)
    return r.view(bfloat16_dtype())


def f64_to_bf16(q) -> np.ndarray:
    """FLOAT64 -> BFLOAT16 rounded once to nearest even (through FLOAT32 rounded to odd)."""
    q = np.ascontiguousarray(q, F64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = q.astype(F32)
        back = f.astype(F64)
        # rounded away from zero (a finite q past FLT_MAX too, to inf): one step back in the magnitude
        # bits truncates it (inf - 1 is FLT_MAX); then the sticky bit where inexact (a NaN stays a NaN)
        away = np.abs(back) > np.abs(q)
        bits = f.view(np.uint32) - away.view(np.uint8).astype(np.uint32)
        bits |= (back != q).view(np.uint8).astype(np.uint32)
    return f32_to_bf16(bits.view(F32))


# -- double-double ----------------------------------------------------------------------------------

def two_sum(a, b):
    """s + e == a + b exactly (finite a, b, no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


# Values one numpy pass of the elementwise helpers below takes at once, where they run over many
# outputs (by_blocks). Dask's workers run with MALLOC_TRIM_THRESHOLD_ set (distributed's nanny), which
# makes glibc serve every allocation of 128 KiB or more by a fresh mmap: each numpy temporary then
# faults in all its pages. A TwoSum over 32768 outputs took 3 ms there against 0.1 ms in a plain
# process (docs/results/2026-11-28-s21-dask.md); temporaries of 2^12 doubles (32 KiB) come from the
# heap, reused, and stay in cache.
BLOCK = 1 << 12


def by_blocks(fn, *args):
    """``fn(*args)`` for an elementwise ``fn`` that returns a tuple of arrays of its arguments' broadcast
    shape, computed over flat blocks of BLOCK values (one output array each, allocated once)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    n = math.prod(shape)
    if n <= BLOCK:
        return fn(*args)
    flat = [np.broadcast_to(a, shape).reshape(-1) if np.ndim(a) else a for a in args]
    outs = None
    for i in range(0, n, BLOCK):
        part = fn(*(a[i:i + BLOCK] if np.ndim(a) else a for a in flat))
        if outs is None:
            outs = tuple(np.empty(n, r.dtype) for r in part)
        for o, r in zip(outs, part):
            o[i:i + BLOCK] = r
    return tuple(o.reshape(shape) for o in outs)


def dd_add_exact(h, c, xh, xc):
    """(h, c) + (xh, xc) as (h', c', inexact) with h' + c' == h + c + xh + xc exactly where ``inexact``
    is False: one TwoSum of the heads, whose error and the other tail join c by TwoSums that must not
    err (an inf or NaN anywhere gives NaN errors: inexact). Not normalized; -0.0 + -0.0 stays -0.0 in h'.
    Over blocks of BLOCK outputs (by_blocks)."""
    return by_blocks(_dd_add_exact, h, c, xh, xc)


def dd_add_exact_along(h, c, bad, axis: int):
    """The pairs (h, c) added over ``axis`` by ``dd_add_exact``, with their flags ``bad`` and the
    additions' own: (h', c', bad') without that axis. A few (the 8 lanes; the CPU shape's segments)
    are added one after another over views; more (the GPU shape's thousands of segments) pairwise, a
    level at a time, with the axis moved to the front once so that every level's halves are contiguous:
    numpy passes over whole arrays, however many pairs the axis holds."""
    n = h.shape[axis]
    if n <= 16:
        def at(a, i):
            return a[(slice(None),) * axis + (i,)]
        th, tc, tb = at(h, 0), at(c, 0), at(bad, 0)
        for i in range(1, n):
            th, tc, b = dd_add_exact(th, tc, at(h, i), at(c, i))
            tb = tb | b | at(bad, i)
        return th, tc, tb
    h, c, bad = (np.ascontiguousarray(np.moveaxis(a, axis, 0)) for a in (h, c, bad))
    while h.shape[0] > 1:
        k = h.shape[0] // 2
        nh, nc, b = dd_add_exact(h[:k], c[:k], h[k:2 * k], c[k:2 * k])
        nb = bad[:k] | bad[k:2 * k] | b
        if h.shape[0] % 2:          # the odd one out, kept for the next level
            nh, nc, nb = (np.concatenate([s, a[2 * k:]], 0) for s, a in ((nh, h), (nc, c), (nb, bad)))
        h, c, bad = nh, nc, nb
    return h[0], c[0], bad[0]


def _dd_add_exact(h, c, xh, xc):
    with np.errstate(invalid="ignore", over="ignore"):
        s, e = two_sum(h, xh)
        t, f1 = two_sum(c, e)
        u, f2 = two_sum(t, xc)
        return s, u, (f1 != 0) | (f2 != 0)         # an inf or NaN makes the errors NaN: flagged too


def _fast_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def dd_add(ah, al, bh, bl):
    """(ah + al) + (bh + bl) as a normalized double-double (AccurateDWPlusDW)."""
    s, t = two_sum(ah, bh)
    u, v = two_sum(al, bl)
    s, t = _fast_two_sum(s, t + u)
    return _fast_two_sum(s, t + v)


def dd_sum0(x: np.ndarray):
    """Double-double sums over axis 0 of ``x`` (float64, at least one row), added pairwise: an odd
    row out at each level joins a side accumulator. Returns (hi, lo) shaped as ``x[0]``."""
    hi, lo = x, None
    side = None
    while hi.shape[0] > 1:
        if hi.shape[0] % 2:
            last = (hi[-1], lo[-1] if lo is not None else np.zeros_like(hi[-1]))
            side = last if side is None else dd_add(*side, *last)
            hi = hi[:-1]
            lo = lo[:-1] if lo is not None else None
        if lo is None:
            hi, lo = two_sum(hi[0::2], hi[1::2])
        else:
            hi, lo = dd_add(hi[0::2], lo[0::2], hi[1::2], lo[1::2])
    h, tail = hi[0].copy(), (lo[0] if lo is not None else np.zeros_like(hi[0]))
    if side is not None:
        h, tail = dd_add(h, tail, *side)
    return h, tail


def _split26(q):
    """q = qh + ql with qh the top 26 significand bits (a bit mask: no overflow for any finite q)."""
    qh = (np.ascontiguousarray(q).view(U64) & ~U64((1 << 27) - 1)).view(F64)
    return qh, q - qh


def dd_div(h, tail, n: int):
    """(h + tail) / n rounded once to FLOAT64 (n a positive integer below 2^53): q = h / n, then the
    remainder h + tail - q * n, exact through Dekker's product (q split by bits, n by its value).
    Near DBL_MAX q * n can round past it (the remainder is then inf - inf): finite totals from 2^1000
    on are divided scaled by 2^-64 (exact at that magnitude) and the quotient scaled back."""
    n = int(n)
    if n == 1:
        return h + tail
    with np.errstate(over="ignore", invalid="ignore"):
        big = (np.abs(h) >= F64(2.0**1000)) & np.isfinite(h)
        if not np.any(big):
            return _dd_div(h, tail, n)
        h, tail = np.broadcast_arrays(np.asarray(h, F64), np.asarray(tail, F64))
        q = _dd_div(h, tail, n)
        q[big] = _dd_div(h[big] * SCALE_DOWN, tail[big] * SCALE_DOWN, n) * SCALE_UP
        return q


def _dd_div(h, tail, n: int):
    q = h / F64(n)
    nh, nl = F64(n - n % (1 << 26)), F64(n % (1 << 26))
    qh, ql = _split26(q)
    p = q * F64(n)
    pe = ((qh * nh - p) + qh * nl + ql * nh) + ql * nl
    r = (((h - p) - pe) + tail) / F64(n)
    return np.where(r == 0, q, q + r)   # r == 0 keeps q's sign (the mean of -0.0s is -0.0)


def nonfinite_sum_value(has_nan, has_pinf, has_ninf):
    """The sum of values among which an inf or NaN is: NaN, or the one infinity present."""
    return np.where(has_nan | (has_pinf & has_ninf), F64(np.nan), np.where(has_pinf, F64(np.inf), F64(-np.inf)))


def _dd_total0(x: np.ndarray):
    """The FLOAT64 total over axis 0 as a normalized double-double, with IEEE's answers where the
    arithmetic of a double-double has none: a zero total is -0.0 only when every input is -0.0; a
    total past DBL_MAX with finite inputs is recomputed scaled by 2^-64 (``scaled`` marks those
    columns, whose (hi, lo) are returned scaled); inputs with an inf or NaN give NaN or the one
    infinity present (lo 0)."""
    h, tail = dd_sum0(x)
    scaled = None
    zero = h == 0
    if np.any(zero):
        h[zero] = np.where(np.all(np.signbit(x[:, zero]), axis=0), F64(-0.0), F64(0.0))
    bad = ~np.isfinite(h)
    if np.any(bad):
        cols = np.flatnonzero(bad)
        xs = x[:, cols]
        finite_in = np.all(np.isfinite(xs), axis=0)
        over = cols[finite_in]
        if over.size:
            h[over], tail[over] = dd_sum0(x[:, over] * SCALE_DOWN)
            scaled = over
        nf, xs = cols[~finite_in], xs[:, ~finite_in]
        if nf.size:
            h[nf] = nonfinite_sum_value(np.any(np.isnan(xs), axis=0), np.any(xs == np.inf, axis=0),
                                        np.any(xs == -np.inf, axis=0))
            tail[nf] = 0
    return h, tail, scaled


def f64_nary_mean(xs: list) -> np.ndarray:
    """The FLOAT64 mean of same-shaped 1-D arrays: each added to a double-double (Dekker's
    double-double + double: relative error below 2 * 2^-106), one division, one rounding; the rare
    elements the running sum cannot give (a zero's sign, an overflow, an inf or NaN) as ``f64_mean0``."""
    with np.errstate(over="ignore", invalid="ignore"):
        h, t = xs[0].astype(F64), np.zeros(xs[0].shape, F64)
        for x in xs[1:]:
            s, e = two_sum(h, x)
            h, t = _fast_two_sum(s, e + t)
        out = dd_div(h, t, len(xs))
        odd = (h == 0) | ~np.isfinite(h)
        if np.any(odd):
            out[odd] = f64_mean0(np.stack([x[odd] for x in xs]))
    return out


def f64_mean0(x: np.ndarray) -> np.ndarray:
    """The FLOAT64 mean over axis 0 of a 2-D array: double-double sum, one division, one rounding,
    no overflow."""
    with np.errstate(over="ignore", invalid="ignore"):
        h, tail, scaled = _dd_total0(x)
        out = np.where(np.isfinite(h), dd_div(h, tail, x.shape[0]), h)   # an inf or NaN total is the mean
        if scaled is not None:     # the quotient of a scaled total is a mean <= the largest input: exact to scale back
            out[scaled] *= SCALE_UP
    return out


def f64_sum0(x: np.ndarray):
    """The FLOAT64 total over axis 0 of a 2-D array as a normalized double-double (hi, lo); lo is 0
    where hi is not finite (an inf or NaN input, or a total past DBL_MAX)."""
    with np.errstate(over="ignore", invalid="ignore"):
        h, tail, scaled = _dd_total0(x)
        if scaled is not None:
            h[scaled] *= SCALE_UP
            tail[scaled] *= SCALE_UP
        tail = np.where(np.isfinite(h), tail, F64(0))
    return h, tail


# -- 128-bit integers -------------------------------------------------------------------------------

def int_sum0(x: np.ndarray):
    """The exact total over axis 0 of INT64 or UINT64 values as (A, B): A * 2^32 + B, A of the
    input's type, B (UINT64) in [0, 2^32). At most 2^32 - 1 rows (a tensor's element count)."""
    signed = x.dtype == np.int64
    u = x.view(U64) if signed else x
    lo = np.sum(u & M32, axis=0, dtype=U64)
    if signed:
        hi = np.sum(x >> I64(32), axis=0, dtype=I64)    # arithmetic shift: the signed high half
        return hi + (lo >> U64(32)).astype(I64), lo & M32
    return np.sum(u >> U64(32), axis=0, dtype=U64) + (lo >> U64(32)), lo & M32


def trunc_div128(a, b, n: int):
    """(a * 2^32 + b) / n truncated toward zero, for 1 <= n < 2^32 and a quotient that fits the type
    of ``a`` (INT64: its magnitude may be 2^63, which is INT64_MIN)."""
    n = U64(n)
    if a.dtype == np.int64:
        # negative totals by their magnitude: -(a * 2^32 + b) = (-a - [b > 0]) * 2^32 + (2^32 - b) mod 2^32.
        # Selections are bit blends (x ^ ((x ^ y) & mask)): numpy's where on 64-bit values of random
        # sign runs 6x slower (docs/results/2026-11-24-ext-cpu.md)
        neg = (a >> I64(63)).view(U64)                   # all ones where the total is negative
        borrow = neg & (U64(0) - (b != 0).view(np.uint8).astype(U64))
        au = a.view(U64)
        mh = au ^ ((au ^ (U64(0) - au - (borrow & U64(1)))) & neg)   # a > -2^63: its magnitude fits
        ml = b ^ ((b ^ ((U64(1 << 32) - b) & M32)) & borrow)
    else:
        neg, mh, ml = None, a, b
    q1 = mh // n
    r1 = mh - q1 * n         # a product is cheaper than numpy's uint64 remainder
    q = (q1 << U64(32)) + ((r1 << U64(32)) | ml) // n
    if neg is None:
        return q
    return (q ^ ((q ^ (U64(0) - q)) & neg)).view(I64)


def words128(a, b):
    """A * 2^32 + B as (hi, lo) 64-bit words: hi * 2^64 + lo, hi of A's type, lo UINT64."""
    lo = ((a.astype(U64) & M32) << U64(32)) | b
    return a >> a.dtype.type(32), lo


def from_words128(hi, lo):
    """(hi, lo) 64-bit words as (A, B) (the inverse of ``words128`` for totals below 2^95 in
    magnitude); None when A would not fit its 64 bits."""
    a_top = hi << hi.dtype.type(32)
    a = a_top | (lo >> U64(32)).astype(hi.dtype)
    fits = (a >> hi.dtype.type(32)) == hi
    if not np.all(fits):
        return None
    return a, lo & M32
