// gpu_mean's kernel dialect for OpenCL: the few names the kernel files use that OpenCL C has no word
// for. cuda_kernels/dialect.h maps the same names (and OpenCL C itself) onto CUDA; an OpenCL build is
// the variant's #define lines, this header, then the kernel file (gpu_mean/kernels/source.py).
#if USE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// no contraction into fma: x*scale+bias rounds twice, as the CPU device does (CUDA: --fmad=false)
#pragma OPENCL FP_CONTRACT OFF

#define GM_CUDA 0
#ifndef GM_CPU_SHAPE
#define GM_CPU_SHAPE 0     // 1: the serial vector kernels for CPU devices instead of the GPU-shaped ones
#endif

#define GM_INLINE inline
#define GM_COLD inline     // CUDA: __noinline__ (PoCL inlines every call into the work-group function anyway)
#define LOCAL_PTR __local   // a pointer parameter into local memory
#define GM_STATIC_ASSERT(cond, msg) typedef char gm_static_assert_##msg[(cond) ? 1 : -1]

// a half's bits held in a ushort, converted with round to nearest even (no cl_khr_fp16 needed)
GM_INLINE float gm_half_to_float(ushort h) { return vload_half(0, (const __private half*)&h); }
GM_INLINE ushort gm_float_to_half(float x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); return h; }
// (gm_double_to_half, which needs fp64, is in common.h: it goes through gm_float_odd)

// the metadata argument: a constant buffer holding the same struct CUDA takes by value
#define GM_META_ARG(type, name) __constant const type* name
#define GM_META_BIND(type, name)

// no sub-groups here: the portable local-memory form of every warp-level step runs
#define GM_WARP_SHUFFLE 0
