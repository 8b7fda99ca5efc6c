// The reduction accumulator of FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64 (GM_EXACT): the
// FLOAT64 sum and the largest magnitude, and its bound test gm_settle. One of the accumulators
// reduce_acc.h chooses; the interface is theirs, plus the exact accumulators' gm_settle, GM_BITS_T
// and GM_STORE_BITS (reduce_store.h).

// FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64: the FLOAT64 sum (from -0.0: zeros alone keep
// IEEE's sign) and m = max|x|, what the bound test of the store needs (gm_settle below)
typedef struct { ACC s; ACC m; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = -0.0; (a).m = 0.0; }
#define GM_ACC_ADD(a, x) { const ACC x_ = (x), ax_ = fabs(x_); (a).s += x_; (a).m = ax_ > (a).m ? ax_ : (a).m; }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m = (b).m > (a).m ? (b).m : (a).m; }
#define GM_ACC_TOTAL(a) ((a).s)
#define GM_ACC_FIELDS(X) X(s) X(m)

#define GM_BITS_T uint
// the output type's bits of a double rounded once (infinities, NaN, zeros)
#if GM_X_H
#define GM_BITS_OF(x) ((uint)gm_double_to_half(x))
#elif GM_X_BF16
#define GM_BITS_OF(x) ((uint)gm_double_to_bf16(x))
#else
#define GM_BITS_OF(x) gm_as_uint((float)(x))
#endif
#if GM_X_H || GM_X_BF16
#define GM_STORE_BITS(p, b) (*(__global ushort*)(p) = (ushort)(b))
#else
#define GM_STORE_BITS(p, b) (*(p) = gm_as_float(b))
#endif

// The bound test of the fast path (docs/design.md, "Correct rounding (issue 22)"): 1 and the bits of
// the correctly rounded mean in *bits when the FLOAT64 sum's error bound settles the rounding, else
// 0 (then gm_reduce_exact decides from the values). Higham's bound for any summation tree in which
// no value passes through more than ``depth`` additions: |s - S| <= gamma(depth) sum|x| <=
// depth u (1 + 2^-19) n m (the CPU shape's FLOAT16 float pre-sum, HALF_BLOCKS, is off in these
// variants: its bound left most zero-mean rows open). A FLOAT16 sum of at most 2^13 values is exact
// in FLOAT64 (the host then sets depth 0). An inf or NaN sum is IEEE's answer already (the
// FLOAT64 sum of narrow values cannot overflow), and zeros alone (m = 0) give the sum's own sign.
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, uint* bits) {
    const double s = a.s;
    if (!isfinite(s) || a.m == 0.0) {
        *bits = GM_BITS_OF(s / (double)n);
        return 1;
    }
    if (!(a.m <= 0x1p1023)) return 0;       // an inf or NaN among values the sum shares a bound with
    const double err = (double)depth * GM_U53 * (1.0 + 0x1p-19) * (double)n * a.m;
#if GM_X_H || GM_X_BF16
    ushort h;
#if GM_X_H
    const int ok = gm_settle_double_f16(s, err, (uint)n, &h);
#else
    const int ok = gm_settle_double_bf16(s, err, (uint)n, &h);
#endif
    *bits = h;
    return ok;
#else
    return gm_settle_double_f32(s, err, (uint)n, bits);
#endif
}
