// Storing a reduction's result: gm_store rounds one output's accumulator into the output (the
// correctly rounded means: the bound test's verdict into its flag; the wide sum: both words), gm_emit
// stores it or, in a split reduction, writes it to its chunk partial. Both kernel shapes.

// Store output element i (an element index into out) and its flag fi.
//   GM_EXACT: the bound test's bits (gm_settle, from the accumulator's header), the flag 1 when the
//     bound left the output open.
//   GM_WIDE_SUM: the two-word total (GM_WIDE_WORDS, from the accumulator's header); the low word's
//     element from its own offset and strides. The wide sum has no flags: the host binds flag_off 0,
//     so that fi is the output's kept index k (every caller passes flag_off + k).
//   otherwise: divide once, round once (STORE_RESULT); no flags.
// Returns 1 when the output was left open (GM_EXACT), else 0.
GM_INLINE int gm_store(gm_acc a, ulong n, __global OUT_T* out, long i, __global uchar* flag, long fi,
                       __constant const gm_rmeta* m GM_CHK_P) {
#if GM_EXACT
    GM_BITS_T bits;
    const int ok = gm_settle(a, n, m->depth, &bits);
    GM_STORE_BITS(GM_AT(GM_A_OUT, OUT_T, out, i, 1), bits);
    GM_FLAG(fi) = (uchar)(ok ? 0 : 1);
    return !ok;
#elif GM_WIDE_SUM
    OUT_T hi;
    LO_T lo;
    GM_WIDE_WORDS(a, hi, lo)
    *GM_AT(GM_A_OUT, OUT_T, out, i, 1) = hi;
    *GM_AT(GM_A_LO, LO_T, gm_lo, (long)gm_lo_off + gm_keep_offset(m, fi, 3), 1) = lo;
#else
    STORE_RESULT(GM_ACC_TOTAL(a), n, GM_AT(GM_A_OUT, OUT_T, out, i, 1));
#endif
#if !GM_EXACT
    return 0;
#endif
}


// Output k's sum over chunk ``chunk``: its partial slot when the reduction is split, else its result;
// 1 when that result was left open (gm_store).
GM_INLINE int gm_emit(gm_acc a, ulong n, __global OUT_T* out, ulong out_off, __global gm_acc* part,
                       ulong part_off, __global uchar* flag, ulong flag_off, int use_part,
                       __constant const gm_rmeta* m, long k, long chunk, long n_out GM_CHK_P) {
    if (use_part) {
        GM_PART((long)part_off + chunk * n_out + k) = a;
        return 0;
    }
    return gm_store(a, n, out, (long)out_off + gm_keep_offset(m, k, 2), flag, (long)flag_off + k, m GM_CHK_A);
}
