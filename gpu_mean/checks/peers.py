"""The peers doing the same work as a profile case: numpy, onnxruntime and OpenVINO (CPU), CuPy and
PyTorch (CUDA). Each builder takes a ``Case`` value and returns a callable that runs the work once and
waits, or None when the peer is absent or has no equivalent."""
from __future__ import annotations

import numpy as np


def _operands(xp, case, make):
    """The case's inputs as logical arrays of library ``xp`` (broadcast inputs keep their size-1 dim)."""
    x = make(case.shape)
    if case.op == "nary":   # distinct arrays: one array passed k times is read once from memory by a
        return [x] + [make(case.shape) for _ in range(case.inputs - 1)]   # fused loop, k times by ours
    if case.family in ("mean", "add") and case.layout == "broadcast":
        return [make((1,) + case.shape[1:]), x]
    if case.family in ("mean", "add"):
        return [x, make(case.shape)]
    return [x]


def _expr(case, xs, mean_axes):
    if case.op == "identity" and case.layout == "packed":
        return None
    if case.family == "mean":
        return lambda: (xs[0] + xs[1]) * 0.5
    if case.op == "nary":
        return lambda: sum(xs[1:], xs[0]) / len(xs)
    if case.family == "reduce":
        return lambda: mean_axes(xs[0], case.axes)
    return None


def _ones(dt):
    return lambda s: np.ones(s, dt)


def numpy_peer(case, shape=None, make=None):
    """numpy doing the same work (floats only: numpy's integer means are float64, a different result)."""
    dt = case.dtype.numpy_dtype
    if case.layout not in ("packed", "broadcast") or case.op == "add" or not case.dtype.is_float:
        return None
    xs = _operands(np, case, make or _ones(dt))
    if case.op == "identity":
        y = np.empty_like(xs[0])
        return lambda: np.copyto(y, xs[0])
    if case.op == "mean" and dt == np.float32:
        y = np.empty(case.shape, dt)
        return lambda: np.multiply(np.add(xs[0], xs[1], out=y), dt.type(0.5), out=y)
    return _expr(case, xs, lambda x, axes: np.mean(x, axis=axes))


def ort_peer(case, shape=None, make=None):
    """onnxruntime's CPU provider (Mean / ReduceMean-18), or None (also where onnxruntime implements
    no kernel for the type: Mean has float and float16 only, ReduceMean no bfloat16 nor uint64)."""
    try:
        import onnxruntime as ort
        from onnx import helper, numpy_helper
    except ImportError:
        return None
    if case.family not in ("mean", "nary", "reduce") or case.layout not in ("packed", "broadcast"):
        return None
    dt = case.dtype.numpy_dtype
    et = helper.np_dtype_to_tensor_dtype(dt)
    xs = _operands(np, case, make or _ones(dt))
    names = [f"x{i}" for i in range(len(xs))]
    vi = helper.make_tensor_value_info
    inits = []
    if case.family == "reduce":
        node = helper.make_node("ReduceMean", ["x0", "axes"], ["y"])
        inits = [numpy_helper.from_array(np.asarray(case.axes, np.int64), "axes")]
    else:
        node = helper.make_node("Mean", names, ["y"])
    g = helper.make_graph([node], "g", [vi(n, et, list(x.shape)) for n, x in zip(names, xs)],
                          [vi("y", et, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:   # onnxruntime's NOT_IMPLEMENTED or INVALID_GRAPH for the type: no peer
        return None
    feeds = dict(zip(names, xs))
    return lambda: sess.run(None, feeds)


def openvino_peer(case, shape=None, make=None):
    """OpenVINO's CPU plugin (ReduceMean-1; the means as Add and Multiply by 1/k, the graph OpenVINO's
    own ONNX frontend makes of Mean), or None. The inference precision is pinned to f32: on a CPU with
    AVX-512 BF16 OpenVINO's default hint runs float32 models in bfloat16, a cheaper and less exact
    computation than the one timed beside it. Inputs and outputs are shared with numpy, not copied."""
    try:
        import openvino as ov
        import openvino.opset13 as ops
    except ImportError:
        return None
    if case.family not in ("mean", "nary", "reduce") or case.layout not in ("packed", "broadcast"):
        return None
    if not case.dtype.is_float or case.dtype.name == "BFLOAT16":
        return None
    dt = case.dtype.numpy_dtype
    xs = _operands(np, case, make or _ones(dt))
    et = ov.Type(dt)
    params = [ops.parameter(list(x.shape), et, name=f"x{i}") for i, x in enumerate(xs)]
    if case.family == "reduce":
        y = ops.reduce_mean(params[0], ops.constant(np.asarray(case.axes, np.int64)), keep_dims=False)
    else:
        total = params[0]
        for p in params[1:]:
            total = ops.add(total, p)
        y = ops.multiply(total, ops.constant(np.asarray(1.0 / len(params), dt)))
    try:
        compiled = ov.Core().compile_model(ov.Model([y], params), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    except Exception:   # no CPU plugin kernel for the type: no peer
        return None
    req = compiled.create_infer_request()
    feeds = dict(enumerate(xs))
    return lambda: req.infer(feeds, share_inputs=True, share_outputs=True)


def gpu_peers(case, shape=None, make=None) -> dict:
    """{"cupy": callable, "torch": callable} for the libraries present with a CUDA GPU; ``make``: the
    host data (shape -> numpy array) copied to the GPU, else ones made there."""
    out = {}
    if case.layout not in ("packed", "broadcast") or case.op == "add" or not case.dtype.is_float:
        return out
    for lib in ("cupy", "torch"):
        try:
            mod = __import__(lib)
            if lib == "torch" and not mod.cuda.is_available():
                continue
            if lib == "cupy":
                dt = case.dtype.numpy_dtype
                xs = _operands(mod, case, (lambda s, mod=mod: mod.asarray(make(s))) if make else
                               (lambda s, mod=mod, dt=dt: mod.ones(s, dt)))
                sync = mod.cuda.Device().synchronize
                fn = (lambda x=xs[0]: x.copy()) if case.op == "identity" else _expr(
                    case, xs, lambda x, axes: x.mean(axis=axes))
            else:
                dt = {"FLOAT32": mod.float32, "FLOAT16": mod.float16, "FLOAT64": mod.float64,
                      "BFLOAT16": mod.bfloat16}.get(case.dtype.name)
                if dt is None:
                    continue
                xs = _operands(mod, case, (lambda s, mod=mod, dt=dt: mod.from_numpy(
                    make(s, np.float32)).to(device="cuda", dtype=dt)) if make else
                    (lambda s, mod=mod, dt=dt: mod.ones(s, dtype=dt, device="cuda")))
                sync = mod.cuda.synchronize
                fn = (lambda x=xs[0]: x.clone()) if case.op == "identity" else _expr(
                    case, xs, lambda x, axes: x.mean(dim=axes))
        except Exception:   # an absent or broken GPU library is not a profile failure: no peer
            continue
        if fn is not None:
            out[lib] = lambda fn=fn, sync=sync: (fn(), sync())
    return out
