// The reduction accumulator of FLOAT64 (WIDE_FLOAT, not correctly rounded: REDUCE_SUM, the wide
// sum). One of the accumulators reduce_acc.h chooses; the interface is theirs, plus GM_WIDE_WORDS for
// the wide sum's two-word total.

// FLOAT64: two double-doubles (common.h: gm_dd4); STORE_RESULT takes the accumulator
typedef gm_dd4 gm_acc;
#define GM_ACC_ZERO(a) GM_DD4_ZERO(a)
#define GM_ACC_ADD(a, x) GM_DD4_ADD(a, x)
#define GM_ACC_MERGE(a, b) { gm_dd4_merge(&(a), (b)); }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(hi) X(lo) X(bhi) X(blo)

// the wide sum's total: gm_dd4's as a normalized double-double (hi == fl(hi + lo)), with the CPU
// device's rules (wide.py: f64_sum0): an inf or NaN input gives NaN if a NaN or both infinities are
// present, else the infinity, and lo 0; a total past DBL_MAX gives the infinity and lo 0; a zero total
// is -0.0 only when every input is (bhi is +0.0 once big values cancelled, and hi + bhi is then +0.0).
// With values from 2^960 on, (bhi + blo) 2^64 + hi + lo is added scaled by 2^-64 (AccurateDWPlusDW)
// and scaled back (exact).
#define GM_WIDE_WORDS(a, hi, lo) { const gm_dd4 a_ = (a); \
    if (!isfinite(a_.bhi)) { hi = isnan(a_.bhi) ? as_double(0x7FF8000000000000UL) : a_.bhi; lo = 0.0; } \
    else if (a_.bhi == 0) { hi = a_.hi + a_.bhi; lo = a_.lo; } \
    else { double h_ = a_.bhi, l_ = a_.blo; GM_DD_ADD2(h_, l_, a_.hi * 0x1p-64, a_.lo * 0x1p-64) \
        hi = h_ * 0x1p64; lo = isfinite(hi) ? l_ * 0x1p64 : 0.0; } }
