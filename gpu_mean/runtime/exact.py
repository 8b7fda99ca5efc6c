"""Correctly rounded float means for every input (docs/design.md, "Correct rounding"): the
CPU device's fast path with an error bound, the exact fallback, and the exact partial sums that cross
chunk and Dask boundaries. numpy only; no floating point decides a result the bound does not settle.

* Fast path: the FLOAT64 sum ``s`` of n narrow values (FLOAT16/FLOAT32/BFLOAT16), in any order numpy
  chooses, is within ``gamma(n - 1) * sum|x| <= gamma(n - 1) * n * M`` of the exact sum S (M = max|x|,
  gamma(k) = k*u / (1 - k*u), u = 2^-53; Higham, Accuracy and Stability, eq. 4.4, which holds for every
  summation tree). The exact mean lies in [q - E, q + E] (q = s / n, E covers the division's rounding
  too); when both ends round to the same value of the output type, that value is the correctly
  rounded mean (rounding is monotonic). FLOAT64 uses the double-double sums of ``wide.py`` and decides
  in double-double whether S / n lies strictly between the two midpoints around the candidate.
* Exact fallback, for the outputs the bound leaves open (cancelling data, exact ties, a zero total):
  each value's integer significand, shifted to its place in 16-bit digits, is summed in int64 (a
  fixed-point superaccumulator: every finite value of the type is a multiple of its smallest
  subnormal), then the integer total is divided by n with Python integers and rounded to nearest even
  (``round_ratio``: no floating point, subnormals and overflow included).
* Exact partials (``limbs``): the same digits, normalized (each in [0, 2^16) but the top one, signed),
  so totals of chunks add exactly in any order and grouping; ``mean_from_limbs`` rounds their sum.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..descriptors.types import bfloat16_dtype
from . import wide

F64 = np.float64
U = 2.0 ** -53
DIGIT = 16                       # bits per digit of the superaccumulator
_MASK = (1 << DIGIT) - 1


class Format:
    """A binary float format: precision ``p`` (significand bits, the hidden one included), exponent
    range, and how its bits lie in an unsigned integer of ``bits`` bits."""

    def __init__(self, bits, p, emin, emax, udtype):
        self.bits, self.p, self.emin, self.emax, self.udtype = bits, p, emin, emax, np.dtype(udtype)
        self.mbits = p - 1                               # stored significand bits
        self.ebits = bits - 1 - self.mbits
        self.unit = emin - (p - 1)                       # exponent of the smallest subnormal
        self.max_shift = (1 << self.ebits) - 3           # the largest finite exponent field, minus 1
        # significands wider than 27 bits are summed as two pieces (int64 headroom for 2^19 rows)
        self.pieces = [(0, p)] if p <= 27 else [(0, 26), (26, p - 26)]
        top = self.max_shift + self.pieces[-1][0]
        self.digits = (top >> 4) + 1 + 3                 # buckets, plus carry room for 2^47 totals
        widest = max(w for _, w in self.pieces)
        self.rows = 1 << min(40, 62 - (widest + 15) - 1)  # rows per int64 block without overflow
        self.mag_mask = self.udtype.type((1 << (bits - 1)) - 1)   # every bit but the sign

    def value(self, b: int) -> np.float64:
        """The FLOAT64 value of a finite number's bits (its magnitude's: no sign), without numpy
        scalars: the significand times a power of two."""
        e, m = b >> self.mbits, b & ((1 << self.mbits) - 1)
        if e:
            m |= 1 << self.mbits
        return F64(math.ldexp(m, max(e, 1) + self.unit - 1))


_F16 = Format(16, 11, -14, 15, np.uint16)
_F32 = Format(32, 24, -126, 127, np.uint32)
_BF16 = Format(16, 8, -126, 127, np.uint16)
_F64 = Format(64, 53, -1022, 1023, np.uint64)
_FORMATS = {np.dtype(np.float16): _F16, np.dtype(np.float32): _F32, np.dtype(np.float64): _F64,
            bfloat16_dtype(): _BF16}


def fmt(dtype) -> Format:
    f = _FORMATS.get(dtype)
    if f is None:
        f = _FORMATS.get(np.dtype(dtype))
        if f is None:
            raise TypeError(f"no float format for {np.dtype(dtype)}")
    return f


def cast(q: np.ndarray, dtype) -> np.ndarray:
    """FLOAT64 values rounded once to nearest even in ``dtype``."""
    dt = np.dtype(dtype)
    if dt == _BF16_DTYPE:
        return wide.f64_to_bf16(q)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(q, F64).astype(dt)


_BF16_DTYPE = bfloat16_dtype()


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}")


# -- the exact superaccumulator ---------------------------------------------------------------------

def _digits_block(x: np.ndarray, f: Format, axis) -> np.ndarray:
    """Un-normalized int64 digits (f.digits, *reduced shape) of the exact totals of finite ``x`` over
    ``axis``, in units of 2^f.unit; infinities and NaN count as zero (the caller decides them)."""
    b = bits(x).astype(np.uint64) if f.bits < 64 else bits(x)
    e = ((b >> np.uint64(f.mbits)) & np.uint64((1 << f.ebits) - 1)).astype(np.int64)
    m = (b & np.uint64((1 << f.mbits) - 1)).astype(np.int64)
    finite = e != (1 << f.ebits) - 1
    m = np.where(finite, m | ((e > 0).astype(np.int64) << f.mbits), 0)
    neg = (b >> np.uint64(f.bits - 1)).astype(bool)
    shift = np.maximum(e, 1) - 1
    shape = np.sum(np.zeros(x.shape, np.int8), axis=axis).shape
    out = np.zeros((f.digits,) + shape, np.int64)
    for off, width in f.pieces:
        piece = (m >> off) & ((1 << width) - 1) if len(f.pieces) > 1 else m
        piece = np.where(neg, -piece, piece)
        sh = shift + off
        bucket = sh >> 4
        c = piece << (sh & 15)
        present = np.flatnonzero(np.bincount(bucket.ravel(), minlength=1))
        for k in present:
            out[k] += np.sum(np.where(bucket == k, c, 0), axis=axis)
    return out


def normalize(d: np.ndarray) -> np.ndarray:
    """Carries moved up: every digit in [0, 2^16) but the top one, which keeps the sign."""
    d = d.copy()
    for j in range(d.shape[0] - 1):
        carry = d[j] >> DIGIT
        d[j] &= _MASK
        d[j + 1] += carry
    return d


def limbs(x: np.ndarray, axes: tuple, dtype) -> np.ndarray:
    """The exact totals of ``x`` over ``axes`` (kept as size 1) as normalized digits: an int64 array
    (digits, *kept shape). Non-finite values count as zero (``nonfinite_flags`` keeps them)."""
    f = fmt(dtype)
    axes = tuple(axes)
    n = math.prod(x.shape[a] for a in axes)
    kept = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    if n <= f.rows and x.size <= MEM_ELEMENTS:
        return normalize(_digits_block(x, f, axes)).reshape((f.digits,) + kept)
    rows = _rows(x, axes)
    step = max(1, min(f.rows, MEM_ELEMENTS // max(1, rows.shape[1])))   # int64 temporaries bounded
    total = np.zeros((f.digits, rows.shape[1]), np.int64)
    for i in range(0, n, step):
        total = normalize(total + _digits_block(rows[i:i + step], f, 0))
    return total.reshape((f.digits,) + kept)


def f64_limbs(v: np.ndarray, dtype) -> np.ndarray:
    """Normalized digits (digits, m) of FLOAT64 values ``v`` (m of them), each a multiple of the
    smallest subnormal of ``dtype`` and within its digits' range (the exact totals of ``dtype`` values
    held as double-doubles: gpu_mean.dask's partials): each value's 53-bit significand, shifted to its
    place, in two pieces of at most 27 bits (a piece and its shift within a digit stay below 2^42)."""
    f = fmt(dtype)
    v = np.asarray(v, F64).reshape(-1)
    fr, e = np.frexp(v)
    mant = np.abs(fr * 2.0 ** 53).astype(np.int64)            # exact: below 2^53
    sh = e.astype(np.int64) - 53 - f.unit                     # |v| = mant 2^sh units
    mant = np.where(sh < 0, mant >> np.minimum(-sh, 63), mant)  # v a multiple of the unit: those bits are 0
    sh = np.maximum(sh, 0)
    neg = np.signbit(v)
    out = np.zeros((f.digits, v.size), np.int64)
    cols = np.arange(v.size)
    for off, width in ((0, 26), (26, 27)):
        piece = (mant >> off) & ((1 << width) - 1)
        at = sh + off
        np.add.at(out, (at >> 4, cols), np.where(neg, -piece, piece) << (at & 15))
    return normalize(out)


def add_limbs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return normalize(a + b)


# exact.h's flags beside the device's limbs (GM_XF_*)
_XF_NAN, _XF_PINF, _XF_NINF, _XF_NOT_NEG0 = 1, 2, 4, 8


def from_device_limbs(words: np.ndarray, dtype, kept: tuple):
    """A device's exact partials (``KernelBackend.exact_limbs``: (n_out, K + 1) int64, K limbs of
    32-bit digits in units of 2^-149 for FLOAT32 and BFLOAT16 values, 2^-24 for FLOAT16, then
    exact.h's flags) as this module's (digits, flags) of shape ``kept``: the digits normalized
    (``limbs``' layout: 16-bit digits in units of the type's smallest subnormal), the flags as
    ``nonfinite_flags``. Exact: integers only."""
    f = fmt(dtype)
    K = words.shape[1] - 1
    d = words[:, :K].T.copy()                     # (K, n_out)
    for j in range(K - 1):                        # 32-bit carries: each limb in [0, 2^32) but the top
        carry = d[j] >> 32
        d[j] &= 0xFFFFFFFF
        d[j + 1] += carry
    out = np.empty((2 * K, d.shape[1]), np.int64)
    out[0::2] = d & _MASK
    out[1::2] = d >> DIGIT                        # the top limb's high half keeps the sign
    # BFLOAT16 values were deposited as FLOAT32 bits: the device's unit is 2^16 of this module's
    # smaller (2^-149 against 2^-133), and every total is a multiple of 2^-133: its lowest digit is 0
    drop = (f.unit + 149) // DIGIT if f.ebits == 8 else 0
    out = out[drop:]
    if out.shape[0] > f.digits:                   # fold the digits above this module's top into it
        top = f.digits - 1
        for j in range(out.shape[0] - 1, top, -1):
            out[j - 1] += out[j] << DIGIT
        out = out[:f.digits]
    elif out.shape[0] < f.digits:
        out = np.concatenate([out, np.zeros((f.digits - out.shape[0], out.shape[1]), np.int64)])
    w = words[:, K]
    # exact.h notes "a value other than -0.0" for finite values only; an inf or NaN is one too
    flags = np.stack([(w & _XF_NAN) != 0, (w & _XF_PINF) != 0, (w & _XF_NINF) != 0, (w & 15) == 0])
    return normalize(out).reshape((f.digits,) + tuple(kept)), flags.reshape((4,) + tuple(kept))


def nonfinite_flags(x: np.ndarray, axes: tuple) -> np.ndarray:
    """(NaN present, +inf present, -inf present, every value -0.0) over ``axes``, kept as size 1: a
    bool array (4, *kept shape) -- what the exact total leaves out, combined across chunks by ``|``
    (the last by ``&``)."""
    axes = tuple(axes)
    with np.errstate(invalid="ignore"):
        xf = x.astype(F64) if x.dtype == bfloat16_dtype() else x
        return np.stack([np.any(np.isnan(xf), axis=axes, keepdims=True),
                         np.any(xf == np.inf, axis=axes, keepdims=True),
                         np.any(xf == -np.inf, axis=axes, keepdims=True),
                         np.all(np.signbit(xf) & (xf == 0), axis=axes, keepdims=True)])


def merge_flags(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.concatenate([a[:3] | b[:3], a[3:] & b[3:]])


def to_ints(d: np.ndarray) -> list:
    """Normalized digits (digits, m) as Python integers."""
    scale = np.array([1 << (DIGIT * j) for j in range(d.shape[0])], dtype=object)[:, None]
    return list((d.astype(object) * scale).sum(axis=0))


# -- one rounding of an integer ratio ---------------------------------------------------------------

def round_ratio(t: int, n: int, f: Format, out: Format | None = None) -> float:
    """t * 2^f.unit / n rounded once to nearest even in format ``out`` (default ``f``), as a Python
    float (exact: every value of the formats is a double); past the largest finite value: +-inf.
    A zero t gives +0.0 (the caller decides the sign of a zero total)."""
    out = out or f
    if t == 0:
        return 0.0
    sign = -1.0 if t < 0 else 1.0
    a = abs(t)
    k = a.bit_length() - n.bit_length()            # a / n lies in [2^(k-1), 2^(k+1))
    if (a << -k if k < 0 else a) < (n << k if k > 0 else n):
        k -= 1
    e = k + f.unit                                  # 2^e <= |value| < 2^(e+1)
    qexp = max(e, out.emin) - (out.p - 1)           # exponent of the last place kept
    sh = f.unit - qexp
    num, den = (a << sh, n) if sh >= 0 else (a, n << -sh)
    m, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and m & 1):
        m += 1
    if m.bit_length() + qexp > out.emax + 1:        # m * 2^qexp >= 2^(emax + 1)
        return sign * math.inf
    return sign * math.ldexp(m, qexp)


def exact_means(cols: np.ndarray, dtype, out_dtype=None) -> np.ndarray:
    """The mean of each column of a 2-D array (rows = the values averaged), rounded once to
    ``out_dtype`` (default ``dtype``) from the exact total; IEEE for inf and NaN (NaN if a NaN or both
    infinities, else the infinity); an exact zero total is -0.0 only when every value is -0.0."""
    out_dtype = dtype if out_dtype is None else out_dtype
    n = cols.shape[0]
    f, fo = fmt(dtype), fmt(out_dtype)
    ints = to_ints(limbs(cols, (0,), dtype).reshape(f.digits, -1))
    flags = nonfinite_flags(cols, (0,)).reshape(4, -1)
    return _finish(ints, flags, n, f, fo, out_dtype)


def _finish(ints, flags, n, f, fo, out_dtype) -> np.ndarray:
    vals = np.array([round_ratio(t, n, f, fo) for t in ints], F64)
    nan, pinf, ninf, neg0 = flags
    vals = np.where((vals == 0) & neg0, -0.0, vals)
    vals = np.where(nan | (pinf & ninf), np.nan, np.where(pinf, np.inf, np.where(ninf, -np.inf, vals)))
    return cast(vals, out_dtype)


def mean_from_limbs(d: np.ndarray, flags: np.ndarray, n: int, dtype, out_dtype=None,
                    plus_zero: bool | None = None) -> np.ndarray:
    """The mean of exact totals (normalized digits (digits, *shape), ``flags`` as ``nonfinite_flags``)
    of ``n`` values each, rounded once (an exact zero total is -0.0 when every value was -0.0, else
    +0.0; ``plus_zero``: always +0.0): a double-double of the digits, the midpoint test of
    ``settle_dd``, Python integers for what it leaves open."""
    out_dtype = dtype if out_dtype is None else out_dtype
    f, fo = fmt(dtype), fmt(out_dtype)
    shape = d.shape[1:]
    d = d.reshape(d.shape[0], -1)
    flags = flags.reshape(4, -1)
    if plus_zero:
        flags = flags.copy()
        flags[3] = False
    h, t = _dd_of(d, f)
    with np.errstate(over="ignore", invalid="ignore"):
        # the digits' sum: TwoSum's errors are exact; adding the K of them (each at most u |h|) into t
        # rounds by at most u |t| <= K u^2 |h| each time
        err = np.abs(h) * (2.0 * (d.shape[0] + 2) ** 2) * U * U
        res, ok = settle_dd(h, t, err, n, out_dtype)
    special = flags[0] | flags[1] | flags[2] | ~np.isfinite(h)
    ok &= ~special
    out = np.empty(d.shape[1], np.dtype(out_dtype))
    out[ok] = res[ok]
    bad = np.flatnonzero(~ok)
    if bad.size:
        out[bad] = _finish(to_ints(d[:, bad]), flags[:, bad], n, f, fo, out_dtype)
    return out.reshape(shape)


def _dd_of(d: np.ndarray, f: Format):
    """Normalized digits (digits, m) as a double-double (h, t), within 2 (K + 2)^2 u^2 |h| of the total
    (added by magnitude from the top digit down, every term exact); past DBL_MAX: inf."""
    neg = d[-1] < 0
    mag = np.where(neg, normalize(-d), d)
    h = np.zeros(d.shape[1], F64)
    t = np.zeros(d.shape[1], F64)
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(d.shape[0] - 1, -1, -1):
            term = np.ldexp(mag[j].astype(F64), DIGIT * j + f.unit)
            s, e = wide.two_sum(h, term)
            h, t = s, t + e
        h, t = wide.two_sum(h, t)
    return np.where(neg, -h, h), np.where(neg, -t, t)


def limbs_to_dd(d: np.ndarray, flags: np.ndarray, dtype):
    """Exact totals (digits and flags) as FLOAT64 double-double totals (hi, lo), as the FLOAT64
    partial sums of a device: IEEE's value where an inf or NaN was summed, -0.0 for -0.0 alone."""
    shape = d.shape[1:]
    h, t = _dd_of(d.reshape(d.shape[0], -1), fmt(dtype))
    nan, pinf, ninf, neg0 = flags.reshape(4, -1)
    special = nan | pinf | ninf
    h = np.where(special, wide.nonfinite_sum_value(nan, pinf, ninf), np.where((h == 0) & neg0, -0.0, h))
    t = np.where(special | ~np.isfinite(h), 0.0, t)
    return h.reshape(shape), t.reshape(shape)


# -- deciding the rounding from a bound -------------------------------------------------------------

def settle_narrow(q: np.ndarray, err: np.ndarray, dtype):
    """(result, settled) for FLOAT64 quotients ``q`` = fl(s / n) of narrow outputs, where the exact
    mean is within ``err`` of s / n: settled where q - E and q + E (E = err plus q's own rounding,
    padded for the arithmetic that forms the ends) round to the same bits. A zero q is never
    settled (the sign of a zero total needs the values)."""
    with np.errstate(over="ignore", invalid="ignore"):
        pad = err * (1 + 2.0 ** -40) + np.abs(q) * (4 * U)
        lo = cast(q - pad, dtype)
        hi = cast(q + pad, dtype)
    ok = (bits(lo) == bits(hi)) & (q != 0) & np.isfinite(q)
    return lo, ok


def _two_prod(a, b):
    """a * b == p + e exactly (Dekker; |a|, |b| far from overflow and underflow)."""
    p = a * b
    c = F64(134217729.0)                 # 2^27 + 1
    ah = a * c
    ah = ah - (ah - a)
    al = a - ah
    bh = b * c
    bh = bh - (bh - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def settle_dd(h, t, err, n: int, dtype):
    """(candidate, settled) for a total S within ``err`` of the double-double h + t: the candidate is
    (h + t) / n rounded to ``dtype``; settled where S / n lies strictly between the candidate's two
    midpoints (S - n * m decided in double-double: n * candidate by Dekker's exact product)."""
    dt = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        res = cast(wide.dd_div(h, t, n), dt) if dt == np.float64 else cast((h + t) / F64(n), dt)
        r = np.asarray(res, F64) if dt != bfloat16_dtype() else res.astype(np.float32).astype(F64)
        up = _next(res, dt, np.inf) - r         # exact: neighbours in the format are doubles
        down = r - _next(res, dt, -np.inf)
        nf = F64(n)
        p, pe = _two_prod(r, np.full_like(r, nf))
        valid = np.isfinite(r) & (r != 0) & (np.abs(r) > 2.0 ** -960) & (np.abs(r) < 2.0 ** 990)
        valid &= np.isfinite(up) & np.isfinite(down)
        ok = valid.copy()
        exact_total = np.broadcast_to(np.asarray(err) == 0, r.shape)
        tie = np.zeros(r.shape, np.int8)          # +1 / -1: S / n is exactly the midpoint on that side
        for half, sgn in ((up * 0.5, 1.0), (down * 0.5, -1.0)):
            # D = sgn * (n * (r + sgn * half) - S): positive means S / n is on the candidate's side
            d1, e1 = wide.two_sum(p, -h)
            rest = ((e1 + pe) + sgn * nf * half) - t
            d = d1 + rest
            slack = 8 * U * (np.abs(d1) + np.abs(e1) + np.abs(pe) + nf * half + np.abs(t)) + 2.0 ** -1000
            side = sgn * d > (err + slack) * (1 + 2.0 ** -40)
            if np.any(exact_total & ~side):
                # S is h + t exactly: the sign of D from an error-free sum of its five terms
                sign, decided = _exact_sign([sgn * p, sgn * pe, nf * half, -sgn * h, -sgn * t])
                side |= exact_total & decided & (sign > 0)
                tie = np.where(exact_total & decided & (sign == 0), np.int8(sgn), tie)
            ok &= side | (tie == sgn)
        ok &= valid
        if np.any(tie & ok):
            # ties to even: the candidate, or its neighbour on the midpoint's side
            last = bits(res) & 1
            odd_up = ok & (tie > 0) & (last == 1)
            odd_down = ok & (tie < 0) & (last == 1)
            if np.any(odd_up | odd_down):
                res = res.copy()
                res[odd_up] = cast(_next(res[odd_up], dt, np.inf), dt)
                res[odd_down] = cast(_next(res[odd_down], dt, -np.inf), dt)
    return res, ok


def settle_near(h, t, n: int, dtype):
    """(result, settled) for exact totals h + t (doubles) of ``n`` values and a narrow output type
    (FLOAT32, FLOAT16, BFLOAT16): q = fl(fl(h + t) / n) is within 2^-52 |q| of the mean (two
    roundings), so where q lies farther than 2^-50 |q| from both midpoints around r = q rounded, r is
    the mean rounded once. Zeros, means near zero and infinities are left (``settle_dd``, the digits);
    a few numpy passes, where ``settle_dd``'s error-free sums cost about ten times as many."""
    dt = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        q = (h + t) / F64(n)
        res = cast(q, dt)
        r = np.asarray(res, F64) if dt != bfloat16_dtype() else res.astype(np.float32).astype(F64)
        d = q - r                                        # exact: r is q's neighbour in a coarser format
        half = np.where(d >= 0, _next(res, dt, np.inf) - r, r - _next(res, dt, -np.inf)) * 0.5
        ok = (np.abs(d) + np.abs(q) * 2.0 ** -50 < half) & np.isfinite(half) & (r != 0) & (np.abs(q) > 2.0 ** -1000)
    return res, ok


def _exact_sign(terms: list):
    """(sign, decided) of the exact sum of same-shaped FLOAT64 arrays: error-free passes (TwoSum along
    the terms, three times) leave the rounded sum on top and the errors below; decided where the top
    outweighs the rest, or everything is zero."""
    t = list(terms)
    for _ in range(3):
        for i in range(1, len(t)):
            t[i], t[i - 1] = wide.two_sum(t[i - 1], t[i])
    rest = sum(np.abs(x) for x in t[:-1])
    top = t[-1]
    decided = (np.abs(top) > 2 * rest) | ((top == 0) & (rest == 0))
    return np.sign(top), decided


def _next(res, dt, toward):
    """The neighbour of each value of ``res`` (in its format) toward +-inf, as FLOAT64."""
    if dt == bfloat16_dtype():
        b = res.view(np.uint16).astype(np.int32)
        pos = (b & 0x8000) == 0
        up = (toward > 0) == pos                        # away from zero in magnitude
        mag = b & 0x7FFF
        zero = mag == 0
        nb = np.where(zero, np.where(toward > 0, 0x0001, 0x8001), np.where(up, b + 1, b - 1))
        return nb.astype(np.uint16).view(dt).astype(np.float32).astype(F64)
    with np.errstate(over="ignore"):
        return np.nextafter(res, dt.type(toward)).astype(F64)


# -- the CPU device's means -------------------------------------------------------------------------

def _rows(x: np.ndarray, axes: tuple) -> np.ndarray:
    keep = [d for d in range(x.ndim) if d not in axes]
    n = math.prod(x.shape[a] for a in axes)
    return np.transpose(x, list(axes) + keep).reshape(n, -1)


def columns(x: np.ndarray, axes: tuple, flat: np.ndarray) -> np.ndarray:
    """The values averaged into the outputs at ``flat`` (indices into the kept shape) as (n, k)."""
    keep = [d for d in range(x.ndim) if d not in axes]
    n = math.prod(x.shape[a] for a in axes)
    idx = np.unravel_index(flat, [x.shape[d] for d in keep]) if keep else ()
    xt = np.transpose(x, list(axes) + keep)
    if not keep:
        return xt.reshape(n, 1)[:, np.zeros(len(flat), np.intp)]
    return xt[(slice(None),) * len(axes) + tuple(idx)].reshape(n, len(flat))


def max_abs(x: np.ndarray, axis=None, keepdims=False):
    """max|x| as FLOAT64 (NaN where a NaN is present)."""
    if x.dtype == bfloat16_dtype():
        m = np.max(x.view(np.uint16) & np.uint16(0x7FFF), axis=axis, keepdims=keepdims)
        return (np.asarray(m, np.uint32) << np.uint32(16)).view(np.float32).astype(F64)
    with np.errstate(invalid="ignore"):
        return np.maximum(np.max(x, axis=axis, keepdims=keepdims).astype(F64),
                          -np.min(x, axis=axis, keepdims=keepdims).astype(F64))


def gamma(k: int) -> float:
    """An upper bound of k u / (1 - k u), padded for its own rounding."""
    return k * U * (1 + 2.0 ** -19)


def narrow_error(n: int, m, dtype, depth: int | None = None):
    """The bound on |s - S| for a FLOAT64 sum of n values of a narrow type with max|x| <= m, each
    value passing through at most ``depth`` additions (default n - 1: any order); FLOAT16 sums of at
    most 2^13 values are exact (multiples of 2^-24 below 2^29)."""
    if np.dtype(dtype) == np.float16 and n <= 1 << 13:
        return 0.0
    with np.errstate(invalid="ignore"):     # depth 0 (n = 1) times an infinite m: NaN, no bound (IEEE's value)
        return gamma(n - 1 if depth is None else depth) * n * m


SPLIT_AXIS = 1 << 12    # reductions of more values: axis by axis, longer axes as (a, b) blocks


def tree_sum(x: np.ndarray, axes: tuple):
    """The FLOAT64 sum over ``axes`` (kept as size 1), one axis after another, innermost first; an axis
    longer than SPLIT_AXIS is viewed as (a, b) blocks of b ~ sqrt(length) (no copy) and summed over b,
    then a, then the rest. Returns (sum, depth): no value passes through more than ``depth`` additions,
    so |sum - S| <= gamma(depth) * sum|x|, whatever order numpy adds in within each step (about
    2 sqrt(n) instead of n - 1 for one long axis)."""
    n = math.prod(x.shape[a] for a in axes)
    if n <= SPLIT_AXIS:          # numpy's own order over all the axes: at most n - 1 additions each
        return np.sum(x, axis=axes, dtype=F64, keepdims=True), n - 1
    s, depth = x, 0
    for a in sorted(axes, reverse=True):
        length = s.shape[a]
        if length <= SPLIT_AXIS:
            s = np.sum(s, axis=a, dtype=F64, keepdims=True)
            depth += length - 1
            continue
        b = math.isqrt(length)
        blocks = length // b
        main = s[(slice(None),) * a + (slice(0, blocks * b),)]
        main = main.reshape(s.shape[:a] + (blocks, b) + s.shape[a + 1:])
        part = np.sum(np.sum(main, axis=a + 1, dtype=F64), axis=a, dtype=F64, keepdims=True)
        rest = length - blocks * b
        if rest:
            part = part + np.sum(s[(slice(None),) * a + (slice(blocks * b, length),)], axis=a, dtype=F64,
                                 keepdims=True)
        s = part
        depth += (b - 1) + (blocks - 1) + (1 if rest else 0) + max(0, rest - 1 - (b - 1))
    return s, depth


SPAN_BLOCK = 1 << 20       # values per block of magnitude_span's masked copy


def magnitude_span(x: np.ndarray, dtype):
    """(largest magnitude as FLOAT64, exponent of the smallest nonzero magnitude's ulp) of a narrow
    float array, from its bits (one masked copy, two integer reductions); None where an inf or NaN
    is present; the exponent is None where every value is a zero."""
    f = fmt(dtype)
    u = x.view(f.udtype)
    if x.size <= SPAN_BLOCK or x.ndim == 0:
        hi, lo = _magnitudes(np.bitwise_and(u, f.mag_mask), f.bits)
    else:      # a block at a time: no masked copy of all of x
        step = max(1, SPAN_BLOCK // (x.size // x.shape[0]))
        hi, lo = 0, 1 << f.bits
        for i in range(0, x.shape[0], step):
            h, low = _magnitudes(u[i:i + step] & f.mag_mask, f.bits)
            hi, lo = max(hi, h), min(lo, low)
    if hi >> f.mbits == (1 << f.ebits) - 1:
        return None
    m = f.value(hi)
    if lo >> f.bits:
        return m, None
    return m, max(lo >> f.mbits, 1) - (f.emax + f.mbits)


BLAS_SUM_MIN = 1 << 14     # values from which proven_sum's matrix-vector product beats add.reduce
BLAS_SUM_MAX = 1 << 20     # and up to which its FLOAT64 copy (8 MiB at most) is made; add.reduce past it


@functools.lru_cache(maxsize=64)
def _ones(n: int) -> np.ndarray:
    """A read-only FLOAT64 vector of n ones (proven_sum's, kept: most calls repeat a length)."""
    o = np.ones(n)
    o.flags.writeable = False
    return o


def proven_sum(x: np.ndarray, axes: tuple) -> np.ndarray:
    """The FLOAT64 sum over ``axes`` (kept as size 1) of values whose sum ``exact_f64_sum`` proved
    exact in any order: where the reduced axes are the trailing or the leading ones of a C-contiguous
    array of BLAS_SUM_MIN to BLAS_SUM_MAX values, a FLOAT64 copy summed as a matrix-vector product with
    ones (BLAS: 29 against add.reduce's 41 us at 256x256 float32); numpy's add.reduce elsewhere (it
    converts in small buffers: no copy of a large array). No addition rounds, so the order cannot
    change the sum."""
    return summer(x.shape, tuple(axes), x.flags.c_contiguous)(x)


def summer(shape: tuple, axes: tuple, contiguous: bool):
    """``proven_sum`` for arrays of one shape and layout: ``x -> sum``, the choice made once."""
    nd, k = len(shape), len(axes)
    size = math.prod(shape)
    if BLAS_SUM_MIN <= size <= BLAS_SUM_MAX and 0 < k < nd and contiguous:
        if axes == tuple(range(nd - k, nd)):
            rows, ones = (math.prod(shape[:nd - k]), -1), _ones(math.prod(shape[nd - k:]))
            keep = shape[:nd - k] + (1,) * k
            return lambda x: np.dot(x.reshape(rows).astype(F64), ones).reshape(keep)
        if axes == tuple(range(k)):
            cols, ones, keep = (-1, math.prod(shape[k:])), _ones(math.prod(shape[:k])), (1,) * k + shape[k:]
            return lambda x: np.dot(ones, x.reshape(cols).astype(F64)).reshape(keep)
    return lambda x: np.add.reduce(x, axis=axes, dtype=F64, keepdims=True)


_max, _min = np.maximum.reduce, np.minimum.reduce


def _magnitudes(mag: np.ndarray, bits: int) -> tuple:
    """(largest, smallest nonzero) of magnitudes' bits; the smallest is 2^bits where all are zero."""
    hi, lo = int(_max(mag, axis=None)), int(_min(mag, axis=None))
    if lo == 0:
        nonzero = mag[mag != 0]
        lo = int(nonzero.min()) if nonzero.size else 1 << bits
    return hi, lo


def exact_f64_sum(n: int, m, ulp_exp) -> bool:
    """Whether the FLOAT64 sum of n values is exact in any order: every value, and so every partial
    sum, is a multiple of 2^ulp_exp (the smallest nonzero magnitude's ulp; larger magnitudes have
    larger ulps), and no partial sum exceeds n * m <= 2^(ulp_exp + 53) in magnitude, so each is an
    integer below 2^53 times 2^ulp_exp: representable, so no addition rounds."""
    return ulp_exp is None or math.ldexp(n * float(m), -ulp_exp) <= 2.0 ** 53


def narrow_reducer(shape: tuple, axes: tuple, dtype, contiguous: bool):
    """``reduce_narrow`` for arrays of one shape and layout (a plan's: the CPU device's repeated
    calls), ``x -> mean``. What depends only on the shape is worked out once; the common case (no
    zero, inf or NaN, a span that proves the FLOAT64 sum exact, a power-of-two count, no zero mean)
    is reduce_narrow's first return, taken with no other work; any other array takes reduce_narrow."""
    axes, dtype = tuple(axes), np.dtype(dtype)
    n, size = math.prod(shape[a] for a in axes), math.prod(shape)
    general = functools.partial(reduce_narrow, axes=axes, dtype=dtype)
    if not size or n & (n - 1) or size > SPAN_BLOCK or dtype == _BF16_DTYPE or not shape:
        return general
    f = fmt(dtype)
    udtype, mask, mbits, inf_field = f.udtype, f.mag_mask, f.mbits, (1 << f.ebits) - 1
    total, inv = summer(tuple(shape), axes, contiguous), 1.0 / n
    # exact_f64_sum from the exponent fields alone: the largest magnitude is below 2^(E_hi - bias + 1)
    # and every value a multiple of 2^(max(E_lo, 1) - bias - mbits), so n * m <= 2^(ulp + 53) when
    # E_hi + reach <= max(E_lo, 1) (a sufficient test, within a binade of exact_f64_sum's)
    reach = n.bit_length() - 1 + 1 + mbits - 53

    def reduce(x):
        mag = np.bitwise_and(x.view(udtype), mask)
        hi, lo = int(_max(mag, axis=None)), int(_min(mag, axis=None))
        del mag
        e_hi = hi >> mbits
        if lo == 0 or e_hi == inf_field or e_hi + reach > max(lo >> mbits, 1):
            return general(x)
        s = total(x)
        if np.count_nonzero(s) != s.size:
            return general(x)
        return np.multiply(s, inv, out=s).astype(dtype)      # the exact mean, rounded once
    return reduce


def reduce_narrow(x: np.ndarray, axes: tuple, dtype) -> np.ndarray:
    """REDUCE AVERAGE of FLOAT16 / FLOAT32 / BFLOAT16, correctly rounded, keeping the rank.

    The FLOAT64 sum decides most outputs with its error bound (``settle_narrow``). Where the
    magnitudes' span proves the sum exact (``exact_f64_sum``: few values, or values of similar
    size), the bound is zero, and what it leaves open (a quotient within FLOAT64's rounding of a
    midpoint, an exact tie) is decided exactly from the sum itself (``settle_dd``), without the
    values' digits. Over a power of two the exact sum gives the exact mean, rounded once."""
    axes = tuple(axes)
    n = math.prod([x.shape[a] for a in axes])
    span = magnitude_span(x, dtype) if x.size else (F64(0), None)
    exact = span is not None and exact_f64_sum(n, *span)
    if exact and n & (n - 1) == 0:
        # an exact sum (any order) over a power of two: q is the exact mean, and one rounding of it
        # is the answer, ties to even included (only a zero's sign needs the values: below)
        s = proven_sum(x, axes)
        q = s * (1.0 / n)
        out = cast(q, dtype) if x.dtype == _BF16_DTYPE else q.astype(dtype)   # |q| <= max|x|
        if np.count_nonzero(q) == q.size:
            return out
        depth = n - 1
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            s, depth = (proven_sum(x, axes), n - 1) if exact else tree_sum(x, axes)
            q = s / F64(n)
    if exact:
        m = span[0]
        err = F64(0)
    else:
        if np.dtype(dtype) == np.float16:
            m = F64(65504.0)
        elif span is not None:
            m = span[0]
        else:       # an inf or NaN somewhere: each output's own bound
            m = max_abs(x, axis=axes, keepdims=True)
        err = narrow_error(n, m, dtype, depth)
    if exact and n & (n - 1) == 0:
        ok = q != 0
    else:
        out, ok = settle_narrow(q, err / F64(n), dtype)
    nonfinite = ~np.isfinite(q)
    if np.any(nonfinite):     # an inf or NaN input: the FLOAT64 sum of narrow values cannot overflow
        out = np.where(nonfinite, cast(q, dtype), out)
    open_ = np.flatnonzero(~ok & ~nonfinite)
    if open_.size and exact:
        # the sum is exact: the quotient's rounding (and an exact tie) decided from it alone
        s_open = s.reshape(-1)[open_]
        r, settled = settle_dd(s_open, np.zeros_like(s_open), F64(0), n, dtype)
        out = out.copy()
        out.reshape(-1)[open_[settled]] = r[settled]
        open_ = open_[~settled]
    if open_.size:
        out_flat = out.reshape(-1)
        zero = open_[q.reshape(-1)[open_] == 0]
        if zero.size:
            # a zero sum (padding rows, all-zero outputs): zeros alone give +0.0 (-0.0 from -0.0s
            # alone), decided from the bits (one integer pass over those outputs' values); an exact
            # sum (err 0) that is zero too
            exact_sum = bool(np.all(err == 0))
            vals, settled = _zero_means(x, axes, zero, dtype, exact_sum)
            out_flat[zero[settled]] = vals[settled]
            open_ = np.setdiff1d(open_, zero[settled], assume_unique=True)
        if open_.size:
            out_flat[open_] = open_means(x, axes, open_, dtype)
        out = out_flat.reshape(out.shape)
    return out


def _zero_means(x, axes, flat, dtype, exact_sum: bool):
    """(values, settled) for outputs whose sum is zero: every value a zero (or, with ``exact_sum``,
    the exact total zero) gives -0.0 when every value is -0.0, else +0.0 (IEEE addition from -0.0,
    the kernels' rule too; one integer pass over the bits of those outputs' values)."""
    f = fmt(dtype)
    sign = f.udtype.type(1 << (f.bits - 1))
    mag = f.udtype.type((1 << (f.bits - 1)) - 1)
    hi = None
    neg0 = None
    for blk in row_blocks(x.view(f.udtype), axes, flat):
        bh = np.max(blk & mag, axis=0)
        bn = np.all(blk == sign, axis=0)
        hi = bh if hi is None else np.maximum(hi, bh)
        neg0 = bn if neg0 is None else neg0 & bn
    settled = np.full(flat.size, True) if exact_sum else (hi == 0)
    return cast(np.where(neg0, -0.0, 0.0), dtype), settled


MEM_ELEMENTS = 1 << 21    # values per block of the open outputs' passes (their temporaries: 16 MiB each)


def row_blocks(x: np.ndarray, axes: tuple, flat: np.ndarray):
    """The values of the outputs at ``flat`` (indices into the kept shape) as (rows, k) blocks of at
    most about MEM_ELEMENTS values: rows of the (values, outputs) view where ``x`` has one without a
    copy, else of a transposed copy."""
    n = math.prod(x.shape[a] for a in axes)
    keep = [d for d in range(x.ndim) if d not in axes]
    xt = np.transpose(x, list(axes) + keep)
    rows = xt.reshape(n, -1)
    if not np.shares_memory(rows, x) and flat.size * 4 < rows.shape[1]:
        rows = columns(x, axes, flat)        # a copy either way: only the open outputs
        flat = np.arange(flat.size)
    step = max(1, MEM_ELEMENTS // flat.size)
    whole = flat.size == rows.shape[1]
    for i in range(0, n, step):
        blk = rows[i:i + step]
        yield blk if whole else blk[:, flat]


def open_means(x: np.ndarray, axes: tuple, flat: np.ndarray, dtype) -> np.ndarray:
    """The correctly rounded means of the outputs at ``flat``, block by block of their values: a
    double-double sum (pairwise within a block, AccurateDWPlusDW across blocks) accepted by
    ``settle_dd``, then the exact digits for what stays open."""
    n = math.prod(x.shape[a] for a in axes)
    h = t = m = None
    blocks = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for blk in row_blocks(x, axes, flat):
            b64 = blk.astype(F64)
            bh, bt = wide.dd_sum0(b64)
            bm = max_abs(b64, axis=0)
            if h is None:
                h, t, m = bh, bt, bm
            else:
                h, t = wide.dd_add(h, t, bh, bt)
                m = np.maximum(m, bm)
            blocks += 1
        r, ok = settle_dd(h, t, dd_error_pairwise(n, m, blocks), n, dtype)
    out = r.copy()
    rest = np.flatnonzero(~ok)
    if rest.size:
        f = fmt(dtype)
        d = np.zeros((f.digits, rest.size), np.int64)
        flags = None
        for blk in row_blocks(x, axes, flat[rest]):
            d = add_limbs(d, limbs(blk, (0,), dtype).reshape(f.digits, -1))
            fl = nonfinite_flags(blk, (0,)).reshape(4, -1)
            flags = fl if flags is None else merge_flags(flags, fl)
        out[rest] = _finish(to_ints(d), flags, n, f, f, dtype)
    return out


def nary_narrow(xs: list, dtype) -> np.ndarray:
    """The n-ary mean of 1..64 same-shaped FLOAT16 / FLOAT32 / BFLOAT16 arrays, correctly rounded."""
    k = len(xs)
    with np.errstate(over="ignore", invalid="ignore"):
        s = xs[0].astype(F64)
        for x in xs[1:]:
            s += x if x.dtype != bfloat16_dtype() else x.astype(F64)
        q = s / F64(k) if k > 1 else s
    if k == 1:
        return cast(q, dtype)
    if np.dtype(dtype) == np.float16:
        m = F64(65504.0)       # 64 FLOAT16 values add exactly in FLOAT64: the bound is 0
    else:
        m = max(max_abs(x) for x in xs)
        if not np.isfinite(m):       # an inf or NaN somewhere: each element's own bound
            m = np.max([np.abs(x.astype(F64)) for x in xs], axis=0)
    out, ok = settle_narrow(q, F64(narrow_error(k, m, dtype)) / F64(k), dtype)
    nonfinite = ~np.isfinite(q)
    if np.any(nonfinite):
        out = np.where(nonfinite, cast(q, dtype), out)
    open_ = np.flatnonzero(~ok & ~nonfinite)
    if open_.size:
        # the open elements again, as a double-double with a bound that is zero when it is exact
        # (exact ties are decided then)
        cols = np.stack([x.reshape(-1)[open_] for x in xs]).astype(F64)
        with np.errstate(over="ignore", invalid="ignore"):
            h, t, err = dd_running_sum(list(cols))
            r, ok2 = settle_dd(h, t, err, k, dtype)
        out_flat = out.reshape(-1)
        out_flat[open_[ok2]] = r[ok2]
        if not np.all(ok2):
            out_flat[open_[~ok2]] = exact_means(np.stack([x.reshape(-1)[open_[~ok2]] for x in xs]), dtype)
    return out


def dd_error_pairwise(n: int, m, blocks: int = 1) -> np.ndarray:
    """The bound on |h + t - S| for ``wide.dd_sum0`` of n values with max|x| <= m (over ``blocks``
    row blocks whose sums are then added in turn): TwoSum at the leaves is exact, every later
    AccurateDWPlusDW errs by at most 3u^2 / (1 - 4u) of its exact result, and each value passes through
    at most 2 log2(n) + 2 of them (tree and side accumulator), plus one per later block."""
    levels = max(1, math.ceil(math.log2(max(n, 2))))
    return 3.1 * U * U * (2 * levels + 2 + blocks) * n * m


def mean0_f64(x: np.ndarray) -> np.ndarray:
    """The FLOAT64 mean over axis 0 of a 2-D array, correctly rounded: ``wide``'s double-double total
    and division, accepted where ``settle_dd`` proves the rounding; IEEE for inf and NaN inputs."""
    n = x.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        h, t, scaled = wide._dd_total0(x)
        out = h.copy()                                   # inf or NaN inputs: the IEEE answer
        cand = np.isfinite(h)
        if scaled is not None:
            cand[scaled] = False                         # a total past DBL_MAX: exactly
        res, ok = settle_dd(h, t, dd_error_pairwise(n, max_abs(x)), n, np.float64)
    ok &= cand
    out[ok] = res[ok]
    open_ = cand & ~ok
    if scaled is not None:
        open_[scaled] = True
    idx = np.flatnonzero(open_)
    if idx.size:
        cols = x[:, idx]
        with np.errstate(over="ignore", invalid="ignore"):
            res2, ok2 = settle_dd(h[idx], t[idx], dd_error_pairwise(n, max_abs(cols, axis=0)), n, np.float64)
        ok2 &= cand[idx]
        out[idx[ok2]] = res2[ok2]
        if not np.all(ok2):
            out[idx[~ok2]] = exact_means(cols[:, ~ok2], np.float64)
    return out


def dd_running_sum(xs: list):
    """(h, t, err): the sum of same-shaped FLOAT64 arrays as a double-double h + t within err of the
    exact total. Each addition's error e is exact (TwoSum), and so is each error of adding the e's
    (TwoSum again): the bound is the sum of those second-order errors' magnitudes, zero whenever no
    addition of an error rounded -- then ties of the final rounding are decided exactly."""
    h = np.array(xs[0], F64)
    t = np.zeros(h.shape, F64)
    g = np.zeros(h.shape, F64)
    for x in xs[1:]:
        h, e = wide.two_sum(h, x)
        t, f = wide.two_sum(t, e)
        g += np.abs(f)
    h, t = wide.two_sum(h, t)
    return h, t, g * (1 + 2 * len(xs) * U)


def nary_f64(xs: list) -> np.ndarray:
    """The FLOAT64 n-ary mean of same-shaped 1-D arrays, correctly rounded: ``dd_running_sum``,
    ``settle_dd``, and ``mean0_f64`` over the inputs of what stays open (an inf, NaN or overflow)."""
    k = len(xs)
    if k == 1:
        return xs[0].astype(F64, copy=True)
    with np.errstate(over="ignore", invalid="ignore"):
        h, t, err = dd_running_sum(xs)
        res, ok = settle_dd(h, t, err, k, np.float64)
    ok &= np.isfinite(h)
    idx = np.flatnonzero(~ok)
    if idx.size:
        res[idx] = mean0_f64(np.stack([x[idx] for x in xs]))
    return res
