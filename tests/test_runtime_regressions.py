"""Regressions found by fuzzing the runtime (valid input that removed a device, invalid input that was
accepted), each as a named case run on every device present."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import run

import gpu_mean as gm

F = gm.DataType.FLOAT32
AVG = gm.ReduceFunction.AVERAGE


def _alive(dev):
    assert dev.get_device_removed_reason() is None
    b = dev.create_buffer(16)
    b.write(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(b.read(np.float32), [0, 1, 2, 3])


def test_reduction_over_every_axis_of_a_padded_input(device):
    """No kept axis and a padded (non-mergeable) input: compiled and computed, never a removal."""
    x = gm.TensorDesc(F, (2, 32), strides=(33, 1))
    data = np.arange(64, dtype=np.float32).reshape(2, 32) + 1
    got = run(device, gm.ReduceDesc(AVG, x, gm.TensorDesc(F, (1, 1)), (0, 1)), [data])
    assert got[0, 0] == np.float32(data.mean())
    _alive(device)


@pytest.mark.parametrize("size", [1 << 62, 1 << 63, 1 << 64, 1 << 70])
def test_huge_buffer_is_out_of_memory_not_a_removal(device, size):
    with pytest.raises(gm.OutOfMemoryError, match=f"{size} bytes"):
        device.create_buffer(size)
    _alive(device)


@pytest.mark.parametrize("size", [1.5, "16", True, None])
def test_buffer_size_must_be_an_integer(device, size):
    with pytest.raises(gm.InvalidArgumentError, match="size must be an integer"):
        device.create_buffer(size)


def _split_reduce(dev):
    """A reduction that needs a temporary resource on this device (None where it needs none)."""
    for shape in ((1, 65536), (1, 1 << 20)):
        x, y = gm.TensorDesc(F, shape), gm.TensorDesc(F, (1, 1))
        cop = dev.compile_operator(dev.create_operator(gm.ReduceDesc(AVG, x, y, (1,))))
        if cop.binding_properties.temporary_resource_size:
            return cop, x, y
    return None


def test_temporary_may_not_overlap_a_tensor(device):
    found = _split_reduce(device)
    if found is None:
        pytest.skip(f"{device.name} reduces without a temporary resource")
    cop, x, y = found
    n = x.total_size_in_bytes
    tsize = cop.binding_properties.temporary_resource_size
    X = device.create_buffer(n + tsize + 256)
    X.write(np.full(x.sizes, 7, np.float32))
    Y = device.create_buffer(256 + tsize)
    for temp, name in ((gm.BufferBinding(X, 0, tsize), "InputTensor"),
                       (gm.BufferBinding(Y, 0, tsize), "OutputTensor")):
        with pytest.raises(gm.InvalidArgumentError, match=f"temporary resource .* overlaps {name}"):
            cop.execute(inputs=[gm.BufferBinding(X, 0, n)], outputs=[gm.BufferBinding(Y, 0, 16)], temporary=temp)
        table = device.create_binding_table(cop)
        table.bind_inputs([gm.BufferBinding(X, 0, n)])
        table.bind_outputs([gm.BufferBinding(Y, 0, 16)])
        with pytest.raises(gm.InvalidArgumentError, match=f"temporary resource .* overlaps {name}"):
            table.bind_temporary_resource(temp)
    np.testing.assert_array_equal(X.read(np.float32, x.sizes[1]), 7)    # the input was never overwritten
    # a temporary of its own in the same buffer, past the input: accepted, and the result is right
    off = -(-n // 256) * 256
    cop.execute(inputs=[gm.BufferBinding(X, 0, n)], outputs=[gm.BufferBinding(Y, 0, 16)],
                temporary=gm.BufferBinding(X, off, tsize))
    assert Y.read(np.float32, 1)[0] == 7


def test_execute_rejects_extra_or_missing_bindings(device):
    t = gm.TensorDesc(F, (4,))
    cop = device.compile_operator(device.create_operator(gm.ElementWiseMeanDesc(t, t, t)))
    A, B, C, Y, Z = (device.create_buffer(16) for _ in range(5))
    with pytest.raises(gm.InvalidArgumentError, match="3 bindings for 2 input slots"):
        cop.execute(inputs=[A, B, C], outputs=[Y])
    with pytest.raises(gm.InvalidArgumentError, match="1 bindings for 2 input slots"):
        cop.execute(inputs=[A], outputs=[Y])
    with pytest.raises(gm.InvalidArgumentError, match="2 bindings for 1 output slots"):
        cop.execute(inputs=[A, B], outputs=[Y, Z])
    _alive(device)


def test_device_objects_over_one_backend_do_not_interleave(device):
    """The functional API and create_device hand several Device objects the same backend (queue,
    stream, staging memory): their threads are serialized by one lock, and every result is exact."""
    import sys
    import threading
    others = [gm.Device(device.backend) for _ in range(3)]
    assert all(d.executor.lock is device.executor.lock for d in others)
    x, y = gm.TensorDesc(F, (1, 65536)), gm.TensorDesc(F, (1, 1))
    wrong = []

    def work(dev, k):
        cop = dev.compile_operator(dev.create_operator(gm.ReduceDesc(AVG, x, y, (1,))))
        X, Y = dev.create_buffer(x.total_size_in_bytes), dev.create_buffer(16)
        X.write(np.full(x.sizes, k + 1, np.float32))
        for _ in range(100):
            cop.execute(inputs=[X], outputs=[Y])
            if Y.read(np.float32, 1)[0] != k + 1:
                wrong.append(k)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(d, k)) for k, d in enumerate([device] + others)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not wrong


def test_a_volatile_table_reset_to_another_operator_is_refused(device):
    t = gm.TensorDesc(F, (4,))
    flags = gm.ExecutionFlags.DESCRIPTORS_VOLATILE
    ops = [device.compile_operator(device.create_operator(gm.ElementWiseMeanDesc(t, t, t)), flags),
           device.compile_operator(device.create_operator(gm.ElementWiseAddDesc(t, t, t)), flags)]
    A, B = device.create_buffer(16), device.create_buffer(16)
    for op in ops:
        op.execute(inputs=[A, A], outputs=[B])          # initializes
    table = device.create_binding_table(ops[0])
    table.bind_inputs([A, A])
    table.bind_outputs([B])
    rec, cl = device.create_command_recorder(), device.create_command_list()
    rec.record_dispatch(cl, ops[0], table)
    table.reset(ops[1])
    with pytest.raises(gm.InvalidArgumentError, match="reset to another dispatchable"):
        device.execute_command_lists([cl])
    _alive(device)


def test_gpu_mean_device_sets_the_default_device():
    """$GPU_MEAN_DEVICE is the default of create_device(), the functional API and the command line."""
    import os
    import subprocess
    import sys
    code = ("import numpy as np, gpu_mean as gm; from gpu_mean.frontends import functional as F;"
            "print(gm.create_device().info.id, F.get_device(None).info.id)")
    env = dict(os.environ, GPU_MEAN_DEVICE="cpu")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["cpu", "cpu"]
    r = subprocess.run([sys.executable, "-m", "gpu_mean", "conformance", "--quick", "--op", "mean", "--dtype", "f32"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "cpu (numpy reference)" in r.stdout + r.stderr
