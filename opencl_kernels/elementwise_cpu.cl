// Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean (gm.ext): the CPU-shaped kernels
// (*_serial, GM_CPU_SHAPE = 1: OpenCL CPU devices; gpu_mean/kernels/elementwise_kernels.py:
// cpu_variant, ElementwiseVariant.file). Each work-item a long run of OpenCL vectors (4 lanes; 16 for
// FLOAT16), software prefetch. The shared arithmetic and metadata: elementwise.h; the macros:
// elementwise_gpu.cl's comment (the CPU shape's list).
#include "common.h"
#include "exact.h"
#include "elementwise.h"

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
