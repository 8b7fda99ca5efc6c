// Element-wise MEAN, ADD, IDENTITY and the one-pass n-ary mean (gm.ext) for CUDA (NVRTC).
//
// Macros (gpu_mean/backends/cuda_macros.py builds them from a plan):
//   T          storage type (__half for FLOAT16, unsigned short for a bit-copy of FLOAT16, ...)
//   CT         compute type (float for FLOAT16/FLOAT32, long long / unsigned long long for integers)
//   TO_CT(x)   storage -> compute;  FROM_CT(x) compute -> storage (round to nearest even)
//   OP         1 MEAN, 2 ADD, 3 IDENTITY, 4 NARY_MEAN;  NIN number of inputs
//   VEC        elements per 16-byte vector (16 / sizeof(T))
//   NDIM       rank of the coalesced iteration space (strided and rows kernels)
//   IDX        index type: unsigned int when every index and offset fits (32-bit arithmetic and
//              multiply-high division by precomputed magic numbers), else unsigned long long
//   ST         stride type (unsigned int unless a stride needs 64 bits)
//   IDX32      1 when IDX is 32-bit;  DIMS_BYTES sizeof(gm_dims) on the host (checked below)
//   HAS_SCALE_BIAS, IS_FLOAT, ACC_DOUBLE (n-ary float sums in fp64)
// Input pointers and the shape and strides travel by value (kernel parameters, read from the
// constant bank): no table in device memory to upload before the first launch, no global loads
// per element. __grid_constant__ lets a loop index them without a local copy.
// Compiled with --fmad=false: x*scale+bias rounds twice, as the CPU reference does.
#include <cuda_fp16.h>

struct gm_inputs { unsigned long long p[NIN]; };

struct gm_dims {
    IDX size[NDIM];
    unsigned int magic[NDIM];   // IDX32: q = (umulhi(n, magic) + n) >> shift == n / size (n < 2^31)
    unsigned int shift[NDIM];
    ST stride[NIN + 1][NDIM];   // inputs..., then the output, in elements
};
static_assert(sizeof(gm_dims) == DIMS_BYTES, "gm_dims differs from the host's numpy layout");
static_assert(sizeof(gm_inputs) == 8 * NIN, "gm_inputs differs from the host's numpy layout");

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

__device__ __forceinline__ const T* gm_in(const gm_inputs& in, int k) { return (const T*)in.p[k]; }

// W elements from every input at per-input element offsets off(k), combined, stored to out.
// The n-ary mean keeps W accumulators and walks the inputs in the outer loop, so registers hold
// one input's vector at a time whatever NIN is (loading all NIN vectors first spilled at NIN = 64).
template <int W, typename Off>
__device__ __forceinline__ void gm_apply(const gm_inputs& in, Off off, T* out, float scale, float bias) {
    struct alignas(W * sizeof(T)) vec_t { T v[W]; };
    vec_t r;
#if OP == 4
    gm_acc_t acc[W];
#pragma unroll
    for (int j = 0; j < W; ++j) acc[j] = 0;
#pragma unroll 4
    for (int k = 0; k < NIN; ++k) {
        vec_t x = *(const vec_t*)(gm_in(in, k) + off(k));
#pragma unroll
        for (int j = 0; j < W; ++j) acc[j] += (gm_acc_t)TO_CT(x.v[j]);
    }
#pragma unroll
    for (int j = 0; j < W; ++j) r.v[j] = GM_RESULT(acc[j]);
#else
    vec_t a = *(const vec_t*)(gm_in(in, 0) + off(0));
    vec_t b = NIN > 1 ? *(const vec_t*)(gm_in(in, NIN - 1) + off(NIN - 1)) : a;
#pragma unroll
    for (int j = 0; j < W; ++j) r.v[j] = FROM_CT(gm_combine2(TO_CT(a.v[j]), TO_CT(b.v[j]), scale, bias));
#endif
    *(vec_t*)out = r;
}

// Every operand dense: thread i moves elements [W*i, W*i + W), grid-stride; W = VEC needs every
// pointer 16-byte aligned. The last n % W elements go to the first threads one by one.
template <int W>
__device__ __forceinline__ void gm_contig(T* out, const gm_inputs& in, unsigned long long n, float scale,
                                          float bias) {
    unsigned long long nv = n / W, step = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long t = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned long long i = t; i < nv; i += step)
        gm_apply<W>(in, [=](int) { return i * W; }, out + i * W, scale, bias);
    for (unsigned long long i = nv * W + t; i < n; i += step)
        gm_apply<1>(in, [=](int) { return i; }, out + i, scale, bias);
}

extern "C" __global__ void gm_ew_contig_vec(T* __restrict__ out, const __grid_constant__ gm_inputs in,
                                            unsigned long long n, float scale, float bias) {
    gm_contig<VEC>(out, in, n, scale, bias);
}

extern "C" __global__ void gm_ew_contig_scalar(T* __restrict__ out, const __grid_constant__ gm_inputs in,
                                               unsigned long long n, float scale, float bias) {
    gm_contig<1>(out, in, n, scale, bias);
}

__device__ __forceinline__ IDX gm_div(IDX n, const gm_dims& s, int d) {
#if IDX32
    return (__umulhi(n, s.magic[d]) + n) >> s.shift[d];
#else
    return n / s.size[d];
#endif
}

// The multi-index of flat position i over dims [0, last), innermost last; the outermost index
// is what is left, so it takes no division.
template <int LAST>
__device__ __forceinline__ void gm_unflatten(IDX i, const gm_dims& s, IDX* idx) {
#pragma unroll
    for (int d = LAST - 1; d > 0; --d) {
        IDX q = gm_div(i, s, d);
        idx[d] = i - q * s.size[d];
        i = q;
    }
    if (LAST > 0) idx[0] = i;
}

template <int LAST>
__device__ __forceinline__ IDX gm_offset(const gm_dims& s, int k, const IDX* idx) {
    IDX off = 0;
#pragma unroll
    for (int d = 0; d < LAST; ++d) off += idx[d] * (IDX)s.stride[k][d];
    return off;
}

// General strides: one element per thread, grid-stride.
extern "C" __global__ void gm_ew_strided(T* __restrict__ out, const __grid_constant__ gm_inputs in,
                                         unsigned long long n, const __grid_constant__ gm_dims s, float scale,
                                         float bias) {
    IDX step = (IDX)gridDim.x * blockDim.x;
    for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < (IDX)n; i += step) {
        IDX idx[NDIM];
        gm_unflatten<NDIM>(i, s, idx);
        gm_apply<1>(in, [&](int k) { return gm_offset<NDIM>(s, k, idx); }, out + gm_offset<NDIM>(s, NIN, idx),
                    scale, bias);
    }
}

// Every operand's innermost dimension dense (broadcast and padded layouts usually are): threadIdx.x
// walks W-element pieces of a row (coalesced, 16-byte vectors when W = VEC), threadIdx.y and
// gridDim.y walk rows. A row's start costs NDIM-2 divisions once per row, not per element.
// W = VEC needs every base pointer 16-byte aligned and every outer stride a multiple of VEC.
template <int W>
__device__ __forceinline__ void gm_rows(T* out, const gm_inputs& in, unsigned long long n_rows,
                                        const gm_dims& s, float scale, float bias) {
    IDX inner = s.size[NDIM - 1], nfull = inner / W;
    IDX pieces = nfull + (inner % W != 0 ? inner % W : 0);   // full vectors, then the tail one by one
    IDX xstep = (IDX)gridDim.x * blockDim.x, ystep = (IDX)gridDim.y * blockDim.y;
    for (IDX row = (IDX)blockIdx.y * blockDim.y + threadIdx.y; row < (IDX)n_rows; row += ystep) {
        IDX idx[NDIM];
        gm_unflatten<NDIM - 1>(row, s, idx);
        for (IDX v = (IDX)blockIdx.x * blockDim.x + threadIdx.x; v < pieces; v += xstep) {
            if (v < nfull) {
                IDX e = v * W;
                gm_apply<W>(in, [&](int k) { return gm_offset<NDIM - 1>(s, k, idx) + e; },
                            out + gm_offset<NDIM - 1>(s, NIN, idx) + e, scale, bias);
            } else {
                IDX e = nfull * W + (v - nfull);
                gm_apply<1>(in, [&](int k) { return gm_offset<NDIM - 1>(s, k, idx) + e; },
                            out + gm_offset<NDIM - 1>(s, NIN, idx) + e, scale, bias);
            }
        }
    }
}

extern "C" __global__ void gm_ew_rows_vec(T* __restrict__ out, const __grid_constant__ gm_inputs in,
                                          unsigned long long n_rows, const __grid_constant__ gm_dims s,
                                          float scale, float bias) {
    gm_rows<VEC>(out, in, n_rows, s, scale, bias);
}

extern "C" __global__ void gm_ew_rows_scalar(T* __restrict__ out, const __grid_constant__ gm_inputs in,
                                             unsigned long long n_rows, const __grid_constant__ gm_dims s,
                                             float scale, float bias) {
    gm_rows<1>(out, in, n_rows, s, scale, bias);
}
