"""The functional calls on a stand-in CUDA device (tests/fake_cupy.py; no GPU, no CuPy): host arrays
cross the bus once each way through reused pinned staging, in order on the backend's stream with one
host wait; device arrays are looked up once and ordered with events, never a host wait."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from fake_cupy import CaiProducer, DevPtr, DlpackProducer, FakeCupyArray, fake_cuda_backend

import gpu_mean as gm
from gpu_mean.backends import cuda
from gpu_mean.frontends import pool

WAITS = ("sync", "event sync")      # the host waiting for the GPU


@pytest.fixture
def fake(monkeypatch):
    log = []
    be, state = fake_cuda_backend(monkeypatch, log)
    return gm.Device(be), be, state, log


def _pinned_range(state):
    base = ctypes.addressof(ctypes.c_char.from_buffer(state.pinned[0]))
    return base, base + cuda.STAGE_SLOTS * cuda.STAGE_CHUNK


def _work(log):
    return [e for e in log if e[0] in ("h2d", "d2h", "launch", "graph", "sync", "event sync")]


@pytest.mark.parametrize("call", ["mean(a, b)", "reduce_mean(a, [1])"])
def test_host_arrays_cross_the_bus_once_each_way_through_reused_pinned_staging(fake, call):
    dev, be, state, log = fake
    rng = np.random.default_rng(1)
    a, b = rng.random((64, 1000), dtype=np.float32), rng.random((64, 1000), dtype=np.float32)
    inputs, out_bytes = ((a, b), a.nbytes) if call.startswith("mean") else ((a,), 64 * 4)

    def run():
        log.clear()
        if call.startswith("mean"):
            return gm.mean(a, b, device=dev)
        return gm.reduce_mean(a, [1], device=dev)

    allocations = []
    for _ in range(3):
        res = run()
        assert type(res) is np.ndarray and res.dtype == np.float32
        work = _work(log)
        h2d = [e for e in work if e[0] == "h2d"]
        d2h = [e for e in work if e[0] == "d2h"]
        # each input's bytes cross once, from the pinned slots, and the result's once, into them
        assert [e[2] for e in h2d] == [x.nbytes for x in inputs]
        assert sum(e[2] for e in d2h) == out_bytes
        lo, hi = _pinned_range(state)
        assert all(lo <= e[1] < hi for e in h2d + d2h)
        # in order on the backend's stream: uploads, the kernels (a graph from the second run on),
        # the read-back; the host waits only once the read-back is queued, never before the kernels
        runs = [k for k, e in enumerate(work) if e[0] in ("launch", "graph")]
        assert runs and all(e[-1] is be.stream for e in work if e[0] in ("h2d", "d2h", "launch", "graph"))
        assert max(k for k, e in enumerate(work) if e[0] == "h2d") < runs[0]
        assert runs[-1] < min(k for k, e in enumerate(work) if e[0] == "d2h")
        assert not [e for e in work[:runs[-1]] if e[0] in WAITS]
        assert work[-1][0] in WAITS
        assert len(state.pinned) == 1                     # the staging slots are made once and reused
        allocations.append(pool.device_cache(dev).pool.allocations)
    assert allocations[0] == allocations[-1]              # the device buffers too


def _device_input(kind, log):
    mem = DevPtr(bytearray(64 * 1000 * 4), 0, log)
    cls = DlpackProducer if kind == "dlpack" else CaiProducer
    return cls(mem, (64, 1000), np.float32)


def test_kernels_compile_ahead_side_by_side(fake, monkeypatch):
    """Device.compile_ahead (issue 41): the programs of several descriptors compiled at once in
    threads (NVRTC lets go of the GIL), each variant once, and loaded, so that compiling their
    operators afterwards compiles nothing; a descriptor the device refuses is skipped."""
    import threading
    import time

    from gpu_mean.backends import cuda_compile
    dev, be, state, log = fake
    f32, f16 = gm.DataType.FLOAT32, gm.DataType.FLOAT16
    x, x16 = gm.TensorDesc(f32, (64, 1000)), gm.TensorDesc(f16, (64, 1000))
    descs = [gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x, gm.TensorDesc(f32, (64, 1)), (1,)),
             gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x16, gm.TensorDesc(f16, (64, 1)), (1,)),
             gm.ElementWiseMeanDesc(x, x, x)]
    bad = gm.ElementWiseMeanDesc(x, x16, x)                    # mixed types: refused, skipped
    running, most, compiled = [0], [0], []
    lock = threading.Lock()

    def image(filename, macros, *a, **k):       # a stand-in for NVRTC that takes a while
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            compiled.append(filename)
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return b"image"
    monkeypatch.setattr(cuda_compile, "image", image)
    assert dev.compile_ahead(descs + descs[:1] + [bad], workers=3) == 3
    assert sorted(compiled) == ["elementwise_gpu.cl", "reduce_gpu.cl", "reduce_gpu.cl"]
    assert most[0] > 1, "the compiles ran one after another"
    compiled.clear()
    for d in descs:
        dev.compile_operator(dev.create_operator(d))
    assert compiled == []                                     # built ahead: nothing compiled again
    assert dev.compile_ahead(descs) == 0
    # a variant the GPU cannot load is left for its operator's own compile to report
    x2 = gm.TensorDesc(f32, (64, 7))
    d2 = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x2, gm.TensorDesc(f32, (64, 1)), (1,))

    def refuse(image, filename, macros):
        raise gm.KernelBuildError("cannot load")
    monkeypatch.setattr(be, "_load", refuse)
    assert dev.compile_ahead([d2]) == 0
    with pytest.raises(gm.KernelBuildError):
        dev.compile_operator(dev.create_operator(d2))


def test_each_operand_is_resolved_by_one_bridge_call(fake, monkeypatch):
    """The functional call's first (full) path asks the bridge once per operand for all it needs
    (``ArrayBridge.operand``: view, shape, dtype, strides); nothing else asks for a view or a dtype,
    and nothing packs a dense array. A repeated call on CuPy arrays reads its signature from the
    arrays themselves (frontends/repeat.py: ``_fast``) and asks the bridge for none of these."""
    dev, be, state, log = fake
    calls = []
    cls = type(be.arrays)
    def spy(name):
        orig = getattr(cls, name)

        def f(self, *a, **k):
            calls.append(name)
            return orig(self, *a, **k)
        return f
    for name in ("operand", "view", "dtype_of", "packed"):
        monkeypatch.setattr(cls, name, spy(name))
    a = FakeCupyArray(DevPtr(bytearray(64 * 100 * 4), 0, log), (64, 100), np.float32)
    b = FakeCupyArray(DevPtr(bytearray(64 * 100 * 4), 0, log), (64, 100), np.float32)
    for first in (True, False, False):
        calls.clear()
        gm.mean(a, b, device=dev)
        if first:
            assert calls.count("operand") == 2, calls
            assert calls.count("view") <= 2 and calls.count("dtype_of") == 2 and "packed" not in calls, calls
        else:
            assert calls == []


@pytest.mark.parametrize("kind", ["cuda array interface", "dlpack"])
def test_a_device_array_is_looked_up_once_and_ordered_without_a_host_wait(fake, kind):
    dev, be, state, log = fake
    x = _device_input(kind, log)
    for _ in range(2):
        log.clear()
        before = dict(state.counts), getattr(x, "device_queries", 0)
        res = gm.reduce_mean(x, [1], device=dev)
        assert isinstance(res, FakeCupyArray) and res.shape == (64, 1)
        if kind == "dlpack":
            assert x.device_queries - before[1] == 1     # __dlpack_device__ asked once per call
            assert x.capsule_streams[-1] == be.stream.ptr   # the capsule is made for the backend's stream
        else:
            assert state.counts["pointerGetAttributes"] - before[0]["pointerGetAttributes"] == 1
        work = [e for e in log if e[0] in ("launch", "graph", "wait", "h2d", "d2h") + WAITS]
        assert not [e for e in work if e[0] in WAITS + ("h2d", "d2h")]   # no copy, no host wait
        launch = next(k for k, e in enumerate(work) if e[0] in ("launch", "graph"))
        assert work[launch - 1] == ("wait", be.stream, state.user)        # ours after the caller's work
        assert work[-1] == ("wait", state.user, be.stream)                # the caller's after ours


def test_a_fake_cupy_dask_float_chunk_takes_exact_pairs_on_its_gpu(fake):
    """gpu_mean.dask's chunk step on a float CuPy chunk (issue 43): the GPU shape's gm_dd_partials
    reads the chunk where it lies (no copy to the GPU), ordered after the caller's stream, and only
    the pairs and flags come back (16 bytes and a flag per segment and column); the partial is
    exact_dd, marked CuPy, so the mean goes back to the GPU."""
    pytest.importorskip("dask.array")
    from gpu_mean.dask import partials
    dev, be, state, log = fake
    from gpu_mean.descriptors.types import bfloat16_dtype
    for dtype, shape, axes in ((np.float32, (8, 300), (1,)), (np.float16, (300, 24), (0,)),
                               (bfloat16_dtype(), (6, 40), (1,))):
        block = FakeCupyArray(DevPtr(bytearray(300 * 24 * 4), 0, log), shape, dtype)
        log.clear()
        before = partials.stats["dd_chunks"]
        p = partials.chunk_sum(block, axes, device=dev)
        assert p.exact_dd and p.cupy and p.sparse is None and partials.stats["dd_chunks"] == before + 1
        kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
        assert isinstance(p.hi, np.ndarray) and p.hi.shape == p.lo.shape == kept and p.hi.dtype == np.float64
        work = [e for e in log if e[0] in ("launch", "wait", "h2d", "d2h")]
        assert [e[1] for e in work if e[0] == "launch"] == ["gm_dd_partials"]
        assert not [e for e in work if e[0] == "h2d"]                  # the chunk is read in place
        launch = next(k for k, e in enumerate(work) if e[0] == "launch")
        assert ("wait", be.stream, state.user) in work[:launch]          # after the caller's writes
        assert [e for e in work[launch:] if e[0] == "d2h"]                # the pairs and flags come back
        mean = partials.aggregate_mean([p, p], axes, keepdims=True, dtype=dtype)
        assert mean.shape == kept and mean.dtype == dtype
        # back on the GPU; a BFLOAT16 mean stays on the host, as the FLOAT64 partials' did
        assert isinstance(mean, FakeCupyArray) == (dtype != bfloat16_dtype())


def test_a_fake_cupy_dask_chunk_on_another_gpu_is_refused_before_a_launch(fake):
    """A CuPy chunk that lives on another GPU than the worker's device: no kernel reads it (its
    pointer means nothing here); the chunk step's error names both devices."""
    pytest.importorskip("dask.array")
    from gpu_mean.dask import partials
    dev, be, state, log = fake
    block = FakeCupyArray(DevPtr(bytearray(8 * 300 * 4), 0, log), (8, 300), np.float32, device=2)
    log.clear()
    with pytest.raises(gm.InvalidArgumentError, match="cuda:2"):
        partials.chunk_sum(block, (1,), device=dev)
    assert not [e for e in log if e[0] == "launch"]


def test_a_fake_cupy_dask_chunk_is_summed_in_place_on_its_gpu(fake):
    """gpu_mean.dask's chunk step on an integer CuPy chunk: bound where it lies, its partial sum a
    CuPy array (INT64), ordered with events on the caller's stream; no copy and no host wait."""
    pytest.importorskip("dask.array")
    from gpu_mean.dask import partials
    dev, be, state, log = fake
    block = FakeCupyArray(DevPtr(bytearray(8 * 300 * 4), 0, log), (8, 300), np.int32)
    log.clear()
    p = partials.chunk_sum(block, (1,), device=dev)
    assert isinstance(p.hi, FakeCupyArray) and p.hi.shape == (8, 1) and p.hi.dtype == np.int64
    assert p.cupy and p.count == 300
    work = [e for e in log if e[0] in ("launch", "graph", "wait", "h2d", "d2h") + WAITS]
    assert not [e for e in work if e[0] in WAITS + ("h2d", "d2h")]
    assert work[0] == ("wait", be.stream, state.user) and work[-1] == ("wait", state.user, be.stream)


# -- bfloat16 on the CUDA device -----------------------------------------------------------------------

class FakeTorchTensor:
    """A PyTorch-style CUDA tensor: a bfloat16 one exports a DLPack capsule that a CuPy without
    bfloat16 refuses (the fake CuPy cannot make a dtype of it), and ``view(int16)`` reinterprets the
    same memory; ``faketorch.from_dlpack`` makes one from a CuPy array."""

    def __init__(self, data, shape, name, index=1):
        self.data, self.shape, self.name, self.index = data, tuple(shape), name, index

    @property
    def dtype(self):
        return np.dtype(np.int16) if self.name == "int16" else f"faketorch.{self.name}"

    def __dlpack_device__(self):
        return (2, self.index)

    def __dlpack__(self, stream=None):
        return self

    def view(self, name):
        return FakeTorchTensor(self.data, self.shape, name, self.index)


@pytest.fixture
def faketorch(monkeypatch):
    import sys
    import types
    mod = types.ModuleType("faketorch")
    mod.int16, mod.bfloat16 = "int16", "bfloat16"

    def from_dlpack(a):
        assert np.dtype(a.dtype) == np.int16          # the bits, as every CuPy exports them
        return FakeTorchTensor(a.data, a.shape, "int16", a.device.id)
    mod.from_dlpack = from_dlpack
    monkeypatch.setattr(FakeTorchTensor, "__module__", "faketorch")
    monkeypatch.setitem(sys.modules, "faketorch", mod)
    return mod


@pytest.mark.parametrize("cupy_bf16", [True, False], ids=["cupy with bfloat16", "cupy without bfloat16"])
def test_torch_bfloat16_cuda_tensors_in_place(fake, faketorch, cupy_bf16):
    """A PyTorch bfloat16 CUDA tensor is read in place as its int16 bits (the type stays BFLOAT16:
    INT16 would be refused), the result is allocated by CuPy (as int16 bits where this CuPy has no
    bfloat16) and handed back as a PyTorch bfloat16 tensor; no copy, no host wait."""
    import sys
    dev, be, state, log = fake
    sys.modules["cupy"].bfloat16_arrays = cupy_bf16
    x = FakeTorchTensor(DevPtr(bytearray(64 * 1000 * 2), 0, log), (64, 1000), "bfloat16")
    for call in (lambda: gm.reduce_mean(x, [1], device=dev), lambda: gm.mean(x, x, x, device=dev),
                 lambda: gm.mean(x, x, device=dev)):
        log.clear()
        r = call()
        assert isinstance(r, FakeTorchTensor) and r.name == "bfloat16" and r.index == 1
        work = [e for e in log if e[0] in ("launch", "graph", "h2d", "d2h") + WAITS]
        assert work and not [e for e in work if e[0] in WAITS + ("h2d", "d2h")]
    assert r.shape == (64, 1000)
    with pytest.raises(gm.UnsupportedTypeError, match="data type int16 is not supported"):
        gm.reduce_mean(x.view("int16"), [1], device=dev)
    binding, desc = gm.Buffer.wrap_array(dev, x)         # the DirectML-shaped path: a BFLOAT16 tensor too
    assert desc.data_type == gm.DataType.BFLOAT16 and desc.sizes == (64, 1000)
    assert binding.buffer.size >= 64 * 1000 * 2


def test_cupy_bfloat16_arrays_in_place(fake):
    """A CuPy with ml_dtypes' bfloat16 (cupy/cupy#9494) has bfloat16 arrays: taken in place, the
    result a CuPy bfloat16 array."""
    import ml_dtypes
    dev, be, state, log = fake
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = FakeCupyArray(DevPtr(bytearray(8 * 300 * 2), 0, log), (8, 300), bf16)
    log.clear()
    r = gm.reduce_mean(x, [1], device=dev)
    assert isinstance(r, FakeCupyArray) and r.dtype == bf16 and r.shape == (8, 1)
    m = gm.mean(x, x, device=dev)
    assert isinstance(m, FakeCupyArray) and m.dtype == bf16 and m.shape == (8, 300)
    assert not [e for e in log if e[0] in WAITS + ("h2d", "d2h")]


def test_a_bfloat16_producer_without_an_int16_view_is_refused(fake, faketorch):
    dev, be, state, log = fake

    class NoView(FakeTorchTensor):
        view = None
    NoView.__module__ = "faketorch"
    x = NoView(DevPtr(bytearray(64), 0, log), (4, 8), "bfloat16")
    with pytest.raises(gm.UnsupportedTypeError, match=r"ReduceMean input 0: the bfloat16 faketorch\..*NoView "
                                                      r"has no view as int16"):
        gm.reduce_mean(x, [1], device=dev)
