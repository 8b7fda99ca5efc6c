// The GPU shape's short rows (the row class with runs of at most 32 values, never split):
// gm_reduce_tile where the rows are dense and adjacent and of a power-of-two length (FLOAT32, FLOAT16,
// BFLOAT16; SHORT_TILE), gm_reduce_short for the rest (SHORT_LPR), and the span proof both take.
// Included by reduce_gpu.cl after its warp and group trees (gm_shfl_down) and the redo's list.
//
// needs: reduce_acc.h, reduce_store.h (gm_emit, GM_STORE_BITS, GM_BITS_OF), reduce_gpu_redo.h (GM_EXACT)

#if SHORT_LPR || SHORT_TILE
// Short rows (the row class with runs of at most 32 values, never split), in two kernels:
// gm_reduce_tile where the rows are dense and adjacent and of a power-of-two length (FLOAT32, FLOAT16,
// BFLOAT16), gm_reduce_short for the rest. Beside a row's sum, the largest magnitude's bits (hi) and
// the smallest nonzero one's (lo: a float's bits minus one, a zero wrapping to the top), for the span
// proof (gm_span_store).
typedef struct { gm_acc a; uint lo, hi; } gm_sacc;

GM_INLINE void gm_sacc_zero(gm_sacc* v) {
    GM_ACC_ZERO(v->a);
    v->lo = 0xffffffffu;
    v->hi = 0u;
}

GM_INLINE void gm_sacc_add(gm_sacc* v, const ACC x) {
    GM_ACC_ADD(v->a, x);
#if GM_SPAN
    const uint e = GM_E64(x);       // the FLOAT64 field (reduce_gpu_span.h: not through a float)
    v->lo = min(v->lo, e - 1u);
    v->hi = max(v->hi, e);
#endif
}

// GM_SPAN (FLOAT32, BFLOAT16 with fp64: reduce_kernels.short_span): a row whose largest and smallest
// nonzero magnitudes have exponent fields at most GM_SPAN = 52 - p - ceil(log2 n) apart has an exact
// FLOAT64 sum (every value a multiple of 2^(e_lo - bias - p + 1), every partial sum below
// 2^(e_hi - bias + 1) n: 53 bits), and its quotient rounded once more is the correctly rounded mean,
// exact ties included (no mean off a midpoint lies within the double quotient's rounding of one; the
// CPU shape's column kernel makes the same argument, reduce_cpu.cl: gm_col_exact). Then the output
// is stored with flag 0 and 1 is returned; else 0 (the bound test decides). Non-finite sums: the
// quotient is IEEE's answer either way.
GM_INLINE int gm_span_store(gm_sacc v, ulong n, __global OUT_T* out, long i, __global uchar* flag, long fi GM_CHK_P) {
#if GM_SPAN
    const int e_hi = (int)(v.hi >> 20) - 896;               // the float fields (896 = 1023 - 127)
    const int e_lo = max((int)((v.lo + 1u) >> 20) - 896, 1);
    if (v.hi == 0u || e_hi - e_lo > GM_SPAN) return 0;
    GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, i, 1), GM_BITS_OF(v.a.s / (double)n));
    GM_FLAG(fi) = (uchar)0;
    return 1;
#else
    return 0;
#endif
}

#endif

#if SHORT_LPR
// gm_reduce_short: SHORT_LPR lanes per row (a power of two), WG / SHORT_LPR rows per pass of the group,
// and SHORT_U passes' rows per work-item at once, whose loads are independent (in flight together).
// Lane j loads elements j, j + SHORT_LPR, ... of its row, so a warp reads 32 consecutive elements
// where the rows are dense and adjacent. A row's lanes add by a halving tree over offsets
// SHORT_LPR / 2 .. 1 (a warp shuffle on CUDA, local memory elsewhere: one order).
GM_INLINE gm_sacc gm_lanes_sum(gm_sacc v, LOCAL_PTR gm_sacc* scratch, int lid) {
#if GM_WARP_SHUFFLE
    for (int o = SHORT_LPR / 2; o > 0; o >>= 1) {
        gm_acc w = gm_shfl_down(v.a, o);
        const uint wlo = GM_SHFL_DOWN(v.lo, o), whi = GM_SHFL_DOWN(v.hi, o);
        GM_ACC_MERGE(v.a, w);
        v.lo = min(v.lo, wlo);
        v.hi = max(v.hi, whi);
    }
#else
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = SHORT_LPR / 2; o > 0; o >>= 1) {
        if ((lid & (SHORT_LPR - 1)) < o) {   // reads [o, 2o) of the row's lanes, writes [0, o)
            gm_sacc w = scratch[lid + o];
            GM_ACC_MERGE(v.a, w.a);
            v.lo = min(v.lo, w.lo);
            v.hi = max(v.hi, w.hi);
            scratch[lid] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    return v;
}

#if K_SHORT
__kernel void gm_reduce_short(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                              ulong out_off, __global gm_acc* restrict part, ulong part_off,
                              __global uchar* restrict flag, ulong flag_off, int use_part,
                              GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks, ulong n,
                              long runs GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local gm_sacc scratch[WG];
#if GM_EXACT
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(WG / SHORT_LPR * SHORT_U)
#endif
    const int lid = (int)get_local_id(0), lane = lid & (SHORT_LPR - 1), slot = lid / SHORT_LPR;
#if GM_EXACT
    GM_OPEN_START(lid)
#endif
    const long rows = WG / SHORT_LPR, per_group = rows * SHORT_U;
    for (long k0 = (long)get_group_id(0) * per_group; k0 < n_out; k0 += (long)get_num_groups(0) * per_group) {
        gm_sacc v[SHORT_U];
        long base[SHORT_U];
#pragma unroll
        for (int u = 0; u < SHORT_U; ++u) {
            gm_sacc_zero(&v[u]);
            const long k = k0 + u * rows + slot;
            base[u] = k < n_out ? (long)in_off + gm_keep_offset(m, k, 1) : -1;
        }
        for (long i = lane; i < len; i += SHORT_LPR) {
#pragma unroll
            for (int u = 0; u < SHORT_U; ++u) {   // SHORT_U independent loads
                if (base[u] < 0) continue;
                gm_sacc_add(&v[u], GM_IN1(base[u] + i));
            }
        }
#pragma unroll
        for (int u = 0; u < SHORT_U; ++u) {
            const long k = k0 + u * rows + slot;
            gm_sacc t = gm_lanes_sum(v[u], scratch, lid);
            GM_OPEN_DECL(was_open)
            if (lane == 0 && k < n_out && !gm_span_store(t, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag,
                                                         (long)flag_off + k GM_CHK_A)) {
                GM_OPENED(was_open, gm_emit(t.a, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, 0,
                                            n_out GM_CHK_A));
            }
#if GM_EXACT
            GM_MARK(was_open, u * rows + slot)
#endif
        }
#if GM_EXACT
        gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, k0, n, lid, WG GM_CHK_A);
#endif
    }
}
#endif  // K_SHORT
#endif

#if SHORT_TILE
// gm_reduce_tile: rows of SHORT_TILE values (a power of two, at most 32), row k at k * SHORT_TILE, a
// work-item per row. A pass of the group takes WG rows: their WG * SHORT_TILE consecutive values are
// loaded by consecutive work-items (SHORT_TILE loads each, all in flight, a warp's 32 adjacent: every
// sector whole) into local memory, row r's value j at tile[r * (SHORT_TILE + 1) + j] (the odd pitch
// keeps a warp's reads of its 32 rows on 32 banks); then each work-item adds its row there, with no
// lane tree. The span proof, the bound and the redo as gm_reduce_short.
#if K_TILE
__kernel void gm_reduce_tile(__global const T* restrict in, ulong in_off, __global OUT_T* restrict out,
                             ulong out_off, __global gm_acc* restrict part, ulong part_off,
                             __global uchar* restrict flag, ulong flag_off, int use_part,
                             GM_META_ARG(gm_rmeta, m), long n_out, long len, long clen, long n_chunks, ulong n,
                             long runs GM_CHK_P) {
    GM_META_BIND(gm_rmeta, m)
    __local EL_T tile[WG * (SHORT_TILE + 1)];
#if GM_EXACT
    __local gm_xacc xs[EX_WG];
    GM_OPEN_LIST(WG)
#endif
    const int lid = (int)get_local_id(0);
#if GM_EXACT
    GM_OPEN_START(lid)
#endif
    for (long k0 = (long)get_group_id(0) * WG; k0 < n_out; k0 += (long)get_num_groups(0) * WG) {
        const long base = (long)in_off + k0 * SHORT_TILE;
        const int count = (int)min((long)WG, n_out - k0) * SHORT_TILE;
#pragma unroll
        for (int j = 0; j < SHORT_TILE; ++j) {
            const int e = j * WG + lid;
            if (e < count) {
                tile[(e / SHORT_TILE) * (SHORT_TILE + 1) + (e & (SHORT_TILE - 1))] =
                    *(__global const EL_T*)GM_AT(GM_A_IN, const T, in, base + e, 1);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const long k = k0 + lid;
        GM_OPEN_DECL(was_open)
        if (k < n_out) {
            gm_sacc v;
            gm_sacc_zero(&v);
#pragma unroll
            for (int j = 0; j < SHORT_TILE; ++j) gm_sacc_add(&v, EL_ACC(tile[lid * (SHORT_TILE + 1) + j]));
            if (!gm_span_store(v, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag, (long)flag_off + k GM_CHK_A)) {
                GM_OPENED(was_open, gm_emit(v.a, n, out, out_off, part, part_off, flag, flag_off, use_part, m, k, 0,
                                            n_out GM_CHK_A));
            }
        }
#if GM_EXACT
        GM_MARK(was_open, lid)
        gm_redo_marked(in, in_off, out, out_off, xs, gm_olist, &gm_nopen, m, k0, n, lid, WG GM_CHK_A);
#else
        barrier(CLK_LOCAL_MEM_FENCE);   // every row read before the next pass rewrites the tile
#endif
    }
}
#endif  // K_TILE
#endif
