// The reduction accumulator of FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE without fp64 (GM_EXACT &&
// GM_FF), and its bound test gm_settle. One of the accumulators reduce_acc.h chooses; the interface
// is theirs, plus the exact accumulators' gm_settle, GM_BITS_T and GM_STORE_BITS (reduce_store.h).

// FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE without fp64: a float-float sum that tracks its own
// error bound (exact.h's gm_ff rules: TwoSum's error of each hi + x is exact, its addition into lo
// rounds by at most 2^-24 |lo|; a merge rounds twice, at lo_a + lo_b and at adding the TwoSum
// error, both added to the bound); pad keeps the partial 16 bytes
typedef struct { float hi, lo, bound, pad; } gm_acc;
#define GM_ACC_ZERO(a) { (a).hi = -0.0f; (a).lo = 0.0f; (a).bound = 0.0f; (a).pad = 0.0f; }
#define GM_ACC_ADD(a, x) { float s_, e_; gm_two_sum_f((a).hi, (float)(x), &s_, &e_); (a).hi = s_; \
    (a).lo += e_; (a).bound = fma(fabs((a).lo), 0x1p-24f, (a).bound); }
#define GM_ACC_MERGE(a, b) { const gm_acc b_ = (b); float s_, e_; gm_two_sum_f((a).hi, b_.hi, &s_, &e_); \
    const float t_ = (a).lo + b_.lo; (a).hi = s_; (a).lo = t_ + e_; \
    (a).bound = fma(fabs(t_), 0x1p-24f, fma(fabs((a).lo), 0x1p-24f, (a).bound + b_.bound)); }
#define GM_ACC_TOTAL(a) ((a).hi)
#define GM_ACC_FIELDS(X) X(hi) X(lo) X(bound) X(pad)

#define GM_BITS_T uint
// The bound test without fp64 (exact.h: gm_settle_ff_f32, gm_settle_ff_narrow): the float-float sum
// hi + lo within its tracked bound (padded for the bound's own float additions, valid for n < 2^22)
// of the exact total; the division is decided by exact remainders, never by trusting a float
// division. Sums that overflowed, inf, NaN and zero means are left to the exact tier: finite data
// never give inf or NaN.
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, uint* bits) {
    *bits = 0u;
    if (n >= (1ul << 22) || !isfinite(a.hi) || !isfinite(a.lo)) return 0;
    const float err = a.bound * (1.0f + (float)n * 0x1p-23f);
#if GM_X_H || GM_X_BF16
    return gm_settle_ff_narrow(a.hi, a.lo, err, (uint)n, GM_X_H, bits);
#else
    return gm_settle_ff_f32(a.hi, a.lo, err, (uint)n, bits);
#endif
}
#if GM_X_H || GM_X_BF16
#define GM_STORE_BITS(p, b) (*(__global ushort*)(p) = (ushort)(b))
#else
#define GM_STORE_BITS(p, b) (*(p) = gm_as_float(b))
#endif
