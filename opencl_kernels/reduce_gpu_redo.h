// The GPU shape's exact tier (GM_EXACT), inside the kernels that store: an output the bound test
// leaves open is summed again, at once, by the work-group that stored it, into the superaccumulator
// (reduce_exact.h); its flag stays 1 ("was open": CompiledOperator.open_outputs counts them). There
// is no exact kernel of its own, so an execute whose outputs are all settled launches nothing more
// and does no per-output work: a block of outputs stored pays the read of its open list's length
// and barriers.
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

// Output k summed exactly by the whole work-group and stored: work-item t deposits values t, t + gsize,
// ... of the output's reduced space (FLOAT64: EX_WG contiguous shares, below) (adjacent work-items on adjacent values: coalesced where the
// innermost reduced run is dense) into its own superaccumulator; the gsize of them are merged into
// EX_WG in rounds of EX_WG work-items, then by the tree; work-item 0 divides, rounds and stores.
// Every work-item of the group calls it (its barriers).
GM_REDO_FN void gm_redo_output(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                               LOCAL_PTR gm_xacc* xs, __constant const gm_rmeta* m, long k, ulong n,
                               const int lid, const int gsize GM_CHK_P) {
    const long base = (long)in_off + gm_keep_offset(m, k, 1);
#if GM_X_D
    // FLOAT64: EX_WG contiguous shares, each summed into xs directly (the merge rounds below hold a
    // second 552-byte superaccumulator, which put FLOAT64's kernels at 255 registers and spilling)
    const long share = ((long)n + EX_WG - 1) / EX_WG;
    for (int s = lid; s < EX_WG; s += gsize) {
        gm_xacc x;
        GM_XINIT(&x);
        const long j0 = min((long)n, s * share);
        gm_exact_range(&x, in, base, m, j0, min((long)n, j0 + share) GM_CHK_A);
        GM_XNORM(&x);
        xs[s] = x;
    }
#else
    gm_xacc x;
    GM_XINIT(&x);
    gm_exact_strided(&x, in, base, m, lid, (long)n, gsize GM_CHK_A);
    GM_XNORM(&x);
    for (int s = gsize + lid; s < EX_WG; s += gsize) {     // a group narrower than EX_WG: zeros beyond
        gm_xacc z;
        GM_XINIT(&z);
        xs[s] = z;
    }
    for (int r = 0; r < gsize; r += EX_WG) {    // work-items r .. r + EX_WG - 1 merge into xs[0 .. EX_WG)
        if (lid >= r && lid - r < EX_WG) {
            if (r == 0) {
                xs[lid] = x;
            } else {
                gm_xacc a = xs[lid - r];
                GM_XMERGE(&a, &x);
                xs[lid - r] = a;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    gm_xacc_tree(xs, lid, gsize);
    if (lid == 0) {
        gm_xacc a = xs[0];
        gm_exact_store(&a, n, out, (long)out_off + gm_keep_offset(m, k, 2) GM_CHK_A);
    }
    barrier(CLK_LOCAL_MEM_FENCE);   // xs is rewritten by the next
}

// The open outputs of a block of outputs k0, k0 + 1, ...: a list of their slots (k - k0) in local
// memory and its length. A work-item whose output the bound left open appends its slot (GM_MARK; the
// list's order is the atomics', which changes nothing: each output is redone on its own). The redo then
// walks the list, so a block whose outputs are all settled pays one read of the length and barriers,
// never a scan of every output's mark. A kernel declares the list (GM_OPEN_LIST, at most 65536 slots)
// and empties it once before its loops (GM_OPEN_START: every work-item, before any mark).
#define GM_OPEN_LIST(slots) __local ushort gm_olist[slots]; __local int gm_nopen;
#define GM_OPEN_START(lid) { if ((lid) == 0) gm_nopen = 0; barrier(CLK_LOCAL_MEM_FENCE); }
#define GM_MARK(was_open, slot) { if (was_open) gm_olist[atomic_inc(&gm_nopen)] = (ushort)(slot); }

// The outputs listed (GM_MARK) redone by the whole group, one after another; the list emptied for the
// next block. Every work-item calls it. The length is read after the barrier that follows the marks;
// work-item 0 empties it after its redos: when the list was empty, every work-item read 0 and the
// write is 0 again; otherwise every work-item read the length before the first redo's barriers, which
// work-item 0 passed before writing. The barrier at the end orders the write before the next marks.
GM_INLINE void gm_redo_marked(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                              LOCAL_PTR gm_xacc* xs, LOCAL_PTR const ushort* list, volatile LOCAL_PTR int* count,
                              __constant const gm_rmeta* m, long k0, ulong n, const int lid,
                              const int gsize GM_CHK_P) {
    barrier(CLK_LOCAL_MEM_FENCE);
    const int c = *count;
    for (int t = 0; t < c; ++t) gm_redo_output(in, in_off, out, out_off, xs, m, k0 + list[t], n, lid, gsize GM_CHK_A);
    if (lid == 0) *count = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
}
