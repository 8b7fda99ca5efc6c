// The exact path of the correctly rounded means (GM_EXACT; both kernel shapes include it then): the
// superaccumulator of the variant's format behind one interface (gm_xacc, GM_XINIT, GM_XADD,
// GM_XMERGE, GM_XNORM, GM_XMEAN, GM_XK: exact.h's gm_xacc_f, _h, _d), the deposit of one output's
// values (gm_exact_range) and the rounded store of its mean (gm_exact_store).
//
// The outputs whose flag the bound test set are summed again from their values into exact.h's
// superaccumulator (integer limbs: every finite value exactly, in any order and grouping), then
// divided and rounded with exact.h's integer division: the correctly rounded mean, IEEE's inf and
// NaN, -0.0 for a negative mean that rounds to zero and for an exact zero total of -0.0s alone.
#if GM_X_D
#define GM_XACC_T gm_xacc_d
#define GM_XK GM_XK_D
#define GM_XINIT(a) gm_xacc_d_init(a)
#define GM_XADD(a, p) gm_xacc_d_add(a, *(p))
#define GM_XMERGE(a, b) gm_xacc_d_merge(a, b)
#define GM_XNORM(a) gm_xacc_d_normalize(a)
#define GM_XMEAN(a, n) gm_xacc_d_mean(a, n)
#elif GM_X_H
#define GM_XACC_T gm_xacc_h
#define GM_XK GM_XK_H
#define GM_XINIT(a) gm_xacc_h_init(a)
#define GM_XADD(a, p) gm_xacc_h_add(a, *(__global const ushort*)(p))
#define GM_XMERGE(a, b) gm_xacc_h_merge(a, b)
#define GM_XNORM(a) gm_xacc_h_normalize(a)
#define GM_XMEAN(a, n) ((uint)gm_xacc_h_mean(a, n))
#elif GM_X_BF16
#define GM_XACC_T gm_xacc_f
#define GM_XK GM_XK_F
#define GM_XINIT(a) gm_xacc_f_init(a)
#define GM_XADD(a, p) gm_xacc_f_add_bf16(a, *(p))
#define GM_XMERGE(a, b) gm_xacc_f_merge(a, b)
#define GM_XNORM(a) gm_xacc_f_normalize(a)
#define GM_XMEAN(a, n) ((uint)gm_xacc_f_mean_bf16(a, n))
#else
#define GM_XACC_T gm_xacc_f
#define GM_XK GM_XK_F
#define GM_XINIT(a) gm_xacc_f_init(a)
#define GM_XADD(a, p) gm_xacc_f_add(a, *(p))
#define GM_XMERGE(a, b) gm_xacc_f_merge(a, b)
#define GM_XNORM(a) gm_xacc_f_normalize(a)
#define GM_XMEAN(a, n) gm_xacc_f_mean(a, n)
#endif
typedef GM_XACC_T gm_xacc;

// Deposit elements [j, end) of the reduced index space of one output (input offset base); the limbs
// are normalized every 2^24 values (a limb takes 2^31 deposits).
GM_INLINE void gm_exact_range(gm_xacc* x, __global const T* in, long base, __constant const gm_rmeta* m, long j,
                              long end GM_CHK_P) {
#if RN > 0
    long idx[RNA];
    long off = gm_walk_start(j, idx, m);
    for (long c = 0; j < end; ++j, ++c) {
        GM_XADD(x, GM_AT(GM_A_IN, const T, in, base + off, 1));
        if ((c & 0xFFFFFF) == 0xFFFFFF) GM_XNORM(x);
        off = gm_walk_next(off, idx, m);
    }
#else
    if (j < end) GM_XADD(x, GM_AT(GM_A_IN, const T, in, base, 1));
#endif
}

// Deposit elements j, j + step, ... (below end) of the reduced index space of one output (input offset
// base): a group's work-items at j = lid, step = the group's size read adjacent values where the
// innermost reduced run is dense (a warp's loads coalesced). The multi-index advances by step with a
// carry per dimension (a division only where step passes a whole dimension); the limbs are normalized
// every 2^24 values.
GM_INLINE void gm_exact_strided(gm_xacc* x, __global const T* in, long base, __constant const gm_rmeta* m, long j,
                                long end, long step GM_CHK_P) {
#if RN > 0
    if (j >= end) return;
    long idx[RNA];
    long off = gm_walk_start(j, idx, m);
    for (long c = 0; j < end; j += step, ++c) {
        GM_XADD(x, GM_AT(GM_A_IN, const T, in, base + off, 1));
        if ((c & 0xFFFFFF) == 0xFFFFFF) GM_XNORM(x);
        long carry = step;
#pragma unroll
        for (int d = RN - 1; d >= 0; --d) {     // idx += carry, mixed radix red_shape
            const long sh = m->red_shape[d], t = idx[d] + carry;
            carry = t < sh ? 0 : gm_div(t, sh);
            const long nd = t - carry * sh;
            off += (nd - idx[d]) * m->red_in[d];
            idx[d] = nd;
            if (carry == 0) break;
        }
    }
#else
    if (j < end) GM_XADD(x, GM_AT(GM_A_IN, const T, in, base, 1));
#endif
}

// Divide, round once and store output element i (an element index into out) from its limbs.
GM_INLINE void gm_exact_store(gm_xacc* x, ulong n, __global OUT_T* out, long i GM_CHK_P) {
    const GM_BITS_T bits = GM_XMEAN(x, (uint)n);
    GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, i, 1), bits);
}
