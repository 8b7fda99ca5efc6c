// REDUCE AVERAGE (FLOAT32, FLOAT16), the exact integer mean reduction, the extension types' mean
// reduction (BFLOAT16, FLOAT64, INT64, UINT64) and the wide sum (gm.ext):
// one source for OpenCL and CUDA (cuda_kernels/dialect.h maps it; docs/design.md, "Kernels").
//
// Two kernel shapes, chosen by the host per device kind (gpu_mean/backends/reduce_kernels.py):
//   GPU-shaped (gm_reduce_row, _col, _general, _finalize): work-groups cooperate on an output with
//     coalesced loads, a local-memory tree (a warp shuffle on CUDA, same order) and barriers; every
//     kernel loops over its grid, so the host caps the grid at CUDA's limits
//     (gpu_mean/backends/gpu_geometry.py, shared by both backends). CUDA and OpenCL GPUs run these;
//     the opencl:0-gpupaths test device runs them on PoCL with CUDA's geometry.
//   CPU-shaped (*_serial; OpenCL CPU devices such as PoCL, which set GM_CPU_SHAPE to 1): each
//     work-item runs a serial, vectorized loop; no barriers, no local memory.
// A program holds the kernels of one shape.
// Both shapes share the accumulator, the metadata, the offsets and the final rounding below.
//
// Macros (gpu_mean/backends/reduce_kernels.py builds them from a plan):
//   T, OUT_T, ACC    storage, output and accumulator types (ACC: double for floats, a float with a
//                    Neumaier compensation term on a device without fp64, long / ulong for integers)
//   COMPENSATED      1 when ACC is the compensated float
//   GM_ACC0          the accumulators' start: -0.0 for floats (an exact zero total of -0.0s alone is
//                    -0.0, IEEE's sum), 0 for integers
//   GM_EXACT         the correctly rounded REDUCE AVERAGE (FLOAT32 / FLOAT16 / BFLOAT16 with fp64): the
//                    bound test in the store, a flag per output, gm_reduce_exact (GM_X_H, GM_X_BF16:
//                    the superaccumulator of FLOAT16, BFLOAT16 values; EX_WG its work-group;
//                    GM_SETTLE8, GM_Q8(t, n): eight FLOAT32 results at once; GM_FLAG_BITS: a bit per output;
//                    GM_XBLOCK: the CPU shape's block of passes that bounds the depth)
//   WIDE_INT, WIDE_FLOAT, GM_BF16_NOFP64  the two-word accumulators (common.h): INT64 / UINT64
//                    halves' sums, FLOAT64's gm_dd4, BFLOAT16's gm_ff4 without fp64
//   LOAD1(p)         the element at p as ACC (the two-word accumulators: as stored, they split it);
//                    STORE_RESULT(t, n, p)  t / n rounded once into *p (REDUCE_SUM: t itself; the
//                    two-word accumulators: t is the accumulator)
//   KN, RN, KNA, RNA ranks of the coalesced kept and reduced groups (KNA, RNA: at least 1)
//   META_BYTES       sizeof(gm_rmeta) on the host (checked below, in both languages)
//   GPU shape: WG (row kernel's work-group size), WARP_ROWS (a 32-wide slice per output),
//              ROW_MULTI (interleaved axes with a dense innermost run), COL_Y (col kernel's local
//              size in y; x is 32), FIN_WG (finalize work-group size); all multiples of 32
//   CPU shape: ACC8, X8 (a loaded vector's type), LOAD8(p), COLS, HALF_BLOCKS, TO_ACC8(v), PREFETCH,
//              SHORT_LEN, LOAD16(p), STORE8_FLOAT(t, p), EXACT_BF16 (rows of 8 in float where exact),
//              GM_H16C (FLOAT16 columns in exact chunks), GM_COL_SPAN (FLOAT32 and BFLOAT16 columns
//              of few rows: the span test's limit) and, where ACC
//              is not the compensated pair, STORE8_RESULT(t, n, p) (8 results at once, each t / n
//              rounded once; see those kernels)
// Every global access goes through GM_AT (opencl_kernels/common.h) as (argument, element index), so
// that the checked build tests it against the binding's extent: the arguments are the input, the
// output and the partials (the temporary resource: gm_acc [chunk][output]), numbered below.

// ---- shared by both shapes -----------------------------------------------------------------

#define GM_A_IN 0
#define GM_A_OUT 1
#define GM_A_PART 2
#define GM_A_FLAG 3
// w elements of the input from element i (i counts from the input buffer's start)
#define GM_IN1(i) LOAD1(GM_AT(GM_A_IN, const T, in, i, 1))
#define GM_IN8(i) LOAD8(GM_AT(GM_A_IN, const T, in, i, 8))
#define GM_PART(i) (*GM_AT(GM_A_PART, gm_acc, part, i, 1))
// an open output's flag (GM_EXACT): a byte per output, or a bit per output in bytes of eight (GM_FLAG_BITS)
#define GM_FLAG(i) (*GM_AT(GM_A_FLAG, uchar, flag, i, 1))

#ifndef GM_WIDE_SUM
#define GM_WIDE_SUM 0
#endif
#if GM_WIDE_SUM
// The wide sum's two-word totals (gm.ext.ReduceSumDesc over FLOAT64, INT64, UINT64; the host sets
// GM_WIDE_SUM and LO_T): a second output, the low word (argument GM_A_LO, element type LO_T, its own
// element offset and kept strides, gm_rmeta's keep_lo). Every function that touches global memory
// takes GM_CHK_P last and is called with GM_CHK_A last, so the low word's pointer and offset ride
// along with them: every kernel takes them after its own arguments (before the checked build's status
// buffer), and gm_store writes both words. Variants without GM_WIDE_SUM are unchanged.
#define GM_A_LO 4
#undef GM_CHK_P
#undef GM_CHK_A
#if GM_CHECKED
#define GM_CHK_P , __global LO_T* gm_lo, ulong gm_lo_off, __global long* gm_chk
#define GM_CHK_A , gm_lo, gm_lo_off, gm_chk
#else
#define GM_CHK_P , __global LO_T* gm_lo, ulong gm_lo_off
#define GM_CHK_A , gm_lo, gm_lo_off
#endif
#endif

#if COMPENSATED
typedef struct { ACC s; ACC c; } gm_acc;
// s from -0.0 (zeros alone keep IEEE's sign: -0.0 from -0.0s alone), c from +0.0
#define GM_ACC_ZERO(a) { (a).s = -0.0f; (a).c = 0; }
#define GM_ACC_ADD(a, x) { ACC x_ = (x); ACC t_ = (a).s + x_; \
    (a).c += (fabs((a).s) >= fabs(x_)) ? (((a).s - t_) + x_) : ((x_ - t_) + (a).s); (a).s = t_; }
#define GM_ACC_MERGE(a, b) { GM_ACC_ADD(a, (b).s); (a).c += (b).c; }
// an infinite sum leaves a NaN compensation term behind: the sum alone is the answer then (and
// where c is zero: s + 0 would turn a -0.0 sum into +0.0)
#define GM_ACC_TOTAL(a) (isfinite((a).s) && (a).c != 0 ? (a).s + (a).c : (a).s)
#define GM_ACC_FIELDS(X) X(s) X(c)
#elif WIDE_INT
// INT64 / UINT64: s sums the high 32-bit halves, c the low ones (common.h: GM_WIDE_ADD); STORE_RESULT
// takes the pair
typedef struct { ulong s; ulong c; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = 0; (a).c = 0; }
#define GM_ACC_ADD(a, x) { const T x_ = (x); GM_WIDE_ADD((a).s, (a).c, x_) }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).c += (b).c; }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(s) X(c)
#elif GM_BF16_NOFP64
// BFLOAT16 without fp64: two compensated float pairs (common.h: gm_ff4); STORE_RESULT takes the accumulator
typedef gm_ff4 gm_acc;
#define GM_ACC_ZERO(a) GM_FF4_ZERO(a)
#define GM_ACC_ADD(a, x) GM_FF4_ADD(a, x)
#define GM_ACC_MERGE(a, b) { gm_ff4_merge(&(a), (b)); }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(s) X(c) X(bs) X(bc)
#elif WIDE_FLOAT && GM_EXACT
// FLOAT64 REDUCE AVERAGE correctly rounded (issue 22 stage 3, GM_X_D): gm_dd4's fields, hi + lo the
// double-double of the values (GM_DD_ADD1, from -0.0: zeros alone keep IEEE's sign), bhi the largest
// magnitude m for gm_settle's bound; a value from 2^960 on, an infinity or a NaN makes m +inf (the
// exact pass then decides: IEEE's inf and NaN, totals past DBL_MAX) and adds -0.0 (no branch), so
// hi + lo never overflows
typedef gm_dd4 gm_acc;
#define GM_ACC_ZERO(a) { (a).hi = -0.0; (a).lo = 0.0; (a).bhi = 0.0; (a).blo = 0.0; }
#define GM_ACC_ADD(a, x) { const double x4_ = (x), ax4_ = fabs(x4_); const int ok4_ = ax4_ < 0x1p960; \
    GM_DD_ADD1((a).hi, (a).lo, ok4_ ? x4_ : -0.0) \
    (a).bhi = ok4_ ? (ax4_ > (a).bhi ? ax4_ : (a).bhi) : as_double(0x7FF0000000000000UL); }
#define GM_ACC_MERGE(a, b) { const gm_acc b_ = (b); GM_DD_ADD2((a).hi, (a).lo, b_.hi, b_.lo) \
    (a).bhi = b_.bhi > (a).bhi ? b_.bhi : (a).bhi; }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(hi) X(lo) X(bhi) X(blo)
#elif WIDE_FLOAT
// FLOAT64: two double-doubles (common.h: gm_dd4); STORE_RESULT takes the accumulator
typedef gm_dd4 gm_acc;
#define GM_ACC_ZERO(a) GM_DD4_ZERO(a)
#define GM_ACC_ADD(a, x) GM_DD4_ADD(a, x)
#define GM_ACC_MERGE(a, b) { gm_dd4_merge(&(a), (b)); }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(hi) X(lo) X(bhi) X(blo)
#elif GM_EXACT && GM_FF
// FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE without fp64: a float-float sum that tracks its own
// error bound (exact.h's gm_ff rules: TwoSum's error of each hi + x is exact, its addition into lo
// rounds by at most 2^-24 |lo|; a merge rounds twice, at lo_a + lo_b and at adding the TwoSum
// error, both added to the bound); pad keeps the partial 16 bytes
typedef struct { float hi, lo, bound, pad; } gm_acc;
#define GM_ACC_ZERO(a) { (a).hi = -0.0f; (a).lo = 0.0f; (a).bound = 0.0f; (a).pad = 0.0f; }
#define GM_ACC_ADD(a, x) { float s_, e_; gm_two_sum_f((a).hi, (float)(x), &s_, &e_); (a).hi = s_; \
    (a).lo += e_; (a).bound = fma(fabs((a).lo), 0x1p-24f, (a).bound); }
#define GM_ACC_MERGE(a, b) { const gm_acc b_ = (b); float s_, e_; gm_two_sum_f((a).hi, b_.hi, &s_, &e_); \
    const float t_ = (a).lo + b_.lo; (a).hi = s_; (a).lo = t_ + e_; \
    (a).bound = fma(fabs(t_), 0x1p-24f, fma(fabs((a).lo), 0x1p-24f, (a).bound + b_.bound)); }
#define GM_ACC_TOTAL(a) ((a).hi)
#define GM_ACC_FIELDS(X) X(hi) X(lo) X(bound) X(pad)
#elif GM_EXACT
// FLOAT32, FLOAT16, BFLOAT16 REDUCE AVERAGE with fp64: the FLOAT64 sum (from -0.0: zeros alone keep
// IEEE's sign) and m = max|x|, what the bound test of the store needs (gm_settle below)
typedef struct { ACC s; ACC m; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = -0.0; (a).m = 0.0; }
#define GM_ACC_ADD(a, x) { const ACC x_ = (x), ax_ = fabs(x_); (a).s += x_; (a).m = ax_ > (a).m ? ax_ : (a).m; }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m = (b).m > (a).m ? (b).m : (a).m; }
#define GM_ACC_TOTAL(a) ((a).s)
#define GM_ACC_FIELDS(X) X(s) X(m)
#else
typedef struct { ACC s; } gm_acc;
// GM_ACC0: -0.0 for a float accumulator (zeros alone keep IEEE's sign), 0 for integers
#define GM_ACC_ZERO(a) { (a).s = GM_ACC0; }
#define GM_ACC_ADD(a, x) { (a).s += (x); }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; }
#define GM_ACC_TOTAL(a) ((a).s)
#define GM_ACC_FIELDS(X) X(s)
#endif

// The plan's shapes and strides in elements (gpu_mean/backends/reduce_kernels.py: meta_struct).
typedef struct {
    long keep_shape[KNA], keep_in[KNA], keep_out[KNA];
    long red_shape[RNA], red_in[RNA];
    long depth;     // GM_EXACT: no value passes through more additions than this (gm_settle's bound)
#if GM_WIDE_SUM
    long keep_lo[KNA];  // the low word's kept strides
#endif
} gm_rmeta;
GM_STATIC_ASSERT(sizeof(gm_rmeta) == META_BYTES, gm_rmeta_differs_from_the_host_layout);

// a / b for non-negative values: a 32-bit division when both fit (a 64-bit one is a long software
// sequence on a GPU and slower on a CPU too)
GM_INLINE long gm_div(long a, long b) {
    return ((a | b) >> 31) == 0 ? (long)((uint)a / (uint)b) : a / b;
}

// Element offset of kept index k in the input (which = 1), the output (which = 2) or the wide sum's
// low word (which = 3, GM_WIDE_SUM); the outermost index is what is left, so it takes no division.
GM_INLINE long gm_keep_offset(__constant const gm_rmeta* m, long k, int which) {
#if GM_WIDE_SUM
    __constant const long* st = which == 1 ? m->keep_in : which == 2 ? m->keep_out : m->keep_lo;
#else
    __constant const long* st = which == 1 ? m->keep_in : m->keep_out;
#endif
    long off = 0;
#pragma unroll
    for (int d = KN - 1; d > 0; --d) {
        long q = gm_div(k, m->keep_shape[d]);
        off += (k - q * m->keep_shape[d]) * st[d];
        k = q;
    }
    return KN > 0 ? off + k * st[0] : 0;
}

// ROW_MULTI: the input offset of outer reduced index r (reduced dims 0 .. RN-2)
GM_INLINE long gm_run_offset(__constant const gm_rmeta* m, long r) {
    long off = 0;
#pragma unroll
    for (int d = RN - 2; d > 0; --d) {
        long q = gm_div(r, m->red_shape[d]);
        off += (r - q * m->red_shape[d]) * m->red_in[d];
        r = q;
    }
    return RN > 1 ? off + r * m->red_in[0] : 0;
}

#if GM_EXACT && GM_FF
// The bound test without fp64 (exact.h: gm_settle_ff_f32, gm_settle_ff_narrow): the float-float sum
// hi + lo within its tracked bound (padded for the bound's own float additions, valid for n < 2^22)
// of the exact total; the division is decided by exact remainders, never by trusting a float
// division. Sums that overflowed, inf, NaN and zero means are left to gm_reduce_exact: finite data
// never give inf or NaN.
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, uint* bits) {
    *bits = 0u;
    if (n >= (1ul << 22) || !isfinite(a.hi) || !isfinite(a.lo)) return 0;
    const float err = a.bound * (1.0f + (float)n * 0x1p-23f);
#if GM_X_H || GM_X_BF16
    return gm_settle_ff_narrow(a.hi, a.lo, err, (uint)n, GM_X_H, bits);
#else
    return gm_settle_ff_f32(a.hi, a.lo, err, (uint)n, bits);
#endif
}
#if GM_X_H || GM_X_BF16
#define GM_STORE_BITS(p, b) (*(__global ushort*)(p) = (ushort)(b))
#else
#define GM_STORE_BITS(p, b) (*(p) = gm_as_float(b))
#endif
#elif GM_EXACT && GM_X_D
// FLOAT64 (stage 3): the double-double's bound for any summation tree in which no value passes
// through more than ``depth`` additions (GM_DD_ADD1 and GM_DD_ADD2 err by at most 5 u^2 of the
// magnitudes they add; padded to 8 u^2): |s - S| <= depth 8 u^2 n m; then exact.h's
// gm_settle_dd_f64. Zeros alone (m = 0) give the sum's own sign; m = +inf (a value from 2^960 on,
// inf, NaN) goes to the exact pass.
#define GM_BITS_T ulong
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, ulong* bits) {
    const double err = (double)depth * 0x1p-103 * (double)n * a.bhi;      // +inf for m = +inf
    const int ok = gm_settle_dd_f64(a.hi, a.lo, err, (uint)n, bits);      // *bits: hi / n
    return (a.bhi == 0.0) | ok;     // no branch (PoCL vectorizes the store across work-items)
}
#define GM_STORE_BITS(p, b) (*(p) = as_double(b))
#elif GM_EXACT
// the output type's bits of a double rounded once (infinities, NaN, zeros)
#if GM_X_H
#define GM_BITS_OF(x) ((uint)gm_double_to_half(x))
#elif GM_X_BF16
#define GM_BITS_OF(x) ((uint)gm_double_to_bf16(x))
#else
#define GM_BITS_OF(x) gm_as_uint((float)(x))
#endif
#if GM_X_H || GM_X_BF16
#define GM_STORE_BITS(p, b) (*(__global ushort*)(p) = (ushort)(b))
#else
#define GM_STORE_BITS(p, b) (*(p) = gm_as_float(b))
#endif

// The bound test of the fast path (docs/design.md, "Correct rounding (issue 22)"): 1 and the bits of
// the correctly rounded mean in *bits when the FLOAT64 sum's error bound settles the rounding, else
// 0 (then gm_reduce_exact decides from the values). Higham's bound for any summation tree in which
// no value passes through more than ``depth`` additions: |s - S| <= gamma(depth) sum|x| <=
// depth u (1 + 2^-19) n m (the CPU shape's FLOAT16 float pre-sum, HALF_BLOCKS, is off in these
// variants: its bound left most zero-mean rows open). A FLOAT16 sum of at most 2^13 values is exact
// in FLOAT64 (the host then sets depth 0). An inf or NaN sum is IEEE's answer already (the
// FLOAT64 sum of narrow values cannot overflow), and zeros alone (m = 0) give the sum's own sign.
GM_INLINE int gm_settle(gm_acc a, ulong n, long depth, uint* bits) {
    const double s = a.s;
    if (!isfinite(s) || a.m == 0.0) {
        *bits = GM_BITS_OF(s / (double)n);
        return 1;
    }
    if (!(a.m <= 0x1p1023)) return 0;       // an inf or NaN among values the sum shares a bound with
    const double err = (double)depth * GM_U53 * (1.0 + 0x1p-19) * (double)n * a.m;
#if GM_X_H || GM_X_BF16
    ushort h;
#if GM_X_H
    const int ok = gm_settle_double_f16(s, err, (uint)n, &h);
#else
    const int ok = gm_settle_double_bf16(s, err, (uint)n, &h);
#endif
    *bits = h;
    return ok;
#else
    return gm_settle_double_f32(s, err, (uint)n, bits);
#endif
}
#endif

#if GM_EXACT
#ifndef GM_BITS_T
#define GM_BITS_T uint
#endif
// Store output element i (an element index into out) and its flag fi: 1 when the bound left it open.
GM_INLINE void gm_store(gm_acc a, ulong n, __global OUT_T* out, long i, __global uchar* flag, long fi,
                        __constant const gm_rmeta* m GM_CHK_P) {
    GM_BITS_T bits;
    const int ok = gm_settle(a, n, m->depth, &bits);
    GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, i, 1), bits);
    GM_FLAG(fi) = (uchar)(ok ? 0 : 1);
}
#elif GM_WIDE_SUM
// The two-word total of output element i (an element index into out; the low word's element from
// its own offset and strides). The wide sum has no flags: the host binds flag_off 0, so that fi is
// the output's kept index k (every caller passes flag_off + k).
#if WIDE_INT
// INT64 / UINT64: the total s 2^32 + c as hi 2^64 + lo (gpu_mean/runtime/wide.py: int_sum0 then
// words128): A = s + (c >> 32) (its true value fits A's type), then hi = A >> 32 with the type's own
// shift (arithmetic for INT64), lo = (A << 32) | (c mod 2^32)
#define GM_WIDE_WORDS(a, hi, lo) { const ulong A_ = (a).s + ((a).c >> 32); \
    hi = (OUT_T)((T)A_ >> 32); lo = (A_ << 32) | ((a).c & 0xFFFFFFFFUL); }
#else
// FLOAT64: gm_dd4's total as a normalized double-double (hi == fl(hi + lo)), with the CPU device's
// rules (wide.py: f64_sum0): an inf or NaN input gives NaN if a NaN or both infinities are present,
// else the infinity, and lo 0; a total past DBL_MAX gives the infinity and lo 0; a zero total is -0.0
// only when every input is (bhi is +0.0 once big values cancelled, and hi + bhi is then +0.0).
// With values from 2^960 on, (bhi + blo) 2^64 + hi + lo is added scaled by 2^-64 (AccurateDWPlusDW)
// and scaled back (exact).
#define GM_WIDE_WORDS(a, hi, lo) { const gm_dd4 a_ = (a); \
    if (!isfinite(a_.bhi)) { hi = isnan(a_.bhi) ? as_double(0x7FF8000000000000UL) : a_.bhi; lo = 0.0; } \
    else if (a_.bhi == 0) { hi = a_.hi + a_.bhi; lo = a_.lo; } \
    else { double h_ = a_.bhi, l_ = a_.blo; GM_DD_ADD2(h_, l_, a_.hi * 0x1p-64, a_.lo * 0x1p-64) \
        hi = h_ * 0x1p64; lo = isfinite(hi) ? l_ * 0x1p64 : 0.0; } }
#endif
GM_INLINE void gm_store(gm_acc a, ulong n, __global OUT_T* out, long i, __global uchar* flag, long fi,
                        __constant const gm_rmeta* m GM_CHK_P) {
    OUT_T hi;
    LO_T lo;
    GM_WIDE_WORDS(a, hi, lo)
    *GM_AT(GM_A_OUT, OUT_T, out, i, 1) = hi;
    *GM_AT(GM_A_LO, LO_T, gm_lo, (long)gm_lo_off + gm_keep_offset(m, fi, 3), 1) = lo;
}
#else
// Divide once, round once, store output element i (an element index into out); no flags.
GM_INLINE void gm_store(gm_acc a, ulong n, __global OUT_T* out, long i, __global uchar* flag, long fi,
                        __constant const gm_rmeta* m GM_CHK_P) {
    STORE_RESULT(GM_ACC_TOTAL(a), n, GM_AT(GM_A_OUT, OUT_T, out, i, 1));
}
#endif

// Output k's sum over chunk ``chunk``: its partial slot when the reduction is split, else its result.
GM_INLINE void gm_emit(gm_acc a, ulong n, __global OUT_T* out, ulong out_off, __global gm_acc* part,
                       ulong part_off, __global uchar* flag, ulong flag_off, int use_part,
                       __constant const gm_rmeta* m, long k, long chunk, long n_out GM_CHK_P) {
    if (use_part) GM_PART((long)part_off + chunk * n_out + k) = a;
    else gm_store(a, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag, (long)flag_off + k, m GM_CHK_A);
}

#if RN > 0
// The walk of one output's reduced index space, with a carried multi-index: element j's digits in
// idx and its input offset (relative to the output's base), then each next element's offset.
GM_INLINE long gm_walk_start(long j, long* idx, __constant const gm_rmeta* m) {
    long rem = j, off = 0;
#pragma unroll
    for (int d = RN - 1; d >= 0; --d) {
        long q = gm_div(rem, m->red_shape[d]);
        idx[d] = rem - q * m->red_shape[d];
        rem = q;
        off += idx[d] * m->red_in[d];
    }
    return off;
}
GM_INLINE long gm_walk_next(long off, long* idx, __constant const gm_rmeta* m) {
#pragma unroll
    for (int d = RN - 1; d >= 0; --d) {
        off += m->red_in[d];
        if (++idx[d] < m->red_shape[d]) break;
        off -= idx[d] * m->red_in[d];
        idx[d] = 0;
    }
    return off;
}
#endif

// The sum of elements [j, end) of the reduced index space of one output (input offset base): the
// general class (broadcast or padded inputs, interleaved axes), in either shape.
GM_INLINE gm_acc gm_general_sum(__global const T* in, long base, __constant const gm_rmeta* m, long j, long end
                                GM_CHK_P) {
    gm_acc s;
    GM_ACC_ZERO(s);
#if RN > 0
    long idx[RNA];
    long off = gm_walk_start(j, idx, m);
    for (; j < end; ++j) {
        GM_ACC_ADD(s, GM_IN1(base + off));
        off = gm_walk_next(off, idx, m);
    }
#else
    if (j < end) GM_ACC_ADD(s, GM_IN1(base));
#endif
    return s;
}

#if GM_EXACT
// ---- the exact path (gm_reduce_exact, both shapes) ------------------------------------------
// The outputs whose flag the bound test set are summed again from their values into exact.h's
// superaccumulator (integer limbs: every finite value exactly, in any order and grouping), then
// divided and rounded with exact.h's integer division: the correctly rounded mean, IEEE's inf and
// NaN, -0.0 for a negative mean that rounds to zero and for an exact zero total of -0.0s alone.
#if GM_X_D
typedef gm_xacc_d gm_xacc;
#define GM_XK GM_XK_D
#define GM_XINIT(a) gm_xacc_d_init(a)
#define GM_XADD(a, p) gm_xacc_d_add(a, *(p))
#define GM_XMERGE(a, b) gm_xacc_d_merge(a, b)
#define GM_XNORM(a) gm_xacc_d_normalize(a)
#define GM_XMEAN(a, n) gm_xacc_d_mean(a, n)
#elif GM_X_H
typedef gm_xacc_h gm_xacc;
#define GM_XK GM_XK_H
#define GM_XINIT(a) gm_xacc_h_init(a)
#define GM_XADD(a, p) gm_xacc_h_add(a, *(__global const ushort*)(p))
#define GM_XMERGE(a, b) gm_xacc_h_merge(a, b)
#define GM_XNORM(a) gm_xacc_h_normalize(a)
#define GM_XMEAN(a, n) ((uint)gm_xacc_h_mean(a, n))
#elif GM_X_BF16
typedef gm_xacc_f gm_xacc;
#define GM_XK GM_XK_F
#define GM_XINIT(a) gm_xacc_f_init(a)
#define GM_XADD(a, p) gm_xacc_f_add_bf16(a, *(p))
#define GM_XMERGE(a, b) gm_xacc_f_merge(a, b)
#define GM_XNORM(a) gm_xacc_f_normalize(a)
#define GM_XMEAN(a, n) ((uint)gm_xacc_f_mean_bf16(a, n))
#else
typedef gm_xacc_f gm_xacc;
#define GM_XK GM_XK_F
#define GM_XINIT(a) gm_xacc_f_init(a)
#define GM_XADD(a, p) gm_xacc_f_add(a, *(p))
#define GM_XMERGE(a, b) gm_xacc_f_merge(a, b)
#define GM_XNORM(a) gm_xacc_f_normalize(a)
#define GM_XMEAN(a, n) gm_xacc_f_mean(a, n)
#endif

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

// The second tier (exact.h, gm_dd2): FLOAT32, FLOAT16 and BFLOAT16 with fp64, the CPU shape's exact
// pass. An open output's n values summed as h + c; the quotient's rounding decided from it unless
// the sum is zero or its errors rounded (then the superaccumulator above).
#if USE_FP64 && !GM_X_D && GM_CPU_SHAPE
#define GM_DD_TIER 1
#if GM_X_H
#define GM_DD_FMT 1
#elif GM_X_BF16
#define GM_DD_FMT 2
#else
#define GM_DD_FMT 0
#endif
#if GM_DD_FMT == 1
#define GM_DD_EMIN (-14)
#define GM_DD_PM1 10
#elif GM_DD_FMT == 2
#define GM_DD_EMIN (-126)
#define GM_DD_PM1 7
#else
#define GM_DD_EMIN (-126)
#define GM_DD_PM1 23
#endif
// Whether a FLOAT64 sum s of n values of the format, added in any order, is their exact total, from
// their largest magnitude mx and smallest nonzero one mn: every value is a multiple of u, mn's ulp in
// the format (a larger value's ulp is u times a power of two; a subnormal's is the format's least),
// and so is every partial sum, of magnitude below n mx: exact in double while n mx < 2^53 u (fl(n mx)
// < 2^53 u, a power of two, implies it). Not finite (inf, NaN): no.
GM_INLINE int gm_sum_is_exact(double s, double mx, double mn, ulong n) {
    const double u = ldexp(1.0, max(ilogb(mn), GM_DD_EMIN) - GM_DD_PM1);
    return isfinite(s) && mx != 0.0 && (double)n * mx < u * 0x1p53;
}
// First a plain FLOAT64 sum with the values' largest and smallest nonzero magnitudes: where it is
// exact (gm_sum_is_exact: values within about 29 - log2(n) binades for FLOAT32; always for FLOAT16
// runs below 2^13), it is the pair (s, 0) and decides at once, a dependent addition a value instead of
// two TwoSums (short columns of normal data: about one output in ten is an exact tie, all settled
// here). Else the pair h + c.
// stmt for each of the output's n values, loaded as the double x, in the walk's order
#define GM_DD_LANES_MIN 32      // innermost reduced runs of at least this many values take the lanes
#if RN > 0
#define GM_DD_EACH(stmt) { long idx_[RNA]; long off_ = gm_walk_start(0, idx_, m); \
    for (ulong j_ = 0; j_ < n; ++j_) { \
        const double x = LOAD1(GM_AT(GM_A_IN, const T, in, base + off_, 1)); stmt; \
        off_ = gm_walk_next(off_, idx_, m); } }
#else
#define GM_DD_EACH(stmt) { if (n) { const double x = LOAD1(GM_AT(GM_A_IN, const T, in, base, 1)); stmt; } }
#endif
#if RN > 0
// The pair's pass over eight lanes (docs/design.md, "The exact pass's second tier"): one open output
// of a whole reduction (R1) or of a few long columns (R5) is redone by one work-item, and the scalar
// passes are chains of dependent additions (about 20 cycles a value in the pair's). The values go as
// runs of the innermost reduced dimension (its length L and stride st), eight at a time into eight
// lanes, a run's last values through the scalar statement. A lane's pair h + c is its values' exact
// total while its c's errors are zero, so the eight lanes' pairs added into one gm_dd2 give the exact
// total, or set bad: the bits are those of the scalar passes (both give the correctly rounded mean,
// or leave the output to the superaccumulator). No plain sum first: where it would be exact, so is
// the pair (its errors are all zero), and in lanes the plain sum's pass cost more than the pair's
// (a whole FLOAT32 reduction of 2^23 values: about 2.9 against 2 ms on PoCL).
GM_INLINE double8 gm_dd_load8(__global const T* in, long p, long st GM_CHK_P) {
    return (double8)(LOAD1(GM_AT(GM_A_IN, const T, in, p, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + st, 1)),
                     LOAD1(GM_AT(GM_A_IN, const T, in, p + 2 * st, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + 3 * st, 1)),
                     LOAD1(GM_AT(GM_A_IN, const T, in, p + 4 * st, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + 5 * st, 1)),
                     LOAD1(GM_AT(GM_A_IN, const T, in, p + 6 * st, 1)), LOAD1(GM_AT(GM_A_IN, const T, in, p + 7 * st, 1)));
}
// a lane's TwoSums: x8 joins h8, h8's error joins c8, an error of c8 sets bad8
GM_INLINE void gm_dd_two8(double8* h8, double8* c8, long8* bad8, const double8 x8) {
    const double8 h = *h8, c = *c8;
    const double8 sv = h + x8, bv = sv - h, e = (h - (sv - bv)) + (x8 - bv);
    const double8 t = c + e, cv = t - c, f = (c - (t - cv)) + (e - cv);
    *h8 = sv; *c8 = t; *bad8 |= (f != (double8)(0.0));
}
// Blocks of GM_DD_BLK vectors: each lane's plain FLOAT64 sum of its GM_DD_BLK values, with the
// largest and smallest nonzero magnitudes' bits, is exact when every value is a multiple of u (the
// smallest one's ulp in its format, gm_sum_is_exact's argument) and GM_DD_BLK times the largest is
// below 2^53 u: 2^(emx + 1 + 6) <= 2^(53 + max(emn, emin) - (p - 1)). Then the block's lane sums
// join the pair by one TwoSum each; else (a lane spanning more binades, an inf or a NaN) the block
// goes value by value through the TwoSums. Five operations a vector instead of about twelve.
#define GM_DD_BLK 64
#define GM_DD_BLOCK(LD) { \
    double8 s_ = (double8)(0.0); \
    ulong8 mx_ = (ulong8)(0), mn_ = (ulong8)(0xFFFFFFFFFFFFFFFFul); \
    for (int i_ = 0; i_ < GM_DD_BLK; ++i_) { \
        const double8 x8 = LD(j_ + 8 * i_); \
        const ulong8 mag_ = as_ulong8(x8) & (ulong8)(0x7FFFFFFFFFFFFFFFul); \
        s_ += x8; mx_ = max(mx_, mag_); mn_ = min(mn_, mag_ - (ulong8)(1)); } \
    const long8 emx_ = as_long8(mx_ >> 52) - 1023; \
    const long8 emn_ = max(as_long8((mn_ + (ulong8)(1)) >> 52) - 1023, (long8)(GM_DD_EMIN)); \
    if (all(emx_ + 7 <= emn_ + (53 - GM_DD_PM1))) gm_dd_two8(&h8, &c8, &bad8, s_); \
    else for (int i_ = 0; i_ < GM_DD_BLK; ++i_) gm_dd_two8(&h8, &c8, &bad8, LD(j_ + 8 * i_)); }
#define GM_DD_LD1(i) GM_IN8(p_ + (i))
#define GM_DD_LDS(i) gm_dd_load8(in, p_ + (i) * st_, st_ GM_CHK_A)
GM_INLINE int gm_dd_output_lanes(__global const T* in, long base, __constant const gm_rmeta* m, ulong n, uint* bits
                                 GM_CHK_P) {
    gm_dd2 a;
    gm_dd2_init(&a);
    double8 h8 = (double8)(0.0), c8 = (double8)(0.0);
    long8 bad8 = (long8)(0);
    // the output's values as runs of the innermost reduced dimension (length L, stride st), each in
    // blocks, then vectors, then its last values one by one
    const long st_ = m->red_in[RN - 1], L_ = m->red_shape[RN - 1];
    const ulong runs_ = n / (ulong)L_;
    long idx_[RNA];
    for (ulong r_ = 0; r_ < runs_; ++r_) {
        const long p_ = base + gm_walk_start((long)r_ * L_, idx_, m);
        long j_ = 0;
        if (st_ == 1) {
            for (; j_ + 8 * GM_DD_BLK <= L_; j_ += 8 * GM_DD_BLK) GM_DD_BLOCK(GM_DD_LD1)
            for (; j_ + 8 <= L_; j_ += 8) gm_dd_two8(&h8, &c8, &bad8, GM_DD_LD1(j_));
        } else {
            for (; j_ + 8 * GM_DD_BLK <= L_; j_ += 8 * GM_DD_BLK) GM_DD_BLOCK(GM_DD_LDS)
            for (; j_ + 8 <= L_; j_ += 8) gm_dd_two8(&h8, &c8, &bad8, GM_DD_LDS(j_));
        }
        for (; j_ < L_; ++j_) gm_dd2_add(&a, LOAD1(GM_AT(GM_A_IN, const T, in, p_ + j_ * st_, 1)));
    }
    double hh[8], cc[8];
    vstore8(h8, 0, hh); vstore8(c8, 0, cc);
    for (int k = 0; k < 8; ++k) { gm_dd2_add(&a, hh[k]); gm_dd2_add(&a, cc[k]); }
    bad8.lo |= bad8.hi; bad8.s01 |= bad8.s23;
    a.bad |= (bad8.s0 | bad8.s1) != 0;
    return gm_dd2_settle(&a, (uint)n, GM_DD_FMT, bits);
}
#endif
GM_INLINE int gm_dd_output(__global const T* in, long base, __constant const gm_rmeta* m, ulong n, uint* bits
                           GM_CHK_P) {
#if RN > 0
    if (m->red_shape[RN - 1] >= GM_DD_LANES_MIN) return gm_dd_output_lanes(in, base, m, n, bits GM_CHK_A);
#endif
    gm_dd2 a;
    gm_dd2_init(&a);
    double s = 0.0, mx = 0.0, mn = INFINITY;
    GM_DD_EACH(s += x; mx = fmax(mx, fabs(x)); mn = x != 0.0 ? fmin(mn, fabs(x)) : mn)
    if (gm_sum_is_exact(s, mx, mn, n)) {
        a.h = s;
        return gm_dd2_settle(&a, (uint)n, GM_DD_FMT, bits);
    }
    GM_DD_EACH(gm_dd2_add(&a, x))
    return gm_dd2_settle(&a, (uint)n, GM_DD_FMT, bits);
}
#else
#define GM_DD_TIER 0
#endif

GM_INLINE void gm_exact_store(gm_xacc* x, ulong n, __global OUT_T* out, long i GM_CHK_P) {
    const GM_BITS_T bits = GM_XMEAN(x, (uint)n);
    GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, i, 1), bits);
}
#endif  // GM_EXACT

#if GM_EXACT
// ---- exact partials (gm_reduce_limbs, both shapes) -----------------------------------------
// The partial sums that cross split pieces and gpu_mean.dask chunks (docs/design.md, "Partials
// across boundaries"): every output's values deposited into exact.h's superaccumulator, no bound
// test, no rounding. Each output's reduced index space is cut into n_chunks runs of clen values;
// run c of output k writes GM_XK normalized limbs and then the flags (as a long) at
// part[part_off + (c * n_out + k) * (GM_XK + 1)]. The host adds the runs (integers: exact in any
// order) and rounds once.
// The values' bits in their own layout: exponent field width and place, significand bits (FLOAT64:
// gm_limbs_range_d below)
#if GM_X_D
#elif GM_X_H
#define GM_LBITS(p) ((uint)*(__global const ushort*)(p))
#define GM_LMB 10
#define GM_LEMAX 31u
#define GM_LNEG0 0x8000u
#elif GM_X_BF16
#define GM_LBITS(p) ((uint)*(p) << 16)
#define GM_LMB 23
#define GM_LEMAX 255u
#define GM_LNEG0 0x80000000u
#else
#define GM_LBITS(p) gm_as_uint(*(p))
#define GM_LMB 23
#define GM_LEMAX 255u
#define GM_LNEG0 0x80000000u
#endif
#define GM_LB 1024      // values per block of the integer fast path
#define GM_LSPAN 29     // exponent span whose block sum fits a long: 2^(24 + 29 + 10) = 2^63

// Deposit elements [j, end) of one output (input offset base; one reduced dimension of stride st)
// block by block: a block whose values are all finite and whose exponent fields (at least 1) lie
// within GM_LSPAN of each other is summed exactly in a long, in units of its smallest value's
// ulp (m << (e - e0) has at most 24 + 29 bits, 1024 of them fit 63), and that sum is deposited
// as two 32-bit halves at the unit's place; any other block goes value by value (gm_exact_range:
// flags, every exponent). Exact either way: the limbs are the same integers.
#if GM_X_D
#define GM_LDSPAN 63    // FLOAT64: exponent span of a block summed in 128 bits: 2^(53 + 63 + 10) < 2^127

// the magnitude hi:lo (below 2^126) times 2^s added (neg: subtracted) into the limbs s / 32 ..
// s / 32 + 4, as the halves of its four 32-bit digits shifted by s mod 32 (each below 2^32)
GM_INLINE void gm_limbs_d_deposit128(gm_xacc_d* x, ulong hi, ulong lo, int s, int neg) {
    const int sh = s & 31, k = s >> 5;
    const ulong w[4] = {lo & 0xFFFFFFFFul, lo >> 32, hi & 0xFFFFFFFFul, hi >> 32};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const ulong v = w[i] << sh;
        const long a = (long)(v & 0xFFFFFFFFul), b = (long)(v >> 32);
        x->d[k + i] += neg ? -a : a;
        x->d[k + i + 1] += neg ? -b : b;
    }
}

// FLOAT64 elements [j, end) of one output (one reduced dimension of stride st), block by block: a
// block whose values are all finite and whose exponent fields (at least 1) lie within GM_LDSPAN of
// each other is summed exactly in two unsigned 128-bit integers (the positive and the negative
// values' magnitudes, in units of the block's smallest ulp: m << (e - e0) has at most 53 + 63 bits,
// 1024 of them stay below 2^126), each deposited once (gm_limbs_d_deposit128); any other block goes
// value by value (gm_exact_range: flags, every exponent). The limbs are normalized every 2^16
// blocks of either kind (a limb takes below 2^34 per summed block, below 2^43 per block value by value).
GM_INLINE void gm_limbs_range_d(gm_xacc* x, __global const T* in, long base, __constant const gm_rmeta* m, long j,
                                long end GM_CHK_P) {
    const long st = m->red_in[0];
    long blocks = 0;
    for (long b = j; b < end; b += GM_LB) {
        const long e = min(end, b + GM_LB);
        uint hi = 0, lo = 0x7FFu;
        for (long i = b; i < e; ++i) {
            const ulong u = as_ulong(*GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (uint)(u >> 52) & 0x7FFu;
            hi = max(hi, ef);
            lo = min(lo, (u << 1) ? max(ef, 1u) : 0x7FFu);        // zeros do not count
        }
        lo = min(lo, max(hi, 1u));      // a block of zeros alone
        if ((++blocks & 0xFFFF) == 0) GM_XNORM(x);      // blocks of either kind
        if (hi == 0x7FFu || max(hi, 1u) - lo > GM_LDSPAN) {
            gm_exact_range(x, in, base, m, b, e GM_CHK_A);
            continue;
        }
        ulong ph = 0, pl = 0, nh = 0, nl = 0;
        uint seen = 0;
        for (long i = b; i < e; ++i) {
            const ulong u = as_ulong(*GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (uint)(u >> 52) & 0x7FFu;
            const ulong f = u & 0xFFFFFFFFFFFFFul, mm = ef ? (f | 0x10000000000000ul) : f;
            const uint t = mm ? max(ef, 1u) - lo : 0u;            // 0 .. 63
            const ulong vl = mm << t, vh = t ? mm >> (64u - t) : 0ul;
            if (u >> 63) {
                nl += vl;
                nh += vh + (nl < vl ? 1ul : 0ul);
            } else {
                pl += vl;
                ph += vh + (pl < vl ? 1ul : 0ul);
            }
            seen |= (u != 0x8000000000000000ul);
        }
        x->flags |= seen ? GM_XF_NOT_NEG0 : 0u;
        gm_limbs_d_deposit128(x, ph, pl, (int)lo - 1, 0);
        gm_limbs_d_deposit128(x, nh, nl, (int)lo - 1, 1);
    }
}
#endif

GM_INLINE void gm_limbs_range(gm_xacc* x, __global const T* in, long base, __constant const gm_rmeta* m, long j,
                              long end GM_CHK_P) {
#if RN == 1 && GM_X_D
    gm_limbs_range_d(x, in, base, m, j, end GM_CHK_A);
#elif RN == 1
    const long st = m->red_in[0];
    long blocks = 0;
    for (long b = j; b < end; b += GM_LB) {
        const long e = min(end, b + GM_LB);
        uint hi = 0, lo = GM_LEMAX;
        for (long i = b; i < e; ++i) {
            const uint u = GM_LBITS(GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (u >> GM_LMB) & GM_LEMAX;
            hi = max(hi, ef);
            lo = min(lo, (u & ~GM_LNEG0) ? max(ef, 1u) : GM_LEMAX);     // zeros do not count
        }
        lo = min(lo, max(hi, 1u));      // a block of zeros alone
        // every 2^16 blocks of either kind the limbs are normalized: a block adds below 2^42 to a
        // limb value by value (1024 deposits below 2^32), below 2^33 summed: far from 2^63 between two
        if ((++blocks & 0xFFFF) == 0) GM_XNORM(x);
        if (hi == GM_LEMAX || max(hi, 1u) - lo > GM_LSPAN) {
            gm_exact_range(x, in, base, m, b, e GM_CHK_A);
            continue;
        }
        long acc = 0;
        uint seen = 0;
        for (long i = b; i < e; ++i) {
            const uint u = GM_LBITS(GM_AT(GM_A_IN, const T, in, base + i * st, 1));
            const uint ef = (u >> GM_LMB) & GM_LEMAX, f = u & ((1u << GM_LMB) - 1u);
            const uint mm = ef ? (f | (1u << GM_LMB)) : f;
            const long v = mm ? ((long)mm << (max(ef, 1u) - lo)) : 0l;
            acc += (u & GM_LNEG0) ? -v : v;
            seen |= (u != GM_LNEG0);
        }
        x->flags |= seen ? GM_XF_NOT_NEG0 : 0u;
        const ulong a = (ulong)(acc < 0 ? -acc : acc);
        gm_xlimbs_deposit(x->d, GM_XK, (uint)(a & 0xFFFFFFFFul), (int)lo - 1, acc < 0);
        gm_xlimbs_deposit(x->d, GM_XK, (uint)(a >> 32), (int)lo - 1 + 32, acc < 0);
    }
#else
    gm_exact_range(x, in, base, m, j, end GM_CHK_A);
#endif
}

GM_INLINE void gm_limbs_write(gm_xacc* x, __global long* part, long i GM_CHK_P) {
    GM_XNORM(x);
#pragma unroll
    for (int j = 0; j < GM_XK; ++j) *GM_AT(GM_A_PART, long, part, i + j, 1) = x->d[j];
    *GM_AT(GM_A_PART, long, part, i + GM_XK, 1) = (long)x->flags;
}
#endif

#if GM_EXACT
// ---- exact partials combined on the device (issue 26: split calls) ---------------------------
// Both shapes, a work-item per output. gm_limbs_add adds one piece's partials (its n_chunks runs'
// limbs and flags, as gm_reduce_limbs wrote them at part) into the running totals acc (GM_XK limbs
// and the flags per output of the whole call; output k of the piece is acc's output dst[k]): the
// limbs added digit by digit, the carries moved up (every limb but the top one back in [0, 2^32),
// as exact.h's normalize leaves them), the flags ORed. A limb's sum stays far below 2^63 (a digit
// below 2^32 per run, plus the carry). gm_limbs_round rounds each output's running total to the
// output type (exact.h: the division, the zero rule, IEEE's inf and NaN) and stores it at out[k].
__kernel void gm_limbs_add(__global const long* restrict part, __global long* restrict acc,
                           __global const long* restrict dst, long n_out, long n_chunks GM_CHK_P) {
    const long k = (long)get_global_id(0);
    if (k >= n_out) return;
    const long a = *GM_AT(GM_A_FLAG, const long, dst, k, 1) * (GM_XK + 1);
    long carry = 0, flags = *GM_AT(GM_A_PART, long, acc, a + GM_XK, 1);
    for (long c = 0; c < n_chunks; ++c)
        flags |= *GM_AT(GM_A_IN, const long, part, (c * n_out + k) * (GM_XK + 1) + GM_XK, 1);
    for (int j = 0; j < GM_XK; ++j) {
        long d = *GM_AT(GM_A_PART, long, acc, a + j, 1) + carry;
        for (long c = 0; c < n_chunks; ++c) d += *GM_AT(GM_A_IN, const long, part, (c * n_out + k) * (GM_XK + 1) + j, 1);
        carry = j < GM_XK - 1 ? d >> 32 : 0;        // arithmetic shift: floor(d / 2^32)
        *GM_AT(GM_A_PART, long, acc, a + j, 1) = d - carry * 4294967296l;
    }
    *GM_AT(GM_A_PART, long, acc, a + GM_XK, 1) = flags;
}

__kernel void gm_limbs_round(__global const long* restrict acc, __global OUT_T* restrict out, long n_out,
                             ulong n GM_CHK_P) {
    const long k = (long)get_global_id(0);
    if (k >= n_out) return;
    gm_xacc x;
#pragma unroll
    for (int j = 0; j < GM_XK; ++j) x.d[j] = *GM_AT(GM_A_PART, const long, acc, k * (GM_XK + 1) + j, 1);
    x.flags = (uint)*GM_AT(GM_A_PART, const long, acc, k * (GM_XK + 1) + GM_XK, 1);
    gm_exact_store(&x, n, out, k GM_CHK_A);
}
#endif

// ---- GPU-shaped kernels ----------------------------------------------------------------------
#if !GM_CPU_SHAPE

#if GM_WARP_SHUFFLE
GM_INLINE gm_acc gm_shfl_down(gm_acc a, int offset) {
    gm_acc r;
#define GM_SHFL_FIELD(f) r.f = GM_SHFL_DOWN(a.f, offset);
    GM_ACC_FIELDS(GM_SHFL_FIELD)
#undef GM_SHFL_FIELD
    return r;
}
#endif

// The sum of every 32-wide slice of the work-group, returned to the slice's first work-item: a
// halving tree over offsets 16, 8, 4, 2, 1. The warp shuffle and the portable local-memory form add
// in the same order, so CUDA and PoCL give the same bits for the same geometry. Every work-item of
// the group must call it (the portable form has barriers); scratch holds the group's size.
GM_INLINE gm_acc gm_slice_sum(gm_acc v, LOCAL_PTR gm_acc* scratch, int lid) {
#if GM_WARP_SHUFFLE
    for (int o = 16; o > 0; o >>= 1) {
        gm_acc w = gm_shfl_down(v, o);
        GM_ACC_MERGE(v, w);
    }
#else
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 16; o > 0; o >>= 1) {
        if ((lid & 31) < o) {   // reads [o, 2o) of the slice, writes [0, o): no overlap
            gm_acc w = scratch[lid + o];
            GM_ACC_MERGE(v, w);
            scratch[lid] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    return v;
}

// The sum over a work-group of n_slices * 32 work-items, returned to work-item 0: each slice's sum,
// then the slice sums (zero past the last) summed as one more slice. Every work-item must call it.
GM_INLINE gm_acc gm_group_sum(gm_acc v, LOCAL_PTR gm_acc* scratch, int lid, int n_slices) {
    v = gm_slice_sum(v, scratch, lid);
    if ((lid & 31) == 0) scratch[lid >> 5] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    gm_acc t;
    GM_ACC_ZERO(t);
    if (lid < n_slices) t = scratch[lid];
    barrier(CLK_LOCAL_MEM_FENCE);   // every slice sum read before the tree below rewrites scratch
    return gm_slice_sum(t, scratch, lid);
}

// This work-item's share of the dense run in[base + i0, base + i1): elements lane, lane + width, ...
// with four accumulators, so that four loads are in flight.
GM_INLINE gm_acc gm_run_sum(__global const T* in, long base, long i0, long i1, int lane, int width GM_CHK_P) {
    gm_acc s0, s1, s2, s3;
    GM_ACC_ZERO(s0); GM_ACC_ZERO(s1); GM_ACC_ZERO(s2); GM_ACC_ZERO(s3);
    long i = i0 + lane;
    for (; i + 3 * width < i1; i += 4 * width) {
        GM_ACC_ADD(s0, GM_IN1(base + i));
        GM_ACC_ADD(s1, GM_IN1(base + i + width));
        GM_ACC_ADD(s2, GM_IN1(base + i + 2 * width));
        GM_ACC_ADD(s3, GM_IN1(base + i + 3 * width));
    }
    for (; i < i1; i += width) GM_ACC_ADD(s0, GM_IN1(base + i));
    GM_ACC_MERGE(s0, s1); GM_ACC_MERGE(s2, s3); GM_ACC_MERGE(s0, s2);
    return s0;
}

// Row class: output k's run is [0, len) at stride 1; chunk c is elements [c*clen, c*clen + clen).
// ROW_MULTI: output k's reduced space is ``runs`` dense runs of len elements; a chunk is clen runs.
// WARP_ROWS: each 32-wide slice of the group takes its own output (short runs); otherwise the whole
// group takes one output. Loops run the same number of times for every work-item of a group (the
// barriers in the sums need that); a slice past the last output adds zeros and stores nothing.
__kernel void gm_reduce_row(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                            ulong out_off, __global gm_acc* restrict part, ulong part_off, __global uchar* restrict flag,
                            ulong flag_off, int use_part,
                            GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks, ulong n,
                            long runs GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_acc scratch[WG];
    const int lid = (int)get_local_id(0);
#if WARP_ROWS
    const int lane = lid & 31, width = 32, per_group = WG / 32;
#else
    const int lane = lid, width = WG, per_group = 1;
#endif
    const long step = (long)get_num_groups(0) * per_group;
    for (long chunk = (long)get_group_id(1); chunk < n_chunks; chunk += (long)get_num_groups(1)) {
        for (long k0 = (long)get_group_id(0) * per_group; k0 < n_out; k0 += step) {
            const long k = k0 + lid / width;
            gm_acc s;
            GM_ACC_ZERO(s);
            if (k < n_out) {
                const long base = (long)in_off + gm_keep_offset(m, k, 1);
#if ROW_MULTI
                for (long r = chunk * clen, r1 = min(runs, r + clen); r < r1; ++r) {
                    gm_acc t = gm_run_sum(in, base + gm_run_offset(m, r), 0, len, lane, width GM_CHK_A);
                    GM_ACC_MERGE(s, t);
                }
#else
                s = gm_run_sum(in, base, chunk * clen, min(len, chunk * clen + clen), lane, width GM_CHK_A);
#endif
            }
#if WARP_ROWS
            s = gm_slice_sum(s, scratch, lid);
#else
            s = gm_group_sum(s, scratch, lid, WG / 32);
#endif
            if (lane == 0 && k < n_out) gm_emit(s, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, chunk, n_out GM_CHK_A);
        }
    }
}

// Column class: [outer kept..., R (stride rs), inner kept I (stride 1 in input and output)].
// A (32, COL_Y) work-group: x on 32 adjacent columns (coalesced), y splitting the chunk's rows;
// local memory adds the COL_Y row sums of each column in order.
__kernel void gm_reduce_col(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                            ulong out_off, __global gm_acc* restrict part, ulong part_off, __global uchar* restrict flag,
                            ulong flag_off, int use_part,
                            GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks, ulong n,
                            long inner, long rs, long n_outer GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_acc tile[COL_Y][33];
    const int lx = (int)get_local_id(0), ly = (int)get_local_id(1);
    for (long chunk = (long)get_group_id(2); chunk < n_chunks; chunk += (long)get_num_groups(2)) {
        for (long o = (long)get_group_id(1); o < n_outer; o += (long)get_num_groups(1)) {
            for (long cb = (long)get_group_id(0); cb * 32 < inner; cb += (long)get_num_groups(0)) {
                const long col = cb * 32 + lx;
                gm_acc s;
                GM_ACC_ZERO(s);
                if (col < inner) {
                    const long base = (long)in_off + gm_keep_offset(m, o * inner + col, 1);
                    long r = chunk * clen + ly;
                    const long end = min(len, chunk * clen + clen);
                    gm_acc s1;
                    GM_ACC_ZERO(s1);
                    for (; r + COL_Y < end; r += 2 * COL_Y) {
                        GM_ACC_ADD(s, GM_IN1(base + r * rs));
                        GM_ACC_ADD(s1, GM_IN1(base + (r + COL_Y) * rs));
                    }
                    if (r < end) GM_ACC_ADD(s, GM_IN1(base + r * rs));
                    GM_ACC_MERGE(s, s1);
                }
                tile[ly][lx] = s;
                barrier(CLK_LOCAL_MEM_FENCE);
                if (ly == 0 && col < inner) {
                    gm_acc t = tile[0][lx];
                    for (int y = 1; y < COL_Y; ++y) GM_ACC_MERGE(t, tile[y][lx]);
                    gm_emit(t, n, out, out_off, part, part_off, flag, flag_off, use_part, m, o * inner + col, chunk, n_out GM_CHK_A);
                }
                barrier(CLK_LOCAL_MEM_FENCE);   // the tile is rewritten by the next column block
            }
        }
    }
}

// General class (broadcast or padded inputs, interleaved axes without a dense run): a work-item per
// (output, chunk), walking the chunk of the reduced index space with a carried multi-index.
__kernel void gm_reduce_general(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                                ulong out_off, __global gm_acc* restrict part, ulong part_off,
                                __global uchar* restrict flag, ulong flag_off, int use_part,
                                GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks,
                                ulong n GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    const long step = (long)get_global_size(0);
    for (long chunk = (long)get_group_id(1); chunk < n_chunks; chunk += (long)get_num_groups(1)) {
        for (long k = (long)get_global_id(0); k < n_out; k += step) {
            const long j = chunk * clen;
            gm_acc s = gm_general_sum(in, (long)in_off + gm_keep_offset(m, k, 1), m, j, min(len, j + clen) GM_CHK_A);
            gm_emit(s, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, chunk, n_out GM_CHK_A);
        }
    }
}

// Second pass of a split reduction: a work-group per output; work-item t merges chunks t, t + FIN_WG,
// ... in order, then the group's tree adds those: a fixed order whatever the timing (deterministic).
__kernel void gm_reduce_finalize(__global const gm_acc* restrict part, ulong part_off, long n_chunks, long n_out,
                                 __global OUT_T* restrict out, ulong out_off, __global uchar* restrict flag,
                                 ulong flag_off, GM_META_ARG(gm_rmeta, m), ulong n GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_acc scratch[FIN_WG];
    const int lid = (int)get_local_id(0);
    for (long k = (long)get_group_id(0); k < n_out; k += (long)get_num_groups(0)) {
        gm_acc s;
        GM_ACC_ZERO(s);
        for (long c = lid; c < n_chunks; c += FIN_WG) {
            gm_acc b = GM_PART((long)part_off + c * n_out + k);
            GM_ACC_MERGE(s, b);
        }
        s = gm_group_sum(s, scratch, lid, FIN_WG / 32);
        if (lid == 0) gm_store(s, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag, (long)flag_off + k, m GM_CHK_A);
    }
}


#if GM_EXACT
// The EX_WG work-items' superaccumulators in xs merged through local memory by a halving tree (a
// fixed order; exact anyway): the total is in xs[0] when it returns. Every work-item of the group
// calls it (its barriers).
GM_INLINE void gm_xacc_tree(LOCAL_PTR gm_xacc* xs, const int lid) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = EX_WG / 2; o > 0; o >>= 1) {
        if (lid < o) {
            gm_xacc a = xs[lid], b = xs[lid + o];
            GM_XMERGE(&a, &b);
            xs[lid] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// The exact path, GPU shape: work-groups of EX_WG work-items over blocks of EX_WG outputs (grid-
// stride). The block's flags are read once (coalesced) into local memory; a block with none set
// costs that read alone. For each open output, every work-item deposits a contiguous share of the
// output's values into its own superaccumulator (limbs in registers), normalizes it, and the shares
// merge through local memory in a halving tree (fixed order; exact anyway); work-item 0 divides,
// rounds and stores. The flags are uniform over the group, so every barrier is reached by all.
__kernel void gm_reduce_exact(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                              ulong out_off, __global const uchar* restrict flag, ulong flag_off,
                              GM_META_ARG(gm_rmeta, m), long n_out, ulong n GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_xacc xs[EX_WG];
    __local uchar open[EX_WG];
    const int lid = (int)get_local_id(0);
    const long share = ((long)n + EX_WG - 1) / EX_WG;
    for (long k0 = (long)get_group_id(0) * EX_WG; k0 < n_out; k0 += (long)get_num_groups(0) * EX_WG) {
        open[lid] = k0 + lid < n_out ? *GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + k0 + lid, 1) : (uchar)0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = 0; t < EX_WG; ++t) {
            if (!open[t]) continue;
            const long k = k0 + t;
            gm_xacc x;
            GM_XINIT(&x);
            const long j0 = min((long)n, lid * share);
            gm_exact_range(&x, in, (long)in_off + gm_keep_offset(m, k, 1), m, j0, min((long)n, j0 + share) GM_CHK_A);
            GM_XNORM(&x);
            xs[lid] = x;
            gm_xacc_tree(xs, lid);
            if (lid == 0) {
                gm_xacc a = xs[0];
                gm_exact_store(&a, n, out, (long)out_off + gm_keep_offset(m, k, 2) GM_CHK_A);
            }
            barrier(CLK_LOCAL_MEM_FENCE);   // xs is rewritten for the next open output
        }
        barrier(CLK_LOCAL_MEM_FENCE);       // open[] is rewritten for the next block
    }
}
#endif

#if GM_EXACT
// Exact partials, GPU shape: a work-group of EX_WG work-items per (run, output) pair (grid-stride);
// each work-item deposits a contiguous share of the run, the shares merge through local memory in a
// halving tree and work-item 0 writes the limbs. Every work-item reaches every barrier.
__kernel void gm_reduce_limbs(__global const T* restrict in, ulong in_off, __global long* restrict part,
                              ulong part_off, GM_META_ARG(gm_rmeta, m), long n_out, ulong n, long n_chunks,
                              long clen GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_xacc xs[EX_WG];
    const int lid = (int)get_local_id(0);
    const long share = (clen + EX_WG - 1) / EX_WG;
    for (long t = (long)get_group_id(0); t < n_out * n_chunks; t += (long)get_num_groups(0)) {
        const long c = t / n_out, k = t - c * n_out;
        const long end = min((long)n, (c + 1) * clen);
        const long j0 = min(end, c * clen + lid * share);
        gm_xacc x;
        GM_XINIT(&x);
        gm_limbs_range(&x, in, (long)in_off + gm_keep_offset(m, k, 1), m, j0, min(end, j0 + share) GM_CHK_A);
        GM_XNORM(&x);
        xs[lid] = x;
        gm_xacc_tree(xs, lid);
        if (lid == 0) {
            gm_xacc a = xs[0];
            gm_limbs_write(&a, part, (long)part_off + t * (GM_XK + 1) GM_CHK_A);
        }
        barrier(CLK_LOCAL_MEM_FENCE);       // xs is rewritten for the next pair
    }
}
#endif

// ---- CPU-shaped kernels (OpenCL CPU devices) ---------------------------------------------------
#else

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
// The exact path, CPU shape: each kernel that stores results redoes the outputs it left open before
// it returns (no second launch: on PoCL a launch costs about as much as the exact pass of the few
// outputs normal data leaves open). gm_redo_open scans the flags of outputs [k0, k1) (sixteen bytes at
// a time; GM_FLAG_BITS: a bit per output, k0 a multiple of 8) and sums each open output's values
// again: the second tier first (gm_dd_output), else the superaccumulator, block by block where the
// values' exponents allow (gm_limbs_range: a block of 1024 values within 29 binades summed in a long,
// about 19x the value-by-value deposit on cancelling FLOAT32 data); then divides, rounds and stores.
GM_INLINE void gm_redo_open(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                            __global const uchar* flag, ulong flag_off, __constant const gm_rmeta* m,
                            long k0, long k1, ulong n GM_CHK_P) {
#if GM_FLAG_BITS
    const long f0 = k0 >> 3, f1 = (k1 + 7) >> 3;
#else
    const long f0 = k0, f1 = k1;
#endif
    for (long f = f0; f < f1; ++f) {
        if (f + 16 <= f1) {      // sixteen flag bytes at once: nearly always all clear
            const uchar16 v = vload16(0, GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + f, 16));
            const ulong2 w = as_ulong2(v);
            if ((w.s0 | w.s1) == 0) { f += 15; continue; }
        }
        const uint byte = *GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + f, 1);
        if (byte == 0) continue;
#if GM_FLAG_BITS
        for (int bit = 0; bit < 8; ++bit) {
            const long k = f * 8 + bit;
            if (!((byte >> bit) & 1u) || k >= k1) continue;
#else
        {
            const long k = f;
#endif
            const long ib = (long)in_off + gm_keep_offset(m, k, 1), ob = (long)out_off + gm_keep_offset(m, k, 2);
#if GM_DD_TIER
            uint bits;
            if (n < 0x100000000ul && gm_dd_output(in, ib, m, n, &bits GM_CHK_A)) {
                GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, ob, 1), bits);
                continue;
            }
#endif
            gm_xacc x;
            GM_XINIT(&x);
            gm_limbs_range(&x, in, ib, m, 0, (long)n GM_CHK_A);
            gm_exact_store(&x, n, out, ob GM_CHK_A);
        }
    }
}
#if GM_DD_TIER && RN == 1
// The column kernel's open outputs (GM_REDO_OPEN_COLS): ncols adjacent columns from input element b
// on, n rows rs apart, outputs k0 .. k0 + ncols - 1 (a flag byte each). Redone one by one, each open
// column would be read down its rows alone, a value per cache line, eight lines of the same rows
// read eight times: on standardized columns (each column's mean a rounding residue near zero, every
// output open) that ran at about 0.05 of the main pass. Here eight adjacent columns with an open one
// among them go down their rows together: each column's pair h + c in a lane (gm_dd2_add's
// operations, the column's values in row order, as the scalar pass adds them), then each open
// column's pair is settled as gm_dd_output's (gm_dd2_settle), or the column goes to the
// superaccumulator (gm_limbs_range, strided).
GM_INLINE void gm_redo_open_cols(__global const T* in, long b, long rs, __global OUT_T* out, ulong out_off,
                                 __global const uchar* flag, ulong flag_off, __constant const gm_rmeta* m,
                                 long k0, long ncols, ulong n GM_CHK_P) {
    for (long g = 0; g < ncols; g += 8) {
        const int w = (int)min(8l, ncols - g);
        uint open = 0;
        for (int j = 0; j < w; ++j)
            open |= (*GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + k0 + g + j, 1) != 0) ? (1u << j) : 0u;
        if (!open) continue;
        double8 h8 = (double8)(0.0), c8 = (double8)(0.0);
        long8 bad8 = (long8)(0);
        for (ulong r = 0; r < n; ++r) {
            const long q = b + (long)r * rs + g;
            double xs[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
            double8 x8;
            if (w == 8) {
                x8 = GM_IN8(q);
            } else {
                for (int j = 0; j < w; ++j) xs[j] = LOAD1(GM_AT(GM_A_IN, const T, in, q + j, 1));
                x8 = vload8(0, xs);
            }
            gm_dd_two8(&h8, &c8, &bad8, x8);
        }
        double hh[8], cc[8];
        long bb[8];
        vstore8(h8, 0, hh); vstore8(c8, 0, cc); vstore8(bad8, 0, bb);
        for (int j = 0; j < w; ++j) {
            if (!((open >> j) & 1u)) continue;
            const long k = k0 + g + j, ob = (long)out_off + gm_keep_offset(m, k, 2);
            gm_dd2 a;
            a.h = hh[j]; a.c = cc[j]; a.bad = bb[j] != 0;
            uint bits;
            if (n < 0x100000000ul && gm_dd2_settle(&a, (uint)n, GM_DD_FMT, &bits)) {
                GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, ob, 1), bits);
                continue;
            }
            gm_xacc x;
            GM_XINIT(&x);
            gm_limbs_range(&x, in, b + g + j, m, 0, (long)n GM_CHK_A);
            gm_exact_store(&x, n, out, ob GM_CHK_A);
        }
    }
}
#endif
// in a kernel with the main kernels' parameter names: outputs [k0, k1) settled (GM_FAST_ONLY, for
// tests only: the fast path alone, open outputs keep the bound test's candidate)
#if GM_FAST_ONLY
#define GM_REDO_OPEN(k0, k1)
#else
#define GM_REDO_OPEN(k0, k1) gm_redo_open(in, in_off, out, out_off, flag, flag_off, m, k0, k1, n GM_CHK_A)
#endif
// the finalize pass reads the values of the outputs it leaves open
#define GM_FIN_IN , __global const T* in, ulong in_off
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

// Row class: work-item (k, chunk) sums [chunk*clen, +clen) of row k.
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
#define GM_DD8_ADD(h, l, x) { const double8 s_ = h + (x), bb_ = s_ - h; \
    const double8 e_ = ((h - (s_ - bb_)) + ((x) - bb_)) + l; \
    h = select(s_ + e_, s_, e_ == (double8)(0.0)); l = e_ - (h - s_); }
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
    // rows on the CPU shape"): passes of 64 values from four 16-wide loads; a load's even elements
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
#else
#if COMPENSATED
    a.c = c8.s0 + c8.s1 + c8.s2 + c8.s3 + c8.s4 + c8.s5 + c8.s6 + c8.s7;
#endif
    GM_ACC_ADD(a, t8.s0); GM_ACC_ADD(a, t8.s1); GM_ACC_ADD(a, t8.s2); GM_ACC_ADD(a, t8.s3);
    GM_ACC_ADD(a, t8.s4); GM_ACC_ADD(a, t8.s5); GM_ACC_ADD(a, t8.s6); GM_ACC_ADD(a, t8.s7);
    GM_MAX8_TO(a)   // the lane sums' magnitudes above are no larger than n m: m8 alone is the bound's m
#endif
#endif
    for (; i < end; ++i) GM_ACC_ADD(a, GM_IN1(b + i));
    gm_emit(a, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, chunk, n_out GM_CHK_A);
    if (!use_part) GM_REDO_OPEN(k, k + 1);
}

#if GM_SETTLE8
// Eight results of FLOAT32 at once (the short-rows and column kernels): gm_settle lane by lane, for
// eight totals t whose values' magnitudes are at most mx (one bound for the eight). The quotient
// GM_Q8 is t / n, or the exact product by 1/n for a power of two. Returns the lanes the bound leaves
// open (-1); the other lanes of *res are the correctly rounded means.
GM_INLINE int8 gm_settle8(ACC8 t, double mx, long depth, ulong n, float8* res) {
    const ACC8 q = GM_Q8(t, n);
    // the error of the sum over n, and of the quotient and the two ends (4 u |q|, with |q| <= mx):
    // one pad for the eight lanes, as gm_settle_double_f32's but with mx for |q|
    const double pad = ((double)depth * (1.0 + 0x1p-19) * (1.0 + 0x1p-40) + 4.0) * GM_U53 * mx;
    const float8 lo = convert_float8(q - (ACC8)(pad)), hi = convert_float8(q + (ACC8)(pad));
    // a zero mean of values not all zero is open too: its ends are -pad and +pad (errn > 0 whenever
    // mx > 0 and n > 1), whose signs differ; for n = 1 the mean is the value itself
    int8 open = as_int8(lo) != as_int8(hi);
    *res = lo;
    // mx holds the values' largest bits: an inf or NaN among them makes it inf or NaN
    if (mx == 0.0 || !(mx <= 0x1p1023)) {
        // zeros alone, infinities, NaN: one rounding is IEEE's answer; finite sums beside an inf or
        // NaN of another lane (mx is then no bound): the exact pass
        const int8 special = (mx == 0.0) ? (int8)(-1) : ~convert_int8(isfinite(q));
        *res = select(lo, convert_float8(q), special);
        open = (mx <= 0x1p1023) ? (open & ~special) : ~special;
    }
    return open;
}
#endif

#if GM_SETTLE8_BF16
// gm_settle8 for BFLOAT16 (the column kernel's eight adjacent results, reduce_kernels.b16_cols): the
// same ends, rounded once to bfloat16 each (GM_BF16_BITS8: through FLOAT32 rounded to odd, as
// gm_double_to_bf16), equal bits settle a lane; the lanes the bound leaves open are -1. Lane for lane
// the rule of gm_settle with gm_settle_double_bf16 (mx bounds every lane's values; its pad covers
// err / n and the quotient's and the ends' roundings, as gm_settle8's).
GM_INLINE int8 gm_settle8_bf16(ACC8 t, double mx, long depth, ulong n, ushort8* res) {
    const ACC8 q = GM_Q8(t, n);
    const double pad = ((double)depth * (1.0 + 0x1p-19) * (1.0 + 0x1p-40) + 4.0) * GM_U53 * mx;
    const ushort8 lo = GM_BF16_BITS8(q - (ACC8)(pad)), hi = GM_BF16_BITS8(q + (ACC8)(pad));
    // a zero mean of values not all zero is open: its ends -pad and +pad round to -0.0 and +0.0
    int8 open = convert_int8(lo != hi);
    *res = lo;
    if (mx == 0.0 || !(mx <= 0x1p1023)) {
        // zeros alone, infinities, NaN: one rounding is IEEE's answer; finite sums beside an inf or
        // NaN of another lane (mx is then no bound): the exact pass
        const int8 special = (mx == 0.0) ? (int8)(-1) : convert_int8(~isfinite(q) != 0);
        *res = select(lo, GM_BF16_BITS8(q), convert_ushort8(special));
        open = (mx <= 0x1p1023) ? (open & ~special) : ~special;
    }
    return open;
}
#endif

#if SHORT_LEN && !GM_X_D
// Short dense rows (SHORT_LEN elements, a multiple of 8 up to 32; row k at k * SHORT_LEN, output k
// at k): work-item g takes rows [g * clen, + clen), eight at a time. Each row's 8-lane vectors are
// added, then a transpose tree of three levels sums the eight rows' lanes pairwise, so the eight
// results leave in one vector through one 8-wide store (STORE8_RESULT: divided, rounded once each).
// Per row the order is ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)), the same for the rows after the last
// full eight (a row of -0.0 gives -0.0, IEEE's sum, as the other kernels' accumulators from -0.0).
// Only where ACC is a plain vector type (no compensated pair): reduce_kernels.short_rows.
// FLOAT32 (GM_SETTLE8): each eight rows' largest magnitude for the bound, the results through
// gm_settle8 and the eight rows' open flags as the bits of one byte (GM_FLAG_BITS: byte r / 8; clen
// is a multiple of 8, so each work-item owns its bytes). FLOAT16 needs no flag: a sum of at most 32
// halves is exact in FLOAT64, and rounding its quotient once to half is the correctly rounded mean
// (reduce_kernels.f16_direct).
GM_INLINE ACC8 gm_row8(__global const T* in, long b GM_CHK_P) {
    ACC8 v = GM_IN8(b);
    for (int j = 8; j < SHORT_LEN; j += 8) v += GM_IN8(b + j);
    return v;
}
#define GM_PAIRS(a, b) ((ACC8)((a).s0246 + (a).s1357, (b).s0246 + (b).s1357))
#ifdef LOAD16
// two rows of 8 through one 16-wide load (FLOAT16: PoCL converts vload_half16 at the copy's speed,
// vload_half8 at about half of it)
GM_INLINE ACC8 gm_rows2(__global const T* in, long b GM_CHK_P) {
    float16 h = LOAD16(GM_AT(GM_A_IN, const T, in, b, 16));
    return GM_PAIRS(TO_ACC8(h.lo), TO_ACC8(h.hi));
}
#define GM_ROWS2(b) gm_rows2(in, (b) GM_CHK_A)
#endif
#ifdef STORE8_FLOAT
// FLOAT16 rows of 8 summed in float, exactly: a float sum of eight halves is exact when the nonzero
// values' exponents span at most 10 binades (every partial sum is a multiple of the smallest value's
// half ulp, 2^(emin - 10), and below 2^(emax + 4): 24 bits). Checked per block of eight rows on the
// float exponent fields, zeros left out (an infinity or NaN never passes beside a finite value).
// Blocks that pass take a float tree (twice double's lanes per instruction), the others the double
// path: either way each row's total is exact, so the result is the same rounded mean.
// BFLOAT16 (EXACT_BF16): 13 binades (8-bit significands: multiples of 2^(emin - 7)); its subnormals
// stay float subnormals (exponent field 0) and count as 2^-126, whose ulp 2^-133 they are multiples
// of; a block with a value from 2^125 on (eight could pass FLT_MAX; inf and NaN) takes the double path.
#define GM_PAIRS16(a, b) ((float16)((a).even + (a).odd, (b).even + (b).odd))
#if !EXACT_BF16
#define GM_EXP16(x) (as_uint16(x) & 0x7f800000u)
// whether the block's nonzero exponent fields lie at most 10 binades apart (a zero's field wraps to
// the top of lo; FLOAT16's subnormals are normal floats)
GM_INLINE int gm_exact_in_float(float16 a, float16 b, float16 c, float16 d) {
    const uint16 ea = GM_EXP16(a), eb = GM_EXP16(b);
    const uint16 ec = GM_EXP16(c), ed = GM_EXP16(d);
    const uint16 hi = max(max(ea, eb), max(ec, ed));
    const uint16 lo = min(min(ea - 1u, eb - 1u), min(ec - 1u, ed - 1u));   // a zero wraps to the top
    const uint8 h8 = max(hi.lo, hi.hi), l8 = min(lo.lo, lo.hi);
    const uint4 h4 = max(h8.lo, h8.hi), l4 = min(l8.lo, l8.hi);
    const uint2 h2 = max(h4.lo, h4.hi), l2 = min(l4.lo, l4.hi);
    const uint h = max(h2.x, h2.y), l = min(l2.x, l2.y);
    return l == 0xFFFFFFFFu || h <= l + 1u + (10u << 23);
}
#else
// BFLOAT16 rows of 8 test the span on the values' own 16 bits, before they are widened: a
// magnitude's bits order as its exponent field, so the block needs only its largest magnitude and its
// smallest nonzero one (as its bits minus one, a zero wrapping to 0xFFFF), four 16-bit operations per
// sixteen values (the same test on the widened floats' exponent fields took about twice as many, on
// 32-bit lanes, and cost the kernel about a fifth of FLOAT16's bytes per second). Returns the largest
// exponent field and the smallest nonzero one counted from 1 (subnormals are multiples of 2^-133,
// 2^-126's ulp), the latter 1000 when the block is all zeros (every span test passes).
GM_INLINE int2 gm_b16_block_exps(ushort16 a, ushort16 b, ushort16 c, ushort16 d) {
    const ushort16 k = (ushort16)(0x7FFF), one = (ushort16)(1);
    a &= k; b &= k; c &= k; d &= k;
    const ushort16 hi = max(max(a, b), max(c, d));
    const ushort16 lo = min(min(a - one, b - one), min(c - one, d - one));
    const ushort8 h8 = max(hi.lo, hi.hi), l8 = min(lo.lo, lo.hi);
    const ushort4 h4 = max(h8.lo, h8.hi), l4 = min(l8.lo, l8.hi);
    const ushort2 h2 = max(h4.lo, h4.hi), l2 = min(l4.lo, l4.hi);
    const uint h = max(h2.x, h2.y), l = min(l2.x, l2.y);
    return (int2)((int)(h >> 7), l == 0xFFFFu ? 1000 : max((int)((l + 1u) >> 7), 1));
}
// the float test (13 binades, below 2^125: gm_exact_in_float's rule) on gm_b16_block_exps' pair
#define GM_B16_IN_FLOAT(e) ((e).x - (e).y <= 13 && (e).x <= 251)
// BFLOAT16 blocks that fail the float test: their FLOAT64 sums are still exact when the nonzero
// exponent fields span at most 42 binades and every value is finite (each value a multiple of
// 2^(e_lo - 134), every partial sum of at most 8 below 2^(e_hi - 123): span + 11 <= 53 bits; no
// FLOAT64 overflow), so STORE8_RESULT's one rounding of the exact quotient by 8 is the correctly
// rounded mean and the block needs no exact pass. Normal data: about 1 % of blocks fail the float
// test (a value below 2^-12), nearly none this one (test_bfloat16_rows_of_8_double_path_span).
#define GM_B16_IN_DOUBLE(e) ((e).x - (e).y <= 42 && (e).x <= 254)     // finite: below 255
// The float path's first level without widening: a uint lane holds two neighbours' bits, the even
// one in its low half, so a shift and a mask make both floats, and their sum is the pair of the
// row's tree (any order gives the same exact sums, -0.0 rule included); the results are finite
// (below 2^128), so their rounding skips the NaN test (STORE8_FLOAT: GM_BF16_VEC_FINITE)
#define GM_B16_PAIRS8(u) (as_float8(as_uint8(u) << 16) + as_float8(as_uint8(u) & (uint8)(0xFFFF0000u)))
GM_BF16_VEC_FINITE(8)
#endif
#endif
#ifndef LOAD16
#define GM_ROWS2(b) GM_PAIRS(gm_row8(in, (b) GM_CHK_A), gm_row8(in, (b) + SHORT_LEN GM_CHK_A))
#endif
#if GM_SETTLE8
// the largest magnitude of w rows from b, in the storage type (FLOAT32)
GM_INLINE double gm_rows_max(__global const T* in, long b, int w GM_CHK_P) {
    int8 m8i = (int8)(0);
    int j = 0;
    if (w == 8) {       // eight rows: sixteen values per integer max
        int16 m16i = (int16)(0);
        for (; j < 8 * SHORT_LEN; j += 16) m16i = max(m16i, GM_MAG16(vload16(0, GM_AT(GM_A_IN, const T, in, b + j, 16))));
        m8i = max(m16i.lo, m16i.hi);
    }
    for (; j < w * SHORT_LEN; j += 8) m8i = max(m8i, GM_MAG8(vload8(0, GM_AT(GM_A_IN, const T, in, b + j, 8))));
    return gm_max8_value(m8i);
}
#endif
#if GM_SHORT_POW2
// Whether the FLOAT64 sums of eight rows from b are exact: every value is a multiple of the smallest
// nonzero value's ulp, 2^(max(e_lo, 1) - 150) (e: the exponent field), and every partial sum of at
// most 32 values is below 2^(e_hi - 121): at most 53 bits when e_hi - max(e_lo, 1) <= 24. Then the
// quotient by a power of two is exact too, and its one rounding to FLOAT32 is the correctly
// rounded mean, exact ties included (the rows the bound test leaves open: about 5 % of rows of 8
// normal values are exact ties of the rounding).
// (issue 24: the magnitudes' bits carry the exponent order, so the loop keeps only the largest
// magnitude and the smallest nonzero one, as its bits minus one with a zero wrapping to the top:
// four operations per sixteen values instead of eight; the exponents are taken once at the end.)
GM_INLINE int gm_rows_exact(__global const T* in, long b GM_CHK_P) {
    uint16 hi = (uint16)(0), lo = (uint16)(0xFFFFFFFFu);
    for (int j = 0; j < 8 * SHORT_LEN; j += 16) {
        const uint16 a = as_uint16(vload16(0, GM_AT(GM_A_IN, const T, in, b + j, 16))) & (uint16)(0x7FFFFFFFu);
        hi = max(hi, a);
        lo = min(lo, a - (uint16)(1u));
    }
    hi.lo = max(hi.lo, hi.hi); lo.lo = min(lo.lo, lo.hi);
    hi.s0123 = max(hi.s0123, hi.s4567); lo.s0123 = min(lo.s0123, lo.s4567);
    hi.s01 = max(hi.s01, hi.s23); lo.s01 = min(lo.s01, lo.s23);
    const int e_hi = (int)(max(hi.s0, hi.s1) >> 23), e_lo = max((int)((min(lo.s0, lo.s1) + 1u) >> 23), 1);
    return e_hi - e_lo <= 24;
}
#endif
__kernel void gm_reduce_short_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                     __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off,
                                     int use_part, __constant const gm_rmeta* m, long n_out, long len, long clen,
                                     ulong n GM_CHK_P) {
    long r = get_global_id(0) * clen;
    const long r_first = r, end = min(n_out, r + clen);
    long b = (long)in_off + r * SHORT_LEN;
    for (; r + 8 <= end; r += 8, b += 8 * SHORT_LEN) {
        GM_PREFETCH(in, b, PREFETCH);
#if EXACT_BF16
        const ushort16 u0 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b, 16));
        const ushort16 u1 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + 16, 16));
        const ushort16 u2 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + 32, 16));
        const ushort16 u3 = GM_VLOAD_BF16(16, GM_AT(GM_A_IN, const T, in, b + 48, 16));
        const int2 ex = gm_b16_block_exps(u0, u1, u2, u3);
        if (GM_B16_IN_FLOAT(ex)) {
            const float16 d = GM_PAIRS16((float16)(GM_B16_PAIRS8(u0), GM_B16_PAIRS8(u1)),
                                         (float16)(GM_B16_PAIRS8(u2), GM_B16_PAIRS8(u3)));
#elif defined(STORE8_FLOAT)
        const float16 h0 = LOAD16(GM_AT(GM_A_IN, const T, in, b, 16));
        const float16 h1 = LOAD16(GM_AT(GM_A_IN, const T, in, b + 16, 16));
        const float16 h2 = LOAD16(GM_AT(GM_A_IN, const T, in, b + 32, 16));
        const float16 h3 = LOAD16(GM_AT(GM_A_IN, const T, in, b + 48, 16));
        if (gm_exact_in_float(h0, h1, h2, h3)) {
            const float16 d = GM_PAIRS16(GM_PAIRS16(h0, h1), GM_PAIRS16(h2, h3));
#endif
#ifdef STORE8_FLOAT
            // (an exact zero total keeps IEEE's sign: -0.0 from -0.0s alone, issue 22's rule)
            STORE8_FLOAT(d.even + d.odd, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
#if GM_EXACT
            GM_FLAG((long)flag_off + (r >> 3)) = (uchar)0;      // exact sums, one rounding: settled
#endif
            continue;
        }
#endif
        ACC8 w01 = GM_ROWS2(b), w23 = GM_ROWS2(b + 2 * SHORT_LEN);
        ACC8 w45 = GM_ROWS2(b + 4 * SHORT_LEN), w67 = GM_ROWS2(b + 6 * SHORT_LEN);
        ACC8 t = GM_PAIRS(GM_PAIRS(w01, w23), GM_PAIRS(w45, w67));
#if GM_SETTLE8
        float8 res;
        int8 open;
#if GM_SHORT_POW2
        if (gm_rows_exact(in, b GM_CHK_A)) {     // exact sums: one rounding decides, ties included
            res = convert_float8(GM_Q8(t, n));
            open = (int8)(0);
        } else
#endif
        open = gm_settle8(t, gm_rows_max(in, b, 8 GM_CHK_A), m->depth, n, &res);
        vstore8(res, 0, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
        uchar fbits = 0;
        if (any(open)) {
            const int8 bit = open & (int8)(1, 2, 4, 8, 16, 32, 64, 128);
            fbits = (uchar)((bit.s0 | bit.s1 | bit.s2 | bit.s3) | (bit.s4 | bit.s5 | bit.s6 | bit.s7));
        }
        GM_FLAG((long)flag_off + (r >> 3)) = fbits;
#else
        STORE8_RESULT(t, n, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
#if GM_EXACT
        // BFLOAT16 blocks the float test did not prove exact (more than 13 binades, or values from
        // 2^125 on): settled where the FLOAT64 sums are exact (GM_B16_IN_DOUBLE), otherwise
        // the exact pass decides these eight rows
        GM_FLAG((long)flag_off + (r >> 3)) = GM_B16_IN_DOUBLE(ex) ? (uchar)0 : (uchar)0xFF;
#endif
#endif
    }
#if GM_EXACT
    const long r0 = r;
    uint fb = 0;
#endif
    for (; r < end; ++r, b += SHORT_LEN) {
        ACC8 v = gm_row8(in, b GM_CHK_A);
        v = GM_PAIRS(v, v);
        v = GM_PAIRS(v, v);
        gm_acc a;
        GM_ACC_ZERO(a);
        GM_ACC_ADD(a, v.s0 + v.s1);
#if GM_SETTLE8
        a.m = gm_rows_max(in, b, 1 GM_CHK_A);
        uint bits;
        fb |= (gm_settle(a, n, m->depth, &bits) ? 0u : 1u) << (r - r0);
        GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 1), bits);
#else
        STORE_RESULT(GM_ACC_TOTAL(a), n, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 1));
#if GM_EXACT
        fb |= 1u << (r - r0);       // as above: the exact pass decides
#endif
#endif
    }
#if GM_EXACT
    if (end > r0) GM_FLAG((long)flag_off + (r0 >> 3)) = (uchar)fb;
#endif
    GM_REDO_OPEN(r_first, end);
}
#elif SHORT_LEN && GM_X_D
// FLOAT64 REDUCE AVERAGE over short dense rows (SHORT_LEN 8, 16 or 32 values, a power of two; row k
// at k * SHORT_LEN, output k at k; reduce_kernels.short_rows): work-item g takes rows
// [g * clen, + clen), eight at a time, in the kernel above's transpose tree (each row's vectors added
// lane for lane, then three levels of pairs across the eight rows), but every addition by TwoSum:
// h is the tree of sums and c the sum of their exact errors, added in the same tree, each of those
// additions checked by TwoSum again (bad: it rounded). Where none rounded and h and c are finite,
// S = h + c exactly (no addition overflowed: an overflow leaves an inf or NaN in h or c), so
// H = fl(h + c) is S rounded once, ties to even; and S / n = H / n exactly for n a power of two
// while |H| >= 2^-1022 n (above it scaling by 1 / n commutes with the rounding; just below it the
// subnormal grid is no finer), so H * (1 / n) is the correctly rounded mean, exact ties included:
// no bound and no division. A zero c leaves h as it is: zeros alone give IEEE's sum of them (-0.0
// from -0.0s alone), a sum cancelled to zero +0.0, the rounded mean's zero sign (gm_xacc_d_mean's).
// Open (a flag bit each, gm_reduce_exact_serial decides): rows where an addition of errors rounded
// (exponents about 50 binades apart), with an inf or NaN, a sum past DBL_MAX, or 0 < |H| < 2^-1022 n.
// Rows after the last full eight go through the same tree, the last row standing in for the missing
// ones, and only theirs are stored.
#define GM_D_TINY (0x1p-1022 * SHORT_LEN)      // |H| below this (but zero): H / n would be subnormal

// s = a + b lane for lane and its exact error *e (TwoSum)
GM_INLINE double8 gm_ts8(double8 a, double8 b, double8* e) {
    const double8 s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

// (h, *c) = (ha, ca) + (hb, cb) lane for lane: h by TwoSum, *c = (ca + cb) + its error; *bad set in
// the lanes where one of the two additions into *c rounded
GM_INLINE double8 gm_dd8_join(double8 ha, double8 ca, double8 hb, double8 cb, double8* c, long8* bad) {
    double8 e, f, g;
    const double8 h = gm_ts8(ha, hb, &e);
    *c = gm_ts8(gm_ts8(ca, cb, &f), e, &g);
    *bad |= isnotequal(f, (double8)(0.0)) | isnotequal(g, (double8)(0.0));
    return h;
}

// one row's SHORT_LEN values at p as eight lanes (h, *c): its vectors added lane for lane
GM_INLINE double8 gm_d8_row(__global const T* in, long p, double8* c, long8* bad GM_CHK_P) {
    double8 h = GM_IN8(p);
    *c = (double8)(0.0);
#if SHORT_LEN >= 16
    h = gm_ts8(h, GM_IN8(p + 8), c);
#endif
#if SHORT_LEN == 32
    double8 c2;
    const double8 h2 = gm_ts8(GM_IN8(p + 16), GM_IN8(p + 24), &c2);
    h = gm_dd8_join(h, *c, h2, c2, c, bad);
#endif
    return h;
}

// the even and the odd lanes of a, then of b (the transpose tree's pairs)
#define GM_EV8(a, b) ((double8)((a).s0246, (b).s0246))
#define GM_OD8(a, b) ((double8)((a).s1357, (b).s1357))

// Eight rows from b (row j at b + min(j, last) * SHORT_LEN): their correctly rounded means in lane j
// (H * (1 / n)) and the open lanes (-1)
GM_INLINE long8 gm_d8_rows(__global const T* in, long b, int last, double8* res GM_CHK_P) {
    long8 bad = (long8)(0);
    double8 h[8], c[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) h[j] = gm_d8_row(in, b + (long)min(j, last) * SHORT_LEN, &c[j], &bad GM_CHK_A);
    double8 h2[4], c2[4];
#if SHORT_LEN == 8
    // the first level adds single values: its errors are the first c
#pragma unroll
    for (int j = 0; j < 4; ++j) h2[j] = gm_ts8(GM_EV8(h[2 * j], h[2 * j + 1]), GM_OD8(h[2 * j], h[2 * j + 1]), &c2[j]);
#else
#pragma unroll
    for (int j = 0; j < 4; ++j)
        h2[j] = gm_dd8_join(GM_EV8(h[2 * j], h[2 * j + 1]), GM_EV8(c[2 * j], c[2 * j + 1]),
                            GM_OD8(h[2 * j], h[2 * j + 1]), GM_OD8(c[2 * j], c[2 * j + 1]), &c2[j], &bad);
#endif
    double8 h4[2], c4[2];
#pragma unroll
    for (int j = 0; j < 2; ++j)
        h4[j] = gm_dd8_join(GM_EV8(h2[2 * j], h2[2 * j + 1]), GM_EV8(c2[2 * j], c2[2 * j + 1]),
                            GM_OD8(h2[2 * j], h2[2 * j + 1]), GM_OD8(c2[2 * j], c2[2 * j + 1]), &c4[j], &bad);
    double8 cs;
    const double8 hs = gm_dd8_join(GM_EV8(h4[0], h4[1]), GM_EV8(c4[0], c4[1]), GM_OD8(h4[0], h4[1]),
                                   GM_OD8(c4[0], c4[1]), &cs, &bad);
    const double8 H = select(hs + cs, hs, isequal(cs, (double8)(0.0)));
    *res = H * (1.0 / SHORT_LEN);
    const long8 tiny = isless(fabs(H), (double8)(GM_D_TINY)) & isnotequal(H, (double8)(0.0));
    // bad's lanes hold parts of rows at the earlier levels, not rows: any bad (rare) opens all eight
    return (long8)(-(long)any(bad)) | ~isfinite(H) | tiny;
}

// the open lanes of o as the bits of one flag byte (lane j: bit j)
GM_INLINE uchar gm_open_bits8(long8 o) {
    const long8 bit = o & (long8)(1, 2, 4, 8, 16, 32, 64, 128);
    return (uchar)((bit.s0 | bit.s1 | bit.s2 | bit.s3) | (bit.s4 | bit.s5 | bit.s6 | bit.s7));
}

__kernel void gm_reduce_short_serial(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                     __global gm_acc* part, ulong part_off, __global uchar* flag, ulong flag_off,
                                     int use_part, __constant const gm_rmeta* m, long n_out, long len, long clen,
                                     ulong n GM_CHK_P) {
    long r = get_global_id(0) * clen;
    const long r_first = r, end = min(n_out, r + clen);
    long b = (long)in_off + r * SHORT_LEN;
    double8 res;
    for (; r + 8 <= end; r += 8, b += 8 * SHORT_LEN) {
        GM_PREFETCH(in, b, PREFETCH);
        const long8 open = gm_d8_rows(in, b, 7, &res GM_CHK_A);
        vstore8(res, 0, GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r, 8));
        GM_FLAG((long)flag_off + (r >> 3)) = gm_open_bits8(open);     // GM_FLAG_BITS: a bit per row
    }
    if (r < end) {      // 1 to 7 rows: the last one repeated in the lanes past them
        const int cnt = (int)(end - r);
        const long8 open = gm_d8_rows(in, b, cnt - 1, &res GM_CHK_A);
        double rl[8];
        vstore8(res, 0, rl);
        for (int j = 0; j < cnt; ++j) *GM_AT(GM_A_OUT, OUT_T, out, (long)out_off + r + j, 1) = rl[j];
        GM_FLAG((long)flag_off + (r >> 3)) = (uchar)(gm_open_bits8(open) & ((1u << cnt) - 1u));
    }
    GM_REDO_OPEN(r_first, end);
}
#endif

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
#if !HAS_C8
        // four rows per pass over the accumulators: a quarter of the accumulator loads and stores
        // (COLS/8 vectors do not fit in registers), and four row streams in flight. Exact adds
        // (integers) or double adds of floats: the grouping does not change the 1-ulp bound.
#if GM_EXACT && !GM_H16C
        // blocks of 4 GM_XBLOCK rows: each column's block sum joins o[v] (the bound's depth:
        // 2 + GM_XBLOCK + clen / (4 GM_XBLOCK) + 3, reduce_kernels.cpu_variant)
        ACC8 o[COLS / 8];
        for (int v = 0; v < COLS / 8; ++v) o[v] = GM_Z8;
        int blk = 0;
#endif
#if GM_B16C
        // BFLOAT16 with fp64 (reduce_kernels.b16_cols): sixteen columns per load, their even and odd
        // columns widened by a shift and a mask of the same bits (a bfloat16 is the top half of a
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

// General class: work-item (k, chunk) walks a chunk of the reduced index space with a carried
// multi-index.
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

// Second pass: a work-item per output combines its chunk partials in chunk order (deterministic).
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

#if GM_EXACT
// Exact partials, CPU shape: a work-item per (run, output) pair, its run deposited serially.
__kernel void gm_reduce_limbs_serial(__global const T* in, ulong in_off, __global long* part, ulong part_off,
                                     __constant const gm_rmeta* m, long n_out, ulong n, long n_chunks,
                                     long clen GM_CHK_P) {
    const long t = (long)get_global_id(0);
    if (t >= n_out * n_chunks) return;
    const long c = t / n_out, k = t - c * n_out;
    gm_xacc x;
    GM_XINIT(&x);
    gm_limbs_range(&x, in, (long)in_off + gm_keep_offset(m, k, 1), m, min((long)n, c * clen),
                   min((long)n, (c + 1) * clen) GM_CHK_A);
    gm_limbs_write(&x, part, (long)part_off + t * (GM_XK + 1) GM_CHK_A);
}
#endif

#endif  // GM_CPU_SHAPE
