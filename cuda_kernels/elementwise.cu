// Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean (gm.ext) for CUDA (NVRTC via CuPy).
//
// Macros (prepended by gpu_mean/backends/cuda.py; gpu_mean/backends/cuda_macros.py builds them):
//   T          storage type (__half for FLOAT16, unsigned short for a bit-copy of FLOAT16, ...)
//   CT         compute type (float for FLOAT16/FLOAT32, long long / unsigned long long for integers)
//   TO_CT(x)   storage -> compute;  FROM_CT(x) compute -> storage (round to nearest even)
//   OP         1 MEAN, 2 ADD, 3 IDENTITY, 4 NARY_MEAN;  NIN number of inputs
//   VEC        elements per 16-byte vector (16 / sizeof(T))
//   NDIM       rank of the coalesced iteration space (strided kernel)
//   HAS_SCALE_BIAS, IS_FLOAT, ACC_DOUBLE (n-ary float sums in fp64)
// Input pointers (binding offsets already added) travel in one by-value struct, so a launch
// passes a handful of arguments whatever NIN is. Compiled with --fmad=false: x*scale+bias rounds
// twice, as the CPU reference does.
#include <cuda_fp16.h>

struct gm_inputs { unsigned long long p[NIN]; };

__device__ __forceinline__ CT gm_combine2(CT a, CT b, float scale, float bias) {
#if OP == 1
#if IS_FLOAT
    // fl(a+b)*0.5 is exact scaling unless the sum overflows; then both halves are exact
    CT s = a + b;
    if (isinf(s) && isfinite(a) && isfinite(b)) return a * (CT)0.5 + b * (CT)0.5;
    return s * (CT)0.5;
#else
    return (a + b) / (CT)2;   // 64-bit sum, C division truncates toward zero
#endif
#elif OP == 2
    return a + b;
#else
#if HAS_SCALE_BIAS
    return a * (CT)scale + (CT)bias;
#else
    return a;
#endif
#endif
}

#if OP == 4
#if IS_FLOAT && ACC_DOUBLE
typedef double gm_acc_t;
#define GM_RESULT(s) FROM_ACC((s) / (double)NIN)
#elif IS_FLOAT
typedef float gm_acc_t;
#define GM_RESULT(s) FROM_CT((s) / (float)NIN)
#else
typedef CT gm_acc_t;
#define GM_RESULT(s) FROM_CT((s) / (CT)NIN)
#endif
#endif

__device__ __forceinline__ T gm_element(const gm_inputs& in, const unsigned long long* pos, float scale,
                                        float bias) {
#if OP == 4
    gm_acc_t s = 0;
#pragma unroll
    for (int k = 0; k < NIN; ++k) s += (gm_acc_t)TO_CT(((const T*)in.p[k])[pos[k]]);
    return GM_RESULT(s);
#else
    CT a = TO_CT(((const T*)in.p[0])[pos[0]]);
    CT b = NIN > 1 ? TO_CT(((const T*)in.p[NIN - 1])[pos[NIN - 1]]) : a;
    return FROM_CT(gm_combine2(a, b, scale, bias));
#endif
}

struct alignas(16) gm_vec { T v[VEC]; };

// Every operand dense and 16-byte aligned: each thread moves 16-byte vectors, grid-stride.
extern "C" __global__ void gm_ew_contig_vec(T* __restrict__ out, const gm_inputs in, unsigned long long n,
                                            float scale, float bias) {
    unsigned long long nv = n / VEC;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride) {
        gm_vec vin[NIN];
#pragma unroll
        for (int k = 0; k < NIN; ++k) vin[k] = ((const gm_vec*)in.p[k])[i];
        gm_vec r;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
#if OP == 4
            gm_acc_t s = 0;
#pragma unroll
            for (int k = 0; k < NIN; ++k) s += (gm_acc_t)TO_CT(vin[k].v[j]);
            r.v[j] = GM_RESULT(s);
#else
            CT a = TO_CT(vin[0].v[j]);
            CT b = NIN > 1 ? TO_CT(vin[NIN - 1].v[j]) : a;
            r.v[j] = FROM_CT(gm_combine2(a, b, scale, bias));
#endif
        }
        ((gm_vec*)out)[i] = r;
    }
    // the tail (n % VEC elements) goes to the first threads
    unsigned long long t = nv * VEC + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        unsigned long long pos[NIN];
        for (int k = 0; k < NIN; ++k) pos[k] = t;
        out[t] = gm_element(in, pos, scale, bias);
    }
}

// Dense but not 16-byte aligned: one element per thread, grid-stride.
extern "C" __global__ void gm_ew_contig_scalar(T* __restrict__ out, const gm_inputs in, unsigned long long n,
                                               float scale, float bias) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long pos[NIN];
        for (int k = 0; k < NIN; ++k) pos[k] = i;
        out[i] = gm_element(in, pos, scale, bias);
    }
}

// General strides. meta (device memory): sizes[NDIM], then NDIM strides per input, then the output's.
extern "C" __global__ void gm_ew_strided(T* __restrict__ out, const gm_inputs in, unsigned long long n,
                                         const long long* __restrict__ meta, float scale, float bias) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long pos[NIN];
        unsigned long long opos = 0;
        for (int k = 0; k < NIN; ++k) pos[k] = 0;
        unsigned long long rem = i;
#pragma unroll
        for (int d = NDIM - 1; d >= 0; --d) {
            unsigned long long sz = (unsigned long long)meta[d];
            unsigned long long q = d > 0 ? rem / sz : 0;   // the outermost index is what is left
            unsigned long long idx = rem - q * sz;
            rem = q;
            for (int k = 0; k < NIN; ++k) pos[k] += idx * (unsigned long long)meta[NDIM * (k + 1) + d];
            opos += idx * (unsigned long long)meta[NDIM * (NIN + 1) + d];
        }
        out[opos] = gm_element(in, pos, scale, bias);
    }
}
