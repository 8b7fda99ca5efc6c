// The reduction accumulator of every other variant: the plan's type (double for FLOAT32, FLOAT16 and
// BFLOAT16 with fp64, long / ulong for integers), one plain sum. One of the accumulators reduce_acc.h
// chooses; the interface is theirs.

typedef struct { ACC s; } gm_acc;
// GM_ACC0: -0.0 for a float accumulator (zeros alone keep IEEE's sign), 0 for integers
#define GM_ACC_ZERO(a) { (a).s = GM_ACC0; }
#define GM_ACC_ADD(a, x) { (a).s += (x); }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; }
#define GM_ACC_TOTAL(a) ((a).s)
#define GM_ACC_FIELDS(X) X(s)
