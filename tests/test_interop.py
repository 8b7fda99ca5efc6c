"""Arrays in and out as callers hold them, on every device: the caller's type back, strided views
bound in place (proven by memory identity and allocation counts), device buffers seen as arrays
and arrays bound as buffers, Buffer.write_tensor, and the input rules."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean.frontends import functional, pool
from gpu_mean.runtime import execution

X = np.arange(48, dtype=np.float32).reshape(6, 8)
# the CPU device binds host memory in place from CPU_IN_PLACE_MIN_BYTES on, and copies below
BIG = (np.arange(256 * 512, dtype=np.float32) % 1024).reshape(256, 512)


def native(dev, a):
    """``a`` as the device's own array type: numpy (CPU), pyopencl (OpenCL), CuPy (CUDA)."""
    if dev.info.backend == "opencl":
        import pyopencl.array as cla
        return cla.to_device(dev.cl_queue, np.ascontiguousarray(a))
    if dev.info.backend == "cuda":
        import cupy
        with cupy.cuda.Device(dev.info.index):
            return cupy.asarray(a)
    return np.array(a)


def host(r):
    if hasattr(r, "get") and not isinstance(r, np.ndarray):
        return r.get()
    return np.asarray(r)


def native_type(dev):
    return type(native(dev, np.zeros(1, np.float32)))


class Spy:
    """Counts the calls of one method while it runs the real thing."""

    def __init__(self, monkeypatch, obj, name):
        self.calls = []
        real = getattr(obj, name)

        def spy(*a, **k):
            self.calls.append((a, k))
            return real(*a, **k)
        monkeypatch.setattr(obj, name, spy)


# --- same type out as in ------------------------------------------------------------------------

def test_numpy_in_numpy_out(device):
    r = gm.reduce_mean(X, [1], keepdims=False, device=device)
    assert type(r) is np.ndarray and r.dtype == np.float32
    np.testing.assert_array_equal(r, X.mean(1))


def test_cpu_dlpack_producer_comes_back_as_its_own_type(device):
    # array-api-strict stands in for PyTorch CPU in CI: the same DLPack path, a light wheel
    xp = pytest.importorskip("array_api_strict")
    a = xp.asarray(X)
    r = gm.reduce_mean(a, 0, device=device)
    assert type(r) is type(a)
    np.testing.assert_array_equal(np.from_dlpack(r), X.mean(0, keepdims=True))
    m = gm.mean(a, a, device=device)
    assert type(m) is type(a)
    np.testing.assert_array_equal(np.from_dlpack(m), X)


def test_torch_cpu_in_torch_cpu_out(device):
    torch = pytest.importorskip("torch")
    t = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    r = gm.reduce_mean(t, [1], device=device)
    assert isinstance(r, torch.Tensor) and r.device.type == "cpu"
    np.testing.assert_array_equal(r.numpy(), X.mean(1, keepdims=True))
    r = gm.reduce_mean(t.T, [1], device=device)      # a transposed view
    np.testing.assert_array_equal(r.numpy(), X.T.mean(1, keepdims=True))


def test_native_device_arrays_come_back_native_and_stay_on_the_device(device, monkeypatch):
    if getattr(device.backend, "checked", False):
        pytest.skip("a checked device waits for each launch and reads its status back, by design")

    def no_host_copy(*a, **k):
        raise AssertionError("a device array went through the host, or the host waited")
    a = BIG if device.info.backend == "cpu" else X      # the CPU device binds big host arrays in place
    monkeypatch.setattr(device.backend, "write", no_host_copy)
    monkeypatch.setattr(device.backend, "read", no_host_copy)
    monkeypatch.setattr(device.backend, "finish", no_host_copy)    # stream-ordered: the host never waits
    x = native(device, a)
    r = gm.reduce_mean(x, [0], keepdims=False, device=device)
    m = gm.mean(x, native(device, a[0]), device=device)
    monkeypatch.undo()
    assert type(r) is native_type(device) and type(m) is native_type(device)
    np.testing.assert_array_equal(host(r), a.mean(0))
    np.testing.assert_array_equal(host(m), (a + a[0]) / 2)


def test_torch_cuda_in_torch_cuda_out(device):
    if device.info.backend != "cuda":
        pytest.skip("PyTorch CUDA tensors run on a CUDA device")
    torch = pytest.importorskip("torch")
    t = torch.arange(48, dtype=torch.float32, device=f"cuda:{device.info.index}").reshape(6, 8)
    r = gm.reduce_mean(t[:, ::2], [1], device=device)
    assert isinstance(r, torch.Tensor) and r.device == t.device
    np.testing.assert_array_equal(r.cpu().numpy(), X[:, ::2].mean(1, keepdims=True))
    m = gm.mean(t, t)
    assert isinstance(m, torch.Tensor) and m.device == t.device


def test_cuda_array_interface_only_producer(device):
    if device.info.backend != "cuda":
        pytest.skip("CUDA Array Interface objects run on a CUDA device")
    cp = pytest.importorskip("cupy")

    class CaiOnly:      # what Numba and older libraries hand over: no __dlpack__
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = a.__cuda_array_interface__
    x = native(device, X)
    r = gm.reduce_mean(CaiOnly(x), [1], device=device)
    assert isinstance(r, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(r), X.mean(1, keepdims=True))


def test_cuda_stream_order_without_host_sync(device):
    if device.info.backend != "cuda":
        pytest.skip("CUDA streams")
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(device.info.index):
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            x = cp.zeros((4096, 4096), cp.float32)
            for _ in range(20):       # pending writes on the caller's stream when gm is called
                x += 1
            r = gm.reduce_mean(x, device=device)
            got = float(r.ravel()[0])   # read on the caller's stream: ordered after our kernels
    assert got == 20.0


class FakeCudaArray:
    """A DLPack producer that says it lives on a GPU; never read (the device check comes first)."""

    def __init__(self, ordinal):
        self.ordinal = ordinal

    def __dlpack_device__(self):
        return (2, self.ordinal)

    def __dlpack__(self, stream=None):
        raise AssertionError("read before the device check")


def test_array_on_another_device_is_refused(device):
    if device.info.backend == "cuda":
        other = device.info.index + 1
        with pytest.raises(gm.InvalidArgumentError, match=f"cuda:{other}"):
            gm.reduce_mean(FakeCudaArray(other), device=device)
    else:
        with pytest.raises(gm.InvalidArgumentError, match="cuda:0.*device is"):
            gm.reduce_mean(FakeCudaArray(0), device=device)


def test_mixed_libraries_name_the_types(device):
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="array_api_strict.Array, numpy.ndarray"):
        gm.mean(X, xp.asarray(X), device=device)


# --- strided views without copies ---------------------------------------------------------------

VIEWS = {
    "transpose": lambda a: a.T,
    "step": lambda a: a[:, ::2],
    "slice": lambda a: a[1:, 3:],
    "broadcast": lambda a: _broadcast(a[:1], (4, a.shape[1])),
}


def _broadcast(a, shape):
    if isinstance(a, np.ndarray):
        return np.broadcast_to(a, shape)
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy.broadcast_to(a, shape)
    pytest.skip(f"{type(a).__name__} has no broadcast views")


@pytest.mark.parametrize("size", ["small", "big"])
@pytest.mark.parametrize("source", ["native", "numpy"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_strided_views_are_bound_in_place(device, monkeypatch, view, source, size):
    x = X if size == "small" else BIG
    src = native(device, x) if source == "native" else x.copy()
    v = VIEWS[view](src)
    want_r, want_m = VIEWS[view](x).mean(0, dtype=np.float64).astype(np.float32), VIEWS[view](x) * 1.0
    gm.reduce_mean(v, [0], keepdims=False, device=device)     # compile and cache the launch
    gm.mean(v, v, device=device)
    allocs = Spy(monkeypatch, device, "create_buffer")
    runs = Spy(monkeypatch, execution.Executor, "run_bound")     # every launch over bound memory
    uploads = Spy(monkeypatch, pool.Launch, "run_host")
    computes = Spy(monkeypatch, execution.Executor, "compute")   # the CPU device's computations
    r = gm.reduce_mean(v, [0], keepdims=False, device=device)
    m = gm.mean(v, v, device=device)
    assert allocs.calls == []       # nothing beyond the output, which the array library allocates
    np.testing.assert_array_equal(host(r), want_r)
    np.testing.assert_array_equal(host(m), want_m)
    if device.info.backend == "cpu":
        # numpy computes from the caller's memory where it lies, at any size: no copy, no launch
        assert len(computes.calls) == 2 and runs.calls == uploads.calls == []
        for (_, _, arrays), _ in computes.calls:
            assert all(np.shares_memory(s, src) for s in arrays)
        return
    assert computes.calls == []
    if must_bind_in_place(device, source, v):
        assert uploads.calls == [], "a host array the device must bind in place was copied"
    if uploads.calls:               # host arrays for a GPU: the uploaded bytes are the caller's own
        for (_, spans), _ in uploads.calls:
            assert all(np.shares_memory(s, src) for s in spans)
        return
    assert runs.calls
    for (_, _, ins, _, _), _ in runs.calls:
        for handle, _ in ins:
            assert _same_memory(device, handle, src)


def must_bind_in_place(dev, source: str, v) -> bool:
    """The tests' own statement of where the functional calls bind an array without copying it, on
    a device with kernels (the cpu device computes from the caller's memory at any size): a device
    array always; a numpy array on an OpenCL device that computes in host memory (PoCL) once its
    span reaches 128 KiB, below which a copy costs less than wrapping it; never a numpy array for a
    GPU with memory of its own."""
    if source == "native" and dev.info.backend != "cpu":
        return True
    span = sum((n - 1) * st for n, st in zip(v.shape, v.strides)) + v.itemsize
    host_memory = dev.info.backend == "cpu" or (dev.info.backend == "opencl" and dev.info.device_type == "CPU")
    return host_memory and span >= 128 << 10


def _same_memory(dev, nat, src):
    """Whether the native handle a launch was given is ``src``'s memory."""
    if dev.info.backend == "cpu":
        return np.shares_memory(nat, src)
    if dev.info.backend == "opencl":
        if isinstance(src, np.ndarray):     # a numpy array bound in place: a buffer over its memory
            return nat.hostbuf is not None and np.shares_memory(nat.hostbuf, src)
        return nat.int_ptr == src.base_data.int_ptr
    return src.data.ptr <= nat.ptr < src.data.ptr + src.nbytes


def test_negative_strides_are_copied(device, monkeypatch):
    src = native(device, X)
    if not isinstance(src, np.ndarray) and device.info.backend == "opencl":
        pytest.skip("pyopencl arrays take no negative steps")
    v = src[::-1]
    runs = Spy(monkeypatch, execution.Executor, "run_bound")
    computes = Spy(monkeypatch, execution.Executor, "compute")
    r = gm.reduce_mean(v, [1], keepdims=False, device=device)
    np.testing.assert_array_equal(host(r), X[::-1].mean(1))
    assert runs.calls or computes.calls
    for (_, _, ins, _, _), _ in runs.calls:
        assert not _same_memory(device, ins[0][0], src)
    for (_, _, arrays), _ in computes.calls:
        assert not any(np.shares_memory(s, src) for s in arrays)


@pytest.mark.parametrize("rows", [4, 1024], ids=["small", "large"])
def test_host_arrays_at_any_address_are_bound_in_place_safely(device, rows):
    """numpy arrays one element off a 16-byte boundary, bound where they lie (USE_HOST_PTR on an
    OpenCL device working in host memory): the kernels' vector loads are chosen by the host address
    itself (``OpenCLBackend.address``), so the answers are those of aligned copies. The GPU-shaped
    element-wise kernel once took its vector variant for such arrays and crashed the process."""
    raw = np.random.default_rng(rows).standard_normal(rows * 256 + 1).astype(np.float32)
    x, y = raw[1:].reshape(rows, 256), raw[:-1].reshape(rows, 256)
    assert x.ctypes.data % 16 and y.ctypes.data % 16 == 0
    for _ in range(2):      # the first call, then the repeated one
        np.testing.assert_array_equal(gm.mean(x, y, device=device), gm.mean(x.copy(), y, device=device))
        np.testing.assert_array_equal(gm.mean(y, x, device=device), gm.mean(y, x.copy(), device=device))
        for axes in ([1], [0]):
            np.testing.assert_array_equal(gm.reduce_mean(x, axes, device=device),
                                          gm.reduce_mean(x.copy(), axes, device=device))


def test_host_loop_allocates_nothing_after_the_first_call(device, monkeypatch):
    rng = np.random.default_rng(3)
    xs = [rng.random((5, 7)).astype(np.float32) for _ in range(4)]
    gm.reduce_mean(xs[0], [1], device=device)
    allocs = Spy(monkeypatch, device, "create_buffer")
    compiles = Spy(monkeypatch, device, "compile_operator")
    waits = Spy(monkeypatch, device.backend, "finish")
    reads = Spy(monkeypatch, device.backend, "read")
    for x in xs:
        np.testing.assert_allclose(gm.reduce_mean(x, [1], device=device), x.mean(1, keepdims=True), rtol=1e-6)
    assert allocs.calls == [] and compiles.calls == []
    # one host wait a call: the blocking read of a copied result, or the queue's finish where the
    # kernel wrote into the result in place (an OpenCL device working in host memory)
    assert len(waits.calls) + len(reads.calls) <= len(xs)


# --- device buffers as arrays, arrays as buffers ------------------------------------------------

def test_write_tensor_checks_type_and_shape(device):
    d = gm.TensorDesc(gm.DataType.FLOAT32, (2, 3))
    a = device.create_buffer(24)
    with pytest.raises(gm.InvalidArgumentError, match="float64.*FLOAT32"):
        a.write_tensor(d, np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).reshape(2, 3))
    with pytest.raises(gm.InvalidArgumentError, match=r"\(3,\).*\(2, 3\)"):
        a.write_tensor(d, np.ones(3, np.float32))
    a.write_tensor(d, X[:2, :3])
    np.testing.assert_array_equal(a.read_tensor(d), X[:2, :3])


def test_write_tensor_honours_strides(device):
    d = gm.TensorDesc(gm.DataType.FLOAT32, (2, 3), (1, 4))        # column-major with a padded column
    b = device.create_buffer(d.total_size_in_bytes)
    b.write(np.full(d.total_size_in_bytes // 4, -1, np.float32))
    b.write_tensor(d, X[:2, :3])
    raw = b.read(np.float32)
    np.testing.assert_array_equal(raw, [0, 8, -1, -1, 1, 9, -1, -1, 2, 10])
    np.testing.assert_array_equal(b.read_tensor(d), X[:2, :3])
    with pytest.raises(gm.InvalidArgumentError, match="read but not written"):
        b.write_tensor(gm.TensorDesc(gm.DataType.FLOAT32, (2, 3), (0, 1)), X[:2, :3])


def test_buffer_as_tensor_in_place(device):
    d = gm.TensorDesc(gm.DataType.FLOAT32, (3, 4), (1, 3))
    b = device.create_buffer(d.total_size_in_bytes)
    b.write_tensor(d, X[:3, :4])
    v = b.as_tensor(d)
    del b                                               # the view holds the buffer
    if device.info.backend == "cuda":
        cp = pytest.importorskip("cupy")
        np.testing.assert_array_equal(cp.asnumpy(cp.asarray(v)), X[:3, :4])          # CUDA Array Interface
        np.testing.assert_array_equal(cp.asnumpy(cp.from_dlpack(v)), X[:3, :4])      # DLPack
        torch = pytest.importorskip("torch")
        np.testing.assert_array_equal(torch.from_dlpack(v).cpu().numpy(), X[:3, :4])
        return
    assert type(v) is native_type(device)
    np.testing.assert_array_equal(host(v), X[:3, :4])
    if device.info.backend == "cpu":
        v[0, 0] = 42                                    # a view, not a copy
        assert v.base is not None and v[0, 0] == 42


def test_wrap_array_binds_caller_memory(device):
    x, y = native(device, X), native(device, np.zeros((6, 8), np.float32))
    (xb, xd), (yb, yd) = gm.Buffer.wrap_array(device, x), gm.Buffer.wrap_array(device, y)
    cop = device.compile_operator(device.create_operator(gm.ElementWiseMeanDesc(xd, xd, yd)))
    cop.execute(inputs=[xb, xb], outputs=[yb])
    np.testing.assert_array_equal(host(y), X)           # written into the caller's own array
    with pytest.raises(gm.InvalidArgumentError):
        gm.Buffer.wrap_array(device, [1.0, 2.0])


def test_device_exposes_native_handles(device):
    if device.info.backend == "opencl":
        import pyopencl as cl
        assert isinstance(device.cl_context, cl.Context) and isinstance(device.cl_queue, cl.CommandQueue)
    else:
        with pytest.raises(gm.UnsupportedError, match="not an OpenCL device"):
            _ = device.cl_queue


# --- inputs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad, inferred", [([True, False], "bool"), (1j, "complex128"), ([[1 + 2j]], "complex128")])
def test_python_objects_say_what_was_inferred(device, bad, inferred):
    with pytest.raises(TypeError, match=f"Python .*infer {inferred}.*np.asarray"):
        gm.mean(bad, bad, device=device)


def test_unsupported_dtype_is_a_type_error(device):
    with pytest.raises(TypeError, match=r"int16 is not supported.*astype\(np.int32\)"):
        gm.reduce_mean(np.arange(4, dtype=np.int16), device=device)
    with pytest.raises(TypeError, match=r"bool is not supported.*astype\(np.uint32\)"):
        gm.reduce_mean(np.ones(4, bool), device=device)


@pytest.mark.parametrize("axes", ["1", [1.0], True, [np.float32(0)], np.array([[0]])])
def test_axes_must_be_integers(device, axes):
    with pytest.raises(gm.InvalidArgumentError, match="axes must be"):
        gm.reduce_mean(X, axes, device=device)


def test_integer_axes_of_any_kind(device):
    for axes in (1, [np.int64(1)], (1,), np.array([1])):
        np.testing.assert_array_equal(gm.reduce_mean(X, axes, device=device), X.mean(1, keepdims=True))


def test_public_signatures_show_only_public_parameters():
    assert list(inspect.signature(gm.reduce_mean).parameters) == ["x", "axes", "keepdims", "noop_with_empty_axes",
                                                                  "device", "axis"]
    assert list(inspect.signature(gm.mean).parameters) == ["arrays", "device"]
    doc = functional.reduce_mean.__doc__
    assert "True (default" in doc and "numpy's default is False" in doc


def test_opencl_offsets_and_other_queues(device):
    if device.info.backend != "opencl":
        pytest.skip("pyopencl arrays run on an OpenCL device")
    import pyopencl as cl
    import pyopencl.array as cla
    x = np.arange(41, dtype=np.float16)
    g = cla.to_device(device.cl_queue, x)
    # a slice starts 2 bytes into its buffer: bound there, with GuaranteedBaseOffsetAlignment 2
    np.testing.assert_array_equal(gm.mean(g[1:], g[:-1], device=device).get(), (x[1:] + x[:-1]) / 2)
    binding, desc = gm.Buffer.wrap_array(device, g[3:])
    assert binding.offset == 6 and desc.guaranteed_base_offset_alignment == 2
    q2 = cl.CommandQueue(device.cl_context)       # the caller's own queue: ordered by events, not the host
    a = cla.to_device(q2, X)
    a += 1
    r = gm.reduce_mean(a, [0], keepdims=False, device=device)
    assert r.queue == q2
    np.testing.assert_array_equal(r.get(), (X + 1).mean(0))


def test_evicted_launches_return_their_buffers_to_the_pool(device, monkeypatch):
    monkeypatch.setattr(pool, "MAX_LAUNCHES", 2)
    cache = pool.device_cache(device)
    xs = [np.full((3, 5 + k), k, np.float32) for k in range(4)]
    for _ in range(3):
        for k, x in enumerate(xs):      # four signatures through a cache of two
            np.testing.assert_array_equal(gm.reduce_mean(x, [1], keepdims=False, device=device), np.full(3, k))
    assert len(cache.launches) <= 2
    before = cache.pool.allocations
    for x in xs:
        gm.reduce_mean(x, [1], device=device)
    assert cache.pool.allocations == before     # same size classes: evicted buffers are reused


def test_wrapped_array_copies_stay_inside_its_memory(device):
    """A wrapped 3-element FLOAT16 array binds as 8 bytes (TotalTensorSizeInBytes rounds to 4), but
    reads, writes and views stay inside its 6 real bytes: an error, never a removed device."""
    host = np.array([1, 2, 3], np.float16)
    if device.info.backend == "opencl":
        import pyopencl.array as cla
        arr = cla.to_device(device.cl_queue, host)
    elif device.info.backend == "cpu":
        arr = host
    else:
        pytest.skip("CUDA arrays are covered where a GPU is present")
    binding, desc = gm.Buffer.wrap_array(device, arr)
    buf = binding.buffer
    assert buf.size >= desc.total_size_in_bytes == 8
    np.testing.assert_array_equal(buf.read(np.float16), host)          # the whole real memory
    with pytest.raises(gm.InvalidArgumentError, match="outside the 6-byte buffer"):
        buf.read(np.uint8, 8)
    with pytest.raises(gm.InvalidArgumentError, match="outside the 6-byte buffer"):
        buf.write(np.zeros(4, np.float16))
    assert device.get_device_removed_reason() is None
