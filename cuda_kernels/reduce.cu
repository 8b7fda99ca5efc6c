// REDUCE AVERAGE (FLOAT32, FLOAT16) and the exact integer mean reduction (gm.ext) for CUDA.
//
// GPU mapping (reductions canonicalized on the host into row / col / general classes):
//   row      a warp (WARP_ROWS) or a whole block per (row, chunk); 4 independent loads in flight
//            per thread; warp shuffles, then shared memory across warps
//   col      threads on adjacent columns (coalesced), blockDim.y splits the rows, shared memory
//            combines them; gridDim.z splits long reduced runs into chunks
//   general  a thread per (output, chunk) walking the reduced index space
// Chunk partials go to the temporary resource and gm_reduce_finalize combines them in a fixed
// order: deterministic, no float atomics.
//
// Macros: T, ACC (double for floats, long long / unsigned long long for INT32 / UINT32),
//   TO_ACC(x), STORE_RESULT(total, n, p); KN, RN (ranks of kept / reduced groups);
//   BLOCK (threads per block); WARP_ROWS (1: a warp per row); COL_Y (blockDim.y of the col kernel)
// meta (device memory): keep_shape[KN], keep_in[KN], keep_out[KN], red_shape[RN], red_in[RN].
#include <cuda_fp16.h>

__device__ __forceinline__ long long gm_keep_offset(const long long* meta, long long k, int which) {
    // one 64-bit division per kept group but the outermost, whose index is what is left
    long long off = 0;
#pragma unroll
    for (int d = KN - 1; d > 0; --d) {
        long long sz = meta[d], q = k / sz;
        off += (k - q * sz) * meta[KN * which + d];
        k = q;
    }
    return KN > 0 ? off + k * meta[KN * which] : 0;
}

__device__ __forceinline__ ACC gm_warp_sum(ACC v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ void gm_emit(ACC total, unsigned long long n, OUT_T* out, ACC* part,
                                        const long long* meta, long long k, long long chunk, long long n_out) {
    if (part) part[chunk * n_out + k] = total;
    else STORE_RESULT(total, n, out + gm_keep_offset(meta, k, 2));
}

extern "C" __global__ void gm_reduce_row(const T* __restrict__ in, OUT_T* __restrict__ out, ACC* __restrict__ part,
                                         const long long* __restrict__ meta, long long n_out, long long len,
                                         long long clen, unsigned long long n) {
    __shared__ ACC warp_sums[BLOCK / 32];
    long long chunk = blockIdx.y;
#if WARP_ROWS
    long long k = (long long)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32, width = 32;
    if (k >= n_out) return;
#else
    long long k = blockIdx.x;
    int lane = threadIdx.x, width = BLOCK;
#endif
    const T* p = in + gm_keep_offset(meta, k, 1);
    long long i = chunk * clen + lane, end = min(len, chunk * clen + clen);
    ACC s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (; i + 3 * width < end; i += 4 * width) {
        s0 += TO_ACC(p[i]);
        s1 += TO_ACC(p[i + width]);
        s2 += TO_ACC(p[i + 2 * width]);
        s3 += TO_ACC(p[i + 3 * width]);
    }
    for (; i < end; i += width) s0 += TO_ACC(p[i]);
    ACC s = gm_warp_sum((s0 + s1) + (s2 + s3));
#if WARP_ROWS
    if (lane == 0) gm_emit(s, n, out, part, meta, k, chunk, n_out);
#else
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        ACC w = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : (ACC)0;
        w = gm_warp_sum(w);
        if (threadIdx.x == 0) gm_emit(w, n, out, part, meta, k, chunk, n_out);
    }
#endif
}

// [outer kept..., R (stride rs), inner kept I (stride 1 in input and output)]
extern "C" __global__ void gm_reduce_col(const T* __restrict__ in, OUT_T* __restrict__ out, ACC* __restrict__ part,
                                         const long long* __restrict__ meta, long long n_out, long long len,
                                         long long clen, unsigned long long n, long long inner, long long rs) {
    __shared__ ACC tile[COL_Y][33];
    long long col = (long long)blockIdx.x * 32 + threadIdx.x;
    long long o = blockIdx.y, chunk = blockIdx.z;
    ACC s = 0;
    if (col < inner) {
        const T* p = in + gm_keep_offset(meta, o * inner + col, 1);
        long long r = chunk * clen + threadIdx.y, end = min(len, chunk * clen + clen);
        ACC s1 = 0;
        for (; r + COL_Y < end; r += 2 * COL_Y) {
            s += TO_ACC(p[r * rs]);
            s1 += TO_ACC(p[(r + COL_Y) * rs]);
        }
        if (r < end) s += TO_ACC(p[r * rs]);
        s += s1;
    }
    tile[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
        ACC t = 0;
#pragma unroll
        for (int y = 0; y < COL_Y; ++y) t += tile[y][threadIdx.x];
        gm_emit(t, n, out, part, meta, o * inner + col, chunk, n_out);
    }
}

extern "C" __global__ void gm_reduce_general(const T* __restrict__ in, OUT_T* __restrict__ out, ACC* __restrict__ part,
                                             const long long* __restrict__ meta, long long n_out, long long len,
                                             long long clen, unsigned long long n) {
    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (k >= n_out) return;
    const T* p = in + gm_keep_offset(meta, k, 1);
    long long j = chunk * clen, end = min(len, j + clen);
    ACC s = 0;
#if RN > 0
    const long long* rshape = meta + 3 * KN;
    const long long* rstr = meta + 3 * KN + RN;
    long long idx[RN];
    long long rem = j, off = 0;
    for (int d = RN - 1; d >= 0; --d) { idx[d] = rem % rshape[d]; rem /= rshape[d]; off += idx[d] * rstr[d]; }
    for (; j < end; ++j) {
        s += TO_ACC(p[off]);
        for (int d = RN - 1; d >= 0; --d) {
            off += rstr[d];
            if (++idx[d] < rshape[d]) break;
            off -= idx[d] * rstr[d];
            idx[d] = 0;
        }
    }
#else
    if (j < end) s = TO_ACC(p[0]);
#endif
    gm_emit(s, n, out, part, meta, k, chunk, n_out);
}

extern "C" __global__ void gm_reduce_finalize(const ACC* __restrict__ part, long long n_chunks, long long n_out,
                                              OUT_T* __restrict__ out, const long long* __restrict__ meta,
                                              unsigned long long n) {
    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_out) return;
    ACC s = part[k];
    for (long long c = 1; c < n_chunks; ++c) s += part[c * n_out + k];
    STORE_RESULT(s, n, out + gm_keep_offset(meta, k, 2));
}
