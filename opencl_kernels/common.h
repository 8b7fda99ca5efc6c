// What every kernel file shares, for both APIs (it follows the API's dialect header): the accessor
// every global load and store goes through, and the bounds-checked build (GM_CHECKED = 1).
//
// A kernel addresses global memory as (argument, element index): GM_AT(arg, type, p, i, w) is the
// address of elements [i, i + w) of pointer p (to ``type``), which belongs to kernel argument ``arg`` (each family numbers
// its arguments: reduce.cl GM_A_IN/OUT/PART, elementwise.cl input k = k, the output NIN). Functions
// that touch global memory take GM_CHK_P last and are called with GM_CHK_A last.
//
// Unchecked (GM_CHECKED 0, every production build): GM_AT(...) is p + i, nothing else.
// Checked: every kernel takes one more argument, the status buffer gm_chk (longs, laid out below; the
// host fills the bounds before a launch and reads the status after it:
// gpu_mean/kernels/checked.py). GM_AT tests lo <= i and i + w <= hi against the argument's bounds
// (element indices, as the kernel indexes that pointer); a violation records the first one (argument,
// index, width, bounds, work-item) and counts them, and the access goes to a sink inside gm_chk
// instead, so that a checked kernel never reads or writes outside its bindings itself. The checked
// build also reverses the local ids within each work-group: PoCL runs a group's work-items one after
// another in id order, so a missing barrier whose reader reads a lower id passes there unless the
// order is reversed. The warp shuffle is off in a checked build (lanes are logical ids then).

#ifndef GM_CHECKED
#define GM_CHECKED 0
#endif

#if GM_CHECKED
// gm_chk layout, in longs: [0] two ints: the first-violation flag and the violation count;
// [1] argument, [2] index, [3] width, [4] lo, [5] hi, [6] global id 0, [7] global id 1 of the first
// violation; [8, 11) the trace mode's counter, capacity and region (GM_TRACE, below); [GM_CHK_SINK,
// GM_CHK_BOUNDS) the sink; [GM_CHK_BOUNDS + 2a], [GM_CHK_BOUNDS + 2a + 1] lo and hi of argument a.
#define GM_CHK_SINK 16
#define GM_CHK_BOUNDS 48
#define GM_CHK_P , __global long* gm_chk
#define GM_CHK_A , gm_chk

// the reversed local ids (global ids follow them; every launch has a zero global offset)
GM_INLINE size_t gm_reversed_local_id(uint d) { return get_local_size(d) - 1 - get_local_id(d); }
GM_INLINE size_t gm_reversed_global_id(uint d) { return get_group_id(d) * get_local_size(d) + gm_reversed_local_id(d); }
#undef get_local_id
#undef get_global_id
#define get_local_id(d) gm_reversed_local_id(d)
#define get_global_id(d) gm_reversed_global_id(d)
#undef GM_WARP_SHUFFLE
#define GM_WARP_SHUFFLE 0

GM_INLINE int gm_in_bounds(__global long* gm_chk, int arg, long i, long w) {
    const long lo = gm_chk[GM_CHK_BOUNDS + 2 * arg], hi = gm_chk[GM_CHK_BOUNDS + 2 * arg + 1];
    if (i >= lo && i <= hi - w) return 1;
    if (atomic_cmpxchg((volatile __global int*)gm_chk, 0, 1) == 0) {
        gm_chk[1] = arg; gm_chk[2] = i; gm_chk[3] = w; gm_chk[4] = lo; gm_chk[5] = hi;
        gm_chk[6] = (long)get_global_id(0); gm_chk[7] = (long)get_global_id(1);
    }
    atomic_inc((volatile __global int*)gm_chk + 1);
    return 0;
}
#define GM_AT_CHECKED(arg, type, p, i, w) \
    (gm_in_bounds(gm_chk, (arg), (long)(i), (long)(w)) ? (p) + (i) : (__global type*)(gm_chk + GM_CHK_SINK))
#ifndef GM_TRACE
#define GM_TRACE 0
#endif
#if GM_TRACE
// The trace mode of the checked build (the access model, gpu_mean/checks/access_model.py; never in a
// production build, OpenCL only): GM_AT also appends a record of 4 longs per access to the trace
// region of gm_chk. [8] the records claimed (an int; past the capacity they are counted, not kept),
// [9] the capacity in records, [10] the region's first word. A record: the element index; the site
// (__LINE__ << 32 | (__COUNTER__ & 0xFFFF) << 16 | argument); the width << 32 | the element size << 16
// | 1 where the pointer type is const (a load for sure); the work-group's linear id << 16 | the
// work-item's linear local id (the reversed ids the kernel sees, i.e. CUDA's threadIdx).
#define GM_CHK_TRACE 8
GM_INLINE void gm_trace(__global long* gm_chk, long site, long i, long w, long size_const) {
    const long slot = (long)atomic_inc((volatile __global int*)(gm_chk + GM_CHK_TRACE));
    if (slot >= gm_chk[GM_CHK_TRACE + 1]) return;
    __global long* r = gm_chk + gm_chk[GM_CHK_TRACE + 2] + 4 * slot;
    const long lid = (long)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));
    const long grp = (long)(get_group_id(0) + get_num_groups(0) * (get_group_id(1) + get_num_groups(1) * get_group_id(2)));
    r[0] = i;
    r[1] = site;
    r[2] = (w << 32) | size_const;
    r[3] = (grp << 16) | lid;
}
#define GM_AT(arg, type, p, i, w) \
    (gm_trace(gm_chk, ((long)__LINE__ << 32) | ((long)(__COUNTER__ & 0xFFFF) << 16) | (long)(arg), (long)(i), (long)(w), \
              ((long)sizeof(type) << 16) | (long)__builtin_types_compatible_p(__global type*, __global const type*)), \
     GM_AT_CHECKED(arg, type, p, i, w))
#else
#define GM_AT(arg, type, p, i, w) GM_AT_CHECKED(arg, type, p, i, w)
#endif
#else
#define GM_CHK_P
#define GM_CHK_A
#define GM_AT(arg, type, p, i, w) ((p) + (i))
#endif

// ---- storage conversions and wide arithmetic shared by both families -----------------------------

// BFLOAT16 is storage only: its bits in a ushort, widened exactly to float (the top half of a float's
// bits) and narrowed with one rounding to nearest even; a NaN stays a quiet NaN of the same sign
// (gpu_mean/runtime/wide.py: f32_to_bf16, the CPU device's rounding).
GM_INLINE float gm_bf16_to_float(ushort h) { return as_float((uint)h << 16); }
GM_INLINE ushort gm_float_to_bf16(float x) {
    const uint b = as_uint(x);
    return isnan(x) ? (ushort)((b >> 16) | 0x40u) : (ushort)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

#if GM_CPU_SHAPE
// The CPU shapes' BFLOAT16 vectors: N lanes rounded as gm_float_to_bf16 (GM_BF16_VEC; eight for the
// reductions' results, sixteen for elementwise.cl's stores), or without the NaN test where every
// lane is known finite (GM_BF16_VEC_FINITE: three vector operations fewer), and stores through a
// vector type with the element's alignment (PoCL scalarizes a vstore8 / vstore16 of ushorts into
// eight or sixteen 2-byte stores: the element-wise mean at 0.73x FLOAT16's bytes per second)
#define GM_BF16_VEC(N) \
GM_INLINE ushort##N gm_float##N##_to_bf16(float##N v) { \
    const uint##N b = as_uint##N(v); \
    return convert_ushort##N(select((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16, (b >> 16) | 0x40u, isnan(v))); \
}
#define GM_BF16_VEC_FINITE(N) \
GM_INLINE ushort##N gm_float##N##_to_bf16_finite(float##N v) { \
    const uint##N b = as_uint##N(v); \
    return convert_ushort##N((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16); \
}
GM_BF16_VEC(8)
typedef ushort8 __attribute__((aligned(2))) gm_ushort8_a2;
typedef ushort16 __attribute__((aligned(2))) gm_ushort16_a2;
#define GM_VSTORE_BF16(N, v, p) (*(__global gm_ushort##N##_a2*)(p) = (v))
// BFLOAT16 vector loads through the same element-aligned type: PoCL splits a vload8 / vload16 of
// ushorts into 4-byte inserts (the row reduction at 0.6x FLOAT16's bytes per second)
#define GM_VLOAD_BF16(N, p) (*(__global const gm_ushort##N##_a2*)(p))
#endif

#if USE_FP64
// a double's exponent field, in bits 20-30 (the high word's): what the span proofs compare (the
// GPU shape's reduce_gpu_span.h and reduce_gpu_short.h), read from the bits and never through a
// conversion to float, which a device flushing float subnormals (OpenCL's CL_FP_DENORM is
// optional) would make zero for a subnormal value: the proof would then hold a span it does not have
#define GM_E64(x) (((uint)(as_ulong((double)(x)) >> 32)) & 0x7ff00000u)

// double -> float rounded to odd (rounded toward zero, the last bit set where inexact): a float that
// keeps at least two more bits than the narrow type, so that the narrow type's rounding to nearest
// is still the only rounding (half: 13 bits more, bfloat16: 16; Boldo and Melquiond).
GM_INLINE float gm_float_odd(double x) {
    const float f = (float)x;
    const double b = (double)f;
    uint u = as_uint(f);
    if (fabs(b) > fabs(x)) u -= 1;     // rounded away from zero: one ulp back (inf -> FLT_MAX)
    if (b != x) u |= 1;                // inexact (or NaN): the sticky last bit
    return as_float(u);
}
#if !GM_CUDA
// PoCL converts a double to half in software, lane by lane (about 20x slower than from float)
GM_INLINE ushort gm_double_to_half(double x) { ushort h; vstore_half_rte(gm_float_odd(x), 0, (__private half*)&h); return h; }
#endif
GM_INLINE ushort gm_double_to_bf16(double x) { return gm_float_to_bf16(gm_float_odd(x)); }
#endif

// INT64 / UINT64 totals as A * 2^32 + B with A = the sum of the values' high 32-bit halves (arithmetic
// shift for INT64) and B = the sum of their low halves: no carries, and neither word wraps for the
// 2^32 - 1 elements a tensor holds. Both are kept in ulong (A wraps as two's complement; its true
// value fits a long). The quotient by n < 2^32 is long division in 32-bit digits, truncated toward
// zero, INT64_MIN's magnitude 2^63 included (gpu_mean/runtime/wide.py: int_sum0, trunc_div128).
#define GM_WIDE_ADD(a, b, x) { (a) += (ulong)((x) >> 32); (b) += (ulong)(x) & 0xFFFFFFFFUL; }
GM_INLINE ulong gm_wide_div(ulong a, ulong b, ulong n, int is_signed) {
    a += b >> 32;
    b &= 0xFFFFFFFFUL;
    // without branches (PoCL: the INT64 n-ary mean about 2x faster than with them): neg is all ones
    // where the total is negative; its magnitude is -(a 2^32 + b) = (-a - [b > 0]) 2^32 + (2^32 - b)
    // mod 2^32
    const ulong neg = is_signed ? (ulong)((long)a >> 63) : 0;
    const ulong borrow = neg & (ulong)(b != 0);
    a = (a ^ neg) + (neg & 1) - borrow;
    b ^= (b ^ ((0x100000000UL - b) & 0xFFFFFFFFUL)) & neg;
    const ulong q1 = a / n, r1 = a - q1 * n;
    const ulong q = (q1 << 32) + (((r1 << 32) | b) / n);
    return (q ^ neg) + (neg & 1);
}

#if USE_FP64
// FLOAT64 sums as double-doubles. TwoSum (exact error of an addition), and FastTwoSum written so that a
// zero addend leaves the first operand as it is: a zero total is then -0.0 exactly when IEEE's sum
// of the inputs is (every input -0.0), as on the CPU device.
#define GM_TWO_SUM(s, e, a, b) { const double a2_ = (a), b2_ = (b); s = a2_ + b2_; \
    const double bb_ = s - a2_; e = (a2_ - (s - bb_)) + (b2_ - bb_); }
#define GM_FAST_TWO_SUM(s, e, a, b) { const double a1_ = (a), b1_ = (b); s = b1_ == 0 ? a1_ : a1_ + b1_; \
    e = b1_ - (s - a1_); }
// (ah, al) += x: TwoSum, then renormalized (the n-ary mean's Dekker form)
#define GM_DD_ADD1(ah, al, x) { double s3_, e3_; GM_TWO_SUM(s3_, e3_, ah, x); \
    GM_FAST_TWO_SUM(ah, al, s3_, e3_ + (al)); }
// (ah, al) += (bh, bl): AccurateDWPlusDW (Joldes, Muller and Popescu), relative error below 3 * 2^-106
#define GM_DD_ADD2(ah, al, bh, bl) { double s4_, t4_, u4_, v4_; GM_TWO_SUM(s4_, t4_, ah, bh); \
    GM_TWO_SUM(u4_, v4_, al, bl); GM_FAST_TWO_SUM(s4_, t4_, s4_, t4_ + u4_); GM_FAST_TWO_SUM(ah, al, s4_, t4_ + v4_); }

// (h + l) / n rounded once (n < 2^53): q = h / n, then the remainder h + l - q n, exact through fma
GM_INLINE double gm_dd_div(double h, double l, ulong n) {
    const double nd = (double)n;
    const double q = h / nd;
    const double p = q * nd;
    const double pe = fma(q, nd, -p);
    const double r = (((h - p) - pe) + l) / nd;
    return r == 0 ? q : q + r;
}
#endif

#if USE_FP64
// The FLOAT64 accumulator of the reductions and the n-ary mean: values below 2^960 in magnitude in the
// double-double (hi, lo); the others times 2^-64 (exact) in (bhi, blo). Neither sum can pass DBL_MAX
// for the 2^32 elements a tensor holds, so a total past DBL_MAX comes out as the CPU device's scaled
// recompute does. inf and NaN land in bhi, which keeps IEEE's sum of them: NaN if a NaN or both
// infinities are present, else the infinity, whatever the order. Both sums start at -0.0, so a zero
// total is -0.0 only when every input is.
typedef struct { double hi, lo, bhi, blo; } gm_dd4;
#define GM_DD4_ZERO(a) { (a).hi = -0.0; (a).lo = 0.0; (a).bhi = -0.0; (a).blo = 0.0; }
GM_INLINE void gm_dd4_big(gm_dd4* a, double x) {
    const double y = x * 0x1p-64;
    const double s = a->bhi + y;
    if (isfinite(s)) GM_DD_ADD1(a->bhi, a->blo, y)
    else { a->bhi = s; a->blo = 0.0; }
}
#define GM_DD4_ADD(a, x) { const double x4_ = (x); \
    if (fabs(x4_) < 0x1p960) GM_DD_ADD1((a).hi, (a).lo, x4_) else gm_dd4_big(&(a), x4_); }
GM_INLINE void gm_dd4_merge(gm_dd4* a, gm_dd4 b) {
    GM_DD_ADD2(a->hi, a->lo, b.hi, b.lo);
    const double s = a->bhi + b.bhi;
    if (isfinite(s)) GM_DD_ADD2(a->bhi, a->blo, b.bhi, b.blo)
    else { a->bhi = s; a->blo = 0.0; }
}
// the total (hi + lo, or (bhi + blo) * 2^64 + hi + lo) divided once by n and rounded once
GM_INLINE double gm_dd4_mean(gm_dd4 a, ulong n) {
    if (!isfinite(a.bhi)) return isnan(a.bhi) ? as_double(0x7FF8000000000000UL) : a.bhi;
    if (a.bhi == 0) return gm_dd_div(a.hi + a.bhi, a.lo, n);    // + bhi: +0.0 once a big value cancelled
    double h = a.bhi, l = a.blo;
    GM_DD_ADD2(h, l, a.hi * 0x1p-64, a.lo * 0x1p-64);
    return gm_dd_div(h, l, n) * 0x1p64;     // a mean is no larger than the largest input: no overflow
}
#endif

#ifndef GM_BF16_NOFP64
#define GM_BF16_NOFP64 0
#endif
#if GM_BF16_NOFP64
// BFLOAT16 sums on a device without fp64: two Neumaier-compensated float pairs, values below 2^90 in
// magnitude in (s, c), the others times 2^-64 (exact) in (bs, bc), so that neither sum can overflow
// for 2^32 elements (two bfloat16 maxima overflow a float sum); inf and NaN land in bs, which keeps
// IEEE's sum of them. The mean is rounded to odd at float's 24 bits through integer arithmetic, so
// that the rounding to bfloat16 is the only one (a float quotient would round twice: the mean
// 1 + 2^-8 + 2^-26 is 1 + 2^-7 rounded once, 1.0 rounded twice); below 2^-126 (float subnormals)
// at float's subnormal grid, still 16 bits finer than bfloat16's.
typedef struct { float s, c, bs, bc; } gm_ff4;
#define GM_FF4_ZERO(a) { (a).s = 0.0f; (a).c = 0.0f; (a).bs = 0.0f; (a).bc = 0.0f; }
#define GM_FF_ADD(s, c, x) { const float x6_ = (x), t6_ = (s) + x6_; \
    (c) += fabs(s) >= fabs(x6_) ? ((s) - t6_) + x6_ : (x6_ - t6_) + (s); (s) = t6_; }
#define GM_FF4_ADD(a, x) { const float x7_ = (x); \
    if (fabs(x7_) < 0x1p90f) GM_FF_ADD((a).s, (a).c, x7_) else GM_FF_ADD((a).bs, (a).bc, x7_ * 0x1p-64f) }
GM_INLINE void gm_ff4_merge(gm_ff4* a, gm_ff4 b) {
    GM_FF_ADD(a->s, a->c, b.s);
    a->c += b.c;
    GM_FF_ADD(a->bs, a->bc, b.bs);
    a->bc += b.bc;
}
// (S + C) / n rounded to odd at 24 bits; S + C normalized (|C| <= ulp(S) / 2), finite, n >= 1
GM_INLINE float gm_ff_div_odd(float S, float C, ulong n) {
    if (S == 0.0f) return S / (float)n;
    const int neg = S < 0.0f;
    if (neg) { S = -S; C = -C; }
    int es;
    (void)frexp(S, &es);                    // S = f 2^es, 1/2 <= f < 1
    const int k = 62 - es;                  // S 2^k: an integer below 2^62 (24 significant bits)
    const ulong ms = (ulong)ldexp(S, k);
    const float cs = ldexp(C, k);           // |cs| <= 2^38
    const float cf = floor(cs);
    int sticky = cs != cf || (C != 0.0f && cs == 0.0f);
    const ulong m = ms + (ulong)(long)cf;   // floor((S + C) 2^k)
    const ulong q = m / n;
    sticky |= (m - q * n) != 0;
    const int sh = 40 - (int)clz(q);        // q >= 2^29: keep its top 24 bits (sh >= 6)
    ulong mant = q >> sh;
    sticky |= (q & ((1UL << sh) - 1)) != 0;
    int e = sh - k;                         // the weight of mant's last bit
    if (e < -149) {
        // below float's normal range the last bit would be finer than float's subnormal grid, and
        // ldexp would round to nearest there (a second rounding: a mean just above a bfloat16
        // midpoint lands on it and ties to even): round to odd at 2^-149 instead, which keeps 16
        // bits below bfloat16's subnormal grid 2^-133
        const int d = min(-149 - e, 25);    // 25: every bit of the 24-bit mant goes to the sticky bit
        sticky |= (mant & ((1UL << d) - 1)) != 0;
        mant >>= d;
        e = -149;
    }
    const float r = ldexp((float)(mant | (ulong)sticky), e);     // exact: a multiple of 2^-149
    return neg ? -r : r;
}
// the mean of the accumulated values, rounded to odd at float's precision (gm_float_to_bf16 rounds it)
GM_INLINE float gm_ff4_mean(gm_ff4 a, ulong n) {
    if (!isfinite(a.bs)) return isnan(a.bs) ? as_float(0x7FC00000u) : a.bs;
    float S = a.s, C = a.c, sc = 1.0f;
    if (a.bs != 0.0f) {     // (bs + bc) 2^64 + s + c, scaled by 2^-64
        S = a.bs; C = a.bc;
        GM_FF_ADD(S, C, a.s * 0x1p-64f);
        C += a.c * 0x1p-64f;
        sc = 0x1p64f;
    }
    const float t = S + C;                  // normalized: FastTwoSum
    C = C - (t - S);
    return gm_ff_div_odd(t, C, n) * sc;
}
#endif
