// REDUCE AVERAGE (FLOAT32, FLOAT16) and the exact integer mean reduction (gm.ext) for CUDA.
//
// GPU mapping (reductions canonicalized on the host into row / col / general classes):
//   row      a warp (WARP_ROWS) or a whole block per (output, chunk); 4 independent loads in flight
//            per thread; warp shuffles, then shared memory across warps. With ROW_MULTI it also
//            takes interleaved axes whose innermost reduced run is dense (per-channel statistics of
//            NCHW data): a chunk is a set of whole runs, each read coalesced.
//   col      threads on adjacent columns (coalesced), blockDim.y splits the rows, shared memory
//            combines them; gridDim.z splits long reduced runs into chunks
//   general  a thread per (output, chunk) walking the reduced index space
// Every kernel loops over its grid (grid-stride in x, y and z), so the host can cap the grid at
// CUDA's limits (y and z <= 65535) whatever the shape. Chunk partials go to the temporary resource
// and gm_reduce_finalize combines them in a fixed order: deterministic, no float atomics.
//
// Macros: T, ACC (double for floats, long long / unsigned long long for INT32 / UINT32),
//   TO_ACC(x), STORE_RESULT(total, n, p); KN, RN (ranks of kept / reduced groups), KNA, RNA (the
//   same, at least 1: array sizes); BLOCK (threads per block, row kernel); WARP_ROWS (1: a warp per
//   row); ROW_MULTI; COL_Y (blockDim.y of the col kernel); META_BYTES (sizeof(gm_rmeta) on the host).
#include <cuda_fp16.h>

// The plan's shapes and strides, by value (kernel parameters): nothing to upload before a launch.
struct gm_rmeta {
    long long keep_shape[KNA], keep_in[KNA], keep_out[KNA];
    long long red_shape[RNA], red_in[RNA];
};
static_assert(sizeof(gm_rmeta) == META_BYTES, "gm_rmeta differs from the host's numpy layout");

// a / b for non-negative values: a 32-bit division when both fit (a 64-bit one is a long
// software sequence on the GPU)
__device__ __forceinline__ long long gm_div(long long a, long long b) {
    return ((a | b) >> 31) == 0 ? (long long)((unsigned)a / (unsigned)b) : a / b;
}

// which: 1 = input strides, 2 = output strides; the outermost index is what is left (no division)
__device__ __forceinline__ long long gm_keep_offset(const gm_rmeta& m, long long k, int which) {
    const long long* st = which == 1 ? m.keep_in : m.keep_out;
    long long off = 0;
#pragma unroll
    for (int d = KN - 1; d > 0; --d) {
        long long q = gm_div(k, m.keep_shape[d]);
        off += (k - q * m.keep_shape[d]) * st[d];
        k = q;
    }
    return KN > 0 ? off + k * st[0] : 0;
}

// ROW_MULTI: the input offset of outer reduced index r (reduced dims 0 .. RN-2)
__device__ __forceinline__ long long gm_run_offset(const gm_rmeta& m, long long r) {
    long long off = 0;
#pragma unroll
    for (int d = RN - 2; d > 0; --d) {
        long long q = gm_div(r, m.red_shape[d]);
        off += (r - q * m.red_shape[d]) * m.red_in[d];
        r = q;
    }
    return RN > 1 ? off + r * m.red_in[0] : 0;
}

__device__ __forceinline__ ACC gm_warp_sum(ACC v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ void gm_emit(ACC total, unsigned long long n, OUT_T* out, ACC* part, const gm_rmeta& m,
                                        long long k, long long chunk, long long n_out) {
    if (part) part[chunk * n_out + k] = total;
    else STORE_RESULT(total, n, out + gm_keep_offset(m, k, 2));
}

// This thread's share of p[i0, i1): elements lane, lane + width, ...; four loads in flight
__device__ __forceinline__ ACC gm_run_sum(const T* p, long long i0, long long i1, int lane, int width) {
    ACC s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    long long i = i0 + lane;
    for (; i + 3 * width < i1; i += 4 * width) {
        s0 += TO_ACC(p[i]);
        s1 += TO_ACC(p[i + width]);
        s2 += TO_ACC(p[i + 2 * width]);
        s3 += TO_ACC(p[i + 3 * width]);
    }
    for (; i < i1; i += width) s0 += TO_ACC(p[i]);
    return (s0 + s1) + (s2 + s3);
}

// Row class: output k's run is [0, len) at stride 1; a chunk is clen elements of it.
// ROW_MULTI: output k's reduced space is `runs` dense runs of len elements; a chunk is clen runs.
extern "C" __global__ void gm_reduce_row(const T* __restrict__ in, OUT_T* __restrict__ out, ACC* __restrict__ part,
                                         const __grid_constant__ gm_rmeta m, long long n_out, long long len,
                                         long long clen, long long n_chunks, unsigned long long n, long long runs) {
#if WARP_ROWS
    const int lane = threadIdx.x % 32, width = 32, per_block = BLOCK / 32;
    const long long first = (long long)blockIdx.x * per_block + threadIdx.x / 32;
#else
    __shared__ ACC warp_sums[BLOCK / 32];
    const int lane = threadIdx.x, width = BLOCK, per_block = 1;
    const long long first = blockIdx.x;
#endif
    for (long long chunk = blockIdx.y; chunk < n_chunks; chunk += gridDim.y) {
        // k is the same for every thread of a block (or of a warp): the barriers below are uniform
        for (long long k = first; k < n_out; k += (long long)gridDim.x * per_block) {
            const T* p = in + gm_keep_offset(m, k, 1);
#if ROW_MULTI
            ACC s = 0;
            for (long long r = chunk * clen, r1 = min(runs, r + clen); r < r1; ++r)
                s += gm_run_sum(p + gm_run_offset(m, r), 0, len, lane, width);
#else
            ACC s = gm_run_sum(p, chunk * clen, min(len, chunk * clen + clen), lane, width);
#endif
            s = gm_warp_sum(s);
#if WARP_ROWS
            if (lane == 0) gm_emit(s, n, out, part, m, k, chunk, n_out);
#else
            if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
            __syncthreads();
            if (threadIdx.x < 32) {
                ACC w = threadIdx.x < BLOCK / 32 ? warp_sums[threadIdx.x] : (ACC)0;
                w = gm_warp_sum(w);
                if (threadIdx.x == 0) gm_emit(w, n, out, part, m, k, chunk, n_out);
            }
            __syncthreads();   // warp_sums is rewritten by the next output
#endif
        }
    }
}

// [outer kept..., R (stride rs), inner kept I (stride 1 in input and output)]
extern "C" __global__ void gm_reduce_col(const T* __restrict__ in, OUT_T* __restrict__ out, ACC* __restrict__ part,
                                         const __grid_constant__ gm_rmeta m, long long n_out, long long len,
                                         long long clen, long long n_chunks, unsigned long long n, long long inner,
                                         long long rs, long long n_outer) {
    __shared__ ACC tile[COL_Y][33];
    for (long long chunk = blockIdx.z; chunk < n_chunks; chunk += gridDim.z) {
        for (long long o = blockIdx.y; o < n_outer; o += gridDim.y) {
            for (long long cb = blockIdx.x; cb * 32 < inner; cb += gridDim.x) {
                long long col = cb * 32 + threadIdx.x;
                ACC s = 0;
                if (col < inner) {
                    const T* p = in + gm_keep_offset(m, o * inner + col, 1);
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
                    gm_emit(t, n, out, part, m, o * inner + col, chunk, n_out);
                }
                __syncthreads();   // the tile is rewritten by the next column block
            }
        }
    }
}

extern "C" __global__ void gm_reduce_general(const T* __restrict__ in, OUT_T* __restrict__ out,
                                             ACC* __restrict__ part, const __grid_constant__ gm_rmeta m,
                                             long long n_out, long long len, long long clen, long long n_chunks,
                                             unsigned long long n) {
    for (long long chunk = blockIdx.y; chunk < n_chunks; chunk += gridDim.y) {
        for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n_out;
             k += (long long)gridDim.x * blockDim.x) {
            const T* p = in + gm_keep_offset(m, k, 1);
            long long j = chunk * clen, end = min(len, j + clen);
            ACC s = 0;
#if RN > 0
            long long idx[RNA];
            long long rem = j, off = 0;
#pragma unroll
            for (int d = RN - 1; d >= 0; --d) {
                long long q = gm_div(rem, m.red_shape[d]);
                idx[d] = rem - q * m.red_shape[d];
                rem = q;
                off += idx[d] * m.red_in[d];
            }
            for (; j < end; ++j) {
                s += TO_ACC(p[off]);
#pragma unroll
                for (int d = RN - 1; d >= 0; --d) {
                    off += m.red_in[d];
                    if (++idx[d] < m.red_shape[d]) break;
                    off -= idx[d] * m.red_in[d];
                    idx[d] = 0;
                }
            }
#else
            if (j < end) s = TO_ACC(p[0]);
#endif
            gm_emit(s, n, out, part, m, k, chunk, n_out);
        }
    }
}

extern "C" __global__ void gm_reduce_finalize(const ACC* __restrict__ part, long long n_chunks, long long n_out,
                                              OUT_T* __restrict__ out, const __grid_constant__ gm_rmeta m,
                                              unsigned long long n) {
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n_out;
         k += (long long)gridDim.x * blockDim.x) {
        ACC s = part[k];
        for (long long c = 1; c < n_chunks; ++c) s += part[c * n_out + k];
        STORE_RESULT(s, n, out + gm_keep_offset(m, k, 2));
    }
}
