// Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean (gm.ext): one source for OpenCL and
// CUDA (cuda_kernels/dialect.h maps it; docs/design.md, "Kernels").
//
// Two kernel shapes, chosen by the host per device kind (gpu_mean/kernels/elementwise_kernels.py,
// ElementwiseVariant.file), over one shared part (elementwise.h: the arithmetic, GM_COMBINE and
// GM_ACC_*, written once for scalars and OpenCL vectors alike; the metadata gm_dims):
//   GPU-shaped (this file: gm_ew_contig_vec/_scalar, gm_ew_rows_vec/_scalar, gm_ew_strided):
//     grid-stride loops, adjacent work-items on adjacent elements, 16-byte vectors where every
//     pointer allows; run by CUDA and OpenCL GPUs (and by opencl:0-gpupaths on PoCL) with
//     gpu_geometry's launches.
//   CPU-shaped (elementwise_cpu.cl: *_serial, GM_CPU_SHAPE = 1: OpenCL CPU devices): each work-item
//     a long run of OpenCL vectors (4 lanes; 16 for FLOAT16), software prefetch.
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
#include "elementwise.h"

// ---- GPU-shaped kernels ------------------------------------------------------------------------

typedef struct __attribute__((aligned(16))) { TS v[VEC]; } gm_vec;   // one 16-byte access
// CUDA's input seam: the pointers by value; a checked build keeps the buffer starts and the offsets
// apart (GM_IN_OFFS; OpenCL's private gm_cl_inputs likewise)
#if GM_CHECKED
#define GM_IN_OFFS ulong off[NIN];
typedef struct { __global const TS* p[NIN]; ulong off[NIN]; } gm_cl_inputs;
#else
#define GM_IN_OFFS
#endif
typedef struct { ulong p[NIN]; GM_IN_OFFS } gm_inputs;
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

#if K_CONTIG
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
#endif  // K_CONTIG

// General strides: one element per work-item, grid-stride.
#if K_STRIDED
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
#endif  // K_STRIDED

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

#if K_ROWS_VEC
__kernel void gm_ew_rows_vec(__global TS* restrict out, ulong out_off, ulong n_rows, GM_META_ARG(gm_dims, s),
                             float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_META_BIND(gm_dims, s)
    GM_INPUTS_BIND
    gm_rows(ins, VEC, out, out_off, n_rows, s, scale, bias GM_CHK_A);
}
#endif  // K_ROWS_VEC

#if K_ROWS
__kernel void gm_ew_rows_scalar(__global TS* restrict out, ulong out_off, ulong n_rows, GM_META_ARG(gm_dims, s),
                                float scale, float bias GM_INPUT_PARAMS GM_CHK_P) {
    GM_META_BIND(gm_dims, s)
    GM_INPUTS_BIND
    gm_rows(ins, 1, out, out_off, n_rows, s, scale, bias GM_CHK_A);
}
#endif  // K_ROWS
