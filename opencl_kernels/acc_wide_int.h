// The reduction accumulator of INT64 / UINT64 (WIDE_INT). One of the accumulators reduce_acc.h
// chooses; the interface is theirs, plus GM_WIDE_WORDS for the wide sum's two-word total.

// INT64 / UINT64: s sums the high 32-bit halves, c the low ones (common.h: GM_WIDE_ADD); STORE_RESULT
// takes the pair
typedef struct { ulong s; ulong c; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = 0; (a).c = 0; }
#define GM_ACC_ADD(a, x) { const T x_ = (x); GM_WIDE_ADD((a).s, (a).c, x_) }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).c += (b).c; }
#define GM_ACC_TOTAL(a) (a)
#define GM_ACC_FIELDS(X) X(s) X(c)

// the wide sum's total s 2^32 + c as hi 2^64 + lo (gpu_mean/runtime/wide.py: int_sum0 then
// words128): A = s + (c >> 32) (its true value fits A's type), then hi = A >> 32 with the type's own
// shift (arithmetic for INT64), lo = (A << 32) | (c mod 2^32)
#define GM_WIDE_WORDS(a, hi, lo) { const ulong A_ = (a).s + ((a).c >> 32); \
    hi = (OUT_T)((T)A_ >> 32); lo = (A_ << 32) | ((a).c & 0xFFFFFFFFUL); }
