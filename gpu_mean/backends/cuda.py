"""The CUDA backend: kernels from cuda_kernels/*.cu compiled by NVRTC (cuda_compile, no CuPy, no
``-ftz``), loaded and launched through CuPy on the backend's own stream. Without CuPy, NVRTC, the
CUDA headers or a GPU, ``discover`` says which one is missing."""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import threading

import numpy as np

from ..errors import KernelBuildError, UnsupportedError
from ..runtime import planning
from ..runtime.device import DeviceInfo
from . import cuda_compile, elementwise_kernels, reduce_kernels
from .base import Backend, Program
from .kernels import ProgramCache
from .typespell import cache_key

ACC_BYTES = planning.ACC_BYTES

_PICK = ("pip install 'gpu_mean[cuda13]' for a CUDA 13 driver (580 or newer), 'gpu_mean[cuda12]' for a "
         "CUDA 12 driver")
# statuses that mean "no memory for this", by CuPy's name for them (the numbers differ between the
# runtime and the driver API)
OOM_STATUS = ("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY")
# module-load statuses that mean the compiled kernel does not suit this driver or GPU: a build problem
LOAD_STATUS = ("CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_NO_BINARY_FOR_GPU",
               "CUDA_ERROR_INVALID_IMAGE", "cudaErrorInvalidPtx", "cudaErrorUnsupportedPtxVersion",
               "cudaErrorNoKernelImageForDevice", "cudaErrorInvalidKernelImage")
# host<->device copies from this size on go through pinned staging buffers (two halves, so filling
# one overlaps the DMA of the other); below it the extra host copy costs more than it saves
STAGE_MIN = 1 << 20
STAGE_CHUNK = 8 << 20


def nvidia_driver() -> tuple[str, str] | None:
    """(driver version, CUDA version) as ``nvidia-smi`` reports them; None without a working one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    cuda = re.search(r"CUDA Version:\s*(\d+\.\d+)", out)
    driver = re.search(r"Driver Version:\s*([\d.]+)", out)
    return (driver.group(1) if driver else "?", cuda.group(1)) if cuda else None


def install_hint() -> str:
    """What installs the CUDA backend on this machine: the extra for the CUDA version the NVIDIA
    driver reports (tools/cuda_extra.sh makes the same choice), or both extras when no driver answers."""
    found = nvidia_driver()
    if found is None:
        return _PICK
    driver, cuda = found
    major = int(cuda.split(".")[0])
    if major < 12:
        return (f"the NVIDIA driver {driver} is for CUDA {cuda}, older than the CUDA 12 CuPy 14 needs: update the "
                "driver, then pip install 'gpu_mean[cuda13]' (or [cuda12])")
    extra = "cuda13" if major >= 13 else "cuda12"
    return (f"an NVIDIA driver is present ({driver}, CUDA {cuda}, per nvidia-smi): pip install 'gpu_mean[{extra}]' "
            f"installs the CUDA backend (in a clone of gpu_mean: bash tools/setup.sh, which picks {extra})")


def status_name(exc: Exception) -> str:
    """CuPy's CUDA errors read '<status name>: <description>'."""
    return str(exc).split(":", 1)[0].strip()


def discover():
    try:
        import cupy
    except Exception as e:
        return [], f"CuPy is not installed or does not import ({type(e).__name__}: {e}); {install_hint()}"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        driver = cupy.cuda.runtime.driverGetVersion()
    except Exception as e:
        try:
            rt = cupy.cuda.runtime.runtimeGetVersion()
            built = f"CuPy {cupy.__version__} is built for CUDA {rt // 1000}.{rt % 1000 // 10}: "
        except Exception:
            built = ""
        return [], f"no usable CUDA driver or GPU ({e}); {built}{install_hint()}"
    if n == 0:
        return [], "CuPy found no CUDA GPU"
    try:
        cuda_compile.nvrtc(driver // 1000)
        cuda_compile.include_dir()
    except cuda_compile.NvrtcError as e:
        return [], f"CUDA {driver // 1000}.{driver % 1000 // 10} driver: {e}"
    # every GPU is listed; one that cannot be used says why (info.unavailable) and auto passes it over
    return [CudaBackend(i, driver // 1000) for i in range(n)], None


def stage_chunks(nbytes: int, chunk: int = STAGE_CHUNK) -> list[tuple[int, int, int]]:
    """(offset, size, staging half) for each piece of a staged copy, halves alternating."""
    return [(pos, min(chunk, nbytes - pos), i % 2) for i, pos in enumerate(range(0, nbytes, chunk))]


class CudaBackend(Backend):
    def __init__(self, index: int, driver_major: int | None = None):
        """Reads the GPU's properties only: its context and the backend's stream are made on first use
        (open), so that listing GPUs touches none and a GPU that cannot be used fails alone."""
        import cupy
        from cupy.cuda import driver, runtime
        self.cp = cupy
        self.index = index
        self.driver_major = driver_major
        self.dev = cupy.cuda.Device(index)
        # device faults; an NVRTC failure is raised as KernelBuildError instead
        self.native_errors = (runtime.CUDARuntimeError, driver.CUDADriverError, cupy.cuda.memory.OutOfMemoryError)
        self.unavailable = None
        self._stream = None
        self._open_lock = threading.Lock()
        self._order_lock, self._order_event = threading.Lock(), None
        self._modules = ProgramCache()
        self._stage = None
        try:
            props = runtime.getDeviceProperties(index)
        except self.native_errors as e:
            self.sms, self.cc = 1, 0
            self.info = DeviceInfo("cuda", index, f"CUDA GPU {index}", "NVIDIA", "GPU", 0, True, True, "CUDA")
            self._set_unavailable(f"its properties cannot be read ({e})")
            return
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.sms = int(props["multiProcessorCount"])
        self.cc = int(props["major"]) * 10 + int(props["minor"])
        self.compute_mode = int(props.get("computeMode", 0))
        self.info = DeviceInfo("cuda", index, name, "NVIDIA", "GPU", int(props["totalGlobalMem"]), True, True,
                               f"CUDA, compute capability {props['major']}.{props['minor']}")
        if self.compute_mode == 2:
            self._set_unavailable("its compute mode is Prohibited (nvidia-smi -c): no process may use it")
            return
        try:
            cuda_compile.nvrtc(driver_major).target(self.cc)
        except cuda_compile.NvrtcError as e:
            self._set_unavailable(str(e))

    def _set_unavailable(self, reason: str) -> None:
        self.unavailable = reason
        self.info = dataclasses.replace(self.info, unavailable=reason)

    def open(self) -> str | None:
        """Make the GPU's context and the backend's stream, once: None when the GPU is usable, else
        why not (kept: a GPU that failed is not tried again)."""
        if self._stream is None and self.unavailable is None:
            with self._open_lock:
                if self._stream is None and self.unavailable is None:
                    try:
                        with self.dev:
                            self._stream = self.cp.cuda.Stream(non_blocking=True)
                    except self.native_errors as e:
                        why = f"no CUDA context or stream could be made on it ({e})"
                        if getattr(self, "compute_mode", 0) == 3:
                            why += "; its compute mode is Exclusive_Process: another process holds it"
                        self._set_unavailable(why)
        return self.unavailable

    @property
    def stream(self):
        """The backend's own non-blocking stream: every kernel, copy and allocation of the backend."""
        if self._stream is None and self.open() is not None:
            raise UnsupportedError(f"{self.info.id} ({self.info.name}) cannot be used: {self.unavailable}")
        return self._stream

    @stream.setter
    def stream(self, stream) -> None:
        self._stream = stream

    def make_arrays(self):
        from .arrays_cuda import CudaArrays
        return CudaArrays(self)

    # -- memory
    def alloc(self, nbytes):
        # Under the backend's stream: CuPy's pool keeps freed memory per stream (a block goes back
        # to the arena of the stream it was allocated under; MemoryAsyncPool frees it on that
        # stream), so a released buffer is reused only by work ordered after the backend's own.
        # Under the caller's current stream, the caller's next allocation could reuse it while the
        # backend's kernels still read or write it.
        with self.dev, self.stream:
            return self.cp.cuda.alloc(nbytes)

    def _staging(self):
        if self._stage is None:
            with self.dev, self.stream:
                mem = self.cp.cuda.alloc_pinned_memory(2 * STAGE_CHUNK)
                host = np.frombuffer(mem, np.uint8, 2 * STAGE_CHUNK)
                # for ordering only: events without timing are cheaper to record and wait on
                self._stage = (mem, (host[:STAGE_CHUNK], host[STAGE_CHUNK:]),
                               (self.cp.cuda.Event(disable_timing=True), self.cp.cuda.Event(disable_timing=True)))
        return self._stage

    def write(self, native, offset, data):
        src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        with self.dev:
            if src.nbytes < STAGE_MIN:
                (native + offset).copy_from_host_async(src.ctypes.data, src.nbytes, self.stream)
            else:
                _, halves, events = self._staging()
                for pos, n, h in stage_chunks(src.nbytes):
                    events[h].synchronize()     # the DMA that last read this half is done
                    halves[h][:n] = src[pos:pos + n]
                    (native + offset + pos).copy_from_host_async(halves[h].ctypes.data, n, self.stream)
                    events[h].record(self.stream)
            self.stream.synchronize()

    def read(self, native, offset, nbytes):
        out = np.empty(nbytes, np.uint8)
        with self.dev:
            if nbytes < STAGE_MIN:
                if nbytes:
                    (native + offset).copy_to_host_async(out.ctypes.data, nbytes, self.stream)
            else:
                _, halves, events = self._staging()
                pending = None
                for pos, n, h in stage_chunks(nbytes):
                    (native + offset + pos).copy_to_host_async(halves[h].ctypes.data, n, self.stream)
                    events[h].record(self.stream)
                    if pending:     # the previous piece drains to numpy while this one is in flight
                        self._drain(out, halves, events, *pending)
                    pending = (pos, n, h)
                self._drain(out, halves, events, *pending)
            self.stream.synchronize()
        return out

    @staticmethod
    def _drain(out, halves, events, pos, n, h):
        events[h].synchronize()
        out[pos:pos + n] = halves[h][:n]

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        with self.dev:
            (dst + dst_offset).copy_from_device_async(src + src_offset, nbytes, self.stream)

    def finish(self):
        with self.dev:
            self.stream.synchronize()

    # -- ordering against another stream of the same GPU, through one reused event without timing
    # (Stream.record() would make a new timing event per call); the lock keeps one thread's
    # record-then-wait whole. A wait takes the event as last recorded, so re-recording is safe.
    def _ordering_event(self):
        if self._order_event is None:
            with self.dev:
                self._order_event = self.cp.cuda.Event(disable_timing=True)
        return self._order_event

    def wait_for(self, stream) -> None:
        """The backend's stream waits for the work queued on ``stream`` so far."""
        with self._order_lock, self.dev:
            ev = self._ordering_event()
            ev.record(stream)
            self.stream.wait_event(ev)

    def make_wait(self, stream) -> None:
        """``stream`` waits for the work queued on the backend's stream so far."""
        with self._order_lock, self.dev:
            ev = self._ordering_event()
            ev.record(self.stream)
            stream.wait_event(ev)

    # a command list that runs again is captured into a CUDA graph and replayed: one launch for
    # the whole list instead of one Python call and one kernel launch per dispatch
    supports_graphs = True

    def capture(self, record):
        with self.dev:
            self.stream.begin_capture()
            try:
                record()
            except BaseException:
                try:
                    self.stream.end_capture()
                except Exception:   # the error in flight invalidated the capture; it says why
                    pass
                raise
            return self.stream.end_capture()

    def replay(self, graph):
        with self.dev:
            graph.launch(self.stream)

    def is_out_of_memory(self, exc):
        if isinstance(exc, self.cp.cuda.memory.OutOfMemoryError):
            return True
        return isinstance(exc, self.native_errors) and status_name(exc) in OOM_STATUS

    def free_memory(self) -> int | None:
        """The GPU's free memory plus what CuPy's pool holds free for this GPU: what a new allocation
        can have. CUDA has no per-allocation limit below that."""
        with self.dev:
            free = int(self.cp.cuda.runtime.memGetInfo()[0])
            return free + int(self.cp.get_default_memory_pool().free_bytes())

    def release_cached(self) -> None:
        # buffers the library freed stay in CuPy's pool for reuse; give the unused blocks to the driver
        with self.dev:
            self.cp.get_default_memory_pool().free_all_blocks()

    def function(self, filename: str, macros: dict, name: str):
        """A kernel of one variant, compiled and loaded on this backend's GPU (not the current one)."""
        def build():
            try:
                image = cuda_compile.build(filename, macros, self.cc, self.driver_major).image
            except cuda_compile.NvrtcError as e:
                raise KernelBuildError(f"NVRTC build of {filename} with {macros} failed:\n{e}") from e
            mod = self.cp.cuda.function.Module()
            try:
                mod.load(image)
            except self.native_errors as e:
                if status_name(e) in LOAD_STATUS:
                    raise KernelBuildError(f"{self.info.name} cannot load {filename} with {macros}: {e}") from e
                raise
            return mod
        with self.dev:
            return self._modules.get(cache_key(filename, macros), build).get_function(name)

    def compile(self, plan, flags):
        if isinstance(plan, planning.ReducePlan):
            return CudaReduceProgram(self, plan)
        return CudaElementwiseProgram(self, plan)


class CudaElementwiseProgram(Program):
    """The GPU-shaped kernels of opencl_kernels/elementwise.cl (the same text, launches and geometry
    the opencl:0-gpupaths test device runs on PoCL), compiled through cuda_kernels/dialect.h; the
    inputs travel as one by-value struct of pointers."""

    def __init__(self, be: CudaBackend, plan: planning.ElementwisePlan):
        self.be = be
        self.plan = plan
        v = self.variant = elementwise_kernels.gpu_variant(plan, api="cuda", sms=be.sms)
        self.fns = {launch.kernel: be.function("elementwise.cl", v.macros, launch.kernel)
                    for launch in (v.scalar, v.vec) if launch is not None}
        self.fixed = v.fixed_args(plan.scale, plan.bias, v.dims)
        self.itemsize = int(plan.dtype.element_size)

    def run(self, inputs, outputs, temporary):
        v, isz = self.variant, self.itemsize
        ptrs = [int(b.ptr) + int(off) for b, off in inputs]
        out, ooff = int(outputs[0][0].ptr), int(outputs[0][1])
        aligned = v.vec is not None and all(p % 16 == 0 for p in ptrs + [out + ooff])
        launch = v.vec if aligned else v.scalar
        args = (np.uint64(out), np.uint64(ooff // isz)) + self.fixed + (elementwise_kernels.pack_inputs(ptrs),)
        with self.be.dev:
            self.fns[launch.kernel](launch.grid, launch.local_size, args, stream=self.be.stream)


class CudaReduceProgram(Program):
    """The GPU-shaped kernels of opencl_kernels/reduce.cl (the same text, launches and geometry the
    opencl:0-gpupaths test device runs on PoCL), compiled through cuda_kernels/dialect.h."""

    def __init__(self, be: CudaBackend, plan: planning.ReducePlan):
        self.be = be
        self.plan = plan
        v = self.variant = reduce_kernels.gpu_variant(plan, sms=be.sms)
        self.fn = be.function("reduce.cl", v.macros, v.main.kernel)
        self.meta = reduce_kernels.pack_meta(plan)
        self.temporary_size = v.temporary_size
        self.itemsize = int(plan.dtype.element_size)
        self.out_itemsize = int(plan.output_type.element_size)
        if v.finalize:
            self.fin = be.function("reduce.cl", v.macros, v.finalize.kernel)

    def run(self, inputs, outputs, temporary):
        v, u64 = self.variant, np.uint64
        (ib, ioff), (ob, ooff) = inputs[0], outputs[0]
        inp, out = u64(int(ib.ptr)), u64(int(ob.ptr))
        part, poff = (u64(int(temporary[0].ptr)), temporary[1] // ACC_BYTES) if v.finalize else (u64(0), 0)
        ooff //= self.out_itemsize
        with self.be.dev:
            self.fn(v.main.grid, v.main.local_size,
                    v.main_args(inp, ioff // self.itemsize, out, ooff, part, poff, self.meta), stream=self.be.stream)
            if v.finalize:
                self.fin(v.finalize.grid, v.finalize.local_size,
                         v.finalize_args(part, poff, out, ooff, self.meta, self.plan.n_out, self.plan.n_reduce),
                         stream=self.be.stream)
