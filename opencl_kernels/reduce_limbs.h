// Exact partials of the correctly rounded means (GM_EXACT; both kernel shapes include it then): the
// partial sums that cross split pieces and gpu_mean.dask chunks (docs/design.md, "Partials across
// boundaries"): every output's values deposited into exact.h's superaccumulator, no bound test, no
// rounding (gm_limbs_range, gm_limbs_write; their kernels gm_reduce_limbs and gm_reduce_limbs_serial
// are in the shape files). Each output's reduced index space is cut into n_chunks runs of clen values;
// run c of output k writes GM_XK normalized limbs and then the flags (as a long) at
// part[part_off + (c * n_out + k) * (GM_XK + 1)]. The host adds the runs (integers: exact in any
// order) and rounds once, or gm_limbs_add and gm_limbs_round (below, the same in both shapes) do it
// on the device.

// The values' bits in their own layout: exponent field width and place, significand bits (FLOAT64:
// gm_limbs_range_d below)
#if GM_X_D
#elif GM_X_H
#define GM_LBITS(p) ((uint)*(__global const ushort*)(p))
#define GM_LMB 10
#define GM_LEMAX 31u
#define GM_LNEG0 0x8000u
#elif GM_X_BF16
#define GM_LBITS(p) ((uint)*(p) << 16)
#define GM_LMB 23
#define GM_LEMAX 255u
#define GM_LNEG0 0x80000000u
#else
#define GM_LBITS(p) gm_as_uint(*(p))
#define GM_LMB 23
#define GM_LEMAX 255u
#define GM_LNEG0 0x80000000u
#endif
#define GM_LB 1024      // values per block of the integer fast path
#define GM_LSPAN 29     // exponent span whose block sum fits a long: 2^(24 + 29 + 10) = 2^63

// Deposit elements j, j + step, ... (below end) of one output (input offset base; one reduced
// dimension of stride st) block by block, GM_LB of them a block: a block whose values are all finite
// and whose exponent fields (at least 1) lie within GM_LSPAN of each other is summed exactly in a
// long, in units of its smallest value's ulp (m << (e - e0) has at most 24 + 29 bits, 1024 of them
// fit 63), and that sum is deposited as two 32-bit halves at the unit's place; any other block goes
// value by value (gm_exact_strided: flags, every exponent). Exact either way: the limbs are the same
// integers, whatever the step. The CPU shape walks a contiguous run (step 1); the GPU shape's groups
// interleave (j = the work-item, step = the group's size: a warp's loads coalesced).
#if GM_X_D
#define GM_LDSPAN 63    // FLOAT64: exponent span of a block summed in 128 bits: 2^(53 + 63 + 10) < 2^127

// the magnitude hi:lo (below 2^126) times 2^s added (neg: subtracted) into the limbs s / 32 ..
// s / 32 + 4, as the halves of its four 32-bit digits shifted by s mod 32 (each below 2^32)
GM_INLINE void gm_limbs_d_deposit128(gm_xacc_d* x, ulong hi, ulong lo, int s, int neg) {
    const int sh = s & 31, k = s >> 5;
    const ulong w[4] = {lo & 0xFFFFFFFFul, lo >> 32, hi & 0xFFFFFFFFul, hi >> 32};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const ulong v = w[i] << sh;
        const long a = (long)(v & 0xFFFFFFFFul), b = (long)(v >> 32);
        x->d[k + i] += neg ? -a : a;
        x->d[k + i + 1] += neg ? -b : b;
    }
}

// FLOAT64 elements j, j + step, ... (below end) of one output (one reduced dimension of stride st), block by block: a
// block whose values are all finite and whose exponent fields (at least 1) lie within GM_LDSPAN of
// each other is summed exactly in two unsigned 128-bit integers (the positive and the negative
// values' magnitudes, in units of the block's smallest ulp: m << (e - e0) has at most 53 + 63 bits,
// 1024 of them stay below 2^126), each deposited once (gm_limbs_d_deposit128); any other block goes
// value by value (gm_exact_strided: flags, every exponent). The limbs are normalized every 2^16
// blocks of either kind (a limb takes below 2^34 per summed block, below 2^43 per block value by value).
GM_INLINE void gm_limbs_range_d(gm_xacc* x, __global const T* in, long base, __constant const gm_rmeta* m, long j,
                                long end, long step GM_CHK_P) {
    const long st = m->red_in[0];
    long blocks = 0;
    for (long b = j; b < end; b += GM_LB * step) {
        const long e = min(end, b + GM_LB * step);
        uint hi = 0, lo = 0x7FFu;
        for (long i = b; i < e; i += step) {
            const ulong u = as_ulong(*GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (uint)(u >> 52) & 0x7FFu;
            hi = max(hi, ef);
            lo = min(lo, (u << 1) ? max(ef, 1u) : 0x7FFu);        // zeros do not count
        }
        lo = min(lo, max(hi, 1u));      // a block of zeros alone
        if ((++blocks & 0xFFFF) == 0) GM_XNORM(x);      // blocks of either kind
        if (hi == 0x7FFu || max(hi, 1u) - lo > GM_LDSPAN) {
            gm_exact_strided(x, in, base, m, b, e, step GM_CHK_A);
            continue;
        }
        ulong ph = 0, pl = 0, nh = 0, nl = 0;
        uint seen = 0;
        for (long i = b; i < e; i += step) {
            const ulong u = as_ulong(*GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (uint)(u >> 52) & 0x7FFu;
            const ulong f = u & 0xFFFFFFFFFFFFFul, mm = ef ? (f | 0x10000000000000ul) : f;
            const uint t = mm ? max(ef, 1u) - lo : 0u;            // 0 .. 63
            const ulong vl = mm << t, vh = t ? mm >> (64u - t) : 0ul;
            if (u >> 63) {
                nl += vl;
                nh += vh + (nl < vl ? 1ul : 0ul);
            } else {
                pl += vl;
                ph += vh + (pl < vl ? 1ul : 0ul);
            }
            seen |= (u != 0x8000000000000000ul);
        }
        x->flags |= seen ? GM_XF_NOT_NEG0 : 0u;
        gm_limbs_d_deposit128(x, ph, pl, (int)lo - 1, 0);
        gm_limbs_d_deposit128(x, nh, nl, (int)lo - 1, 1);
    }
}
#endif

GM_INLINE void gm_limbs_range(gm_xacc* x, __global const T* in, long base, __constant const gm_rmeta* m, long j,
                              long end, long step GM_CHK_P) {
#if RN == 1 && GM_X_D
    gm_limbs_range_d(x, in, base, m, j, end, step GM_CHK_A);
#elif RN == 1
    const long st = m->red_in[0];
    long blocks = 0;
    for (long b = j; b < end; b += GM_LB * step) {
        const long e = min(end, b + GM_LB * step);
        uint hi = 0, lo = GM_LEMAX;
        for (long i = b; i < e; i += step) {
            const uint u = GM_LBITS(GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (u >> GM_LMB) & GM_LEMAX;
            hi = max(hi, ef);
            lo = min(lo, (u & ~GM_LNEG0) ? max(ef, 1u) : GM_LEMAX);     // zeros do not count
        }
        lo = min(lo, max(hi, 1u));      // a block of zeros alone
        // every 2^16 blocks of either kind the limbs are normalized: a block adds below 2^42 to a
        // limb value by value (1024 deposits below 2^32), below 2^33 summed: far from 2^63 between two
        if ((++blocks & 0xFFFF) == 0) GM_XNORM(x);
        if (hi == GM_LEMAX || max(hi, 1u) - lo > GM_LSPAN) {
            gm_exact_strided(x, in, base, m, b, e, step GM_CHK_A);
            continue;
        }
        long acc = 0;
        uint seen = 0;
        for (long i = b; i < e; i += step) {
            const uint u = GM_LBITS(GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (u >> GM_LMB) & GM_LEMAX, f = u & ((1u << GM_LMB) - 1u);
            const uint mm = ef ? (f | (1u << GM_LMB)) : f;
            const long v = mm ? ((long)mm << (max(ef, 1u) - lo)) : 0l;
            acc += (u & GM_LNEG0) ? -v : v;
            seen |= (u != GM_LNEG0);
        }
        x->flags |= seen ? GM_XF_NOT_NEG0 : 0u;
        const ulong a = (ulong)(acc < 0 ? -acc : acc);
        gm_xlimbs_deposit(x->d, GM_XK, (uint)(a & 0xFFFFFFFFul), (int)lo - 1, acc < 0);
        gm_xlimbs_deposit(x->d, GM_XK, (uint)(a >> 32), (int)lo - 1 + 32, acc < 0);
    }
#else
    gm_exact_strided(x, in, base, m, j, end, step GM_CHK_A);
#endif
}

GM_INLINE void gm_limbs_write(gm_xacc* x, __global long* part, long i GM_CHK_P) {
    GM_XNORM(x);
#pragma unroll
    for (int j = 0; j < GM_XK; ++j) *GM_AT(GM_A_PART, long, part, i + j, 1) = x->d[j];
    *GM_AT(GM_A_PART, long, part, i + GM_XK, 1) = (long)x->flags;
}

// Exact partials combined on the device (issue 26: split calls), both shapes, a work-item per
// output. gm_limbs_add adds one piece's partials (its n_chunks runs'
// limbs and flags, as gm_reduce_limbs wrote them at part) into the running totals acc (GM_XK limbs
// and the flags per output of the whole call; output k of the piece is acc's output dst[k]): the
// limbs added digit by digit, the carries moved up (every limb but the top one back in [0, 2^32),
// as exact.h's normalize leaves them), the flags ORed. A limb's sum stays far below 2^63 (a digit
// below 2^32 per run, plus the carry). gm_limbs_round rounds each output's running total to the
// output type (exact.h: the division, the zero rule, IEEE's inf and NaN) and stores it at out[k].
#if K_LIMBS
__kernel void gm_limbs_add(__global const long* restrict part, __global long* restrict acc,
                           __global const long* restrict dst, long n_out, long n_chunks GM_CHK_P) {
    const long k = (long)get_global_id(0);
    if (k >= n_out) return;
    const long a = *GM_AT(GM_A_FLAG, const long, dst, k, 1) * (GM_XK + 1);
    long carry = 0, flags = *GM_AT(GM_A_PART, long, acc, a + GM_XK, 1);
    for (long c = 0; c < n_chunks; ++c)
        flags |= *GM_AT(GM_A_IN, const long, part, (c * n_out + k) * (GM_XK + 1) + GM_XK, 1);
    for (int j = 0; j < GM_XK; ++j) {
        long d = *GM_AT(GM_A_PART, long, acc, a + j, 1) + carry;
        for (long c = 0; c < n_chunks; ++c) d += *GM_AT(GM_A_IN, const long, part, (c * n_out + k) * (GM_XK + 1) + j, 1);
        carry = j < GM_XK - 1 ? d >> 32 : 0;        // arithmetic shift: floor(d / 2^32)
        *GM_AT(GM_A_PART, long, acc, a + j, 1) = d - carry * 4294967296l;
    }
    *GM_AT(GM_A_PART, long, acc, a + GM_XK, 1) = flags;
}

__kernel void gm_limbs_round(__global const long* restrict acc, __global OUT_T* restrict out, long n_out,
                             ulong n GM_CHK_P) {
    const long k = (long)get_global_id(0);
    if (k >= n_out) return;
    gm_xacc x;
#pragma unroll
    for (int j = 0; j < GM_XK; ++j) x.d[j] = *GM_AT(GM_A_PART, const long, acc, k * (GM_XK + 1) + j, 1);
    x.flags = (uint)*GM_AT(GM_A_PART, const long, acc, k * (GM_XK + 1) + GM_XK, 1);
    gm_exact_store(&x, n, out, k GM_CHK_A);
}
#endif  // K_LIMBS
