"""The CUDA backend: kernels from cuda_kernels/*.cu compiled by NVRTC (cuda_compile, no CuPy, no
``-ftz``), loaded and launched through CuPy on the backend's own stream. Without CuPy, NVRTC, the
CUDA headers or a GPU, ``discover`` says which one is missing."""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import re
import shutil
import subprocess
import threading

import numpy as np

from ..errors import KernelBuildError, UnsupportedError
from ..kernels import elementwise_kernels
from ..kernels.programs import KernelBackend
from ..kernels.source import ProgramCache
from ..kernels.typespell import cache_key
from ..runtime.device import DeviceInfo
from . import cuda_compile

_PICK = ("pip install 'gpu_mean[cuda13]' for a CUDA 13 driver (580 or newer), 'gpu_mean[cuda12]' for a "
         "CUDA 12 driver")
# statuses that mean "no memory for this", by CuPy's name for them (the numbers differ between the
# runtime and the driver API)
OOM_STATUS = ("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY")
# module-load statuses that mean the compiled kernel does not suit this driver or GPU: a build problem
LOAD_STATUS = ("CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_NO_BINARY_FOR_GPU",
               "CUDA_ERROR_INVALID_IMAGE", "cudaErrorInvalidPtx", "cudaErrorUnsupportedPtxVersion",
               "cudaErrorNoKernelImageForDevice", "cudaErrorInvalidKernelImage")
# every host<->device copy goes through pinned staging slots of this size, taking turns, so that
# filling one slot overlaps the DMA of the other
STAGE_CHUNK = 8 << 20
STAGE_SLOTS = 2

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
    return [CudaBackend(i, driver // 1000, driver) for i in range(n)], None


def stage_chunks(nbytes: int, chunk: int = STAGE_CHUNK) -> list[tuple[int, int]]:
    """(offset, size) of each piece of a staged copy."""
    return [(pos, min(chunk, nbytes - pos)) for pos in range(0, nbytes, chunk)]


class PinnedStaging:
    """The backend's pinned host buffers, through which every host array crosses the bus, once
    each way: the bytes are copied into a slot and DMA'd from it asynchronously on the backend's
    stream (a DMA from pageable memory would be staged by the driver anyway, and may not be
    asynchronous). Slots take turns and are reused for every copy: a slot is refilled only once
    the event recorded after its last DMA has passed, so a write returns as soon as the caller's
    bytes are staged, and the only host wait of a call is the read of its result. Allocated once,
    on first use, from CuPy's pinned memory pool, under the backend's stream."""

    def __init__(self, backend):
        self.be = backend
        self.slots = None
        self.busy = [False] * STAGE_SLOTS     # a DMA of the slot may still be in flight
        self.turn = 0

    def slot(self):
        """The next slot (uint8 host view, event), once the DMA that last used it is done."""
        be = self.be
        if self.slots is None:
            with be.dev, be.stream:
                self.mem = be.cp.cuda.alloc_pinned_memory(STAGE_SLOTS * STAGE_CHUNK)
                host = np.frombuffer(self.mem, np.uint8, STAGE_SLOTS * STAGE_CHUNK)
                # for ordering only: events without timing are cheaper to record and wait on
                self.slots = [(host[i * STAGE_CHUNK:(i + 1) * STAGE_CHUNK], be.cp.cuda.Event(disable_timing=True))
                              for i in range(STAGE_SLOTS)]
        k = self.turn
        self.turn = (k + 1) % STAGE_SLOTS
        host, event = self.slots[k]
        if self.busy[k]:
            event.synchronize()
        self.busy[k] = True      # the caller records ``event`` after the slot's next DMA
        return host, event

    def idle(self) -> None:
        """Every DMA queued so far is done (the stream was waited for)."""
        self.busy = [False] * STAGE_SLOTS

    def upload(self, dst, src: np.ndarray) -> None:
        """Enqueue the copy of ``src`` (contiguous bytes) to device memory ``dst``; returns once
        ``src`` has been read, without waiting for the DMA."""
        stream = self.be.stream
        for pos, n in stage_chunks(src.nbytes):
            host, event = self.slot()
            host[:n] = src[pos:pos + n]
            (dst + pos).copy_from_host_async(host.ctypes.data, n, stream)
            event.record(stream)

    def download(self, src, nbytes: int) -> np.ndarray:
        """``nbytes`` from device memory ``src``, after every command queued before; each piece
        drains into the result while the next one is in flight."""
        stream = self.be.stream
        out = np.empty(nbytes, np.uint8)
        pending = None
        for pos, n in stage_chunks(nbytes):
            host, event = self.slot()
            (src + pos).copy_to_host_async(host.ctypes.data, n, stream)
            event.record(stream)
            if pending:
                self._drain(out, *pending)
            pending = (host, event, pos, n)
        if pending:
            self._drain(out, *pending)
        else:
            stream.synchronize()     # nothing to read: still a read's wait for the work before it
        self.idle()                  # the stream is in order: the last DMA done, every one is
        return out

    @staticmethod
    def _drain(out, host, event, pos, n):
        event.synchronize()
        out[pos:pos + n] = host[:n]


class CudaBackend(KernelBackend):
    api = "cuda"

    def __init__(self, index: int, driver_major: int | None = None, driver_version: int | None = None):
        """Reads the GPU's properties only: its context and the backend's stream are made on first use
        (open), so that listing GPUs touches none and a GPU that cannot be used fails alone.
        ``driver_version``: the driver's CUDA version as CUDA reports it (13000 for 13.0)."""
        import cupy
        from cupy.cuda import driver, runtime
        self.cp = cupy
        self.index = index
        self.driver_major = driver_major
        self.driver_version = driver_version
        self.dev = cupy.cuda.Device(index)
        # device faults; an NVRTC failure is raised as KernelBuildError instead
        self.native_errors = (runtime.CUDARuntimeError, driver.CUDADriverError, cupy.cuda.memory.OutOfMemoryError)
        self.unavailable = None
        self._stream = None
        self._open_lock = threading.Lock()
        self._order_lock, self._order_event = threading.Lock(), None
        self._modules = ProgramCache()
        self.staging = PinnedStaging(self)
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

    checked = False     # every kernel bounds-checked (checked_twin; gpu_mean/kernels/checked.py)

    def checked_twin(self) -> CudaBackend:
        """This GPU with every kernel bounds-checked: a backend of its own (modules, stream). Each launch
        is waited for and its status read back, so command lists are not captured as graphs."""
        twin = CudaBackend(self.index, self.driver_major, self.driver_version)
        twin.checked, twin.supports_graphs = True, False
        twin.info = dataclasses.replace(twin.info, variant="checked")
        return twin

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
        from ..bridges.cuda import CudaArrays
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

    def write(self, native, offset, data):
        # asynchronous on the backend's stream: the kernels that read the buffer are queued after it
        with self.dev:
            self.staging.upload(native + offset, data.reshape(-1).view(np.uint8))

    def read(self, native, offset, nbytes):
        with self.dev:
            return self.staging.download(native + offset, nbytes)

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        with self.dev:
            (dst + dst_offset).copy_from_device_async(src + src_offset, nbytes, self.stream)

    def finish(self):
        with self.dev:
            self.stream.synchronize()
        self.staging.idle()

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

    def _image(self, filename: str, macros: dict) -> bytes:
        """One variant's image for this GPU (cuda_compile.image: the disk cache, else NVRTC)."""
        try:
            return cuda_compile.image(filename, macros, self.cc, self.driver_major, device=self.info.name,
                                      driver=self.driver_version)
        except cuda_compile.NvrtcError as e:
            raise KernelBuildError(f"NVRTC build of {filename} with {macros} failed:\n{e}") from e

    def _load(self, image: bytes, filename: str, macros: dict):
        mod = self.cp.cuda.function.Module()
        try:
            mod.load(image)
        except self.native_errors as e:
            if status_name(e) in LOAD_STATUS:
                raise KernelBuildError(f"{self.info.name} cannot load {filename} with {macros}: {e}") from e
            raise
        return mod

    def function(self, filename: str, macros: dict, name: str):
        """A kernel of one variant, compiled and loaded on this backend's GPU (not the current one)."""
        with self.dev:
            return self._modules.get(cache_key(filename, macros),
                                     lambda: self._load(self._image(filename, macros), filename, macros)
                                     ).get_function(name)

    def prebuild(self, plans, workers: int | None = None) -> int:
        """Compile the programs of ``plans`` ahead, NVRTC runs side by side in threads (ctypes lets go
        of the GIL; the suite's and conformance's cold runs on a GPU machine were mostly NVRTC, one
        variant after another, docs/results/2026-11-28-h200/README.md), and load them here: the
        operators compiled after find them built. Returns how many variants were compiled or loaded;
        a variant that fails is left for its operator's own compile to report."""
        from concurrent.futures import ThreadPoolExecutor

        from ..kernels.programs import program_source
        todo = {}
        for plan in plans:
            f, m = program_source(self, plan)
            k = cache_key(f, m)
            if k not in todo and k not in self._modules:
                todo[k] = (f, m)
        if not todo:
            return 0

        def one(fm):
            try:
                return self._image(*fm)
            except KernelBuildError:
                return None
        with ThreadPoolExecutor(max(1, min(workers or os.cpu_count() or 1, len(todo)))) as ex:
            images = list(ex.map(one, todo.values()))
        done = 0
        with self.dev:
            for (k, (f, m)), img in zip(todo.items(), images):
                if img is None:
                    continue
                try:
                    self._modules.get(k, lambda img=img, f=f, m=m: self._load(img, f, m))
                except KernelBuildError:
                    continue        # left for its operator's own compile to report
                done += 1
        return done

    # -- the kernel verbs (programs.KernelBackend): the GPU-shaped kernels of opencl_kernels/ (the
    # same text, launches and geometry the opencl:0-gpupaths test device runs on PoCL), compiled
    # through cuda_kernels/dialect.h
    @property
    def gpu_sms(self) -> int:
        return self.sms

    device_fence = True     # mem_fence is __threadfence (cuda_kernels/dialect.h): device scope

    def kernel(self, filename: str, macros: dict, name: str):
        return self.function(filename, macros, name)

    def launch(self, handle, args: tuple, launch, nbytes: int) -> None:
        with self.dev:
            handle(launch.grid, launch.local_size, args, stream=self.stream)

    def buffer_arg(self, native):
        return np.uint64(0 if native is None else int(native.ptr))

    def struct_arg(self, packed: np.ndarray):
        """A struct passed by value: its bytes, through a CuPy pointer argument over them (the launch
        copies the struct's size from that address, as it does for a one-element numpy array), so that
        a launch does not ask numpy for the array interface of a structured dtype: that took about
        20 us of a small call's host time on the H200 (numpy's _array_descr, once per field)."""
        return self.struct_type(packed)

    @functools.cached_property
    def struct_type(self):
        """``StructArg(packed)``: CuPy's CPointer over a numpy array's bytes, holding the array; the
        array itself where this CuPy has no CPointer."""
        base = getattr(getattr(self.cp.cuda, "function", None), "CPointer", None)
        if base is None:
            return lambda packed: (elementwise_kernels.pack_inputs(list(packed)) if isinstance(packed, ctypes.Array)
                                   else packed)

        class StructArg(base):
            __slots__ = ("packed",)

            def __init__(self, packed):
                super().__init__(struct_address(packed))
                self.packed = packed
        return StructArg

    def input_seam(self, variant, n_inputs: int) -> CudaInputSeam:
        return CudaInputSeam(self.checked, self.struct_type)

    def address(self, native) -> int:
        return int(native.ptr)


def struct_address(packed) -> int:
    """The address of a by-value struct's bytes: a ctypes array's, or a numpy array's data."""
    return ctypes.addressof(packed) if isinstance(packed, ctypes.Array) else int(packed.ctypes.data)


class CudaInputSeam:
    """The element-wise kernels' inputs on CUDA: one by-value struct of pointers (``gm_inputs``; 64
    inputs are 512 bytes of parameters); a checked build keeps the buffers' starts and the element
    offsets apart, so that the checks see the offsets."""

    def __init__(self, checked: bool, struct=lambda packed: packed):
        self.checked = checked
        self.struct = struct        # CudaBackend.struct_type

    def args(self, inputs, itemsize: int) -> tuple:
        if not self.checked:
            # the pointers' struct as a ctypes array (the same bytes as pack_inputs's): about 1 us a call
            # where the structured numpy array and its address took about 5 (the fake-CuPy front door)
            ptrs = [int(b.ptr) + int(off) for b, off in inputs]
            return (self.struct((ctypes.c_uint64 * len(ptrs))(*ptrs)),)
        return (self.struct(elementwise_kernels.pack_inputs([int(b.ptr) for b, _ in inputs],
                                                            [int(off) // itemsize for _, off in inputs])),)
