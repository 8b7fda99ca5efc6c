// The reductions' metadata and addressing, shared by both kernel shapes: the kernel arguments'
// numbers for GM_AT (common.h), the loads, the wide sum's extra output (GM_WIDE_SUM), the plan's
// shapes and strides (gm_rmeta, the host's meta_struct), the offsets of kept and reduced indices and
// the walk of a reduced index space.
//
// Every global access goes through GM_AT as (argument, element index), so that the checked build
// tests it against the binding's extent: the arguments are the input, the output and the partials
// (the temporary resource: gm_acc [chunk][output]) and the flags, numbered here.

#define GM_A_IN 0
#define GM_A_OUT 1
#define GM_A_PART 2
#define GM_A_FLAG 3
// the spread redo's arrival counts (reduce_gpu.cl: gm_spread_redo; never in a wide sum, whose low word
// is argument 4 too)
#define GM_A_CNT 4
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

// The plan's shapes and strides in elements (gpu_mean/kernels/reduce_kernels.py: meta_struct).
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
