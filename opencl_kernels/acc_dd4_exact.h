// The reduction accumulator of FLOAT64 REDUCE AVERAGE, correctly rounded (WIDE_FLOAT && GM_EXACT,
// GM_X_D), and its bound test gm_settle. One of the accumulators reduce_acc.h chooses; the interface
// is theirs, plus the exact accumulators' gm_settle, GM_BITS_T and GM_STORE_BITS (reduce_store.h).

// FLOAT64 REDUCE AVERAGE correctly rounded (issue 22 stage 3, GM_X_D): gm_dd4's fields, hi + lo the
// double-double of the values (GM_DD_ADD1, from -0.0: zeros alone keep IEEE's sign), bhi the largest
// magnitude m for gm_settle's bound; a value from 2^960 on, an infinity or a NaN makes m +inf (the
// exact pass then decides: IEEE's inf and NaN, totals past DBL_MAX) and adds -0.0 (no branch), so
// hi + lo never overflows
typedef gm_dd4 gm_acc;
#define GM_ACC_ZERO(a) { (a).hi = -0.0; (a).lo = 0.0; (a).bhi = 0.0; (a).blo = 0.0; }
#define GM_ACC_ADD(a, x) { const double x4_ = (x), ax4_ = fabs(x4_); const int ok4_ = ax4_ < 0x1p960; \
    GM_DD_ADD1((a).hi, (a).lo, ok4_ ? x4_ : -0.0) \
    (a).bhi = ok4_ ? (ax4_ > (a).bhi ? ax4_ : (a).bhi) : as_double(0x7FF0000000000000UL); }
#define GM_ACC_MERGE(a, b) { const gm_acc b_ = (b); GM_DD_ADD2((a).hi, (a).lo, b_.hi, b_.lo) \
    (a).bhi = b_.bhi > (a).bhi ? b_.bhi : (a).bhi; }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(hi) X(lo) X(bhi) X(blo)

// FLOAT64 (stage 3): the double-double's bound for any summation tree in which no value passes
// through more than ``depth`` additions (GM_DD_ADD1 and GM_DD_ADD2 err by at most 5 u^2 of the
// magnitudes they add; padded to 8 u^2): |s - S| <= depth 8 u^2 n m; then exact.h's
// gm_settle_dd_f64. Zeros alone (m = 0) give the sum's own sign; m = +inf (a value from 2^960 on,
// inf, NaN) goes to the exact pass.
#define GM_BITS_T ulong
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, ulong* bits) {
    const double err = (double)depth * 0x1p-103 * (double)n * a.bhi;      // +inf for m = +inf
    const int ok = gm_settle_dd_f64(a.hi, a.lo, err, (uint)n, bits);      // *bits: hi / n
    return (a.bhi == 0.0) | ok;     // no branch (PoCL vectorizes the store across work-items)
}
#define GM_STORE_BITS(p, b) (*(p) = as_double(b))
