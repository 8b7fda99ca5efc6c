"""The extension types (issue 21) through the frontends: gm.mean / gm.reduce_mean, the ONNX operators by
opset (each with its schema's type constraint), the ONNX backend against onnxruntime where onnxruntime
implements the type, OpenVINO's ReduceMean-1, gpu_mean.dask, bfloat16 arrays from ml_dtypes and from
DLPack producers (PyTorch), and the command line. What each device computes or refuses comes from the
one table (tests/ext_support.py)."""
from __future__ import annotations

import sys
import types

import ml_dtypes
import numpy as np
import oracle
import pytest
from ext_support import EXT_TYPES, MEAN, NARY, REDUCE, refusal, run_or_refused

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean import cli, openvino
from gpu_mean.frontends import onnx_ops

BF16 = np.dtype(ml_dtypes.bfloat16)
IDS = {"ids": lambda d: d.name}
I64_MAX = 2**63 - 1


def data(dt: D, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.is_float:
        return (rng.standard_normal(shape) * 100).astype(dt.numpy_dtype)
    info = np.iinfo(dt.numpy_dtype)
    return rng.integers(info.min, info.max, shape, dtype=dt.numpy_dtype, endpoint=True)


def close(got, want, dt: D):
    """Integers exact, floats within 1 ulp (the n-ary mean's and the reductions' promise)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if not dt.is_float:
        assert got.tolist() == want.tolist()
        return
    for g, w in zip(got.ravel(), want.ravel()):
        assert oracle.ulp_distance(g, w, dt.numpy_dtype) <= 1, (g, w)


# --- gm.mean and gm.reduce_mean ------------------------------------------------------------------

@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_functional_api_takes_and_returns_the_new_types(device, dt):
    a, b, c = data(dt, (3, 4), 1), data(dt, (4,), 2), data(dt, (3, 4), 3)
    m2 = run_or_refused(device, MEAN, dt, lambda: gm.mean(a, b, device=device))
    if m2 is not None:
        assert type(m2) is np.ndarray and m2.dtype == dt.numpy_dtype
        assert oracle.equal_bits(m2, oracle.fast_mean2(a, b, dt.numpy_dtype))      # correctly rounded
    m3 = run_or_refused(device, NARY, dt, lambda: gm.mean(a, b, c, device=device))
    if m3 is not None:
        close(m3, oracle.nary_mean([a, b, c], dt.numpy_dtype), dt)
    m1 = run_or_refused(device, NARY, dt, lambda: gm.mean(a, device=device))       # one input: a copy
    if m1 is not None:
        assert oracle.equal_bits(m1, a)
    r = run_or_refused(device, REDUCE, dt, lambda: gm.reduce_mean(a, axes=[1], keepdims=False, device=device))
    if r is not None:
        close(r, oracle.reduce_mean(a, (1,), dt.numpy_dtype).reshape(3), dt)
    if dt.is_float:   # a zero-size reduction launches nothing: NaN on every device
        assert np.isnan(gm.reduce_mean(np.zeros((2, 0), dt.numpy_dtype), [1], device=device).astype(np.float64)).all()


def test_numpys_default_dtypes_on_the_cpu_device():
    """The issue's first try: numpy's float64 and int64 defaults, and bfloat16 from ml_dtypes."""
    np.testing.assert_array_equal(gm.reduce_mean(np.ones((3, 4)), axes=[1], device="cpu"), np.ones((3, 1)))
    assert gm.reduce_mean(np.arange(5), device="cpu").tolist() == [2]
    assert gm.mean([1.0, 2.0], [3.0, 5.0], device="cpu").tolist() == [2.0, 3.5]      # lists: float64, as numpy
    x = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
    r = gm.reduce_mean(x, axes=[1], device="cpu")
    assert r.dtype == BF16 and r.astype(np.float32).ravel().tolist() == [1.5, 5.5, 9.5]


def test_default_device_refusal_says_where_the_type_computes():
    dev = gm.create_device()
    if refusal(dev, REDUCE, D.FLOAT64) is None:
        pytest.skip(f"{dev.name} computes FLOAT64")
    with pytest.raises(gm.UnsupportedTypeError, match="FLOAT64.*device 'cpu' computes it"):
        gm.reduce_mean(np.ones((3, 4)), axes=[1])


# --- bfloat16 from DLPack producers ------------------------------------------------------------------

class _FakeTensor:
    """A CPU DLPack producer in the style of PyTorch: its bfloat16 tensors export a DLPack capsule
    numpy cannot read, and ``view(int16)`` reinterprets the same memory."""

    def __init__(self, bits: np.ndarray, dtype: str):
        self._bits, self.dtype = bits, dtype

    @property
    def shape(self):
        return self._bits.shape

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kw):
        if self.dtype == "fakebf.bfloat16":
            raise BufferError("numpy's from_dlpack has no bfloat16")
        return self._bits.__dlpack__(**kw)

    def view(self, dtype):
        return _FakeTensor(self._bits.view(np.int16 if dtype == "fakebf.int16" else np.uint16), dtype)


@pytest.fixture
def fakebf(monkeypatch):
    mod = types.ModuleType("fakebf")
    mod.int16, mod.bfloat16 = "fakebf.int16", "fakebf.bfloat16"
    mod.from_dlpack = lambda a: _FakeTensor(np.from_dlpack(a).copy(), "fakebf.int16")
    _FakeTensor.__module__ = "fakebf"
    monkeypatch.setitem(sys.modules, "fakebf", mod)
    return mod


def test_bfloat16_dlpack_producer_in_and_out(fakebf, device):
    """A CPU DLPack producer's bfloat16 tensor on every device (the CUDA device's own tensors:
    tests/test_cuda_arrays.py), small and past the size bound in place."""
    for shape in ((2, 4), (256, 512)):
        x = (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 251 - 100).astype(BF16)
        t = _FakeTensor(x.view(np.int16), "fakebf.bfloat16")
        r = gm.reduce_mean(t, axes=[1], device=device)
        assert isinstance(r, _FakeTensor) and r.dtype == "fakebf.bfloat16"       # the caller's library and type
        want = gm.reduce_mean(x, axes=[1], device="cpu")
        assert np.array_equal(r._bits.view(np.uint16), want.view(np.uint16))
        m = gm.mean(t, t, device=device)
        assert m.dtype == "fakebf.bfloat16" and np.array_equal(m._bits.view(np.uint16), x.view(np.uint16))
    assert r._bits.shape == (256, 1)
    small = gm.reduce_mean(_FakeTensor(np.arange(8, dtype=np.float32).reshape(2, 4).astype(BF16).view(np.int16),
                                       "fakebf.bfloat16"), axes=[1], device=device)
    assert small._bits.view(BF16).astype(np.float32).ravel().tolist() == [1.5, 5.5]


def test_pyopencl_bfloat16_arrays(device):
    """pyopencl has no bfloat16 of its own, but its arrays carry any numpy dtype as storage: an
    ml_dtypes.bfloat16 array (to_device of one, or a uint16 array of the bits viewed as bfloat16, no
    copy) is taken in place and the result is a pyopencl bfloat16 array on the input's queue. A
    uint16 array is refused naming that view."""
    if device.info.backend != "opencl":
        pytest.skip("pyopencl arrays run on an OpenCL device")
    import pyopencl as cl
    import pyopencl.array as cla
    x = (np.random.default_rng(21).standard_normal((64, 300)) * 100).astype(BF16)
    y = x[::-1].copy()
    q2 = cl.CommandQueue(device.cl_context)
    a = cla.to_device(q2, x)
    bits = cla.to_device(device.cl_queue, y.view(np.uint16))
    b = bits.view(BF16)
    assert b.base_data is bits.base_data
    r = gm.reduce_mean(a, axes=[1], device=device)
    assert isinstance(r, cla.Array) and r.dtype == BF16 and r.queue == q2
    assert np.array_equal(r.get().view(np.uint16), gm.reduce_mean(x, axes=[1], device="cpu").view(np.uint16))
    m = gm.mean(b, b, b, device=device)
    assert isinstance(m, cla.Array) and m.dtype == BF16
    assert np.array_equal(m.get().view(np.uint16), y.view(np.uint16))
    assert gm.Buffer.wrap_array(device, b)[1].data_type == D.BFLOAT16     # the DirectML-shaped path
    m2 = gm.mean(cla.to_device(device.cl_queue, x), b, device=device)
    assert np.array_equal(m2.get().view(np.uint16), gm.mean(x, y, device="cpu").view(np.uint16))
    with pytest.raises(gm.UnsupportedTypeError, match=r"data type uint16 is not supported.*if it holds bfloat16 "
                                                      r"bits, view it as bfloat16 without a copy: "
                                                      r"x\.view\(ml_dtypes\.bfloat16\)"):
        gm.reduce_mean(bits, axes=[1], device=device)


def test_torch_bfloat16_tensors():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: the DLPack path is tested with a "
                                                "stand-in above")
    t = torch.arange(8, dtype=torch.float32).reshape(2, 4).to(torch.bfloat16)
    r = gm.reduce_mean(t, axes=[1], device="cpu")
    assert isinstance(r, torch.Tensor) and r.dtype == torch.bfloat16
    assert r.float().ravel().tolist() == [1.5, 5.5]


# --- ONNX operators by opset --------------------------------------------------------------------------

def test_each_opset_takes_exactly_its_schemas_type_constraint():
    defs = pytest.importorskip("onnx").defs
    for op_type, versions in onnx_ops.REGISTRY.items():
        for cls in versions:
            schema = defs.get_schema(op_type, cls.since_version)
            allowed = set(next(c for c in schema.type_constraints if c.type_param_str == "T").allowed_type_strs)
            assert {onnx_ops.ONNX_NAMES[d] for d in cls.types} == allowed, cls.__name__


@pytest.mark.parametrize("op,x,pattern", [
    (onnx_ops.Mean_8, np.ones(2, BF16), r"Mean-8: data type bfloat16 is not in Mean-8's type constraint T "
                                        r"\(tensor\(float16\), tensor\(float\), tensor\(double\)\)"),
    (onnx_ops.Mean_13, np.ones(2, np.int32), r"Mean-13: data type int32 is not in Mean-13's type constraint"),
    (onnx_ops.ReduceMean_11, np.ones(2, BF16), r"ReduceMean-11: data type bfloat16 is not in"),
], ids=["Mean-8 bfloat16", "Mean-13 int32", "ReduceMean-11 bfloat16"])
def test_a_type_outside_the_opset_is_refused_naming_it(op, x, pattern):
    with pytest.raises(gm.UnsupportedTypeError, match=pattern):
        op({"axes": [0]} if op.op_type == "ReduceMean" else {}).run([x, x], "cpu")


@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_onnx_ops_of_every_opset_on_the_new_types(device, dt):
    x = data(dt, (3, 5), 7)
    for cls in onnx_ops.REGISTRY["ReduceMean"] + onnx_ops.REGISTRY["Mean"]:
        if dt not in cls.types:
            continue
        if cls.op_type == "Mean":
            got = run_or_refused(device, MEAN, dt, lambda cls=cls: cls({}).run([x, x[::-1].copy()], device))
            want = oracle.fast_mean2(x, x[::-1], dt.numpy_dtype)
        else:
            attrs = {} if cls.since_version == 18 else {"axes": [1]}
            ins = [x, np.array([1], np.int64)] if cls.since_version == 18 else [x]
            got = run_or_refused(device, REDUCE, dt, lambda cls=cls, a=attrs, i=ins: cls(a).run(i, device))
            want = oracle.reduce_mean(x, (1,), dt.numpy_dtype)
        if got is not None:
            close(got, want, dt)


# --- the ONNX backend against onnxruntime ----------------------------------------------------------------

def _model(op_type, elem, opset, shape):
    from onnx import helper, numpy_helper
    vi = helper.make_tensor_value_info
    inits, ins, attrs = [], ["a"], {}
    if op_type == "Mean":
        ins = ["a", "b"]
    elif opset >= 18:
        ins = ["a", "axes"]
        inits = [numpy_helper.from_array(np.array([1], np.int64), "axes")]
    else:
        attrs = {"axes": [1]}
    out = list(shape) if op_type == "Mean" else [shape[0], 1]
    g = helper.make_graph([helper.make_node(op_type, ins, ["y"], **attrs)], "g",
                          [vi(n, elem, list(shape)) for n in ins if n != "axes"], [vi("y", elem, out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


# what onnxruntime 1.32's CPU provider implements among the new types (README, "Data types")
ORT_IMPLEMENTS = {("ReduceMean", D.FLOAT64), ("ReduceMean", D.INT64)}


def _ort(model):
    """onnxruntime's answer, or None where it implements no kernel for the type (1.32 on CPU: Mean
    has float and float16 only; ReduceMean has no bfloat16, uint32 or uint64)."""
    ort = pytest.importorskip("onnxruntime")
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:   # NOT_IMPLEMENTED
        assert "NOT_IMPLEMENTED" in str(e) or "implementation" in str(e), e
        return None
    return sess


@pytest.mark.parametrize("spec", ["cpu", "opencl:0"])
@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_onnx_models_through_the_backend(spec, dt):
    """Every ONNX model of Mean / ReduceMean whose opset takes ``dt``, run by the ONNX backend on
    ``spec`` against the oracle, and against onnxruntime where onnxruntime implements it."""
    pytest.importorskip("onnx")
    from onnx import helper

    from gpu_mean import backends, onnx_backend
    found, why = backends._discover(spec.split(":")[0])
    if not found:
        pytest.skip(f"{spec} absent: {why}")
    dev = gm.create_device(spec)
    elem = helper.np_dtype_to_tensor_dtype(dt.numpy_dtype)
    x, y = data(dt, (4, 6), 11), data(dt, (4, 6), 12)
    ran = 0
    for op_type, opset in [("Mean", 8), ("Mean", 13), ("ReduceMean", 1), ("ReduceMean", 11),
                           ("ReduceMean", 13), ("ReduceMean", 18)]:
        cls = onnx_ops.get_op(op_type, opset)
        if dt not in cls.types:
            continue
        model = _model(op_type, elem, opset, x.shape)
        ins = [x, y] if op_type == "Mean" else [x]
        want = oracle.fast_mean2(x, y, dt.numpy_dtype) if op_type == "Mean" else oracle.reduce_mean(
            x, (1,), dt.numpy_dtype)
        op = MEAN if op_type == "Mean" else REDUCE
        got = run_or_refused(dev, op, dt, lambda m=model, i=ins: onnx_backend.prepare(m, spec).run(i)[0])
        if got is None:
            continue
        close(got, want, dt)
        ran += 1
        sess = _ort(model)
        assert (sess is not None) == ((op_type, dt) in ORT_IMPLEMENTS), \
            f"onnxruntime {pytest.importorskip('onnxruntime').__version__} changed: {op_type} over {dt.name}"
        if sess is not None:
            # on data whose sums are exact in double (onnxruntime's integer accumulator; past that, the
            # next test), onnxruntime agrees: integers exactly, floats within 1 ulp
            small = [v % 1000 if not dt.is_float else v for v in ins]
            ours = onnx_backend.prepare(model, spec).run(small)[0]
            theirs = sess.run(None, dict(zip(["a", "b"], small)))[0]
            close(theirs, ours, dt)
    assert ran or refusal(dev, MEAN, dt) or refusal(dev, REDUCE, dt)


def test_where_onnxruntime_is_the_less_accurate_one():
    """onnxruntime 1.32's CPU ReduceMean sums int64 in double (wrong past 2^53) and float64 in plain
    double (drifts on long rows, overflows past DBL_MAX); gpu_mean's answers are the oracle's."""
    pytest.importorskip("onnx")
    from onnx import TensorProto

    from gpu_mean import onnx_backend
    rows = np.array([[2**62 + 1] * 4, [-(2**63), -(2**63), -(2**63), 5], [I64_MAX] * 3 + [-I64_MAX]], np.int64)
    model = _model("ReduceMean", TensorProto.INT64, 18, rows.shape)
    ours = onnx_backend.prepare(model, "cpu").run([rows])[0]
    assert ours.tolist() == oracle.reduce_mean(rows, (1,), np.int64).tolist()
    sess = _ort(model)
    if sess is not None:
        theirs = sess.run(None, {"a": rows})[0]
        assert (theirs != ours).all(), theirs      # each row: off by one or more
    x = np.array([[1.0, 1e-16, 1e-16, 1e-16] * 1000, [1.7e308] * 4000])
    model = _model("ReduceMean", TensorProto.DOUBLE, 18, x.shape)
    ours = onnx_backend.prepare(model, "cpu").run([x])[0]
    want = oracle.reduce_mean(x, (1,), np.float64)
    assert oracle.equal_bits(ours, want)
    sess = _ort(model)
    if sess is not None:
        theirs = sess.run(None, {"a": x})[0]
        assert theirs[0, 0] != want[0, 0] and np.isinf(theirs[1, 0])


def test_bfloat16_initializers_and_mean_13():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from gpu_mean import onnx_backend
    vi = helper.make_tensor_value_info
    w = np.array([1.0, 2.0, 3.0], np.float32).astype(BF16)
    g = helper.make_graph([helper.make_node("Mean", ["a", "w"], ["y"])], "g", [vi("a", TensorProto.BFLOAT16, [3])],
                          [vi("y", TensorProto.BFLOAT16, [3])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    y = onnx_backend.prepare(m, "cpu").run([np.array([3.0, 2.0, 1 + 2**-7], np.float32).astype(BF16)])[0]
    assert y.dtype == BF16 and y.astype(np.float64).tolist() == [2.0, 2.0, 2.0]   # (3 + 1 + 2^-7) / 2 ties to 2


# --- OpenVINO, Dask ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_openvino_reduce_mean_1(device, dt):
    x = data(dt, (3, 4, 5), 4)
    got = run_or_refused(device, REDUCE, dt, lambda: openvino.reduce_mean(x, [0, 2], keep_dims=True, device=device))
    if got is not None:
        close(got, oracle.reduce_mean(x, (0, 2), dt.numpy_dtype), dt)


@pytest.mark.parametrize("dt", EXT_TYPES, **IDS)
def test_dask_takes_and_returns_the_new_types(dt):
    da = pytest.importorskip("dask.array")
    import dask

    import gpu_mean.dask as gmd
    x = data(dt, (40, 33), 9)
    if dt.is_float:
        x[3, :5] = x[3, :5] * 0 + [1e30, -1e30, 1, 2**-30, 5]       # cancellation across a chunk edge
    with dask.config.set(scheduler="synchronous"):
        r = gmd.reduce_mean(da.from_array(x, chunks=(7, 10)), axes=[1], keepdims=False, device="cpu").compute()
        m = gmd.mean(da.from_array(x, chunks=(7, 10)), da.from_array(x[:1], chunks=(1, 10)), device="cpu").compute()
    assert r.dtype == dt.numpy_dtype and m.dtype == dt.numpy_dtype
    close(r, oracle.reduce_mean(x, (1,), dt.numpy_dtype).reshape(-1), dt)
    assert oracle.equal_bits(m, oracle.fast_mean2(x, x[:1], dt.numpy_dtype))


@pytest.mark.parametrize("dt", [D.INT64, D.UINT64], **IDS)
def test_dask_integer_totals_past_128_bits_of_chunks(dt):
    """Two-word partial sums combine with carries: 64 chunks of extremes, exact and truncated."""
    da = pytest.importorskip("dask.array")
    import dask

    import gpu_mean.dask as gmd
    info = np.iinfo(dt.numpy_dtype)
    x = np.full((2, 640), info.max, dt.numpy_dtype)
    x[1] = info.min if dt == D.INT64 else 1
    x[1, -1] = 3
    with dask.config.set(scheduler="synchronous"):
        r = gmd.reduce_mean(da.from_array(x, chunks=(2, 10)), axes=[1], device="cpu").compute()
    assert r.ravel().tolist() == oracle.reduce_mean(x, (1,), dt.numpy_dtype).ravel().tolist()


def test_dask_chunk_on_a_device_without_the_kernel_is_refused():
    pytest.importorskip("dask.array", reason="gpu_mean.dask needs Dask (pip install 'gpu_mean[dask]')")
    from gpu_mean import backends
    from gpu_mean.dask import partials
    found, why = backends._discover("opencl")
    if not found:
        pytest.skip(f"no OpenCL device: {why}")
    dev = gm.create_device("opencl:0")
    pattern = refusal(dev, gm.ext.ReduceSumDesc.kernel_op, D.INT64)
    if pattern is None:
        pytest.skip("the OpenCL backend computes INT64")
    with pytest.raises(gm.UnsupportedTypeError, match=pattern):
        partials.chunk_sum(np.ones((3, 4), np.int64), (1,), device=dev)


# --- the command line ------------------------------------------------------------------------------------

def test_profile_names_the_new_types_and_refuses_clearly(capsys):
    assert cli.main(["profile", "--device", "cpu", "--size-mb", "0.05", "--repeat", "1", "--dtype", "bf16",
                     "--dtype", "int64", "--op", "reduce", "--shape", "64,32", "--axes", "1"]) == 0
    out = capsys.readouterr().out
    assert "reduce bf16 axes [1] (ext)" in out and "reduce int64 axes [1] (ext)" in out and "0 skipped" in out
    with pytest.raises(SystemExit):
        cli.main(["profile", "--dtype", "int8"])
    assert "choose from f32, f16, bf16, f64" in capsys.readouterr().err
    from gpu_mean import backends
    if backends._discover("opencl")[0]:
        dev = gm.create_device("opencl:0")
        assert cli.main(["profile", "--device", "opencl:0", "--size-mb", "0.05", "--repeat", "1", "--dtype", "f64",
                         "--op", "mean", "--shape", "64,32"]) == 0
        out = capsys.readouterr().out
        if refusal(dev, MEAN, D.FLOAT64):
            assert "skipped mean f64 a+b (ext)" in out and "not built yet on the OpenCL backend" in out
            assert "Traceback" not in out


def test_conformance_extension_rows_on_the_cpu(capsys, tmp_path):
    path = tmp_path / "c.json"
    assert cli.main(["conformance", "--device", "cpu", "--quick", "--op", "ext_mean", "--op", "ext_reduce",
                     "--op", "nary", "--dtype", "bf16", "--dtype", "INT64", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "gm.ext operators: gpu_mean's extensions, not DirectML's" in out
    assert "ext.ReduceMean  [FL 3.0: 1-8 dimensions, BFLOAT16, FLOAT64, INT64, UINT64]" in out
    lines = out.splitlines()
    i = lines.index(next(ln for ln in lines if ln.startswith("ext.Mean ")))
    assert lines[i + 2].split()[:2] == ["BFLOAT16", "pass"] and lines[i + 3].split()[:2] == ["INT64", "pass"]
