// The CPU shape's exact double-double partials (GM_DDP; reduce_cpu.cl includes it): the chunk totals
// of gpu_mean.dask (gpu_mean/dask/partials.py, docs/design.md "Dask: two-tier partials"), one pass at
// about the speed of a plain sum, where the superaccumulator's digits cost a pass of integer work
// per value and ten longs per output.
//
// The input, packed, is viewed as (n_o, rows, inner) with inner a multiple of 8 (the host makes rows of a
// reduction over the last axis into 8 lanes: (n_o, rows / 8, 8), its last rows % 8 values summed on the
// host). Work-item (o, s, w) sums the GM_DDP_V vectors of 8 adjacent columns from 8 GM_DDP_V w on of o
// over the rows of segment s (seg rows each), one lane a column, block of rows by block of rows: blocks of GM_DD_BLK rows whose plain sums the span proof shows
// exact join the lanes' pairs h8 + c8 by one TwoSum each; other blocks (an inf, a NaN, values over too
// many binades) go value by value through the TwoSums (reduce_cpu_exact.h: GM_DD_BLOCK, gm_dd_two8).
// A lane's h8 + c8 is its values' exact total unless an addition into c8 rounded, which sets its
// flag, as does an inf or NaN pair: the host then takes that output's digits from its values.
// Lane k of the (n_o, n_s, inner) lanes writes h at out[k], c at out[n_o n_s inner + k], its flag at flag[k]
// (0: exact). The pairs start from -0.0: -0.0s alone leave h -0.0, IEEE's sign of their zero total.
#if GM_DDP
GM_STATIC_ASSERT(GM_DD_TIER && RN > 0, ddp_needs_the_pair_tier);
// A block of GM_DD_BLK rows of one vector: each lane's plain FLOAT64 sum with its largest and smallest
// nonzero magnitudes, compared as doubles (two compares and selects a value, where GM_DD_BLOCK's
// 64-bit integer max and min cost more on AVX2); the sum is exact when every value is a multiple of
// u, the smallest one's ulp in the format (exact.h's gm_sum_is_exact: larger values have larger
// ulps), and GM_DD_BLK times the largest is below 2^53 u. Then one TwoSum a lane joins the pair;
// else (an inf or NaN: the sum not finite; too many binades) the block goes value by value.
#define GM_DDP_EXACT(s, mx, mn) all(((mx) == (double8)(0.0)) | (isfinite(s) & isless((mx) * (double)GM_DD_BLK, \
    ldexp((double8)(0x1p53), max(ilogb(mn), GM_DD_EMIN) - GM_DD_PM1))))
#define GM_DDP_BLOCK(LD) { \
    double8 s_ = (double8)(-0.0), mx_ = (double8)(0.0), mn_ = (double8)(INFINITY); \
    for (int i_ = 0; i_ < GM_DD_BLK; ++i_) { \
        const double8 x8 = LD(j_ + 8 * i_), a_ = fabs(x8); \
        s_ += x8; mx_ = select(mx_, a_, isgreater(a_, mx_)); \
        mn_ = select(mn_, a_, isless(a_, mn_) & isgreater(a_, (double8)(0.0))); } \
    if (GM_DDP_EXACT(s_, mx_, mn_)) gm_dd_two8(&h8, &c8, &bad8, s_); \
    else for (int i_ = 0; i_ < GM_DD_BLK; ++i_) gm_dd_two8(&h8, &c8, &bad8, LD(j_ + 8 * i_)); }
#define GM_DDP_LD(i) GM_IN8(b_ + ((i) >> 3) * inner)
__kernel void gm_dd_partials_serial(__global const T* in, __global double* out, __global uchar* flag, long n_o,
                                    long n_s, long rows, long seg, long inner, long os GM_CHK_P) {
    const long J = (inner + 8 * GM_DDP_V - 1) / (8 * GM_DDP_V);
    const long g = (long)get_global_id(0);
    if (g >= n_o * n_s * J) return;
    const long jw = g % J, t = g / J;
    const long s = t % n_s, o = t / n_s;
    const long r1 = min(rows, (s + 1) * seg), c0 = 8 * GM_DDP_V * jw;
    const int nv = (int)min((long)GM_DDP_V, (inner - c0) >> 3);
    double8 hv[GM_DDP_V], cv[GM_DDP_V];
    long8 bv[GM_DDP_V];
    for (int v = 0; v < GM_DDP_V; ++v) { hv[v] = (double8)(-0.0); cv[v] = (double8)(0.0); bv[v] = (long8)(0); }
    const long b0 = o * os + c0;
    for (long rb = s * seg; rb < r1; rb += GM_DD_BLK) {
        const long re = min(r1, rb + GM_DD_BLK);
        if (nv == 1 || re - rb < GM_DD_BLK) {      // one vector (lanes of a row), or a segment's last rows
            for (int v = 0; v < nv; ++v) {
                const long b_ = b0 + 8 * v;
                double8 h8 = hv[v], c8 = cv[v];
                long8 bad8 = bv[v];
                long j_ = 8 * rb;       // GM_DDP_BLOCK's index: 8 per row
                if (re - rb == GM_DD_BLK) GM_DDP_BLOCK(GM_DDP_LD)
                else for (; j_ < 8 * re; j_ += 8) gm_dd_two8(&h8, &c8, &bad8, GM_DDP_LD(j_));
                hv[v] = h8; cv[v] = c8; bv[v] = bad8;
            }
            continue;
        }
        // several vectors: the block row by row, each row's nv vectors one contiguous run (as the
        // column kernel streams rows), the lanes' sums and magnitudes kept per vector
        double8 sv[GM_DDP_V], xv[GM_DDP_V], nv8[GM_DDP_V];
        for (int v = 0; v < nv; ++v) { sv[v] = (double8)(-0.0); xv[v] = (double8)(0.0); nv8[v] = (double8)(INFINITY); }
        for (long r = rb; r < re; ++r) {
            const long q = b0 + r * inner;
            for (int v = 0; v < nv; ++v) {
                const double8 x8 = GM_IN8(q + 8 * v), a_ = fabs(x8);
                sv[v] += x8; xv[v] = select(xv[v], a_, isgreater(a_, xv[v]));
                nv8[v] = select(nv8[v], a_, isless(a_, nv8[v]) & isgreater(a_, (double8)(0.0)));
            }
        }
        for (int v = 0; v < nv; ++v) {
            double8 h8 = hv[v], c8 = cv[v];
            long8 bad8 = bv[v];
            if (GM_DDP_EXACT(sv[v], xv[v], nv8[v])) gm_dd_two8(&h8, &c8, &bad8, sv[v]);
            else for (long r = rb; r < re; ++r) gm_dd_two8(&h8, &c8, &bad8, GM_IN8(b0 + r * inner + 8 * v));
            hv[v] = h8; cv[v] = c8; bv[v] = bad8;
        }
    }
    const long nl = n_o * n_s * inner;
    for (int v = 0; v < nv; ++v) {
        const long k = t * inner + c0 + 8 * v;
        const long8 bad8 = bv[v] | ~(isfinite(hv[v]) & isfinite(cv[v]));
        vstore8(hv[v], 0, GM_AT(GM_A_OUT, double, out, k, 8));
        vstore8(cv[v], 0, GM_AT(GM_A_OUT, double, out, nl + k, 8));
        vstore8(convert_uchar8(bad8 != (long8)(0)), 0, GM_AT(GM_A_FLAG, uchar, flag, k, 8));
    }
}
#endif
