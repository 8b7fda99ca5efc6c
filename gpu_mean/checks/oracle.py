"""An independent oracle: exact rational arithmetic, rounded once to the target format.

Nothing here uses gpu_mean's numerics (the CPU device's formulas): the conformance runner checks the
CPU device against it, and the tests check every device against it. Float values are decomposed into
integer mantissas and exponents so that sums of any length are exact. The per-element Fraction
functions are the definition; the vectorized ``expected`` path below gives the same bits faster,
argued per operation and tested against the Fraction functions.

bfloat16 (ml_dtypes.bfloat16; numpy's kind for it is 'V') is a format of 8 significand bits with
float32's exponent range. Rounding to it never goes through ml_dtypes' float64 cast, which rounds
twice (through float32): ``round_fraction`` and ``round_float64`` round once.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from fractions import Fraction

import numpy as np

FORMATS = {np.dtype(np.float32): (24, -126, 127), np.dtype(np.float16): (11, -14, 15),
           np.dtype(np.float64): (53, -1022, 1023)}
BFLOAT16_FORMAT = (8, -126, 127)


def _bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def is_float(dtype) -> bool:
    """numpy's floats and bfloat16."""
    dt = np.dtype(dtype)
    return dt.kind == "f" or (dt.kind == "V" and dt.name == "bfloat16" and dt == _bf16())


def _format(dtype):
    dt = np.dtype(dtype)
    return FORMATS[dt] if dt in FORMATS else BFLOAT16_FORMAT if dt == _bf16() else FORMATS[dt]


def round_float64(q, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Each float64 ``q`` rounded once to nearest-even in ``dtype``'s format (np.rint on the value in
    units of the target's last place, which the target's exponent range fixes), as float64 values,
    and whether ``q`` lay exactly on a midpoint. inf and NaN pass through; overflow gives inf."""
    p, emin, emax = _format(dtype)
    q = np.asarray(q, np.float64)
    out, mid = q.copy(), np.zeros(q.shape, bool)
    sel = np.isfinite(q) & (q != 0)
    v = q[sel]
    _, e = np.frexp(v)                               # v = m * 2^e, 1/2 <= |m| < 1
    unit = np.ldexp(1.0, np.maximum(e - 1, emin) - (p - 1))
    scaled = v / unit                                # exact: a power of two
    r = np.rint(scaled)
    mid[sel] = np.abs(scaled - np.trunc(scaled)) == 0.5
    with np.errstate(over="ignore"):
        val = r * unit
    out[sel] = np.where(np.abs(val) >= 2.0 ** (emax + 1), np.copysign(np.inf, v), val)
    return out, mid


def exact(v) -> Fraction:
    """A finite float (any width) as an exact Fraction."""
    return Fraction(float(v))


def round_fraction(q: Fraction, dtype) -> float:
    """Round ``q`` to nearest-even in ``dtype`` (float32/float16/float64/bfloat16); overflow gives +-inf."""
    p, emin, emax = _format(dtype)
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
    # through float64 for Python floats: exact for values of the format (ml_dtypes' own conversion
    # of a float64 into bfloat16 would round twice for others)
    ia = int(np.array(a).astype(dt).view(it))
    ib = int(np.array(b).astype(dt).view(it))
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
        if is_float(dt):
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
        if is_float(dt):
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
    if is_float(a.dtype):
        nan = np.isnan(a) & np.isnan(b)
        return bool(np.all(nan | (a.view(f"u{a.dtype.itemsize}") == b.view(f"u{b.dtype.itemsize}"))))
    return bool(np.array_equal(a, b))


F64 = np.float64


def _trunc_div(s: np.ndarray, n: int) -> np.ndarray:
    """Python-int truncation toward zero of each sum divided by ``n`` (object arrays: no overflow)."""
    return np.array([abs(int(v)) // n * (1 if v >= 0 else -1) for v in s.ravel()], dtype=object).reshape(s.shape)


def _ints(a) -> np.ndarray:
    return np.asarray(a).astype(object)


def fast_mean2(a, b, dtype) -> np.ndarray:
    """Correctly rounded (a + b) / 2. FLOAT16/FLOAT32/BFLOAT16: the float64 sum rounds once, halving
    is exact, and rounding float64 to the target is innocuous because 53 >= 2p + 2 (Figueroa) -- a
    different route from the CPU device's float32 sum with an overflow fix-up. FLOAT64: TwoSum gives
    a + b = s + e exactly, and where s is finite with s / 2 normal, RN((s + e) / 2) = RN(s + e) / 2
    = s / 2; every other element (an overflowing sum, a subnormal half) takes the Fraction path."""
    dt = np.dtype(dtype)
    if dt == np.float64:
        a, b = np.broadcast_arrays(np.asarray(a, F64), np.asarray(b, F64))
        with np.errstate(invalid="ignore", over="ignore"):
            s = a + b
            out = s / 2
        finite = np.isfinite(a) & np.isfinite(b)
        hard = finite & ~(np.isfinite(s) & (np.abs(s) >= 2.0**-1021))
        if np.any(hard):
            out[hard] = mean2(a[hard], b[hard], dt)
        return out
    if is_float(dt):
        with np.errstate(invalid="ignore", over="ignore"):
            q = (np.asarray(a, F64) + np.asarray(b, F64)) / 2
        if dt == _bf16():
            return round_float64(q, dt)[0].astype(dt)
        return q.astype(dt)
    return _trunc_div(_ints(a) + _ints(b), 2).astype(dt)


def fast_add2(a, b, dtype) -> np.ndarray:
    """a + b rounded once (floats, via float64 as in fast_mean2); integers wrap modulo 2^bits."""
    dt = np.dtype(dtype)
    if is_float(dt):
        with np.errstate(invalid="ignore", over="ignore"):
            s = np.asarray(a, F64) + np.asarray(b, F64)
            return round_float64(s, dt)[0].astype(dt) if dt == _bf16() else s.astype(dt)
    bits = dt.itemsize * 8
    s = (_ints(a) + _ints(b)) % (1 << bits)
    if dt.kind == "i":
        s = np.where(s >= 1 << (bits - 1), s - (1 << bits), s)
    return s.astype(dt)


def identity(x, dtype, scale_bias=None) -> np.ndarray:
    """DirectML's x * scale + bias: two roundings in float32 (float64 for FLOAT64), no fused
    multiply-add; the float64 product of two float32 values is exact, so each step rounds once."""
    dt = np.dtype(dtype)
    x = np.asarray(x)
    if scale_bias is None:
        return x.astype(dt, copy=True)
    s, b = float(np.float32(scale_bias.scale)), float(np.float32(scale_bias.bias))
    with np.errstate(invalid="ignore", over="ignore"):
        if dt == np.float64:
            return x * s + b
        t = (x.astype(F64) * s).astype(np.float32)
        return (t.astype(F64) + b).astype(np.float32).astype(dt)


def _nonfinite_means(rows: np.ndarray) -> np.ndarray:
    """The mean of rows holding an inf or a NaN: NaN when a NaN or both infinities are there, else
    the infinity (whatever the order of the additions)."""
    r = rows.astype(F64)
    nan = np.any(np.isnan(r), axis=1) | (np.any(r == np.inf, axis=1) & np.any(r == -np.inf, axis=1))
    return np.where(nan, np.nan, np.where(np.any(r == np.inf, axis=1), np.inf, -np.inf))


def _round_rows(rows: np.ndarray, dt) -> np.ndarray:
    """Exact mean of each row of a 2-D float array, rounded once to ``dt``."""
    n = rows.shape[1]
    finite = np.all(np.isfinite(rows), axis=1)
    out = _nonfinite_means(rows).astype(dt)   # only kept where a value is not finite
    if np.any(finite):
        sums = exact_sum_rows(rows[finite])
        out[finite] = [round_fraction(s / n, dt) for s in sums]
    return out


def _exact_f64_sums(rows: np.ndarray):
    """(float64 row sums, whether each is exact): TwoSum's error term of every addition is zero."""
    s = rows[:, 0].astype(F64)
    exact_ = np.ones(rows.shape[0], bool)
    for j in range(1, rows.shape[1]):
        b = rows[:, j].astype(F64)
        t = s + b
        bb = t - s
        err = (s - (t - bb)) + (b - bb)
        exact_ &= err == 0
        s = t
    return s, exact_


def _on_midpoint(q: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Whether each float64 ``q`` lies exactly halfway between ``r`` (q rounded to the target) and
    its neighbour on q's side."""
    toward = np.where(q > r.astype(F64), np.inf, -np.inf).astype(r.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        mid = (r.astype(F64) + np.nextafter(r, toward).astype(F64)) / 2
    return (q != r.astype(F64)) & (q == mid)


# mean_rows' results kept by the content of their input: the conformance pass and the tests check
# several devices (or kernel variants) on the same data, and the rows the fast path cannot decide
# take Python's rational arithmetic, about 0.3 ms each. Inputs up to MEMO_INPUT_BYTES are kept, up to
# MEMO_BYTES of results in all, the least recently used dropped first; a hit returns a copy.
MEMO_INPUT_BYTES = 64 << 20
MEMO_BYTES = 256 << 20
_memo: OrderedDict = OrderedDict()
_memo_bytes = 0
_memo_lock = threading.Lock()


def _memo_key(rows: np.ndarray, dt: np.dtype):
    if rows.nbytes > MEMO_INPUT_BYTES or rows.dtype.hasobject:
        return None
    data = np.ascontiguousarray(rows)
    digest = hashlib.blake2b(data.view(np.uint8).reshape(-1), digest_size=20).hexdigest()
    return (data.dtype.str, data.dtype.name, data.shape, dt.str, dt.name, digest)


def mean_rows(rows: np.ndarray, dtype) -> np.ndarray:
    """The mean of each row of a 2-D array: exact for integers (truncated toward zero); floats rounded
    once from the exact value (_mean_rows), remembered by the input's content (_memo)."""
    global _memo_bytes
    rows, dt = np.asarray(rows), np.dtype(dtype)
    key = _memo_key(rows, dt)
    if key is not None:
        with _memo_lock:
            hit = _memo.get(key)
            if hit is not None:
                _memo.move_to_end(key)
                return hit.copy()
    out = _mean_rows(rows, dt)
    if key is not None and out.nbytes <= MEMO_BYTES:
        with _memo_lock:
            if key not in _memo:
                _memo[key] = out.copy()
                _memo_bytes += out.nbytes
                while _memo_bytes > MEMO_BYTES:
                    _memo_bytes -= _memo.popitem(last=False)[1].nbytes
    return out


def _mean_rows(rows: np.ndarray, dt: np.dtype) -> np.ndarray:
    """mean_rows without the memo. Fast path: where the float64 sum is exact (TwoSum's error terms are
    all zero), q = sum / n rounds once in float64; rounding q again to FLOAT16/FLOAT32 can only go
    wrong when q lands exactly on one of the target's midpoints (they are float64 values, and
    rounding is monotonic, so q never crosses one). Every other row takes rational arithmetic."""
    n = rows.shape[1]
    if not is_float(dt):
        return _trunc_div(_ints(rows).sum(axis=1), n).astype(dt)
    with np.errstate(invalid="ignore", over="ignore"):
        s, ok = _exact_f64_sums(rows)
        q = s / n
    finite = np.all(np.isfinite(rows), axis=1)
    if dt == _bf16():
        r, mid = round_float64(q, dt)
        out = r.astype(dt)
        ok &= ~mid
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            out = q.astype(dt)
        if dt != np.float64:
            ok &= ~_on_midpoint(q, out)
    if not np.all(finite):
        out[~finite] = _nonfinite_means(rows[~finite]).astype(dt)
    bad = ~ok & finite
    if np.any(bad):
        out[bad] = _round_rows(rows[bad], dt)
    return out


def reduce_mean(x, axes, dtype) -> np.ndarray:
    """REDUCE AVERAGE or the integer mean over ``axes``, keeping the rank."""
    x = np.asarray(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    rows = moved.reshape(-1, n)
    r = mean_rows(rows, dtype)
    return r.reshape([1 if i in axes else s for i, s in enumerate(x.shape)])


def nary_mean(xs, dtype) -> np.ndarray:
    """The one-pass mean of the broadcast inputs, rounded once (integers truncated toward zero)."""
    full = np.broadcast_arrays(*[np.asarray(x) for x in xs])
    rows = np.stack([f.reshape(-1) for f in full], axis=1)
    return mean_rows(rows, dtype).reshape(full[0].shape)
