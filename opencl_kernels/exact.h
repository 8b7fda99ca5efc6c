// Correctly rounded means on the device (issue 22; docs/design.md, "Correct rounding"):
// an exact fixed-point superaccumulator in integer limbs, the correctly rounded division of its total
// by n with no floating point at all, and the test that accepts a fast wide sum when its error bound
// settles the rounding. Portable OpenCL C through the dialect (opencl_kernels/dialect.h or
// cuda_kernels/dialect.h, then common.h, then this header): NVRTC compiles it unchanged.
//
// The superaccumulator. Every finite value of a binary format is an integer multiple of its smallest
// subnormal 2^unit (FLOAT32 and BFLOAT16: 2^-149, FLOAT16: 2^-24), so a sum of any number of them is
// exact as an integer in that unit. A value is its integer significand m (24 bits for FLOAT32, 8 for
// BFLOAT16, 11 for FLOAT16) shifted left by s = max(biased exponent, 1) - 1; m << (s mod 32) has at
// most 55 bits, and it is added as two 32-bit halves into the signed 64-bit limbs s / 32 and s / 32 + 1
// (limb j weighs 2^(32 j)). A limb takes 2^31 such halves before it could overflow; gm_xacc_normalize
// moves carries up (every limb then holds a digit in [0, 2^32) but the top one, which keeps the sign).
// The limbs are indexed by compile-time constants inside unrolled loops (a predicated add per limb),
// so they live in registers on a GPU, never in local memory.
//   FLOAT32 / BFLOAT16 values: 10 limbs (320 bits: 277 for the range, the rest for the count).
//   FLOAT16 values: 3 limbs (96 bits: 40 for the range).
// Infinities and NaN are flags beside the limbs (IEEE: NaN if a NaN or both infinities were added,
// else the infinity); a flag also records a value other than -0.0, so that an exact zero total is
// -0.0 only when every value added was -0.0.
//
// The division. gm_xacc_round(limbs, n, format): the magnitude of the total divided by n (n < 2^32)
// digit by digit from the top ((r << 32 | digit) / n never passes 64 bits), then the quotient's
// leading bit, the p bits below it kept, the next bit as the rounding bit and every lower bit and the
// remainder as the sticky bit; round to nearest even; the bits of the result assembled directly (a
// subnormal result keeps the format's lowest place; a carry out of the significand moves into the
// exponent field, and past the largest exponent the result is infinity). No floating point: devices
// without fp64, and OpenCL devices whose float division is not correctly rounded
// (no CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT), give the same bits.
//
// The bound test. gm_settle_double_f32 / _f16(s, err, n): s a FLOAT64 sum within err of the exact total;
// q = s / n (IEEE division of doubles is correctly rounded in both APIs) and the ends q -+ E (E the
// error of q, padded for the arithmetic that forms the ends) rounded to the format: equal bits settle
// the result (rounding is monotonic). A zero q never settles (the sign of a zero total needs the
// values).
//
// What this header needs from the dialect beyond OpenCL C's scalars, defined here when absent:
// gm_as_uint / gm_as_float (bit casts), gm_clz32 (count leading zeros of a uint).

#ifndef GM_EXACT_H
#define GM_EXACT_H

#ifndef gm_as_uint
#if GM_CUDA
#define gm_as_uint(x) __float_as_uint(x)
#define gm_as_float(x) __uint_as_float(x)
#define gm_clz32(x) __clz((int)(x))
#else
#define gm_as_uint(x) as_uint(x)
#define gm_as_float(x) as_float(x)
#define gm_clz32(x) clz((uint)(x))
#endif
#endif

#define GM_XK_F 10      // limbs of a FLOAT32 / BFLOAT16 accumulator
#define GM_XK_H 3       // limbs of a FLOAT16 accumulator
#define GM_XK_D 68      // limbs of a FLOAT64 accumulator (stage 3: 2046 + 53 bits for the range, the rest for the count)

// flags beside the limbs
#define GM_XF_NAN 1u
#define GM_XF_PINF 2u
#define GM_XF_NINF 4u
#define GM_XF_NOT_NEG0 8u     // a value other than -0.0 was added

// output formats: significand bits p (hidden bit included), exponent field bits, and the distance
// in bits between the format's smallest subnormal and the accumulator's unit
#define GM_FMT_F32 24, 8, 0
#define GM_FMT_BF16 8, 8, 16
#define GM_FMT_F16 11, 5, 0

typedef struct { long d[GM_XK_F]; uint flags; } gm_xacc_f;     // FLOAT32 and BFLOAT16 values
typedef struct { long d[GM_XK_H]; uint flags; } gm_xacc_h;     // FLOAT16 values
typedef struct { long d[GM_XK_D]; uint flags; } gm_xacc_d;     // FLOAT64 values (stage 3; bits: no double)

// -- limbs, any count K (a compile-time constant at every call: the loops unroll) ----------------
// GM_XLIMBS_LOOP 1 (a variant whose limbs live in memory anyway: the FLOAT64 n-ary mean's 68, indexed
// at run time) keeps the loops rolled: unrolled, 68 inlined 64-bit divisions took CUDA 255 registers
// in every kernel of the variant (30 to 40 rolled), where only the rare exact path runs them.
#if GM_XLIMBS_LOOP
#define GM_XUNROLL _Pragma("unroll 1")
#else
#define GM_XUNROLL _Pragma("unroll")
#endif

GM_INLINE void gm_xlimbs_clear(long* d, const int K) {
GM_XUNROLL
    for (int j = 0; j < K; j++) d[j] = 0;
}

// add (neg: subtract) the integer m << s into the limbs
GM_INLINE void gm_xlimbs_deposit(long* d, const int K, uint m, int s, int neg) {
    const ulong v = (ulong)m << (s & 31);
    const int k = s >> 5;
    long lo = (long)(v & 0xFFFFFFFFul), hi = (long)(v >> 32);
    if (neg) { lo = -lo; hi = -hi; }
GM_XUNROLL
    for (int j = 0; j < K; j++) {
        d[j] += (j == k) ? lo : 0;
        d[j] += (j == k + 1) ? hi : 0;
    }
}

GM_INLINE void gm_xlimbs_normalize(long* d, const int K) {
GM_XUNROLL
    for (int j = 0; j < K - 1; j++) {
        const long carry = d[j] >> 32;          // arithmetic shift: floor(d / 2^32)
        d[j] -= carry * 4294967296l;            // now in [0, 2^32)
        d[j + 1] += carry;
    }
}

GM_INLINE void gm_xlimbs_merge(long* d, const long* e, const int K) {
GM_XUNROLL
    for (int j = 0; j < K; j++) d[j] += e[j];
}

// The magnitude bits of (total * 2^unit / n) rounded to nearest even in the format (p, ebits, shift0):
// normalizes and may negate the limbs; *negative receives the total's sign. Infinity past the range.
GM_INLINE ulong gm_xlimbs_round64(long* d, const int K, uint n, const int p, const int ebits, const int shift0,
                                  int* negative) {
    gm_xlimbs_normalize(d, K);
    const int neg = d[K - 1] < 0;
    *negative = neg;
    if (neg) {                                  // two's complement over the digits: ~d + 1
        long carry = 1;
GM_XUNROLL
        for (int j = 0; j < K; j++) {
            const long t = (j < K - 1 ? (0xFFFFFFFFl - d[j]) : (-1 - d[j])) + carry;
            carry = (j < K - 1) ? (t >> 32) : 0;
            d[j] = (j < K - 1) ? (t & 0xFFFFFFFFl) : t;
        }
    }
    // long division from the top digit: quotient digits in place, remainder r < n. Leading zero
    // digits take no division, and once the digits down to the rounding bit's (place L - 1, L the
    // lowest kept place of a normal result) are known the rest is not divided: all it decides is
    // whether anything is left below, which is whether the remainder or a digit not divided is
    // nonzero (r then stands for that). A subnormal result (L = shift0 = 0) divides every digit.
    ulong r = 0;
    int jstop = 0, top = -1;
GM_XUNROLL
    for (int j = K - 1; j >= 0; j--) {
        if (j >= jstop) {
            const ulong cur = (r << 32) | (ulong)d[j];
            if (cur != 0) {
                const ulong q = cur / n;
                r = cur - q * n;
                d[j] = (long)q;
                if (top < 0 && q != 0) top = 32 * j + 31 - (int)gm_clz32((uint)q);
            }
            if (top >= 0 && top - (p - 1) > shift0 && 32 * j <= top - p) jstop = j;
        }
    }
    ulong rest = r;
GM_XUNROLL
    for (int j = 0; j < K; j++) {
        if (j < jstop) { rest |= (ulong)d[j]; d[j] = 0; }
    }
    r = jstop > 0 ? (ulong)(rest != 0) : r;
    // the quotient's leading bit b (-1 for a zero quotient)
    int b = -1;
GM_XUNROLL
    for (int j = K - 1; j >= 0; j--)
        if (b < 0 && d[j] != 0) b = 32 * j + 31 - (int)gm_clz32((uint)d[j]);
    // the lowest place kept: the format's subnormal place at least
    const int L = max(b - (p - 1), shift0);
    ulong m = 0;                                // the kept bits: quotient >> L (at most p bits)
    uint rbit = 0, sticky = (r != 0);           // the rounding bit below them, anything lower
GM_XUNROLL
    for (int j = 0; j < K; j++) {
        const ulong dj = (ulong)d[j];
        const int sh = 32 * j - L;              // where digit j lands relative to place L
        if (sh >= 0) {
            if (sh < 64) m |= dj << sh;
        } else if (sh > -32) {
            m |= dj >> (-sh);
            const ulong low = dj & ((1ul << (-sh)) - 1);     // digit bits below L
            rbit |= (uint)((low >> (-sh - 1)) & 1ul);
            sticky |= (low & ((1ul << (-sh - 1)) - 1)) != 0;
        } else {
            // the digit lies wholly below L: its top bit is the rounding bit when it sits at L - 1
            if (sh == -32) {
                rbit |= (uint)(dj >> 31);
                sticky |= (dj & 0x7FFFFFFFul) != 0;
            } else {
                sticky |= dj != 0;
            }
        }
    }
    uint up;
    if (L == 0) {                               // the lowest place is the unit: the remainder decides
        const ulong twice = 2 * r;
        up = (twice > n) || (twice == n && (m & 1));
    } else {
        up = rbit && (sticky || (m & 1));
    }
    // L - shift0 is the biased exponent minus one of a normal result (0 for a subnormal one), and m
    // carries the hidden bit: the sum is the bits, a rounding carry moving into the exponent
    const ulong bits = ((ulong)(L - shift0) << (p - 1)) + m + up;
    const ulong inf_bits = (((ulong)1 << ebits) - 1) << (p - 1);
    return bits >= inf_bits ? inf_bits : bits;
}

// the narrow formats' magnitude bits (at most 31 bits)
GM_INLINE uint gm_xlimbs_round(long* d, const int K, uint n, const int p, const int ebits, const int shift0,
                               int* negative) {
    return (uint)gm_xlimbs_round64(d, K, n, p, ebits, shift0, negative);
}

// the result's bits from the rounded magnitude and the flags (NaN: the format's quiet NaN)
GM_INLINE uint gm_xresult(uint mag, int negative, uint flags, const int p, const int ebits) {
    const uint sign = 1u << (p + ebits - 1);
    const uint inf_bits = ((1u << ebits) - 1) << (p - 1);
    if ((flags & GM_XF_NAN) || ((flags & GM_XF_PINF) && (flags & GM_XF_NINF)))
        return inf_bits | (1u << (p - 2));
    if (flags & GM_XF_PINF) return inf_bits;
    if (flags & GM_XF_NINF) return sign | inf_bits;
    // zero: a negative total that rounds to zero is -0; an exact zero total is -0 only from -0s
    if (mag == 0) return (negative || !(flags & GM_XF_NOT_NEG0)) ? sign : 0u;
    return negative ? (sign | mag) : mag;
}

// -- FLOAT32 / BFLOAT16 values ----------------------------------------------------------------------

GM_INLINE void gm_xacc_f_init(gm_xacc_f* a) { gm_xlimbs_clear(a->d, GM_XK_F); a->flags = 0; }

GM_INLINE void gm_xacc_f_add_bits(gm_xacc_f* a, uint u) {
    const uint e = (u >> 23) & 0xFFu, f = u & 0x7FFFFFu;
    if (e == 0xFFu) {
        a->flags |= f ? GM_XF_NAN : ((u >> 31) ? GM_XF_NINF : GM_XF_PINF);
        return;
    }
    a->flags |= (u != 0x80000000u) ? GM_XF_NOT_NEG0 : 0u;
    gm_xlimbs_deposit(a->d, GM_XK_F, e ? (f | 0x800000u) : f, (int)max(e, 1u) - 1, (int)(u >> 31));
}

GM_INLINE void gm_xacc_f_add(gm_xacc_f* a, float x) { gm_xacc_f_add_bits(a, gm_as_uint(x)); }
// a BFLOAT16 value (its bits) is the FLOAT32 value with 16 zero bits below
GM_INLINE void gm_xacc_f_add_bf16(gm_xacc_f* a, ushort h) { gm_xacc_f_add_bits(a, (uint)h << 16); }

GM_INLINE void gm_xacc_f_merge(gm_xacc_f* a, const gm_xacc_f* b) {
    gm_xlimbs_merge(a->d, b->d, GM_XK_F);
    a->flags |= b->flags;
}

// keep the limbs bounded between merges of many partials (every 2^30 merges or deposits at least)
GM_INLINE void gm_xacc_f_normalize(gm_xacc_f* a) { gm_xlimbs_normalize(a->d, GM_XK_F); }

// the correctly rounded mean of the n values added, as FLOAT32 bits (the accumulator is consumed)
GM_INLINE uint gm_xacc_f_mean(gm_xacc_f* a, uint n) {
    int neg;
    const uint mag = gm_xlimbs_round(a->d, GM_XK_F, n, GM_FMT_F32, &neg);
    return gm_xresult(mag, neg, a->flags, 24, 8);
}

// ... as BFLOAT16 bits
GM_INLINE ushort gm_xacc_f_mean_bf16(gm_xacc_f* a, uint n) {
    int neg;
    const uint mag = gm_xlimbs_round(a->d, GM_XK_F, n, GM_FMT_BF16, &neg);
    return (ushort)gm_xresult(mag, neg, a->flags, 8, 8);
}

// -- FLOAT16 values (their bits in a ushort) --------------------------------------------------------

GM_INLINE void gm_xacc_h_init(gm_xacc_h* a) { gm_xlimbs_clear(a->d, GM_XK_H); a->flags = 0; }

GM_INLINE void gm_xacc_h_add(gm_xacc_h* a, ushort h) {
    const uint u = h, e = (u >> 10) & 0x1Fu, f = u & 0x3FFu;
    if (e == 0x1Fu) {
        a->flags |= f ? GM_XF_NAN : ((u >> 15) ? GM_XF_NINF : GM_XF_PINF);
        return;
    }
    a->flags |= (u != 0x8000u) ? GM_XF_NOT_NEG0 : 0u;
    gm_xlimbs_deposit(a->d, GM_XK_H, e ? (f | 0x400u) : f, (int)max(e, 1u) - 1, (int)(u >> 15));
}

GM_INLINE void gm_xacc_h_merge(gm_xacc_h* a, const gm_xacc_h* b) {
    gm_xlimbs_merge(a->d, b->d, GM_XK_H);
    a->flags |= b->flags;
}

GM_INLINE void gm_xacc_h_normalize(gm_xacc_h* a) { gm_xlimbs_normalize(a->d, GM_XK_H); }

GM_INLINE ushort gm_xacc_h_mean(gm_xacc_h* a, uint n) {
    int neg;
    const uint mag = gm_xlimbs_round(a->d, GM_XK_H, n, GM_FMT_F16, &neg);
    return (ushort)gm_xresult(mag, neg, a->flags, 11, 5);
}

// -- FLOAT64 values (stage 3; their bits in a ulong) -----------------------------------------------
// 68 limbs are too many for registers: a value's three 32-bit digits go to limbs s / 32 .. s / 32 + 2 by
// a dynamic index (on CUDA the array lives in local memory, "stack": only the exact pass uses it);
// normalizing, merging and the division loop over the limbs with compile-time indices as above.
// The unit is FLOAT64's smallest subnormal 2^-1074: a value is its 53-bit significand m shifted left
// by s = max(biased exponent, 1) - 1 (at most 2045), cut as (m mod 2^32) << (s mod 32) (at most 63
// bits) and (m >> 32) << (s mod 32) (at most 52 bits), whose sum has three 32-bit digits.

GM_INLINE void gm_xacc_d_init(gm_xacc_d* a) { gm_xlimbs_clear(a->d, GM_XK_D); a->flags = 0; }

GM_INLINE void gm_xacc_d_add_bits(gm_xacc_d* a, ulong u) {
    const uint e = (uint)(u >> 52) & 0x7FFu;
    const ulong f = u & 0xFFFFFFFFFFFFFul;
    if (e == 0x7FFu) {
        a->flags |= f ? GM_XF_NAN : ((u >> 63) ? GM_XF_NINF : GM_XF_PINF);
        return;
    }
    a->flags |= (u != 0x8000000000000000ul) ? GM_XF_NOT_NEG0 : 0u;
    const ulong mant = e ? (f | 0x10000000000000ul) : f;
    const int s = (int)max(e, 1u) - 1, sh = s & 31, k = s >> 5;
    const ulong lo = (mant & 0xFFFFFFFFul) << sh, hi = (mant >> 32) << sh;
    const ulong d1 = (lo >> 32) + (hi & 0xFFFFFFFFul);      // below 2^33
    long v0 = (long)(lo & 0xFFFFFFFFul), v1 = (long)d1, v2 = (long)(hi >> 32);
    if (u >> 63) { v0 = -v0; v1 = -v1; v2 = -v2; }
    a->d[k] += v0;
    a->d[k + 1] += v1;
    a->d[k + 2] += v2;
}

#if GM_CUDA || USE_FP64
GM_INLINE void gm_xacc_d_add(gm_xacc_d* a, double x) { gm_xacc_d_add_bits(a, as_ulong(x)); }
#endif

GM_INLINE void gm_xacc_d_merge(gm_xacc_d* a, const gm_xacc_d* b) {
    gm_xlimbs_merge(a->d, b->d, GM_XK_D);
    a->flags |= b->flags;
}

// every 2^24 deposits at least (a limb takes a digit below 2^33 per value)
GM_INLINE void gm_xacc_d_normalize(gm_xacc_d* a) { gm_xlimbs_normalize(a->d, GM_XK_D); }

// the correctly rounded mean of the n values added, as FLOAT64 bits (the accumulator is consumed)
GM_INLINE ulong gm_xacc_d_mean(gm_xacc_d* a, uint n) {
    int neg;
    const ulong mag = gm_xlimbs_round64(a->d, GM_XK_D, n, 53, 11, 0, &neg);
    const ulong sign = 0x8000000000000000ul, inf_bits = 0x7FF0000000000000ul;
    const uint flags = a->flags;
    if ((flags & GM_XF_NAN) || ((flags & GM_XF_PINF) && (flags & GM_XF_NINF))) return 0x7FF8000000000000ul;
    if (flags & GM_XF_PINF) return inf_bits;
    if (flags & GM_XF_NINF) return sign | inf_bits;
    if (mag == 0) return (neg || !(flags & GM_XF_NOT_NEG0)) ? sign : 0ul;
    return neg ? (sign | mag) : mag;
}

// -- the bound test (devices with fp64) -------------------------------------------------------------

#if GM_CUDA || USE_FP64
#define GM_U53 1.1102230246251565e-16        // 2^-53

// A FLOAT64 sum s of n values with |s - S| <= err (S the exact total): 1 and the FLOAT32 bits of the
// correctly rounded S / n in *bits when the bound settles the rounding, else 0 (the exact path
// decides). s must be finite (an inf or NaN sum is the IEEE answer already).
GM_INLINE int gm_settle_double_f32(double s, double err, uint n, uint* bits) {
    const double q = s / (double)n;
    const double pad = (err / (double)n) * (1.0 + 0x1p-40) + fabs(q) * (4.0 * GM_U53);
    const uint lo = gm_as_uint((float)(q - pad)), hi = gm_as_uint((float)(q + pad));
    *bits = lo;
    return lo == hi && q != 0.0;
}

// ... the FLOAT16 bits (through FLOAT32 rounded to odd: one rounding, gm_double_to_half)
GM_INLINE int gm_settle_double_f16(double s, double err, uint n, ushort* bits) {
    const double q = s / (double)n;
    const double pad = (err / (double)n) * (1.0 + 0x1p-40) + fabs(q) * (4.0 * GM_U53);
    const ushort lo = gm_double_to_half(q - pad), hi = gm_double_to_half(q + pad);
    *bits = lo;
    return lo == hi && q != 0.0;
}

#if USE_FP64     // common.h's gm_double_to_bf16
// ... the BFLOAT16 bits (through FLOAT32 rounded to odd: one rounding, gm_double_to_bf16; stage 2)
GM_INLINE int gm_settle_double_bf16(double s, double err, uint n, ushort* bits) {
    const double q = s / (double)n;
    const double pad = (err / (double)n) * (1.0 + 0x1p-40) + fabs(q) * (4.0 * GM_U53);
    const ushort lo = gm_double_to_bf16(q - pad), hi = gm_double_to_bf16(q + pad);
    *bits = lo;
    return lo == hi && q != 0.0;
}

// -- the exact pass's second tier (docs/design.md, "The exact pass's second tier") ------------------
// An open output's FLOAT32, FLOAT16 or BFLOAT16 values (each exact in double) summed again as an
// unevaluated pair h + c: each value joins h by TwoSum, and h's error joins c by TwoSum. While every
// error of c is zero, h + c is the exact total S (no sum of narrow values comes near DBL_MAX); an
// error of c that is not zero (values about 50 binades apart), an inf or a NaN (its errors are NaN)
// sets bad, and the superaccumulator decides. About a dozen flops a value, against the
// superaccumulator's deposit of each value into integer limbs.
typedef struct { double h, c; int bad; } gm_dd2;
GM_INLINE void gm_dd2_init(gm_dd2* a) { a->h = 0.0; a->c = 0.0; a->bad = 0; }
GM_INLINE void gm_dd2_add(gm_dd2* a, double x) {
    const double s = a->h + x, bv = s - a->h, e = (a->h - (s - bv)) + (x - bv);
    const double t = a->c + e, cv = t - a->c, f = (a->c - (t - cv)) + (e - cv);
    a->h = s;
    a->c = t;
    a->bad |= !(f == 0.0);
}

// The format's bits of S / n rounded once (to nearest, ties to even) for S = h + c exact: 1 and the
// bits in *bits, or 0 (bad, or S = 0: a zero's sign needs the values). fmt: 0 FLOAT32, 1 FLOAT16,
// 2 BFLOAT16. S = s + e with s = fl(S) (TwoSum), so |S - s| = |e| <= ulp(s) / 2: the bound test
// with err = |e| settles every quotient but those within a few double ulps of a midpoint b of the
// format. There lo and hi (the ends' roundings) are adjacent and b = (lo + hi) / 2 exactly, and the
// sign of S - n b decides: s - n b by one fma is exact (s and n b lie on the grid of b's last bit or
// of s's, and |s - n b| < 12 ulp(s): fewer than 2^53 steps of the finer grid for any n < 2^32 and
// a format of at most 24 bits), then + e rounds to a number of the exact sum's sign, zero only for
// zero (b n alone is exact for n < 2^28; the fma keeps s - n b exact up to n < 2^32). Above b: hi;
// below: lo; on b: the even one.
GM_INLINE int gm_dd2_settle(const gm_dd2* a, uint n, const int fmt, uint* bits) {
    const double s = a->h + a->c, bv = s - a->h, e = (a->h - (s - bv)) + (a->c - bv);
    const double q = s / (double)n;
    const double pad = (fabs(e) / (double)n) * (1.0 + 0x1p-40) + fabs(q) * (4.0 * GM_U53);
    uint lo, hi;
    double vlo, vhi;
    if (fmt == 0) {
        lo = gm_as_uint((float)(q - pad));
        hi = gm_as_uint((float)(q + pad));
        vlo = (double)gm_as_float(lo);
        vhi = (double)gm_as_float(hi);
    } else if (fmt == 1) {
        lo = gm_double_to_half(q - pad);
        hi = gm_double_to_half(q + pad);
        vlo = (double)gm_half_to_float((ushort)lo);
        vhi = (double)gm_half_to_float((ushort)hi);
    } else {
        lo = gm_double_to_bf16(q - pad);
        hi = gm_double_to_bf16(q + pad);
        vlo = (double)gm_bf16_to_float((ushort)lo);
        vhi = (double)gm_bf16_to_float((ushort)hi);
    }
    const double b = 0.5 * (vlo + vhi);
    const double t = fma(-b, (double)n, s) + e;
    *bits = lo == hi ? lo : t > 0.0 ? hi : t < 0.0 ? lo : ((lo & 1u) ? hi : lo);
    return !a->bad && s != 0.0 && isfinite(b);
}

// Stage 3: a FLOAT64 total S within err of the double-double hi + lo (|hi| < 2^992, so nothing below
// overflows): 1 and the FLOAT64 bits of the correctly rounded S / n in *bits when settled, else 0
// (runtime/exact.py: settle_dd's rule, one division): q = hi / n and D = S - n q as gm_dd_div forms
// it (q n = p + pe by fma, hi - p exact by Sterbenz, the two other additions rounding, padded by
// 2^-50 of the terms); the candidate c is q or the neighbour D points to, and it is the result
// when its remainder plus err stays below n times half the gap on its side (each side its own gap:
// below a power of two it is half the one above). Else (S / n near a midpoint, an exact tie) the exact pass decides, as it does
// for a zero, subnormal or tiny q (below 2^-1000). No branch (PoCL vectorizes the store across
// work-items): *bits is hi / n's for a zero, its sign included.
GM_INLINE int gm_settle_dd_f64(double hi, double lo, double err, uint n, ulong* bits) {
    const double nd = (double)n, qs = hi / nd;
    const double sg = hi < 0.0 ? -1.0 : 1.0;
    const double h = hi * sg, l = lo * sg, q = qs * sg;
    const double p0 = q * nd, pe0 = fma(q, nd, -p0), hp = h - p0;
    const double d0 = (hp - pe0) + l;           // S - n q, within tol
    const ulong uq = as_ulong(q);
    const double gu = as_double(uq + 1) - q, gd = q - as_double(uq - 1);
    // lo moves S / n up to about half an ulp of q: the candidate c is q or a neighbour, D - n (c - q)
    // its remainder (n times a gap is exact; the subtraction rounds, padded below)
    const int up = d0 > gu * 0.5 * nd, dn = d0 < -gd * 0.5 * nd;
    const double c = up ? q + gu : (dn ? q - gd : q);
    const double dc = d0 - (up ? gu * nd : (dn ? -gd * nd : 0.0));
    const ulong uc = as_ulong(c);
    const double cu = as_double(uc + 1) - c, cd = c - as_double(uc - 1);
    *bits = as_ulong(up | dn ? c * sg : qs);    // hi / n's bits for a zero (its sign)
    const double tol = err * (1.0 + 0x1p-40) + (fabs(hp) + fabs(pe0) + fabs(l) + fabs(d0) + gu * nd) * 0x1p-50;
    return (q >= 0x1p-1000) & (q < 0x1p1000) & (err < 0x1p1000)
           & (dc + tol < cu * 0.5 * nd) & (tol - dc < cd * 0.5 * nd);
}
#endif

// the error bound of a FLOAT64 sum of n values with max|x| <= m, in any order: gamma(n - 1) * n * m,
// gamma(k) = k u / (1 - k u) <= k u (1 + 2^-19) for k < 2^32
GM_INLINE double gm_sum_error_bound(uint n, double m) {
    return (double)(n - 1) * GM_U53 * (1.0 + 0x1p-19) * (double)n * m;
}
#endif

// -- the bound test without fp64 ---------------------------------------------------------------------
// A float-float sum hi + lo within err of the exact total S. No double, and no trust in the float
// division (OpenCL allows 2.5 ulp without CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT): a candidate from any
// division, corrected once by the remainder, then the remainder decides exactly where S / n lies:
// n * (r +- half) is formed without error (n = nh + nl, each an exact float; products split by fma,
// which OpenCL and CUDA round correctly), the terms are added by TwoSum with the rounding of the
// error terms bounded, and the result is accepted when S / n lies strictly between r's midpoints by
// more than err. Values near the ends of the range (|r| < 2^-100 or the products near FLT_MAX) are
// left to the exact path, as is everything the bound does not settle.

GM_INLINE void gm_two_sum_f(float a, float b, float* s, float* e) {
    *s = a + b;
    const float bb = *s - a;
    *e = (a - (*s - bb)) + (b - bb);
}

// sum of the terms so far: value v = s + c, |v - exact| <= bound
typedef struct { float s, c, bound; } gm_fsum;

GM_INLINE void gm_fsum_add(gm_fsum* a, float x) {
    float s, e;
    gm_two_sum_f(a->s, x, &s, &e);
    const float c = a->c + e;
    a->bound += fabs(c) * 0x1p-23f;      // the rounding of the error terms' sum
    a->s = s;
    a->c = c;
}

// add n * y exactly as four products
GM_INLINE void gm_fsum_add_ny(gm_fsum* a, uint n, float y) {
    const float nh = (float)(n & 0xFFFFF000u), nl = (float)(n & 0xFFFu);
    const float p1 = nh * y, p2 = nl * y;
    gm_fsum_add(a, p1);
    gm_fsum_add(a, fma(nh, y, -p1));
    gm_fsum_add(a, p2);
    gm_fsum_add(a, fma(nl, y, -p2));
}

// 1 and the FLOAT32 bits of the correctly rounded S / n in *bits when settled, else 0
GM_INLINE int gm_settle_ff_f32(float hi, float lo, float err, uint n, uint* bits) {
    const int neg = hi < 0.0f;
    if (neg) { hi = -hi; lo = -lo; }
    // the candidate, then one correction by the remainder (hi + lo - n r) / n
    float r = hi / (float)n;
    gm_fsum rem = {hi, lo, 0.0f};
    gm_fsum_add_ny(&rem, n, -r);
    r = r + (rem.s + rem.c) / (float)n;
    const uint u = gm_as_uint(r);
    int ok = r > 0x1p-100f && r < 0x1p100f && hi < 0x1p120f && isfinite(err);
    const float hu = (gm_as_float(u + 1) - r) * 0.5f, hd = (r - gm_as_float(u - 1)) * 0.5f;
    // above: n (r + hu) - S > err; below: S - n (r - hd) > err
    gm_fsum up = {-hi, -lo, 0.0f}, dn = {hi, lo, 0.0f};
    gm_fsum_add_ny(&up, n, r);
    gm_fsum_add_ny(&up, n, hu);
    gm_fsum_add_ny(&dn, n, -r);
    gm_fsum_add_ny(&dn, n, hd);
    const float vu = up.s + up.c, vd = dn.s + dn.c;
    const float slack = 1.0f + 0x1p-20f;
    ok = ok && vu - fabs(vu) * 0x1p-23f > (err + up.bound) * slack
            && vd - fabs(vd) * 0x1p-23f > (err + dn.bound) * slack;
    *bits = neg ? (u | 0x80000000u) : u;
    return ok;
}

// Stage 2: the FLOAT16 (is_half = 1) or BFLOAT16 (is_half = 0) bits of the correctly rounded S / n in
// *bits when settled, else 0, without fp64: gm_settle_ff_f32's test around a candidate of the narrow
// format (the float candidate, corrected once, rounded to the format; any candidate will do, the
// test decides) and its neighbours' midpoints (exact floats: the narrow format has fewer bits).
GM_INLINE int gm_settle_ff_narrow(float hi, float lo, float err, uint n, const int is_half, uint* bits) {
    const int neg = hi < 0.0f;
    if (neg) { hi = -hi; lo = -lo; }
    float c = hi / (float)n;
    gm_fsum rem = {hi, lo, 0.0f};
    gm_fsum_add_ny(&rem, n, -c);
    c = c + (rem.s + rem.c) / (float)n;
    const uint h = is_half ? (uint)gm_float_to_half(c) : (uint)gm_float_to_bf16(c);
    const float r = is_half ? gm_half_to_float((ushort)h) : gm_bf16_to_float((ushort)h);
    const float up = is_half ? gm_half_to_float((ushort)(h + 1u)) : gm_bf16_to_float((ushort)(h + 1u));
    const float dn = is_half ? gm_half_to_float((ushort)(h - 1u)) : gm_bf16_to_float((ushort)(h - 1u));
    int ok = h != 0u && r > 0.0f && isfinite(up) && r < 0x1p100f && hi < 0x1p120f && isfinite(err);
    const float hu = (up - r) * 0.5f, hd = (r - dn) * 0.5f;
    // above: n (r + hu) - S > err; below: S - n (r - hd) > err
    gm_fsum upper = {-hi, -lo, 0.0f}, lower = {hi, lo, 0.0f};
    gm_fsum_add_ny(&upper, n, r);
    gm_fsum_add_ny(&upper, n, hu);
    gm_fsum_add_ny(&lower, n, -r);
    gm_fsum_add_ny(&lower, n, hd);
    const float vu = upper.s + upper.c, vd = lower.s + lower.c;
    const float slack = 1.0f + 0x1p-20f;
    ok = ok && vu - fabs(vu) * 0x1p-23f > (err + upper.bound) * slack
            && vd - fabs(vd) * 0x1p-23f > (err + lower.bound) * slack;
    *bits = neg ? (h | 0x8000u) : h;     // both formats: the sign is bit 15
    return ok;
}

// A float-float accumulator that tracks its own error bound: TwoSum's error e of hi + x is exact, and
// adding it into lo rounds by at most 2^-24 |lo| (round to nearest), which the bound adds up (one
// more fma per value). gm_ff_bound: the bound padded for its own float additions (n < 2^20).
typedef struct { float hi, lo, bound; } gm_ff;

GM_INLINE void gm_ff_add(gm_ff* a, float x) {
    float s, e;
    gm_two_sum_f(a->hi, x, &s, &e);
    a->hi = s;
    a->lo += e;
    a->bound = fma(fabs(a->lo), 0x1p-24f, a->bound);
}

// merge two accumulators (a work-group's tree): both bounds carried, and both roundings of the new
// low word, each at most 2^-24 of what it rounds to: the low words' sum t, then t + e (e can cancel
// t, so the second's size does not bound the first's)
GM_INLINE void gm_ff_merge(gm_ff* a, const gm_ff* b) {
    float s, e;
    gm_two_sum_f(a->hi, b->hi, &s, &e);
    const float t = a->lo + b->lo;
    a->hi = s;
    a->lo = t + e;
    a->bound = fma(fabs(t) + fabs(a->lo), 0x1p-24f, a->bound + b->bound);
}

GM_INLINE float gm_ff_bound(const gm_ff* a, uint n) { return a->bound * (1.0f + (float)n * 0x1p-23f); }

#endif  // GM_EXACT_H
