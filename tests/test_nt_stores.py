"""Streaming stores of the CPU shape's element-wise kernels (elementwise.cl: STOREV_NT, the
*_nt_serial kernels; elementwise_kernels.nt_stores): taken for outputs of at least
OpenCLTuning.nt_store_min_bytes whose operands are 16-byte aligned, the same bits as the ordinary
stores. Run on a backend whose threshold is zero (every output takes them), against the exact oracle
and against the default backend, with the kernel each launch used recorded."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.backends import opencl
from gpu_mean.descriptors.types import KernelOp
from gpu_mean.kernels import elementwise_kernels, opencl_geometry

pytestmark = pytest.mark.skipif(not opencl.discover()[0], reason="no OpenCL device")


@pytest.fixture(scope="module")
def nt_dev():
    return gm.Device(opencl.make_backend(0, tuning=opencl_geometry.OpenCLTuning(nt_store_min_bytes=0)))


@pytest.fixture
def launched(nt_dev, monkeypatch):
    """The names of the kernels the NT device launches."""
    names: list[str] = []
    be = nt_dev.backend
    real = be.launch

    def launch(h, args, geo, traffic):
        names.append(geo.kernel)
        return real(h, args, geo, traffic)
    monkeypatch.setattr(be, "launch", launch)
    return names


def _mean_desc(dt, shape, b_shape=None):
    b = gm.TensorDesc(dt, shape, strides=[0] * (len(shape) - 1) + [1]) if b_shape == "broadcast" else \
        gm.TensorDesc(dt, shape)
    cls = gm.ElementWiseMeanDesc if dt in (D.FLOAT32, D.FLOAT16, D.INT32, D.UINT32) else gm.ext.MeanDesc
    return cls(gm.TensorDesc(dt, shape), b, gm.TensorDesc(dt, shape))


@pytest.mark.parametrize("dt", [D.FLOAT32, D.INT32, D.FLOAT16, D.BFLOAT16])
@pytest.mark.parametrize("layout, kernel", [("packed", "gm_ew_contig_nt_serial"),
                                            ("broadcast", "gm_ew_rows_nt_serial")])
def test_element_wise_mean(nt_dev, launched, dt, layout, kernel):
    """Contiguous (a tail past the last 64 elements) and broadcast rows (each row's last run 24
    elements: vectors and a tail; rows 2072 elements apart, a multiple of 16 bytes): the streaming
    kernel is launched and every element is the oracle's (sums past the largest float among them)."""
    rng = np.random.default_rng(5)
    shape = (37, 2072)
    if dt == D.FLOAT32:
        a = (rng.uniform(-1.0, 1.0, shape) * 3.4e38).astype(np.float32)
        b = (rng.uniform(-1.0, 1.0, shape[-1]) * 3.4e38).astype(np.float32)
    elif dt in (D.FLOAT16, D.BFLOAT16):
        top = 65504.0 if dt == D.FLOAT16 else 3.38e38
        a = (rng.uniform(-1.0, 1.0, shape) * top).astype(dt.numpy_dtype)
        b = (rng.uniform(-1.0, 1.0, shape[-1]) * top).astype(dt.numpy_dtype)
    else:
        a = rng.integers(-2 ** 31, 2 ** 31, shape, dtype=np.int64).astype(np.int32)
        b = rng.integers(-2 ** 31, 2 ** 31, shape[-1], dtype=np.int64).astype(np.int32)
    b = np.broadcast_to(b, shape)
    got = run(nt_dev, _mean_desc(dt, shape, layout), [a, b])
    assert kernel in launched
    want = np.asarray(oracle.mean2(a, b, a.dtype))
    u = f"u{a.dtype.itemsize}"
    assert np.array_equal(got.view(u), want.view(u))


def test_nary_mean_and_its_redo(nt_dev, launched):
    """The FLOAT32 n-ary mean (its vector loop's second pass stores the open lanes again, also
    streaming): exact ties and sums past FLT_MAX among normal values."""
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal(70001).astype(np.float32) for _ in range(3)]
    xs[0][::7], xs[1][::7], xs[2][::7] = 3e38, 3e38, -1e-30       # sums past FLT_MAX
    xs[0][3::11], xs[1][3::11], xs[2][3::11] = 1.0, 1.0, np.float32(1 + 2 ** -22)
    desc = gm.ext.NaryMeanDesc([gm.TensorDesc(D.FLOAT32, (70001,))] * 3, gm.TensorDesc(D.FLOAT32, (70001,)))
    got = run(nt_dev, desc, xs)
    assert "gm_ew_contig_nt_serial" in launched
    want = oracle.nary_mean(xs, np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_rows_not_16_byte_apart_take_the_ordinary_kernel(nt_dev, launched):
    """Broadcast rows 2061 floats apart: a run's start is no multiple of 16 bytes, so the ordinary
    rows kernel (bindings themselves are 16-byte aligned: DirectML's rule), the same bits."""
    rng = np.random.default_rng(7)
    shape = (9, 2061)
    a, b = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[-1]).astype(np.float32)
    got = run(nt_dev, _mean_desc(D.FLOAT32, shape, "broadcast"), [a, np.broadcast_to(b, shape)])
    assert "gm_ew_rows_serial" in launched and not any("_nt_" in k for k in launched)
    want = oracle.mean2(a, np.broadcast_to(b, shape), np.float32)
    assert np.array_equal(got.view(np.uint32), np.asarray(want).view(np.uint32))


@pytest.mark.parametrize("dt, op, want", [(D.FLOAT32, KernelOp.MEAN, True), (D.FLOAT64, KernelOp.MEAN, True),
                                          (D.FLOAT16, KernelOp.MEAN, True), (D.BFLOAT16, KernelOp.MEAN, True),
                                          (D.INT64, KernelOp.MEAN, True)])
def test_which_variants_stream(dt, op, want):
    """Plain vstores, FLOAT16's converting one and BFLOAT16's stream; below the threshold and in the
    checked build nothing streams."""
    from gpu_mean.runtime import planning
    plan = planning.ElementwisePlan(op=op, dtype=dt, shape=(1 << 22,), strides=((1,), (1,), (1,)), n_inputs=2)
    zero = opencl_geometry.OpenCLTuning(nt_store_min_bytes=0)
    v = elementwise_kernels.cpu_variant(plan, fp64=True, max_param_bytes=4096, tuning=zero)
    assert (v.vec is not None and v.vec.kernel == "gm_ew_contig_nt_serial") == want
    assert elementwise_kernels.cpu_variant(plan, fp64=True, max_param_bytes=4096, tuning=zero, checked=True).vec is None
    big = opencl_geometry.OpenCLTuning(nt_store_min_bytes=(1 << 22) * int(dt.element_size) + 1)
    assert elementwise_kernels.cpu_variant(plan, fp64=True, max_param_bytes=4096, tuning=big).vec is None


def test_distinct_buffers_never_overlap():
    """Distinct device buffers are distinct memory whatever their handles' addresses (the in-place
    decision of ElementwiseProgram compared ranges at the handles' addresses, so that two buffers whose
    handles lay closer than their sizes took the in-place kernels); a buffer is its own memory, and
    buffers over the same host array compare by the array's address."""
    be = opencl.make_backend(0)
    bufs = [be.cl.Buffer(be.ctx, be.cl.mem_flags.READ_WRITE, 1 << 20) for _ in range(8)]
    mems = [be.memory(b) for b in bufs]
    assert len({m for m, _ in mems}) == len(bufs) and all(base == 0 for _, base in mems)
    assert be.memory(bufs[0]) == be.memory(bufs[0])
    host = np.zeros(1024, np.float32)
    h1 = be.cl.Buffer(be.ctx, be.cl.mem_flags.READ_WRITE | be.cl.mem_flags.USE_HOST_PTR, hostbuf=host)
    assert be.memory(h1) == ("host", host.__array_interface__["data"][0])


def test_in_place_mean_streams_and_keeps_the_bits(nt_dev, launched):
    """The output bound over its first input (DirectML allows it): each element is read before the
    same work-item streams its result over it."""
    from helpers import upload
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(40000).astype(np.float32), rng.standard_normal(40000).astype(np.float32)
    desc = _mean_desc(D.FLOAT32, (40000,))
    cop = nt_dev.compile_operator(nt_dev.create_operator(desc))
    t = desc.input_tensors()[0]
    ab, bb = upload(nt_dev, t, a), upload(nt_dev, t, b)
    binding = gm.BufferBinding(ab, 0, t.total_size_in_bytes)
    cop.execute(inputs=[binding, gm.BufferBinding(bb, 0, t.total_size_in_bytes)], outputs=[binding])
    got = ab.read_tensor(t, 0)
    assert "gm_ew_contig_nt_serial" in launched
    assert np.array_equal(got.view(np.uint32), np.asarray(oracle.mean2(a, b, np.float32)).view(np.uint32))
