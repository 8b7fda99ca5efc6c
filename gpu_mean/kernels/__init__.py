"""The kernel families' host side, shared by every backend that runs the kernels of opencl_kernels/
(OpenCL and CUDA): which variant a plan needs and its macros (reduce_kernels, elementwise_kernels),
the launch geometries (opencl_geometry for CPU-shaped devices, gpu_geometry for GPUs), the kernel
files' assembly and the compiled-program cache (source), the type spellings (typespell), the
checked build (checked), what each backend computes (support), and the Programs that bind and
launch them (programs). Nothing here imports a native library: the backends supply the verbs."""
