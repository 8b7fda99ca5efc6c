// The GPU shape's exact tier (GM_EXACT), inside the kernels that store: an output the bound test
// leaves open is summed again, at once, by the work-group that stored it, into the superaccumulator
// (reduce_exact.h); its flag stays 1 ("was open": CompiledOperator.open_outputs counts them). There
// is no exact kernel of its own, so an execute whose outputs are all settled launches nothing more
// and does no per-output work beyond a barrier per block of outputs stored.
//
// needs: exact.h, reduce_exact.h (gm_xacc, gm_exact_range, gm_exact_store); EX_WG: the number of
// superaccumulators a group merges (a power of two; 64, FLOAT64's 552-byte ones 16).

// FLOAT64's redo (its 68-limb superaccumulator) is compiled once and called (GM_COLD: CUDA's
// __noinline__): inlined into each kernel it took NVRTC 13-22 s per variant, called 7-9 s, and the
// kernels' registers stay in the same occupancy step (164 -> 168-175, one 256-item group per SM
// either way; docs/design.md, "Registers"). The narrow formats' redo stays inlined: called, it put
// their row and column kernels past 64 registers (57 -> 64, 63 -> 69).
#if GM_X_D
#define GM_REDO_FN GM_COLD
#else
#define GM_REDO_FN GM_INLINE
#endif

// The input of the finalize pass (its open outputs are summed again from the values).
#define GM_FIN_IN , __global const T* restrict in, ulong in_off

// The EX_WG superaccumulators in xs merged by a halving tree (a fixed order; exact anyway): the
// total in xs[0]. Every work-item of the group (gsize of them, any number) calls it.
GM_INLINE void gm_xacc_tree(LOCAL_PTR gm_xacc* xs, const int lid, const int gsize) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int o = EX_WG / 2; o > 0; o >>= 1) {
        for (int t = lid; t < o; t += gsize) {   // reads [o, 2o), writes [0, o): no overlap
            gm_xacc a = xs[t], b = xs[t + o];
            GM_XMERGE(&a, &b);
            xs[t] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// Output k summed exactly by the whole work-group and stored: EX_WG contiguous shares of its n
// values, share s taken by work-item s mod gsize, merged by the tree; work-item 0 divides, rounds and
// stores. Every work-item of the group calls it (its barriers).
GM_REDO_FN void gm_redo_output(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                               LOCAL_PTR gm_xacc* xs, __constant const gm_rmeta* m, long k, ulong n,
                               const int lid, const int gsize GM_CHK_P) {
    const long share = ((long)n + EX_WG - 1) / EX_WG;
    const long base = (long)in_off + gm_keep_offset(m, k, 1);
    for (int s = lid; s < EX_WG; s += gsize) {
        gm_xacc x;
        GM_XINIT(&x);
        const long j0 = min((long)n, s * share);
        gm_exact_range(&x, in, base, m, j0, min((long)n, j0 + share) GM_CHK_A);
        GM_XNORM(&x);
        xs[s] = x;
    }
    gm_xacc_tree(xs, lid, gsize);
    if (lid == 0) {
        gm_xacc a = xs[0];
        gm_exact_store(&a, n, out, (long)out_off + gm_keep_offset(m, k, 2) GM_CHK_A);
    }
    barrier(CLK_LOCAL_MEM_FENCE);   // xs is rewritten by the next
}

// Outputs k0 .. k0 + count - 1, whose open marks the group wrote to open[0 .. count): the open ones
// redone by the whole group, one after another. Every work-item calls it; open[] is read only after
// the barrier that follows the marks, and rewritten only after the barrier at the end.
GM_INLINE void gm_redo_marked(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                              LOCAL_PTR gm_xacc* xs, LOCAL_PTR const uchar* open, const int count,
                              __constant const gm_rmeta* m, long k0, ulong n, const int lid,
                              const int gsize GM_CHK_P) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < count; ++t) {
        if (open[t]) gm_redo_output(in, in_off, out, out_off, xs, m, k0 + t, n, lid, gsize GM_CHK_A);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}
