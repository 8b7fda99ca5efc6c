// The reductions' GPU-shaped kernels: REDUCE AVERAGE (FLOAT32, FLOAT16), the exact integer mean
// reduction, the extension types' mean reduction (BFLOAT16, FLOAT64, INT64, UINT64) and the wide sum
// (gm.ext), as CUDA and OpenCL GPUs run them: one source for both APIs (cuda_kernels/dialect.h maps
// it; docs/design.md, "Kernels"). The host takes this file for every device that is not an OpenCL CPU
// (gpu_mean/backends/reduce_kernels.py: gpu_variant, kernel_file); reduce_cpu.cl is the other shape.
//
// Work-groups cooperate on an output with coalesced loads, a local-memory tree (a warp shuffle on
// CUDA, same order) and barriers; every kernel loops over its grid, so the host caps the grid at
// CUDA's limits (gpu_mean/backends/gpu_geometry.py, shared by both backends). The opencl:0-gpupaths
// test device runs them on PoCL with CUDA's geometry.
//   gm_reduce_row, gm_reduce_col, gm_reduce_general  one pass per class of the plan
//   gm_reduce_finalize                                the chunk partials of a split reduction
//   gm_reduce_exact (GM_EXACT)                        the outputs the bound test left open
//   gm_reduce_limbs (GM_EXACT)                        exact partials (and reduce_limbs.h's two kernels)
//
// Macros (reduce_kernels.py builds them from a plan):
//   T, OUT_T, ACC    storage, output and accumulator types (ACC: double for floats, a float with a
//                    Neumaier compensation term on a device without fp64, long / ulong for integers)
//   COMPENSATED, WIDE_INT, WIDE_FLOAT, GM_BF16_NOFP64, GM_EXACT, GM_FF  the accumulator (reduce_acc.h)
//   GM_ACC0          the accumulators' start: -0.0 for floats (an exact zero total of -0.0s alone is
//                    -0.0, IEEE's sum), 0 for integers
//   GM_EXACT         the correctly rounded REDUCE AVERAGE (FLOAT32 / FLOAT16 / BFLOAT16, FLOAT64 with
//                    fp64): the bound test in the store, a flag per output, gm_reduce_exact (GM_X_H,
//                    GM_X_BF16, GM_X_D: the superaccumulator's format; EX_WG its work-group)
//   LOAD1(p)         the element at p as ACC (the two-word accumulators: as stored, they split it);
//                    STORE_RESULT(t, n, p)  t / n rounded once into *p (REDUCE_SUM: t itself; the
//                    two-word accumulators: t is the accumulator)
//   GM_WIDE_SUM, LO_T  the wide sum's low word (reduce_meta.h)
//   KN, RN, KNA, RNA ranks of the coalesced kept and reduced groups (KNA, RNA: at least 1)
//   META_BYTES       sizeof(gm_rmeta) on the host (checked in reduce_meta.h, in both languages)
//   WG (row kernel's work-group size), WARP_ROWS (a 32-wide slice per output), ROW_MULTI (interleaved
//   axes with a dense innermost run), COL_Y (col kernel's local size in y; x is 32), FIN_WG (finalize
//   work-group size); all multiples of 32
#include "common.h"
#include "exact.h"
#include "reduce_meta.h"
#include "reduce_acc.h"
#include "reduce_store.h"
#if GM_EXACT
#include "reduce_exact.h"
#include "reduce_limbs.h"
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

