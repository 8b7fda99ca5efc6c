"""ONNX Mean / ReduceMean semantics, OpenVINO ReduceMean-1 and the functional API, on every device;
peers compared where they are right, and named tests where gpu_mean deliberately differs."""
from __future__ import annotations

import numpy as np
import oracle
import pytest

import gpu_mean as gm
from gpu_mean import openvino
from gpu_mean.frontends import onnx_ops


def test_mean_broadcast_three_ranks(device):
    rng = np.random.default_rng(0)
    a = rng.random((4,)).astype(np.float32)
    b = rng.random((3, 4)).astype(np.float32)
    c = rng.random((2, 1, 4)).astype(np.float32)
    got = gm.mean(a, b, c, device=device)
    assert got.shape == (2, 3, 4) and got.dtype == np.float32
    ab, bb, cb = np.broadcast_arrays(a, b, c)
    for idx in np.ndindex(got.shape):
        exact = (oracle.exact(ab[idx]) + oracle.exact(bb[idx]) + oracle.exact(cb[idx])) / 3
        assert oracle.ulp_distance(got[idx], oracle.round_fraction(exact, np.float32), np.float32) <= 1


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32, np.uint32])
def test_mean_one_two_many(device, dt):
    xs = [np.arange(1, 7, dtype=dt).reshape(2, 3) * (k + 1) for k in range(5)]
    np.testing.assert_array_equal(gm.mean(xs[0], device=device), xs[0])
    for n in (2, 5):
        got = gm.mean(*xs[:n], device=device)
        want = sum(x.astype(np.float64) for x in xs[:n]) / n
        if np.dtype(dt).kind in "iu":
            want = np.trunc(want)
        np.testing.assert_array_equal(got, want.astype(dt))


def test_mean_scalar_and_empty(device):
    assert gm.mean(np.float32(3), np.float32(4), device=device).shape == ()
    assert gm.mean(np.zeros((0, 3), np.float32), np.zeros((1, 3), np.float32), device=device).shape == (0, 3)


def test_mean_errors(device):
    with pytest.raises(gm.InvalidArgumentError, match="one type T"):
        gm.mean(np.zeros(3, np.float32), np.zeros(3, np.float16), device=device)
    with pytest.raises(gm.InvalidArgumentError, match="do not broadcast"):
        gm.mean(np.zeros(3, np.float32), np.zeros(4, np.float32), device=device)
    with pytest.raises(gm.UnsupportedTypeError, match="int8 is not supported; the mean operators take float32"):
        gm.mean(np.zeros(3, np.int8), np.zeros(3, np.int8), device=device)
    with pytest.raises(gm.UnsupportedTypeError, match="complex64 is not supported"):
        gm.reduce_mean(np.zeros(3, np.complex64), device=device)
    with pytest.raises(gm.InvalidArgumentError, match="at least one"):
        gm.mean(device=device)


def test_opset_registry():
    assert onnx_ops.get_op("Mean", 7) is onnx_ops.Mean_6
    assert onnx_ops.get_op("Mean", 12) is onnx_ops.Mean_8
    assert onnx_ops.get_op("ReduceMean", 17) is onnx_ops.ReduceMean_13
    assert onnx_ops.get_op("ReduceMean", 21) is onnx_ops.ReduceMean_18
    assert onnx_ops.get_op("Relu", 13) is None


def test_mean_legacy_opsets(device):
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(onnx_ops.Mean_1({"consumed_inputs": [0, 1]}).run([x, x * 3], device), x * 2)
    with pytest.raises(gm.InvalidArgumentError, match="same-shaped"):
        onnx_ops.Mean_6({}).run([x, np.ones((3,), np.float32)], device)
    assert onnx_ops.Mean_8({}).run([x, np.ones((3,), np.float32)], device).shape == (2, 3)


def test_reduce_mean_opsets(device):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(onnx_ops.ReduceMean_1({"axes": [1], "keepdims": 0}).run([x], device), x.mean(1))
    with pytest.raises(gm.InvalidArgumentError, match="negative"):
        onnx_ops.ReduceMean_1({"axes": [-1]}).run([x], device)
    np.testing.assert_array_equal(onnx_ops.ReduceMean_11({"axes": [-1]}).run([x], device), x.mean(-1, keepdims=True))
    np.testing.assert_array_equal(onnx_ops.ReduceMean_13({}).run([x], device), x.mean(keepdims=True))
    r18 = onnx_ops.ReduceMean_18({"noop_with_empty_axes": 1})
    np.testing.assert_array_equal(r18.run([x, np.array([], np.int64)], device), x)
    np.testing.assert_array_equal(r18.run([x, np.array([0, 2], np.int64)], device), x.mean((0, 2), keepdims=True))
    np.testing.assert_array_equal(onnx_ops.ReduceMean_18({}).run([x, np.array([], np.int64)], device),
                                  x.mean(keepdims=True))


def test_reduce_mean_axes_errors(device):
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(gm.InvalidArgumentError, match="twice"):
        gm.reduce_mean(x, [1, -2], device=device)   # onnxruntime and OpenVINO accept this silently
    with pytest.raises(gm.InvalidArgumentError, match="out of range"):
        gm.reduce_mean(x, [3], device=device)


def test_reduce_over_zero_size_dimension(device):
    # ONNX calls it undefined, onnxruntime and OpenVINO give 0: gpu_mean gives NaN for floats, 0 for ints
    r = gm.reduce_mean(np.zeros((2, 0, 3), np.float32), [1], device=device)
    assert r.shape == (2, 1, 3) and np.all(np.isnan(r))
    r = gm.reduce_mean(np.zeros((2, 0), np.uint32), [1], keepdims=False, device=device)
    assert r.shape == (2,) and np.all(r == 0)
    assert gm.reduce_mean(np.zeros((0, 3), np.float32), [1], device=device).shape == (0, 1)


def test_reduce_mean_high_rank_merges(device):
    x = np.random.default_rng(1).random((2,) * 10).astype(np.float32)
    got = gm.reduce_mean(x, list(range(5)), keepdims=False, device=device)
    np.testing.assert_allclose(got.reshape(32), x.reshape(32, 32).mean(0), rtol=1e-6)
    assert got.shape == (2,) * 5
    with pytest.raises(gm.UnsupportedError, match="rank 10"):
        gm.reduce_mean(x, [0, 2, 4, 6, 8], device=device)


def test_integer_means_exact_where_peers_overflow(device):
    # OpenVINO sums int32 in float32 (-1073741824); onnx.reference wraps (-1)
    x = np.array([2**31 - 1, 2**31 - 1], np.int32)
    assert gm.reduce_mean(x, device=device)[0] == 2**31 - 1
    assert gm.reduce_mean(np.full(2, 2**24 + 1, np.int32), device=device)[0] == 2**24 + 1
    assert gm.reduce_mean(np.full(3000, 10**6, np.int32), device=device)[0] == 10**6
    assert gm.reduce_mean(np.array([-2, -3], np.int32), device=device)[0] == -2
    # onnxruntime does not implement uint32; OpenVINO treats values >= 2^31 as negative
    assert gm.reduce_mean(np.array([2**32 - 1, 2**32 - 3], np.uint32), device=device)[0] == 2**32 - 2
    assert gm.mean(np.uint32([2**32 - 1]), np.uint32([2**32 - 1]), np.uint32([2**32 - 1]),
                   device=device)[0] == 2**32 - 1


def test_fp16_means_from_a_wide_accumulator(device):
    # the ONNX reference accumulates in fp16: inf; onnxruntime is 1 ulp low; OpenVINO +1 %
    assert gm.reduce_mean(np.full(2, 65504, np.float16), device=device)[0] == 65504
    assert gm.mean(np.float16([65504]), np.float16([65504]), np.float16([65504]), device=device)[0] == 65504
    assert gm.reduce_mean(np.full(10**6, 0.1, np.float16), device=device)[0] == np.float16(0.1)


def test_fp32_long_mean_within_one_ulp(device):
    # onnxruntime +1 %, OpenVINO +8.8 % on 1e7 x 0.1
    got = gm.reduce_mean(np.full(10**7, 0.1, np.float32), device=device)[0]
    assert oracle.ulp_distance(got, np.float32(0.1), np.float32) <= 1


def test_openvino_reduce_mean(device):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(openvino.reduce_mean(x, [], device=device), x)     # empty axes: identity
    np.testing.assert_array_equal(openvino.reduce_mean(x, 1, device=device), x.mean(1))  # keep_dims false
    np.testing.assert_array_equal(openvino.reduce_mean(x, [0, -1], keep_dims=True, device=device),
                                  x.mean((0, 2), keepdims=True))
    with pytest.raises(gm.InvalidArgumentError, match="twice"):
        openvino.reduce_mean(x, [1, 1], device=device)
    with pytest.raises(gm.InvalidArgumentError, match="out of range"):
        openvino.reduce_mean(x, [-4], device=device)


# --- peers ------------------------------------------------------------------------------------

def _ort_run(node_type, inputs, attrs=None, opset=18, axes=None):
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper
    names = [f"x{i}" for i in range(len(inputs))]
    elem = helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
    ins = [helper.make_tensor_value_info(n, elem, list(x.shape)) for n, x in zip(names, inputs)]
    inits = []
    node_inputs = list(names)
    if axes is not None:
        inits.append(numpy_helper.from_array(np.asarray(axes, np.int64), "axes"))
        node_inputs.append("axes")
    node = helper.make_node(node_type, node_inputs, ["y"], **(attrs or {}))
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))[0]


@pytest.mark.parametrize("seed", range(4))
def test_matches_onnxruntime_on_random_cases(device, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, 4))
    x = rng.standard_normal(shape).astype(np.float32)
    axes = sorted(rng.choice(4, int(rng.integers(1, 4)), replace=False).tolist())
    want = _ort_run("ReduceMean", [x], {"keepdims": int(seed % 2)}, axes=axes)
    got = gm.reduce_mean(x, axes, keepdims=bool(seed % 2), device=device)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    ys = [rng.standard_normal(shape[k:]).astype(np.float32) for k in range(3)]
    # onnxruntime adds in float32 and scales by fl(1/3): a few ulp from the exact mean
    np.testing.assert_allclose(gm.mean(*ys, device=device), _ort_run("Mean", ys, opset=13), rtol=1e-5, atol=1e-6)
    xi = rng.integers(-1000, 1000, shape).astype(np.int32)
    np.testing.assert_array_equal(gm.reduce_mean(xi, axes, device=device), _ort_run("ReduceMean", [xi], axes=axes))


def test_deliberate_difference_onnxruntime_fp32_drift(device):
    x = np.full(10**7, 0.1, np.float32)
    theirs = _ort_run("ReduceMean", [x], axes=[0])[0]
    ours = gm.reduce_mean(x, [0], device=device)[0]
    assert oracle.ulp_distance(ours, np.float32(0.1), np.float32) <= 1
    assert abs(float(theirs) - 0.1) / 0.1 > 1e-4 or theirs == ours   # theirs drifts (~1 % in 1.31)


def test_deliberate_difference_onnxruntime_zero_size(device):
    x = np.zeros((2, 0), np.float32)
    theirs = _ort_run("ReduceMean", [x], axes=[1])
    assert np.all(theirs == 0)
    assert np.all(np.isnan(gm.reduce_mean(x, [1], device=device)))


def _ov_reduce_mean(x, axes, keep_dims):
    ov = pytest.importorskip("openvino")
    from openvino import opset1 as ops
    p = ops.parameter(list(x.shape), x.dtype, name="x")
    node = ops.reduce_mean(p, ops.constant(np.asarray(axes, np.int64)), keep_dims)
    compiled = ov.Core().compile_model(ov.Model([node], [p]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled([x])[compiled.output(0)]


@pytest.mark.parametrize("seed", range(4))
def test_matches_openvino_reduce_mean_1(device, seed):
    rng = np.random.default_rng(100 + seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, 4))
    x = rng.standard_normal(shape).astype(np.float32)
    axes = sorted(rng.choice(4, int(rng.integers(1, 4)), replace=False).tolist())
    axes = [a - 4 if rng.random() < 0.5 else a for a in axes]   # negative axes too
    keep = bool(seed % 2)
    want = _ov_reduce_mean(x, axes, keep)
    got = openvino.reduce_mean(x, axes, keep_dims=keep, device=device)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    xi = rng.integers(-1000, 1000, shape).astype(np.int32)
    np.testing.assert_array_equal(openvino.reduce_mean(xi, axes, keep_dims=keep, device=device),
                                  _ov_reduce_mean(xi, axes, keep))


def test_deliberate_differences_openvino(device):
    # OpenVINO accumulates int32 in float32 and treats uint32 >= 2^31 as signed; float32 drifts by ~9 %
    x = np.array([2**31 - 1, 2**31 - 1], np.int32)
    assert _ov_reduce_mean(x, [0], False) != 2**31 - 1
    assert openvino.reduce_mean(x, [0], device=device) == 2**31 - 1
    x = np.full(2, 2**24 + 1, np.int32)
    assert _ov_reduce_mean(x, [0], False) == 2**24
    assert openvino.reduce_mean(x, [0], device=device) == 2**24 + 1
    x = np.full(10**7, 0.1, np.float32)
    theirs = float(_ov_reduce_mean(x, [0], False))
    ours = openvino.reduce_mean(x, [0], device=device)
    assert abs(theirs - 0.1) / 0.1 > 1e-3
    assert oracle.ulp_distance(ours, np.float32(0.1), np.float32) <= 1


def test_device_arrays_stay_on_the_device(device, monkeypatch):
    if device.info.backend != "cuda":
        pytest.skip("device arrays in and out are CUDA arrays (CuPy or DLPack); this device is not CUDA")
    cp = pytest.importorskip("cupy")

    def no_host_copy(*a, **k):
        raise AssertionError("a device array went through the host")
    monkeypatch.setattr(device.backend, "write", no_host_copy)
    monkeypatch.setattr(device.backend, "read", no_host_copy)
    x = cp.arange(24, dtype=cp.float32).reshape(2, 3, 4)
    y = cp.ones((3, 4), dtype=cp.float32)
    m = gm.mean(x, y, device=device)
    assert isinstance(m, cp.ndarray) and m.shape == (2, 3, 4)
    r = gm.reduce_mean(x, [1], keepdims=False, device=device)
    assert isinstance(r, cp.ndarray) and r.shape == (2, 4)
    monkeypatch.undo()
    np.testing.assert_array_equal(cp.asnumpy(m), (np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 1) / 2)
    np.testing.assert_array_equal(cp.asnumpy(r), np.arange(24, dtype=np.float32).reshape(2, 3, 4).mean(1))
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32, device="cuda")
    got = gm.mean(t, t, device=device)     # DLPack in, PyTorch CUDA out
    assert isinstance(got, torch.Tensor) and got.device == t.device
    np.testing.assert_array_equal(got.cpu().numpy(), np.arange(6, dtype=np.float32))
