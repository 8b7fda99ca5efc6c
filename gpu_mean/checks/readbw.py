"""The profiler's reference: the device's read bandwidth, measured through the device's own queue on
buffers made by its own allocator, with a read-only streaming kernel in the best access pattern of
the backend.

A mean reads each input once and writes its output once. Its inputs cannot be read faster than this
kernel reads as many bytes: a case whose input bytes alone pass the read kernel's fastest sample is
a fault of the measurement (the machine's bandwidth drifted between the two, or a cache held what
should have streamed), never a speed-up. Its whole traffic may pass the read rate a little: written
bytes can stream beside the reads (streaming stores on a CPU: docs/results/2026-11-27-s15-closing-pocl.md
measures a native loop of two reads and a streamed write at 1.09-1.15x the bytes per second of a
native read-only loop on the same machine).

- CPU device: numpy's maximum over the bytes viewed as uint64 (one streaming, vectorised pass,
  single-threaded like the CPU device itself).
- OpenCL: a tiny XOR-reading kernel built here with pyopencl on the device's own context, enqueued
  and waited for by the backend as the library's kernels are,
  each work-item streaming one contiguous chunk of 64-byte vectors on CPU devices (PoCL wants long
  serial loops) and 16-byte vectors grid-strided for coalescing on GPUs.
- CUDA: the same grid-strided 16-byte read through the read-only cache, compiled with NVRTC by
  CuPy's RawKernel (it does no floating-point arithmetic, so flush-to-zero is irrelevant) and
  launched on the device's stream; the peak from the memory clock and bus width is printed beside it.
"""
from __future__ import annotations

import numpy as np

OPENCL_SOURCE = r"""
__kernel void read_chunks(__global const uint16 *x, const ulong n, const ulong chunk, __global uint *out,
                          const ulong s) {
    /* x is s streams of n vectors: work-item g reads its chunk of each, side by side */
    const ulong g = get_global_id(0);
    const ulong lo = g * chunk, hi = min(lo + chunk, n);
    uint16 acc = (uint16)(0);
    for (ulong i = lo; i < hi; ++i) {
        for (ulong k = 0; k < s; ++k) {
#ifdef __clang__
            __builtin_prefetch((__global const char*)(x + i + k * n) + 2048);   /* as the library's CPU kernels */
#endif
            acc ^= x[i + k * n];
        }
    }
    uint8 a8 = acc.lo ^ acc.hi; uint4 a4 = a8.lo ^ a8.hi; uint2 a2 = a4.lo ^ a4.hi;
    const uint r = a2.x ^ a2.y;
    if (r == 0x9e3779b9u) out[0] = r;       /* almost never true: keeps every load */
}
__kernel void read_strided(__global const uint4 *x, const ulong n, const ulong unused, __global uint *out,
                           const ulong s) {
    const ulong stride = get_global_size(0);
    uint4 acc = (uint4)(0);
    for (ulong i = get_global_id(0); i < n; i += stride) acc ^= x[i];
    const uint r = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (r == 0x9e3779b9u) out[0] = r;
}
"""

CUDA_SOURCE = r"""
extern "C" __global__ void read_strided(const uint4 *__restrict__ x, unsigned long long n, unsigned int *out) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint4 v = __ldg(x + i);
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    unsigned int r = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (r == 0x9e3779b9u) out[0] = r;
}
"""

# The traffic kernels: the read kernels above, each work-item also writing its share of a second
# buffer once (the bytes a case's output takes). A mean cannot move its inputs and output faster than
# this streams the same bytes; profile_report's limit column.
OPENCL_TRAFFIC_SOURCE = r"""
__kernel void traffic_chunks(__global const uint16 *x, const ulong n, const ulong chunk, __global uint16 *y,
                             const ulong m, const ulong wchunk, __global uint *out, const ulong s) {
    /* x is s streams of n vectors (a mean's s full-size inputs): work-item g reads its chunk of each,
       side by side, and writes its chunk of y, the writes spread evenly among the reads (as a mean's
       kernel stores each output vector after reading its inputs), so that the streams overlap
       instead of running one after the other (a core keeps more lines in flight over several
       streams: read as one, the three inputs of an n-ary mean were a limit the mean beat by 1.15x) */
    const ulong g = get_global_id(0);
    const ulong lo = g * chunk, hi = min(lo + chunk, n);
    const ulong wlo = min(g * wchunk, m), whi = min(wlo + wchunk, m);
    const ulong reads = hi > lo ? hi - lo : 1, writes = whi - wlo;
    ulong w = wlo, due = 0;
    uint16 acc = (uint16)(0);
    for (ulong i = lo; i < hi; ++i) {
        for (ulong k = 0; k < s; ++k) {
#ifdef __clang__
            __builtin_prefetch((__global const char*)(x + i + k * n) + 2048);
#endif
            acc ^= x[i + k * n];
        }
        for (due += writes; due >= reads && w < whi; due -= reads, ++w) {
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
            /* streaming stores, as the library's CPU-shaped element-wise kernels write large outputs:
               an ordinary store would first read each line it writes (write-allocate) */
            __builtin_nontemporal_store((uint16)((uint)w), y + w);
#else
            y[w] = (uint16)((uint)w);
#endif
        }
    }
    for (; w < whi; ++w) y[w] = (uint16)((uint)w);
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_sfence();
#endif
    uint8 a8 = acc.lo ^ acc.hi; uint4 a4 = a8.lo ^ a8.hi; uint2 a2 = a4.lo ^ a4.hi;
    const uint r = a2.x ^ a2.y;
    if (r == 0x9e3779b9u) out[0] = r;
}
__kernel void traffic_strided(__global const uint4 *x, const ulong n, const ulong unused, __global uint4 *y,
                              const ulong m, const ulong unused2, __global uint *out, const ulong s) {
    /* a GPU's thousands of threads keep enough loads in flight over one stream: x is read as one */
    const ulong stride = get_global_size(0);
    uint4 acc = (uint4)(0);
    for (ulong i = get_global_id(0); i < n * s; i += stride) acc ^= x[i];
    for (ulong i = get_global_id(0); i < m; i += stride) y[i] = (uint4)((uint)i);
    const uint r = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (r == 0x9e3779b9u) out[0] = r;
}
"""

CUDA_TRAFFIC_SOURCE = r"""
extern "C" __global__ void traffic_strided(const uint4 *__restrict__ x, unsigned long long n, uint4 *__restrict__ y,
                                           unsigned long long m, unsigned int *out) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long g = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (unsigned long long i = g; i < n; i += stride) {
        uint4 v = __ldg(x + i);
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    for (unsigned long long i = g; i < m; i += stride) y[i] = make_uint4((unsigned)i, 0, 0, 0);
    unsigned int r = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (r == 0x9e3779b9u) out[0] = r;
}
"""

_programs: dict = {}

# streams a CPU read or traffic kernel's work-item reads side by side, at least: a core keeps more
# lines in flight over several (PoCL, 2-core CI VM, 128 MiB, 15 interleaved rounds, median GB/s: one
# stream 15.5-16.6, two 17.7-18.6, three 21.0-21.7, four 20.1-21.7, eight 19.3-20.6), and a limit is
# the fastest way to move the bytes; more where a case has more full-size inputs (Case.read_streams)
CPU_MIN_STREAMS = 4

# work-items per core of the CPU read and traffic kernels, as the library's CPU-shaped reductions cut
# their work (opencl_geometry.reduce_geometry: about 16 a core): with 4 a core, a core slowed by a
# neighbour on a shared machine left its last chunks to run alone, and the FLOAT16 reductions read
# their bytes 5-13 % faster than the limit did (docs/results/2026-11-29-s24-profile-limit.md)
CPU_ITEMS_PER_CORE = 16


def _filled(dev, nbytes: int):
    """A buffer of the device's own allocator with every page written (an untouched page of a
    host-backed buffer maps the shared zero page, which reads at cache speed)."""
    buf = dev.create_buffer(nbytes)
    buf.write(np.full(nbytes // 4, 0x3F800000, np.uint32))    # float32 ones, as the cases' inputs
    return buf


def read_kernel(dev, nbytes: int):
    """(callable that reads about ``nbytes`` once on ``dev`` and waits, bytes it reads)."""
    backend = dev.info.backend
    if backend == "opencl":
        return _opencl(dev, nbytes)
    if backend == "cuda":
        return _cuda(dev, nbytes)
    return _cpu(dev, nbytes)


def _cpu(dev, nbytes):
    n = max(1, nbytes // 8)
    buf = _filled(dev, n * 8)           # the CPU device's own memory: a numpy uint8 array
    x = np.asarray(buf.native)[:n * 8].view(np.uint64)

    def go():
        np.maximum.reduce(x)
    go.keep = buf
    return go, n * 8


def _opencl(dev, nbytes):
    import pyopencl as cl

    from ..backends.opencl import BUILD_OPTIONS, build_program
    ctx = dev.cl_context
    cl_dev = ctx.devices[0]
    on_cpu = bool(cl_dev.type & cl.device_type.CPU)
    vec = 64 if on_cpu else 16
    s = CPU_MIN_STREAMS if on_cpu else 1
    n = max(1, nbytes // (vec * s))     # vectors a stream
    buf = _filled(dev, n * s * vec)     # the backend's allocator: host-backed huge pages where it uses them
    out = dev.create_buffer(16)
    prog = _programs.get(ctx)
    if prog is None:
        prog = _programs[ctx] = build_program(cl, ctx, cl_dev, OPENCL_SOURCE, BUILD_OPTIONS, "read bandwidth")
    if on_cpu:
        items = cl_dev.max_compute_units * CPU_ITEMS_PER_CORE
        chunk = -(-n // items)
        # a work-group per chunk, so that every core streams
        kernel, gsize, lsize = cl.Kernel(prog, "read_chunks"), (-(-n // chunk),), (1,)
    else:
        kernel, gsize, chunk = cl.Kernel(prog, "read_strided"), (min(-(-n // 4), cl_dev.max_compute_units * 2048),), 0
        lsize = None
    kernel.set_args(buf.native, np.uint64(n), np.uint64(chunk), out.native, np.uint64(s))

    enqueue = dev.backend.enqueue   # the backend's own launch: synchronize() then waits for it exactly
    # as for the library's kernels (a short poll after small work, else clFinish)

    def go():
        enqueue(kernel, gsize, lsize, n * s * vec)
        dev.synchronize()
    go.keep = (buf, out)
    return go, n * s * vec


def _cuda(dev, nbytes):
    import cupy
    n = max(1, nbytes // 16)
    buf, out = _filled(dev, n * 16), dev.create_buffer(16)
    key = ("cuda", dev.info.index)
    with cupy.cuda.Device(dev.info.index):
        kernel = _programs.get(key)
        if kernel is None:
            kernel = _programs[key] = cupy.RawKernel(CUDA_SOURCE, "read_strided")
        sms = cupy.cuda.Device(dev.info.index).attributes["MultiProcessorCount"]
    stream = dev.cuda_stream
    grid = int(min(-(-n // 256), sms * 8))

    def go():
        with cupy.cuda.Device(dev.info.index):
            kernel((grid,), (256,), (buf.native, np.uint64(n), out.native), stream=stream)
            stream.synchronize()
    go.keep = (buf, out)
    return go, n * 16


def cuda_peak_gbps(dev) -> float | None:
    """The CUDA device's theoretical memory bandwidth, GB/s: 2 transfers per memory clock (DDR) x the
    bus width, from CuPy's device attributes (the clock in kHz, the width in bits). None elsewhere."""
    if dev.info.backend != "cuda":
        return None
    try:
        import cupy
        attrs = cupy.cuda.Device(dev.info.index).attributes
        clock_khz, bus_bits = attrs["MemoryClockRate"], attrs["GlobalMemoryBusWidth"]
    except Exception:   # an attribute the driver does not report: no peak, the measured limit stands
        return None
    if not clock_khz or not bus_bits:
        return None
    return 2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9


def traffic_kernel(dev, read_bytes: int, write_bytes: int, streams: int = 1):
    """(callable that reads about ``read_bytes`` and writes about ``write_bytes`` once on ``dev`` and
    waits, bytes it moves): the read kernel's access pattern plus a streaming write of a second
    buffer, in one launch, through the device's own queue and allocator; on an OpenCL CPU device the
    reads are ``streams`` streams side by side (cases.Case.read_streams)."""
    backend = dev.info.backend
    if backend == "opencl":
        return _opencl_traffic(dev, read_bytes, write_bytes, streams)
    if backend == "cuda":
        return _cuda_traffic(dev, read_bytes, write_bytes)
    return _cpu_traffic(dev, read_bytes, write_bytes)


def _cpu_traffic(dev, read_bytes, write_bytes):
    n, m = max(1, read_bytes // 8), max(1, write_bytes // 8)
    buf, wbuf = _filled(dev, n * 8), _filled(dev, m * 8)
    x = np.asarray(buf.native)[:n * 8].view(np.uint64)
    y = np.asarray(wbuf.native)[:m * 8].view(np.uint64)

    def go():
        np.maximum.reduce(x)
        y.fill(1)
    go.keep = (buf, wbuf)
    return go, (n + m) * 8


def _opencl_traffic(dev, read_bytes, write_bytes, streams=1):
    import pyopencl as cl

    from ..backends.opencl import BUILD_OPTIONS, build_program
    ctx = dev.cl_context
    cl_dev = ctx.devices[0]
    on_cpu = bool(cl_dev.type & cl.device_type.CPU)
    vec = 64 if on_cpu else 16
    s = max(CPU_MIN_STREAMS, int(streams)) if on_cpu else 1
    n, m = max(1, read_bytes // (vec * s)), max(1, write_bytes // vec)     # n vectors a stream
    buf, wbuf, out = _filled(dev, n * s * vec), _filled(dev, m * vec), dev.create_buffer(16)
    key = ("traffic", ctx)
    prog = _programs.get(key)
    if prog is None:
        prog = _programs[key] = build_program(cl, ctx, cl_dev, OPENCL_TRAFFIC_SOURCE, BUILD_OPTIONS, "traffic")
    if on_cpu:
        items = cl_dev.max_compute_units * CPU_ITEMS_PER_CORE
        chunk = -(-n // items)
        groups = -(-n // chunk)
        wchunk = -(-m // groups)
        kernel, gsize, lsize = cl.Kernel(prog, "traffic_chunks"), (groups,), (1,)
    else:
        chunk = wchunk = 0
        items = min(-(-max(n, m) // 4), cl_dev.max_compute_units * 2048)
        kernel, gsize, lsize = cl.Kernel(prog, "traffic_strided"), (items,), None
    kernel.set_args(buf.native, np.uint64(n), np.uint64(chunk), wbuf.native, np.uint64(m), np.uint64(wchunk),
                    out.native, np.uint64(s))
    enqueue = dev.backend.enqueue

    def go():
        enqueue(kernel, gsize, lsize, (n * s + m) * vec)
        dev.synchronize()
    go.keep = (buf, wbuf, out)
    return go, (n * s + m) * vec


def _cuda_traffic(dev, read_bytes, write_bytes):
    import cupy
    n, m = max(1, read_bytes // 16), max(1, write_bytes // 16)
    buf, wbuf, out = _filled(dev, n * 16), _filled(dev, m * 16), dev.create_buffer(16)
    key = ("cuda-traffic", dev.info.index)
    with cupy.cuda.Device(dev.info.index):
        kernel = _programs.get(key)
        if kernel is None:
            kernel = _programs[key] = cupy.RawKernel(CUDA_TRAFFIC_SOURCE, "traffic_strided")
        sms = cupy.cuda.Device(dev.info.index).attributes["MultiProcessorCount"]
    stream = dev.cuda_stream
    grid = int(min(-(-max(n, m) // 256), sms * 8))

    def go():
        with cupy.cuda.Device(dev.info.index):
            kernel((grid,), (256,), (buf.native, np.uint64(n), wbuf.native, np.uint64(m), out.native), stream=stream)
            stream.synchronize()
    go.keep = (buf, wbuf, out)
    return go, (n + m) * 16
