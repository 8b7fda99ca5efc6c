// The CPU shape's short-rows kernel for FLOAT64 REDUCE AVERAGE, gm_reduce_short_f64_serial
// (reduce_cpu.cl includes it where SHORT_LEN is set and the type is FLOAT64, GM_X_D;
// reduce_kernels.short_rows).

// FLOAT64 REDUCE AVERAGE over short dense rows (SHORT_LEN 8, 16 or 32 values, a power of two; row k
// at k * SHORT_LEN, output k at k; reduce_kernels.short_rows): work-item g takes rows
// [g * clen, + clen), eight at a time, in the kernel above's transpose tree (each row's vectors added
// lane for lane, then three levels of pairs across the eight rows), but every addition by TwoSum:
// h is the tree of sums and c the sum of their exact errors, added in the same tree, each of those
// additions checked by TwoSum again (bad: it rounded). Where none rounded and h and c are finite,
// S = h + c exactly (no addition overflowed: an overflow leaves an inf or NaN in h or c), so
// H = fl(h + c) is S rounded once, ties to even; and S / n = H / n exactly for n a power of two
// while |H| >= 2^-1022 n (above it scaling by 1 / n commutes with the rounding; just below it the
// subnormal grid is no finer), so H * (1 / n) is the correctly rounded mean, exact ties included:
// no bound and no division. A zero c leaves h as it is: zeros alone give IEEE's sum of them (-0.0
// from -0.0s alone), a sum cancelled to zero +0.0, the rounded mean's zero sign (gm_xacc_d_mean's).
// Open (a flag bit each, the kernel's own redo decides: GM_REDO_OPEN): rows where an addition of errors rounded
// (exponents about 50 binades apart), with an inf or NaN, a sum past DBL_MAX, or 0 < |H| < 2^-1022 n.
// Rows after the last full eight go through the same tree, the last row standing in for the missing
// ones, and only theirs are stored.
#define GM_D_TINY (0x1p-1022 * SHORT_LEN)      // |H| below this (but zero): H / n would be subnormal

// s = a + b lane for lane and its exact error *e (TwoSum)
GM_INLINE double8 gm_ts8(double8 a, double8 b, double8* e) {
    const double8 s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

// (h, *c) = (ha, ca) + (hb, cb) lane for lane: h by TwoSum, *c = (ca + cb) + its error; *bad set in
// the lanes where one of the two additions into *c rounded
GM_INLINE double8 gm_dd8_join(double8 ha, double8 ca, double8 hb, double8 cb, double8* c, long8* bad) {
    double8 e, f, g;
    const double8 h = gm_ts8(ha, hb, &e);
    *c = gm_ts8(gm_ts8(ca, cb, &f), e, &g);
    *bad |= isnotequal(f, (double8)(0.0)) | isnotequal(g, (double8)(0.0));
    return h;
}

// one row's SHORT_LEN values at p as eight lanes (h, *c): its vectors added lane for lane
GM_INLINE double8 gm_d8_row(__global const T* in, long p, double8* c, long8* bad GM_CHK_P) {
    double8 h = GM_IN8(p);
    *c = (double8)(0.0);
#if SHORT_LEN >= 16
    h = gm_ts8(h, GM_IN8(p + 8), c);
#endif
#if SHORT_LEN == 32
    double8 c2;
    const double8 h2 = gm_ts8(GM_IN8(p + 16), GM_IN8(p + 24), &c2);
    h = gm_dd8_join(h, *c, h2, c2, c, bad);
#endif
    return h;
}

// the even and the odd lanes of a, then of b (the transpose tree's pairs)
#define GM_EV8(a, b) ((double8)((a).s0246, (b).s0246))
#define GM_OD8(a, b) ((double8)((a).s1357, (b).s1357))

// Eight rows from b (row j at b + min(j, last) * SHORT_LEN): their correctly rounded means in lane j
// (H * (1 / n)) and the open lanes (-1)
GM_INLINE long8 gm_d8_rows(__global const T* in, long b, int last, double8* res GM_CHK_P) {
    long8 bad = (long8)(0);
    double8 h[8], c[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) h[j] = gm_d8_row(in, b + (long)min(j, last) * SHORT_LEN, &c[j], &bad GM_CHK_A);
    double8 h2[4], c2[4];
#if SHORT_LEN == 8
    // the first level adds single values: its errors are the first c
#pragma unroll
    for (int j = 0; j < 4; ++j) h2[j] = gm_ts8(GM_EV8(h[2 * j], h[2 * j + 1]), GM_OD8(h[2 * j], h[2 * j + 1]), &c2[j]);
#else
#pragma unroll
    for (int j = 0; j < 4; ++j)
        h2[j] = gm_dd8_join(GM_EV8(h[2 * j], h[2 * j + 1]), GM_EV8(c[2 * j], c[2 * j + 1]),
                            GM_OD8(h[2 * j], h[2 * j + 1]), GM_OD8(c[2 * j], c[2 * j + 1]), &c2[j], &bad);
#endif
    double8 h4[2], c4[2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
        h4[j] = gm_dd8_join(GM_EV8(h2[2 * j], h2[2 * j + 1]), GM_EV8(c2[2 * j], c2[2 * j + 1]),
                            GM_OD8(h2[2 * j], h2[2 * j + 1]), GM_OD8(c2[2 * j], c2[2 * j + 1]), &c4[j], &bad);
    double8 cs;
    const double8 hs = gm_dd8_join(GM_EV8(h4[0], h4[1]), GM_EV8(c4[0], c4[1]), GM_OD8(h4[0], h4[1]),
                                   GM_OD8(c4[0], c4[1]), &cs, &bad);
    const double8 H = select(hs + cs, hs, isequal(cs, (double8)(0.0)));
    *res = H * (1.0 / SHORT_LEN);
    const long8 tiny = isless(fabs(H), (double8)(GM_D_TINY)) & isnotequal(H, (double8)(0.0));
    // bad's lanes hold parts of rows at the earlier levels, not rows: any bad (rare) opens all eight
    return (long8)(-(long)any(bad)) | ~isfinite(H) | tiny;
}

// the open lanes of o as the bits of one flag byte (lane j: bit j)
GM_INLINE uchar gm_open_bits8(long8 o) {
    const long8 bit = o & (long8)(1, 2, 4, 8, 16, 32, 64, 128);
    return (uchar)((bit.s0 | bit.s1 | bit.s2 | bit.s3) | (bit.s4 | bit.s5 | bit.s6 | bit.s7));
}

#if K_SHORT
__kernel void gm_reduce_short_f64_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                         __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off,
                                         int use_part, __constant const gm_rmeta* m, long n_out, long len, long clen,
                                         ulong n GM_CHK_P) {
    long r = get_global_id(0) * clen;
    const long r_first = r, end = min(n_out, r + clen);
    long b = (long)in_off + r * SHORT_LEN;
    double8 res;
    for (; r + 8 <= end; r += 8, b += 8 * SHORT_LEN) {
        GM_PREFETCH(in, b, PREFETCH);
        const long8 open = gm_d8_rows(in, b, 7, &res GM_CHK_A);
        vstore8(res, 0, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
        GM_FLAG((long)flag_off + (r >> 3)) = gm_open_bits8(open);     // GM_FLAG_BITS: a bit per row
    }
    if (r < end) {      // 1 to 7 rows: the last one repeated in the lanes past them
        const int cnt = (int)(end - r);
        const long8 open = gm_d8_rows(in, b, cnt - 1, &res GM_CHK_A);
        double rl[8];
        vstore8(res, 0, rl);
        for (int j = 0; j < cnt; ++j) *GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r + j, 1) = rl[j];
        GM_FLAG((long)flag_off + (r >> 3)) = (uchar)(gm_open_bits8(open) & ((1u << cnt) - 1u));
    }
    GM_REDO_OPEN(r_first, end);
}
#endif  // K_SHORT
