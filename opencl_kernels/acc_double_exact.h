// The reduction accumulator of FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64 (GM_EXACT): the
// FLOAT64 sum and m (the CPU shape's max|x|, the GPU shape's running sum of the partial sums'
// magnitudes), and its bound test gm_settle. One of the accumulators
// reduce_acc.h chooses; the interface is theirs, plus the exact accumulators' gm_settle, GM_BITS_T
// and GM_STORE_BITS (reduce_store.h).

// FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64: the FLOAT64 sum (from -0.0: zeros alone keep
// IEEE's sign) and m, what the bound test of the store needs (gm_settle below). The CPU shape keeps
// m = max|x| (its vector loops keep it beside the sums, GM_MAX8): |s - S| <= gamma(depth) n m, depth
// the additions any value passes through (from the launch geometry). The GPU shape keeps m = the sum
// of the magnitudes of every partial sum it computes (each addition's result): every addition's
// rounding error is at most u times its result's magnitude, and the errors of a summation tree add
// up, so |s - S| <= u m whatever the tree (a running error bound; no depth). On zero-mean data the
// partial sums stay far below depth times the values (issue 40: rows of 16384 normal values left 4
// of 16384 outputs open with depth u sum|x|, none with u m). m also bounds every partial sum, which
// the columns' span proof (reduce_gpu_span.h) needs; m = 0 means zeros alone (every partial sum 0).
typedef struct { ACC s; ACC m; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = -0.0; (a).m = 0.0; }
#if GM_CPU_SHAPE
#define GM_ACC_ADD(a, x) { const ACC x_ = (x), ax_ = fabs(x_); (a).s += x_; (a).m = ax_ > (a).m ? ax_ : (a).m; }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m = (b).m > (a).m ? (b).m : (a).m; }
#define GM_ABS_SUM(a, n) ((double)(n) * (a).m)
#define GM_ERR(a, n, depth) ((double)(depth) * GM_U53 * (1.0 + 0x1p-19) * GM_ABS_SUM(a, n))
#else
#define GM_ACC_ADD(a, x) { const ACC x_ = (x); (a).s += x_; (a).m += fabs((a).s); }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m += (b).m + fabs((a).s); }
// m's own additions (at most 2 per addition of s; a value's path holds at most about n + 64
// additions of s, n < 2^32: m's chain is below 2^35) make it at least (1 - 2^-18) of the exact sum
// of the computed partial sums: 1 + 2^-16 covers that and the product's rounding
#define GM_ABS_SUM(a, n) ((a).m * (1.0 + 0x1p-16))
#define GM_ERR(a, n, depth) (GM_U53 * GM_ABS_SUM(a, n))
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

// The bound test of the fast path (docs/design.md, "Correct rounding"): 1 and the bits of the
// correctly rounded mean in *bits when the FLOAT64 sum's error bound (GM_ERR, above) settles the
// rounding, else 0 (then the exact tier decides from the values). (The CPU shape's FLOAT16 float
// pre-sum, HALF_BLOCKS, is off in these variants: its bound left most zero-mean rows open.) A
// FLOAT16 sum of at most 2^13 values is exact in FLOAT64 (the host then sets depth 0; such variants
// store without this test). An inf or NaN sum is IEEE's answer already (the FLOAT64 sum of narrow
// values cannot overflow), and zeros alone (m = 0) give the sum's own sign.
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, uint* bits) {
    const double s = a.s;
    if (!isfinite(s) || a.m == 0.0) {
        *bits = GM_BITS_OF(s / (double)n);
        return 1;
    }
    if (!(a.m <= 0x1p1023)) return 0;       // an inf or NaN among values the sum shares a bound with
    const double err = GM_ERR(a, n, depth);
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
