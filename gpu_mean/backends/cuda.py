"""The CUDA backend: CuPy RawModule kernels from cuda_kernels/*.cu, compiled by NVRTC for the
device's architecture and cached per macro set. Without CuPy or a GPU the backend reports why."""
from __future__ import annotations

import numpy as np

from ..errors import KernelBuildError
from ..runtime import planning
from ..runtime.device import DeviceInfo
from . import cuda_geometry, cuda_macros
from .base import Backend, Program
from .kernels import kernel_source
from .typespell import cache_key, header


def discover():
    try:
        import cupy
    except Exception as e:
        return [], f"CuPy is not installed or does not import ({type(e).__name__}: {e}); pip install 'gpu_mean[cuda]'"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return [], f"no CUDA driver or GPU ({e})"
    if n == 0:
        return [], "CuPy found no CUDA GPU"
    return [CudaBackend(i) for i in range(n)], None


class CudaBackend(Backend):
    def __init__(self, index: int):
        import cupy
        self.cp = cupy
        self.index = index
        self.dev = cupy.cuda.Device(index)
        props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.sms = int(props["multiProcessorCount"])
        self.cc = f"{props['major']}{props['minor']}"
        self.info = DeviceInfo("cuda", index, name, "NVIDIA", "GPU", int(props["totalGlobalMem"]), True, True,
                               f"CUDA, compute capability {props['major']}.{props['minor']}")
        with self.dev:
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self._modules: dict = {}

    # -- memory
    def alloc(self, nbytes):
        with self.dev:
            return self.cp.cuda.alloc(nbytes)

    def write(self, native, offset, data):
        with self.dev:
            (native + offset).copy_from_host_async(data.ctypes.data, data.nbytes, self.stream)
            self.stream.synchronize()

    def read(self, native, offset, nbytes):
        out = np.empty(nbytes, np.uint8)
        with self.dev:
            if nbytes:
                (native + offset).copy_to_host_async(out.ctypes.data, nbytes, self.stream)
            self.stream.synchronize()
        return out

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        with self.dev:
            (dst + dst_offset).copy_from_device_async(src + src_offset, nbytes, self.stream)

    def finish(self):
        self.stream.synchronize()

    # a command list that runs again is captured into a CUDA graph and replayed: one launch for
    # the whole list instead of one Python call and one kernel launch per dispatch
    supports_graphs = True

    def capture(self, record):
        with self.dev:
            self.stream.begin_capture()
            try:
                record()
            finally:
                graph = self.stream.end_capture()
        return graph

    def replay(self, graph):
        with self.dev:
            graph.launch(self.stream)

    def is_out_of_memory(self, exc):
        return isinstance(exc, self.cp.cuda.memory.OutOfMemoryError)

    def function(self, filename: str, macros: dict, name: str):
        key = cache_key(filename, macros)
        mod = self._modules.get(key)
        if mod is None:
            src = header(macros) + kernel_source("cuda_kernels", filename)
            try:
                with self.dev:
                    mod = self.cp.RawModule(code=src, options=("--std=c++17", "--fmad=false"))
                    mod.compile()
            except Exception as e:
                raise KernelBuildError(f"NVRTC build of {filename} with {macros} failed:\n{e}") from e
            self._modules[key] = mod
        return mod.get_function(name)

    def device_constant(self, values):
        with self.dev:
            return self.cp.asarray(np.asarray(list(values) + [0], np.int64))

    def compile(self, plan, flags):
        if isinstance(plan, planning.ReducePlan):
            return CudaReduceProgram(self, plan)
        return CudaElementwiseProgram(self, plan)


def _ptr(native, offset: int) -> int:
    return int(native.ptr) + int(offset)


class CudaElementwiseProgram(Program):
    BLOCK = 256

    def __init__(self, be: CudaBackend, plan: planning.ElementwisePlan):
        self.be = be
        self.plan = plan
        m = cuda_macros.ew_macros(plan)
        self.vec = m["VEC"]
        self.itemsize = int(plan.dtype.element_size)
        self.scale, self.bias = np.float32(plan.scale), np.float32(plan.bias)
        self.n = np.uint64(plan.count)
        if plan.contiguous:
            self.vec_fn = be.function("elementwise.cu", m, "gm_ew_contig_vec")
            self.scalar_fn = be.function("elementwise.cu", m, "gm_ew_contig_scalar")
            self.meta = None
        else:
            self.strided_fn = be.function("elementwise.cu", m, "gm_ew_strided")
            self.meta = be.device_constant(plan.meta())
        self.grid = cuda_geometry.cuda_ew_grid(plan.count, self.vec if plan.contiguous else 1, self.BLOCK, be.sms)

    def run(self, inputs, outputs, temporary):
        ptrs = [_ptr(b, o) for b, o in inputs]
        out = _ptr(*outputs[0])
        packed = cuda_macros.pack_inputs(ptrs)
        with self.be.dev:
            if self.meta is not None:
                self.strided_fn(self.grid, (self.BLOCK,), (np.uint64(out), packed, self.n, self.meta, self.scale,
                                                           self.bias), stream=self.be.stream)
            else:
                aligned = all(p % 16 == 0 for p in ptrs + [out])
                fn = self.vec_fn if aligned else self.scalar_fn
                fn(self.grid, (self.BLOCK,), (np.uint64(out), packed, self.n, self.scale, self.bias),
                   stream=self.be.stream)


class CudaReduceProgram(Program):
    def __init__(self, be: CudaBackend, plan: planning.ReducePlan):
        self.be = be
        self.plan = plan
        g = self.geo = cuda_geometry.cuda_reduce_geometry(plan, sms=be.sms)
        m = cuda_macros.reduce_macros(plan, g.block[0] * g.block[1], g.warp_rows, g.block[1])
        self.fn = be.function("reduce.cu", m, f"gm_reduce_{g.kernel}")
        self.meta = be.device_constant(plan.meta())
        self.temporary_size = plan.temporary_size(g.n_chunks)
        self.tail = (np.int64(plan.n_out), np.int64(g.length), np.int64(g.chunk), np.uint64(plan.n_reduce))
        if g.kernel == "col":
            self.tail += (np.int64(plan.inner), np.int64(plan.row_stride))
        if g.n_chunks > 1:
            self.fin = be.function("reduce.cu", m, "gm_reduce_finalize")

    def run(self, inputs, outputs, temporary):
        g = self.geo
        inp, out = np.uint64(_ptr(*inputs[0])), np.uint64(_ptr(*outputs[0]))
        part = np.uint64(_ptr(*temporary)) if g.n_chunks > 1 else np.uint64(0)
        with self.be.dev:
            self.fn(g.grid, g.block, (inp, out, part, self.meta) + self.tail, stream=self.be.stream)
            if g.n_chunks > 1:
                n_out = self.plan.n_out
                self.fin(((n_out + 255) // 256,), (256,), (part, np.int64(g.n_chunks), np.int64(n_out), out,
                                                           self.meta, np.uint64(self.plan.n_reduce)),
                         stream=self.be.stream)
