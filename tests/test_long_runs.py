"""Long runs: host memory must stay flat over many executions and many create/compile/free cycles.

Python allocations are measured with tracemalloc, native ones (driver objects, numpy buffers) by
the process's resident set size. Both are sampled after a warm-up, so that caches filled once
(kernel programs, the scratch buffer, pyopencl's internals) do not count as growth. The ``slow``
variants (10,000 executions, 1,000 cycles) run with ``-m slow``; the quick ones run in CI.
"""
from __future__ import annotations

import gc
import os
import tracemalloc

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import DataType as D

T = gm.TensorDesc
X_DESC, Y_DESC = T(D.FLOAT32, (64, 256)), T(D.FLOAT32, (64, 1))
REDUCE = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, X_DESC, Y_DESC, (1,))
# a leak of a few hundred bytes per iteration exceeds these over the measured iterations
PY_BYTES_PER_ITER = 64
RSS_SLACK = 8 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(step, iterations: int, warmup: int):
    """(Python heap growth, RSS growth) in bytes between the end of ``warmup`` and the end."""
    tracemalloc.start()
    try:
        for i in range(warmup):
            step(i)
        gc.collect()
        py0, rss0 = tracemalloc.get_traced_memory()[0], rss()
        for i in range(warmup, iterations):
            step(i)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - py0, rss() - rss0
    finally:
        tracemalloc.stop()


def check_flat(device, step, iterations, warmup):
    py, res = measure(step, iterations, warmup)
    n = iterations - warmup
    assert py <= PY_BYTES_PER_ITER * n + 64 * 1024, f"{device.name}: Python heap grew by {py} bytes over {n} iterations"
    assert res <= RSS_SLACK, f"{device.name}: resident memory grew by {res / 2**20:.1f} MiB over {n} iterations"
    assert device.get_device_removed_reason() is None


def executions(device, iterations):
    cop = device.compile_operator(device.create_operator(REDUCE))
    x, y = device.create_buffer(X_DESC.total_size_in_bytes), device.create_buffer(Y_DESC.total_size_in_bytes)
    x.write(np.full(X_DESC.sizes, 3.0, np.float32))

    def step(i):
        cop.execute(inputs=[x], outputs=[y])
        if i % 500 == 0:
            assert np.all(y.read(np.float32) == 3.0)

    check_flat(device, step, iterations, warmup=max(50, iterations // 10))


def cycles(device, iterations):
    data = np.full(X_DESC.sizes, 5.0, np.float32)

    def step(i):
        cop = device.compile_operator(device.create_operator(REDUCE))
        x, y = device.create_buffer(X_DESC.total_size_in_bytes), device.create_buffer(Y_DESC.total_size_in_bytes)
        x.write(data)
        cop.execute(inputs=[x], outputs=[y])
        assert np.all(y.read(np.float32) == 5.0)
        del cop, x, y       # "free": the last references go, the driver objects with them

    check_flat(device, step, iterations, warmup=max(10, iterations // 10))


def test_executions_quick(device):
    executions(device, 500)


def test_create_compile_execute_free_quick(device):
    cycles(device, 50)


@pytest.fixture
def slow_selected(request):
    # the whole suite skips these; `-m slow` selects them
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("a slow test: run it with -m slow")


@pytest.mark.slow
def test_executions_10000(device, slow_selected):
    executions(device, 10_000)


@pytest.mark.slow
def test_create_compile_execute_free_1000(device, slow_selected):
    cycles(device, 1_000)
