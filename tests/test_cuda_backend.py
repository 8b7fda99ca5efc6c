"""The CUDA backend's host side against a stand-in for CuPy (no GPU, no CuPy needed): which GPU and
stream each call uses, staged copies, capture errors, error classification and discovery messages."""
from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest

from gpu_mean.backends import cuda, cuda_compile
from gpu_mean.backends.kernels import ProgramCache
from gpu_mean.errors import KernelBuildError


class CudaRuntimeError(RuntimeError):
    pass


class CudaDriverError(RuntimeError):
    pass


class PoolOutOfMemory(MemoryError):
    pass


class FakeDevice:
    """A GPU context: records which device is current."""

    def __init__(self, log, index):
        self.log, self.index = log, index

    def __enter__(self):
        self.log.append(("enter", self.index))

    def __exit__(self, *exc):
        self.log.append(("exit", self.index))


class FakeStream:
    def __init__(self, log):
        self.log = log

    def synchronize(self):
        self.log.append(("sync", self))

    def begin_capture(self):
        self.log.append(("begin_capture", self))

    def end_capture(self):
        raise CudaRuntimeError("cudaErrorStreamCaptureInvalidated: operation failed due to a previous error")


class DevPtr:
    """Device memory: a bytearray; copies run at once and record their stream and host address."""

    def __init__(self, mem, off, log):
        self.mem, self.off, self.log = mem, off, log

    def __add__(self, n):
        return DevPtr(self.mem, self.off + int(n), self.log)

    def copy_from_host_async(self, src, n, stream):
        self.log.append(("h2d", src, n, stream))
        ctypes.memmove((ctypes.c_char * n).from_buffer(self.mem, self.off), src, n)

    def copy_to_host_async(self, dst, n, stream):
        self.log.append(("d2h", dst, n, stream))
        ctypes.memmove(dst, (ctypes.c_char * n).from_buffer(self.mem, self.off), n)


class FakeEvent:
    def record(self, stream):
        pass

    def synchronize(self):
        pass


def fake_backend(log, index=1):
    be = object.__new__(cuda.CudaBackend)
    pinned = []

    def alloc_pinned_memory(n):
        buf = bytearray(n)
        pinned.append(buf)
        return buf

    class Module:
        def load(self, image):
            log.append(("load", image))

        def get_function(self, name):
            log.append(("get_function", name))
            return name

    be.cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        alloc_pinned_memory=alloc_pinned_memory, Event=FakeEvent, function=types.SimpleNamespace(Module=Module),
        memory=types.SimpleNamespace(OutOfMemoryError=PoolOutOfMemory)))
    be.index, be.cc, be.sms, be.driver_major = index, 90, 132, 13
    be.dev = FakeDevice(log, index)
    be.stream = FakeStream(log)
    be.native_errors = (CudaRuntimeError, CudaDriverError, PoolOutOfMemory)
    be.info = types.SimpleNamespace(name="fake GPU")
    be._modules, be._stage, be.pinned = ProgramCache(), None, pinned
    return be


def _inside(log, event):
    """Whether ``event`` happened with a device context entered."""
    depth = 0
    for e in log:
        if e[0] == "enter":
            depth += 1
        elif e[0] == "exit":
            depth -= 1
        elif e == event:
            return depth > 0
    raise AssertionError(f"{event} did not happen")


def test_kernels_compile_and_load_on_the_backends_gpu(monkeypatch):
    log = []
    be = fake_backend(log)
    built = []

    def build(filename, macros, cc, max_major):
        built.append((filename, cc, max_major))
        log.append(("build",))
        return cuda_compile.CompiledKernel("ptx", b"cubin", "")

    monkeypatch.setattr(cuda_compile, "build", build)
    assert be.function("reduce.cu", {"A": 1}, "gm_reduce_row") == "gm_reduce_row"
    assert built == [("reduce.cu", 90, 13)]       # the backend's own NVRTC path, not CuPy's RawModule
    for event in (("build",), ("load", b"cubin"), ("get_function", "gm_reduce_row")):
        assert _inside(log, event), event           # on cuda:1, not on whatever GPU is current
    be.function("reduce.cu", {"A": 1}, "gm_reduce_col")
    assert len(built) == 1                        # one module per macro set


def test_nvrtc_errors_are_build_errors(monkeypatch):
    be = fake_backend([])

    def build(*a):
        raise cuda_compile.NvrtcError("NVRTC_ERROR_COMPILATION\nkernel.cu(3): error: identifier undefined")

    monkeypatch.setattr(cuda_compile, "build", build)
    with pytest.raises(KernelBuildError, match="identifier undefined"):
        be.function("reduce.cu", {}, "gm_reduce_row")


def test_big_copies_go_through_pinned_staging_on_the_backend_stream():
    log = []
    be = fake_backend(log)
    n = 2 * cuda.STAGE_CHUNK + 12345
    dev = bytearray(n + 64)
    data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    be.write(DevPtr(dev, 0, log), 64, data)
    assert bytes(dev[64:]) == data.tobytes()
    copies = [e for e in log if e[0] == "h2d"]
    assert len(copies) == 3 and all(c[3] is be.stream for c in copies)
    stage = [ctypes.addressof(ctypes.c_char.from_buffer(be.pinned[0], i * cuda.STAGE_CHUNK)) for i in (0, 1)]
    assert [c[1] for c in copies] == [stage[0], stage[1], stage[0]]      # pinned halves, alternating
    log.clear()
    out = be.read(DevPtr(dev, 0, log), 64, n)
    assert np.array_equal(out, data) and len(be.pinned) == 1
    assert all(e[3] is be.stream for e in log if e[0] == "d2h") and ("sync", be.stream) in log


def test_small_copies_skip_staging_and_use_the_backend_stream():
    log = []
    be = fake_backend(log)
    dev = bytearray(256)
    be.write(DevPtr(dev, 0, log), 0, np.arange(100, dtype=np.uint8))
    assert np.array_equal(be.read(DevPtr(dev, 0, log), 0, 100), np.arange(100, dtype=np.uint8))
    assert not be.pinned
    assert all(e[3] is be.stream for e in log if e[0] in ("h2d", "d2h"))
    assert _inside(log, ("sync", be.stream))


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


def test_discover_names_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    found, reason = cuda.discover()
    assert found == [] and "gpu_mean[cuda13]" in reason and "gpu_mean[cuda12]" in reason

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
