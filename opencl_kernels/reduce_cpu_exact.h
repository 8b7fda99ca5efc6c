// The CPU shape's exact path (GM_EXACT; reduce_cpu.cl includes it then): each kernel that stores
// results redoes the outputs the bound test left open before it returns (gm_redo_open, GM_REDO_OPEN;
// the column kernel's gm_redo_open_cols), through the second tier (gm_dd_output, exact.h's gm_dd2)
// and else the superaccumulator (reduce_exact.h, reduce_limbs.h); and the bound test of eight results
// at once (gm_settle8, gm_settle8_bf16) for the short-rows and column kernels.

// The second tier (exact.h, gm_dd2): FLOAT32, FLOAT16 and BFLOAT16 with fp64, the CPU shape's exact
// pass. An open output's n values summed as h + c; the quotient's rounding decided from it unless
// the sum is zero or its errors rounded (then the superaccumulator above).
#if USE_FP64 && !GM_X_D
#define GM_DD_TIER 1
#if GM_X_H
#define GM_DD_FMT 1
#elif GM_X_BF16
#define GM_DD_FMT 2
#else
#define GM_DD_FMT 0
#endif
#if GM_DD_FMT == 1
#define GM_DD_EMIN (-14)
#define GM_DD_PM1 10
#elif GM_DD_FMT == 2
#define GM_DD_EMIN (-126)
#define GM_DD_PM1 7
#else
#define GM_DD_EMIN (-126)
#define GM_DD_PM1 23
#endif
// Whether a FLOAT64 sum s of n values of the format, added in any order, is their exact total, from
// their largest magnitude mx and smallest nonzero one mn: every value is a multiple of u, mn's ulp in
// the format (a larger value's ulp is u times a power of two; a subnormal's is the format's least),
// and so is every partial sum, of magnitude below n mx: exact in double while n mx < 2^53 u (fl(n mx)
// < 2^53 u, a power of two, implies it). Not finite (inf, NaN): no.
GM_INLINE int gm_sum_is_exact(double s, double mx, double mn, ulong n) {
    const double u = ldexp(1.0, max(ilogb(mn), GM_DD_EMIN) - GM_DD_PM1);
    return isfinite(s) && mx != 0.0 && (double)n * mx < u * 0x1p53;
}
// First a plain FLOAT64 sum with the values' largest and smallest nonzero magnitudes: where it is
// exact (gm_sum_is_exact: values within about 29 - log2(n) binades for FLOAT32; always for FLOAT16
// runs below 2^13), it is the pair (s, 0) and decides at once, a dependent addition a value instead of
// two TwoSums (short columns of normal data: about one output in ten is an exact tie, all settled
// here). Else the pair h + c.
// stmt for each of the output's n values, loaded as the double x, in the walk's order
#define GM_DD_LANES_MIN 32      // innermost reduced runs of at least this many values take the lanes
#if RN > 0
#define GM_DD_EACH(stmt) { long idx_[RNA]; long off_ = gm_walk_start(0, idx_, m); \
    for (ulong j_ = 0; j_ < n; ++j_) { \
        const double x = LOAD1(GM_AT(GM_A_IN, const T, in, base + off_, 1)); stmt; \
        off_ = gm_walk_next(off_, idx_, m); } }
#else
#define GM_DD_EACH(stmt) { if (n) { const double x = LOAD1(GM_AT(GM_A_IN, const T, in, base, 1)); stmt; } }
#endif
#if RN > 0
// The pair's pass over eight lanes (docs/design.md, "The exact pass's second tier"): one open output
// of a whole reduction (R1) or of a few long columns (R5) is redone by one work-item, and the scalar
// passes are chains of dependent additions (about 20 cycles a value in the pair's). The values go as
// runs of the innermost reduced dimension (its length L and stride st), eight at a time into eight
// lanes, a run's last values through the scalar statement. A lane's pair h + c is its values' exact
// total while its c's errors are zero, so the eight lanes' pairs added into one gm_dd2 give the exact
// total, or set bad: the bits are those of the scalar passes (both give the correctly rounded mean,
// or leave the output to the superaccumulator). No plain sum first: where it would be exact, so is
// the pair (its errors are all zero), and in lanes the plain sum's pass cost more than the pair's
// (a whole FLOAT32 reduction of 2^23 values: about 2.9 against 2 ms on PoCL).
GM_INLINE double8 gm_dd_load8(__global const T* in, long p, long st GM_CHK_P) {
    return (double8)(LOAD1(GM_AT(GM_A_IN, const T, in, p, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + st, 1)),
                     LOAD1(GM_AT(GM_A_IN, const T, in, p + 2 * st, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + 3 * st, 1)),
                     LOAD1(GM_AT(GM_A_IN, const T, in, p + 4 * st, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + 5 * st, 1)),
                     LOAD1(GM_AT(GM_A_IN, const T, in, p + 6 * st, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + 7 * st, 1)));
}
// a lane's TwoSums: x8 joins h8, h8's error joins c8, an error of c8 sets bad8
GM_INLINE void gm_dd_two8(double8* h8, double8* c8, long8* bad8, const double8 x8) {
    const double8 h = *h8, c = *c8;
    const double8 sv = h + x8, bv = sv - h, e = (h - (sv - bv)) + (x8 - bv);
    const double8 t = c + e, cv = t - c, f = (c - (t - cv)) + (e - cv);
    *h8 = sv; *c8 = t; *bad8 |= (f != (double8)(0.0));
}
// Blocks of GM_DD_BLK vectors: each lane's plain FLOAT64 sum of its GM_DD_BLK values, with the
// largest and smallest nonzero magnitudes' bits, is exact when every value is a multiple of u (the
// smallest one's ulp in its format, gm_sum_is_exact's argument) and GM_DD_BLK times the largest is
// below 2^53 u: 2^(emx + 1 + 6) <= 2^(53 + max(emn, emin) - (p - 1)). Then the block's lane sums
// join the pair by one TwoSum each; else (a lane spanning more binades, an inf or a NaN) the block
// goes value by value through the TwoSums. Five operations a vector instead of about twelve.
#define GM_DD_BLK 64
#define GM_DD_BLOCK(LD) { \
    double8 s_ = (double8)(0.0); \
    ulong8 mx_ = (ulong8)(0), mn_ = (ulong8)(0xFFFFFFFFFFFFFFFFul); \
    for (int i_ = 0; i_ < GM_DD_BLK; ++i_) { \
        const double8 x8 = LD(j_ + 8 * i_); \
        const ulong8 mag_ = as_ulong8(x8) & (ulong8)(0x7FFFFFFFFFFFFFFFul); \
        s_ += x8; mx_ = max(mx_, mag_); mn_ = min(mn_, mag_ - (ulong8)(1)); } \
    const long8 emx_ = as_long8(mx_ >> 52) - 1023; \
    const long8 emn_ = max(as_long8((mn_ + (ulong8)(1)) >> 52) - 1023, (long8)(GM_DD_EMIN)); \
    if (all(emx_ + 7 <= emn_ + (53 - GM_DD_PM1))) gm_dd_two8(&h8, &c8, &bad8, s_); \
    else for (int i_ = 0; i_ < GM_DD_BLK; ++i_) gm_dd_two8(&h8, &c8, &bad8, LD(j_ + 8 * i_)); }
#define GM_DD_LD1(i) GM_IN8(p_ + (i))
#define GM_DD_LDS(i) gm_dd_load8(in, p_ + (i) * st_, st_ GM_CHK_A)
GM_INLINE int gm_dd_output_lanes(__global const T* in, long base, __constant const gm_rmeta* m, ulong n, uint* bits
                                 GM_CHK_P) {
    gm_dd2 a;
    gm_dd2_init(&a);
    double8 h8 = (double8)(0.0), c8 = (double8)(0.0);
    long8 bad8 = (long8)(0);
    // the output's values as runs of the innermost reduced dimension (length L, stride st), each in
    // blocks, then vectors, then its last values one by one
    const long st_ = m->red_in[RN - 1], L_ = m->red_shape[RN - 1];
    const ulong runs_ = n / (ulong)L_;
    long idx_[RNA];
    for (ulong r_ = 0; r_ < runs_; ++r_) {
        const long p_ = base + gm_walk_start((long)r_ * L_, idx_, m);
        long j_ = 0;
        if (st_ == 1) {
            for (; j_ + 8 * GM_DD_BLK <= L_; j_ += 8 * GM_DD_BLK) GM_DD_BLOCK(GM_DD_LD1)
            for (; j_ + 8 <= L_; j_ += 8) gm_dd_two8(&h8, &c8, &bad8, GM_DD_LD1(j_));
        } else {
            for (; j_ + 8 * GM_DD_BLK <= L_; j_ += 8 * GM_DD_BLK) GM_DD_BLOCK(GM_DD_LDS)
            for (; j_ + 8 <= L_; j_ += 8) gm_dd_two8(&h8, &c8, &bad8, GM_DD_LDS(j_));
        }
        for (; j_ < L_; ++j_) gm_dd2_add(&a, LOAD1(GM_AT(GM_A_IN, const T, in, p_ + j_ * st_, 1)));
    }
    double hh[8], cc[8];
    vstore8(h8, 0, hh); vstore8(c8, 0, cc);
    for (int k = 0; k < 8; ++k) { gm_dd2_add(&a, hh[k]); gm_dd2_add(&a, cc[k]); }
    bad8.lo |= bad8.hi; bad8.s01 |= bad8.s23;
    a.bad |= (bad8.s0 | bad8.s1) != 0;
    return gm_dd2_settle(&a, (uint)n, GM_DD_FMT, bits);
}
#endif
GM_INLINE int gm_dd_output(__global const T* in, long base, __constant const gm_rmeta* m, ulong n, uint* bits
                           GM_CHK_P) {
#if RN > 0
    if (m->red_shape[RN - 1] >= GM_DD_LANES_MIN) return gm_dd_output_lanes(in, base, m, n, bits GM_CHK_A);
#endif
    gm_dd2 a;
    gm_dd2_init(&a);
    double s = 0.0, mx = 0.0, mn = INFINITY;
    GM_DD_EACH(s += x; mx = fmax(mx, fabs(x)); mn = x != 0.0 ? fmin(mn, fabs(x)) : mn)
    if (gm_sum_is_exact(s, mx, mn, n)) {
        a.h = s;
        return gm_dd2_settle(&a, (uint)n, GM_DD_FMT, bits);
    }
    GM_DD_EACH(gm_dd2_add(&a, x))
    return gm_dd2_settle(&a, (uint)n, GM_DD_FMT, bits);
}
#else
#define GM_DD_TIER 0
#endif

// The exact path, CPU shape: each kernel that stores results redoes the outputs it left open before
// it returns (no second launch: on PoCL a launch costs about as much as the exact pass of the few
// outputs normal data leaves open). gm_redo_open scans the flags of outputs [k0, k1) (sixteen bytes at
// a time; GM_FLAG_BITS: a bit per output, k0 a multiple of 8) and sums each open output's values
// again: the second tier first (gm_dd_output), else the superaccumulator, block by block where the
// values' exponents allow (gm_limbs_range: a block of 1024 values within 29 binades summed in a long,
// about 19x the value-by-value deposit on cancelling FLOAT32 data); then divides, rounds and stores.
GM_INLINE void gm_redo_open(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                            __global const uchar* flag, ulong flag_off, __constant const gm_rmeta* m,
                            long k0, long k1, ulong n GM_CHK_P) {
#if GM_FLAG_BITS
    const long f0 = k0 >> 3, f1 = (k1 + 7) >> 3;
#else
    const long f0 = k0, f1 = k1;
#endif
    for (long f = f0; f < f1; ++f) {
        if (f + 16 <= f1) {      // sixteen flag bytes at once: nearly always all clear
            const uchar16 v = vload16(0, GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + f, 16));
            const ulong2 w = as_ulong2(v);
            if ((w.s0 | w.s1) == 0) { f += 15; continue; }
        }
        const uint byte = *GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + f, 1);
        if (byte == 0) continue;
#if GM_FLAG_BITS
        for (int bit = 0; bit < 8; ++bit) {
            const long k = f * 8 + bit;
            if (!((byte >> bit) & 1u) || k >= k1) continue;
#else
        {
            const long k = f;
#endif
            const long ib = (long)in_off + gm_keep_offset(m, k, 1), ob = (long)out_off + gm_keep_offset(m, k, 2);
#if GM_DD_TIER
            uint bits;
            if (n < 0x100000000ul && gm_dd_output(in, ib, m, n, &bits GM_CHK_A)) {
                GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, ob, 1), bits);
                continue;
            }
#endif
            gm_xacc x;
            GM_XINIT(&x);
            gm_limbs_range(&x, in, ib, m, 0, (long)n, 1 GM_CHK_A);
            gm_exact_store(&x, n, out, ob GM_CHK_A);
        }
    }
}
#if GM_DD_TIER && RN == 1
// The column kernel's open outputs (GM_REDO_OPEN_COLS): ncols adjacent columns from input element b
// on, n rows rs apart, outputs k0 .. k0 + ncols - 1 (a flag byte each). Redone one by one, each open
// column would be read down its rows alone, a value per cache line, eight lines of the same rows
// read eight times: on standardized columns (each column's mean a rounding residue near zero, every
// output open) that ran at about 0.05 of the main pass. Here eight adjacent columns with an open one
// among them go down their rows together: each column's pair h + c in a lane (gm_dd2_add's
// operations, the column's values in row order, as the scalar pass adds them), then each open
// column's pair is settled as gm_dd_output's (gm_dd2_settle), or the column goes to the
// superaccumulator (gm_limbs_range, strided).
GM_INLINE void gm_redo_open_cols(__global const T* in, long b, long rs, __global OUT_T* out, ulong out_off,
                                 __global const uchar* flag, ulong flag_off, __constant const gm_rmeta* m,
                                 long k0, long ncols, ulong n GM_CHK_P) {
    for (long g = 0; g < ncols; g += 8) {
        const int w = (int)min(8l, ncols - g);
        uint open = 0;
        for (int j = 0; j < w; ++j)
            open |= (*GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + k0 + g + j, 1) != 0) ? (1u << j) : 0u;
        if (!open) continue;
        double8 h8 = (double8)(0.0), c8 = (double8)(0.0);
        long8 bad8 = (long8)(0);
        for (ulong r = 0; r < n; ++r) {
            const long q = b + (long)r * rs + g;
            double xs[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
            double8 x8;
            if (w == 8) {
                x8 = GM_IN8(q);
            } else {
                for (int j = 0; j < w; ++j) xs[j] = LOAD1(GM_AT(GM_A_IN, const T, in, q + j, 1));
                x8 = vload8(0, xs);
            }
            gm_dd_two8(&h8, &c8, &bad8, x8);
        }
        double hh[8], cc[8];
        long bb[8];
        vstore8(h8, 0, hh); vstore8(c8, 0, cc); vstore8(bad8, 0, bb);
        for (int j = 0; j < w; ++j) {
            if (!((open >> j) & 1u)) continue;
            const long k = k0 + g + j, ob = (long)out_off + gm_keep_offset(m, k, 2);
            gm_dd2 a;
            a.h = hh[j]; a.c = cc[j]; a.bad = bb[j] != 0;
            uint bits;
            if (n < 0x100000000ul && gm_dd2_settle(&a, (uint)n, GM_DD_FMT, &bits)) {
                GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, ob, 1), bits);
                continue;
            }
            gm_xacc x;
            GM_XINIT(&x);
            gm_limbs_range(&x, in, b + g + j, m, 0, (long)n, 1 GM_CHK_A);
            gm_exact_store(&x, n, out, ob GM_CHK_A);
        }
    }
}
#endif
// in a kernel with the main kernels' parameter names: outputs [k0, k1) settled (GM_FAST_ONLY, for
// tests only: the fast path alone, open outputs keep the bound test's candidate)
#if GM_FAST_ONLY
#define GM_REDO_OPEN(k0, k1)
#else
#define GM_REDO_OPEN(k0, k1) gm_redo_open(in, in_off, out, out_off, flag, flag_off, m, k0, k1, n GM_CHK_A)
#endif
// the finalize pass reads the values of the outputs it leaves open
#define GM_FIN_IN , __global const T* in, ulong in_off

#if GM_SETTLE8
// Eight results of FLOAT32 at once (the short-rows and column kernels): gm_settle lane by lane, for
// eight totals t whose values' magnitudes are at most mx (one bound for the eight). The quotient
// GM_Q8 is t / n, or the exact product by 1/n for a power of two. Returns the lanes the bound leaves
// open (-1); the other lanes of *res are the correctly rounded means.
GM_INLINE int8 gm_settle8(ACC8 t, double mx, long depth, ulong n, float8* res) {
    const ACC8 q = GM_Q8(t, n);
    // the error of the sum over n, and of the quotient and the two ends (4 u |q|, with |q| <= mx):
    // one pad for the eight lanes, as gm_settle_double_f32's but with mx for |q|
    const double pad = ((double)depth * (1.0 + 0x1p-19) * (1.0 + 0x1p-40) + 4.0) * GM_U53 * mx;
    const float8 lo = convert_float8(q - (ACC8)(pad)), hi = convert_float8(q + (ACC8)(pad));
    // a zero mean of values not all zero is open too: its ends are -pad and +pad (errn > 0 whenever
    // mx > 0 and n > 1), whose signs differ; for n = 1 the mean is the value itself
    int8 open = as_int8(lo) != as_int8(hi);
    *res = lo;
    // mx holds the values' largest bits: an inf or NaN among them makes it inf or NaN
    if (mx == 0.0 || !(mx <= 0x1p1023)) {
        // zeros alone, infinities, NaN: one rounding is IEEE's answer; finite sums beside an inf or
        // NaN of another lane (mx is then no bound): the exact pass
        const int8 special = (mx == 0.0) ? (int8)(-1) : ~convert_int8(isfinite(q));
        *res = select(lo, convert_float8(q), special);
        open = (mx <= 0x1p1023) ? (open & ~special) : ~special;
    }
    return open;
}
#endif

#if GM_SETTLE8_BF16
// gm_settle8 for BFLOAT16 (the column kernel's eight adjacent results, reduce_kernels.b16_cols): the
// same ends, rounded once to bfloat16 each (GM_BF16_BITS8: through FLOAT32 rounded to odd, as
// gm_double_to_bf16), equal bits settle a lane; the lanes the bound leaves open are -1. Lane for lane
// the rule of gm_settle with gm_settle_double_bf16 (mx bounds every lane's values; its pad covers
// err / n and the quotient's and the ends' roundings, as gm_settle8's).
GM_INLINE int8 gm_settle8_bf16(ACC8 t, double mx, long depth, ulong n, ushort8* res) {
    const ACC8 q = GM_Q8(t, n);
    const double pad = ((double)depth * (1.0 + 0x1p-19) * (1.0 + 0x1p-40) + 4.0) * GM_U53 * mx;
    const ushort8 lo = GM_BF16_BITS8(q - (ACC8)(pad)), hi = GM_BF16_BITS8(q + (ACC8)(pad));
    // a zero mean of values not all zero is open: its ends -pad and +pad round to -0.0 and +0.0
    int8 open = convert_int8(lo != hi);
    *res = lo;
    if (mx == 0.0 || !(mx <= 0x1p1023)) {
        // zeros alone, infinities, NaN: one rounding is IEEE's answer; finite sums beside an inf or
        // NaN of another lane (mx is then no bound): the exact pass
        const int8 special = (mx == 0.0) ? (int8)(-1) : convert_int8(~isfinite(q) != 0);
        *res = select(lo, GM_BF16_BITS8(q), convert_ushort8(special));
        open = (mx <= 0x1p1023) ? (open & ~special) : ~special;
    }
    return open;
}
#endif
