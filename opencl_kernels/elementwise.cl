// Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean (gm.ext): one source for OpenCL and
// CUDA (cuda_kernels/dialect.h maps it; docs/design.md, "Kernels").
//
// Two kernel shapes, chosen by the host per device kind (gpu_mean/backends/elementwise_kernels.py):
//   GPU-shaped (gm_ew_contig_vec/_scalar, gm_ew_rows_vec/_scalar, gm_ew_strided): grid-stride loops,
//     adjacent work-items on adjacent elements, 16-byte vectors where every pointer allows; run by
//     CUDA and OpenCL GPUs (and by opencl:0-gpupaths on PoCL) with gpu_geometry's launches.
//   CPU-shaped (*_serial, GM_CPU_SHAPE = 1: OpenCL CPU devices): each work-item a long run of
//     OpenCL vectors (4 lanes; 16 for FLOAT16), software prefetch.
// The arithmetic (GM_COMBINE, GM_ACC_*) is written once below, for scalars and OpenCL vectors alike.
//
// Macros (elementwise_kernels.py builds them from a plan):
//   OP           1 MEAN, 2 ADD, 3 IDENTITY, 4 NARY_MEAN;  NIN number of inputs
//   CT           compute scalar type;  ACC_T the n-ary sum's type (double, float, or CT for integers)
//   IS_FLOAT, WIDE_COMPUTE (FLOAT16 computed in float32), ACC_DOUBLE (n-ary float sums in fp64),
//   IS_BF16 (BFLOAT16 storage), WIDE_INT + IS_SIGNED (the INT64 / UINT64 mean), NARY_WIDE (the
//   n-ary mean's two-word accumulator: 1 INT64 / UINT64),
//   HAS_SCALE_BIAS, NDIM (rank of the coalesced iteration space), DIMS_BYTES (sizeof(gm_dims) on the host)
//   IDX, ST      index and stride types of gm_dims (uint when every offset fits: IDX32, magic division)
//   inputs (a seam each API fills its own way): GM_INPUT_PARAMS (the parameter list, after a comma),
//     GM_INPUTS_BIND (a statement that makes ``ins``), GM_INPUTS_PARAM (the type of ``ins`` in helper
//     functions), GM_IN_BASE(ins, k) and GM_IN_OFF(ins, k) (input k's buffer start and its binding's
//     element offset; or the binding's first element and 0), GM_LAST_IN (NIN - 1 as one number)
//   GPU shape: TS storage scalar (ushort for FLOAT16 and BFLOAT16: the bits), VEC = 16 / sizeof(TS),
//     TO_CT(x), FROM_CT(x), FROM_ACC(x): storage <-> compute (round to nearest even)
//   CPU shape: T (half for FLOAT16, ushort for BFLOAT16), VW lanes, CTV / ACCV vector types, TO_ACCV(v), LOADV(p), STOREV(v, p),
//     LOAD1(p), STORE1(s, p), VLOADV(o, p), UNROLL, RUN, RUN_ROWS, PREFETCH (bytes ahead), PF_LINE,
//     FOREACH_INPUT(X)
// Contraction is off (opencl_kernels/dialect.h; CUDA: --fmad=false), so that x*scale+bias rounds
// twice, as the CPU device does.
// Every global access goes through GM_AT (opencl_kernels/common.h): argument k < NIN is input k,
// indexed from GM_IN_BASE(ins, k) (GM_INPUT_AT: the offset GM_IN_OFF(ins, k) included); argument NIN
// is the output, indexed from the output buffer's start (out_off included).
#include "common.h"
#include "exact.h"
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

// The float n-ary mean, correctly rounded (issue 22; docs/design.md, "Correct rounding (issue 22)"):
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

#if !GM_CPU_SHAPE
// ---- GPU-shaped kernels ------------------------------------------------------------------------

typedef struct __attribute__((aligned(16))) { TS v[VEC]; } gm_vec;   // one 16-byte access
#if GM_CHECKED     // the input seam's structs: buffer starts and offsets apart (a checked build)
typedef struct { ulong p[NIN]; ulong off[NIN]; } gm_inputs;                     // CUDA, by value
typedef struct { __global const TS* p[NIN]; ulong off[NIN]; } gm_cl_inputs;     // OpenCL, private
#else
typedef struct { ulong p[NIN]; } gm_inputs;     // CUDA's input seam: the pointers by value
#endif
typedef struct { TS v[1]; } gm_one;

GM_INLINE IDX gm_idiv(IDX n, __constant const gm_dims* s, int d) {
#if IDX32
    return (mul_hi(n, s->magic[d]) + n) >> s->shift[d];
#else
    return n / s->size[d];
#endif
}

// The multi-index of flat position i over dims [0, last), innermost last; the outermost index is
// what is left, so it takes no division.
GM_INLINE void gm_unflatten(IDX i, __constant const gm_dims* s, IDX* idx, int last) {
#pragma unroll
    for (int d = last - 1; d > 0; --d) {
        IDX q = gm_idiv(i, s, d);
        idx[d] = i - q * s->size[d];
        i = q;
    }
    if (last > 0) idx[0] = i;
}

// Operand k's element offset of multi-index idx over dims [0, last) (0 when last is 0: contiguous).
GM_INLINE IDX gm_offset(__constant const gm_dims* s, int k, const IDX* idx, int last) {
    IDX off = 0;
#pragma unroll
    for (int d = 0; d < last; ++d) off += idx[d] * (IDX)s->stride[k][d];
    return off;
}

// W elements of every input from operand offset(k) + e, combined and stored to the output's. The
// n-ary mean walks the inputs in the outer loop with W accumulators, so that one input's vector is
// live at a time whatever NIN is (loading all inputs first spilled at NIN = 64 on CUDA).
#if OP == 4 && NARY_CR
// the exact path of one element: every input read again into the superaccumulator
GM_INLINE TS gm_nary_exact(GM_INPUTS_PARAM ins, __constant const gm_dims* s, const IDX* idx, int last,
                           ulong e GM_CHK_P) {
#if NARY_CR == 1
    double sum = -0.0, err = -0.0;
    int inexact = 0;
    for (int k = 0; k < NIN; ++k)
        GM_DD_STEP(sum, err, inexact, (double)GM_X_FLOAT_P(GM_INPUT_AT(const TS, k, gm_offset(s, k, idx, last) + e, 1)))
    if (!inexact) return FROM_CT(gm_nary_round_exact(sum, err));
#endif
    GM_XACC a;
    GM_XACC_INIT(&a);
    for (int k = 0; k < NIN; ++k) GM_XACC_ADD_P(&a, GM_INPUT_AT(const TS, k, gm_offset(s, k, idx, last) + e, 1));
    return GM_XACC_MEAN_TS(&a);
}
#endif
#if OP == 4 && (NARY_CR == 1 || NARY_CR == 4 || NARY_CR == 5)
// Store the W results r, the lanes whose fast sum the test leaves open (need) from the exact path.
// The output may be bound over an input (in place: the same element of both), and the exact path
// reads a lane's inputs again, so no lane of the output is written before its inputs are read for
// the last time: when a lane is open, the decided lanes are stored one by one (r is then dead and
// the exact path has the registers r held), then each open lane is computed and stored. The first
// loop unrolls, so r's lanes are indexed by constants (a lane array indexed by a loop counter would
// go to the stack on CUDA); the second indexes no array and stays a loop (one copy of the exact path).
#define GM_STORE_LANES(VT, r, need, W) \
    if (!need) { \
        *(__global VT*)GM_AT(NIN, TS, out, o, W) = r; \
    } else { \
        _Pragma("unroll") \
        for (int j = 0; j < W; ++j) \
            if (!((need >> j) & 1u)) *GM_AT(NIN, TS, out, o + j, 1) = r.v[j]; \
        for (uint j = 0, m = need; m; ++j, m >>= 1) \
            if (m & 1u) *GM_AT(NIN, TS, out, o + j, 1) = gm_nary_exact(ins, s, idx, last, e + j GM_CHK_A); \
    }
#endif
#if OP == 4 && (NARY_CR == 1 || NARY_CR == 4)
// the fast sum in the wide type (FLOAT64, or FLOAT32 for NARY_CR 4), the quotient and the test
#if NARY_CR == 1
#define GM_NACC double
#define GM_NQUOT(a) FROM_ACC((a) / (double)NIN)
#define GM_NCERTAIN gm_nary_certain
#else
#define GM_NACC float
#define GM_NQUOT(a) FROM_CT(gm_nary_quotient4(a))
#define GM_NCERTAIN gm_nary_certain4
#endif
#define GM_APPLY_BODY(VT, W) \
    GM_NACC acc[W]; uint mx[W], mn[W]; \
    for (int j = 0; j < W; ++j) { acc[j] = (GM_NACC)(-0.0f); mx[j] = 0u; mn[j] = 0xFFFFFFFFu; } \
    _Pragma("unroll 4") \
    for (int k = 0; k < NIN; ++k) { \
        VT x = *(__global const VT*)GM_INPUT_AT(const TS, k, gm_offset(s, k, idx, last) + e, W); \
        for (int j = 0; j < W; ++j) { \
            const float xf = TO_CT(x.v[j]); \
            const uint b = gm_as_uint(xf) & 0x7FFFFFFFu; \
            acc[j] += (GM_NACC)xf; mx[j] = max(mx[j], b); mn[j] = min(mn[j], b - 1u); \
        } \
    } \
    VT r; uint need = 0u; \
    _Pragma("unroll") \
    for (int j = 0; j < W; ++j) { \
        r.v[j] = GM_NQUOT(acc[j]); \
        need |= GM_NCERTAIN(acc[j], mx[j], mn[j]) ? 0u : 1u << j; \
    } \
    GM_STORE_LANES(VT, r, need, W)
#elif OP == 4 && NARY_CR == 5
// FLOAT64: the TwoSum pair per lane and the exact decision (gm_nary_round_f64); open lanes exactly
#define GM_APPLY_BODY(VT, W) \
    double h[W], c[W]; int bad[W]; \
    for (int j = 0; j < W; ++j) { h[j] = -0.0; c[j] = -0.0; bad[j] = 0; } \
    _Pragma("unroll 4") \
    for (int k = 0; k < NIN; ++k) { \
        VT x = *(__global const VT*)GM_INPUT_AT(const TS, k, gm_offset(s, k, idx, last) + e, W); \
        for (int j = 0; j < W; ++j) GM_DD_STEP(h[j], c[j], bad[j], x.v[j]) \
    } \
    VT r; uint need = 0u; \
    _Pragma("unroll") \
    for (int j = 0; j < W; ++j) { \
        int open_; \
        r.v[j] = gm_nary_round_f64(h[j], c[j], bad[j], &open_); \
        need |= open_ ? 1u << j : 0u; \
    } \
    GM_STORE_LANES(VT, r, need, W)
#elif OP == 4 && NARY_CR
#define GM_APPLY_BODY(VT, W) \
    VT r; \
    for (int j = 0; j < W; ++j) r.v[j] = gm_nary_exact(ins, s, idx, last, e + j GM_CHK_A); \
    *(__global VT*)GM_AT(NIN, TS, out, o, W) = r;
#elif OP == 4
#define GM_APPLY_BODY(VT, W) \
    ACC_T acc[W], cmp[W]; \
    for (int j = 0; j < W; ++j) GM_ACC_INIT(acc[j], cmp[j]); \
    _Pragma("unroll 4") \
    for (int k = 0; k < NIN; ++k) { \
        VT x = *(__global const VT*)GM_INPUT_AT(const TS, k, gm_offset(s, k, idx, last) + e, W); \
        for (int j = 0; j < W; ++j) GM_ACC_ADD(acc[j], cmp[j], GM_TO_ACC(x.v[j]), ACC_T); \
    } \
    VT r; \
    for (int j = 0; j < W; ++j) r.v[j] = FROM_ACC(GM_ACC_RESULT(acc[j], cmp[j], ACC_T)); \
    *(__global VT*)GM_AT(NIN, TS, out, o, W) = r;
#else
#if NIN > 1     // MEAN, ADD: the second operand is the last input
#define GM_LOAD_SECOND(VT, W) \
    VT b = *(__global const VT*)GM_INPUT_AT(const TS, GM_LAST_IN, gm_offset(s, GM_LAST_IN, idx, last) + e, W);
#define GM_SECOND(j, x) TO_CT(b.v[j])
#else           // IDENTITY: one operand
#define GM_LOAD_SECOND(VT, W)
#define GM_SECOND(j, x) (x)
#endif
#define GM_APPLY_BODY(VT, W) \
    VT a = *(__global const VT*)GM_INPUT_AT(const TS, 0, gm_offset(s, 0, idx, last) + e, W); \
    GM_LOAD_SECOND(VT, W) \
    VT r; \
    for (int j = 0; j < W; ++j) { \
        CT x_ = TO_CT(a.v[j]); \
        r.v[j] = FROM_CT(GM_COMBINE(x_, GM_SECOND(j, x_), CT)); \
    } \
    *(__global VT*)GM_AT(NIN, TS, out, o, W) = r;
#endif

GM_INLINE void gm_apply_vec(GM_INPUTS_PARAM ins, __constant const gm_dims* s, const IDX* idx, int last, ulong e,
                            __global TS* out, ulong out_off, float scale, float bias GM_CHK_P) {
    const ulong o = out_off + gm_offset(s, NIN, idx, last) + e;
    GM_APPLY_BODY(gm_vec, VEC)
}

GM_INLINE void gm_apply_one(GM_INPUTS_PARAM ins, __constant const gm_dims* s, const IDX* idx, int last, ulong e,
                            __global TS* out, ulong out_off, float scale, float bias GM_CHK_P) {
    const ulong o = out_off + gm_offset(s, NIN, idx, last) + e;
    GM_APPLY_BODY(gm_one, 1)
}

// Every operand dense: work-item t moves elements [w*i, w*i + w) for i = t, t + step, ...; w = VEC
// needs every pointer 16-byte aligned (the host checks). The last n % w elements go one by one.
GM_INLINE void gm_contig(GM_INPUTS_PARAM ins, int w, __global TS* out, ulong out_off, ulong n, float scale,
                         float bias GM_CHK_P) {
    const ulong nv = n / w, step = get_global_size(0), t = get_global_id(0);
    for (ulong i = t; i < nv; i += step) {
        if (w == VEC) gm_apply_vec(ins, 0, 0, 0, i * VEC, out, out_off, scale, bias GM_CHK_A);
        else gm_apply_one(ins, 0, 0, 0, i, out, out_off, scale, bias GM_CHK_A);
    }
    for (ulong i = nv * w + t; i < n; i += step) gm_apply_one(ins, 0, 0, 0, i, out, out_off, scale, bias GM_CHK_A);
}

__kernel void gm_ew_contig_vec(__global TS* restrict out, ulong out_off, ulong n, float scale,
                               float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_INPUTS_BIND
    gm_contig(ins, VEC, out, out_off, n, scale, bias GM_CHK_A);
}

__kernel void gm_ew_contig_scalar(__global TS* restrict out, ulong out_off, ulong n, float scale,
                                  float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_INPUTS_BIND
    gm_contig(ins, 1, out, out_off, n, scale, bias GM_CHK_A);
}

// General strides: one element per work-item, grid-stride.
__kernel void gm_ew_strided(__global TS* restrict out, ulong out_off, ulong n, GM_META_ARG(gm_dims, s),
                            float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_META_BIND(gm_dims, s)
    GM_INPUTS_BIND
    const IDX step = (IDX)get_global_size(0);
    for (IDX i = (IDX)get_global_id(0); i < (IDX)n; i += step) {
        IDX idx[NDIM];
        gm_unflatten(i, s, idx, NDIM);
        gm_apply_one(ins, s, idx, NDIM, 0, out, out_off, scale, bias GM_CHK_A);
    }
}

// Every operand's innermost dimension dense (broadcast and padded layouts usually are): x walks
// w-element pieces of a row (coalesced; 16-byte vectors when w = VEC, which needs every base pointer
// 16-byte aligned and every outer stride a multiple of VEC), y walks rows; a row's start costs
// NDIM-2 divisions once per row, not per element.
GM_INLINE void gm_rows(GM_INPUTS_PARAM ins, int w, __global TS* out, ulong out_off, ulong n_rows,
                       __constant const gm_dims* s, float scale, float bias GM_CHK_P) {
    const IDX inner = s->size[NDIM - 1], nfull = inner / w;
    const IDX pieces = nfull + inner % w;   // full vectors, then the tail one by one
    const IDX xstep = (IDX)get_global_size(0), ystep = (IDX)get_global_size(1);
    for (IDX row = (IDX)get_global_id(1); row < (IDX)n_rows; row += ystep) {
        IDX idx[NDIM];
        gm_unflatten(row, s, idx, NDIM - 1);
        for (IDX v = (IDX)get_global_id(0); v < pieces; v += xstep) {
            if (v < nfull && w == VEC) {
                gm_apply_vec(ins, s, idx, NDIM - 1, (ulong)v * VEC, out, out_off, scale, bias GM_CHK_A);
            } else {
                gm_apply_one(ins, s, idx, NDIM - 1, v < nfull ? v : nfull * w + (v - nfull), out, out_off, scale,
                             bias GM_CHK_A);
            }
        }
    }
}

__kernel void gm_ew_rows_vec(__global TS* restrict out, ulong out_off, ulong n_rows, GM_META_ARG(gm_dims, s),
                             float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_META_BIND(gm_dims, s)
    GM_INPUTS_BIND
    gm_rows(ins, VEC, out, out_off, n_rows, s, scale, bias GM_CHK_A);
}

__kernel void gm_ew_rows_scalar(__global TS* restrict out, ulong out_off, ulong n_rows, GM_META_ARG(gm_dims, s),
                                float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_META_BIND(gm_dims, s)
    GM_INPUTS_BIND
    gm_rows(ins, 1, out, out_off, n_rows, s, scale, bias GM_CHK_A);
}

#else
// ---- CPU-shaped kernels (OpenCL CPU devices) -----------------------------------------------------

#if IS_BF16
// BFLOAT16 stores of a vector (common.h: GM_BF16_VEC): each lane rounded once to nearest even, NaN kept
GM_BF16_VEC(16)
// The n-ary mean's vector stores (NARY_CR 4, elementwise_kernels.cpu_macros) round without the NaN
// test (GM_BF16_VEC_FINITE): a lane that the exactness test passes (GM_COMPUTE below) has finite
// inputs and a sum below 2^128 (GM_NARY_OVF), so a finite quotient; every other lane is stored again
// by the fixing pass, with the exact path's bfloat16 widened to float (low 16 bits zero), which the
// rounding add leaves as it is (0x7FFF + 1 carries nothing).
GM_BF16_VEC_FINITE(16)
#endif

#define GM_CAT(a, b) a##b
#define GM_XCAT(a, b) GM_CAT(a, b)
#if OP == 4 && NARY_WIDE
// INT64 / UINT64: the halves' sums in vectors (common.h: GM_WIDE_ADD), the division lane by lane
#define GM_ULONGV GM_XCAT(ulong, VW)
#define GM_ADD_INPUT(k) { const CTV x_ = LOADV_AT(k); \
    hs_ += GM_XCAT(as_ulong, VW)(x_ >> 32); ls_ += GM_XCAT(as_ulong, VW)(x_) & 0xFFFFFFFFUL; }
#define GM_COMPUTE(res) { GM_ULONGV hs_ = (GM_ULONGV)(0), ls_ = (GM_ULONGV)(0); FOREACH_INPUT(GM_ADD_INPUT) \
    ulong h_[VW], l_[VW]; CT r_[VW]; GM_XCAT(vstore, VW)(hs_, 0, h_); GM_XCAT(vstore, VW)(ls_, 0, l_); \
    for (int j_ = 0; j_ < VW; ++j_) r_[j_] = (CT)gm_wide_div(h_[j_], l_[j_], NIN, IS_SIGNED); \
    res = VLOADV(0, r_); }
#define RESV CTV
#elif OP == 4 && NARY_CR
// the exact path of lane l_ (GM_NL lanes: VW, or 1 in the scalar loops): its inputs read again
#define GM_XLOAD(k) xv_[k] = ELEM_AT(k, l_);
#define GM_EXACT_LANE(out_) { __global const T* xv_[NIN]; FOREACH_INPUT(GM_XLOAD) \
    GM_XACC xa_; GM_XACC_INIT(&xa_); for (int k_ = 0; k_ < NIN; ++k_) GM_XACC_ADD_P(&xa_, xv_[k_]); \
    out_ = GM_TS_TO_FLOAT(GM_XACC_MEAN_TS(&xa_)); }
#define GM_INTV GM_XCAT(int, VW)
#define GM_UINTV GM_XCAT(uint, VW)
#define GM_CVT_INT(v) GM_XCAT(convert_int, VW)(v)
// TwoSum of x into (h, c) in vectors of type V, the error's own TwoSum into c, and bad set in the
// lanes where that second addition rounded (MASK: the comparison's conversion to bad's type, or
// nothing): the chain of NARY_CR 1's fix-up (FLOAT64 sums of floats) and of NARY_CR 5 (FLOAT64)
#define GM_TS2(V, h, c, x, bad, MASK) { const V x_ = (x), t_ = (h) + x_, bb_ = t_ - (h); \
    const V e_ = ((h) - (t_ - bb_)) + (x_ - bb_), u_ = (c) + e_, cc_ = u_ - (c); \
    bad |= MASK(isnotequal(((c) - (u_ - cc_)) + (e_ - cc_), (V)(0.0))); h = t_; c = u_; }
#if NARY_CR == 1
// the FLOAT64 sum and the magnitudes' bits (gm_nary_certain, lane for lane), the quotient rounded
// once to the format; the lanes whose sum may be inexact take the exact path. A data-dependent branch
// in the hot loop costs PoCL about a third of the kernel's speed even when it is never taken, so the
// vector loops (GM_FIXING 0) only note a lane to redo (redo_), and a second loop over the same
// elements (GM_FIXING 1, run only when one was noted) redoes those lanes; the scalar loops fix
// theirs at once
#define GM_ADD_INPUT(k) { const CTV xf_ = LOADV_AT(k); acc += TO_ACCV(xf_); \
    const GM_UINTV b_ = GM_XCAT(as_uint, VW)(xf_) & 0x7FFFFFFFu; mx_ = max(mx_, b_); mn_ = min(mn_, b_ - 1u); }
#define GM_COMPUTE(res) { ACCV acc = (ACCV)(-0.0); GM_UINTV mx_ = (GM_UINTV)(0u), mn_ = (GM_UINTV)(0xFFFFFFFFu); \
    FOREACH_INPUT(GM_ADD_INPUT) \
    res = GM_NARROWV(acc / (ACCV)((double)NIN)); \
    const GM_UINTV thr_ = ((mn_ + 1u) & 0x7F800000u) + (GM_UINTV)((uint)NARY_EXP_OK); \
    const GM_INTV need_ = GM_CVT_INT(isfinite(acc)) & (mx_ >= thr_); \
    if (GM_FIXING) { \
        if (any(need_)) { \
            ACCV s2_ = (ACCV)(-0.0), c2_ = (ACCV)(-0.0); GM_INTV bad_ = (GM_INTV)(0); \
            FOREACH_INPUT(GM_TS_INPUT) \
            const GM_LONGV cz_ = isequal(c2_, (ACCV)(0.0)); \
            const ACCV h_ = select(s2_ + c2_, s2_, cz_), hb_ = h_ - s2_; \
            const ACCV l_ = select((s2_ - (h_ - hb_)) + (c2_ - hb_), (ACCV)(0.0), cz_); \
            const ACCV q_ = h_ / (ACCV)((double)NIN), pad_ = fabs(q_) * (ACCV)(0x1p-50); \
            const CTV lo_ = GM_NARROWV(q_ - pad_), hi_ = GM_NARROWV(q_ + pad_); \
            const ACCV km_ = (TO_ACCV(lo_) + TO_ACCV(hi_)) * (ACCV)(0.5 * NIN), d_ = (h_ - km_) + l_; \
            const GM_INTV up_ = GM_CVT_INT(isgreater(d_, (ACCV)(0.0))) | \
                                (GM_CVT_INT(isequal(d_, (ACCV)(0.0))) & -GM_ODDV(lo_)); \
            res = select(res, select(lo_, hi_, up_), need_); \
            bad_ &= need_; \
            if (any(bad_)) { CT rl_[VW]; int nd_[VW]; \
                GM_XCAT(vstore, VW)(res, 0, rl_); GM_XCAT(vstore, VW)(bad_, 0, nd_); \
                for (int l_ = 0; l_ < GM_NL; ++l_) if (nd_[l_]) GM_EXACT_LANE(rl_[l_]) \
                res = VLOADV(0, rl_); } } \
    } else { \
        redo_ |= need_; \
    } }
// the fix-up's TwoSum pass, lane for lane as gm_nary_round_exact's (above)
#define GM_LONGV GM_XCAT(long, VW)
#define GM_TS_INPUT(k) GM_TS2(ACCV, s2_, c2_, TO_ACCV(LOADV_AT(k)), bad_, GM_CVT_INT)
#define GM_REDO_DECL GM_INTV redo_ = (GM_INTV)(0);
#elif NARY_CR == 4
// FLOAT16 and BFLOAT16 in the CPU shape, and both without fp64: the FLOAT32 sum, gm_nary_certain4's test and
// gm_nary_quotient4's quotient (above) in vectors; the lanes the test leaves open take the fix-up
// (below).
// the quotient acc / NIN as gm_nary_quotient4 forms it (a zero sum is its own quotient: its sign)
#define GM_QUOT4(res, acc) { const CTV y_ = (CTV)(GM_RCP), n_ = (CTV)((float)NIN); \
    CTV q_ = (acc) * y_; \
    q_ = fma(fma(-q_, n_, (acc)), y_, q_); \
    q_ = fma(fma(-q_, n_, (acc)), y_, q_); \
    res = select(q_, (acc), (acc) == (CTV)(0.0f)); }
#define GM_ADD_INPUT(k) { const CTV xf_ = LOADV_AT(k); acc += xf_; \
    const GM_UINTV b_ = GM_XCAT(as_uint, VW)(xf_) & 0x7FFFFFFFu; mx_ = max(mx_, b_); mn_ = min(mn_, b_ - 1u); }
#define GM_COMPUTE(res) { CTV acc = (CTV)(-0.0f); GM_UINTV mx_ = (GM_UINTV)(0u), mn_ = (GM_UINTV)(0xFFFFFFFFu); \
    FOREACH_INPUT(GM_ADD_INPUT) \
    GM_QUOT4(res, acc) \
    const GM_UINTV thr_ = ((mn_ + 1u) & 0x7F800000u) + (GM_UINTV)((uint)NARY_EXP_OK); \
    const GM_INTV need_ = (mx_ >= thr_) | (mx_ >= (GM_UINTV)(0x7F800000u)) GM_NEED_BF16; \
    if (GM_FIXING) { \
        if (any(need_)) GM_F16_FIX(res, need_) \
    } else { \
        redo_ |= need_; \
    } }
#if NARY_FMT == 2     // BFLOAT16's range is FLOAT32's (halves can neither overflow nor be so small)
// BFLOAT16: the same test on the inputs' 16 bits (GM_USHORTV lanes: half the vector width of the
// float bits'; a float's bits are the bfloat16's times 2^16, so every compare below is the 32-bit
// one's, and the thresholds are theirs shifted right by 16, multiples of 2^23 all), plus two:
// a sum that may pass FLT_MAX, which a largest input of exponent 128 - c or more may give
// (GM_NARY_OVF, its bits' lower bound; c = ceil(log2 k); it covers inf and NaN too, so it joins the
// exponent test as one minimum): below it every partial sum is under k 2^(128 - c) <= 2^128, which
// sums with 24 significant bits cannot reach, so no isinf(acc) test (test_bfloat16_nary_sums_past_flt_max);
// and inputs below 2^-100 (above).
#define GM_USHORTV GM_XCAT(ushort, VW)
#undef GM_ADD_INPUT
#undef GM_COMPUTE
#define GM_ADD_INPUT(k) { const CTV xf_ = LOADV_AT(k); acc += xf_; \
    const GM_USHORTV b_ = GM_XCAT(convert_ushort, VW)(GM_XCAT(as_uint, VW)(xf_) >> 16) & (GM_USHORTV)(0x7FFF); \
    mx_ = max(mx_, b_); mn_ = min(mn_, b_ - (GM_USHORTV)(1)); }
#define GM_COMPUTE(res) { CTV acc = (CTV)(-0.0f); GM_USHORTV mx_ = (GM_USHORTV)(0), mn_ = (GM_USHORTV)(0xFFFF); \
    FOREACH_INPUT(GM_ADD_INPUT) \
    GM_QUOT4(res, acc) \
    const GM_USHORTV thr_ = min(((mn_ + (GM_USHORTV)(1)) & (GM_USHORTV)(0x7F80)) + (GM_USHORTV)(NARY_EXP_OK >> 16), \
                                (GM_USHORTV)(GM_NARY_OVF >> 16)); \
    const GM_INTV need_ = GM_CVT_INT((mx_ >= thr_) | (mn_ < (GM_USHORTV)((27u << 7) - 1u))); \
    if (GM_FIXING) { \
        if (any(need_)) GM_F16_FIX(res, need_) \
    } else { \
        redo_ |= need_; \
    } }
#else
#define GM_NEED_BF16
#endif
#if USE_FP64 && NARY_FMT != 2   // (BFLOAT16 with fp64: its FLOAT64 sum may be inexact, the lanes below)
// with fp64 the fix-up is the FLOAT64 sum (exact for 64 halves), divided once and rounded to float
// to odd (GM_ODD_FLOAT), which the half store rounds once more: the one rounding to half
#define GM_D_INPUT(k) d_ += convert_double16(LOADV_AT(k));
#define GM_F16_FIX(res, need_) { double16 d_ = (double16)(-0.0); FOREACH_INPUT(GM_D_INPUT) \
    res = select(res, GM_ODD_FLOAT(d_ / (double16)((double)NIN)), need_); }
#else
#define GM_F16_FIX(res, need_) { CT rl_[VW]; int nd_[VW]; \
    GM_XCAT(vstore, VW)(res, 0, rl_); GM_XCAT(vstore, VW)(need_, 0, nd_); \
    for (int l_ = 0; l_ < GM_NL; ++l_) if (nd_[l_]) GM_EXACT_LANE(rl_[l_]) \
    res = VLOADV(0, rl_); }
#endif
#define GM_REDO_DECL GM_INTV redo_ = (GM_INTV)(0);
#elif NARY_CR == 5
// FLOAT64: gm_nary_round_f64 (above) lane for lane in vectors; the open lanes as NARY_CR 1's
#define GM_LONGV GM_XCAT(long, VW)
#define GM_DD_INPUT(k) GM_TS2(CTV, h_, c_, LOADV_AT(k), bad_, )
#define GM_COMPUTE(res) { CTV h_ = (CTV)(-0.0), c_ = (CTV)(-0.0); GM_LONGV bad_ = (GM_LONGV)(0); \
    FOREACH_INPUT(GM_DD_INPUT) \
    const CTV H_ = h_ + c_, hb_ = H_ - h_, L_ = (h_ - (H_ - hb_)) + (c_ - hb_); \
    const CTV y_ = (CTV)(GM_RCP), n_ = (CTV)((double)NIN); \
    const CTV q0_ = H_ * y_, p0_ = n_ * q0_, e0_ = fma(n_, q0_, -p0_); \
    const CTV q1_ = fma(((H_ - p0_) - e0_) + L_, y_, q0_); \
    const CTV p1_ = n_ * q1_, e1_ = fma(n_, q1_, -p1_), t_ = (H_ - p1_) - e1_, w_ = t_ + L_; \
    const GM_LONGV b_ = GM_XCAT(as_long, VW)(q1_); \
    const CTV n1_ = GM_XCAT(as_double, VW)(b_ + select((GM_LONGV)(-1), (GM_LONGV)(1), \
                                                       isgreater(w_, (CTV)(0.0)) == isgreater(q1_, (CTV)(0.0)))); \
    const CTV v_ = (t_ - n_ * (n1_ - q1_) * (CTV)(0.5)) + L_; \
    const GM_LONGV up_ = select(isless(v_, (CTV)(0.0)), isgreater(v_, (CTV)(0.0)), isgreater(w_, (CTV)(0.0))) \
                         | (isequal(v_, (CTV)(0.0)) & -(b_ & 1L)); \
    const GM_LONGV z_ = isequal(H_, (CTV)(0.0)); \
    res = select(q1_, n1_, up_ & isnotequal(w_, (CTV)(0.0))); \
    res = select(res, select((CTV)(0.0), h_, isequal(h_, (CTV)(0.0))), z_); \
    const CTV a_ = fabs(H_); \
    const GM_LONGV need_ = bad_ | ~isless(a_, (CTV)(0x1p1000)) | (isless(a_, (CTV)(0x1p-960)) & ~z_); \
    if (GM_FIXING) { \
        if (any(need_)) { CT rl_[VW]; long nd_[VW]; \
            GM_XCAT(vstore, VW)(res, 0, rl_); GM_XCAT(vstore, VW)(need_, 0, nd_); \
            for (int l_ = 0; l_ < GM_NL; ++l_) if (nd_[l_]) GM_EXACT_LANE(rl_[l_]) \
            res = VLOADV(0, rl_); } \
    } else { \
        redo_ |= need_; \
    } }
#define GM_REDO_DECL GM_LONGV redo_ = (GM_LONGV)(0);
#else
#define GM_COMPUTE(res) { CT rl_[VW]; for (int l_ = 0; l_ < GM_NL; ++l_) GM_EXACT_LANE(rl_[l_]) \
    for (int l_ = GM_NL; l_ < VW; ++l_) rl_[l_] = rl_[0]; res = VLOADV(0, rl_); }
#endif
#define RESV CTV
#elif OP == 4
#define GM_ADD_INPUT(k) { ACCV x_ = TO_ACCV(LOADV_AT(k)); GM_ACC_ADD(acc, comp, x_, ACCV) }
#define GM_COMPUTE(res) { ACCV acc = (ACCV)(-0.0); ACCV comp = (ACCV)(0); FOREACH_INPUT(GM_ADD_INPUT) \
    res = GM_ACC_RESULT(acc, comp, ACCV); }
#define RESV ACCV
#else
#define GM_COMPUTE(res) { CTV a_ = LOADV_AT(0), b_ = LOADV_AT(GM_LAST_IN); \
    res = GM_COMBINE(a_, b_, CTV); }
#define RESV CTV
#endif

#ifndef GM_REDO_DECL
#define GM_REDO_DECL
#endif
#define GM_REDO (OP == 4 && (NARY_CR == 1 || NARY_CR == 4 || NARY_CR == 5))     // the vector loops' second pass (above)

#if PREFETCH
// every input PREFETCH bytes ahead of element ``at``, once per 64-byte line of elements (PF_LINE
// elements); the host turns it on where the lines ahead are read next
#define GM_PF_INPUT(k) __builtin_prefetch((__global const char*)(GM_IN(ins, k) + GM_PF_POS(k)) + PREFETCH);
#define GM_PREFETCH_INPUTS(at) if (((at) % PF_LINE) == 0) { FOREACH_INPUT(GM_PF_INPUT) }
#else
#define GM_PREFETCH_INPUTS(at)
#endif

// In place: the vector loops' second pass (GM_REDO) reads the inputs again after the first pass
// stored its results, which is wrong when the output is bound over an input. The host launches the
// *_inplace_serial kernels then (programs.ElementwiseProgram: an output range over an input's), whose vector
// loops decide their open lanes at once (fix_now: the data-dependent branch PoCL runs slower, for
// in-place executes only); a lane's output then overwrites only that lane's inputs, after their last
// read. The kernels call one inline body with fix_now a constant, so each is compiled for its case.

// Streaming stores (STOREV_NT(v, p), GM_NT_T: elementwise_kernels.cpu_variant, for outputs of at least
// OpenCLTuning.nt_store_min_bytes whose vector stores are plain vstores): the *_nt_serial kernels store
// the vector loops' results with non-temporal stores, which skip the read of each output line that
// an ordinary store's write-allocate costs (2 inputs and 1 output: 4 transfers become 3; measured on
// PoCL, 256 MB arrays: 1.33x). The host launches them only where every operand's address is 16-byte
// aligned (the vector launch's rule), and the stores go through a type of that alignment, so the
// compiler never assumes more. The streaming stores are weakly ordered (x86): the runtime's
// completion of a launch is a locked instruction, which orders them before it; besides, the last
// work-item of each work-group ends with a store fence (a fence per work-item cost the contiguous
// kernel four fifths of its speed on PoCL: one per 256 bytes; per work-group, one per 64 KB).
#ifdef STOREV_NT
typedef GM_NT_T __attribute__((aligned(16))) gm_nt_t;
#define GM_STOREV_MAIN(nt, v, p) { if (nt) { STOREV_NT(v, p); } else { STOREV(v, p); } }
#if defined(__x86_64__) || defined(__i386__)
#define GM_NT_FENCE(nt) { if ((nt) && get_local_id(0) == get_local_size(0) - 1) __builtin_ia32_sfence(); }
#else
#define GM_NT_FENCE(nt)
#endif
#else
#define GM_STOREV_MAIN(nt, v, p) STOREV(v, p)
#define GM_NT_FENCE(nt)
#endif

// Every operand is one dense run: work-item g owns elements [VW*UNROLL*g, VW*UNROLL*(g+1)).
GM_INLINE void gm_ew_contig_run(__global T* out, ulong out_off, ulong n, float scale,
                                float bias GM_INPUT_PARAMS GM_CHK_P, const int fix_now, const int nt) {
    GM_INPUTS_BIND
    GM_REDO_DECL
    ulong first = (ulong)get_global_id(0) * VW * UNROLL;
    if (first + VW * UNROLL <= n) {
#define GM_NL VW
#define LOADV_AT(k) LOADV(GM_INPUT_AT(const T, k, base, VW))
#define ELEM_AT(k, l) GM_INPUT_AT(const T, k, base + (l), 1)
        for (int u = 0; u < UNROLL; ++u) {
            ulong base = first + VW * u;
#define GM_PF_POS(k) base
            GM_PREFETCH_INPUTS(base)
#undef GM_PF_POS
#define GM_FIXING fix_now
            RESV r;
            GM_COMPUTE(r)
            GM_STOREV_MAIN(nt, r, GM_AT(NIN, T, out, out_off + base, VW));
#undef GM_FIXING
        }
#if GM_REDO
        if (any(redo_)) {
            for (int u = 0; u < UNROLL; ++u) {
                ulong base = first + VW * u;
#define GM_FIXING 1
                RESV r;
                GM_COMPUTE(r)
                GM_STOREV_MAIN(nt, r, GM_AT(NIN, T, out, out_off + base, VW));
#undef GM_FIXING
            }
        }
#endif
#undef LOADV_AT
#undef ELEM_AT
#undef GM_NL
    } else {
#define GM_FIXING 1
        for (ulong i = first; i < n; ++i) {
#define GM_NL 1
#define LOADV_AT(k) ((CTV)(LOAD1(GM_INPUT_AT(const T, k, i, 1))))
#define ELEM_AT(k, l) GM_INPUT_AT(const T, k, i, 1)
            RESV r;
            GM_COMPUTE(r)
            STORE1(r.s0, GM_AT(NIN, T, out, out_off + i, 1));
#undef LOADV_AT
#undef ELEM_AT
#undef GM_NL
        }
#undef GM_FIXING
    }
    GM_NT_FENCE(nt)
}

__kernel void gm_ew_contig_serial(__global T* out, ulong out_off, ulong n, float scale,
                                  float bias GM_INPUT_PARAMS GM_CHK_P) {
    gm_ew_contig_run(out, out_off, n, scale, bias GM_INPUT_ARGS GM_CHK_A, 0, 0);
}
#ifdef STOREV_NT
__kernel void gm_ew_contig_nt_serial(__global T* out, ulong out_off, ulong n, float scale,
                                     float bias GM_INPUT_PARAMS GM_CHK_P) {
    gm_ew_contig_run(out, out_off, n, scale, bias GM_INPUT_ARGS GM_CHK_A, 0, 1);
}
#endif
#if GM_REDO
__kernel void gm_ew_contig_inplace_serial(__global T* out, ulong out_off, ulong n, float scale,
                                          float bias GM_INPUT_PARAMS GM_CHK_P) {
    gm_ew_contig_run(out, out_off, n, scale, bias GM_INPUT_ARGS GM_CHK_A, 1, 0);
}
#endif

// Element offsets of the start of row ``row`` (all dimensions but the innermost) for every operand.
GM_INLINE void gm_row_positions(__constant const gm_dims* m, long row, long* pos) {
    for (int k = 0; k <= NIN; ++k) pos[k] = 0;
    for (int d = NDIM - 2; d >= 0; --d) {
        // the outermost index is what is left: no division for it
        long sz = m->size[d], q = d > 0 ? row / sz : 0, idx = row - q * sz;
        row = q;
        for (int k = 0; k <= NIN; ++k) pos[k] += idx * (long)m->stride[k][d];
    }
}

// Work-item g's run of up to ``run`` elements along the innermost dimension: fills every operand's
// row start, sets *i0 to the run's first index and returns its end.
GM_INLINE long gm_run_start(__constant const gm_dims* m, long g, long run, long* pos, long* i0) {
    long inner = m->size[NDIM - 1];
    long runs_per_row = (inner + run - 1) / run;
    long row = g / runs_per_row;
    gm_row_positions(m, row, pos);
    *i0 = (g - row * runs_per_row) * run;
    return min(inner, *i0 + run);
}

// General strides: work-item g owns a run of up to RUN elements along the innermost dimension.
__kernel void gm_ew_strided_serial(__global T* out, ulong out_off, ulong n_runs, __constant const gm_dims* m,
                                   float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_INPUTS_BIND
    ulong g = get_global_id(0);
    if (g >= n_runs) return;
    long pos[NIN + 1], i0;
    long iend = gm_run_start(m, (long)g, RUN, pos, &i0);
    GM_REDO_DECL
    for (long i = i0; i < iend; ++i) {
#define GM_FIXING 1
#define GM_NL 1
#define LOADV_AT(k) ((CTV)(LOAD1(GM_INPUT_AT(const T, k, pos[k] + i * (long)m->stride[k][NDIM - 1], 1))))
#define ELEM_AT(k, l) GM_INPUT_AT(const T, k, pos[k] + i * (long)m->stride[k][NDIM - 1], 1)
        RESV r;
        GM_COMPUTE(r)
        STORE1(r.s0, GM_AT(NIN, T, out, (long)out_off + pos[NIN] + i * (long)m->stride[NIN][NDIM - 1], 1));
#undef LOADV_AT
#undef ELEM_AT
#undef GM_NL
#undef GM_FIXING
    }
}

// Every operand's innermost dimension is dense (broadcast and padded layouts usually are): work-item
// g owns a run of RUN_ROWS elements of one row, moved with VW-wide vector loads.
GM_INLINE void gm_ew_rows_run(__global T* out, ulong out_off, ulong n_runs, __constant const gm_dims* m,
                              float scale, float bias GM_INPUT_PARAMS GM_CHK_P, const int fix_now, const int nt) {
    GM_INPUTS_BIND
    ulong g = get_global_id(0);
    if (g >= n_runs) {
        GM_NT_FENCE(nt)
        return;
    }
    long pos[NIN + 1], i0;
    long iend = gm_run_start(m, (long)g, RUN_ROWS, pos, &i0);
    GM_REDO_DECL
    long i = i0;
#define GM_NL VW
#define LOADV_AT(k) LOADV(GM_INPUT_AT(const T, k, pos[k] + i, VW))
#define ELEM_AT(k, l) GM_INPUT_AT(const T, k, pos[k] + i + (l), 1)
    for (; i + VW <= iend; i += VW) {
#define GM_PF_POS(k) (pos[k] + i)
        GM_PREFETCH_INPUTS(i)
#undef GM_PF_POS
#define GM_FIXING fix_now
        RESV r;
        GM_COMPUTE(r)
        GM_STOREV_MAIN(nt, r, GM_AT(NIN, T, out, (long)out_off + pos[NIN] + i, VW));
#undef GM_FIXING
    }
#if GM_REDO
    if (any(redo_)) {
        for (long i = i0; i + VW <= iend; i += VW) {
#define GM_FIXING 1
            RESV r;
            GM_COMPUTE(r)
            GM_STOREV_MAIN(nt, r, GM_AT(NIN, T, out, (long)out_off + pos[NIN] + i, VW));
#undef GM_FIXING
        }
    }
#endif
    GM_NT_FENCE(nt)
#undef LOADV_AT
#undef ELEM_AT
#undef GM_NL
#define GM_FIXING 1
    for (; i < iend; ++i) {
#define GM_NL 1
#define LOADV_AT(k) ((CTV)(LOAD1(GM_INPUT_AT(const T, k, pos[k] + i, 1))))
#define ELEM_AT(k, l) GM_INPUT_AT(const T, k, pos[k] + i, 1)
        RESV r;
        GM_COMPUTE(r)
        STORE1(r.s0, GM_AT(NIN, T, out, (long)out_off + pos[NIN] + i, 1));
#undef LOADV_AT
#undef ELEM_AT
#undef GM_NL
    }
#undef GM_FIXING
}

__kernel void gm_ew_rows_serial(__global T* out, ulong out_off, ulong n_runs, __constant const gm_dims* m,
                                float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    gm_ew_rows_run(out, out_off, n_runs, m, scale, bias GM_INPUT_ARGS GM_CHK_A, 0, 0);
}
#ifdef STOREV_NT
__kernel void gm_ew_rows_nt_serial(__global T* out, ulong out_off, ulong n_runs, __constant const gm_dims* m,
                                   float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    gm_ew_rows_run(out, out_off, n_runs, m, scale, bias GM_INPUT_ARGS GM_CHK_A, 0, 1);
}
#endif
#if GM_REDO
__kernel void gm_ew_rows_inplace_serial(__global T* out, ulong out_off, ulong n_runs, __constant const gm_dims* m,
                                        float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    gm_ew_rows_run(out, out_off, n_runs, m, scale, bias GM_INPUT_ARGS GM_CHK_A, 1, 0);
}
#endif
#endif  // GM_CPU_SHAPE
