"""An independent oracle: exact rational arithmetic, rounded once to the target format.

Nothing here uses gpu_mean's numerics; float values are decomposed into integer mantissas and
exponents so that sums of any length are exact.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

FORMATS = {np.dtype(np.float32): (24, -126, 127), np.dtype(np.float16): (11, -14, 15),
           np.dtype(np.float64): (53, -1022, 1023)}


def exact(v) -> Fraction:
    """A finite float (any width) as an exact Fraction."""
    return Fraction(float(v))


def round_fraction(q: Fraction, dtype) -> float:
    """Round ``q`` to nearest-even in ``dtype`` (float32/float16/float64); overflow gives +-inf."""
    p, emin, emax = FORMATS[np.dtype(dtype)]
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - (p - 1))
    m = q / ulp
    n = m.numerator // m.denominator
    rem = m - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = n * ulp
    if r >= Fraction(2) ** (emax + 1):
        return sign * float("inf")
    return sign * float(r)


def exact_sum_rows(x: np.ndarray) -> list:
    """Exact sums of each row of a 2-D float array, as Fractions (integer mantissa arithmetic)."""
    x = np.asarray(x, np.float64)
    m, e = np.frexp(x)
    mi = (m * 2.0**53).astype(np.int64)      # exact: float64 mantissa has 53 bits
    e = e.astype(np.int64) - 53
    emin = int(e.min()) if e.size else 0
    out = []
    for r in range(x.shape[0]):
        total = 0
        row_m, row_e = mi[r], e[r]
        for ue in np.unique(row_e):
            sel = row_m[row_e == ue]
            # int64 partial sums of 53-bit mantissas overflow past 2^10 terms: sum in chunks
            s = sum(int(c.sum()) for c in np.array_split(sel, max(1, sel.size // 512)))
            total += s << int(ue - emin)
        out.append(Fraction(total) * Fraction(2) ** emin if emin < 0 else Fraction(total << emin))
    return out


def ulp_distance(a, b, dtype) -> int:
    """Distance in units in the last place between two same-signed finite values of ``dtype``."""
    dt = np.dtype(dtype)
    it = {2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
    ia = int(np.array(a, dt).view(it))
    ib = int(np.array(b, dt).view(it))
    return abs(ia - ib)


def _signed_zero(r: float, x, y) -> float:
    """IEEE 754: an exact zero sum is +0 under round-to-nearest unless both addends are -0."""
    if r == 0 and np.signbit(x) and np.signbit(y):
        return -0.0
    return r


def mean2(a, b, dtype) -> np.ndarray:
    """Correctly rounded (a + b) / 2 for floats; truncation toward zero for integers."""
    dt = np.dtype(dtype)
    a, b = np.asarray(a), np.asarray(b)
    out = np.empty(a.shape, dt)
    for idx in np.ndindex(a.shape):
        x, y = a[idx], b[idx]
        if dt.kind == "f":
            if np.isnan(x) or np.isnan(y) or (np.isinf(x) and np.isinf(y) and x != y):
                out[idx] = np.nan
            elif np.isinf(x) or np.isinf(y):
                out[idx] = x if np.isinf(x) else y
            else:
                out[idx] = _signed_zero(round_fraction((exact(x) + exact(y)) / 2, dt), x, y)
        else:
            s = int(x) + int(y)
            out[idx] = abs(s) // 2 * (1 if s >= 0 else -1)
    return out


def add2(a, b, dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    out = np.empty(np.shape(a), dt)
    for idx in np.ndindex(out.shape):
        x, y = np.asarray(a)[idx], np.asarray(b)[idx]
        if dt.kind == "f":
            if not (np.isfinite(x) and np.isfinite(y)):
                with np.errstate(invalid="ignore"):
                    out[idx] = np.float64(x) + np.float64(y)
            else:
                out[idx] = _signed_zero(round_fraction(exact(x) + exact(y), dt), x, y)
        else:
            bits = dt.itemsize * 8
            s = (int(x) + int(y)) % (1 << bits)
            if dt.kind == "i" and s >= 1 << (bits - 1):
                s -= 1 << bits
            out[idx] = s
    return out


def equal_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality, treating every NaN as equal to every NaN."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        nan = np.isnan(a) & np.isnan(b)
        return bool(np.all(nan | (a.view(f"u{a.dtype.itemsize}") == b.view(f"u{b.dtype.itemsize}"))))
    return bool(np.array_equal(a, b))
