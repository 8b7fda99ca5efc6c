// The reduction accumulator of float types on a device without fp64 (COMPENSATED): a float sum with a
// Neumaier compensation term. One of the accumulators reduce_acc.h chooses; the interface is theirs.

typedef struct { ACC s; ACC c; } gm_acc;
// s from -0.0 (zeros alone keep IEEE's sign: -0.0 from -0.0s alone), c from +0.0
#define GM_ACC_ZERO(a) { (a).s = -0.0f; (a).c = 0; }
#define GM_ACC_ADD(a, x) { ACC x_ = (x); ACC t_ = (a).s + x_; \
    (a).c += (fabs((a).s) >= fabs(x_)) ? (((a).s - t_) + x_) : ((x_ - t_) + (a).s); (a).s = t_; }
#define GM_ACC_MERGE(a, b) { GM_ACC_ADD(a, (b).s); (a).c += (b).c; }
// an infinite sum leaves a NaN compensation term behind: the sum alone is the answer then (and
// where c is zero: s + 0 would turn a -0.0 sum into +0.0)
#define GM_ACC_TOTAL(a) (isfinite((a).s) && (a).c != 0 ? (a).s + (a).c : (a).s)
#define GM_ACC_FIELDS(X) X(s) X(c)
