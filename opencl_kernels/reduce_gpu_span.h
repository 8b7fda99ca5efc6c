// The GPU shape's span proof of columns and long rows (GM_MSPAN_P: the format's precision p, 24 for
// FLOAT32 and 8 for BFLOAT16, with fp64; reduce_kernels.gpu_col_span): an output whose FLOAT64 sum is
// provably exact is stored from its double quotient, rounded once more, with flag 0; exact ties of
// the rounding, which no error bound settles, need no redo then. The argument (docs/design.md, "The
// span proof of columns and long rows"):
//   every value is a multiple of 2^q, q = e - bias - p + 1 for the smallest nonzero magnitude's
//   exponent field e (1 for subnormals); if GM_ABS_SUM (m padded: the sum of the magnitudes of every
//   partial sum computed, so at least each) < 2^(q + 52), every addition is exact, by induction: its
//   operands are exact multiples of 2^q, so is their sum y, and fl(y) = y while |y| < 2^(q + 53),
//   while a |y| past it would round to a partial at least 2^(q + 53). So s is the exact total S.
//   With ceil(log2 n) <= 51 - p (the host's condition, span_limit > 0), no mean off a midpoint of the
//   format lies within half an ulp of FLOAT64 of one, so rounding the double quotient once more is the
//   correctly rounded mean, ties included (a midpoint has p + 1 bits: the quotient is then exact).
// The smallest exponent field of a work-item's or chunk's values travels inside its accumulator: in
// the low byte of m, m rounded up past that byte first, so that m only grows and the bound
// stays a bound (by at most 2^-43 of m). A partial whose m is 0 holds zeros alone (GM_E_NONE: no
// field); one whose m is not finite, or is 2^1023 or more, carries no field (0: no proof).
//
// needs: reduce_acc.h (gm_acc of acc_double_exact.h: s, m), reduce_store.h's GM_BITS_OF, GM_STORE_BITS

#define GM_E_NONE 0x1ffu     // no nonzero value (the neutral of min)

// lo: the minimum over the values of (their FLOAT64 exponent field, common.h's GM_E64, - 1): a zero
// wraps to the top
#define GM_LO_ADD(lo, x) lo = min(lo, GM_E64(x) - 1u)

// the format's exponent field of the smallest nonzero magnitude (FLOAT32's, which BFLOAT16 shares):
// the FLOAT64 field less 1023 - 127, 1 for float subnormals, GM_E_NONE for zeros alone
GM_INLINE uint gm_e_of(uint lo) {
    return lo == 0xffffffffu ? GM_E_NONE : (uint)min(max((int)((lo + 1u) >> 20) - 896, 1), 255);
}

GM_INLINE gm_acc gm_e_pack(gm_acc a, uint e) {
    if (a.m > 0.0 && a.m < 0x1p1023) a.m = as_double(((as_ulong(a.m) + 0x100ul) & ~(ulong)0xff) | (ulong)(e & 0xffu));
    return a;
}

GM_INLINE uint gm_e_unpack(gm_acc a) {
    if (a.m == 0.0) return GM_E_NONE;
    return a.m < 0x1p1023 ? (uint)(as_ulong(a.m) & 0xfful) : 0u;
}

// Output element i (flag fi) stored from the exact sum when the proof above holds: 1; else 0 (the
// bound test decides, gm_store). Zeros alone and non-finite sums are gm_store's.
GM_INLINE int gm_mspan_store(gm_acc a, uint e, ulong n, __global OUT_T* out, long i, __global uchar* flag,
                             long fi GM_CHK_P) {
    if (e == 0u || e == GM_E_NONE || !isfinite(a.s)) return 0;
    const int q = (int)e - 127 - GM_MSPAN_P + 1;
    const double limit = as_double((ulong)(q + 52 + 1023) << 52);      // 2^(q + 52)
    if (!(GM_ABS_SUM(a, n) < limit)) return 0;
    GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, i, 1), GM_BITS_OF(a.s / (double)n));
    GM_FLAG(fi) = (uchar)0;
    return 1;
}
