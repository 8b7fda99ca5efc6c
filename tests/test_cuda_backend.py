"""The CUDA backend's host side against a stand-in for CuPy (no GPU, no CuPy needed): which GPU and
stream each call uses, staged copies, capture errors, error classification and discovery messages."""
from __future__ import annotations

import ctypes
import os
import sys
import types
import weakref

import numpy as np
import pytest
from fake_cupy import (
    CudaDriverError,
    CudaRuntimeError,
    DevPtr,
    FakeEvent,
    FakeStream,
    PoolOutOfMemory,
    fake_backend,
)
from fake_cupy import inside as _inside

import gpu_mean as gm
from gpu_mean import backends, cli
from gpu_mean.backends import cuda, cuda_compile
from gpu_mean.checks import demo
from gpu_mean.errors import KernelBuildError, UnsupportedError


def test_kernels_compile_and_load_through_a_fake_compiler_and_driver(monkeypatch):
    log = []
    be = fake_backend(log)
    built = []

    def image(filename, macros, cc, max_major, **device):
        built.append((filename, cc, max_major, device))
        log.append(("build",))
        return b"cubin"

    monkeypatch.setattr(cuda_compile, "image", image)
    assert be.function("reduce_gpu.cl", {"A": 1}, "gm_reduce_row") == "gm_reduce_row"
    # the backend's own NVRTC path (through the disk cache, keyed by the GPU and driver), not CuPy's RawModule
    assert built == [("reduce_gpu.cl", 90, 13, {"device": "fake GPU", "driver": 13000})]
    for event in (("build",), ("load", b"cubin"), ("get_function", "gm_reduce_row")):
        assert _inside(log, event), event           # on cuda:1, not on whatever GPU is current
    be.function("reduce_gpu.cl", {"A": 1}, "gm_reduce_col")
    assert len(built) == 1                        # one module per macro set


def test_nvrtc_errors_are_build_errors(monkeypatch):
    be = fake_backend([])

    def image(*a, **k):
        raise cuda_compile.NvrtcError("NVRTC_ERROR_COMPILATION\nkernel.cu(3): error: identifier undefined")

    monkeypatch.setattr(cuda_compile, "image", image)
    with pytest.raises(KernelBuildError, match="identifier undefined"):
        be.function("reduce_gpu.cl", {}, "gm_reduce_row")


def _pinned_addresses(be):
    base = ctypes.addressof(ctypes.c_char.from_buffer(be.pinned[0]))
    return [base + i * cuda.STAGE_CHUNK for i in range(cuda.STAGE_SLOTS)]


def test_big_copies_go_through_pinned_staging_on_the_backend_stream():
    log = []
    be = fake_backend(log)
    FakeEvent.made.clear()
    n = 2 * cuda.STAGE_CHUNK + 12345
    dev = bytearray(n + 64)
    data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    be.write(DevPtr(dev, 0, log), 64, data)
    assert bytes(dev[64:]) == data.tobytes()
    copies = [e for e in log if e[0] == "h2d"]
    assert len(copies) == 3 and all(c[3] is be.stream for c in copies)
    stage = _pinned_addresses(be)
    assert [c[1] for c in copies] == [stage[0], stage[1], stage[0]]      # pinned slots, taking turns
    # the write does not wait for its DMA: only the refill of slot 0 waits for slot 0's first DMA
    assert [e for e in log if e[0] in ("sync", "event sync")] == [("event sync", be.stream)]
    log.clear()
    out = be.read(DevPtr(dev, 0, log), 64, n)
    assert np.array_equal(out, data) and len(be.pinned) == 1
    assert FakeEvent.made == [{"disable_timing": True}] * 2    # ordering only: made once, without timing
    assert all(e[3] is be.stream for e in log if e[0] == "d2h")
    kinds = [e[0] for e in log if e[0] in ("d2h", "event sync")]
    assert kinds[-1] == "event sync" and kinds.count("d2h") == 3   # it returns after waiting for its last DMA


def test_small_copies_are_staged_too_and_never_wait_on_the_write():
    """A small copy also goes through a pinned slot: the caller's bytes are read before write
    returns (a DMA straight from pageable memory may be synchronous, and one from pinned caller
    memory would read it after write returned), and the slots keep taking turns, so that two
    inputs in a row never wait for each other."""
    log = []
    be = fake_backend(log)
    dev = bytearray(256)
    a, b = np.arange(100, dtype=np.uint8), np.arange(100, 200, dtype=np.uint8)
    be.write(DevPtr(dev, 0, log), 0, a)
    be.write(DevPtr(dev, 0, log), 128, b)
    stage = _pinned_addresses(be)
    assert [(e[1], e[2]) for e in log if e[0] == "h2d"] == [(stage[0], 100), (stage[1], 100)]
    assert not [e for e in log if e[0] in ("sync", "event sync")]      # no host wait in either write
    a[:] = 0                                                            # the caller may reuse its memory
    assert np.array_equal(be.read(DevPtr(dev, 0, log), 0, 100), np.arange(100, dtype=np.uint8))
    assert len(be.pinned) == 1
    assert all(e[3] is be.stream for e in log if e[0] in ("h2d", "d2h"))
    assert _inside(log, ("event sync", be.stream))
    assert np.array_equal(be.read(DevPtr(dev, 0, log), 0, 0), np.empty(0, np.uint8))
    assert log[-2:] == [("sync", be.stream), ("exit", 1)]               # nothing to read: still a wait


def test_a_failed_capture_raises_the_original_error():
    be = fake_backend([])

    def record():
        raise ValueError("the launch that broke the capture")

    with pytest.raises(ValueError, match="the launch that broke"):
        be.capture(record)


def test_out_of_memory_is_recognised_by_status_name():
    be = fake_backend([])
    assert be.is_out_of_memory(CudaRuntimeError("cudaErrorMemoryAllocation: out of memory"))
    assert be.is_out_of_memory(CudaDriverError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"))
    assert be.is_out_of_memory(PoolOutOfMemory())
    assert not be.is_out_of_memory(CudaRuntimeError("cudaErrorIllegalAddress: an illegal memory access"))
    assert not be.is_out_of_memory(ValueError("cudaErrorMemoryAllocation: not a CUDA error"))


def _fake_cupy(monkeypatch, count=1, driver=13000):
    runtime = types.SimpleNamespace(getDeviceCount=lambda: count, driverGetVersion=lambda: driver)
    mod = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy", mod)


@pytest.mark.parametrize("driver, named", [(None, ("cuda13", "cuda12")), (("580.159.04", "13.0"), ("cuda13",)),
                                           (("550.54", "12.4"), ("cuda12",))], ids=["no driver", "CUDA 13", "CUDA 12"])
def test_discover_names_the_extra_for_the_driver(monkeypatch, driver, named):
    """Without CuPy, the reason names the extra for the CUDA version nvidia-smi reports (only that
    one), or both when no driver answers."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(cuda, "nvidia_driver", lambda: driver)
    found, reason = cuda.discover()
    assert found == []
    for extra in ("cuda13", "cuda12"):
        assert (f"gpu_mean[{extra}]" in reason) == (extra in named), (extra, reason)


def test_discover_names_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    found, reason = cuda.discover()
    # the extras named depend on the machine's driver (the test above covers each case): a GPU
    # machine with a CUDA 13 driver rightly gets only cuda13
    driver = cuda.nvidia_driver()
    major = None if driver is None else int(driver[1].split(".")[0])
    want = ["cuda13", "cuda12"] if major is None else ["cuda12"] if major == 12 else ["cuda13"]
    assert found == [] and all(f"gpu_mean[{e}]" in reason for e in want), (driver, reason)

    _fake_cupy(monkeypatch, count=0)
    assert cuda.discover() == ([], "CuPy found no CUDA GPU")

    _fake_cupy(monkeypatch)

    def no_nvrtc():
        raise cuda_compile.NvrtcError("no usable libnvrtc")

    monkeypatch.setattr(cuda_compile, "nvrtc", lambda major: no_nvrtc())
    found, reason = cuda.discover()
    assert found == [] and "libnvrtc" in reason and "CUDA 13.0 driver" in reason

    monkeypatch.setattr(cuda_compile, "nvrtc", lambda major: object())

    def no_headers():
        raise cuda_compile.NvrtcError("cuda_fp16.h was not found")

    monkeypatch.setattr(cuda_compile, "include_dir", no_headers)
    assert "cuda_fp16.h" in cuda.discover()[1]


def test_nvrtc_newer_than_the_driver_is_passed_over(monkeypatch):
    versions = {"/a/libnvrtc.so.13": (13, 0), "/b/libnvrtc.so.12": (12, 9)}
    monkeypatch.setattr(cuda_compile, "nvrtc_candidates", lambda: list(versions))

    class Rtc:
        def __init__(self, path):
            self.path, self.version = path, versions[path]

    monkeypatch.setattr(cuda_compile, "Nvrtc", Rtc)
    cuda_compile.nvrtc.cache_clear()
    try:
        assert cuda_compile.nvrtc(13).path == "/a/libnvrtc.so.13"
        assert cuda_compile.nvrtc(12).path == "/b/libnvrtc.so.12"
        with pytest.raises(cuda_compile.NvrtcError, match="newer than the driver's CUDA 11"):
            cuda_compile.nvrtc(11)
    finally:
        cuda_compile.nvrtc.cache_clear()


def test_nvrtc_is_looked_for_in_the_wheels_and_the_toolkit(monkeypatch, tmp_path):
    lib = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    inc = tmp_path / "site" / "nvidia" / "cu13" / "include"
    lib.mkdir(parents=True)
    inc.mkdir(parents=True)
    (lib / "libnvrtc.so.13").write_bytes(b"")
    (lib / "libnvrtc-builtins.so.13.0").write_bytes(b"")
    (inc / "cuda_fp16.h").write_text("")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.delenv("GPU_MEAN_NVRTC", raising=False)
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "nothing"))
    assert cuda_compile.nvrtc_candidates()[0] == str(lib / "libnvrtc.so.13")
    assert cuda_compile.include_candidates()[0] == str(inc)


def test_headers_come_from_the_nvrtcs_own_installation(monkeypatch, tmp_path):
    # CUDA 13's wheel headers first on sys.path, NVRTC 12's wheels in another folder: a compile with
    # NVRTC 12 takes CUDA 12's headers (beside its nvidia/cuda_nvrtc/lib), not CUDA 13's
    for root, sub in (("site", "cu13/include"), ("nv12", "cuda_runtime/include"), ("tk", "include")):
        (tmp_path / root / "nvidia" / sub).mkdir(parents=True)
        (tmp_path / root / "nvidia" / sub / "cuda_fp16.h").write_text("")
    (tmp_path / "nv12" / "nvidia" / "cuda_nvrtc" / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "nothing"))
    cuda_compile.include_dir.cache_clear()
    try:
        lib12 = tmp_path / "nv12" / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12"
        assert cuda_compile.include_dir(str(lib12)) == str(tmp_path / "nv12" / "nvidia" / "cuda_runtime" / "include")
        lib13 = tmp_path / "site" / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13"
        assert cuda_compile.include_dir(str(lib13)) == str(tmp_path / "site" / "nvidia" / "cu13" / "include")
        toolkit = tmp_path / "tk" / "nvidia" / "lib64" / "libnvrtc.so.12"      # <toolkit>/lib64 -> <toolkit>/include
        assert cuda_compile.include_dir(str(toolkit)) == str(tmp_path / "tk" / "nvidia" / "include")
        assert cuda_compile.include_dir() == str(tmp_path / "site" / "nvidia" / "cu13" / "include")
    finally:
        cuda_compile.include_dir.cache_clear()


# -- allocation stream (issue 20, point 2) ------------------------------------------------------

class PoolMemory:
    def __init__(self, ptr):
        self.ptr = ptr


class FakePool:
    """CuPy's default memory pool in miniature: an allocation takes a free block from the arena of
    the stream current at that moment; a released block goes back to the arena of the stream it
    was allocated under. Records (pointer, stream) for every allocation."""

    def __init__(self, current, default):
        self.current, self.default = current, default
        self.arenas, self.allocs, self._next = {}, [], 0x10000

    def malloc(self, n):
        stream = self.current[-1] if self.current else self.default
        free = self.arenas.setdefault(stream, [])
        if free:
            ptr = free.pop()
        else:
            ptr, self._next = self._next, self._next + 0x10000
        self.allocs.append((ptr, stream))
        mem = PoolMemory(ptr)
        weakref.finalize(mem, free.append, ptr)
        return mem


def test_the_backend_allocates_under_its_own_stream_so_the_callers_stream_never_reuses_its_memory():
    log, current = [], []
    be = fake_backend(log)
    be.stream = FakeStream(log, current)
    user = FakeStream(log, current)
    pool = FakePool(current, default=None)
    be.cp.cuda.alloc = pool.malloc
    be.cp.cuda.alloc_pinned_memory = lambda n: (pool.allocs.append(("pinned", current[-1] if current else None)),
                                                bytearray(n))[1]
    with user:                                  # the caller's own CuPy stream is current
        buf = be.alloc(1024)
        ours = buf.ptr
        assert pool.allocs[-1] == (ours, be.stream)
        be.staging.slot()
        assert pool.allocs[-1] == ("pinned", be.stream)
        del buf                                 # the library releases its buffer ...
        theirs = pool.malloc(1024)              # ... the caller's next allocation on its stream
        assert theirs.ptr != ours               # does not get memory the backend's kernels may still use
        assert be.alloc(1024).ptr == ours       # the backend's next allocation, ordered on its stream, does
    assert all(s is be.stream for p, s in pool.allocs if p != theirs.ptr)


# -- reused events (issue 20, point 5) ----------------------------------------------------------

def _fake_cupy_for_interop(monkeypatch, user):
    dev_ctx = types.SimpleNamespace(__enter__=lambda: None, __exit__=lambda *a: None)

    class Device:
        def __init__(self, i):
            pass

        def __enter__(self):
            return dev_ctx

        def __exit__(self, *exc):
            pass

    mod = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device, get_current_stream=lambda: user))
    monkeypatch.setitem(sys.modules, "cupy", mod)


def test_stream_ordering_reuses_one_event_without_timing(monkeypatch):
    log = []
    be = fake_backend(log)
    be.stream = FakeStream(log)
    user = FakeStream(log)
    _fake_cupy_for_interop(monkeypatch, user)
    be.info = types.SimpleNamespace(name="fake GPU", index=1, backend="cuda")
    from gpu_mean.bridges.cuda import CudaArrays
    bridge = CudaArrays(be)
    FakeEvent.made.clear()
    for _ in range(5):
        bridge.before()             # entry: our stream waits for the caller's
        bridge.after()              # exit: the caller's stream waits for ours
    assert FakeEvent.made == [{"disable_timing": True}]
    waits = [e for e in log if e[0] == "wait"]
    assert waits == [("wait", be.stream, user), ("wait", user, be.stream)] * 5
    assert _inside(log, ("wait", be.stream, user))     # on the backend's GPU


# -- discovery (issue 20, point 4) --------------------------------------------------------------

BUSY = "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable"


def _two_gpus(monkeypatch, busy=None, ccs=(90, 90)):
    """A CuPy with two GPUs; ``busy`` is in exclusive-process mode and held by another process (its
    context cannot be made). Returns the list of (device, stream) made."""
    made, current = [], [None]

    class Device:
        def __init__(self, i):
            self.id = i

        def __enter__(self):
            current.append(self.id)

        def __exit__(self, *exc):
            current.pop()

    class Stream:
        def __init__(self, non_blocking=False):
            if current[-1] == busy:
                raise CudaRuntimeError(BUSY)
            made.append((current[-1], self))
            self.ptr = id(self)

    def props(i):
        return {"name": f"Fake GPU {i}".encode(), "multiProcessorCount": 132, "major": ccs[i] // 10,
                "minor": ccs[i] % 10, "totalGlobalMem": 80 << 30, "computeMode": 3 if i == busy else 0}

    runtime = types.SimpleNamespace(getDeviceCount=lambda: 2, driverGetVersion=lambda: 13000,
                                    getDeviceProperties=props, CUDARuntimeError=CudaRuntimeError)
    cuda_ns = types.SimpleNamespace(runtime=runtime, driver=types.SimpleNamespace(CUDADriverError=CudaDriverError),
                                    memory=types.SimpleNamespace(OutOfMemoryError=PoolOutOfMemory),
                                    Device=Device, Stream=Stream, Event=FakeEvent)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda_ns, __version__="14.2.0"))
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda_ns)

    class Rtc:
        version, archs = (13, 0), (75, 80, 86, 89, 90)

        def target(self, cc):
            if cc < 75:
                raise cuda_compile.NvrtcError(f"NVRTC 13.0 cannot target compute capability {cc // 10}.{cc % 10}")
            return f"sm_{cc}"

    monkeypatch.setattr(cuda_compile, "nvrtc", lambda major=None: Rtc())
    monkeypatch.setattr(cuda_compile, "include_dir", lambda *a: "/include")
    return made


@pytest.mark.parametrize("case", ["exclusive-process GPU held elsewhere", "GPU NVRTC cannot target"])
def test_a_gpu_that_cannot_be_used_is_listed_as_such_and_auto_takes_the_next(monkeypatch, capsys, case):
    if case.startswith("exclusive"):
        made, why = _two_gpus(monkeypatch, busy=0), "Exclusive_Process"
    else:
        made, why = _two_gpus(monkeypatch, ccs=(50, 90)), "cannot target compute capability 5.0"
    found, reason = cuda.discover()             # lists both, makes no context or stream
    assert reason is None and [b.info.id for b in found] == ["cuda:0", "cuda:1"] and made == []
    monkeypatch.setitem(backends._cache, "cuda", (found, None))
    assert backends.parse_device("auto") == ("cuda", 1)
    assert [d for d, _ in made] == [1]          # the stream of the GPU that is used, on that GPU
    info0 = gm.list_devices()[0]
    assert info0.id == "cuda:0" and why in info0.unavailable
    assert gm.list_devices()[1].unavailable is None
    with pytest.raises(UnsupportedError, match="cuda:0 .*cannot be used"):
        backends.find_backend("cuda", 0)
    assert backends.find_backend("cuda", 1) is found[1]
    assert backends.backend_status()["cuda"] is None
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "cuda:0     Fake GPU 0 | unavailable: " in out and why in out and "cuda:1     Fake GPU 1 | vendor" in out


def test_a_gpu_is_touched_only_when_first_used(monkeypatch):
    made = _two_gpus(monkeypatch)
    found, _ = cuda.discover()
    assert made == []
    assert found[1].stream is made[0][1] and [d for d, _ in made] == [1]
    assert found[1].stream is made[0][1] and len(made) == 1       # made once


# -- an NVIDIA driver without a usable CUDA backend (issue 20, point 1) --------------------------

def fake_nvidia_smi(folder, cuda_version: str, driver: str = "580.65.06", rc: int = 0):
    """An ``nvidia-smi`` in ``folder`` that prints the header of the real one (or fails with ``rc``)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + (f"echo 'NVIDIA-SMI has failed'; exit {rc}\n" if rc else
                   "cat <<'EOF'\n+---------------------------------------------------------------------+\n"
                   f"| NVIDIA-SMI {driver}      Driver Version: {driver}      CUDA Version: {cuda_version}     |\n"
                   "EOF\n"))
    exe.chmod(0o755)
    return folder


@pytest.mark.parametrize("version, extra, other", [("13.0", "cuda13", "cuda12"), ("12.4", "cuda12", "cuda13")])
def test_with_an_nvidia_driver_and_no_cupy_devices_and_demo_say_what_installs_the_backend(
        monkeypatch, tmp_path, capsys, version, extra, other):
    bin_dir = fake_nvidia_smi(tmp_path / "bin", version)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.delitem(backends._cache, "cuda", raising=False)
    found, reason = cuda.discover()
    assert found == [] and f"CUDA {version}" in reason and f"gpu_mean[{extra}]" in reason
    assert f"gpu_mean[{other}]" not in reason and "bash tools/setup.sh" in reason
    assert cli.main(["devices"]) == 0
    assert f"cuda       absent: {reason}" in capsys.readouterr().out

    class Stop(Exception):
        pass

    def stop(*a):
        raise Stop

    monkeypatch.setattr(demo, "_showcase", stop)
    lines = []
    with pytest.raises(Stop):
        demo.main(None, log=lines.append)
    note = [line for line in lines if "NVIDIA GPU is present" in line]
    assert len(note) == 1 and f"gpu_mean[{extra}]" in note[0], lines


def test_without_nvidia_smi_both_extras_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "cupy", None)
    reason = cuda.discover()[1]
    assert "gpu_mean[cuda13]" in reason and "gpu_mean[cuda12]" in reason and "NVIDIA driver is present" not in reason
    fake_nvidia_smi(tmp_path, "", rc=9)           # installed, but no driver loaded
    assert cuda.nvidia_driver() is None
