// The reductions' GPU-shaped kernels: REDUCE AVERAGE (FLOAT32, FLOAT16), the exact integer mean
// reduction, the extension types' mean reduction (BFLOAT16, FLOAT64, INT64, UINT64) and the wide sum
// (gm.ext), as CUDA and OpenCL GPUs run them: one source for both APIs (cuda_kernels/dialect.h maps
// it; docs/design.md, "Kernels"). The host takes this file for every device that is not an OpenCL CPU
// (gpu_mean/kernels/reduce_kernels.py: gpu_variant, kernel_file); reduce_cpu.cl is the other shape.
//
// Work-groups cooperate on an output with coalesced loads, a local-memory tree (a warp shuffle on
// CUDA, same order) and barriers; every kernel loops over its grid, so the host caps the grid at
// CUDA's limits (gpu_mean/kernels/gpu_geometry.py, shared by both backends). The opencl:0-gpupaths
// test device runs them on PoCL with CUDA's geometry.
//   gm_reduce_row, gm_reduce_col, gm_reduce_general  one pass per class of the plan
//   gm_reduce_short (SHORT_LPR)                       rows of at most 32 values, a few lanes each
//   gm_reduce_tile (SHORT_TILE)                       dense rows of 2..32 values (a power of two),
//                                                     a work-item each, staged in local memory
//   gm_reduce_finalize                                the chunk partials of a split reduction
//   gm_spread_redo (K_SPREAD)                        the open outputs of few long sums, redone across the device
//   (GM_EXACT) an output the bound test leaves open is summed again exactly by the group that
//   stored it (reduce_gpu_redo.h), in the same kernel: no exact pass of its own
//   gm_reduce_limbs (GM_EXACT)                        exact partials (and reduce_limbs.h's two kernels)
//   gm_dd_partials (GM_EXACT, GM_DDP)                 gpu_mean.dask's double-double partials (reduce_gpu_ddp.h)
//
// Macros (reduce_kernels.py builds them from a plan):
//   T, OUT_T, ACC    storage, output and accumulator types (ACC: double for floats, a float with a
//                    Neumaier compensation term on a device without fp64, long / ulong for integers)
//   COMPENSATED, WIDE_INT, WIDE_FLOAT, GM_BF16_NOFP64, GM_EXACT, GM_FF  the accumulator (reduce_acc.h)
//   GM_ACC0          the accumulators' start: -0.0 for floats (an exact zero total of -0.0s alone is
//                    -0.0, IEEE's sum), 0 for integers
//   GM_EXACT         the correctly rounded REDUCE AVERAGE (FLOAT32 / FLOAT16 / BFLOAT16, FLOAT64 with
//                    fp64): the bound test in the store, a flag per output, the open ones redone by
//                    the group that stored them (GM_X_H, GM_X_BF16, GM_X_D: the superaccumulator's
//                    format; EX_WG the superaccumulators a group merges)
//   LOAD1(p)         the element at p as ACC (the two-word accumulators: as stored, they split it);
//                    STORE_RESULT(t, n, p)  t / n rounded once into *p (REDUCE_SUM: t itself; the
//                    two-word accumulators: t is the accumulator)
//   GM_WIDE_SUM, LO_T  the wide sum's low word (reduce_meta.h)
//   KN, RN, KNA, RNA ranks of the coalesced kept and reduced groups (KNA, RNA: at least 1)
//   META_BYTES       sizeof(gm_rmeta) on the host (checked in reduce_meta.h, in both languages)
//   WG (row kernel's work-group size), WARP_ROWS (a 32-wide slice per output), ROW_MULTI (interleaved
//   axes with a dense innermost run), COL_Y (col kernel's local size in y; x is 32), COL_W (its
//   columns per group: a power of two, at most 32), FIN_LANES (the
//   finalize pass takes an output per work-item), FIN_W (else its outputs per group), FIN_WG (finalize
//   work-group size); all multiples of 32
//   V16              the row kernel's 16-byte loads (gm_run_sum): elements per load (0: off)
//   EL_T, EL_ACC(x)  FLOAT32, FLOAT16, BFLOAT16 (the 16-byte loads, gm_reduce_tile): an element's
//                    storage (the halves' bits in a ushort) and its value as ACC, as LOAD1 converts it
//   SHORT_TILE       gm_reduce_tile's row length (a power of two, at most 32; 0: no tile kernel)
#include "common.h"
#include "exact.h"
#include "reduce_meta.h"
#include "reduce_acc.h"
#include "reduce_store.h"
#if GM_EXACT
#include "reduce_exact.h"
#include "reduce_gpu_redo.h"
#include "reduce_limbs.h"
#include "reduce_gpu_ddp.h"
#if GM_MSPAN_P
#include "reduce_gpu_span.h"
#endif
// whether a stored output was left open: kept only where it can be (a variable set and never read
// is a compiler warning elsewhere)
#define GM_OPEN_DECL(v) int v = 0;
#define GM_OPENED(v, call) v = (call)
#else
#define GM_FIN_IN
#define GM_OPEN_DECL(v)
#define GM_OPENED(v, call) (call)
#endif

#if GM_WARP_SHUFFLE
GM_INLINE gm_acc gm_shfl_down(gm_acc a, int offset) {
    gm_acc r;
#define GM_SHFL_FIELD(f) r.f = GM_SHFL_DOWN(a.f, offset);
    GM_ACC_FIELDS(GM_SHFL_FIELD)
#undef GM_SHFL_FIELD
    return r;
}
#endif

// The row kernel's trees merge accumulators that carry the span proof's exponent field in m's low
// byte (GM_MSPAN_P, reduce_gpu_span.h): the merged field is the smaller one.
#if GM_MSPAN_P
#define GM_TREE_MERGE(a, b) { const uint te_ = min(gm_e_unpack(a), gm_e_unpack(b)); GM_ACC_MERGE(a, b); \
                              (a) = gm_e_pack((a), te_); }
#else
#define GM_TREE_MERGE(a, b) GM_ACC_MERGE(a, b)
#endif

// The sum of every 32-wide slice of the work-group, returned to the slice's first work-item: a
// halving tree over offsets 16, 8, 4, 2, 1. The warp shuffle and the portable local-memory form add
// in the same order, so CUDA and PoCL give the same bits for the same geometry. Every work-item of
// the group must call it (the portable form has barriers); scratch holds the group's size.
GM_INLINE gm_acc gm_slice_sum(gm_acc v, LOCAL_PTR gm_acc* scratch, int lid) {
#if GM_WARP_SHUFFLE
    for (int o = 16; o > 0; o >>= 1) {
        gm_acc w = gm_shfl_down(v, o);
        GM_TREE_MERGE(v, w);
    }
#else
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = 16; o > 0; o >>= 1) {
        if ((lid & 31) < o) {   // reads [o, 2o) of the slice, writes [0, o): no overlap
            gm_acc w = scratch[lid + o];
            GM_TREE_MERGE(v, w);
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

#if V16
// One 16-byte load of V16 elements (FLOAT32 4, FLOAT16 and BFLOAT16 8), held as EL_T (the halves' bits
// in ushorts) and converted one by one by EL_ACC.
typedef struct __attribute__((aligned(16))) { EL_T v[V16]; } gm_v16;
#define GM_IN16(i) (*(__global const gm_v16*)GM_AT(GM_A_IN, const T, in, i, V16))
#define GM_ADD16(a, x) { for (int j_ = 0; j_ < V16; ++j_) GM_RUN_ADD(a, EL_ACC((x).v[j_])); }
#endif

// GM_MSPAN_P: the run's values' smallest magnitude bits - 1 kept beside the sums (*lo, GM_LO_ADD)
#if GM_MSPAN_P
#define GM_LO_P , uint* lo
#define GM_LO_A(x) , (x)
#define GM_RUN_ADD(a, x) { const ACC rx_ = (x); GM_ACC_ADD(a, rx_); GM_LO_ADD(*lo, rx_); }
#else
#define GM_LO_P
#define GM_LO_A(x)
#define GM_RUN_ADD(a, x) GM_ACC_ADD(a, x)
#endif

// This work-item's share of the dense run in[base + i0, base + i1), with four accumulators so that
// four loads are in flight. V16, where the run's first element is 16-byte aligned (the same test for
// every work-item of the run): 16-byte vectors lane, lane + width, ... over the whole vectors, then
// the rest element by element. Otherwise elements lane, lane + width, ...
GM_INLINE gm_acc gm_run_sum(__global const T* in, long base, long i0, long i1, int lane, int width GM_LO_P
                            GM_CHK_P) {
    gm_acc s0, s1, s2, s3;
    GM_ACC_ZERO(s0); GM_ACC_ZERO(s1); GM_ACC_ZERO(s2); GM_ACC_ZERO(s3);
    long i = i0 + lane;
#if V16
    if ((((ulong)(in + base + i0)) & 15) == 0) {
        const long b = base + i0, nv = (i1 - i0) / V16;
        long v = lane;
        for (; v + 3 * width < nv; v += 4 * width) {
            const gm_v16 x0 = GM_IN16(b + v * V16), x1 = GM_IN16(b + (v + width) * V16);
            const gm_v16 x2 = GM_IN16(b + (v + 2 * width) * V16), x3 = GM_IN16(b + (v + 3 * width) * V16);
            GM_ADD16(s0, x0); GM_ADD16(s1, x1); GM_ADD16(s2, x2); GM_ADD16(s3, x3);
        }
        for (; v < nv; v += width) {
            const gm_v16 x0 = GM_IN16(b + v * V16);
            GM_ADD16(s0, x0);
        }
        i = i0 + nv * V16 + lane;
    }
#endif
    for (; i + 3 * width < i1; i += 4 * width) {
        GM_RUN_ADD(s0, GM_IN1(base + i));
        GM_RUN_ADD(s1, GM_IN1(base + i + width));
        GM_RUN_ADD(s2, GM_IN1(base + i + 2 * width));
        GM_RUN_ADD(s3, GM_IN1(base + i + 3 * width));
    }
    for (; i < i1; i += width) GM_RUN_ADD(s0, GM_IN1(base + i));
    GM_ACC_MERGE(s0, s1); GM_ACC_MERGE(s2, s3); GM_ACC_MERGE(s0, s2);
    return s0;
}

// Row class: output k's run is [0, len) at stride 1; chunk c is elements [c*clen, c*clen + clen).
// ROW_MULTI: output k's reduced space is ``runs`` dense runs of len elements; a chunk is clen runs.
// WARP_ROWS: each 32-wide slice of the group takes its own output (short runs); otherwise the whole
// group takes one output. Loops run the same number of times for every work-item of a group (the
// barriers in the sums need that); a slice past the last output adds zeros and stores nothing.
#if K_ROW
__kernel void gm_reduce_row(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                            ulong out_off, __global gm_acc* restrict part, ulong part_off, __global uchar* restrict flag,
                            ulong flag_off, int use_part,
                            GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks, ulong n,
                            long runs GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_acc scratch[WG];
#if GM_EXACT
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(WG / 32)
#endif
    const int lid = (int)get_local_id(0);
#if GM_EXACT
    GM_OPEN_START(lid)
#endif
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
#if GM_MSPAN_P
            uint lo = 0xffffffffu;      // the smallest magnitude's bits - 1 (GM_RUN_ADD)
#endif
            if (k < n_out) {
                const long base = (long)in_off + gm_keep_offset(m, k, 1);
#if ROW_MULTI
                for (long r = chunk * clen, r1 = min(runs, r + clen); r < r1; ++r) {
                    gm_acc t = gm_run_sum(in, base + gm_run_offset(m, r), 0, len, lane, width GM_LO_A(&lo) GM_CHK_A);
                    GM_ACC_MERGE(s, t);
                }
#else
                s = gm_run_sum(in, base, chunk * clen, min(len, chunk * clen + clen), lane, width GM_LO_A(&lo)
                               GM_CHK_A);
#endif
            }
#if GM_MSPAN_P
            s = gm_e_pack(s, gm_e_of(lo));     // the field rides in m through the trees (GM_TREE_MERGE)
#endif
#if WARP_ROWS
            s = gm_slice_sum(s, scratch, lid);
#else
            s = gm_group_sum(s, scratch, lid, WG / 32);
#endif
            GM_OPEN_DECL(was_open)
            if (lane == 0 && k < n_out) {
                int store = 1;
#if GM_MSPAN_P
                // a whole row proven exact is stored from its sum (flag 0); a chunk's partial keeps the field
                if (!use_part) {
                    store = !gm_mspan_store(s, gm_e_unpack(s), n, out, (long)out_off + gm_keep_offset(m, k, 2), flag,
                                            (long)flag_off + k GM_CHK_A);
                }
#endif
                if (store) {
                    GM_OPENED(was_open, gm_emit(s, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k,
                                                chunk, n_out GM_CHK_A));
                }
            }
#if GM_EXACT
            // the open outputs of this block redone by the group (use_part: none is stored here)
            GM_MARK(was_open, lid / width)
            if (!use_part) gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, k0, n, lid, WG GM_CHK_A);
#endif
        }
    }
}
#endif  // K_ROW

#include "reduce_gpu_short.h"

// Column class: [outer kept..., R (stride rs), inner kept I (stride 1 in input and output)].
// A (32, COL_Y) work-group on COL_W adjacent columns (a power of two, at most 32; fewer where the
// inner dimension is narrower): lane x takes column x mod COL_W and row phase x / COL_W, so that a
// warp reads 32 / COL_W rows' COL_W columns at once (a 16-column tensor: two rows, 128 contiguous
// bytes, no idle lane); y and the phase split the chunk's rows; local memory adds each column's
// COL_Y * (32 / COL_W) row sums in order. GM_MSPAN_P: beside the sums, the
// smallest exponent field of each column's values, for the span proof (reduce_gpu_span.h), carried
// in the partials of a split column to the finalize pass.
#if GM_MSPAN_P
#define GM_COL_ADD(a, x) { const ACC cx_ = (x); GM_ACC_ADD(a, cx_); GM_LO_ADD(lo, cx_); }
#else
#define GM_COL_ADD(a, x) GM_ACC_ADD(a, x)
#endif
#if K_COL
__kernel void gm_reduce_col(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                            ulong out_off, __global gm_acc* restrict part, ulong part_off, __global uchar* restrict flag,
                            ulong flag_off, int use_part,
                            GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks, ulong n,
                            long inner, long rs, long n_outer GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_acc tile[COL_Y][33];
#if GM_EXACT
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(32)
#endif
    const int lx = (int)get_local_id(0), ly = (int)get_local_id(1);
    const int c = lx & (COL_W - 1), phase = lx / COL_W;
    const int ry = COL_Y * (32 / COL_W);       // rows a pass of the group takes
#if GM_EXACT
    GM_OPEN_START(ly * 32 + lx)
#endif
    for (long chunk = (long)get_group_id(2); chunk < n_chunks; chunk += (long)get_num_groups(2)) {
        for (long o = (long)get_group_id(1); o < n_outer; o += (long)get_num_groups(1)) {
            for (long cb = (long)get_group_id(0); cb * COL_W < inner; cb += (long)get_num_groups(0)) {
                const long col = cb * COL_W + c;
                gm_acc s;
                GM_ACC_ZERO(s);
                if (col < inner) {
                    const long base = (long)in_off + gm_keep_offset(m, o * inner + col, 1);
                    long r = chunk * clen + ly * (32 / COL_W) + phase;
                    const long end = min(len, chunk * clen + clen);
                    gm_acc sa[COL_U];       // COL_U rows' loads in flight (reduce_acc.h: 4, the wide sums 2)
#pragma unroll
                    for (int u = 0; u < COL_U; ++u) GM_ACC_ZERO(sa[u]);
#if GM_MSPAN_P
                    uint lo = 0xffffffffu;      // the smallest magnitude's bits - 1 (GM_COL_ADD)
#endif
                    for (; r + (COL_U - 1) * ry < end; r += COL_U * ry) {
#pragma unroll
                        for (int u = 0; u < COL_U; ++u) GM_COL_ADD(sa[u], GM_IN1(base + (r + u * ry) * rs));
                    }
                    for (; r < end; r += ry) GM_COL_ADD(sa[0], GM_IN1(base + r * rs));
#pragma unroll
                    for (int w = 1; w < COL_U; w <<= 1) {       // a halving tree: (0, 1) (2, 3), then (0, 2)
#pragma unroll
                        for (int u = 0; u + w < COL_U; u += 2 * w) GM_ACC_MERGE(sa[u], sa[u + w]);
                    }
                    s = sa[0];
#if GM_MSPAN_P
                    s = gm_e_pack(s, gm_e_of(lo));
#endif
                }
                tile[ly][lx] = s;
                barrier(CLK_LOCAL_MEM_FENCE);
                GM_OPEN_DECL(was_open)
                if (ly == 0 && phase == 0 && col < inner) {
                    // the column's sums in order: y, then the phase within y (lanes c, c + COL_W, ...)
                    gm_acc t = tile[0][c];
                    const long k = o * inner + col;
                    int store = 1;
#if GM_MSPAN_P
                    uint e = gm_e_unpack(t);
                    for (int y = 0; y < COL_Y; ++y) {
                        for (int q = y == 0 ? COL_W : 0; q < 32; q += COL_W) {
                            const gm_acc b = tile[y][q + c];
                            e = min(e, gm_e_unpack(b));
                            GM_ACC_MERGE(t, b);
                        }
                    }
                    if (use_part) {
                        t = gm_e_pack(t, e);
                    } else if (gm_mspan_store(t, e, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag,
                                              (long)flag_off + k GM_CHK_A)) {
                        store = 0;      // proven exact: stored, flag 0
                    }
#else
                    for (int y = 0; y < COL_Y; ++y) {
                        for (int q = y == 0 ? COL_W : 0; q < 32; q += COL_W) GM_ACC_MERGE(t, tile[y][q + c]);
                    }
#endif
                    if (store) {
                        GM_OPENED(was_open, gm_emit(t, n, out, out_off, part, part_off, flag, flag_off, use_part, m,
                                                    k, chunk, n_out GM_CHK_A));
                    }
                }
#if GM_EXACT
                // the block's open columns redone by the group, one after another (use_part: none)
                GM_MARK(was_open, c)
                if (!use_part) {
                    gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, o * inner + cb * COL_W, n,
                                   ly * 32 + lx, 32 * COL_Y GM_CHK_A);
                }
#endif
                barrier(CLK_LOCAL_MEM_FENCE);   // the tile is rewritten by the next column block
            }
        }
    }
}
#endif  // K_COL

// General class (broadcast or padded inputs, interleaved axes without a dense run): a work-item per
// (output, chunk), walking the chunk of the reduced index space with a carried multi-index. A group
// takes a block of adjacent outputs per pass (the same passes for all, so that the redo of the open
// ones reaches every barrier); at most 256 work-items (gpu_geometry).
#if K_GENERAL
__kernel void gm_reduce_general(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                                ulong out_off, __global gm_acc* restrict part, ulong part_off,
                                __global uchar* restrict flag, ulong flag_off, int use_part,
                                GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks,
                                ulong n GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
#if GM_EXACT
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(256)
#endif
    const int lid = (int)get_local_id(0), gsize = (int)get_local_size(0);
#if GM_EXACT
    GM_OPEN_START(lid)
#endif
    const long step = (long)get_global_size(0);
    for (long chunk = (long)get_group_id(1); chunk < n_chunks; chunk += (long)get_num_groups(1)) {
        for (long k0 = (long)get_group_id(0) * gsize; k0 < n_out; k0 += step) {
            const long k = k0 + lid;
            GM_OPEN_DECL(was_open)
            if (k < n_out) {
                const long j = chunk * clen;
                gm_acc s = gm_general_sum(in, (long)in_off + gm_keep_offset(m, k, 1), m, j, min(len, j + clen) GM_CHK_A);
                GM_OPENED(was_open, gm_emit(s, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, chunk,
                                            n_out GM_CHK_A));
            }
#if GM_EXACT
            // the block's open outputs redone by the group, one after another (use_part: none)
            GM_MARK(was_open, lid)
            if (!use_part) gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, k0, n, lid, gsize GM_CHK_A);
#endif
        }
    }
}
#endif  // K_GENERAL

// Output k of a split reduction stored from its merged partials s: by the columns' span proof where it
// holds (GM_MSPAN_P; e the smallest exponent field, GM_FIN_E), else by the bound (gm_store); 1 when the
// output was left open.
#if GM_MSPAN_P
#define GM_FIN_E(e) (e)
#else
#define GM_FIN_E(e) 0u
#endif
GM_INLINE int gm_fin_store(gm_acc s, uint e, ulong n, __global OUT_T* out, ulong out_off, __global uchar* flag,
                           ulong flag_off, __constant const gm_rmeta* m, long k GM_CHK_P) {
    const long i = (long)out_off + gm_keep_offset(m, k, 2);
#if GM_MSPAN_P
    if (gm_mspan_store(s, e, n, out, i, flag, (long)flag_off + k GM_CHK_A)) return 0;
#endif
    return gm_store(s, n, out, i, flag, (long)flag_off + k, m GM_CHK_A);
}

// Second pass of a split reduction, in a fixed order whatever the timing (deterministic).
// FIN_LANES (few chunks per output: gpu_geometry.fin_lanes): a work-item per output merges its chunks
// 0, 1, ... in order; a warp reads 32 adjacent outputs' partials of a chunk at once (coalesced).
// Otherwise a work-group per FIN_W adjacent outputs (one, or the outputs' power of two when they are
// fewer than 32), each output's chunks split in FIN_WG / FIN_W phases that a warp reads for FIN_W
// adjacent outputs at once; a tree adds the phases.
// K_SPREAD: the open outputs are left flagged for gm_spread_redo (below), not redone here, and every
// output's arrival count there set to 0 (GM_FIN_CNT, GM_STORE_CNT0)
#if GM_EXACT && !K_SPREAD
#define GM_FOPEN_DECL(v) GM_OPEN_DECL(v)
#define GM_FOPENED(v, call) GM_OPENED(v, call)
#else
#define GM_FOPEN_DECL(v)
#define GM_FOPENED(v, call) (call)
#endif
#if K_SPREAD
#define GM_FIN_CNT , __global int* restrict cnt, ulong cnt_off
#define GM_STORE_CNT0(k) (*GM_AT(GM_A_CNT, int, cnt, (long)cnt_off + (k), 1) = 0)
#else
#define GM_FIN_CNT
#define GM_STORE_CNT0(k)
#endif  // K_SPREAD
#if K_FIN
__kernel void gm_reduce_finalize(__global const gm_acc* restrict part, ulong part_off, long n_chunks, long n_out,
                                 __global OUT_T* restrict out, ulong out_off, __global uchar* restrict flag,
                                 ulong flag_off, GM_META_ARG(gm_rmeta, m), ulong n GM_FIN_IN GM_FIN_CNT GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
#if FIN_LANES
#if GM_EXACT && !K_SPREAD
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(FIN_WG)
#endif
    const int lid = (int)get_local_id(0);
#if GM_EXACT && !K_SPREAD
    GM_OPEN_START(lid)
#endif
    for (long k0 = (long)get_group_id(0) * FIN_WG; k0 < n_out; k0 += (long)get_num_groups(0) * FIN_WG) {
        const long k = k0 + lid;
        GM_FOPEN_DECL(was_open)
        if (k < n_out) {
            gm_acc s;
            GM_ACC_ZERO(s);
#if GM_MSPAN_P
            uint e = GM_E_NONE;
#endif
            for (long c = 0; c < n_chunks; ++c) {
                gm_acc b = GM_PART((long)part_off + c * n_out + k);
#if GM_MSPAN_P
                e = min(e, gm_e_unpack(b));
#endif
                GM_ACC_MERGE(s, b);
            }
            GM_FOPENED(was_open, gm_fin_store(s, GM_FIN_E(e), n, out, out_off, flag, flag_off, m, k GM_CHK_A));
            GM_STORE_CNT0(k);
        }
#if GM_EXACT && !K_SPREAD
        GM_MARK(was_open, lid)
        gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, k0, n, lid, FIN_WG GM_CHK_A);
#endif
    }
#else
    __local gm_acc scratch[FIN_WG];
#if GM_EXACT && !K_SPREAD
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(FIN_W)
#endif
    // FIN_W adjacent outputs per pass of the group (a power of two, at most 32), FIN_WG / FIN_W chunk
    // phases for each: lane x takes output x mod FIN_W and chunks x / FIN_W, + FIN_WG / FIN_W, ...
    const int lid = (int)get_local_id(0), c = lid & (FIN_W - 1), phase = lid / FIN_W;
#if GM_EXACT && !K_SPREAD
    GM_OPEN_START(lid)
#endif
    for (long k0 = (long)get_group_id(0) * FIN_W; k0 < n_out; k0 += (long)get_num_groups(0) * FIN_W) {
        const long k = k0 + c;
        gm_acc s;
        GM_ACC_ZERO(s);
#if GM_MSPAN_P
        uint e = GM_E_NONE;
#endif
        if (k < n_out) {
            for (long ch = phase; ch < n_chunks; ch += FIN_WG / FIN_W) {
                gm_acc b = GM_PART((long)part_off + ch * n_out + k);
#if GM_MSPAN_P
                e = min(e, gm_e_unpack(b));
#endif
                GM_ACC_MERGE(s, b);
            }
        }
#if GM_MSPAN_P
        s = gm_e_pack(s, e);        // the phases' fields merge below (reduce_gpu_span.h)
#endif
        // each output's phases by a halving tree in local memory (a fixed order)
        scratch[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int o = FIN_WG / FIN_W / 2; o > 0; o >>= 1) {
            if (phase < o) {        // reads phases [o, 2o) of the output, writes [0, o): no overlap
                gm_acc a = scratch[lid];
                const gm_acc b = scratch[lid + o * FIN_W];
#if GM_MSPAN_P
                const uint ea = min(gm_e_unpack(a), gm_e_unpack(b));
                GM_ACC_MERGE(a, b);
                a = gm_e_pack(a, ea);
#else
                GM_ACC_MERGE(a, b);
#endif
                scratch[lid] = a;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        GM_FOPEN_DECL(was_open)
        if (phase == 0 && k < n_out) {
            const gm_acc t = scratch[lid];
            GM_FOPENED(was_open, gm_fin_store(t, GM_FIN_E(gm_e_unpack(t)), n, out, out_off, flag, flag_off, m,
                                             k GM_CHK_A));
            GM_STORE_CNT0(k);
        }
#if GM_EXACT && !K_SPREAD
        GM_MARK(was_open, c)
        gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, k0, n, lid, FIN_WG GM_CHK_A);
#else
        barrier(CLK_LOCAL_MEM_FENCE);   // every sum read before the next pass rewrites scratch
#endif
    }
#endif
}
#endif  // K_FIN


#if GM_EXACT
// Exact partials, GPU shape: a work-group of EX_WG work-items per (run, output) pair (grid-stride).
// Pair t = c n_out + k (run c of output k): the group's work-items deposit the run's values
// interleaved (work-item i takes values i, i + EX_WG, ... of the run: a warp's loads are adjacent
// values, coalesced where the reduced run is dense), the EX_WG superaccumulators merge through local
// memory in a halving tree and work-item 0 writes the limbs and flags at part[t (GM_XK + 1)]. Every
// work-item of the group calls it (its barriers).
GM_INLINE void gm_limbs_pair(__global const T* in, ulong in_off, __global long* part, ulong part_off,
                             LOCAL_PTR gm_xacc* xs, __constant const gm_rmeta* m, long n_out, ulong n, long clen,
                             long t, int lid GM_CHK_P) {
    const long c = t / n_out, k = t - c * n_out;
    const long end = min((long)n, (c + 1) * clen);
    gm_xacc x;
    GM_XINIT(&x);
    gm_limbs_range(&x, in, (long)in_off + gm_keep_offset(m, k, 1), m, c * clen + lid, end, EX_WG GM_CHK_A);
    GM_XNORM(&x);
    xs[lid] = x;
    gm_xacc_tree(xs, lid, EX_WG);
    if (lid == 0) {
        gm_xacc a = xs[0];
        gm_limbs_write(&a, part, (long)part_off + t * (GM_XK + 1) GM_CHK_A);
    }
    barrier(CLK_LOCAL_MEM_FENCE);       // xs is rewritten for the next pair
}

#if K_LIMBS
__kernel void gm_reduce_limbs(__global const T* restrict in, ulong in_off, __global long* restrict part,
                              ulong part_off, GM_META_ARG(gm_rmeta, m), long n_out, ulong n, long n_chunks,
                              long clen GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_xacc xs[EX_WG];
    const int lid = (int)get_local_id(0);
    for (long t = (long)get_group_id(0); t < n_out * n_chunks; t += (long)get_num_groups(0))
        gm_limbs_pair(in, in_off, part, part_off, xs, m, n_out, n, clen, t, lid GM_CHK_A);
}
#endif  // K_LIMBS

#if K_SPREAD
// The open outputs of a split reduction of few outputs and many values (reduce_kernels.spread_runs),
// redone across the device instead of by the one group that finalized each, in one launch after the
// finalize pass, which leaves them flagged and sets each output's arrival count to 0 (GM_FIN_CNT). A
// work-group per (run, open output) pair writes the run's limbs (gm_limbs_pair; the groups of a
// settled output read its flag and skip it, all alike: no barrier is skipped by some work-items
// only), then counts its arrival; the group that arrives last for an output adds every run's digits
// (a digit in a lane, the runs in order) and rounds the total once (gm_exact_store, which moves the
// carries up first). The limbs are made visible device-wide before the count (mem_fence: CUDA's
// __threadfence) and read back through volatile loads (past a GPU's non-coherent L1). Whichever
// group arrives last, the sums are the same integers: the same bits. Nothing open: one launch whose
// groups read a flag byte each.
#define GM_LIMB(c, j) (*(volatile __global const long*)GM_AT(GM_A_PART, const long, part, \
                                                              (long)part_off + ((c) * n_out + k) * (GM_XK + 1) + (j), 1))
__kernel void gm_spread_redo(__global const T* restrict in, ulong in_off, __global long* restrict part,
                              ulong part_off, __global const uchar* restrict flag, ulong flag_off,
                              __global OUT_T* restrict out, ulong out_off, __global int* restrict cnt, ulong cnt_off,
                              GM_META_ARG(gm_rmeta, m), long n_out, ulong n, long n_runs, long clen GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_xacc xs[EX_WG];
    __local int last;
    const int lid = (int)get_local_id(0);
    for (long t = (long)get_group_id(0); t < n_out * n_runs; t += (long)get_num_groups(0)) {
        const long k = t % n_out;
        if (*GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + k, 1) == 0) continue;
        gm_limbs_pair(in, in_off, part, part_off, xs, m, n_out, n, clen, t, lid GM_CHK_A);
        if (lid == 0) {
            mem_fence(CLK_GLOBAL_MEM_FENCE);        // this run's limbs, before its arrival is counted
            last = atomic_inc((volatile __global int*)GM_AT(GM_A_CNT, int, cnt, (long)cnt_off + k, 1)) == n_runs - 1;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (last) {     // the same for the whole group
            mem_fence(CLK_GLOBAL_MEM_FENCE);
            for (int j = lid; j <= GM_XK; j += EX_WG) {     // digit j of every run (j = GM_XK: the flags)
                long d = 0;         // a digit below 2^32 per run: far below 2^63
                for (long c = 0; c < n_runs; ++c) d = j < GM_XK ? d + GM_LIMB(c, j) : (d | GM_LIMB(c, j));
                if (j < GM_XK) xs[0].d[j] = d;
                else xs[0].flags = (uint)d;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lid == 0) {
                gm_xacc a = xs[0];
                gm_exact_store(&a, n, out, (long)out_off + gm_keep_offset(m, k, 2) GM_CHK_A);
            }
            barrier(CLK_LOCAL_MEM_FENCE);   // xs is rewritten for the next pair
        }
    }
}
#undef GM_LIMB
#endif  // K_SPREAD
#endif

