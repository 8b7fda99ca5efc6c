// The CPU shape's short-rows kernel, gm_reduce_short_serial (reduce_cpu.cl includes it where
// SHORT_LEN is set and the type is not FLOAT64; reduce_kernels.short_rows).

// Short dense rows (SHORT_LEN elements, a multiple of 8 up to 32; row k at k * SHORT_LEN, output k
// at k): work-item g takes rows [g * clen, + clen), eight at a time. Each row's 8-lane vectors are
// added, then a transpose tree of three levels sums the eight rows' lanes pairwise, so the eight
// results leave in one vector through one 8-wide store (STORE8_RESULT: divided, rounded once each).
// Per row the order is ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)), the same for the rows after the last
// full eight (a row of -0.0 gives -0.0, IEEE's sum, as the other kernels' accumulators from -0.0).
// Only where ACC is a plain vector type (no compensated pair): reduce_kernels.short_rows.
// FLOAT32 (GM_SETTLE8): each eight rows' largest magnitude for the bound, the results through
// gm_settle8 and the eight rows' open flags as the bits of one byte (GM_FLAG_BITS: byte r / 8; clen
// is a multiple of 8, so each work-item owns its bytes). FLOAT16 needs no flag: a sum of at most 32
// halves is exact in FLOAT64, and rounding its quotient once to half is the correctly rounded mean
// (reduce_kernels.f16_direct).
GM_INLINE ACC8 gm_row8(__global const T* in, long b GM_CHK_P) {
    ACC8 v = GM_IN8(b);
    for (int j = 8; j < SHORT_LEN; j += 8) v += GM_IN8(b + j);
    return v;
}
#define GM_PAIRS(a, b) ((ACC8)((a).s0246 + (a).s1357, (b).s0246 + (b).s1357))
#ifdef LOAD16
// two rows of 8 through one 16-wide load (FLOAT16: PoCL converts vload_half16 at the copy's speed,
// vload_half8 at about half of it)
GM_INLINE ACC8 gm_rows2(__global const T* in, long b GM_CHK_P) {
    float16 h = LOAD16(GM_AT(GM_A_IN, const T, in, b, 16));
    return GM_PAIRS(TO_ACC8(h.lo), TO_ACC8(h.hi));
}
#define GM_ROWS2(b) gm_rows2(in, (b) GM_CHK_A)
#endif
#ifdef STORE8_FLOAT
// FLOAT16 rows of 8 summed in float, exactly: a float sum of eight halves is exact when the nonzero
// values' exponents span at most 10 binades (every partial sum is a multiple of the smallest value's
// half ulp, 2^(emin - 10), and below 2^(emax + 4): 24 bits). Checked per block of eight rows on the
// float exponent fields, zeros left out (an infinity or NaN never passes beside a finite value).
// Blocks that pass take a float tree (twice double's lanes per instruction), the others the double
// path: either way each row's total is exact, so the result is the same rounded mean.
// BFLOAT16 (EXACT_BF16): 13 binades (8-bit significands: multiples of 2^(emin - 7)); its subnormals
// stay float subnormals (exponent field 0) and count as 2^-126, whose ulp 2^-133 they are multiples
// of; a block with a value from 2^125 on (eight could pass FLT_MAX; inf and NaN) takes the double path.
#define GM_PAIRS16(a, b) ((float16)((a).even + (a).odd, (b).even + (b).odd))
#if !EXACT_BF16
#define GM_EXP16(x) (as_uint16(x) & 0x7f800000u)
// whether the block's nonzero exponent fields lie at most 10 binades apart (a zero's field wraps to
// the top of lo; FLOAT16's subnormals are normal floats)
GM_INLINE int gm_exact_in_float(float16 a, float16 b, float16 c, float16 d) {
    const uint16 ea = GM_EXP16(a), eb = GM_EXP16(b);
    const uint16 ec = GM_EXP16(c), ed = GM_EXP16(d);
    const uint16 hi = max(max(ea, eb), max(ec, ed));
    const uint16 lo = min(min(ea - 1u, eb - 1u), min(ec - 1u, ed - 1u));   // a zero wraps to the top
    const uint8 h8 = max(hi.lo, hi.hi), l8 = min(lo.lo, lo.hi);
    const uint4 h4 = max(h8.lo, h8.hi), l4 = min(l8.lo, l8.hi);
    const uint2 h2 = max(h4.lo, h4.hi), l2 = min(l4.lo, l4.hi);
    const uint h = max(h2.x, h2.y), l = min(l2.x, l2.y);
    return l == 0xFFFFFFFFu || h <= l + 1u + (10u << 23);
}
#else
// BFLOAT16 rows of 8 test the span on the values' own 16 bits, before they are widened: a
// magnitude's bits order as its exponent field, so the block needs only its largest magnitude and its
// smallest nonzero one (as its bits minus one, a zero wrapping to 0xFFFF), four 16-bit operations per
// sixteen values (the same test on the widened floats' exponent fields took about twice as many, on
// 32-bit lanes, and cost the kernel about a fifth of FLOAT16's bytes per second). Returns the largest
// exponent field and the smallest nonzero one counted from 1 (subnormals are multiples of 2^-133,
// 2^-126's ulp), the latter 1000 when the block is all zeros (every span test passes).
GM_INLINE int2 gm_b16_block_exps(ushort16 a, ushort16 b, ushort16 c, ushort16 d) {
    const ushort16 k = (ushort16)(0x7FFF), one = (ushort16)(1);
    a &= k; b &= k; c &= k; d &= k;
    const ushort16 hi = max(max(a, b), max(c, d));
    const ushort16 lo = min(min(a - one, b - one), min(c - one, d - one));
    const ushort8 h8 = max(hi.lo, hi.hi), l8 = min(lo.lo, lo.hi);
    const ushort4 h4 = max(h8.lo, h8.hi), l4 = min(l8.lo, l8.hi);
    const ushort2 h2 = max(h4.lo, h4.hi), l2 = min(l4.lo, l4.hi);
    const uint h = max(h2.x, h2.y), l = min(l2.x, l2.y);
    return (int2)((int)(h >> 7), l == 0xFFFFu ? 1000 : max((int)((l + 1u) >> 7), 1));
}
// the float test (13 binades, below 2^125: gm_exact_in_float's rule) on gm_b16_block_exps' pair
#define GM_B16_IN_FLOAT(e) ((e).x - (e).y <= 13 && (e).x <= 251)
// BFLOAT16 blocks that fail the float test: their FLOAT64 sums are still exact when the nonzero
// exponent fields span at most 42 binades and every value is finite (each value a multiple of
// 2^(e_lo - 134), every partial sum of at most 8 below 2^(e_hi - 123): span + 11 <= 53 bits; no
// FLOAT64 overflow), so STORE8_RESULT's one rounding of the exact quotient by 8 is the correctly
// rounded mean and the block needs no exact pass. Normal data: about 1 % of blocks fail the float
// test (a value below 2^-12), nearly none this one (test_bfloat16_rows_of_8_double_path_span).
#define GM_B16_IN_DOUBLE(e) ((e).x - (e).y <= 42 && (e).x <= 254)     // finite: below 255
// The float path's first level without widening: a uint lane holds two neighbours' bits, the even
// one in its low half, so a shift and a mask make both floats, and their sum is the pair of the
// row's tree (any order gives the same exact sums, -0.0 rule included); the results are finite
// (below 2^128), so their rounding skips the NaN test (STORE8_FLOAT: GM_BF16_VEC_FINITE)
#define GM_B16_PAIRS8(u) (as_float8(as_uint8(u) << 16) + as_float8(as_uint8(u) & (uint8)(0xFFFF0000u)))
GM_BF16_VEC_FINITE(8)
#endif
#endif
#ifndef LOAD16
#define GM_ROWS2(b) GM_PAIRS(gm_row8(in, (b) GM_CHK_A), gm_row8(in, (b) + SHORT_LEN GM_CHK_A))
#endif
#if GM_SETTLE8
// the largest magnitude of w rows from b, in the storage type (FLOAT32)
GM_INLINE double gm_rows_max(__global const T* in, long b, int w GM_CHK_P) {
    int8 m8i = (int8)(0);
    int j = 0;
    if (w == 8) {       // eight rows: sixteen values per integer max
        int16 m16i = (int16)(0);
        for (; j < 8 * SHORT_LEN; j += 16) m16i = max(m16i, GM_MAG16(vload16(0, GM_AT(GM_A_IN, const T, in, b + j, 16))));
        m8i = max(m16i.lo, m16i.hi);
    }
    for (; j < w * SHORT_LEN; j += 8) m8i = max(m8i, GM_MAG8(vload8(0, GM_AT(GM_A_IN, const T, in, b + j, 8))));
    return gm_max8_value(m8i);
}
#endif
#if GM_SHORT_POW2
// Whether the FLOAT64 sums of eight rows from b are exact: every value is a multiple of the smallest
// nonzero value's ulp, 2^(max(e_lo, 1) - 150) (e: the exponent field), and every partial sum of at
// most 32 values is below 2^(e_hi - 121): at most 53 bits when e_hi - max(e_lo, 1) <= 24. Then the
// quotient by a power of two is exact too, and its one rounding to FLOAT32 is the correctly
// rounded mean, exact ties included (the rows the bound test leaves open: about 5 % of rows of 8
// normal values are exact ties of the rounding).
// (issue 24: the magnitudes' bits carry the exponent order, so the loop keeps only the largest
// magnitude and the smallest nonzero one, as its bits minus one with a zero wrapping to the top:
// four operations per sixteen values instead of eight; the exponents are taken once at the end.)
GM_INLINE int gm_rows_exact(__global const T* in, long b GM_CHK_P) {
    uint16 hi = (uint16)(0), lo = (uint16)(0xFFFFFFFFu);
    for (int j = 0; j < 8 * SHORT_LEN; j += 16) {
        const uint16 a = as_uint16(vload16(0, GM_AT(GM_A_IN, const T, in, b + j, 16))) & (uint16)(0x7FFFFFFFu);
        hi = max(hi, a);
        lo = min(lo, a - (uint16)(1u));
    }
    hi.lo = max(hi.lo, hi.hi); lo.lo = min(lo.lo, lo.hi);
    hi.s0123 = max(hi.s0123, hi.s4567); lo.s0123 = min(lo.s0123, lo.s4567);
    hi.s01 = max(hi.s01, hi.s23); lo.s01 = min(lo.s01, lo.s23);
    const int e_hi = (int)(max(hi.s0, hi.s1) >> 23), e_lo = max((int)((min(lo.s0, lo.s1) + 1u) >> 23), 1);
    return e_hi - e_lo <= 24;
}
#endif
#if K_SHORT
__kernel void gm_reduce_short_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                     __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off,
                                     int use_part, __constant const gm_rmeta* m, long n_out, long len, long clen,
                                     ulong n GM_CHK_P) {
    long r = get_global_id(0) * clen;
    const long r_first = r, end = min(n_out, r + clen);
    long b = (long)in_off + r * SHORT_LEN;
    for (; r + 8 <= end; r += 8, b += 8 * SHORT_LEN) {
        GM_PREFETCH(in, b, PREFETCH);
#if EXACT_BF16
        const ushort16 u0 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b, 16));
        const ushort16 u1 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + 16, 16));
        const ushort16 u2 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + 32, 16));
        const ushort16 u3 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + 48, 16));
        const int2 ex = gm_b16_block_exps(u0, u1, u2, u3);
        if (GM_B16_IN_FLOAT(ex)) {
            const float16 d = GM_PAIRS16((float16)(GM_B16_PAIRS8(u0), GM_B16_PAIRS8(u1)),
                                         (float16)(GM_B16_PAIRS8(u2), GM_B16_PAIRS8(u3)));
#elif defined(STORE8_FLOAT)
        const float16 h0 = LOAD16(GM_AT(GM_A_IN, const T, in, b, 16));
        const float16 h1 = LOAD16(GM_AT(GM_A_IN, const T, in, b + 16, 16));
        const float16 h2 = LOAD16(GM_AT(GM_A_IN, const T, in, b + 32, 16));
        const float16 h3 = LOAD16(GM_AT(GM_A_IN, const T, in, b + 48, 16));
        if (gm_exact_in_float(h0, h1, h2, h3)) {
            const float16 d = GM_PAIRS16(GM_PAIRS16(h0, h1), GM_PAIRS16(h2, h3));
#endif
#ifdef STORE8_FLOAT
            // (an exact zero total keeps IEEE's sign: -0.0 from -0.0s alone, issue 22's rule)
            STORE8_FLOAT(d.even + d.odd, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
#if GM_EXACT
            GM_FLAG((long)flag_off + (r >> 3)) = (uchar)0;      // exact sums, one rounding: settled
#endif
            continue;
        }
#endif
        ACC8 w01 = GM_ROWS2(b), w23 = GM_ROWS2(b + 2 * SHORT_LEN);
        ACC8 w45 = GM_ROWS2(b + 4 * SHORT_LEN), w67 = GM_ROWS2(b + 6 * SHORT_LEN);
        ACC8 t = GM_PAIRS(GM_PAIRS(w01, w23), GM_PAIRS(w45, w67));
#if GM_SETTLE8
        float8 res;
        int8 open;
#if GM_SHORT_POW2
        if (gm_rows_exact(in, b GM_CHK_A)) {     // exact sums: one rounding decides, ties included
            res = convert_float8(GM_Q8(t, n));
            open = (int8)(0);
        } else
#endif
        open = gm_settle8(t, gm_rows_max(in, b, 8 GM_CHK_A), m->depth, n, &res);
        vstore8(res, 0, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
        uchar fbits = 0;
        if (any(open)) {
            const int8 bit = open & (int8)(1, 2, 4, 8, 16, 32, 64, 128);
            fbits = (uchar)((bit.s0 | bit.s1 | bit.s2 | bit.s3) | (bit.s4 | bit.s5 | bit.s6 | bit.s7));
        }
        GM_FLAG((long)flag_off + (r >> 3)) = fbits;
#else
        STORE8_RESULT(t, n, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
#if GM_EXACT
        // BFLOAT16 blocks the float test did not prove exact (more than 13 binades, or values from
        // 2^125 on): settled where the FLOAT64 sums are exact (GM_B16_IN_DOUBLE), otherwise
        // the exact pass decides these eight rows
        GM_FLAG((long)flag_off + (r >> 3)) = GM_B16_IN_DOUBLE(ex) ? (uchar)0 : (uchar)0xFF;
#endif
#endif
    }
#if GM_EXACT
    const long r0 = r;
    uint fb = 0;
#endif
    for (; r < end; ++r, b += SHORT_LEN) {
        ACC8 v = gm_row8(in, b GM_CHK_A);
        v = GM_PAIRS(v, v);
        v = GM_PAIRS(v, v);
        gm_acc a;
        GM_ACC_ZERO(a);
        GM_ACC_ADD(a, v.s0 + v.s1);
#if GM_SETTLE8
        a.m = gm_rows_max(in, b, 1 GM_CHK_A);
        uint bits;
        fb |= (gm_settle(a, n, m->depth, &bits) ? 0u : 1u) << (r - r0);
        GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 1), bits);
#else
        STORE_RESULT(GM_ACC_TOTAL(a), n, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 1));
#if GM_EXACT
        fb |= 1u << (r - r0);       // as above: the exact pass decides
#endif
#endif
    }
#if GM_EXACT
    if (end > r0) GM_FLAG((long)flag_off + (r0 >> 3)) = (uchar)fb;
#endif
    GM_REDO_OPEN(r_first, end);
}
#endif  // K_SHORT
