// The reduction accumulator of FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64 (GM_EXACT): the
// FLOAT64 sum and the largest magnitude, and its bound test gm_settle. One of the accumulators
// reduce_acc.h chooses; the interface is theirs, plus the exact accumulators' gm_settle, GM_BITS_T
// and GM_STORE_BITS (reduce_store.h).

// FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64: the FLOAT64 sum (from -0.0: zeros alone keep
// IEEE's sign) and m, what the bound test of the store needs (gm_settle below): the CPU shape keeps
// m = max|x| (its vector loops keep it beside the sums, GM_MAX8), so that sum|x| <= n m; the GPU
// shape keeps m = sum|x| itself, as computed (issue 40: about five times tighter on normal data, one
// addition where the largest magnitude took a compare; its own rounding is in the bound's padding).
typedef struct { ACC s; ACC m; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = -0.0; (a).m = 0.0; }
#if GM_CPU_SHAPE
#define GM_ACC_ADD(a, x) { const ACC x_ = (x), ax_ = fabs(x_); (a).s += x_; (a).m = ax_ > (a).m ? ax_ : (a).m; }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m = (b).m > (a).m ? (b).m : (a).m; }
#define GM_ABS_SUM(a, n) ((double)(n) * (a).m)
#else
#define GM_ACC_ADD(a, x) { const ACC x_ = (x); (a).s += x_; (a).m += fabs(x_); }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m += (b).m; }
// the computed sum|x| is at least (1 - gamma(depth)) times the exact one: depth u <= 2^-19 (the
// bound's own premise) makes 1 + 2^-18 cover it
#define GM_ABS_SUM(a, n) ((a).m * (1.0 + 0x1p-18))
#endif
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

// The bound test of the fast path (docs/design.md, "Correct rounding"): 1 and the bits of
// the correctly rounded mean in *bits when the FLOAT64 sum's error bound settles the rounding, else
// 0 (then the exact tier decides from the values). Higham's bound for any summation tree in which
// no value passes through more than ``depth`` additions: |s - S| <= gamma(depth) sum|x| <=
// depth u (1 + 2^-19) sum|x|, and sum|x| <= GM_ABS_SUM (n m, or the GPU shape's computed sum padded) (the CPU shape's FLOAT16 float pre-sum, HALF_BLOCKS, is off in these
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
    const double err = (double)depth * GM_U53 * (1.0 + 0x1p-19) * GM_ABS_SUM(a, n);
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
