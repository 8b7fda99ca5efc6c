"""BFLOAT16 and FLOAT64 means on a gpu_mean device against onnxruntime (CPU provider) and numpy, and
BFLOAT16 against FLOAT16 on the same device (issue 21, point 6), side by side in one run.

    python tools/bench_ext_peers.py [--device opencl] [--mib 64] [--repeat 9]

Per shape class (R1 full, R2 inner long, R3 inner short, R4 outer; E the two-input mean, N the
three-input n-ary mean) every contender runs in the same interleaved rounds (the profiler's
``measure``, with its pause for onnxruntime's spinning threads), on the same seeded random data:

- gpu_mean over BFLOAT16, FLOAT16 and FLOAT64 (the device's recorded command list, as the profiler);
- onnxruntime's CPU provider (ReduceMean-18, Mean-13) where it has a kernel for the type, else the
  row says it has none (onnxruntime 1.32: no BFLOAT16 kernel of either, no FLOAT64 Mean); its
  threads do not spin between runs (``session.intra_op.allow_spinning`` 0), which would take the
  cores from whatever runs next on a small machine;
- numpy: FLOAT64 with its own SIMD loops (``mean``: pairwise sum; ``(a + b) * 0.5``;
  ``(a + b + c) / 3``), a plain sum, faster and weaker than the library's double-double. numpy has
  no bfloat16: ml_dtypes adds the dtype with scalar C++ loops (no SIMD), and its ``mean`` would sum
  in bfloat16 itself, so the BFLOAT16 row is ``mean(dtype=float32)`` (ml_dtypes' cast, numpy's
  float32 sum) cast back, and ``(a + b) * 0.5`` / ``(a + b + c) / 3`` in ml_dtypes' bfloat16 loops.

GB/s counts each input read once and the output written once. "x" is the contender's time over
gpu_mean's on the same type (above 1: gpu_mean faster). The last line of each class is BFLOAT16's
bytes per second over FLOAT16's on the device: the issue asks for at least 0.90.
"""
from __future__ import annotations

import argparse
import platform

import numpy as np

import gpu_mean as gm
from gpu_mean.checks.cases import Case, op_for
from gpu_mean.checks.profiler import PAUSE_S, measure, prepare_device

D = gm.DataType
TYPES = (D.BFLOAT16, D.FLOAT16, D.FLOAT64)


def classes(n: int) -> list:
    """(label, family, shape, axes, inputs) per shape class, ``n`` elements per input."""
    return [("R1 full", "reduce", (n,), (0,), 1),
            ("R2 inner, long", "reduce", (n // 4096, 4096), (1,), 1),
            ("R3 inner, short", "reduce", (n // 8, 8), (1,), 1),
            ("R4 outer", "reduce", (n // 32768, 32768), (0,), 1),
            ("E mean a+b", "mean", (n // 1024, 1024), None, 2),
            ("N n-ary, 3 inputs", "nary", (n // 1024, 1024), None, 3)]


def make_case(family, dt, shape, axes, inputs) -> Case:
    if family == "nary":
        return Case("nary", dt, shape, inputs=inputs)
    return Case(op_for(family, dt), dt, shape, axes)


def ours(dev, case: Case, xs):
    """gpu_mean on ``dev``: descriptors, buffers and one recorded command list, run and waited for."""
    return prepare_device(dev, case, xs)


def ort(family, dt, xs, axes):
    """onnxruntime's CPU provider, or the reason it has no kernel for the type."""
    import onnxruntime
    from onnx import helper, numpy_helper
    et = helper.np_dtype_to_tensor_dtype(dt.numpy_dtype)
    names = [f"x{i}" for i in range(len(xs))]
    vi = helper.make_tensor_value_info
    if family == "reduce":
        node = helper.make_node("ReduceMean", ["x0", "axes"], ["y"])
        inits = [numpy_helper.from_array(np.asarray(axes, np.int64), "axes")]
    else:
        node, inits = helper.make_node("Mean", names, ["y"]), []
    g = helper.make_graph([node], "g", [vi(a, et, list(x.shape)) for a, x in zip(names, xs)],
                          [vi("y", et, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    opts = onnxruntime.SessionOptions()
    # no spin-waiting between runs: on a small machine spinning threads slow the next contender
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        sess = onnxruntime.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception as e:   # NOT_IMPLEMENTED: no CPU kernel for the type
        return f"no kernel ({str(e).split(':')[-1].strip()})"
    feeds = dict(zip(names, xs))
    return lambda: sess.run(None, feeds)


def numpy_peer(family, dt, xs, axes):
    if dt == D.FLOAT64:
        if family == "reduce":
            return lambda: np.mean(xs[0], axis=axes)
        if family == "mean":
            return lambda: (xs[0] + xs[1]) * 0.5
        return lambda: (xs[0] + xs[1] + xs[2]) / 3
    if dt == D.BFLOAT16:
        bf, one = dt.numpy_dtype, dt.numpy_dtype.type(0.5)
        if family == "reduce":
            return lambda: np.mean(xs[0], axis=axes, dtype=np.float32).astype(bf)
        if family == "mean":
            return lambda: (xs[0] + xs[1]) * one
        three = dt.numpy_dtype.type(3)
        return lambda: (xs[0] + xs[1] + xs[2]) / three
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--mib", type=float, default=64.0, help="MiB of float32 per input (default 64: past a 32 MiB L3)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--no-peers", action="store_true", help="gpu_mean's three types only (the 10 %% check)")
    ap.add_argument("--only", default="", help="comma-separated class prefixes, e.g. R1,E")
    a = ap.parse_args()
    n = int(a.mib * 2**20) // 4 // 32768 * 32768
    dev = gm.create_device(a.device)
    rng = np.random.default_rng(21)
    print(f"{dev.name} ({a.device}); {platform.processor() or platform.machine()}; {n} elements per input; "
          f"median of {a.repeat} interleaved samples, spread = IQR / median")
    print("GB/s: inputs read once + output written once; x = contender's time / gpu_mean's on that type")
    only = [p for p in a.only.split(",") if p]
    for label, family, shape, axes, inputs in classes(n):
        if only and not any(label.startswith(p) for p in only):
            continue
        fns, traffic, notes = {}, {}, []
        x64 = rng.standard_normal(shape)
        data = {dt: [(x64 if i == 0 else rng.standard_normal(shape)).astype(dt.numpy_dtype) for i in range(inputs)]
                for dt in TYPES}
        if inputs == 1:
            data = {dt: xs[:1] for dt, xs in data.items()}
        for dt in TYPES:
            case = make_case(family, dt, shape, axes, inputs)
            traffic[f"gpu_mean {dt.name}"] = case.traffic
            fns[f"gpu_mean {dt.name}"] = ours(dev, case, data[dt])
        if not a.no_peers:
            for dt in (D.BFLOAT16, D.FLOAT64):
                case = make_case(family, dt, shape, axes, inputs)
                r = ort(family, dt, data[dt], axes)
                if isinstance(r, str):
                    notes.append(f"onnxruntime {dt.name}: {r}")
                else:
                    fns[f"onnxruntime {dt.name}"], traffic[f"onnxruntime {dt.name}"] = r, case.traffic
                fns[f"numpy {dt.name}"] = numpy_peer(family, dt, data[dt], axes)
                traffic[f"numpy {dt.name}"] = case.traffic
        t = measure(fns, a.repeat, pause=0.0 if a.no_peers else PAUSE_S)
        print(f"\n{label}: {family} {shape}" + (f" axes {list(axes)}" if axes else ""))
        for name, tm in t.items():
            dtn = name.split()[-1]
            base = t[f"gpu_mean {dtn}"].median
            gbps = traffic[name] / tm.median / 1e9
            print(f"  {name:22s} {tm.median * 1e3:9.3f} ms +-{tm.spread:4.0%} {gbps:7.2f} GB/s  "
                  f"x{tm.median / base:6.2f}")
        for note in notes:
            print(f"  {note}")
        bf = traffic["gpu_mean BFLOAT16"] / t["gpu_mean BFLOAT16"].median
        f16 = traffic["gpu_mean FLOAT16"] / t["gpu_mean FLOAT16"].median
        verdict = "ok" if bf >= 0.9 * f16 else "BELOW 0.90"
        print(f"  BFLOAT16 / FLOAT16 bytes per second on {a.device}: {bf / f16:.2f} ({verdict})")


if __name__ == "__main__":
    main()
