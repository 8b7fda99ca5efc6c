"""The OpenCL backend (pyopencl): any OpenCL device; tuned for PoCL's CPU device.

Kernels live in opencl_kernels/*.cl. Each program is built once per device and macro set and
cached, in memory and on disk for the next process (build_program, diskcache); executing a compiled
operator only sets the arguments that change and enqueues.
"""
from __future__ import annotations

import dataclasses
import os
import time
import warnings

import numpy as np

from ..bridges.arrays import aligned_empty
from ..descriptors.types import DataType
from ..errors import KernelBuildError
from ..kernels import opencl_geometry as geometry
from ..kernels.checked import Trace
from ..kernels.programs import KernelBackend
from ..kernels.source import ProgramCache, kernel_text
from ..kernels.typespell import cache_key
from ..runtime.device import DeviceInfo
from . import diskcache

_TRIVIAL = "__kernel void gm_probe(__global float* a) { a[get_global_id(0)] = 1.0f; }"
# -w: PoCL prints clang's notes ("N warnings generated") on every build; a failed build still raises
# with the whole log
BUILD_OPTIONS = ("-cl-std=CL1.2", "-w")


def _cl():
    import pyopencl as cl
    return cl


def discover():
    """OpenCL devices that can build a trivial kernel, GPUs first; broken platforms are skipped with a warning."""
    try:
        cl = _cl()
    except ImportError as e:
        return [], f"pyopencl is not installed ({e}); pip install 'gpu_mean[opencl]'"
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # no ICD loader or no platform
        return [], f"no OpenCL platform: {e}"
    found, skipped = [], []
    for plat in platforms:
        try:
            devs = plat.get_devices()
        except Exception as e:
            skipped.append(f"{plat.name}: {e}")
            continue
        for d in devs:
            try:
                ctx = cl.Context([d])
                cl.Program(ctx, _TRIVIAL).build()     # compiled, never from the cache: it checks the compiler
            except Exception as e:
                msg = f"skipping OpenCL platform {plat.name!r} device {d.name!r}: a trivial kernel does not build: " \
                      f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
                skipped.append(msg)
                continue
            found.append((d, plat, ctx))
    found.sort(key=lambda t: 0 if t[0].type & cl.device_type.GPU else 1)
    if not found:
        return [], "no usable OpenCL device" + (f" ({'; '.join(skipped)})" if skipped else "")
    return [OpenCLBackend(d, p, i, ctx) for i, (d, p, ctx) in enumerate(found)], None


def device_identity(device) -> dict:
    """What a program binary is valid for: the device, its driver and its platform (the compiler)."""
    plat = device.platform
    return {"device": device.name.strip(), "vendor": device.vendor.strip(), "driver": device.driver_version,
            "device_version": device.version, "platform": plat.name.strip(), "platform_version": plat.version}


def keeps_binaries(device) -> bool:
    """Whether the disk cache keeps this device's program binaries, or only a note that a program was
    built before. PoCL keeps its own cache of builds from source (POCL_CACHE_DIR, on unless
    POCL_KERNEL_CACHE=0), and answering a request for a binary makes it compile every kernel of the
    program once more, for a dynamic work-group size: measured on the CI machine, a first call with
    a cold PoCL cache took 0.3 s longer with the binary fetched, and about 0.01 s less once PoCL's
    cache was warm (tools/bench.py startup, docs/results/2026-11-24-startup-cache.md). Every other
    driver's binary is kept."""
    pocl = "portable computing language" in device.platform.name.lower()
    return not pocl or os.environ.get("POCL_KERNEL_CACHE", "1").strip() == "0"


def build_program(cl, ctx, device, src: str, options=BUILD_OPTIONS, what: str = "an OpenCL program"):
    """``src`` built with ``options`` for ``device`` (a pyopencl Program), through the per-user disk
    cache (diskcache): from the binary stored for exactly this text, these options, this device and
    driver; else compiled, announced through diskcache.compiling unless the cache notes it was built
    before (a driver that caches its own builds: keeps_binaries), and the binary (or the note) stored."""
    cache = diskcache.open_cache()
    keep = keeps_binaries(device)
    found = key = None
    if cache is not None:
        key = diskcache.make_key("opencl", src, options, **device_identity(device), binary=keep)
        found = cache.load(key)
        if found:
            try:
                return cl.Program(ctx, [device], [found]).build(options=list(options))
            except cl.Error:
                found = None    # the driver refuses a binary made under its own version string: compile anew
    if found is None:           # b"": built before, by a driver that keeps its own cache
        diskcache.compiling(what)
    prg = cl.Program(ctx, src).build(options=list(options))
    if cache is not None and found is None:
        entry = b""
        if keep:
            try:
                entry = prg.get_info(cl.program_info.BINARIES)[prg.get_info(cl.program_info.DEVICES).index(device)]
            except (cl.Error, ValueError):
                entry = None
        if entry is not None and (entry or not keep):     # a binary, or the note where none is kept
            cache.store(key, bytes(entry))
    return prg


def _type_name(cl, t: int) -> str:
    for name in ("GPU", "CPU", "ACCELERATOR", "CUSTOM"):
        if t & getattr(cl.device_type, name):
            return name
    return "OTHER"


HOST_BACKED_MIN_BYTES = 4 << 20   # numpy advises huge pages from 4 MiB on
HOST_PAGE = 4096
# finish() after a small command polls its event for up to SPIN_S before blocking in clFinish. Measured
# on PoCL (2-core CI VM): the blocking wait costs ~19 us after a tiny kernel, polling ~9 us, because the
# sleeping host thread no longer has to be woken. Polling competes with PoCL's own worker threads, so it
# is limited to what is quick: at most SPIN_MAX_COMMANDS commands moving at most SPIN_MAX_BYTES in all
# since the last finish (a 4 MB copy measured 25 % slower when polled).
SPIN_S = 50e-6
# opencl:0-gpupaths runs the GPU-shaped kernels with the geometry CUDA computes for a 132-SM GPU (the
# H100 and H200 have 132), whatever the device present: CI executes the launches such a GPU would get
GPUPATHS_SMS = 132
SPIN_MAX_BYTES = 256 << 10
SPIN_MAX_COMMANDS = 4


class KernelArgs:
    """A kernel whose arguments are set only when they change: pyopencl's set_arg costs ~11 us for a
    scalar on PoCL (0.2 us for a buffer), so a replayed dispatch with unchanged bindings sets none.
    What was set is kept per index: buffers by identity, numpy scalars by type and value."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = kernel.function_name
        self.vals: list = []        # per argument: the buffer, the scalar's value, or _MISSING
        self.last_args = None       # the tuple of the last set_all

    def set_all(self, args: tuple) -> None:
        """Every argument, in order: numpy scalars typed, buffers (or None) as they are; the tuple of
        the previous call again sets nothing."""
        if args is self.last_args:
            return
        vals = self.vals
        if len(vals) < len(args):
            vals.extend([_MISSING] * (len(args) - len(vals)))
        for i, a in enumerate(args):
            v = vals[i]
            if a is v:
                continue
            vals[i] = a
            if type(v) is type(a) and isinstance(a, np.generic) and v == a:
                continue
            self.kernel.set_arg(i, a)
        self.last_args = args

    def forget_buffers(self) -> None:
        """Forget the buffers set (scalars stay): the next run sets them again, and nothing here
        keeps a buffer (or the host array under it) alive."""
        self.vals = [v if isinstance(v, np.generic) else _MISSING for v in self.vals]
        self.last_args = None
_MISSING = object()
_U0 = np.uint64(0)


def variant_name(gpu_paths: bool, nofp64: bool, checked: bool) -> str:
    """The device string's suffix for a variant (without its leading dash): "gpupaths", "nofp64",
    "checked", in that order, joined by dashes ("" for the device as it is)."""
    return "-".join(n for n, on in (("gpupaths", gpu_paths), ("nofp64", nofp64), ("checked", checked)) if on)


def make_backend(index: int = 0, allow_fp64: bool = True, gpu_paths: bool = False,
                 tuning: geometry.OpenCLTuning = geometry.DEFAULT_TUNING, checked: bool = False,
                 trace: int = 0) -> OpenCLBackend:
    """A fresh backend for device ``index`` with its own programs (tests and benchmarks):
    allow_fp64=False forces the no-fp64 kernels, gpu_paths=True the kernel variants, geometry and
    memory a GPU device gets, on whatever device it is; ``tuning`` replaces the CPU prefetch settings;
    checked=True builds every kernel bounds-checked (gpu_mean/kernels/checked.py); ``trace`` > 0 (with
    checked) the trace mode of that build, keeping up to ``trace`` access records per launch
    (checked.Trace; the access model, gpu_mean/checks/access_model.py)."""
    found, reason = discover()
    if not found:
        raise RuntimeError(reason)
    b = found[index]
    be = OpenCLBackend(b.cl_device, b.platform, index, None, allow_fp64, gpu_paths, tuning, checked)
    if trace:
        if not checked:
            raise ValueError("make_backend: the trace mode is a mode of the checked build (checked=True)")
        be.trace = Trace(trace)
        be.info = dataclasses.replace(be.info, variant=be.info.variant + "-traced")
    return be


# OpenCL statuses that mean "no memory for this", by name (pyopencl's status_code)
_OOM_STATUS = ("MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_RESOURCES", "OUT_OF_HOST_MEMORY", "INVALID_BUFFER_SIZE")


class OpenCLBackend(KernelBackend):
    api = "opencl"
    trace: Trace | None = None      # the checked build's trace mode (make_backend's ``trace``)

    def __init__(self, device, platform, index: int, ctx=None, allow_fp64: bool = True, gpu_paths: bool = False,
                 tuning: geometry.OpenCLTuning = geometry.DEFAULT_TUNING, checked: bool = False):
        cl = _cl()
        self.cl = cl
        self.native_errors = (cl.Error,)
        self._oom_codes = frozenset(getattr(cl.status_code, n) for n in _OOM_STATUS)
        self.tuning = tuning
        self.cl_device = device
        self.platform = platform
        self.ctx = ctx or cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx)
        ext = device.extensions.split()
        self.has_khr_fp64 = "cl_khr_fp64" in ext
        self.fp64 = allow_fp64 and self.has_khr_fp64
        self.gpu_paths = gpu_paths
        self.checked = checked
        self.is_cpu = bool(device.type & cl.device_type.CPU) and not gpu_paths
        self.cpu_shaped = self.is_cpu       # the serial kernels (programs.KernelBackend)
        # OpenCL 1.2's mem_fence orders a work-item's own accesses only; GPU implementations give it
        # work-group scope (ROCm: memory_scope_work_group; libclc on NVPTX: membar.cta), so another
        # group may read stale data after it. A CPU device's groups are threads of one coherent host
        # (x86: ordered stores, the atomic a locked instruction): the spread redo runs there only
        self.device_fence = bool(device.type & cl.device_type.CPU)
        self.host_backed = self.is_cpu and bool(device.host_unified_memory)
        self.compute_units = device.max_compute_units
        # enforced on every buffer, those over host memory (USE_HOST_PTR) included (PoCL 3.1, checked)
        self.max_alloc = int(device.max_mem_alloc_size)
        self.max_alloc_name = "CL_DEVICE_MAX_MEM_ALLOC_SIZE"
        self.max_param_bytes = device.max_parameter_size
        # the width the GPU-shaped geometry is computed for (gpu_geometry: multiprocessors)
        self.gpu_sms = GPUPATHS_SMS if gpu_paths else self.compute_units
        self.info = DeviceInfo("opencl", index, device.name.strip(), device.vendor.strip(),
                               _type_name(cl, device.type), device.global_mem_size,
                               "cl_khr_fp16" in ext, self.fp64, platform.name.strip(),
                               variant=variant_name(gpu_paths, not allow_fp64 and self.has_khr_fp64, checked))
        self._programs = ProgramCache()
        self._drained()

    def _drained(self):
        # what was enqueued since the queue was last known to be empty: finish() polls the newest
        # event only while that is a few small commands
        self._last_event, self._pending_bytes, self._pending_commands = None, 0, 0

    def _enqueued(self, ev, nbytes: int):
        self._last_event = ev
        self._pending_bytes += nbytes
        self._pending_commands += 1

    def enqueue(self, kernel, gsize, lsize, nbytes: int):
        """Enqueues a kernel that reads and writes ``nbytes`` in all."""
        self._enqueued(self.cl.enqueue_nd_range_kernel(self.queue, kernel, gsize, lsize), nbytes)

    # -- memory
    def alloc(self, nbytes):
        mf = self.cl.mem_flags
        if self.host_backed and nbytes >= HOST_BACKED_MIN_BYTES:
            # A CPU device reads host memory: back big buffers with page-aligned numpy memory, which
            # numpy advises for transparent huge pages (PoCL's own allocations get 4 KB pages; the
            # huge pages move streaming kernels 3-5 % closer to the memory bandwidth on the CI machine).
            return self.cl.Buffer(self.ctx, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=aligned_empty(nbytes, HOST_PAGE))
        return self.cl.Buffer(self.ctx, mf.READ_WRITE, nbytes)

    def write(self, native, offset, data):
        self.cl.enqueue_copy(self.queue, native, data, dst_offset=offset, is_blocking=True)
        self._drained()     # a blocking command in an in-order queue: every earlier one is complete

    def write_held(self, native, offset, data):
        # not blocking: the in-order queue runs it before the kernels, and pyopencl holds ``data``
        # until the copy is done
        ev = self.cl.enqueue_copy(self.queue, native, data, dst_offset=offset, is_blocking=False)
        self._enqueued(ev, data.nbytes)

    def read(self, native, offset, nbytes):
        out = np.empty(nbytes, np.uint8)
        if nbytes:
            self.cl.enqueue_copy(self.queue, out, native, src_offset=offset, is_blocking=True)
            self._drained()
        return out

    def make_arrays(self):
        from ..bridges.opencl import ClArrays
        return ClArrays(self)

    def host_sync(self, native, nbytes: int) -> None:
        # ``native`` is a buffer the bridge made over host memory only where this device's kernels
        # were seen to write into the host array itself (bridges/opencl.py: probe_host_ptr_alignment): the
        # writes are there once the in-order queue is done, and no map is needed
        self.finish()

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        ev = self.cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes, src_offset=src_offset,
                                  dst_offset=dst_offset)
        self._enqueued(ev, 2 * nbytes)

    def finish(self):
        ev = self._last_event
        quick = self._pending_bytes <= SPIN_MAX_BYTES and self._pending_commands <= SPIN_MAX_COMMANDS
        self._drained()
        if ev is not None and quick:
            # the queue is in order: once the newest command is complete, so is every earlier one
            self.queue.flush()
            deadline = time.perf_counter() + SPIN_S
            while ev.command_execution_status > 0 and time.perf_counter() < deadline:
                pass
        self.queue.finish()

    def is_out_of_memory(self, exc):
        return isinstance(exc, self.cl.MemoryError) or getattr(exc, "code", None) in self._oom_codes

    def storage_refusal(self, dt):
        if dt == DataType.FLOAT64 and not self.fp64:
            if self.has_khr_fp64:
                return "cl_khr_fp64 (OpenCL's double precision) is switched off on this backend (allow_fp64=False)"
            return "the device lacks cl_khr_fp64, OpenCL's double-precision extension"
        return None

    # -- programs
    def program(self, filename: str, macros: dict):
        macros = self._traced(macros)

        def build():
            src = kernel_text("opencl", filename, macros)
            try:
                return build_program(self.cl, self.ctx, self.cl_device, src, BUILD_OPTIONS, filename)
            except self.cl.RuntimeError as e:
                raise KernelBuildError(f"OpenCL build of {filename} with {macros} failed on "
                                       f"{self.info.name}:\n{e}") from e
        return self._programs.get(cache_key(filename, macros), build)

    def checked_twin(self) -> OpenCLBackend:
        """This device with every kernel bounds-checked: a backend of its own (programs, queue)."""
        return OpenCLBackend(self.cl_device, self.platform, self.info.index, self.ctx, self.fp64, self.gpu_paths,
                             self.tuning, checked=True)

    def _traced(self, macros: dict) -> dict:
        """The trace mode's macros: GM_TRACE 1 beside GM_CHECKED 1 (never without it)."""
        if self.trace is not None and macros.get("GM_CHECKED"):
            return {**macros, "GM_TRACE": 1}
        return macros

    # -- the kernel verbs (programs.KernelBackend)
    def kernel(self, filename: str, macros: dict, name: str) -> KernelArgs:
        k = KernelArgs(self.cl.Kernel(self.program(filename, macros), name))
        if self.trace is not None:
            k.source = (filename, self._traced(macros))     # what the records' line numbers refer to
        return k

    def launch(self, handle: KernelArgs, args: tuple, launch, nbytes: int) -> None:
        handle.set_all(args)
        if self.trace is not None:
            self.trace.launched(handle.name, launch, getattr(handle, "source", None))
        self.enqueue(handle.kernel, launch.global_size, launch.local_size, nbytes)

    def buffer_arg(self, native):
        return native       # a cl.Buffer, or None for a NULL pointer

    def address(self, native) -> int:
        """Where a buffer's data lies for the kernels' alignment (the vector variants): a buffer over
        host memory at its host array's address, which may be any multiple of ``host_ptr_alignment``;
        any other at an address OpenCL aligns (0 here)."""
        return self.memory(native)[1]

    def memory(self, native) -> tuple:
        """A buffer over host memory (USE_HOST_PTR) lies at its host array's address; any other is
        its own memory object, starting at 0 there (its handle is no address of its data: two
        buffers whose handles lie closer than their sizes did compare as overlapping, and an n-ary
        mean took the in-place kernels for distinct buffers)."""
        host = getattr(native, "hostbuf", None)
        if host is not None:
            return "host", np.asarray(host).__array_interface__["data"][0]
        return ("mem", native.int_ptr), 0

    def struct_arg(self, packed: np.ndarray) -> object:
        """A kernel's metadata struct (the bytes CUDA passes by value) as a constant buffer."""
        mf = self.cl.mem_flags
        return self.cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=packed.tobytes())

    def input_seam(self, variant, n_inputs: int) -> ClInputSeam:
        return ClInputSeam(self, n_inputs if variant.offsets_in_buffer else 0)

    def forget_args(self, handle: KernelArgs) -> None:
        handle.forget_buffers()


class ClInputSeam:
    """The element-wise kernels' inputs on OpenCL: a buffer and an element offset per input, or,
    past the device's parameter limit, the offsets in a small constant buffer and the buffers
    (elementwise_kernels.input_seam)."""

    def __init__(self, be: OpenCLBackend, n_offsets: int):
        self.be = be
        self.offsets = be.cl.Buffer(be.ctx, be.cl.mem_flags.READ_ONLY, 8 * n_offsets) if n_offsets else None
        self._written = None

    def args(self, inputs, itemsize: int) -> tuple:
        u64 = np.uint64
        if self.offsets is None:
            out = []
            for buf, off in inputs:
                out += (buf, u64(off // itemsize) if off else _U0)
            return tuple(out)
        offs = np.array([off // itemsize for _, off in inputs], np.uint64)
        if self._written is None or not np.array_equal(offs, self._written):
            self.be.write(self.offsets, 0, offs)
            self._written = offs
        return (self.offsets,) + tuple(buf for buf, _ in inputs)
