"""Executing from several threads at once on one device: every result must be exact.

The switch interval is cut to 1 us so that the threads interleave inside execute (binding,
scratch allocation, submission), not only between calls.
"""
from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import DataType as D

THREADS = 4
ROUNDS = 300
N = 65536


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(worker):
    errors: list = []

    def guarded(k):
        try:
            worker(k)
        except BaseException as e:   # noqa: BLE001 - reported below, with the thread that raised it
            errors.append((k, e))

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"{len(errors)} threads failed; first: thread {errors[0][0]}: {errors[0][1]!r}"


def test_concurrent_reduce_average_is_exact(device, fast_switching):
    # each thread its own compiled operator (the shared-operator case is the test above), input
    # (all k + 1) and output; the reduction needs a temporary resource, which execute() provides
    # when none is given: threads must not share one while it is in use
    x_desc, y_desc = gm.TensorDesc(D.FLOAT32, (1, N)), gm.TensorDesc(D.FLOAT32, (1, 1))
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x_desc, y_desc, (1,))
    wrong: list = []

    def worker(k):
        cop = device.compile_operator(device.create_operator(desc))
        x = device.create_buffer(x_desc.total_size_in_bytes)
        x.write(np.full(N, k + 1, np.float32))
        y = device.create_buffer(y_desc.total_size_in_bytes)
        for r in range(ROUNDS):
            cop.execute(inputs=[x], outputs=[y])
            got = float(y.read(np.float32)[0])
            if got != k + 1:
                wrong.append((k, r, got))

    run_threads(worker)
    assert not wrong, f"{len(wrong)} wrong results of {THREADS * ROUNDS}; first (thread, round, value): {wrong[:5]}"
    assert device.get_device_removed_reason() is None


def test_concurrent_shared_elementwise_operator_is_exact(device, fast_switching):
    t = gm.TensorDesc(D.INT32, (4096,))
    cop = device.compile_operator(device.create_operator(gm.ElementWiseMeanDesc(t, t, t)))
    wrong: list = []

    def worker(k):
        a_host = np.arange(4096, dtype=np.int32) * (k + 1)
        b_host = np.full(4096, 1000 * (k + 1), np.int32)
        want = (a_host.astype(np.int64) + b_host) // 2
        a, b, out = (device.create_buffer(t.total_size_in_bytes) for _ in range(3))
        a.write(a_host)
        b.write(b_host)
        for r in range(ROUNDS):
            cop.execute(inputs=[a, b], outputs=[out])
            if not np.array_equal(out.read(np.int32), want):
                wrong.append((k, r))

    run_threads(worker)
    assert not wrong, f"{len(wrong)} wrong results of {THREADS * ROUNDS}; first (thread, round): {wrong[:5]}"
    assert device.get_device_removed_reason() is None
