"""Executing from several threads at once on one device: every result must be exact.

Every operator kind (a reduction with its temporary resource, the element-wise mean, the n-ary mean)
is compiled once and shared by all threads, each with its own buffers and values. A hook widens the
window between setting a launch's arguments and enqueueing it (``widened_launches``: the kernel
backends' enqueue sleeps first), so that without the device's launch lock another thread's
arguments land on the shared kernel in that window in every run, not by chance; with the lock the
sleep only serializes. The switch interval is cut to 1 us so that the threads also interleave
inside execute's binding and scratch allocation.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import DataType as D

THREADS = 4
ROUNDS = 40
WINDOW_S = 0.002    # the sleep between a launch's arguments and its enqueue
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


@pytest.fixture
def widened_launches(device):
    """Sleep between a launch's arguments and its enqueue, on the backends that set arguments on a
    shared kernel object (OpenCL); elsewhere nothing to widen."""
    be = device.backend
    real = getattr(be, "enqueue", None)
    if real is None:
        yield
        return

    def slow_enqueue(*args, **kwargs):
        time.sleep(WINDOW_S)
        return real(*args, **kwargs)

    be.enqueue = slow_enqueue
    try:
        yield
    finally:
        del be.enqueue


def _reduce_case():
    x_desc, y_desc = gm.TensorDesc(D.FLOAT32, (1, N)), gm.TensorDesc(D.FLOAT32, (1, 1))
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x_desc, y_desc, (1,))
    # thread k's input is all k + 1; the reduction needs a temporary resource, which execute()
    # provides when none is given: threads must not share one while it is in use
    return desc, lambda k: [np.full((1, N), k + 1, np.float32)], lambda k: np.full((1, 1), k + 1, np.float32)


def _mean_case():
    t = gm.TensorDesc(D.INT32, (4096,))
    a = lambda k: np.arange(4096, dtype=np.int32) * (k + 1)   # noqa: E731
    b = lambda k: np.full(4096, 1000 * (k + 1), np.int32)     # noqa: E731
    return (gm.ElementWiseMeanDesc(t, t, t), lambda k: [a(k), b(k)],
            lambda k: ((a(k).astype(np.int64) + b(k)) // 2).astype(np.int32))


def _nary_case():
    t = gm.TensorDesc(D.FLOAT32, (2048,))
    xs = lambda k: [np.full(2048, 3.0 * (k + 1) * (i + 1), np.float32) for i in range(3)]   # noqa: E731
    return gm.ext.NaryMeanDesc([t, t, t], t), xs, lambda k: np.full(2048, 6.0 * (k + 1), np.float32)


@pytest.mark.parametrize("case", [_reduce_case, _mean_case, _nary_case], ids=["reduce", "mean", "nary"])
def test_shared_operator_from_threads_is_exact(device, fast_switching, widened_launches, case):
    desc, inputs, want = case()
    cop = device.compile_operator(device.create_operator(desc))
    out_t = desc.output_tensors()[0]
    wrong: list = []

    def worker(k):
        ins = []
        for t, x in zip(desc.input_tensors(), inputs(k)):
            buf = device.create_buffer(t.total_size_in_bytes)
            buf.write(x)
            ins.append(buf)
        out = device.create_buffer(out_t.total_size_in_bytes)
        expected = want(k)
        for r in range(ROUNDS):
            cop.execute(inputs=ins, outputs=[out])
            if not np.array_equal(out.read_tensor(out_t), expected):
                wrong.append((k, r))

    run_threads(worker)
    assert not wrong, f"{len(wrong)} wrong results of {THREADS * ROUNDS}; first (thread, round): {wrong[:5]}"
    assert device.get_device_removed_reason() is None


@pytest.mark.parametrize("rows", [64, 1], ids=["bound in place", "copied"])
def test_functional_calls_from_threads_are_exact(device, fast_switching, widened_launches, rows):
    """gm.reduce_mean and gm.mean from several threads at once, each thread its own signature (one
    more row than the last) over kernels the launches share: the repeated call (frontends/repeat.py)
    substitutes each call's addresses into argument tuples and sets them on the shared kernel, and
    each thread must get its own values' mean. 64 rows of 1024 values (256 KiB) are bound in place
    on a device that computes in host memory; a row or two are copied."""
    def shape(k):
        return (rows + k, 1024)

    def worker(k):
        x = np.full(shape(k), k + 1, np.float32)
        for _ in range(ROUNDS // 4):
            got = gm.reduce_mean(x, [1], device=device)
            np.testing.assert_array_equal(np.asarray(got), np.full((rows + k, 1), k + 1, np.float32))
            m = gm.mean(x, x + 2, device=device)
            np.testing.assert_array_equal(np.asarray(m), np.full(shape(k), k + 2, np.float32))
    for k in range(THREADS):        # compile and cache each thread's launches first
        worker_x = np.ones(shape(k), np.float32)
        gm.reduce_mean(worker_x, [1], device=device)
        gm.mean(worker_x, worker_x, device=device)
    run_threads(worker)
