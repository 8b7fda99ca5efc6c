// The CPU shape's column kernel, gm_reduce_col_serial (reduce_cpu.cl includes it), and the FLOAT64
// columns' bound test of eight results at once (gm_settle_dd_f64_8).

#if GM_EXACT && GM_X_D
// FLOAT64 columns: exact.h's gm_settle_dd_f64 for eight adjacent outputs at once, the same operations
// lane for lane (so the same bits and the same verdicts as gm_store's, eight times), with gm_settle's
// err for one largest magnitude mx: the open lanes (-1), the results' bits in *bits
GM_INLINE long8 gm_settle_dd_f64_8(double8 hi, double8 lo, double mx, long depth, ulong n, long8* bits) {
    const double err = (double)depth * 0x1p-103 * (double)n * mx;
    const double8 nd = (double8)((double)n), qs = hi / nd;
    const double8 sg = select((double8)(1.0), (double8)(-1.0), isless(hi, (double8)(0.0)));
    const double8 h = hi * sg, l = lo * sg, q = qs * sg;
    const double8 p0 = q * nd, pe0 = fma(q, nd, -p0), hp = h - p0;
    const double8 d0 = (hp - pe0) + l;
    const long8 uq = as_long8(q);
    const double8 gu = as_double8(uq + 1) - q, gd = q - as_double8(uq - 1);
    const long8 up = isgreater(d0, gu * 0.5 * nd), dn = isless(d0, -gd * 0.5 * nd);
    const double8 c = select(select(q, q - gd, dn), q + gu, up);
    const double8 dc = d0 - select(select((double8)(0.0), -gd * nd, dn), gu * nd, up);
    const long8 uc = as_long8(c);
    const double8 cu = as_double8(uc + 1) - c, cd = c - as_double8(uc - 1);
    *bits = as_long8(select(qs, c * sg, up | dn));
    const double8 tol = err * (1.0 + 0x1p-40) + (fabs(hp) + fabs(pe0) + fabs(l) + fabs(d0) + gu * nd) * 0x1p-50;
    const long8 ok = isgreaterequal(q, (double8)(0x1p-1000)) & isless(q, (double8)(0x1p1000))
                     & (long8)(-(long)(err < 0x1p1000)) & isless(dc + tol, cu * 0.5 * nd)
                     & isless(tol - dc, cd * 0.5 * nd);
    return ~(ok | (long8)(-(long)(mx == 0.0)));
}
#endif

// Column class: work-item (column block, outer index, chunk) sums COLS adjacent columns over a chunk
// of rows: every row read is COLS contiguous elements, and no work-item walks a whole column alone.
#if K_COL
__kernel void gm_reduce_col_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                   __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off,
                                   int use_part, __constant const gm_rmeta* m, long n_out, long len, long clen, ulong n,
                                   long inner, long rs GM_CHK_P) {
    long cb = get_global_id(0), o = get_global_id(1), chunk = get_global_id(2);
    long c0 = cb * COLS;
    if (c0 >= inner) return;
    long k0 = o * inner + c0;
    long b = (long)in_off + gm_keep_offset(m, k0, 1);
    // the COLS outputs of this work-item are adjacent (inner stride 1 in the output and in the partials)
    long ob = (long)out_off + gm_keep_offset(m, k0, 2);
    long pb = (long)part_off + chunk * n_out + k0;
    long fb = (long)flag_off + k0;      // the COLS outputs' flags (a byte each)
    long r = chunk * clen, rend = min(len, r + clen);
#if GM_COL_SPAN
    int col_exact = 0;                  // gm_col_exact: the block's sums exact, every output settled
#endif
#if WIDE_FLOAT
    if (c0 + COLS <= inner) {
        // FLOAT64: each column's double-double of the values below 2^960 (gm_dd4's hi, lo) in the
        // lanes of h[v], l[v], added eight columns at a time with GM_DD_ADD1's operations
        // (GM_DD8_ADD, above: the same bits as the element-by-element adds); eight values with a
        // larger, infinite or NaN one among them go lane by lane, the others' parts to acc[].bhi, blo
        gm_acc acc[COLS];
        double8 h[COLS / 8], l[COLS / 8];
        for (int v = 0; v < COLS; ++v) GM_ACC_ZERO(acc[v]);
        for (int v = 0; v < COLS / 8; ++v) { h[v] = (double8)(-0.0); l[v] = (double8)(0.0); }
#if GM_EXACT
        long8 mcol = (long8)(0);
        int big = 0;        // a value from 2^960 on, inf or NaN went lane by lane
#endif
#if GM_EXACT
#define GM_COL_BIG() big = 1;
#define GM_COL_M(mag) mcol = max(mcol, mag);
#define GM_COL_BHI(v, j, x) acc[8 * (v) + (j)].bhi = max(acc[8 * (v) + (j)].bhi, fabs(x));
#else
#define GM_COL_BIG()
#define GM_COL_M(mag)
#define GM_COL_BHI(v, j, x)
#endif
        // one row's eight columns x at q + 8 v into h[v], l[v]: a vector with a value from 2^960 on,
        // inf or NaN lane by lane (the small ones into their lanes, the others into acc[]'s gm_dd4)
#define GM_COL_ROW(x, q, v) { const long8 mag_ = as_long8(x) & (long8)(0x7FFFFFFFFFFFFFFFL); \
    if (any(mag_ >= (long8)(0x7BF0000000000000L))) { \
        double hh[8], ll[8]; \
        GM_COL_BIG() \
        vstore8(h[v], 0, hh); vstore8(l[v], 0, ll); \
        for (int j = 0; j < 8; ++j) { \
            const double xj = GM_IN1((q) + 8 * (v) + j); \
            if (fabs(xj) < 0x1p960) { GM_DD_ADD1(hh[j], ll[j], xj) GM_COL_BHI(v, j, xj) } \
            else GM_ACC_ADD(acc[8 * (v) + j], xj); \
        } \
        h[v] = vload8(0, hh); l[v] = vload8(0, ll); \
    } else { GM_DD8_ADD(h[v], l[v], x) GM_COL_M(mag_) } }
        // four rows per pass: each column's accumulator loaded and stored once per four rows (COLS / 8
        // pairs of vectors do not stay in registers), the same adds in the same order per column
        for (; r + 4 <= rend; r += 4) {
            const long q = b + r * rs;
            for (int v = 0; v < COLS / 8; ++v) {
#if PREFETCH
                if ((v & 1) == 0) GM_PREFETCH4(q + PREFETCH * rs + 8 * v)
#endif
                const double8 x0 = GM_IN8(q + 8 * v), x1 = GM_IN8(q + rs + 8 * v);
                const double8 x2 = GM_IN8(q + 2 * rs + 8 * v), x3 = GM_IN8(q + 3 * rs + 8 * v);
                const long8 mag = max(max(as_long8(x0) & (long8)(0x7FFFFFFFFFFFFFFFL),
                                          as_long8(x1) & (long8)(0x7FFFFFFFFFFFFFFFL)),
                                      max(as_long8(x2) & (long8)(0x7FFFFFFFFFFFFFFFL),
                                          as_long8(x3) & (long8)(0x7FFFFFFFFFFFFFFFL)));
                if (any(mag >= (long8)(0x7BF0000000000000L))) {
                    GM_COL_ROW(x0, q, v) GM_COL_ROW(x1, q + rs, v) GM_COL_ROW(x2, q + 2 * rs, v) GM_COL_ROW(x3, q + 3 * rs, v)
                } else {
                    double8 hv = h[v], lv = l[v];
                    GM_DD8_ADD(hv, lv, x0) GM_DD8_ADD(hv, lv, x1) GM_DD8_ADD(hv, lv, x2) GM_DD8_ADD(hv, lv, x3)
                    h[v] = hv; l[v] = lv;
                    GM_COL_M(mag)
                }
            }
        }
        for (; r < rend; ++r) {
            const long q = b + r * rs;
            for (int v = 0; v < COLS / 8; ++v) {
                const double8 x = GM_IN8(q + 8 * v);
                GM_COL_ROW(x, q, v)
            }
        }
#if GM_EXACT
        // one largest magnitude for the COLS columns (a valid bound, looser for the smaller ones)
        mcol.lo = max(mcol.lo, mcol.hi);
        mcol.s01 = max(mcol.s01, mcol.s23);
        const double mc = as_double(max(mcol.s0, mcol.s1));
        if (!use_part && !big) {
            // no value from 2^960 on, no inf or NaN (every column's m is mc): eight results and their
            // flags at once, as gm_store gives them one by one
            for (int v = 0; v < COLS / 8; ++v) {
                long8 bits;
                const long8 open = gm_settle_dd_f64_8(h[v], l[v], mc, m->depth, n, &bits);
                vstore8(as_double8(bits), 0, GM_AT(GM_A_OUT, OUT_T, out, ob + 8 * v, 8));
                vstore8(convert_uchar8(open & (long8)(1)), 0, GM_AT(GM_A_FLAG, uchar, flag, fb + 8 * v, 8));
            }
            GM_REDO_OPEN(k0, k0 + COLS);
            return;
        }
        for (int v = 0; v < COLS; ++v) acc[v].bhi = max(acc[v].bhi, mc);
#endif
        for (int v = 0; v < COLS / 8; ++v) {
            double hh[8], ll[8];
            vstore8(h[v], 0, hh); vstore8(l[v], 0, ll);
            for (int j = 0; j < 8; ++j) { acc[8 * v + j].hi = hh[j]; acc[8 * v + j].lo = ll[j]; }
        }
        for (int v = 0; v < COLS; ++v) gm_emit_at(acc[v], n, out, ob + v, part, pb + v, flag, fb + v, use_part, m GM_CHK_A);
#elif GM_SCALAR_ACC
    if (c0 + COLS <= inner) {
        // element by element: a row's COLS adjacent elements into COLS accumulators
        gm_acc acc[COLS];
        for (int v = 0; v < COLS; ++v) GM_ACC_ZERO(acc[v]);
        for (; r < rend; ++r) {
            long q = b + r * rs;
            for (int v = 0; v < COLS; ++v) GM_ACC_ADD(acc[v], GM_IN1(q + v));
        }
        for (int v = 0; v < COLS; ++v) gm_emit_at(acc[v], n, out, ob + v, part, pb + v, flag, fb + v, use_part, m GM_CHK_A);
#else
    if (c0 + COLS <= inner) {
        ACC8 s[COLS / 8];
#if HAS_C8
        ACC8 c[COLS / 8];
#define GM_C(v) c[v]
#else
        ACC8 c_unused = (ACC8)(0);
#define GM_C(v) c_unused
#endif
        for (int v = 0; v < COLS / 8; ++v) { s[v] = GM_Z8; GM_C(v) = (ACC8)(0); }
        GM_MAX8_DECL      // one largest magnitude for the COLS columns (GM_EXACT: gm_settle's bound)
#if WIDE_INT
        // four rows per pass, as below: four values' high halves (and low halves) cannot wrap either sum
        for (; r + 4 <= rend; r += 4) {
            long q = b + r * rs;
            for (int v = 0; v < COLS / 8; ++v) {
                const X8 x0 = GM_IN8(q + 8 * v), x1 = GM_IN8(q + rs + 8 * v);
                const X8 x2 = GM_IN8(q + 2 * rs + 8 * v), x3 = GM_IN8(q + 3 * rs + 8 * v);
                s[v] += (as_ulong8(x0 >> 32) + as_ulong8(x1 >> 32)) + (as_ulong8(x2 >> 32) + as_ulong8(x3 >> 32));
                c[v] += ((as_ulong8(x0) & 0xFFFFFFFFUL) + (as_ulong8(x1) & 0xFFFFFFFFUL)) +
                        ((as_ulong8(x2) & 0xFFFFFFFFUL) + (as_ulong8(x3) & 0xFFFFFFFFUL));
            }
        }
#endif
#if GM_H16C
        // FLOAT16 with fp64 (reduce_kernels.h16_cols): a chunk of at most 2^13 rows, so each column's
        // FLOAT64 sum is exact in any order (multiples of 2^-24 below 2^29), IEEE's for inf, NaN and
        // a zero total (from -0.0); no largest magnitude kept, no blocks: the partial is the exact
        // total and, as its m, |s| / (rows of the chunk) rounded up (GM_H16's rule for rows: the
        // finalize pass's additions are within the bound's depth u n m, per_chunk 1)
#define GM_IN8C(i) GM_IN8(i)
        const long r_c0 = r;
#elif GM_COL_SPAN
        uint8 l8i = (uint8)(0xFFFFFFFFu);
#define GM_IN8C(i) gm_in8mn(in, (i), &m8i, &l8i GM_CHK_A)
#else
#define GM_IN8C(i) GM_IN8M(i)
#endif
#if !HAS_C8 && GM_EXACT && !GM_H16C
        // blocks of 4 GM_XBLOCK rows: each column's block sum joins o[v] (the bound's depth:
        // 2 + GM_XBLOCK + clen / (4 GM_XBLOCK) + 3, reduce_kernels.cpu_variant)
        ACC8 o[COLS / 8];
        for (int v = 0; v < COLS / 8; ++v) o[v] = GM_Z8;
        int blk = 0;
#endif
#if GM_B16C
        // BFLOAT16 with fp64 (reduce_kernels.b16_cols; never HAS_C8): sixteen columns per load, the even
        // and odd columns widened by a shift and a mask of the same bits (a bfloat16 is the top half of a
        // float's), the four rows added in double as below: s[2w] and o[2w] hold the even columns of
        // the w-th sixteen, s[2w + 1] and o[2w + 1] the odd ones, put back in the columns' order after
        // the loop (the same additions per column: the same depth); the largest magnitude from the
        // bits (mxc)
        {
            ushort16 mxc = (ushort16)(0);
#if GM_COL_SPAN
            ushort16 lnc = (ushort16)(0xFFFF);
#endif
            for (; r + 4 <= rend; r += 4) {
                long q = b + r * rs;
                GM_COL_BLOCK()
                for (int w = 0; w < COLS / 16; ++w) {
#if PREFETCH
                    // the same columns PREFETCH rows on: a 64-byte line per two loads
                    if ((w & 1) == 0) GM_PREFETCH4(q + PREFETCH * rs + 16 * w)
#endif
                    const ushort16 h0 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, q + 16 * w, 16));
                    const ushort16 h1 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, q + rs + 16 * w, 16));
                    const ushort16 h2 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, q + 2 * rs + 16 * w, 16));
                    const ushort16 h3 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, q + 3 * rs + 16 * w, 16));
                    const ushort16 k = (ushort16)(0x7FFF), a0 = h0 & k, a1 = h1 & k, a2 = h2 & k, a3 = h3 & k;
                    mxc = max(mxc, max(max(a0, a1), max(a2, a3)));
#if GM_COL_SPAN
                    // the smallest nonzero magnitude too (bits minus one, a zero wrapping to the top)
                    const ushort16 one = (ushort16)(1);
                    lnc = min(lnc, min(min(a0 - one, a1 - one), min(a2 - one, a3 - one)));
#endif
                    const uint8 u0 = as_uint8(h0), u1 = as_uint8(h1), u2 = as_uint8(h2), u3 = as_uint8(h3);
                    s[2 * w] += (convert_double8(as_float8(u0 << 16)) + convert_double8(as_float8(u1 << 16))) +
                                (convert_double8(as_float8(u2 << 16)) + convert_double8(as_float8(u3 << 16)));
                    s[2 * w + 1] += (convert_double8(as_float8(u0 & (uint8)(0xFFFF0000u))) +
                                     convert_double8(as_float8(u1 & (uint8)(0xFFFF0000u)))) +
                                    (convert_double8(as_float8(u2 & (uint8)(0xFFFF0000u))) +
                                     convert_double8(as_float8(u3 & (uint8)(0xFFFF0000u))));
                }
            }
            for (int w = 0; w < COLS / 16; ++w) {
                const ACC8 se = s[2 * w], sd = s[2 * w + 1], oe = o[2 * w], od = o[2 * w + 1];
                s[2 * w] = (ACC8)(se.s0, sd.s0, se.s1, sd.s1, se.s2, sd.s2, se.s3, sd.s3);
                s[2 * w + 1] = (ACC8)(se.s4, sd.s4, se.s5, sd.s5, se.s6, sd.s6, se.s7, sd.s7);
                o[2 * w] = (ACC8)(oe.s0, od.s0, oe.s1, od.s1, oe.s2, od.s2, oe.s3, od.s3);
                o[2 * w + 1] = (ACC8)(oe.s4, od.s4, oe.s5, od.s5, oe.s6, od.s6, oe.s7, od.s7);
            }
            const ushort8 m8 = max(mxc.lo, mxc.hi);
            const ushort4 m4 = max(m8.lo, m8.hi);
            const ushort2 m2 = max(m4.lo, m4.hi);
            m8i = max(m8i, (int8)((int)((uint)max(m2.x, m2.y) << 16)));
#if GM_COL_SPAN
            // as a float's magnitude bits minus one (0xFFFF + 1 wraps to 0, and 0 - 1 to the top)
            const ushort8 l8 = min(lnc.lo, lnc.hi);
            const ushort4 l4 = min(l8.lo, l8.hi);
            const ushort2 l2 = min(l4.lo, l4.hi);
            l8i = min(l8i, (uint8)((((uint)min(l2.x, l2.y) + 1u) << 16) - 1u));
#endif
        }
#endif
#if !HAS_C8
        // four rows per pass over the accumulators: a quarter of the accumulator loads and stores
        // (COLS/8 vectors do not fit in registers), and four row streams in flight. Exact adds
        // (integers) or double adds of floats: the grouping does not change the 1-ulp bound.
        for (; r + 4 <= rend; r += 4) {
            long q = b + r * rs;
#if GM_EXACT && !GM_H16C
            GM_COL_BLOCK()
#endif
            for (int v = 0; v < COLS / 8; ++v) {
#if PREFETCH
                // the same columns PREFETCH rows on: a 64-byte line per two vectors
                if ((v & 1) == 0) GM_PREFETCH4(q + PREFETCH * rs + 8 * v)
#endif
                s[v] += (GM_IN8C(q + 8 * v) + GM_IN8C(q + rs + 8 * v)) +
                        (GM_IN8C(q + 2 * rs + 8 * v) + GM_IN8C(q + 3 * rs + 8 * v));
            }
        }
#endif
        for (; r < rend; ++r) {
            long q = b + r * rs;
            for (int v = 0; v < COLS / 8; ++v) { X8 x8 = GM_IN8C(q + 8 * v); ACC8_ADD(s[v], GM_C(v), x8); }
        }
#if GM_EXACT && !GM_H16C
        for (int v = 0; v < COLS / 8; ++v) s[v] += o[v];
#endif
#if GM_H16C
        const double h16c_w = (1.0 + 0x1p-50) / (double)max(rend - r_c0, 1l);     // m: |s| / rows, up
#elif GM_EXACT
        gm_acc mall;
        GM_MAX8_TO(mall)
#if GM_COL_SPAN
        col_exact = gm_col_exact(mall.m, l8i);
#endif
#endif
#undef GM_IN8C
        for (int v = 0; v < COLS / 8; ++v) {
#if GM_SETTLE8
            if (!use_part) {      // eight adjacent results and their flags (a byte each) at once
                float8 res;
#if GM_COL_SPAN
                if (col_exact) {    // exact sums: one rounding decides; no flags (no redo below)
                    vstore8(convert_float8(GM_Q8(s[v], n)), 0, GM_AT(GM_A_OUT, OUT_T, out, ob + 8 * v, 8));
                    continue;
                }
#endif
                const int8 open = gm_settle8(s[v], mall.m, m->depth, n, &res);
                vstore8(res, 0, GM_AT(GM_A_OUT, OUT_T, out, ob + 8 * v, 8));
                vstore8(convert_uchar8(open & (int8)(1)), 0, GM_AT(GM_A_FLAG, uchar, flag, fb + 8 * v, 8));
                continue;
            }
#elif GM_SETTLE8_BF16
            if (!use_part) {      // eight adjacent results and their flags (a byte each) at once
                ushort8 res;
#if GM_COL_SPAN
                if (col_exact) {    // exact sums: one rounding decides; no flags (no redo below)
                    GM_VSTORE_BF16(8, GM_BF16_BITS8(GM_Q8(s[v], n)), GM_AT(GM_A_OUT, OUT_T, out, ob + 8 * v, 8));
                    continue;
                }
#endif
                const int8 open = gm_settle8_bf16(s[v], mall.m, m->depth, n, &res);
                GM_VSTORE_BF16(8, res, GM_AT(GM_A_OUT, OUT_T, out, ob + 8 * v, 8));
                vstore8(convert_uchar8(open & (int8)(1)), 0, GM_AT(GM_A_FLAG, uchar, flag, fb + 8 * v, 8));
                continue;
            }
#elif defined(STORE8_RESULT) && !GM_EXACT
            // eight adjacent results at once: a vector division (or the exact product by 1/n) and
            // one 8-wide store instead of eight scalar ones (the outputs of a short column cost as
            // much as its loads otherwise)
            if (!use_part) {
                STORE8_RESULT(s[v], n, GM_AT(GM_A_OUT, OUT_T, out, ob + 8 * v, 8));
                continue;
            }
#endif
            ACC ss[8];
            vstore8(s[v], 0, ss);
#if HAS_C8
            ACC cc[8];
            vstore8(c[v], 0, cc);
#endif
            for (int j = 0; j < 8; ++j) {
                gm_acc a;
                a.s = ss[j];
#if GM_H16C
                a.m = isfinite(ss[j]) ? fabs(ss[j]) * h16c_w : 0.0;
#elif GM_EXACT
                a.m = mall.m;
#endif
#if HAS_C8
                a.c = cc[j];
#endif
                gm_emit_at(a, n, out, ob + 8 * v + j, part, pb + 8 * v + j, flag, fb + 8 * v + j, use_part, m GM_CHK_A);
            }
        }
#endif
    } else {
        for (long col = c0; col < inner; ++col) {
            gm_acc a;
            GM_ACC_ZERO(a);
            for (long rr = r; rr < rend; ++rr) GM_ACC_ADD(a, GM_IN1(b + (col - c0) + rr * rs));
            gm_emit_at(a, n, out, ob + (col - c0), part, pb + (col - c0), flag, fb + (col - c0), use_part, m GM_CHK_A);
        }
    }
#if GM_COL_SPAN
    if (col_exact && !use_part) return;     // every output settled: the block wrote no flags
#endif
#if GM_DD_TIER && RN == 1 && !GM_FAST_ONLY && !GM_FLAG_BITS
    if (!use_part) gm_redo_open_cols(in, b, rs, out, out_off, flag, flag_off, m, k0, min((long)COLS, inner - c0), n GM_CHK_A);
#else
    if (!use_part) GM_REDO_OPEN(k0, k0 + min((long)COLS, inner - c0));
#endif
}
#endif  // K_COL
