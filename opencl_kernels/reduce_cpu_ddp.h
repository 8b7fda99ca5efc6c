// The CPU shape's exact double-double partials (GM_DDP; reduce_cpu.cl includes it): the chunk totals
// of gpu_mean.dask (gpu_mean/dask/partials.py; docs/design.md, "Dask: exact double-double partials"),
// one pass at about the speed of a plain sum, where the superaccumulator's digits cost a pass of
// integer work per value and ten longs per output.
//
// The input, packed, is viewed as (n_o, rows, inner) with inner a multiple of 8 (the host makes rows
// of a reduction over the last axis into 8 lanes: (n_o, rows / 8, 8), its last rows % 8 values summed
// on the host). Work-item (o, s, w) sums the GM_DDP_V vectors of 8 adjacent columns from column
// 8 GM_DDP_V w on, of outer index o, over the rows of segment s (seg rows each), one lane a column,
// block of rows by block of rows: a block of GM_DD_BLK rows whose plain sums the span proof shows
// exact (gm_ddp_exact) joins the lanes' pairs h8 + c8 by one TwoSum each; any other block (an inf, a
// NaN, values over too many binades) goes value by value through the same TwoSums (reduce_cpu_exact.h:
// gm_dd_two8). A lane's h8 + c8 is its values' exact total unless an addition into c8 rounded, which
// sets its flag, as does an inf or NaN (its TwoSum errors are NaN): the host then takes that output's
// digits from its values. Lane k of the (n_o, n_s, inner) lanes writes h at out[k], c at
// out[n_o n_s inner + k], its flag at flag[k] (0: exact). The pairs start from -0.0: -0.0s alone leave
// h -0.0, IEEE's sign of their zero total.
#if GM_DDP
GM_STATIC_ASSERT(GM_DD_TIER && RN > 0, ddp_needs_the_pair_tier);
GM_STATIC_ASSERT(GM_DD_BLK % 8 == 0, ddp_takes_eight_rows_a_pass);
// A block of GM_DD_BLK rows of a vector: each lane's plain FLOAT64 sum, and the largest and smallest
// nonzero magnitudes as FLOAT32 bits (FLOAT16 and BFLOAT16 values are FLOAT32 values; one 32-bit
// integer max and min a vector of 8, native on AVX2, where doubles took compares and selects): the
// sum is exact when every value is a multiple of u, the smallest one's ulp in its own format (larger
// values have larger ulps; exact.h's gm_sum_is_exact), and GM_DD_BLK times the largest is below 2^53 u:
// 2^(emx + 1 + 6) <= 2^(53 + max(emn, emin) - (p - 1)), as GM_DD_BLOCK. Then one TwoSum a lane joins
// the pair; else (an inf or NaN: exponent field 255; too many binades) the block goes value by value.
#if GM_X_H
// FLOAT16 through the element-aligned ushort8 (common.h: gm_ushort8_a2) and a private copy: a row of a
// lanes view starts at any element, and a vload_half8 from such an address faulted in the bounds-checked
// build on PoCL (an aligned vector load)
GM_INLINE float8 gm_ddp_half8(__global const ushort* p) {
    const ushort8 r = *(__global const gm_ushort8_a2*)p;
    return vload_half8(0, (const __private half*)&r);
}
#define GM_DDP_F8(p) gm_ddp_half8(p)
#elif GM_X_BF16
#define GM_DDP_F8(p) as_float8(convert_uint8(GM_VLOAD_BF16(8, (p))) << 16)
#else
#define GM_DDP_F8(p) vload8(0, (p))
#endif
#define GM_DDP_IN(i) GM_DDP_F8(GM_AT(GM_A_IN, const T, in, i, 8))
typedef struct { double8 s; uint8 mx, mn; } gm_ddp_blk;
GM_INLINE void gm_ddp_zero(gm_ddp_blk* b) { b->s = (double8)(-0.0); b->mx = (uint8)(0u); b->mn = (uint8)(0xFFFFFFFFu); }
// four rows' vectors at once (twice a pass where the state lives in memory: below)
GM_INLINE void gm_ddp_take4(gm_ddp_blk* b, const float8 f0, const float8 f1, const float8 f2, const float8 f3) {
    const uint8 k = (uint8)(0x7FFFFFFFu), one = (uint8)(1u);
    const uint8 m0 = as_uint8(f0) & k, m1 = as_uint8(f1) & k, m2 = as_uint8(f2) & k, m3 = as_uint8(f3) & k;
    b->s += (convert_double8(f0) + convert_double8(f1)) + (convert_double8(f2) + convert_double8(f3));
    b->mx = max(b->mx, max(max(m0, m1), max(m2, m3)));
    b->mn = min(b->mn, min(min(m0 - one, m1 - one), min(m2 - one, m3 - one)));
}
GM_INLINE int gm_ddp_exact(const gm_ddp_blk* b) {
    const int8 emx = as_int8(b->mx >> 23) - 127;
    const int8 emn = max(as_int8((b->mn + (uint8)(1u)) >> 23) - 127, (int8)(GM_DD_EMIN));
    return all(emx + 7 <= emn + (53 - GM_DD_PM1));
}
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
    for (int v = 0; v < nv; ++v) { hv[v] = (double8)(-0.0); cv[v] = (double8)(0.0); bv[v] = (long8)(0); }
    const long b0 = o * os + c0;
    for (long rb = s * seg; rb < r1; rb += GM_DD_BLK) {
        const long re = min(r1, rb + GM_DD_BLK);
        if (re - rb < GM_DD_BLK) {          // a segment's last rows: value by value
            for (int v = 0; v < nv; ++v)
                for (long r = rb; r < re; ++r)
                    gm_dd_two8(&hv[v], &cv[v], &bv[v], convert_double8(GM_DDP_IN(b0 + r * inner + 8 * v)));
            continue;
        }
        // the block row by row, each row's nv vectors one contiguous run (as the column kernel streams
        // rows), then each vector's verdict
        gm_ddp_blk bk[GM_DDP_V];
        if (nv == 1) {                  // one vector (a row's lanes): its state in registers
            gm_ddp_blk b1;
            gm_ddp_zero(&b1);
            // one stream: prefetched GM_DDP_PF bytes ahead, both lines of the 128 bytes a step reads (a
            // (2048, 32768) FLOAT32 chunk over axis 1, one PoCL thread: 21.6-22.9 ms without, 16.3 with
            // 1024, 18.5-19.4 with 4096; two processes at once, a chunk each: 25-26 ms without, 20.2-20.8
            // with 512 or 1024, 22.6-24.8 with 2048 to 8192, numpy's float32 sum 21.3)
            for (long r = rb; r < re; r += 4) {
                GM_PREFETCH(in, b0 + r * inner, GM_DDP_PF);
                GM_PREFETCH(in, b0 + r * inner + 64 / (long)sizeof(T), GM_DDP_PF);
                gm_ddp_take4(&b1, GM_DDP_IN(b0 + r * inner), GM_DDP_IN(b0 + (r + 1) * inner),
                             GM_DDP_IN(b0 + (r + 2) * inner), GM_DDP_IN(b0 + (r + 3) * inner));
            }
            bk[0] = b1;
        } else {
            for (int v = 0; v < nv; ++v) gm_ddp_zero(&bk[v]);
            // eight rows a pass: the block state (128 bytes a vector, 64 KB for 512, in L2) read and
            // written once every 8 rows; a (2048, 32768) FLOAT32 chunk over axis 0 on one core took
            // 20-22 ms with 4 rows a pass, 17-18 with 8, 31 with 16 (16 strided streams; numpy 17-22)
            for (long r = rb; r < re; r += 8) {
                const long q = b0 + r * inner;
                for (int v = 0; v < nv; ++v) {
                    gm_ddp_blk b1 = bk[v];
                    gm_ddp_take4(&b1, GM_DDP_IN(q + 8 * v), GM_DDP_IN(q + inner + 8 * v),
                                 GM_DDP_IN(q + 2 * inner + 8 * v), GM_DDP_IN(q + 3 * inner + 8 * v));
                    gm_ddp_take4(&b1, GM_DDP_IN(q + 4 * inner + 8 * v), GM_DDP_IN(q + 5 * inner + 8 * v),
                                 GM_DDP_IN(q + 6 * inner + 8 * v), GM_DDP_IN(q + 7 * inner + 8 * v));
                    bk[v] = b1;
                }
            }
        }
        for (int v = 0; v < nv; ++v) {
            if (gm_ddp_exact(&bk[v])) gm_dd_two8(&hv[v], &cv[v], &bv[v], bk[v].s);
            else for (long r = rb; r < re; ++r)
                gm_dd_two8(&hv[v], &cv[v], &bv[v], convert_double8(GM_DDP_IN(b0 + r * inner + 8 * v)));
        }
    }
    const long nl = n_o * n_s * inner;
    for (int v = 0; v < nv; ++v) {
        const long k = t * inner + c0 + 8 * v;
        vstore8(hv[v], 0, GM_AT(GM_A_OUT, double, out, k, 8));
        vstore8(cv[v], 0, GM_AT(GM_A_OUT, double, out, nl + k, 8));
        vstore8(convert_uchar8(bv[v] != (long8)(0)), 0, GM_AT(GM_A_FLAG, uchar, flag, k, 8));
    }
}
// gpu_mean.dask's combine and aggregate on a device that works in host memory (dask/partials.py:
// _fold_dd; docs/design.md, "Dask: exact double-double partials"): k partials' exact pairs for n
// outputs, hc laid out (k, 2, n) (partial i's h at hc[2 i n + j], its c at hc[(2 i + 1) n + j]; n a
// multiple of 8), added output by output in the partials' order by wide.dd_add_exact's three TwoSums:
// the heads' error joins c, the other c joins that; a nonzero error of either of the last two (NaN
// where an inf or NaN was added) flags the output, whose total the host then takes in digits. h at
// out[j], c at out[n + j]; flag[j] bit 0 the flag. With count > 0 also the FLOAT32 mean by
// exact.settle_near: q = (h + c) / count within 2^-52 |q| of the exact mean, so where q lies farther
// than 2^-50 |q| from both midpoints around r = q rounded to FLOAT32, r is the mean rounded once:
// mean[j] = r and flag bit 1 (settled), never for a flagged output, a zero mean, a mean within 2^-1000
// of zero or one past FLT_MAX (the host settles those). Work-item g takes outputs [g span, (g + 1) span),
// 8 at a time (span a multiple of 8).
#define GM_A_MEAN GM_A_PART     // the means: the third of the checked build's four bounds
__kernel void gm_dd_fold(__global const double* hc, __global double* out, __global float* mean,
                         __global uchar* flag, long k, long n, long span, double count GM_CHK_P) {
    const long j1 = min(n, span * ((long)get_global_id(0) + 1));
    for (long j = span * (long)get_global_id(0); j < j1; j += 8) {
        double8 h = vload8(0, GM_AT(GM_A_IN, const double, hc, j, 8));
        double8 c = vload8(0, GM_AT(GM_A_IN, const double, hc, n + j, 8));
        long8 bad = (long8)(0);
        for (long i = 1; i < k; ++i) {
            const double8 xh = vload8(0, GM_AT(GM_A_IN, const double, hc, 2 * i * n + j, 8));
            const double8 xc = vload8(0, GM_AT(GM_A_IN, const double, hc, (2 * i + 1) * n + j, 8));
            const double8 s = h + xh, sv = s - h, e = (h - (s - sv)) + (xh - sv);
            const double8 t = c + e, tv = t - c, f1 = (c - (t - tv)) + (e - tv);
            const double8 u = t + xc, uv = u - t, f2 = (t - (u - uv)) + (xc - uv);
            h = s;
            c = u;
            bad |= (f1 != (double8)(0.0)) | (f2 != (double8)(0.0));
        }
        vstore8(h, 0, GM_AT(GM_A_OUT, double, out, j, 8));
        vstore8(c, 0, GM_AT(GM_A_OUT, double, out, n + j, 8));
        long8 settled = (long8)(0);
        if (count > 0.0) {
            const double8 q = (h + c) / count;
            const float8 res = convert_float8(q);            // to nearest even
            const double8 r = convert_double8(res), d = q - r;
            const double8 up = convert_double8(nextafter(res, (float8)(INFINITY))) - r;
            const double8 dn = r - convert_double8(nextafter(res, (float8)(-INFINITY)));
            const double8 hw = select(dn, up, d >= (double8)(0.0)) * 0.5;     // half the gap
            settled = (fabs(d) + fabs(q) * 0x1p-50 < hw) & isfinite(hw) & (r != (double8)(0.0)) &
                      (fabs(q) > 0x1p-1000) & (bad == (long8)(0));
            vstore8(res, 0, GM_AT(GM_A_MEAN, float, mean, j, 8));
        }
        vstore8(convert_uchar8(((bad != (long8)(0)) & (long8)(1)) | (settled & (long8)(2))), 0,
                GM_AT(GM_A_FLAG, uchar, flag, j, 8));
    }
}
#endif
