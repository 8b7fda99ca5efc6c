// REDUCE AVERAGE (FLOAT32, FLOAT16) and the exact integer mean reduction (gm.ext), for OpenCL.
//
// Written for CPU-like devices first (PoCL): no barriers and no local-memory trees; each
// work-item runs a serial, vectorizable loop and a tiny second pass combines chunk partials.
//
// Macros (prepended by gpu_mean/backends/opencl.py):
//   T                storage type; LOAD8(p) -> 8 lanes as ACC8 input; LOAD1(p) one element
//   ACC, ACC8        accumulator scalar/8-vector: double (fp32/fp16 with fp64), float with a
//                    Neumaier compensation term (no fp64), long (INT32), ulong (UINT32)
//   COMPENSATED      1 when ACC is a compensated float
//   STORE_RESULT(acc_total, n, p)   divide once, round once, store one element
//   KN, RN           ranks of the coalesced kept and reduced dimension groups
//   COLS             columns per work-item in the column kernel (multiple of 8)
//   ROW_MULTI        row kernel over interleaved axes: one work-item per (output, outer reduced index)
//   HALF_BLOCKS      FLOAT16 rows: short float blocks before the wide accumulator; TO_ACC8(v) float8 -> ACC8
//   PREFETCH         0: none; row kernel: bytes ahead; column kernel: rows ahead (CPU devices only)
// meta (long): keep_shape[KN], keep_in[KN], keep_out[KN], red_shape[RN], red_in[RN].
// Partials (temporary resource): [chunk][output] of ACC (plus compensation, interleaved).
#if USE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#if COMPENSATED
typedef struct { ACC s; ACC c; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = 0; (a).c = 0; }
#define GM_ACC_ADD(a, x) { ACC t_ = (a).s + (x); \
    (a).c += (fabs((a).s) >= fabs(x)) ? (((a).s - t_) + (x)) : (((x) - t_) + (a).s); (a).s = t_; }
#define GM_ACC_MERGE(a, b) { GM_ACC_ADD(a, (b).s); (a).c += (b).c; }
// an infinite sum leaves a NaN compensation term behind: the sum alone is the answer then
#define GM_ACC_TOTAL(a) (isfinite((a).s) ? (a).s + (a).c : (a).s)
#define ACC8_ADD(s8, c8, x8) { ACC8 t_ = s8 + (x8); \
    c8 += select(((x8) - t_) + s8, (s8 - t_) + (x8), isgreaterequal(fabs(s8), fabs(x8))); s8 = t_; }
#else
typedef struct { ACC s; } gm_acc;
#define GM_ACC_ZERO(a) { (a).s = 0; }
#define GM_ACC_ADD(a, x) { (a).s += (x); }
#define GM_ACC_MERGE(a, b) { (a).s += (b).s; }
#define GM_ACC_TOTAL(a) ((a).s)
#define ACC8_ADD(s8, c8, x8) { s8 += (x8); }
#endif

// Software prefetch for CPU devices (PREFETCH != 0; the host sets it only where the lines are read
// soon, see launch.reduce_geometry). Row kernel: PREFETCH bytes ahead in the run; column kernel: the
// same columns PREFETCH rows ahead. Measured on PoCL (2-core CI VM): the hardware prefetcher alone
// leaves a single stream per core ~15 % below the memory bandwidth reached with it.
#if PREFETCH
#define GM_PREFETCH(p, bytes) __builtin_prefetch((__global const char*)(p) + (bytes))
#else
#define GM_PREFETCH(p, bytes)
#endif

inline long gm_keep_offset(__constant long* meta, long k, int which) {
    // which: 1 = input strides, 2 = output strides
    // one division per kept group but the outermost (a 64-bit division per output cost the row
    // kernel 4% of its bandwidth on PoCL)
    long off = 0;
    for (int d = KN - 1; d > 0; --d) {
        long sz = meta[d], q = k / sz;
        off += (k - q * sz) * meta[KN * which + d];
        k = q;
    }
    return KN > 0 ? off + k * meta[KN * which] : 0;
}

inline void gm_finish(gm_acc a, ulong n, __global OUT_T* out, __constant long* meta, long k) {
    STORE_RESULT(GM_ACC_TOTAL(a), n, out + gm_keep_offset(meta, k, 2));
}

// one output already located: its element in out, or its partial slot (pp non-null)
inline void gm_emit_at(gm_acc a, ulong n, __global OUT_T* o, __global gm_acc* pp) {
    if (pp) *pp = a;
    else STORE_RESULT(GM_ACC_TOTAL(a), n, o);
}

inline void gm_emit(gm_acc a, ulong n, __global OUT_T* out, __global gm_acc* part, __constant long* meta,
                    long k, long chunk, long n_out) {
    if (part) part[chunk * n_out + k] = a;
    else gm_finish(a, n, out, meta, k);
}

// Row class: the reduced run is contiguous. Work-item (k, chunk) sums [chunk*clen, +clen) of row k.
__kernel void gm_reduce_row(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                            __global gm_acc* part, ulong part_off, int use_part, __constant long* meta,
                            long n_out, long len, long clen, ulong n) {
    long k = get_global_id(0), chunk = get_global_id(1);
    if (k >= n_out) return;
    __global const T* p = in + in_off + gm_keep_offset(meta, k, 1);
#if ROW_MULTI
    // interleaved axes whose innermost reduced dimension is dense: "chunk" enumerates the outer
    // reduced index, each work-item sums one dense run, and the finalize pass adds the runs
    long rem = chunk;
    for (int d = RN - 2; d >= 0; --d) {
        long idx = rem % meta[3 * KN + d];
        rem /= meta[3 * KN + d];
        p += idx * meta[3 * KN + RN + d];
    }
    long i = 0, end = len;
#else
    long i = chunk * clen, end = min(len, i + clen);
#endif
    // four independent accumulators: one add chain would be bound by the adder's latency
    ACC8 s8 = (ACC8)(0), c8 = (ACC8)(0), s8b = (ACC8)(0), c8b = (ACC8)(0);
    ACC8 s8c = (ACC8)(0), c8c = (ACC8)(0), s8d = (ACC8)(0), c8d = (ACC8)(0);
#if HALF_BLOCKS
    // FLOAT16: each lane adds 8 halves in float (same-signed: within 7 float ulps of the block's sum,
    // 2^-21 relative, far inside a half ulp), then the block joins the wide accumulator. The
    // conversions, not the memory, bounded this loop at one half per wide add (0.66x copy -> 0.8x).
    for (; i + 64 <= end; i += 64) {
        GM_PREFETCH(p + i, PREFETCH); GM_PREFETCH(p + i + 32, PREFETCH);
        float8 h0 = (vload_half8(0, p + i) + vload_half8(0, p + i + 8)) + (vload_half8(0, p + i + 16) + vload_half8(0, p + i + 24));
        float8 h1 = (vload_half8(0, p + i + 32) + vload_half8(0, p + i + 40)) + (vload_half8(0, p + i + 48) + vload_half8(0, p + i + 56));
        ACC8 x8 = TO_ACC8(h0 + h1);
        ACC8_ADD(s8, c8, x8);
    }
#endif
    for (; i + 32 <= end; i += 32) {
        GM_PREFETCH(p + i, PREFETCH); GM_PREFETCH(p + i + 16, PREFETCH);
        ACC8 x0 = LOAD8(p + i), x1 = LOAD8(p + i + 8), x2 = LOAD8(p + i + 16), x3 = LOAD8(p + i + 24);
        ACC8_ADD(s8, c8, x0); ACC8_ADD(s8b, c8b, x1); ACC8_ADD(s8c, c8c, x2); ACC8_ADD(s8d, c8d, x3);
    }
    for (; i + 8 <= end; i += 8) { ACC8 x8 = LOAD8(p + i); ACC8_ADD(s8, c8, x8); }
    ACC8_ADD(s8, c8, s8b); ACC8_ADD(s8c, c8c, s8d); ACC8_ADD(s8, c8, s8c);
    c8 += c8b + c8c + c8d;
    gm_acc a;
    GM_ACC_ZERO(a);
    ACC8 t8 = s8;
#if COMPENSATED
    a.c = c8.s0 + c8.s1 + c8.s2 + c8.s3 + c8.s4 + c8.s5 + c8.s6 + c8.s7;
#endif
    GM_ACC_ADD(a, t8.s0); GM_ACC_ADD(a, t8.s1); GM_ACC_ADD(a, t8.s2); GM_ACC_ADD(a, t8.s3);
    GM_ACC_ADD(a, t8.s4); GM_ACC_ADD(a, t8.s5); GM_ACC_ADD(a, t8.s6); GM_ACC_ADD(a, t8.s7);
    for (; i < end; ++i) { ACC x = LOAD1(p + i); GM_ACC_ADD(a, x); }
    gm_emit(a, n, out + out_off, use_part ? part + part_off : 0, meta, k, chunk, n_out);
}

// Column class: [outer kept..., R (stride rs), inner kept I (stride 1 in input and output)].
// Work-item (column block, outer index, chunk) sums COLS adjacent columns over a chunk of rows:
// every row read is COLS contiguous elements, and no work-item ever walks a whole column alone.
__kernel void gm_reduce_col(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                            __global gm_acc* part, ulong part_off, int use_part, __constant long* meta,
                            long n_out, long len, long clen, ulong n, long inner, long rs) {
    long cb = get_global_id(0), o = get_global_id(1), chunk = get_global_id(2);
    long c0 = cb * COLS;
    if (c0 >= inner) return;
    long k0 = o * inner + c0;
    __global const T* p = in + in_off + gm_keep_offset(meta, k0, 1);
    // the COLS outputs of this work-item are adjacent (inner stride 1 in the output and in the partials)
    __global OUT_T* ob = out + out_off + gm_keep_offset(meta, k0, 2);
    __global gm_acc* pb = use_part ? part + part_off + chunk * n_out + k0 : 0;
    long r = chunk * clen, rend = min(len, r + clen);
    if (c0 + COLS <= inner) {
        ACC8 s[COLS / 8];
#if COMPENSATED
        ACC8 c[COLS / 8];
#define GM_C(v) c[v]
#else
        ACC8 c_unused = (ACC8)(0);
#define GM_C(v) c_unused
#endif
        for (int v = 0; v < COLS / 8; ++v) { s[v] = (ACC8)(0); GM_C(v) = (ACC8)(0); }
#if !COMPENSATED
        // four rows per pass over the accumulators: a quarter of the accumulator loads and stores
        // (COLS/8 vectors do not fit in registers), and four row streams in flight. Exact adds
        // (integers) or double adds of floats: the grouping does not change the 1-ulp bound.
        for (; r + 4 <= rend; r += 4) {
            __global const T* q = p + r * rs;
            for (int v = 0; v < COLS / 8; ++v) {
#if PREFETCH
                if ((v & 1) == 0) {   // the same columns PREFETCH rows on: a 64-byte line per two vectors
                    __global const T* f = q + PREFETCH * rs + 8 * v;
                    GM_PREFETCH(f, 0); GM_PREFETCH(f + rs, 0); GM_PREFETCH(f + 2 * rs, 0); GM_PREFETCH(f + 3 * rs, 0);
                }
#endif
                s[v] += (LOAD8(q + 8 * v) + LOAD8(q + rs + 8 * v)) + (LOAD8(q + 2 * rs + 8 * v) + LOAD8(q + 3 * rs + 8 * v));
            }
        }
#endif
        for (; r < rend; ++r) {
            __global const T* q = p + r * rs;
            for (int v = 0; v < COLS / 8; ++v) { ACC8 x8 = LOAD8(q + 8 * v); ACC8_ADD(s[v], GM_C(v), x8); }
        }
        for (int v = 0; v < COLS / 8; ++v) {
            ACC ss[8];
            vstore8(s[v], 0, ss);
#if COMPENSATED
            ACC cc[8];
            vstore8(c[v], 0, cc);
#endif
            for (int j = 0; j < 8; ++j) {
                gm_acc a;
                a.s = ss[j];
#if COMPENSATED
                a.c = cc[j];
#endif
                gm_emit_at(a, n, ob + 8 * v + j, pb ? pb + 8 * v + j : 0);
            }
        }
    } else {
        for (long col = c0; col < inner; ++col) {
            gm_acc a;
            GM_ACC_ZERO(a);
            for (long rr = r; rr < rend; ++rr) { ACC x = LOAD1(p + (col - c0) + rr * rs); GM_ACC_ADD(a, x); }
            gm_emit_at(a, n, ob + (col - c0), pb ? pb + (col - c0) : 0);
        }
    }
}

// General class: interleaved axes, broadcast or padded inputs. Work-item (k, chunk) walks a chunk
// of the reduced index space with a carried multi-index.
__kernel void gm_reduce_general(__global const T* in, ulong in_off, __global OUT_T* out, ulong out_off,
                                __global gm_acc* part, ulong part_off, int use_part, __constant long* meta,
                                long n_out, long len, long clen, ulong n) {
    long k = get_global_id(0), chunk = get_global_id(1);
    if (k >= n_out) return;
    __constant long* rshape = meta + 3 * KN;
    __constant long* rstr = meta + 3 * KN + RN;
    __global const T* p = in + in_off + gm_keep_offset(meta, k, 1);
    long j = chunk * clen, end = min(len, j + clen);
    gm_acc a;
    GM_ACC_ZERO(a);
#if RN > 0
    long idx[RN];
    long rem = j, off = 0;
    for (int d = RN - 1; d >= 0; --d) { idx[d] = rem % rshape[d]; rem /= rshape[d]; off += idx[d] * rstr[d]; }
    for (; j < end; ++j) {
        ACC x = LOAD1(p + off);
        GM_ACC_ADD(a, x);
        for (int d = RN - 1; d >= 0; --d) {
            off += rstr[d];
            if (++idx[d] < rshape[d]) break;
            off -= idx[d] * rstr[d];
            idx[d] = 0;
        }
    }
#else
    if (j < end) { ACC x = LOAD1(p); GM_ACC_ADD(a, x); }
#endif
    gm_emit(a, n, out + out_off, use_part ? part + part_off : 0, meta, k, chunk, n_out);
}

// Second pass: combine the chunk partials of each output in a fixed order (deterministic).
__kernel void gm_reduce_finalize(__global const gm_acc* part, ulong part_off, long n_chunks, long n_out,
                                 __global OUT_T* out, ulong out_off, __constant long* meta, ulong n) {
    long k = get_global_id(0);
    if (k >= n_out) return;
    part += part_off;
    gm_acc a = part[k];
    for (long c = 1; c < n_chunks; ++c) { gm_acc b = part[c * n_out + k]; GM_ACC_MERGE(a, b); }
    gm_finish(a, n, out + out_off, meta, k);
}
