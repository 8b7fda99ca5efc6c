// The reductions' CPU-shaped kernels (names ending _serial): REDUCE AVERAGE (FLOAT32, FLOAT16), the
// exact integer mean reduction, the extension types' mean reduction (BFLOAT16, FLOAT64, INT64,
// UINT64) and the wide sum (gm.ext), as OpenCL CPU devices such as PoCL run them. The host takes this
// file where the device is an OpenCL CPU (gpu_mean/kernels/reduce_kernels.py: cpu_variant,
// kernel_file; it sets GM_CPU_SHAPE 1); reduce_gpu.cl is the other shape. Each work-item runs a
// serial, vectorized loop; no barriers, no local memory. One source for OpenCL and CUDA all the same
// (docs/design.md, "Kernels"), though only OpenCL runs it.
//   gm_reduce_row_serial, gm_reduce_col_serial (reduce_cpu_cols.h), gm_reduce_general_serial,
//   gm_reduce_short_serial (reduce_cpu_short.h), gm_reduce_short_f64_serial (reduce_cpu_short_f64.h)
//                                 one pass per class of the plan
//   gm_reduce_finalize_serial     the chunk partials of a split reduction
//   gm_reduce_limbs_serial        exact partials (GM_EXACT; and reduce_limbs.h's two kernels)
//   gm_dd_partials_serial         exact double-double partials (GM_DDP: reduce_cpu_ddp.h)
// The correctly rounded means (GM_EXACT) have no exact pass here: each kernel that stores results
// redoes the outputs it left open (reduce_cpu_exact.h).
//
// Macros (reduce_kernels.py builds them from a plan): those of reduce_gpu.cl's list but the GPU
// geometry's (T, OUT_T, ACC, the accumulator's, GM_ACC0, GM_EXACT and its format, LOAD1, STORE_RESULT,
// GM_WIDE_SUM, KN, RN, KNA, RNA, META_BYTES), and ACC8, X8 (a loaded vector's type), LOAD8(p), COLS,
// ROW_MULTI, HALF_BLOCKS, TO_ACC8(v), PREFETCH, GM_XBLOCK (the block of passes that bounds the depth),
// SHORT_LEN, LOAD16(p), STORE8_FLOAT(t, p), EXACT_BF16 (rows of 8 in float where exact), GM_H16,
// GM_H16C, GM_H16_PASSES (FLOAT16 runs and columns summed exactly), GM_B16, GM_B16C (BFLOAT16 rows and
// columns in double lanes), GM_COL_SPAN (FLOAT32 and BFLOAT16 columns of few rows: the span test's
// limit), GM_SETTLE8, GM_SETTLE8_BF16, GM_Q8(t, n) (eight results at once), GM_FLAG_BITS (a bit per
// output), GM_SHORT_POW2, RAW8(p), RAW16(p) and, where ACC is not the compensated pair,
// STORE8_RESULT(t, n, p) (8 results at once, each t / n rounded once; see those kernels)
#include "common.h"
#include "exact.h"
#include "reduce_meta.h"
#include "reduce_acc.h"
#include "reduce_store.h"
#if GM_EXACT
#include "reduce_exact.h"
#include "reduce_limbs.h"
#endif

// ACC8_ADD adds loaded vectors (X8) to a vector accumulator, ACC8_JOIN one vector accumulator to
// another; HAS_C8: the accumulator has a second vector (compensation terms, or the low halves' sums).
// FLOAT64 (WIDE_FLOAT) and BFLOAT16 without fp64 (GM_BF16_NOFP64) have no vector form here: their
// kernels below add element by element (GM_SCALAR_ACC), except FLOAT64's rows and columns, which
// keep the double-doubles of the values below 2^960 in vectors (GM_DD8_ADD); so do the correctly
// rounded means without fp64 (GM_FF: the float-float sum with its bound).
#define GM_SCALAR_ACC (WIDE_FLOAT || GM_BF16_NOFP64 || GM_FF)
#if COMPENSATED
#define ACC8_ADD(s8, c8, x8) { ACC8 t_ = s8 + (x8); \
    c8 += select(((x8) - t_) + s8, (s8 - t_) + (x8), isgreaterequal(fabs(s8), fabs(x8))); s8 = t_; }
#define ACC8_JOIN(s8, c8, t8) ACC8_ADD(s8, c8, t8)
#define HAS_C8 1
#elif WIDE_INT
#define ACC8_ADD(s8, c8, x8) { s8 += as_ulong8((x8) >> 32); c8 += as_ulong8(x8) & 0xFFFFFFFFUL; }
#define ACC8_JOIN(s8, c8, t8) { s8 += (t8); }
#define HAS_C8 1
#else
#define ACC8_ADD(s8, c8, x8) { s8 += (x8); }
#define ACC8_JOIN(s8, c8, t8) ACC8_ADD(s8, c8, t8)
#define HAS_C8 0
#endif

// Software prefetch (PREFETCH != 0; the host sets it only where the lines are read soon, see
// opencl_geometry.reduce_geometry). Row kernel: PREFETCH bytes ahead in the run; column kernel: the
// same columns PREFETCH rows ahead. Measured on PoCL (2-core CI VM): the hardware prefetcher alone
// leaves a single stream per core ~15 % below the memory bandwidth reached with it.
#if PREFETCH
#define GM_PREFETCH(p, i, bytes) __builtin_prefetch((__global const char*)((p) + (i)) + (bytes))
#else
#define GM_PREFETCH(p, i, bytes)
#endif
// the column kernels' prefetch: element f of in and the three rows after it (rows rs apart)
#define GM_PREFETCH4(f) { const long f_ = (f); GM_PREFETCH(in, f_, 0); GM_PREFETCH(in, f_ + rs, 0); \
    GM_PREFETCH(in, f_ + 2 * rs, 0); GM_PREFETCH(in, f_ + 3 * rs, 0); }
// the column kernels' blocks of GM_XBLOCK passes: each column's block sum joins o[v] (the bound's depth)
#define GM_COL_BLOCK() { if (blk == GM_XBLOCK) { \
        for (int v_ = 0; v_ < COLS / 8; ++v_) { o[v_] += s[v_]; s[v_] = GM_Z8; } \
        blk = 0; } \
    ++blk; }

#if GM_EXACT
#include "reduce_cpu_exact.h"
#include "reduce_cpu_ddp.h"
#else
#define GM_REDO_OPEN(k0, k1)
#define GM_FIN_IN
#endif

// one output already located: its element o of out, or its partial slot pi of part (use_part)
GM_INLINE void gm_emit_at(gm_acc a, ulong n, __global OUT_T* out, long o, __global gm_acc* part, long pi,
                          __global uchar* flag, long fi, int use_part, __constant const gm_rmeta* m GM_CHK_P) {
    if (use_part) GM_PART(pi) = a;
    else gm_store(a, n, out, o, flag, fi, m GM_CHK_A);
}

// The vector accumulators start from -0.0 where the result's zero sign is IEEE's; GM_EXACT: the
// loads through GM_IN8M keep the largest magnitude seen (m8i: the values' bits without the sign, an
// integer max per vector, on the values as stored before their conversion to double; a NaN's bits
// exceed every number's, and a NaN makes the sum NaN, IEEE's answer), for the bound test.
#if GM_EXACT || COMPENSATED
#define GM_Z8 ((ACC8)(-0.0))
#else
#define GM_Z8 ((ACC8)(GM_ACC0))
#endif
#if GM_EXACT && !GM_X_D     // (FLOAT64 keeps its largest magnitude in its own loops)
#define GM_MAG8(r) (as_int8(r) & (int8)(0x7FFFFFFF))
GM_INLINE ACC8 gm_in8m(__global const T* in, long i, int8* m GM_CHK_P) {
    const float8 r = RAW8(GM_AT(GM_A_IN, const T, in, i, 8));
    *m = max(*m, GM_MAG8(r));
    return TO_ACC8(r);
}
#define GM_IN8M(i) gm_in8m(in, (i), &m8i GM_CHK_A)
#define GM_MAG16(r) (as_int16(r) & (int16)(0x7FFFFFFF))
#define GM_MAX8_DECL int8 m8i = (int8)(0); int16 m16i = (int16)(0);
GM_INLINE double gm_max8_value(int8 m) {
    m.lo = max(m.lo, m.hi);
    m.s01 = max(m.s01, m.s23);
    return (double)as_float(max(m.s0, m.s1));
}
#define GM_MAX8_TO(a) { (a).m = gm_max8_value(max(m8i, max(m16i.lo, m16i.hi))); }
#if GM_COL_SPAN
// FLOAT32 and BFLOAT16 columns of few rows (reduce_kernels.cpu_variant: GM_COL_SPAN): the loads also
// keep the smallest nonzero magnitude, as its bits minus one (a zero wraps to the top), for
// gm_col_exact
GM_INLINE ACC8 gm_in8mn(__global const T* in, long i, int8* m, uint8* lo GM_CHK_P) {
    const float8 r = RAW8(GM_AT(GM_A_IN, const T, in, i, 8));
    const int8 a = GM_MAG8(r);
    *m = max(*m, a);
    *lo = min(*lo, as_uint8(a) - (uint8)(1u));
    return TO_ACC8(r);
}
// Whether the FLOAT64 sums of a block of columns of n <= 2^8 values are exact and their quotients,
// rounded once more to FLOAT32, the correctly rounded means: every value is a multiple of
// 2^(e_lo - 150) (e: exponent fields, e_lo at least 1), every partial sum is below 2^(e_hi - 126) n,
// so the sums need at most 53 bits while e_hi - e_lo <= 29 - log2 n; and a mean that is no FLOAT32
// midpoint M lies at least 2^min(e_lo - 150, e_M - 151) / n from one, more than the double
// quotient's own rounding (at most 2^(e_M - 180), e_M <= e_hi) while e_hi - e_lo < 29 - log2 n
// (and n < 2^28), so that rounding never lands on a midpoint. GM_COL_SPAN (the host's
// 28 - ceil(log2 n)) is the widest span allowed. BFLOAT16 (8-bit significands: values multiples of
// 2^(e_lo - 134), midpoints of 2^(e_M - 135); the results through float rounded to odd, one
// rounding of the double quotient): the same reasoning gives 44 - ceil(log2 n). Zeros alone (lo at
// the top) pass; so does a block of infinities or NaN alone, whose double sums are IEEE's answer.
GM_INLINE int gm_col_exact(double mx, uint8 lo) {
    lo.lo = min(lo.lo, lo.hi);
    lo.s01 = min(lo.s01, lo.s23);
    const int e_hi = (int)(as_uint((float)mx) >> 23);
    const int e_lo = max((int)((min(lo.s0, lo.s1) + 1u) >> 23), 1);
    return e_hi - e_lo <= GM_COL_SPAN;
}
#endif
#else
#define GM_IN8M(i) GM_IN8(i)
#define GM_MAX8_DECL
#define GM_MAX8_TO(a)
#endif

#if WIDE_FLOAT
// FLOAT64: GM_DD_ADD1's double-double, lane for lane on eight lanes (the row and column kernels)
#define GM_DD8_ADD(h, l, x) { const double8 s_ = h + (x), bb_ = s_ - h; \
    const double8 e_ = ((h - (s_ - bb_)) + ((x) - bb_)) + l; \
    h = select(s_ + e_, s_, e_ == (double8)(0.0)); l = e_ - (h - s_); }
#endif

// Row class: work-item (k, chunk) sums [chunk*clen, +clen) of row k.
#if K_ROW
__kernel void gm_reduce_row_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                   __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off, int use_part,
                                   __constant const gm_rmeta* m, long n_out, long len, long clen, ulong n GM_CHK_P) {
    long k = get_global_id(0), chunk = get_global_id(1);
    if (k >= n_out) return;
    long b = (long)in_off + gm_keep_offset(m, k, 1);
#if ROW_MULTI
    // interleaved axes whose innermost reduced dimension is dense: "chunk" enumerates the outer
    // reduced index, each work-item sums one dense run, and the finalize pass adds the runs
    b += gm_run_offset(m, chunk);
    long i = 0, end = len;
#else
    long i = chunk * clen, end = min(len, i + clen);
#endif
#if WIDE_FLOAT
    // FLOAT64: gm_dd4's double-double of the values below 2^960 in two vectors of lanes (the
    // operations of GM_DD_ADD1, lane for lane); eight values with a larger, infinite or NaN one
    // among them go to the scalar accumulator instead; the lanes join it at the end
    gm_acc a;
    GM_ACC_ZERO(a);
    double8 h8 = (double8)(-0.0), l8 = (double8)(0.0), h8b = (double8)(-0.0), l8b = (double8)(0.0);
#if GM_EXACT
    // stage 3: the largest magnitude of the vectors' values as an integer max of their bits without
    // the sign (the values below 2^960 only: the others make a.bhi +inf through GM_ACC_ADD)
    long8 mb8 = (long8)(0);
#define GM_DD8_MAX(mag) { mb8 = max(mb8, mag); }
#else
#define GM_DD8_MAX(mag)
#endif
    // a value from 2^960 on, inf or NaN: its bits without the sign are at least 2^960's (one compare)
#define GM_DD8_TAKE(h, l, x, at) { const long8 mag_ = as_long8(x) & (long8)(0x7FFFFFFFFFFFFFFFL); \
    if (any(mag_ >= (long8)(0x7BF0000000000000L))) { \
        for (int j_ = 0; j_ < 8; ++j_) GM_ACC_ADD(a, GM_IN1((at) + j_)); \
    } else { GM_DD8_ADD(h, l, x) GM_DD8_MAX(mag_) } }
    const long i0 = i;
    for (; i + 16 <= end; i += 16) {
        GM_PREFETCH(in, b + i, PREFETCH); GM_PREFETCH(in, b + i + 8, PREFETCH);
        const double8 x0 = GM_IN8(b + i), x1 = GM_IN8(b + i + 8);
        GM_DD8_TAKE(h8, l8, x0, b + i)
        GM_DD8_TAKE(h8b, l8b, x1, b + i + 8)
    }
    if (i != i0) {      // lanes still (-0.0, 0.0) would leave a as it is: short rows skip 16 merges
        double hh[8], ll[8], hb[8], lb[8];
        vstore8(h8, 0, hh); vstore8(l8, 0, ll); vstore8(h8b, 0, hb); vstore8(l8b, 0, lb);
        for (int j = 0; j < 8; ++j) { GM_DD_ADD2(a.hi, a.lo, hh[j], ll[j]); GM_DD_ADD2(a.hi, a.lo, hb[j], lb[j]); }
    }
#if GM_EXACT
    mb8.lo = max(mb8.lo, mb8.hi);
    mb8.s01 = max(mb8.s01, mb8.s23);
    a.bhi = max(a.bhi, as_double(max(mb8.s0, mb8.s1)));    // +inf stays
#endif
#elif GM_SCALAR_ACC
    // element by element, four accumulators (the double-double adds are a dependent chain)
    gm_acc a, a1, a2, a3;
    GM_ACC_ZERO(a); GM_ACC_ZERO(a1); GM_ACC_ZERO(a2); GM_ACC_ZERO(a3);
    for (; i + 4 <= end; i += 4) {
        GM_PREFETCH(in, b + i, PREFETCH);
        GM_ACC_ADD(a, GM_IN1(b + i)); GM_ACC_ADD(a1, GM_IN1(b + i + 1));
        GM_ACC_ADD(a2, GM_IN1(b + i + 2)); GM_ACC_ADD(a3, GM_IN1(b + i + 3));
    }
    GM_ACC_MERGE(a, a1); GM_ACC_MERGE(a2, a3); GM_ACC_MERGE(a, a2);
#elif GM_B16
    // BFLOAT16 REDUCE AVERAGE with fp64, CPU shape (reduce_kernels.b16_rows; docs/design.md, "BFLOAT16
    // on the CPU shape with fp64"): passes of 64 values from four 16-wide loads; a load's even elements
    // widen to float by a shift, its odd ones by a mask (a bfloat16 is the top half of a float's
    // bits), each float to double exactly, added into eight vectors of double lanes, one addition per
    // lane per pass, through FMAs by an opaque 1.0 (GM_H16's: the same sums, on the other vector
    // pipes). m: the largest magnitude, from the bits (an and and a max per sixteen values). The
    // FLOAT64 sums may round: the bound test and the exact path decide, as for the other rows (the
    // bound's depth: a lane's chain of one addition per pass, the passes of sixteen after them, the
    // lanes' tree, the horizontal sum and the tail: reduce_kernels.cpu_variant).
    const long i0 = i;
    const double8 one = (double8)((double)(n != 0));    // 1.0 (n >= 1), opaque: FMAs stay FMAs
    double8 s0 = (double8)(-0.0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    ushort16 mall = (ushort16)(0);
#define GM_B16_EVEN(u) convert_double8(as_float8((u) << 16))
#define GM_B16_ODD(u) convert_double8(as_float8((u) & (uint8)(0xFFFF0000u)))
    for (; i + 64 <= end; i += 64) {
        GM_PREFETCH(in, b + i, PREFETCH); GM_PREFETCH(in, b + i + 32, PREFETCH);
        const ushort16 h0 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + i, 16));
        const ushort16 h1 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + i + 16, 16));
        const ushort16 h2 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + i + 32, 16));
        const ushort16 h3 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + i + 48, 16));
        mall = max(mall, max(max(h0 & (ushort16)(0x7FFF), h1 & (ushort16)(0x7FFF)),
                             max(h2 & (ushort16)(0x7FFF), h3 & (ushort16)(0x7FFF))));
        const uint8 u0 = as_uint8(h0), u1 = as_uint8(h1), u2 = as_uint8(h2), u3 = as_uint8(h3);
        s0 = fma(GM_B16_EVEN(u0), one, s0); s1 = fma(GM_B16_ODD(u0), one, s1);
        s2 = fma(GM_B16_EVEN(u1), one, s2); s3 = fma(GM_B16_ODD(u1), one, s3);
        s4 = fma(GM_B16_EVEN(u2), one, s4); s5 = fma(GM_B16_ODD(u2), one, s5);
        s6 = fma(GM_B16_EVEN(u3), one, s6); s7 = fma(GM_B16_ODD(u3), one, s7);
    }
    for (; i + 16 <= end; i += 16) {    // the passes of sixteen after them (at most three)
        const ushort16 h = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + i, 16));
        mall = max(mall, h & (ushort16)(0x7FFF));
        const uint8 u = as_uint8(h);
        s0 += GM_B16_EVEN(u);
        s1 += GM_B16_ODD(u);
    }
    const double8 o8 = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    gm_acc a;
    GM_ACC_ZERO(a);
    GM_ACC_ADD(a, o8.s0); GM_ACC_ADD(a, o8.s1); GM_ACC_ADD(a, o8.s2); GM_ACC_ADD(a, o8.s3);
    GM_ACC_ADD(a, o8.s4); GM_ACC_ADD(a, o8.s5); GM_ACC_ADD(a, o8.s6); GM_ACC_ADD(a, o8.s7);
#if GM_EXACT
    {   // the lane sums' magnitudes above are no larger than n m: the values' largest alone is m
        ushort8 m8 = max(mall.lo, mall.hi);
        ushort4 m4 = max(m8.lo, m8.hi);
        ushort2 m2 = max(m4.lo, m4.hi);
        a.m = (i > i0) ? (double)as_float((uint)max(m2.x, m2.y) << 16) : 0.0;
    }
#endif
#elif GM_H16
    // FLOAT16 REDUCE AVERAGE with fp64 (issue 24): the run's exact total, no largest magnitude. A
    // FLOAT64 sum of at most 2^13 halves is exact in any order (multiples of 2^-24 below 2^29), so
    // each block of GM_H16_PASSES passes is summed in four vectors of double lanes (at most
    // 4 * GM_H16_PASSES values per joined lane) and joins t8 as an integer count of 2^-24: exact
    // while the run is shorter than 2^22 values (the host's condition). o8 adds the same blocks in
    // double from -0.0, for IEEE's inf and NaN and the sign of a zero total (-0.0 only from -0.0s).
    // The partial is the total rounded once to double, and as its m |s| / (values of the run) rounded
    // up: every run's rounding and the finalize pass's additions are within the bound's
    // depth u n m (reduce_kernels.cpu_variant: depth 1 + the finalize pass's). The lanes add through
    // FMAs by an opaque 1.0 (the same sums): PoCL's conversions and adds then use different pipes.
    const long i0 = i;
    const double8 one = (double8)((double)(n != 0));    // 1.0 (n >= 1), opaque: FMAs stay FMAs
    double8 o8 = (double8)(-0.0);
    long8 t8 = (long8)(0);
    while (i + 8 <= end) {
        const long bend = i + min((long)(32 * GM_H16_PASSES), (end - i) & ~31l);
        double8 s0 = (double8)(-0.0), s1 = (double8)(-0.0), s2 = (double8)(-0.0), s3 = (double8)(-0.0);
        for (; i < bend; i += 32) {
            GM_PREFETCH(in, b + i, PREFETCH); GM_PREFETCH(in, b + i + 16, PREFETCH);
            s0 = fma(convert_double8(vload_half8(0, GM_AT(GM_A_IN, const T, in, b + i, 8))), one, s0);
            s1 = fma(convert_double8(vload_half8(0, GM_AT(GM_A_IN, const T, in, b + i + 8, 8))), one, s1);
            s2 = fma(convert_double8(vload_half8(0, GM_AT(GM_A_IN, const T, in, b + i + 16, 8))), one, s2);
            s3 = fma(convert_double8(vload_half8(0, GM_AT(GM_A_IN, const T, in, b + i + 24, 8))), one, s3);
        }
        if (bend == i && i + 32 > end)      // the last passes of eight (at most three)
            for (; i + 8 <= end; i += 8) s0 += convert_double8(vload_half8(0, GM_AT(GM_A_IN, const T, in, b + i, 8)));
        const double8 blk = (s0 + s1) + (s2 + s3);
        o8 += blk;
        t8 += convert_long8(select((double8)(0.0), blk, isfinite(blk)) * 0x1p24);
    }
    t8.lo += t8.hi; t8.s01 += t8.s23;
    long t = t8.s0 + t8.s1;
    double o = ((o8.s0 + o8.s1) + (o8.s2 + o8.s3)) + ((o8.s4 + o8.s5) + (o8.s6 + o8.s7));
    for (; i < end; ++i) {
        const double x = (double)vload_half(0, GM_AT(GM_A_IN, const T, in, b + i, 1));
        o += x;
        t += (long)(isfinite(x) ? x * 0x1p24 : 0.0);
    }
    gm_acc a;
    GM_ACC_ZERO(a);
    a.s = !isfinite(o) ? o : t != 0 ? (double)t * 0x1p-24 : o == 0.0 ? o : 0.0;
#if GM_EXACT
    a.m = (isfinite(a.s) && end > i0) ? fabs(a.s) / (double)(end - i0) * (1.0 + 0x1p-50) : 0.0;
#endif
#else
    // four independent accumulators: one add chain would be bound by the adder's latency
    ACC8 s8 = GM_Z8, c8 = (ACC8)(0), s8b = GM_Z8, c8b = (ACC8)(0);
    ACC8 s8c = GM_Z8, c8c = (ACC8)(0), s8d = GM_Z8, c8d = (ACC8)(0);
    GM_MAX8_DECL
#if HALF_BLOCKS
    // FLOAT16: each lane adds 8 halves in float (same-signed: within 7 float ulps of the block's sum,
    // 2^-21 relative, far inside a half ulp), then the block joins the wide accumulator. The
    // conversions, not the memory, bounded this loop at one half per wide add (0.66x copy -> 0.8x).
    for (; i + 64 <= end; i += 64) {
        __global const T* p = GM_AT(GM_A_IN, const T, in, b + i, 64);
        GM_PREFETCH(p, 0, PREFETCH); GM_PREFETCH(p, 32, PREFETCH);
        float8 h0 = (vload_half8(0, p) + vload_half8(0, p + 8)) + (vload_half8(0, p + 16) + vload_half8(0, p + 24));
        float8 h1 = (vload_half8(0, p + 32) + vload_half8(0, p + 40)) + (vload_half8(0, p + 48) + vload_half8(0, p + 56));
        ACC8 x8 = TO_ACC8(h0 + h1);
        ACC8_ADD(s8, c8, x8);
    }
#endif
#if GM_EXACT
    // blocks of GM_XBLOCK passes: the four accumulators start again from -0.0 after each, their sum
    // joins o8, so that no value passes through more than GM_XBLOCK + clen / (32 GM_XBLOCK) + 1
    // additions in this loop (the bound's depth, reduce_kernels.cpu_variant) instead of clen / 32
    ACC8 o8 = GM_Z8;
    int blk = 0;
#endif
    for (; i + 32 <= end; i += 32) {
        GM_PREFETCH(in, b + i, PREFETCH); GM_PREFETCH(in, b + i + 16, PREFETCH);
#if GM_EXACT
        if (blk == GM_XBLOCK) { o8 += (s8 + s8b) + (s8c + s8d); s8 = GM_Z8; s8b = GM_Z8; s8c = GM_Z8; s8d = GM_Z8; blk = 0; }
        ++blk;
        // sixteen-wide loads: one integer max per sixteen values for the bound's m
        const float16 r01 = RAW16(GM_AT(GM_A_IN, const T, in, b + i, 16));
        const float16 r23 = RAW16(GM_AT(GM_A_IN, const T, in, b + i + 16, 16));
        m16i = max(m16i, max(GM_MAG16(r01), GM_MAG16(r23)));
        X8 x0 = TO_ACC8(r01.lo), x1 = TO_ACC8(r01.hi), x2 = TO_ACC8(r23.lo), x3 = TO_ACC8(r23.hi);
#else
        X8 x0 = GM_IN8(b + i), x1 = GM_IN8(b + i + 8), x2 = GM_IN8(b + i + 16), x3 = GM_IN8(b + i + 24);
#endif
        ACC8_ADD(s8, c8, x0); ACC8_ADD(s8b, c8b, x1); ACC8_ADD(s8c, c8c, x2); ACC8_ADD(s8d, c8d, x3);
    }
    for (; i + 8 <= end; i += 8) { X8 x8 = GM_IN8M(b + i); ACC8_ADD(s8, c8, x8); }
    ACC8_JOIN(s8, c8, s8b); ACC8_JOIN(s8c, c8c, s8d); ACC8_JOIN(s8, c8, s8c);
#if GM_EXACT
    s8 += o8;
#endif
    c8 += c8b + c8c + c8d;
    gm_acc a;
    GM_ACC_ZERO(a);
    ACC8 t8 = s8;
#if WIDE_INT
    a.s = t8.s0 + t8.s1 + t8.s2 + t8.s3 + t8.s4 + t8.s5 + t8.s6 + t8.s7;
    a.c = c8.s0 + c8.s1 + c8.s2 + c8.s3 + c8.s4 + c8.s5 + c8.s6 + c8.s7;
#elif COMPENSATED
    a.c = c8.s0 + c8.s1 + c8.s2 + c8.s3 + c8.s4 + c8.s5 + c8.s6 + c8.s7;
#endif
#if !WIDE_INT
    GM_ACC_ADD(a, t8.s0); GM_ACC_ADD(a, t8.s1); GM_ACC_ADD(a, t8.s2); GM_ACC_ADD(a, t8.s3);
    GM_ACC_ADD(a, t8.s4); GM_ACC_ADD(a, t8.s5); GM_ACC_ADD(a, t8.s6); GM_ACC_ADD(a, t8.s7);
    GM_MAX8_TO(a)   // the lane sums' magnitudes above are no larger than n m: m8 alone is the bound's m
#endif
#endif
    for (; i < end; ++i) GM_ACC_ADD(a, GM_IN1(b + i));
    gm_emit(a, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, chunk, n_out GM_CHK_A);
    if (!use_part) GM_REDO_OPEN(k, k + 1);
}
#endif  // K_ROW

#if SHORT_LEN && !GM_X_D
#include "reduce_cpu_short.h"
#elif SHORT_LEN && GM_X_D
#include "reduce_cpu_short_f64.h"
#endif
#include "reduce_cpu_cols.h"

// General class: work-item (k, chunk) walks a chunk of the reduced index space with a carried
// multi-index.
#if K_GENERAL
__kernel void gm_reduce_general_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                       __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off, int use_part,
                                       __constant const gm_rmeta* m, long n_out, long len, long clen, ulong n
                                       GM_CHK_P) {
    long k = get_global_id(0), chunk = get_global_id(1);
    if (k >= n_out) return;
    long j = chunk * clen;
    gm_acc a = gm_general_sum(in, (long)in_off + gm_keep_offset(m, k, 1), m, j, min(len, j + clen) GM_CHK_A);
    gm_emit(a, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, chunk, n_out GM_CHK_A);
    if (!use_part) GM_REDO_OPEN(k, k + 1);
}
#endif  // K_GENERAL

// Second pass: a work-item per output combines its chunk partials in chunk order (deterministic).
#if K_FIN
__kernel void gm_reduce_finalize_serial(__global const gm_acc* part, ulong part_off, long n_chunks, long n_out,
                                        __global OUT_T* out, ulong out_off, __global uchar* flag, ulong flag_off,
                                        __constant const gm_rmeta* m, ulong n GM_FIN_IN GM_CHK_P) {
    long k = get_global_id(0);
    if (k >= n_out) return;
#if GM_DD_TIER && RN == 1 && !GM_FAST_ONLY && !GM_FLAG_BITS
    {   // eight outputs whose inputs are adjacent columns (a few long columns: R5): the group's first
        // work-item finalizes the eight and redoes their open ones together (gm_redo_open_cols: the
        // rows read once for the eight, not once per column); the others return. Every work-item of a
        // group decides the same.
        const long k0 = k & ~7l, w = min(8l, n_out - k0), b0 = gm_keep_offset(m, k0, 1);
        int adjacent = w > 1;
        for (long j = 1; j < w; ++j) adjacent &= gm_keep_offset(m, k0 + j, 1) == b0 + j;
        if (adjacent) {
            if (k != k0) return;
            for (long j = 0; j < w; ++j) {
                gm_acc a = GM_PART((long)part_off + k0 + j);
                for (long c = 1; c < n_chunks; ++c) { gm_acc b = GM_PART((long)part_off + c * n_out + k0 + j); GM_ACC_MERGE(a, b); }
                gm_store(a, n, out, (long)out_off + gm_keep_offset(m, k0 + j, 2), flag, (long)flag_off + k0 + j, m GM_CHK_A);
            }
            gm_redo_open_cols(in, (long)in_off + b0, m->red_in[0], out, out_off, flag, flag_off, m, k0, w, n GM_CHK_A);
            return;
        }
    }
#endif
    gm_acc a = GM_PART((long)part_off + k);
    for (long c = 1; c < n_chunks; ++c) { gm_acc b = GM_PART((long)part_off + c * n_out + k); GM_ACC_MERGE(a, b); }
    gm_store(a, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag, (long)flag_off + k, m GM_CHK_A);
    GM_REDO_OPEN(k, k + 1);
}
#endif  // K_FIN

#if GM_EXACT
// Exact partials, CPU shape: a work-item per (run, output) pair, its run deposited serially.
#if K_LIMBS
__kernel void gm_reduce_limbs_serial(__global const T* in, ulong in_off, __global long* part, ulong part_off,
                                     __constant const gm_rmeta* m, long n_out, ulong n, long n_chunks,
                                     long clen GM_CHK_P) {
    const long t = (long)get_global_id(0);
    if (t >= n_out * n_chunks) return;
    const long c = t / n_out, k = t - c * n_out;
    gm_xacc x;
    GM_XINIT(&x);
    gm_limbs_range(&x, in, (long)in_off + gm_keep_offset(m, k, 1), m, min((long)n, c * clen),
                   min((long)n, (c + 1) * clen), 1 GM_CHK_A);
    gm_limbs_write(&x, part, (long)part_off + t * (GM_XK + 1) GM_CHK_A);
}
#endif  // K_LIMBS
#endif
