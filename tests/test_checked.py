"""The bounds-checked kernel build (gpu_mean/kernels/checked.py, opencl_kernels/common.h).

Planted bugs: a launch that hands a kernel an offset one element too far (the classic off-by-one of
host code) makes every kernel family read past its input or write past its output. On the unchecked
device the read silently gives a wrong answer and the write lands in the guard bytes after the
output; on the checked device (both kernel shapes) the same launch raises KernelBoundsError naming
the kernel, the argument, the index and the bounds, and the guard bytes stay untouched (the access
went to the status buffer's sink). With the checker's error switched off, nothing is raised: the
error comes from the checker, not from anything else. The reversed local ids are shown on a kernel
that records its ids.
"""
from __future__ import annotations

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.backends import opencl
from gpu_mean.kernels import checked
from gpu_mean.kernels.source import kernel_source
from gpu_mean.kernels.typespell import header

pytestmark = pytest.mark.skipif(not opencl.discover()[0], reason="no OpenCL device")

GUARD = 256     # bytes after every binding, inside the same buffer
GUARD_VALUE = 1e6


def _unchecked_twin(dev):
    """The same kernel shape without the checks (a fresh backend: its own programs)."""
    return gm.Device(opencl.make_backend(0, gpu_paths=dev.backend.gpu_paths))


def _binding(dev, values: np.ndarray):
    """A buffer holding ``values`` then GUARD bytes of GUARD_VALUE; the binding covers ``values`` only."""
    raw = np.concatenate([values.ravel(), np.full(GUARD // values.itemsize, GUARD_VALUE, values.dtype)])
    buf = dev.create_buffer(raw.nbytes)
    buf.write(raw.view(np.uint8))
    return buf, gm.BufferBinding(buf, 0, values.nbytes)


def _plant(monkeypatch, kernel_prefix: str, arg: int, shift: int):
    """Every later launch of a kernel whose name starts with ``kernel_prefix`` gets argument ``arg``
    (an element offset) ``shift`` too large."""
    real = opencl.KernelArgs.set_all

    def set_all(self, args):
        value = args[arg] if len(args) > arg else None
        if isinstance(value, np.generic) and self.kernel.function_name.startswith(kernel_prefix):
            args = args[:arg] + (type(value)(int(value) + shift),) + args[arg + 1:]
        real(self, args)
    monkeypatch.setattr(opencl.KernelArgs, "set_all", set_all)


def _reduce(dev, x: np.ndarray):
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, gm.TensorDesc(D.FLOAT32, x.shape),
                         gm.TensorDesc(D.FLOAT32, (x.shape[0], 1)), [1])
    cop = dev.compile_operator(dev.create_operator(desc))
    ib, ibind = _binding(dev, x)
    ob, obind = _binding(dev, np.zeros(x.shape[0], np.float32))
    return cop, [ibind], [obind], ob


def _mean(dev, a: np.ndarray, b: np.ndarray):
    t = gm.TensorDesc(D.FLOAT32, a.shape)
    cop = dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(t, t, t)))
    (_, ia), (_, ib) = _binding(dev, a), _binding(dev, b)
    ob, obind = _binding(dev, np.zeros(a.shape, np.float32))
    return cop, [ia, ib], [obind], ob


def _outputs(buf, n: int):
    raw = buf.read().view(np.float32)
    return raw[:n], raw[n:]


X = np.arange(4 * 1000, dtype=np.float32).reshape(4, 1000) / 7
A, B = X[:2].copy(), X[2:].copy()

# (name, builder, kernel prefix, argument planted, shift in elements, argument named in the error,
# expected result). The element-wise kernels store 16-byte vectors where the host found the output
# aligned: their planted offset moves by a whole vector, so that the unchecked run stays aligned.
CASES = [
    ("reduce-read", lambda d: _reduce(d, X), "gm_reduce_", 1, 1, "input", X.mean(axis=1, dtype=np.float64)),
    ("reduce-write", lambda d: _reduce(d, X), "gm_reduce_", 3, 1, "output", X.mean(axis=1, dtype=np.float64)),
    ("mean-write", lambda d: _mean(d, A, B), "gm_ew_", 1, 4, "output", (A.astype(np.float64) + B) / 2),
    # arguments out, out_off, n, scale, bias, then input 0's buffer and offset (argument 6)
    ("mean-read", lambda d: _mean(d, A, B), "gm_ew_", 6, 4, "input 0", (A.astype(np.float64) + B) / 2),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_planted_out_of_bounds_access_is_caught(checked_device, monkeypatch, case):
    name, build, prefix, arg, shift, argument, want = case
    n = want.size
    # unchecked: the planted launch runs, and the damage is real (a wrong result, or guard bytes written)
    plain = _unchecked_twin(checked_device)
    cop, ins, outs, ob = build(plain)
    with monkeypatch.context() as m:
        _plant(m, prefix, arg, shift)
        cop.execute(inputs=ins, outputs=outs)
    got, guard = _outputs(ob, n)
    if argument == "output":
        assert np.any(guard != GUARD_VALUE), "the planted write should land in the guard bytes"
    else:
        assert not np.allclose(got, want.ravel(), rtol=1e-6), "the planted read should change the result"
    # checked: the same launch raises, naming the access, and nothing past the binding is touched
    cop, ins, outs, ob = build(checked_device)
    with monkeypatch.context() as m:
        _plant(m, prefix, arg, shift)
        with pytest.raises(gm.KernelBoundsError) as e:
            cop.execute(inputs=ins, outputs=outs)
    err = e.value
    assert err.kernel.startswith(prefix) and err.argument.startswith(argument), str(err)
    lo, hi = err.bounds
    assert hi < err.index + err.width <= hi + shift, str(err)    # the planted shift too far
    assert err.kernel in str(err) and f"[{lo}, {hi})" in str(err)
    assert np.all(_outputs(ob, n)[1] == GUARD_VALUE), "a checked kernel wrote past its output binding"
    assert checked_device.get_device_removed_reason() is None
    # the device keeps working, and an honest launch passes the checks
    cop, ins, outs, ob = build(checked_device)
    cop.execute(inputs=ins, outputs=outs)
    np.testing.assert_allclose(_outputs(ob, n)[0], want.ravel(), rtol=1e-6)
    # with the checker's error switched off the same launch raises nothing: the error above is the checker's
    cop, ins, outs, ob = build(checked_device)
    with monkeypatch.context() as m:
        _plant(m, prefix, arg, shift)
        m.setattr(checked.StatusBuffer, "check", lambda self, kernel: None)
        cop.execute(inputs=ins, outputs=outs)
    assert np.all(_outputs(ob, n)[1] == GUARD_VALUE), "the redirected access must not reach the guard bytes"


def test_the_functional_calls_run_checked():
    dev = gm.create_device("opencl:0-checked")
    assert dev.info.id == "opencl:0-checked" and dev.backend.checked
    assert gm.create_device("opencl:0", checked=True).backend is dev.backend
    x = np.linspace(-3, 5, 3 * 517, dtype=np.float32).reshape(3, 517)
    np.testing.assert_allclose(gm.reduce_mean(x, axes=[1], keepdims=False, device=dev), x.mean(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(gm.mean(x, x, device=dev), x)


def test_the_cpu_device_has_no_checked_build():
    with pytest.raises(gm.UnsupportedError, match="no bounds-checked build"):
        gm.create_device("cpu-checked")


ORDER_KERNEL = """
__kernel void order(__global int* slots, __global int* counter GM_CHK_P) {
    *GM_AT(0, int, slots, get_global_id(0), 1) = atomic_inc(counter);
}
"""


@pytest.mark.parametrize("is_checked", [False, True])
def test_the_checked_build_reverses_local_ids(is_checked):
    """PoCL runs a work-group's work-items one after another in id order; in a checked build the
    kernel sees local id size - 1 - l on the work-item with id l (global ids follow), so they run in
    reverse logical order, and a missing barrier shows whichever way its reader looks."""
    import pyopencl as cl
    be = opencl.make_backend(0)
    src = (header({"GM_CHECKED": int(is_checked)}) + kernel_source("opencl_kernels", "dialect.h")
           + kernel_source("opencl_kernels", "common.h") + ORDER_KERNEL)
    prg = cl.Program(be.ctx, src).build()
    n, wg = 64, 16
    mf = cl.mem_flags
    slots = cl.Buffer(be.ctx, mf.READ_WRITE, 4 * n)
    counter = cl.Buffer(be.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(1, np.int32))
    args = [slots, counter]
    if is_checked:
        words = checked.status_words([checked.Bound("slots", 0, n)])
        args.append(cl.Buffer(be.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=words))
    prg.order(be.queue, (n,), (wg,), *args)
    ran = np.zeros(n, np.int32)
    cl.enqueue_copy(be.queue, ran, slots)
    assert sorted(ran.tolist()) == list(range(n))
    within = ran.reshape(n // wg, wg) - ran.reshape(n // wg, wg).min(axis=1, keepdims=True)
    # the position in its group's run of each logical local id
    want = np.arange(wg)[::-1] if is_checked else np.arange(wg)
    assert all(np.array_equal(row, want) for row in within), within
    if is_checked:
        rec = np.zeros(checked.RECORD_WORDS, np.int64)
        cl.enqueue_copy(be.queue, rec, args[2])
        assert rec.view(np.int32)[0] == 0



NEIGHBOUR_KERNEL = """
__kernel void neighbour(__global int* out GM_CHK_P) {
    __local int s[16];
    const int l = (int)get_local_id(0);
    s[l] = 100 + l + 1000 * (int)get_group_id(0);   // stale values from another group never look right
    BARRIER
    *GM_AT(0, int, out, get_global_id(0), 1) = l > 0 ? s[l - 1] : 99;
}
"""


@pytest.mark.parametrize("barrier", [False, True])
def test_a_missing_barrier_shows_only_with_reversed_ids(barrier):
    """Each work-item reads what its lower neighbour wrote to local memory. Without the barrier, PoCL's
    in-order run hides the race (the neighbour always ran first) and the unchecked build gives the
    right answer; the checked build runs the neighbour after the reader, and the answer is wrong.
    With the barrier both are right. (PoCL adds barriers of its own at loops that contain one, so a
    race across loop iterations cannot show here at all: this is the straight-line case.)"""
    import pyopencl as cl
    be = opencl.make_backend(0)
    results = {}
    for is_checked in (False, True):
        src = (header({"GM_CHECKED": int(is_checked), "BARRIER": "barrier(CLK_LOCAL_MEM_FENCE);" if barrier else ""})
               + kernel_source("opencl_kernels", "dialect.h") + kernel_source("opencl_kernels", "common.h")
               + NEIGHBOUR_KERNEL)
        prg = cl.Program(be.ctx, src).build()
        out = cl.Buffer(be.ctx, cl.mem_flags.READ_WRITE, 4 * 32)
        args = [out]
        if is_checked:
            words = checked.status_words([checked.Bound("out", 0, 32)])
            args.append(cl.Buffer(be.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=words))
        prg.neighbour(be.queue, (32,), (16,), *args)
        got = np.zeros(32, np.int32)
        cl.enqueue_copy(be.queue, got, out)
        results[is_checked] = got.reshape(2, 16)
    want = np.r_[99, 100 + np.arange(15)] + np.array([[0], [1000]])
    want[:, 0] = 99
    np.testing.assert_array_equal(results[False], want)
    if barrier:
        np.testing.assert_array_equal(results[True], want)
    else:
        assert not np.array_equal(results[True], want), "the reversed ids should expose the missing barrier"
