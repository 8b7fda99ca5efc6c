// The reductions' accumulator, one per variant, chosen by the macros the host sets
// (gpu_mean/kernels/reduce_kernels.py: type_macros). Each acc_*.h defines one kind behind one
// interface: the type gm_acc (also the chunk partial's layout), GM_ACC_ZERO(a), GM_ACC_ADD(a, x),
// GM_ACC_MERGE(a, b), GM_ACC_TOTAL(a) (what STORE_RESULT takes) and GM_ACC_FIELDS(X) (the warp
// shuffle's fields); the correctly rounded kinds (GM_EXACT) add their bound test gm_settle, GM_BITS_T
// and GM_STORE_BITS for reduce_store.h. Both kernel shapes use the same accumulator.
#if COMPENSATED
#include "acc_compensated.h"
#elif WIDE_INT
#include "acc_wide_int.h"
#elif GM_BF16_NOFP64
#include "acc_ff4.h"
#elif WIDE_FLOAT && GM_EXACT
#include "acc_dd4_exact.h"
#elif WIDE_FLOAT
#include "acc_dd4.h"
#elif GM_EXACT && GM_FF
#include "acc_ff_exact.h"
#elif GM_EXACT
#include "acc_double_exact.h"
#else
#include "acc_plain.h"
#endif

// The column kernel's accumulators in flight (reduce_gpu.cl: gm_reduce_col): four, but two for the
// wide ones (two double-doubles, two 128-bit integer sums), whose four put FLOAT64's column kernel
// past 255 registers into spills.
#if WIDE_FLOAT || WIDE_INT
#define COL_U 2
#else
#define COL_U 4
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
