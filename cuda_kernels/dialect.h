// gpu_mean's kernel dialect for CUDA (NVRTC): maps the OpenCL C the kernels in opencl_kernels/ are
// written in onto CUDA C++, so that NVRTC compiles those files unchanged.
//
// A CUDA build of a kernel file is: the variant's #define lines, this header, then the file itself;
// an OpenCL build is the #define lines, opencl_kernels/dialect.h, then the same file
// (gpu_mean/kernels/source.py: kernel_text). docs/design.md, "Kernels", says what a kernel file may
// use: OpenCL C's scalar types, address spaces, work-item functions, barrier, vload_half/vstore_half_rte,
// plus the few names below that OpenCL C has no word for (GM_*). Vector types (float8, ...) are not
// mapped: kernels that use them are CPU-shaped and live inside #if GM_CPU_SHAPE, which CUDA never sets.
#include <cuda_fp16.h>

#define GM_CUDA 1
#define GM_CPU_SHAPE 0

// -- types: OpenCL C's names (cuda_fp16.h already names __half "half")
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
static_assert(sizeof(long) == 8 && sizeof(ulong) == 8, "OpenCL's long is 64-bit: an LP64 host (Linux) is needed");

// -- qualifiers: global and constant memory are plain pointers; local memory is shared memory
#define __kernel extern "C" __global__
#define __global
#define __constant
#define __local __shared__
#define restrict __restrict__
#define GM_INLINE __device__ __forceinline__
#define GM_COLD __device__ __noinline__     // a rarely taken path compiled once, called (the exact redo)
#define LOCAL_PTR                           // a pointer parameter into local (shared) memory
#define GM_STATIC_ASSERT(cond, msg) static_assert(cond, #msg)

// -- the metadata argument: by value in the kernel parameters (the constant bank), read through a
//    pointer so that kernel bodies spell it as OpenCL's __constant pointer
#define GM_META_ARG(type, name) const __grid_constant__ type name##_arg
#define GM_META_BIND(type, name) const type* name = &name##_arg;

// -- work-items and barriers (dimension 0 is x)
GM_INLINE size_t get_local_id(int d) { return d == 0 ? threadIdx.x : d == 1 ? threadIdx.y : threadIdx.z; }
GM_INLINE size_t get_group_id(int d) { return d == 0 ? blockIdx.x : d == 1 ? blockIdx.y : blockIdx.z; }
GM_INLINE size_t get_local_size(int d) { return d == 0 ? blockDim.x : d == 1 ? blockDim.y : blockDim.z; }
GM_INLINE size_t get_num_groups(int d) { return d == 0 ? gridDim.x : d == 1 ? gridDim.y : gridDim.z; }
GM_INLINE size_t get_global_id(int d) { return get_group_id(d) * get_local_size(d) + get_local_id(d); }
GM_INLINE size_t get_global_size(int d) { return get_num_groups(d) * get_local_size(d); }
#define CLK_LOCAL_MEM_FENCE 1
#define CLK_GLOBAL_MEM_FENCE 2
#define barrier(flags) __syncthreads()
// a work-item's global stores made visible to the whole device before its later ones (the spread redo's
// arrival count, opencl_kernels/reduce_gpu.cl)
#define mem_fence(flags) __threadfence()

// -- half storage: OpenCL's vload_half / vstore_half_rte (round to nearest even), and the same
//    conversions on a half's bits held in a ushort (gm_half_to_float, gm_float_to_half, gm_double_to_half)
GM_INLINE float vload_half(size_t i, const half* p) { return __half2float(p[i]); }
GM_INLINE void vstore_half_rte(float x, size_t i, half* p) { p[i] = __float2half_rn(x); }
GM_INLINE void vstore_half_rte(double x, size_t i, half* p) { p[i] = __double2half(x); }
GM_INLINE float gm_half_to_float(ushort h) { return __half2float(__ushort_as_half(h)); }
GM_INLINE ushort gm_float_to_half(float x) { return __half_as_ushort(__float2half_rn(x)); }
GM_INLINE ushort gm_double_to_half(double x) { return __half_as_ushort(__double2half(x)); }

// -- OpenCL's bit reinterpretations (scalars)
GM_INLINE uint as_uint(float x) { return __float_as_uint(x); }
GM_INLINE float as_float(uint x) { return __uint_as_float(x); }
GM_INLINE ulong as_ulong(double x) { return (ulong)__double_as_longlong(x); }
GM_INLINE double as_double(ulong x) { return __longlong_as_double((long long)x); }

// -- OpenCL's relational built-ins on scalars (vector forms are CPU-shaped kernels' business), mul_hi, atomics
#define select(a, b, c) ((c) ? (b) : (a))
#define isless(a, b) ((a) < (b))
#define isgreaterequal(a, b) ((a) >= (b))
GM_INLINE uint mul_hi(uint a, uint b) { return __umulhi(a, b); }
// 32-bit atomics on global memory (the checked build's status word, opencl_kernels/common.h), and
GM_INLINE int atomic_cmpxchg(volatile int* p, int cmp, int val) { return atomicCAS((int*)p, cmp, val); }
GM_INLINE int atomic_inc(volatile int* p) { return atomicAdd((int*)p, 1); }
// on shared memory: the finalize pass's smallest exponent field (opencl_kernels/reduce_gpu_span.h)
GM_INLINE uint atomic_min(volatile uint* p, uint v) { return atomicMin((uint*)p, v); }
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// -- the one CUDA instruction that beats the portable sequence: a warp shuffle. Kernels use it only
//    under #if GM_WARP_SHUFFLE, beside a portable local-memory form that adds in the same order.
#define GM_WARP_SHUFFLE 1
#define GM_SHFL_DOWN(x, offset) __shfl_down_sync(0xffffffffu, (x), (offset))
