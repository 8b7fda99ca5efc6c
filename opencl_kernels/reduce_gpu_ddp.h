// The GPU shape's exact double-double partials (GM_DDP; reduce_gpu.cl includes it): gpu_mean.dask's
// chunk totals on CUDA and OpenCL GPUs, a CuPy chunk read where it lies. reduce_cpu_ddp.h is the CPU
// shape's kernel for the same totals (docs/design.md, "Dask: exact double-double partials").
//
// The input, packed, is viewed as (n_o, rows, inner). Work-item g = (o n_s + s) inner + j sums column
// j of outer index o over the rows of segment s (seg rows each), one value a row, so that neighbouring
// work-items read neighbouring elements (coalesced). A reduction over the last axis comes as 8 lanes a
// row, (n_o, ceil(len / 8), 8) with lim = len: element r inner + j of an outer index is read only where
// it is below lim (the last row's missing lanes add nothing; the CPU shape adds them on the host).
// Blocks of GM_DDP_BLK rows: the plain FLOAT64 sum and the largest and smallest nonzero magnitudes as
// FLOAT32 bits; the span proof (reduce_cpu_ddp.h's, one lane here) shows the plain sum exact and it
// joins the pair h + c by a TwoSum, whose error joins c by a second TwoSum. A refused block goes value
// by value through the same two. A nonzero error of the second (NaN where an inf or NaN was summed)
// sets the flag: the host then takes that output's digits. Output as the CPU shape's: h at out[g], c at
// out[n_o n_s inner + g], the flag at flag[g] (0: exact). The pair starts from -0.0, so -0.0s alone
// leave h -0.0.
//
// The grid is capped at CUDA's limits (gpu_geometry.MAX_X): a work-item takes g, g + the grid's size, ...
#if GM_DDP
GM_STATIC_ASSERT(GM_EXACT && USE_FP64 && !GM_X_D, ddp_needs_fp64_and_a_narrow_type);
#define GM_DDP_BLK 64
#if GM_X_H
#define GM_DDP_EMIN (-14)
#define GM_DDP_PM1 10
#elif GM_X_BF16
#define GM_DDP_EMIN (-126)
#define GM_DDP_PM1 7
#else
#define GM_DDP_EMIN (-126)
#define GM_DDP_PM1 23
#endif
// x joins h by TwoSum, its error joins c by a second, whose error sets bad
GM_INLINE void gm_ddp_two(double* h, double* c, int* bad, const double x) {
    const double h0 = *h, c0 = *c;
    const double s = h0 + x, bv = s - h0, e = (h0 - (s - bv)) + (x - bv);
    const double t = c0 + e, cv = t - c0, f = (c0 - (t - cv)) + (e - cv);
    *h = s;
    *c = t;
    *bad |= (f != 0.0);
}
// a block's plain sum is exact: every value a multiple of u (the smallest nonzero one's ulp in its
// format, at least the format's smallest), and GM_DDP_BLK times the largest below 2^53 u
GM_INLINE int gm_ddp_span_ok(const uint mx, const uint mn) {
    const int emx = (int)(mx >> 23) - 127;
    const int emn = max((int)((mn + 1u) >> 23) - 127, GM_DDP_EMIN);
    return emx + 7 <= emn + (53 - GM_DDP_PM1);
}
#define GM_DDP_AT(o, e) ((double)LOAD1(GM_AT(GM_A_IN, const T, in, (o) * os + (e), 1)))
__kernel void gm_dd_partials(__global const T* in, __global double* out, __global uchar* flag, long n_o, long n_s,
                             long rows, long seg, long inner, long os, long lim GM_CHK_P) {
    const long nl = n_o * n_s * inner;
    for (long g = (long)get_global_id(0); g < nl; g += (long)get_global_size(0)) {
        const long j = g % inner, t = g / inner;
        const long s = t % n_s, o = t / n_s;
        const long r1 = min(rows, (s + 1) * seg);
        double h = -0.0, c = 0.0;
        int bad = 0;
        for (long rb = s * seg; rb < r1; rb += GM_DDP_BLK) {
            const long re = min(r1, rb + GM_DDP_BLK);
            double sum = -0.0;
            uint mx = 0u, mn = 0xFFFFFFFFu;
            for (long r = rb; r < re; ++r) {
                const long e = r * inner + j;
                if (e < lim) {
                    const float f = (float)GM_DDP_AT(o, e);      // exact: a FLOAT32, FLOAT16 or BFLOAT16 value
                    const uint m = as_uint(f) & 0x7FFFFFFFu;
                    sum += (double)f;
                    mx = max(mx, m);
                    mn = min(mn, m - 1u);                        // a zero wraps to the largest
                }
            }
            if (gm_ddp_span_ok(mx, mn)) {
                gm_ddp_two(&h, &c, &bad, sum);
            } else {
                for (long r = rb; r < re; ++r) {
                    const long e = r * inner + j;
                    if (e < lim) gm_ddp_two(&h, &c, &bad, GM_DDP_AT(o, e));
                }
            }
        }
        *GM_AT(GM_A_OUT, double, out, g, 1) = h;
        *GM_AT(GM_A_OUT, double, out, nl + g, 1) = c;
        *GM_AT(GM_A_FLAG, uchar, flag, g, 1) = (uchar)(bad != 0);
    }
}
#undef GM_DDP_AT
#endif
