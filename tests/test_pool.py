"""The functional calls' buffer pool (frontends/pool.py): small rounding, never a doubled request;
bounded; given back by gm.free_memory and Device.close, with the process's resident memory; and an
allocation that fails for lack of memory gives back what the pool holds and tries again."""
from __future__ import annotations

import gc
import os
import types
import weakref

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean.backends.cpu import CpuBackend
from gpu_mean.frontends import arrays, pool


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def held_memory(device):
    """(what it is, a callable giving the bytes this process holds where ``device`` keeps its buffers):
    the process's resident memory for a device that computes in host memory (the CPU device, an OpenCL
    CPU device); for a CUDA GPU, the bytes CuPy's memory pool holds on it (the backend allocates
    through it, cupy.cuda.alloc; gm.free_memory gives its free blocks back to the driver); None for a
    device whose memory the host cannot read (an OpenCL GPU)."""
    if device.info.backend == "cuda":
        cp = device.backend.cp
        return "CuPy's memory pool on the GPU", lambda: int(cp.get_default_memory_pool().total_bytes())
    if device.info.backend == "cpu" or device.info.device_type == "CPU":
        return "resident host memory", rss
    return None


def test_held_memory_is_read_where_the_device_keeps_it(monkeypatch):
    """A CUDA device's pool is read from CuPy's pool, never from host RSS (which a GPU's buffers do
    not grow: the first run on a GPU measured 64 KiB of RSS for 406 MB held)."""
    from fake_cupy import fake_cuda_backend
    be, _ = fake_cuda_backend(monkeypatch, [])
    total = {"bytes": 3 << 20}
    be.cp.get_default_memory_pool = lambda: types.SimpleNamespace(total_bytes=lambda: total["bytes"])
    what, read = held_memory(gm.Device(be))
    assert "CuPy" in what and read() == 3 << 20
    assert held_memory(gm.create_device("cpu"))[0] == "resident host memory"


@pytest.fixture
def copies(monkeypatch):
    """Host arrays of any size go through pooled copies (the pool's path), not bound in place, and
    the CPU device through its buffers, not computing from the arrays where they lie."""
    monkeypatch.setattr(arrays, "CPU_DIRECT", False)
    monkeypatch.setattr(arrays, "CPU_IN_PLACE_MIN_BYTES", 1 << 62)
    monkeypatch.setattr(arrays, "HOST_IN_PLACE_MIN_BYTES", 1 << 62)


@pytest.mark.parametrize("n", [1, 15, 16, 100, 4095, 4096, 4097, 20000, 32768, 10**6, 3 << 30, (3 << 30) + 1,
                               (1 << 32) + 12345])
def test_requests_round_to_a_page_or_an_eighth_never_double(n):
    r = pool.request_size(n)
    assert n <= r <= n + max(pool.MIN_GRANULE, n // 8)
    if n >= 8 * pool.PAGE:
        assert r % pool.PAGE == 0 and r - n < pool.PAGE


def test_a_free_buffer_serves_requests_it_exceeds_by_an_eighth_at_most():
    dev = gm.create_device("cpu")
    p = pool.BufferPool(dev)
    b = p.take(1 << 20)
    p.give(b)
    assert p.take((1 << 20) - (1 << 16)) is b      # 1/16 smaller: reused
    p.give(b)
    assert p.take(1 << 19) is not b                # half: a buffer of its own
    assert p.free_bytes() == 1 << 20 and p.total_bytes() == (1 << 20) + (1 << 19)
    assert p.free_all_blocks() == 1 << 20 and p.total_bytes() == 1 << 19


def test_what_the_pool_holds_is_bounded(device, copies):
    p = gm.memory_pool(device)
    gm.free_memory(device)
    old = p.get_limit()
    try:
        p.set_limit(3 << 20)
        for k in range(6):         # six signatures of ~2 x 1 MiB each: at most the limit stays held
            x = np.full((256, 1024 + k), k, np.float32)
            np.testing.assert_array_equal(gm.reduce_mean(x, [0], device=device), np.full((1, 1024 + k), k))
            assert p.total_bytes() <= 3 << 20
        np.testing.assert_array_equal(gm.mean(x, x, device=device), x)     # still works at the limit
        big = np.ones((1024, 2048), np.float32)             # one call past the limit runs, then gives back
        assert gm.reduce_mean(big, device=device)[0, 0] == 1
        assert p.total_bytes() <= 3 << 20
    finally:
        p.set_limit(old)
    assert old == min(1 << 30, device.info.global_memory // 8)
    with pytest.raises(gm.InvalidArgumentError):
        p.set_limit(-1)


def test_free_memory_gives_everything_back(device, copies):
    x = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    gm.reduce_mean(x, [1], device=device)
    p = gm.memory_pool(device)
    held = p.total_bytes()
    assert held > 0 and p.used_bytes() > 0
    assert gm.free_memory(device) == held
    assert p.total_bytes() == 0 and not pool.device_cache(device).launches
    np.testing.assert_array_equal(gm.reduce_mean(x, [1], device=device), x.mean(1, keepdims=True))
    held = p.total_bytes()
    gc.collect()            # devices earlier tests dropped (stand-ins for CUDA among them) are gone
    assert held > 0 and gm.free_memory() >= held          # every device's
    assert p.total_bytes() == 0
    gm.reduce_mean(x, [1], device=device)
    if device.info.backend != "cuda" and not device.info.variant:
        assert p.total_bytes() > 0 and gm.free_memory(device.info.id) > 0     # by name: that hardware's
        assert p.total_bytes() == 0
    with pytest.raises(gm.InvalidArgumentError, match="unknown device"):
        gm.free_memory("no such device")


def test_free_memory_returns_resident_memory(device, copies):
    """What the pool held leaves the process: resident memory comes back to within 5 % of the
    growth (plus a little slack for the allocator) after gm.free_memory."""
    measure = held_memory(device)
    if measure is None:
        pytest.skip(f"{device.info.id}: the memory of an OpenCL GPU cannot be read from the host")
    what, resident = measure
    gm.free_memory(device)
    xs = [np.ones((4096, 2048 + 16 * k), np.float32) for k in range(3)]    # ~32 MiB each
    gc.collect()
    before = resident()
    for x in xs:
        assert gm.reduce_mean(x, [1], device=device)[0, 0] == 1
        assert gm.mean(x, x, device=device)[0, 0] == 1
    gc.collect()
    held = gm.memory_pool(device).total_bytes()
    grown = resident() - before
    assert held >= 3 * (32 << 20) and grown >= held // 2, (what, held, grown)
    gm.free_memory(device)
    gc.collect()
    assert resident() - before <= 0.05 * grown + (8 << 20), (what, before, grown, resident())


def test_device_close_gives_back_and_retires_the_device(device, copies):
    dev = gm.Device(device.backend, device.feature_level)
    with dev:
        gm.reduce_mean(np.ones((8, 1024), np.float32), [1], device=dev)
        p = gm.memory_pool(dev)
        assert p.total_bytes() > 0
    assert p.total_bytes() == 0
    with pytest.raises(gm.DeviceRemovedError, match="closed"):
        dev.create_buffer(16)
    assert "closed" in str(dev.get_device_removed_reason())
    dev.close()                                          # twice: nothing more to do
    np.testing.assert_array_equal(gm.reduce_mean(np.ones(4, np.float32), device=device), [1])   # others work


def test_out_of_memory_gives_back_what_the_pool_holds_and_tries_again(monkeypatch, copies):
    dev = gm.Device(CpuBackend())
    cache = pool.device_cache(dev)
    x = np.ones((16, 1024), np.float32)
    gm.reduce_mean(x, [1], device=dev)        # small: a pooled launch
    gm.reduce_mean(x, [0], device=dev)
    assert cache.pool.total_bytes() > 0 and len(cache.launches) == 2
    real = dev.create_buffer
    failures = []

    def scarce(size):
        if not failures:      # the first try finds no memory; the retry (after the release) does
            failures.append(size)
            raise gm.OutOfMemoryError(f"allocating {size} bytes: out of memory")
        return real(size)
    monkeypatch.setattr(dev, "create_buffer", scarce)
    np.testing.assert_array_equal(gm.reduce_mean(np.ones((16, 2048), np.float32), [1], device=dev),
                                  np.ones((16, 1)))
    assert failures and len(cache.launches) == 1        # the idle launches went back first

    def none_left(size):
        raise gm.OutOfMemoryError(f"allocating {size} bytes: out of memory")
    monkeypatch.setattr(dev, "create_buffer", none_left)
    with pytest.raises(gm.OutOfMemoryError, match=r"allocating \d+ bytes.*pool holds \d+ bytes .*gm.free_memory"):
        gm.reduce_mean(np.ones((16, 4096), np.float32), [1], device=dev)


def test_out_of_memory_names_bytes_asked_and_the_devices_memory(monkeypatch):
    be = CpuBackend()
    dev = gm.Device(be)

    def no_memory(nbytes):
        raise MemoryError("numpy could not allocate")
    monkeypatch.setattr(be, "alloc", no_memory)
    with pytest.raises(gm.OutOfMemoryError, match=f"allocating 4096 bytes.*reports {be.info.global_memory} bytes"):
        dev.create_buffer(4096)
    assert dev.get_device_removed_reason() is None


def _owner(a):
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
    return a


def test_calls_keep_no_reference_to_the_callers_arrays(device):
    """Once a call returns, nothing of the library holds the caller's arrays or the result it handed
    back (a kernel's cached arguments would keep arrays bound in place alive, and their memory)."""
    x = np.ones((512, 1024), np.float32)      # 2 MiB: bound in place where the device works in host memory
    outs = [gm.mean(x, x, device=device), gm.reduce_mean(x, [0], device=device), gm.reduce_mean(x, device=device)]
    refs = [weakref.ref(_owner(a)) for a in outs + [x]]
    del x, outs
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)


def test_host_arrays_copied_into_device_memory_are_cut_to_the_free_memory(monkeypatch):
    """Where host arrays are copied into device memory (CUDA), an operand is cut so that a copy of
    each one and of the result take at most half the free memory the backend reports."""
    class Scarce(CpuBackend):
        def free_memory(self):
            return 64 << 20

    be = Scarce()
    monkeypatch.setattr(be.arrays, "host_memory", False)      # as a discrete GPU: copies, never in place
    dev = gm.Device(be)
    x = np.ones((64, 1 << 18), np.float32)                    # 64 MiB: past a third of 64 MiB / 2
    call = arrays.Call([x], dev, "t")
    assert call.mode == "split" and call.limit == (64 << 20) // 4
    np.testing.assert_array_equal(gm.reduce_mean(x, [0], keepdims=False, device=dev), np.ones(1 << 18))
    assert arrays.Call([x[:4]], dev, "t").mode == "host"       # small calls ask nothing


def test_cuda_reports_free_memory_and_gives_back_cupys_cached_blocks():
    import types

    from gpu_mean.backends import cuda
    log = []

    class Pool:
        def free_bytes(self):
            return 100

        def free_all_blocks(self):
            log.append("free_all_blocks")

    class Dev:
        def __enter__(self):
            log.append("enter")

        def __exit__(self, *a):
            log.append("exit")

    be = object.__new__(cuda.CudaBackend)
    be.dev = Dev()
    runtime = types.SimpleNamespace(memGetInfo=lambda: (5000, 9000))
    be.cp = types.SimpleNamespace(get_default_memory_pool=Pool, cuda=types.SimpleNamespace(runtime=runtime))
    assert be.free_memory() == 5100
    be.release_cached()
    assert log == ["enter", "exit", "enter", "free_all_blocks", "exit"]
