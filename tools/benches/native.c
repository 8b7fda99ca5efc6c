/* The machine's limit for benches/machine.py: native loops of each pattern on every core (gcc -O3
   -march=native -fopenmp), with software prefetch as the library's CPU kernels. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PF
#define PF 2048     /* software prefetch distance in bytes, as the library's CPU kernels */
#endif

/* the sum of n floats (n a multiple of 64), every core, four independent 512-bit accumulators */
double gm_native_read(const float *a, size_t n) {
    double total = 0.0;
    #pragma omp parallel reduction(+:total)
    {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        #pragma omp for schedule(static)
        for (size_t i = 0; i < n; i += 64) {
            _mm_prefetch((const char *)(a + i) + PF, _MM_HINT_T0);
            _mm_prefetch((const char *)(a + i) + PF + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)(a + i) + PF + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)(a + i) + PF + 192, _MM_HINT_T0);
            s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
            s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
            s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
            s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
        }
        total += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    }
    return total;
}

/* column sums of a rows x cols float matrix (rows a multiple of 4, cols of blk, blk of 8) in the
   access pattern of the CPU-shaped column kernel (reduce_cpu_cols.h: gm_reduce_col_serial): each task a
   block of blk adjacent columns over every row, four rows per pass into blk double accumulators,
   the same columns prefetched four rows ahead; every core */
void gm_native_cols(const float *a, size_t rows, size_t cols, size_t blk, double *out) {
    #pragma omp parallel for schedule(static)
    for (size_t cb = 0; cb < cols / blk; ++cb) {
        double acc[4096] __attribute__((aligned(64)));
        for (size_t j = 0; j < blk; ++j) acc[j] = 0.0;
        for (size_t r = 0; r + 4 <= rows; r += 4) {
            const float *p = a + r * cols + cb * blk;
            for (size_t j = 0; j < blk; j += 8) {
                if ((j & 15) == 0 && r + 8 <= rows) {
                    for (int q = 0; q < 4; ++q) _mm_prefetch((const char *)(p + (4 + q) * cols + j), _MM_HINT_T0);
                }
                __m512d s = _mm512_load_pd(acc + j);
                s = _mm512_add_pd(s, _mm512_add_pd(
                        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + j)),
                                      _mm512_cvtps_pd(_mm256_loadu_ps(p + cols + j))),
                        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + 2 * cols + j)),
                                      _mm512_cvtps_pd(_mm256_loadu_ps(p + 3 * cols + j)))));
                _mm512_store_pd(acc + j, s);
            }
        }
        for (size_t j = 0; j < blk; ++j) out[cb * blk + j] = acc[j];
    }
}

/* out = mean of k inputs of n floats (n a multiple of 16), streaming stores, every core */
void gm_native_mean(int k, const float *const *in, float *out, size_t n) {
    const __m512 scale = _mm512_set1_ps(1.0f / (float)k);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += 16) {
        for (int j = 0; j < k; ++j) _mm_prefetch((const char *)(in[j] + i) + PF, _MM_HINT_T0);
        __m512 s = _mm512_load_ps(in[0] + i);
        for (int j = 1; j < k; ++j) s = _mm512_add_ps(s, _mm512_load_ps(in[j] + i));
        _mm512_stream_ps(out + i, _mm512_mul_ps(s, scale));
    }
    _mm_sfence();
}
