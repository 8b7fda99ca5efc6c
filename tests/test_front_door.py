"""The repeated functional call (frontends/repeat.py): a call with an earlier call's signature does
only what its arrays need -- no classification of the arrays, no descriptor, no validation of
bindings, no argument tuple rebuilt, no launch beyond the plan's kernels -- and still gives each
call's own answer, on every device and on the stand-in CUDA device (tests/fake_cupy.py)."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from fake_cupy import DevPtr, FakeCupyArray, fake_cuda_backend
from oracle import reduce_mean as oracle_reduce_mean

import gpu_mean as gm
from gpu_mean.backends import cuda
from gpu_mean.bridges import cuda as cuda_bridge
from gpu_mean.frontends import arrays, functional, repeat
from gpu_mean.kernels import programs
from gpu_mean.runtime import bindings, execution


def reduce_mean_ref(x, axes):
    """The exact oracle's correctly rounded mean over ``axes``, reduced axes kept."""
    return oracle_reduce_mean(x, axes, x.dtype)

# the per-call work a repeated call must not do
FULL_PATH = {
    "classify the arrays (Call)": (arrays.Call, "__init__"),
    "normalize the axes": (functional, "normalize_axes"),
    "build a descriptor": (functional, "reduce_desc"),
    "bind through the table (validation)": (bindings.BindingTable, "bind_inputs"),
    "check the bindings at execution": (bindings, "check_complete"),
    "dispatch a recorded list": (execution.Executor, "_dispatch"),
    "rebuild a reduction's arguments": (programs.ReduceProgram, "_arguments"),
}
# and, on CuPy arrays and on numpy arrays on the CPU device, the per-call work a repeated call need not
# do either: its signature read from the arrays themselves, its plan found in one table
LOOKUP = {
    "look the arrays up (classify, ArrayBridge.operand, the device's cache)": (repeat, "lookup"),
    "describe the operands again (Call.again)": (arrays.Call, "again"),
    "order the streams twice (before, after)": (cuda_bridge.CudaArrays, "before"),
}


def count_calls(monkeypatch, table: dict) -> dict:
    """{name: calls} of the methods of ``table`` ({name: (owner, attribute)}), which still run."""
    counts = dict.fromkeys(table, 0)
    for name, (owner, attr) in table.items():
        fn = getattr(owner, attr)

        def wrapper(*a, _fn=fn, _name=name, **k):
            counts[_name] += 1
            return _fn(*a, **k)
        monkeypatch.setattr(owner, attr, wrapper)
    return counts


@pytest.fixture
def counted(monkeypatch):
    return count_calls(monkeypatch, FULL_PATH)


@pytest.fixture
def counted_all(monkeypatch):
    return count_calls(monkeypatch, {**FULL_PATH, **LOOKUP})


@pytest.fixture
def fake(monkeypatch):
    log = []
    be, state = fake_cuda_backend(monkeypatch, log)
    return gm.Device(be), log


def _fake_array(log, shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return FakeCupyArray(DevPtr(bytearray(a.tobytes()), 0, log), shape, np.float32)


@pytest.mark.parametrize("call", ["reduce_mean(x, [1])", "reduce_mean(x, [0])", "mean(x, y)"])
def test_a_repeated_call_on_device_arrays_only_binds_and_launches(fake, counted_all, call):
    """CuPy arrays on the (stand-in) GPU: the second and later calls with new arrays of the same
    signature launch exactly the plan's kernels and do none of the full path's work, nor look the
    arrays up through the bridge: the signature comes from the arrays' attributes."""
    dev, log = fake
    counted = counted_all
    run = {"reduce_mean(x, [1])": lambda x, y: gm.reduce_mean(x, [1], device=dev),
           "reduce_mean(x, [0])": lambda x, y: gm.reduce_mean(x, [0], device=dev),
           "mean(x, y)": lambda x, y: gm.mean(x, y, device=dev)}[call]
    run(_fake_array(log, (64, 300)), _fake_array(log, (64, 300), 1))
    ln = next(iter(gm.memory_pool(dev).cache.launches.values()))
    kernels = ln.cop.program.launches if hasattr(ln.cop.program, "fin") else 1
    for k in range(3):
        x, y = _fake_array(log, (64, 300), 2 + k), _fake_array(log, (64, 300), 7 + k)
        for name in counted:
            counted[name] = 0
        log.clear()
        res = run(x, y)
        assert isinstance(res, FakeCupyArray)
        assert {n: c for n, c in counted.items() if c} == {}, "a repeated call did the full path's work"
        launched = [e for e in log if e[0] in ("launch", "graph")]
        assert len(launched) == kernels
        # the kernels read the new arrays' addresses (the launch log names no address, so the
        # stand-in's bound input is checked on the program: it keeps none after the launch)
        assert ln.cop.program.__dict__.get("_last") is None


def test_a_repeated_call_on_host_arrays_skips_the_full_path(device, counted):
    """numpy arrays on every device, small (copied through the launch's buffers) and large (bound in
    place where the device works in host memory): repeated calls with other arrays of the same
    signature give each array's own mean and do none of the full path's work."""
    rng = np.random.default_rng(3)
    for shape in ((16, 16), (256, 256)):
        xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
        gm.reduce_mean(xs[0], [1], device=device)
        for x in xs[1:]:
            for name in counted:
                counted[name] = 0
            res = gm.reduce_mean(x, [1], device=device)
            np.testing.assert_array_equal(res, reduce_mean_ref(x, (1,)))
            assert {n: c for n, c in counted.items() if c} == {}, f"{shape}: a repeated call did the full path's work"


@pytest.mark.parametrize("call", ["reduce_mean(x, [1])", "reduce_mean(x, [0])", "mean(x, y)"])
def test_a_repeated_cpu_call_computes_where_the_arrays_lie(cpu, monkeypatch, call):
    """numpy arrays on the cpu device, small and large: a repeated call makes no Call, copies and
    launches nothing, takes no lock, and computes once (``Executor.compute``) from the bytes of the
    new arrays themselves, giving each its own answer."""
    work = {"describe the operands again (Call.again)": (arrays.Call, "again"),
            "look the arrays up (the device's cache)": (repeat, "lookup"),
            "copy through the launch's buffers": (execution.Executor, "round_trip"),
            "launch over bound memory": (execution.Executor, "run_bound"),
            "write": (execution.Executor, "write"), "read": (execution.Executor, "read")}
    counts = count_calls(monkeypatch, work)
    computed = []
    real = execution.Executor.compute

    def compute(ex, program, arrays):
        computed.append(arrays)
        return real(ex, program, arrays)
    monkeypatch.setattr(execution.Executor, "compute", compute)
    run = {"reduce_mean(x, [1])": lambda x, y: gm.reduce_mean(x, [1], device=cpu),
           "reduce_mean(x, [0])": lambda x, y: gm.reduce_mean(x, [0], device=cpu),
           "mean(x, y)": lambda x, y: gm.mean(x, y, device=cpu)}[call]
    want = {"reduce_mean(x, [1])": lambda x, y: reduce_mean_ref(x, (1,)),
            "reduce_mean(x, [0])": lambda x, y: reduce_mean_ref(x, (0,)),
            "mean(x, y)": lambda x, y: ((x.astype(np.float64) + y) / 2).astype(np.float32)}[call]
    rng = np.random.default_rng(8)
    for shape in ((16, 16), (256, 256)):
        run(*(rng.standard_normal(shape).astype(np.float32) for _ in range(2)))
        for _ in range(2):
            x, y = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
            counts.update(dict.fromkeys(counts, 0))
            computed.clear()
            res = run(x, y)
            np.testing.assert_array_equal(res, want(x, y))
            assert {n: c for n, c in counts.items() if c} == {}, f"{shape}: a repeated call did more than compute"
            assert len(computed) == 1
            assert all(np.shares_memory(s, a) for s, a in zip(computed[0], (x, y)))


def test_repeated_calls_on_packed_views_read_each_new_array(device):
    """A numpy view the call must pack first (negative strides, strides that are not whole elements)
    gets no plan: each repeated call packs its own array (a plan over the first call's packed copy
    read the next arrays' memory with the copy's strides: garbage, from outside the array)."""
    rng = np.random.default_rng(9)
    raw = np.zeros((16, 16 * 4 + 1), np.uint8)
    for _ in range(3):
        x, y = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
        np.testing.assert_array_equal(gm.reduce_mean(x[::-1], [1], device=device), reduce_mean_ref(x[::-1], (1,)))
        np.testing.assert_array_equal(gm.mean(x[:, ::-1], y, device=device),
                                      ((x[:, ::-1].astype(np.float64) + y) / 2).astype(np.float32))
        odd = raw[:, 1:].view(np.float32)       # rows 65 bytes apart: not whole elements
        odd[...] = x
        np.testing.assert_array_equal(gm.reduce_mean(odd, [0], device=device), reduce_mean_ref(x, (0,)))


def test_a_signature_that_differs_takes_the_full_path(device):
    """Another shape, stride, data type, axis or keepdims is another signature: each gets its own
    answer (a plan reused across signatures would give a wrong shape or wrong values)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    calls = [(x, [1], True), (x, [0], True), (x, [1], False), (x.T, [1], True), (x[:, ::2], [1], True),
             (x[:4], [1], True), (x.astype(np.float16), [1], True), (x, [-1], True)]
    for _ in range(2):
        for a, axes, keep in calls:
            res = gm.reduce_mean(a, axes, keepdims=keep, device=device)
            want = reduce_mean_ref(a, tuple(d % a.ndim for d in axes))
            np.testing.assert_array_equal(res, want if keep else want.reshape(res.shape))
            assert res.dtype == a.dtype


def test_a_plan_keeps_no_caller_array(device):
    """The plan is kept per signature, the arrays are not: a caller's array is freed when the caller
    lets go of it."""
    x = np.random.default_rng(5).standard_normal((256, 256)).astype(np.float32)
    gm.reduce_mean(x, [1], device=device)
    gm.reduce_mean(x.copy(), [1], device=device)
    ref = weakref.ref(x)
    del x
    gc.collect()
    assert ref() is None


def test_a_released_launch_is_not_replayed(device):
    """gm.free_memory gives back the launches a plan refers to: the next call takes the full path
    and makes a new launch and plan (never a launch whose buffers went back to the pool)."""
    x = np.random.default_rng(6).standard_normal((16, 16)).astype(np.float32)
    gm.reduce_mean(x, [1], device=device)
    gm.free_memory(device)
    np.testing.assert_array_equal(gm.reduce_mean(x, [1], device=device), reduce_mean_ref(x, (1,)))
    cache = gm.memory_pool(device).cache
    assert all(not p.launch.released for p in cache.plans.values())


def test_reduce_variant_slots_match_the_arguments():
    """ReduceVariant.MAIN_SLOTS and finalize_slots name where main_args and finalize_args put the
    bound input's and output's buffer and offset (the repeated launch substitutes them there)."""
    from gpu_mean.kernels import reduce_kernels
    inp, out, part, flag, meta = (object() for _ in range(5))
    for exact in (False, True):
        v = reduce_kernels.ReduceVariant(macros={}, main=None, tail=(), finalize=None, n_chunks=2,
                                         temporary_size=0, redo_open=exact)
        main = v.main_args(inp, 11, out, 13, part, 17, flag, 19, meta)
        assert main[v.MAIN_SLOTS["in"]] is inp and int(main[v.MAIN_SLOTS["in"] + 1]) == 11
        assert main[v.MAIN_SLOTS["out"]] is out and int(main[v.MAIN_SLOTS["out"] + 1]) == 13
        fin = v.finalize_args(part, 17, out, 13, flag, 19, meta, 5, 7, (), inp, 11)
        slots = v.finalize_slots
        assert fin[slots["out"]] is out and int(fin[slots["out"] + 1]) == 13
        if exact:
            assert fin[slots["in"]] is inp and int(fin[slots["in"] + 1]) == 11
        else:
            assert "in" not in slots and inp not in fin


def test_a_repeated_launch_holds_the_device_lock(device):
    """The repeated launch enqueues under the device's lock (Executor.run_bound), as every other
    launch: the queue or stream and the backend's bookkeeping are shared by every thread. (The cpu
    device has no queue: it computes from the caller's arrays, test_a_repeated_cpu_call_...)"""
    from test_interop import native
    if device.info.backend == "cpu":
        pytest.skip("the cpu device launches nothing: test_a_repeated_cpu_call_computes_where_the_arrays_lie")
    x = native(device, np.random.default_rng(7).standard_normal((256, 256)).astype(np.float32))
    gm.reduce_mean(x, [1], device=device)
    gm.reduce_mean(x, [1], device=device)
    held = []
    for ln in gm.memory_pool(device).cache.launches.values():
        program, real = ln.cop.program, ln.cop.program.run_bound

        def run_bound(*a, _real=real, **k):
            held.append(device.executor.lock.locked())
            return _real(*a, **k)
        program.run_bound = run_bound
        try:
            gm.reduce_mean(x + 1, [1], device=device)
        finally:
            del program.run_bound
    assert held and all(held)


@pytest.mark.parametrize("call", ["reduce_mean(x, [1])", "mean(x, y)"])
def test_cuda_struct_arguments_cross_as_pointers_to_their_bytes(fake, call):
    """On CUDA a kernel's by-value structs (the reduction's metadata, the element-wise inputs) go to
    CuPy as a pointer over bytes the argument holds (CuPy copies the struct's size from it), never
    as a numpy array whose array interface CuPy would ask for on every launch; the reduction's
    metadata is built once for every call of a signature."""
    dev, log = fake
    x, y = _fake_array(log, (64, 300)), _fake_array(log, (64, 300), 1)
    run = (lambda: gm.reduce_mean(x, [1], device=dev)) if call.startswith("reduce") else \
        (lambda: gm.mean(x, y, device=dev))
    run()
    ln = next(iter(gm.memory_pool(dev).cache.launches.values()))
    program = ln.cop.program
    kernels = [program.main] if hasattr(program, "main") else list(program.handles.values())
    seen = []
    for _ in range(2):
        for k in kernels:
            k.last_args = None
        run()
        args = next(k.last_args for k in kernels if k.last_args is not None)
        assert not [a for a in args if isinstance(a, np.ndarray)], "a numpy array was passed to the launch"
        structs = [a for a in args if hasattr(a, "packed")]
        assert structs and all(a.ptr == cuda.struct_address(a.packed) for a in structs)
        seen.append(structs)
    if call.startswith("reduce"):
        assert seen[0][0] is seen[1][0] is program.meta      # the metadata built once


def test_axes_equal_to_integers_are_refused_after_a_plan(device):
    """1.0, True and np.float32(1) hash and compare as 1 does: a plan made for axes [1] must not take
    them (the full path refuses them by name)."""
    x = np.ones((4, 4), np.float32)
    gm.reduce_mean(x, [1], device=device)
    gm.reduce_mean(x, [1], device=device)
    for axes in ([1.0], [True], [np.float32(1)]):
        with pytest.raises(gm.InvalidArgumentError, match="axes must be integers"):
            gm.reduce_mean(x, axes, device=device)


def test_a_repeated_call_takes_the_device_the_full_path_would(cpu, monkeypatch):
    """A call that names its device by string (or none) finds its plan only while that string still
    names the plan's device (``get_device``): a device made anew for the name gets its own plan."""
    x = np.random.default_rng(9).standard_normal((16, 16)).astype(np.float32)
    for _ in range(2):
        gm.reduce_mean(x, [1], device="cpu")
    old = arrays.get_device("cpu")
    new = gm.create_device("cpu")
    monkeypatch.setitem(arrays._default, "cpu", new)
    np.testing.assert_array_equal(gm.reduce_mean(x, [1], device="cpu"), reduce_mean_ref(x, (1,)))
    assert gm.memory_pool(new).cache.plans and old is not new


def test_the_signature_table_keeps_no_device_alive(monkeypatch):
    """The table of repeated calls' plans (``repeat._fast``) holds them weakly and keys a Device by
    its id: a device the caller lets go of is collected, plans and all."""
    log = []
    be, _ = fake_cuda_backend(monkeypatch, log)
    dev = gm.Device(be)
    a = _fake_array(log, (8, 32))
    for _ in range(3):
        gm.reduce_mean(a, [1], device=dev)
    plan = weakref.ref(next(p for p in repeat._fast.values() if p.launch.dev is dev))
    ref = weakref.ref(dev)
    del dev
    gc.collect()
    assert ref() is None and plan() is None
