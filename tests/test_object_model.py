"""Binding, lifecycle, buffer and device-removal rules (docs/design.md, "binding rules"), on every device."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import upload

import gpu_mean as gm
from gpu_mean import DataType as D

T = gm.TensorDesc
F4 = T(D.FLOAT32, (4,))


def compiled(dev, desc, flags=gm.ExecutionFlags.NONE):
    return dev.compile_operator(dev.create_operator(desc), flags)


def initialized(dev, desc, flags=gm.ExecutionFlags.NONE):
    cop = compiled(dev, desc, flags)
    init = dev.create_operator_initializer([cop])
    table = dev.create_binding_table(init)
    rec, cl = dev.create_command_recorder(), dev.create_command_list()
    rec.record_dispatch(cl, init, table)
    dev.execute_command_lists([cl])
    return cop


def buf(dev, values, dt=np.float32):
    a = np.asarray(values, dt)
    b = dev.create_buffer(max(a.nbytes, 16))
    b.write(a)
    return b


def test_directml_shaped_path(device):
    t = T(D.FLOAT32, (2, 3, 4))
    b = T(D.FLOAT32, (2, 3, 4), (0, 4, 1))
    cop = initialized(device, gm.ElementWiseMeanDesc(t, b, t))
    A = buf(device, np.ones((2, 3, 4)))
    B = buf(device, np.arange(12))
    table = device.create_binding_table(cop)
    table.bind_inputs([gm.BufferBinding(A, 0, t.total_size_in_bytes), gm.BufferBinding(B, 0, b.total_size_in_bytes)])
    table.bind_outputs([gm.BufferBinding(A, 0, t.total_size_in_bytes)])
    rec, cl = device.create_command_recorder(), device.create_command_list()
    rec.record_dispatch(cl, cop, table)
    device.execute_command_lists([cl])
    device.synchronize()
    expect = (1 + np.broadcast_to(np.arange(12, dtype=np.float32).reshape(3, 4), (2, 3, 4))) / 2
    np.testing.assert_array_equal(A.read_tensor(t), expect)
    device.execute_command_lists([cl])   # a command list replays
    device.synchronize()
    np.testing.assert_array_equal(A.read_tensor(t), (expect + np.arange(12).reshape(3, 4)) / 2)


def test_binding_count(device):
    cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    table = device.create_binding_table(cop)
    A = buf(device, [1, 2, 3, 4])
    with pytest.raises(gm.InvalidArgumentError, match="1 bindings for 2 input slots"):
        table.bind_inputs([A])
    with pytest.raises(gm.InvalidArgumentError, match="2 bindings for 1 output slots"):
        table.bind_outputs([A, A])
    with pytest.raises(gm.InvalidArgumentError, match="required"):
        table.bind_inputs([A, None])


def test_buffer_from_another_device_names_both_device_objects(device):
    """A second Device object of the same hardware is another device: the message tells them apart."""
    from conftest import make_device
    other = make_device(device.info.id)
    assert other is not device
    other_buf = other.create_buffer(16)
    cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    table = device.create_binding_table(cop)
    A = buf(device, [1, 2, 3, 4])
    with pytest.raises(gm.InvalidArgumentError, match=f"created by Device object #{other.serial} .*, not by "
                                                      f"Device object #{device.serial} "):
        table.bind_inputs([A, other_buf])
    with pytest.raises(gm.InvalidArgumentError, match="created by Device object"):
        cop.execute(inputs=[A, other_buf], outputs=[A])


def test_offset_alignment(device):
    cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    table = device.create_binding_table(cop)
    A = device.create_buffer(64)
    with pytest.raises(gm.InvalidArgumentError, match="Offset 4 must be a multiple of 16"):
        table.bind_inputs([gm.BufferBinding(A, 4, 16), gm.BufferBinding(A, 16, 16)])
    t4 = T(D.FLOAT32, (4,), guaranteed_base_offset_alignment=4)
    cop4 = initialized(device, gm.ElementWiseMeanDesc(t4, t4, t4))
    table4 = device.create_binding_table(cop4)
    table4.bind_inputs([gm.BufferBinding(A, 4, 16), gm.BufferBinding(A, 20, 16)])  # allowed by the guarantee
    t8 = T(D.FLOAT32, (4,), guaranteed_base_offset_alignment=8)
    table8 = device.create_binding_table(initialized(device, gm.ElementWiseMeanDesc(t8, t8, t8)))
    with pytest.raises(gm.InvalidArgumentError, match="GuaranteedBaseOffsetAlignment \\(8\\)"):
        table8.bind_inputs([gm.BufferBinding(A, 4, 16), gm.BufferBinding(A, 16, 16)])
    # a guarantee larger than 16 binds every offset to it: 16 is no longer enough
    A2 = device.create_buffer(1024)
    t256 = T(D.FLOAT32, (4,), guaranteed_base_offset_alignment=256)
    table256 = device.create_binding_table(initialized(device, gm.ElementWiseMeanDesc(t256, t256, t256)))
    with pytest.raises(gm.InvalidArgumentError, match="Offset 16 must be a multiple of GuaranteedBaseOffsetAlignment"):
        table256.bind_inputs([gm.BufferBinding(A2, 16, 16), gm.BufferBinding(A2, 256, 16)])
    table256.bind_inputs([gm.BufferBinding(A2, 0, 16), gm.BufferBinding(A2, 512, 16)])


def test_binding_size_and_range(device):
    cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    table = device.create_binding_table(cop)
    A = device.create_buffer(32)
    with pytest.raises(gm.InvalidArgumentError, match="SizeInBytes is too small. 8 was provided, but 16"):
        table.bind_inputs([gm.BufferBinding(A, 0, 8), gm.BufferBinding(A, 16, 16)])
    with pytest.raises(gm.InvalidArgumentError, match="outside the 32-byte buffer"):
        table.bind_inputs([gm.BufferBinding(A, 0, 16), gm.BufferBinding(A, 32, 16)])


def test_reduce_may_not_alias(device):
    t = T(D.FLOAT32, (4,))
    o = T(D.FLOAT32, (1,), total_size_in_bytes=16)
    cop = initialized(device, gm.ReduceDesc(gm.ReduceFunction.AVERAGE, t, o, (0,)))
    table = device.create_binding_table(cop)
    A = buf(device, [1, 2, 3, 4])
    table.bind_inputs([gm.BufferBinding(A, 0, 16)])
    with pytest.raises(gm.InvalidArgumentError, match="does not execute in place"):
        table.bind_outputs([gm.BufferBinding(A, 0, 16)])


def test_in_place_needs_identical_descs_and_range(device):
    bc = T(D.FLOAT32, (4,), (0,))
    cop = initialized(device, gm.ElementWiseMeanDesc(bc, F4, F4))
    A, B = buf(device, [1, 2, 3, 4]), buf(device, [1, 2, 3, 4])
    table = device.create_binding_table(cop)
    table.bind_outputs([gm.BufferBinding(A, 0, 16)])
    with pytest.raises(gm.InvalidArgumentError, match="Strides or TotalTensorSizeInBytes differ"):
        table.bind_inputs([gm.BufferBinding(A, 0, 16), gm.BufferBinding(B, 0, 16)])
    cop2 = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    big = device.create_buffer(64)
    t2 = device.create_binding_table(cop2)
    t2.bind_outputs([gm.BufferBinding(big, 16, 16)])
    with pytest.raises(gm.InvalidArgumentError, match="same binding range"):
        t2.bind_inputs([gm.BufferBinding(big, 0, 32), gm.BufferBinding(B, 0, 16)])


def test_mean_aliases_one_input_add_any(device):
    A = buf(device, [2, 4, 6, 8])
    cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    table = device.create_binding_table(cop)
    table.bind_outputs([gm.BufferBinding(A, 0, 16)])
    with pytest.raises(gm.InvalidArgumentError, match="one of its inputs only"):
        table.bind_inputs([gm.BufferBinding(A, 0, 16), gm.BufferBinding(A, 0, 16)])
    add = compiled(device, gm.ElementWiseAddDesc(F4, F4, F4))
    add.execute(inputs=[A, A], outputs=[A])
    np.testing.assert_array_equal(A.read(np.float32, 4), [4, 8, 12, 16])


def test_lifecycle(device):
    cop = compiled(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    A = buf(device, [1, 2, 3, 4])
    table = device.create_binding_table(cop)
    table.bind_inputs([A, A])
    table.bind_outputs([device.create_buffer(16)])
    rec, cl = device.create_command_recorder(), device.create_command_list()
    rec.record_dispatch(cl, cop, table)
    with pytest.raises(gm.InvalidArgumentError, match="before initialization"):
        device.execute_command_lists([cl])
    init = device.create_operator_initializer([cop])
    cl2 = device.create_command_list()
    rec.record_dispatch(cl2, init, device.create_binding_table(init))
    device.execute_command_lists([cl2])
    device.execute_command_lists([cl])
    with pytest.raises(gm.InvalidArgumentError, match="exactly once"):
        device.execute_command_lists([cl2])
    with pytest.raises(gm.InvalidArgumentError, match="listed twice"):
        device.create_operator_initializer([cop, cop])


def test_incomplete_table_refused_at_record(device):
    cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4))
    table = device.create_binding_table(cop)
    rec, cl = device.create_command_recorder(), device.create_command_list()
    with pytest.raises(gm.InvalidArgumentError, match="not bound"):
        rec.record_dispatch(cl, cop, table)
    other = device.create_binding_table(initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4)))
    with pytest.raises(gm.InvalidArgumentError, match="another dispatchable"):
        rec.record_dispatch(cl, cop, other)


def test_bindings_snapshot_unless_volatile(device):
    A, B, C = buf(device, [2, 2, 2, 2]), buf(device, [4, 4, 4, 4]), device.create_buffer(16)
    for flags, expect in ((gm.ExecutionFlags.NONE, 2.0), (gm.ExecutionFlags.DESCRIPTORS_VOLATILE, 3.0)):
        cop = initialized(device, gm.ElementWiseMeanDesc(F4, F4, F4), flags)
        table = device.create_binding_table(cop)
        table.bind_inputs([A, A])
        table.bind_outputs([C])
        rec, cl = device.create_command_recorder(), device.create_command_list()
        rec.record_dispatch(cl, cop, table)
        table.bind_inputs([A, B])
        device.execute_command_lists([cl])
        device.synchronize()
        assert C.read(np.float32, 4)[0] == expect


def test_temporary_resource_rules(device):
    x = T(D.FLOAT32, (1 << 20,))
    o = T(D.FLOAT32, (1,))
    cop = initialized(device, gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x, o, (0,)))
    need = cop.binding_properties.temporary_resource_size
    if need == 0:
        pytest.skip(f"{device.name} needs no temporary resource for a full reduction")
    table = device.create_binding_table(cop)
    tmp = device.create_buffer(need + 512)
    with pytest.raises(gm.InvalidArgumentError, match="multiple of 256"):
        table.bind_temporary_resource(gm.BufferBinding(tmp, 16, need))
    with pytest.raises(gm.InvalidArgumentError, match="below the required"):
        table.bind_temporary_resource(gm.BufferBinding(tmp, 0, need - 4))
    X, Y = buf(device, np.full(1 << 20, 3)), device.create_buffer(16)
    table.bind_inputs([X])
    table.bind_outputs([gm.BufferBinding(Y, 0, 4)])
    rec, cl = device.create_command_recorder(), device.create_command_list()
    with pytest.raises(gm.InvalidArgumentError, match="temporary resource"):
        rec.record_dispatch(cl, cop, table)
    table.bind_temporary_resource(gm.BufferBinding(tmp, 256, need))
    rec.record_dispatch(cl, cop, table)
    device.execute_command_lists([cl])
    device.synchronize()
    assert Y.read(np.float32, 1)[0] == 3.0


def test_owned_by_dml(device):
    owned = T(D.FLOAT32, (4,), flags=gm.TensorFlags.OWNED_BY_DML)
    cop = compiled(device, gm.ElementWiseMeanDesc(owned, F4, F4))
    assert cop.binding_properties.persistent_resource_size >= 16
    W, X, Y = buf(device, [10, 20, 30, 40]), buf(device, [0, 2, 4, 6]), device.create_buffer(16)
    init = device.create_operator_initializer([cop])
    it = device.create_binding_table(init)
    with pytest.raises(gm.InvalidArgumentError, match="must be bound at initialization"):
        it.bind_inputs([gm.BufferArrayBinding([None, None])])
    with pytest.raises(gm.InvalidArgumentError, match="only OWNED_BY_DML"):
        it.bind_inputs([gm.BufferArrayBinding([W, X])])
    it.bind_inputs([gm.BufferArrayBinding([W, None])])
    P = device.create_buffer(cop.binding_properties.persistent_resource_size)
    it.bind_outputs([gm.BufferBinding(P)])
    rec, cl = device.create_command_recorder(), device.create_command_list()
    rec.record_dispatch(cl, init, it)
    device.execute_command_lists([cl])
    W.write(np.zeros(4, np.float32))  # the operator owns a copy now
    table = device.create_binding_table(cop)
    with pytest.raises(gm.InvalidArgumentError, match="must not be bound at execution"):
        table.bind_inputs([W, X])
    table.bind_inputs([None, X])
    table.bind_outputs([Y])
    table.bind_persistent_resource(gm.BufferBinding(P))
    cl2 = device.create_command_list()
    rec.record_dispatch(cl2, cop, table)
    device.execute_command_lists([cl2])
    device.synchronize()
    np.testing.assert_array_equal(Y.read(np.float32, 4), [5, 11, 17, 23])


def test_buffers(device):
    with pytest.raises(gm.InvalidArgumentError, match="must be > 0"):
        device.create_buffer(0)
    b = device.create_buffer(32)
    with pytest.raises(gm.InvalidArgumentError, match="outside"):
        b.write(np.zeros(9, np.float32))
    with pytest.raises(gm.InvalidArgumentError, match="outside"):
        b.read(np.float32, 4, offset=20)
    b.write(np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(b.read(np.float32, 2, offset=8), [2, 3])
    t = T(D.FLOAT32, (2, 2), (1, 2))   # column-major view
    np.testing.assert_array_equal(b.read_tensor(t), [[0, 2], [1, 3]])
    np.testing.assert_array_equal(b.read_tensor(T(D.FLOAT32, (2,), (0,)), offset=12), [3, 3])


def test_out_of_memory(device):
    with pytest.raises(gm.OutOfMemoryError):
        device.create_buffer(1 << 60)
    device.create_buffer(16)   # the device still works


class _NativeFault(Exception):
    """Stands for the backend's native error type (pyopencl.Error, CUDARuntimeError, ...)."""


def test_native_fault_removes_only_that_device(device, monkeypatch):
    from conftest import make_device
    dev = make_device(device.info.id)  # a device object of its own: removal is per object
    assert dev is not device
    cop = initialized(dev, gm.ElementWiseMeanDesc(F4, F4, F4))
    A = buf(dev, [1, 2, 3, 4])

    def fault(*a):
        raise _NativeFault("simulated device fault")

    monkeypatch.setattr(dev.backend, "native_errors", (_NativeFault,))
    monkeypatch.setattr(cop.program, "run", fault)
    with pytest.raises(gm.DeviceRemovedError, match="simulated device fault"):
        cop.execute(inputs=[A, A], outputs=[dev.create_buffer(16)])
    reason = dev.get_device_removed_reason()
    assert isinstance(reason, gm.DeviceRemovedError) and "_NativeFault: simulated device fault" in str(reason)
    for call in (lambda: dev.create_buffer(16), lambda: dev.synchronize(), lambda: A.read(),
                 lambda: dev.create_operator(gm.ElementWiseMeanDesc(F4, F4, F4)),
                 lambda: A.write(np.ones(4, np.float32)), lambda: dev.execute_command_lists([]),
                 lambda: cop.execute(inputs=[A, A], outputs=[A])):
        with pytest.raises(gm.DeviceRemovedError, match="was removed: .*simulated device fault"):
            call()
    monkeypatch.undo()
    # the fixture's device object and a newly created one keep working
    for other in (device, make_device(device.info.id)):
        assert other.get_device_removed_reason() is None
        X = buf(other, [1, 2, 3, 4])
        Y = other.create_buffer(16)
        compiled(other, gm.ElementWiseMeanDesc(F4, F4, F4)).execute(inputs=[X, X], outputs=[Y])
        np.testing.assert_array_equal(Y.read(np.float32), [1, 2, 3, 4])


def test_python_error_in_our_code_propagates_and_keeps_the_device(device, monkeypatch):
    """Only native errors are device faults: a Python bug surfaces as itself, the device stays usable."""
    from conftest import make_device
    dev = make_device(device.info.id)
    cop = initialized(dev, gm.ElementWiseMeanDesc(F4, F4, F4))
    A, Y = buf(dev, [1, 2, 3, 4]), dev.create_buffer(16)

    def bug(*a):
        raise TypeError("a wrong kernel argument")

    monkeypatch.setattr(cop.program, "run", bug)
    with pytest.raises(TypeError, match="a wrong kernel argument"):
        cop.execute(inputs=[A, A], outputs=[Y])
    assert dev.get_device_removed_reason() is None
    monkeypatch.undo()
    cop.execute(inputs=[A, A], outputs=[Y])
    np.testing.assert_array_equal(Y.read(np.float32), [1, 2, 3, 4])


def test_offsets_and_padding_bytes_untouched(device):
    # writes stay inside [offset, offset + TotalTensorSizeInBytes) of the output
    t = T(D.FLOAT32, (5,))
    cop = compiled(device, gm.ElementWiseMeanDesc(t, t, t))
    X = upload(device, t, np.arange(5, dtype=np.float32), pad=32)
    Y = device.create_buffer(32 + 20 + 64)
    Y.write(np.full(116, 0xAB, np.uint8))
    cop.execute(inputs=[gm.BufferBinding(X, 32, 20)] * 2, outputs=[gm.BufferBinding(Y, 32, 20)])
    raw = Y.read()
    assert np.all(raw[:32] == 0xAB) and np.all(raw[52:] == 0xAB)
    np.testing.assert_array_equal(raw[32:52].view(np.float32), np.arange(5))


def test_command_list_resolved_launches_follow_changes(device):
    """From the second execution a list runs pre-resolved launches; recording again must drop them."""
    add = initialized(device, gm.ElementWiseAddDesc(F4, F4, F4))
    A, B, C = buf(device, [1, 1, 1, 1]), buf(device, [0, 0, 0, 0]), buf(device, [0, 0, 0, 0])
    table = device.create_binding_table(add)
    table.bind_inputs([A, B])
    table.bind_outputs([B])           # B += A: every execution must really run
    rec, cl = device.create_command_recorder(), device.create_command_list()
    rec.record_dispatch(cl, add, table)
    for k in range(1, 4):
        device.execute_command_lists([cl])
        device.synchronize()
        assert B.read(np.float32, 1)[0] == k
    cl.reset()
    table.bind_outputs([C])           # the same table, now writing C = A + B
    rec.record_dispatch(cl, add, table)
    for _ in range(2):
        device.execute_command_lists([cl])
        device.synchronize()
    assert C.read(np.float32, 1)[0] == 4 and B.read(np.float32, 1)[0] == 3


def test_command_list_replays_through_a_captured_graph():
    """The CUDA-graph path, driven through a CPU backend that records and replays launches."""
    from gpu_mean.backends.cpu import CpuBackend

    class GraphCpu(CpuBackend):
        supports_graphs = True

        def __init__(self):
            super().__init__()
            self.captures = self.replays = 0

        def capture(self, record):
            self.captures += 1
            return record

        def replay(self, handle):
            self.replays += 1
            handle()

    be = GraphCpu()
    dev = gm.Device(be)
    add = initialized(dev, gm.ElementWiseAddDesc(F4, F4, F4))
    A, B = buf(dev, [1, 1, 1, 1]), buf(dev, [0, 0, 0, 0])
    table = dev.create_binding_table(add)
    table.bind_inputs([A, B])
    table.bind_outputs([B])           # B += A: every execution must really run
    rec, cl = dev.create_command_recorder(), dev.create_command_list()
    rec.record_dispatch(cl, add, table)
    rec.record_dispatch(cl, add, table)
    for k in range(1, 5):
        dev.execute_command_lists([cl])
        assert B.read(np.float32, 1)[0] == 2 * k
    assert (be.captures, be.replays) == (1, 3)   # first run direct, then one capture, replays after
    rec.record_dispatch(cl, add, table)          # a change drops the graph
    dev.execute_command_lists([cl])
    assert B.read(np.float32, 1)[0] == 11 and be.captures == 1
    volatile = initialized(dev, gm.ElementWiseAddDesc(F4, F4, F4), gm.ExecutionFlags.DESCRIPTORS_VOLATILE)
    vt = dev.create_binding_table(volatile)
    vt.bind_inputs([A, B])
    vt.bind_outputs([B])
    cl2 = dev.create_command_list()
    rec.record_dispatch(cl2, volatile, vt)
    for _ in range(3):
        dev.execute_command_lists([cl2])
    assert be.captures == 1                      # late-bound lists are never captured
