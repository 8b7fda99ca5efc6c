// The element-wise family's shared part, included by elementwise_gpu.cl and elementwise_cpu.cl:
// the arithmetic (written once for scalars and OpenCL vectors), the n-ary mean's exact path and
// the iteration space's metadata (gm_dims). The family's macros: elementwise_gpu.cl's comment.

#define GM_INPUT_AT(type, k, i, w) GM_AT(k, type, GM_IN_BASE(ins, k), GM_IN_OFF(ins, k) + (i), w)
#define GM_IN(ins, k) (GM_IN_BASE(ins, k) + GM_IN_OFF(ins, k))

// ---- the arithmetic, for a scalar or an OpenCL vector of type V ----------------------------------
// MEAN: floats round once: fl(a+b)*0.5 is exact scaling unless the sum overflows, and then both
// halves are exact (inf or NaN operands give the same inf or NaN either way; one compare, because
// isinf/isfinite cost PoCL 17 % of bandwidth). FLOAT16 in float32 cannot overflow. Integers sum in
// 64 bits and C division truncates toward zero. ADD: integers wrap (the host truncates through the
// unsigned type). IDENTITY: a bit copy, or x*scale+bias rounded twice.
// select on a scalar wants a condition as wide as the operands (a long for a double): the GPU
// shape's scalars take the conditional expression, which is what select means on a scalar
#if GM_CPU_SHAPE
#define GM_SELECT(a, b, c) select(a, b, c)
#else
#define GM_SELECT(a, b, c) ((c) ? (b) : (a))
#endif
#if OP == 1 && IS_FLOAT && WIDE_COMPUTE
#define GM_COMBINE(a, b, V) (((a) + (b)) * (V)(0.5f))
#elif OP == 1 && IS_BF16
// BFLOAT16 in float: halving a widened bfloat16 is exact (8 significant bits, multiples of 2^-134 at
// worst, far above float's 2^-149), so a/2 + b/2 is (a + b) / 2 rounded once to float, the same bits
// as the form below where a + b is finite, and it never overflows: three operations instead of
// eight. Rounded again to bfloat16 on the store, that is the correctly rounded mean: a float sum of
// two bfloat16 values rounds only when they lie more than 15 binades apart, and then the float
// result is within 2^-15 of the larger half, never on a bfloat16 midpoint (2^-9 of it at least).
#define GM_COMBINE(a, b, V) ((a) * (V)(0.5f) + (b) * (V)(0.5f))
#elif OP == 1 && IS_FLOAT
#define GM_COMBINE(a, b, V) GM_SELECT((a) * (V)(0.5f) + (b) * (V)(0.5f), ((a) + (b)) * (V)(0.5f), \
                                   isless(fabs((a) + (b)), (V)(INFINITY)))
#elif OP == 1 && WIDE_INT
// INT64 / UINT64: floor((a + b) / 2) without forming a + b, then toward zero where the sum is odd
// and negative (a relational is 1 on a scalar, -1 on a vector lane: either way & 1 is the bit)
#define GM_HALF_SUM(a, b) (((a) >> 1) + ((b) >> 1) + ((a) & (b) & 1))
#if IS_SIGNED
#define GM_COMBINE(a, b, V) (GM_HALF_SUM(a, b) + ((GM_HALF_SUM(a, b) < 0) & ((a) ^ (b)) & 1))
#else
#define GM_COMBINE(a, b, V) GM_HALF_SUM(a, b)
#endif
#elif OP == 1
#define GM_COMBINE(a, b, V) (((a) + (b)) / (V)(2))
#elif OP == 2
#define GM_COMBINE(a, b, V) ((a) + (b))
#elif OP == 3 && HAS_SCALE_BIAS
#define GM_COMBINE(a, b, V) ((a) * (V)(scale) + (V)(bias))
#else
#define GM_COMBINE(a, b, V) (a)
#endif

// NARY_MEAN: a wide sum, one division, one rounding. Without fp64, a Neumaier-compensated float sum.
// INT64 / UINT64 accumulate as the reductions do (common.h): the sums of the high and the low 32-bit
// halves (NARY_WIDE 1). The float types' n-ary mean is correctly rounded (NARY_CR, below).
#if OP == 4 && NARY_WIDE == 1
#define GM_ACC_INIT(acc, c) { (acc) = 0; (c) = 0; }
#define GM_ACC_ADD(acc, c, x, V) GM_WIDE_ADD(acc, c, x)
#define GM_ACC_RESULT(acc, c, V) gm_wide_div(acc, c, NIN, IS_SIGNED)
#elif IS_FLOAT && !ACC_DOUBLE
#define GM_ACC_ADD(acc, c, x, V) { V t_ = (acc) + (x); \
    (c) += select(((x) - t_) + (acc), ((acc) - t_) + (x), isgreaterequal(fabs(acc), fabs(x))); (acc) = t_; }
#define GM_ACC_RESULT(acc, c, V) (select((acc) + (c), (acc), isinf(acc)) / (V)(NIN))
#else
#define GM_ACC_ADD(acc, c, x, V) { (acc) += (x); (void)(c); }
#define GM_ACC_RESULT(acc, c, V) ((acc) / (V)(NIN))
#endif
#ifndef GM_ACC_INIT     // from -0.0: a zero total is -0.0 only when every input is (IEEE's sum)
#define GM_ACC_INIT(acc, c) { (acc) = IS_FLOAT ? -0.0 : 0; (c) = 0; }
#endif
#ifndef NARY_CR
#define NARY_CR 0
#endif

// The float n-ary mean, correctly rounded (issue 22; docs/design.md, "Correct rounding"):
//   FLOAT16 with fp64 (NARY_CR 0): the FLOAT64 sum of 64 halves is exact, its quotient is correctly
//     rounded, and rounding that once more to half is innocuous (a half midpoint and the quotient's
//     grid of 2^-25 / n are too far apart for a double rounding to land on one): nothing to add.
//   FLOAT32 and BFLOAT16 with fp64 (NARY_CR 1): the FLOAT64 sum S' of the k inputs, and the largest
//     and smallest nonzero magnitudes' bits (M, m0; exponents E_M, E_m0). All inputs are multiples of
//     g = ulp(m0) = 2^(E_m0 - p + 1) and every partial sum, in any order, is below k M <= 2^(E_M + 1 + c),
//     c = ceil(log2 k); so when E_M - E_m0 <= J = 53 - p - c (NARY_EXP_OK: (J + 1) << 23, compared with
//     the bits) every partial sum is representable and S' is the exact total S. Then q = S / k rounded
//     once (IEEE) and rounded again to the format is the correctly rounded mean, ties included: a
//     double rounding errs only where q is a midpoint mid of the format and S / k is not, so that
//     |S / k - mid| <= 2^-53 |mid| < 2^(E_mid - 52); but S - k mid is a multiple of
//     min(g, 2^(E_mid - p)), and a nonzero one puts S / k at least 2^(E_mid - 52) from mid
//     (E_mid <= E_M, and p + c <= 52). Elements whose exponents lie further apart take the exact path
//     (gm_nary_exact: exact.h's superaccumulator, every input read again). An inf or NaN total is IEEE's.
//   FLOAT16 and BFLOAT16 in the CPU shape, and both without fp64 (NARY_CR 4): the same test for
//     the FLOAT32 sum (P = 24: NARY_EXP_OK from 24 - p - c), and the quotient by k without OpenCL's
//     float division, which may be 2.5 ulp off: q = S y, y = 1/k rounded to nearest (GM_RCP), then
//     twice q += (S - k q) y by fma (the remainder is exact once q is faithful; Markstein: the second
//     step rounds correctly). Then rounding q to the format is the one rounding, by the argument above
//     (p + c <= 23). An infinite or NaN input, a FLOAT32 sum past FLT_MAX (BFLOAT16 shares FLOAT32's
//     range) and inputs below 2^-100 (the quotient near FLOAT32's subnormals, where Markstein's step
//     is not proven) take the exact path. A zero S is its own mean (its sign kept).
//   FLOAT32 without fp64 (NARY_CR 2): the exact path for every element.
//   FLOAT64 (NARY_CR 5): no wider format, so the sum is h and c, the sum of every addition's error,
//     both by TwoSum (GM_DD_STEP); where no addition of an error rounded, S = h + c exactly and the
//     rounding of S / k is decided exactly (gm_nary_round_f64, below). Sums past 2^1000, below
//     2^-960 (but zero), inf, NaN and a rounded errors' sum take the exact path (gm_xacc_d).
// NARY_FMT: 1 FLOAT32, 2 BFLOAT16, 3 FLOAT16, 4 FLOAT64 (the exact path's accumulator and rounding).
#if OP == 4 && NARY_CR
#if NARY_FMT == 4
#define GM_XACC gm_xacc_d
#define GM_XACC_INIT(a) gm_xacc_d_init(a)
#define GM_XACC_ADD_P(a, p) gm_xacc_d_add(a, *(p))
#define GM_XACC_MEAN_TS(a) as_double(gm_xacc_d_mean(a, NIN))
#define GM_TS_TO_FLOAT(b) (b)
#elif NARY_FMT == 3
#define GM_XACC gm_xacc_h
#define GM_XACC_INIT(a) gm_xacc_h_init(a)
#define GM_XACC_ADD_P(a, p) gm_xacc_h_add(a, *(__global const ushort*)(p))
#define GM_XACC_MEAN_TS(a) gm_xacc_h_mean(a, NIN)          // the half's bits
#define GM_TS_TO_FLOAT(b) gm_half_to_float(b)
#elif NARY_FMT == 2
#define GM_XACC gm_xacc_f
#define GM_XACC_INIT(a) gm_xacc_f_init(a)
#define GM_XACC_ADD_P(a, p) gm_xacc_f_add_bf16(a, *(p))
#define GM_XACC_MEAN_TS(a) gm_xacc_f_mean_bf16(a, NIN)     // the bfloat16's bits
#define GM_TS_TO_FLOAT(b) gm_bf16_to_float(b)
#define GM_X_FLOAT_P(p) gm_bf16_to_float(*(p))
#define GM_NARROW1(q) gm_bf16_to_float(gm_double_to_bf16(q))
#define GM_ODD1(f) ((gm_as_uint(f) >> 16) & 1u)
#else
#define GM_XACC gm_xacc_f
#define GM_XACC_INIT(a) gm_xacc_f_init(a)
#define GM_XACC_ADD_P(a, p) gm_xacc_f_add(a, *(p))
#define GM_XACC_MEAN_TS(a) gm_as_float(gm_xacc_f_mean(a, NIN))
#define GM_TS_TO_FLOAT(b) (b)
#define GM_X_FLOAT_P(p) (*(p))
#define GM_NARROW1(q) ((float)(q))
#define GM_ODD1(f) (gm_as_uint(f) & 1u)
#endif
#if NARY_CR == 1 || NARY_CR == 5
// one addition of x to the sum h_ by TwoSum, its error added to c_ by TwoSum: bad_ is set where that
// second addition rounded (then h_ + c_ is no longer the exact sum)
#define GM_DD_STEP(h_, c_, bad_, x) { const double x_ = (x), t_ = (h_) + x_, bb_ = t_ - (h_); \
    const double e_ = ((h_) - (t_ - bb_)) + (x_ - bb_), u_ = (c_) + e_, cc_ = u_ - (c_); \
    bad_ |= (((c_) - (u_ - cc_)) + (e_ - cc_)) != 0.0; h_ = t_; c_ = u_; }
#endif
#if NARY_CR == 5
// FLOAT64: S / k rounded correctly from the exact S = h + c (no wider format). (H, L) = h + c
// normalized; q0 = H y (y = 1/k rounded: no division), then q1 = q0 + (S - k q0) y, within half an
// ulp and a hair of S / k, so the answer is q1 or its neighbour n1 towards S / k. Both are decided by
// signs computed exactly: t = (H - k q1) with k q1 as the exact pair (p, fma's error) is a small
// multiple of ulp(q1) / 4 (H - p by Sterbenz, the rest a few bits), so t and t - k (n1 - q1) / 2 are
// exact and adding L last gives the true sign of S - k q1 and of S - k mid (mid the midpoint between
// q1 and n1): beyond mid n1, on it the even one (ties to even), else q1. The argument needs
// 2^-960 <= |H| < 2^1000 (no product or half-ulp underflows or overflows): elsewhere, and where the
// errors' sum rounded (bad) or the sum is inf or NaN, *open asks for the exact path. A zero S is
// -0.0 only when every input is (h is then -0.0: a nonzero partial sum cancelled to zero gives +0.0).
GM_INLINE double gm_nary_round_f64(double h, double c, int bad, int* open) {
    const double H = h + c, bb = H - h, L = (h - (H - bb)) + (c - bb);
    const double y = GM_RCP, n = (double)NIN;
    const double q0 = H * y, p0 = n * q0, e0 = fma(n, q0, -p0);
    const double q1 = fma(((H - p0) - e0) + L, y, q0);
    const double p1 = n * q1, e1 = fma(n, q1, -p1), t = (H - p1) - e1, w = t + L;
    const ulong b = as_ulong(q1);
    const double n1 = as_double((w > 0.0) == (q1 > 0.0) ? b + 1UL : b - 1UL);
    const double v = (t - n * (n1 - q1) * 0.5) + L;
    const int up = (w > 0.0 ? v > 0.0 : v < 0.0) || (v == 0.0 && (b & 1UL));
    const double a = fabs(H);
    *open = bad || !(a < 0x1p1000) || (a < 0x1p-960 && H != 0.0);
    return H == 0.0 ? (h == 0.0 ? h : 0.0) : (w != 0.0 && up) ? n1 : q1;
}
#endif
#if NARY_CR == 1
// whether the FLOAT64 sum proves the rounding (above), or is inf or NaN (IEEE's answer already)
GM_INLINE int gm_nary_certain(double acc, uint mx, uint mn) {
    return !isfinite(acc) || mx < ((mn + 1u) & 0x7F800000u) + (uint)NARY_EXP_OK;
}
// The exact path's first step: the FLOAT64 sum h again, and c the sum of every addition's error
// (TwoSum), itself by TwoSum; where no addition of an error rounded (+-largest values that cancel
// beside small ones; exponents far apart but few bits), S = h + c exactly. Then the rounding of
// S / k is decided exactly: (H, L) = h + c normalized, q = H / k rounded, its ends q -+ |q| 2^-50
// rounded to the format (lo, hi: equal, or the neighbours around the one midpoint m between them),
// and the sign of S - k m (k m exact: at most 33 bits) as (H - k m) + L: H - k m is exact where H
// and k m lie within a factor 2 (Sterbenz), and elsewhere outweighs |L| <= 2^-53 |H|; so lo, hi, or
// on a tie the even one. Only where an error's addition rounded does the superaccumulator (tens of
// 64-bit divisions) run. A zero c leaves h as it is (the sign of a zero total).
GM_INLINE float gm_nary_round_exact(double h, double c) {
    const double H = c == 0.0 ? h : h + c, bb = H - h, L = c == 0.0 ? 0.0 : (h - (H - bb)) + (c - bb);
    const double q = H / (double)NIN;
    const double pad = fabs(q) * 0x1p-50;
    const float lo = GM_NARROW1(q - pad), hi = GM_NARROW1(q + pad);
    const double km = ((double)lo + (double)hi) * (0.5 * NIN);
    const double d = (H - km) + L;
    return (d > 0.0 || (d == 0.0 && GM_ODD1(lo))) ? hi : lo;
}
#endif
#if NARY_CR == 4
// whether the FLOAT32 sum is exact and its quotient proven (above); m0 the smallest nonzero magnitude's
// bits minus one (all ones when every input is zero)
GM_INLINE int gm_nary_certain4(float acc, uint mx, uint mn) {
    return mx < ((mn + 1u) & 0x7F800000u) + (uint)NARY_EXP_OK && mx < 0x7F800000u
           && (NARY_FMT != 2 || (!isinf(acc) && mn >= (27u << 23) - 1u));
}
// S / k rounded correctly to FLOAT32 for an exact S (Markstein), a zero S as it is
GM_INLINE float gm_nary_quotient4(float acc) {
    const float y = GM_RCP, n = (float)NIN;
    float q = acc * y;
    q = fma(fma(-q, n, acc), y, q);
    q = fma(fma(-q, n, acc), y, q);
    return acc == 0.0f ? acc : q;
}
#endif
#endif
// an input element as the accumulator takes it (the wide accumulators split the value themselves)
#if NARY_WIDE
#define GM_TO_ACC(x) TO_CT(x)
#else
#define GM_TO_ACC(x) ((ACC_T)TO_CT(x))
#endif

// The iteration space's sizes, magic divisors and every operand's strides (inputs..., then the
// output), in elements: by value on CUDA, a constant buffer on OpenCL (elementwise_kernels.py: dims_struct).
typedef struct {
    IDX size[NDIM];
    uint magic[NDIM];   // IDX32: q = (mul_hi(n, magic) + n) >> shift == n / size (n < 2^31)
    uint shift[NDIM];
    ST stride[NIN + 1][NDIM];
} gm_dims;
GM_STATIC_ASSERT(sizeof(gm_dims) == DIMS_BYTES, gm_dims_differs_from_the_host_layout);
