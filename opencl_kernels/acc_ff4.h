// The reduction accumulator of BFLOAT16 without fp64 (GM_BF16_NOFP64). One of the accumulators
// reduce_acc.h chooses; the interface is theirs.

// BFLOAT16 without fp64: two compensated float pairs (common.h: gm_ff4); STORE_RESULT takes the accumulator
typedef gm_ff4 gm_acc;
#define GM_ACC_ZERO(a) GM_FF4_ZERO(a)
#define GM_ACC_ADD(a, x) GM_FF4_ADD(a, x)
#define GM_ACC_MERGE(a, b) { gm_ff4_merge(&(a), (b)); }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(s) X(c) X(bs) X(bc)
