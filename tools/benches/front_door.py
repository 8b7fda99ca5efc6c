"""Host time per small gm.reduce_mean / gm.mean call against what the call should cost.

The front door's targets (docs/design.md, "The life of one functional call"); one case per device,
each timed against its yardstick in the same process (benches/timing.py), best of 9 repeats of
--calls calls:

* fake: the CUDA backend over tests/fake_cupy.py (no GPU: only gpu_mean's Python is timed; the
  stand-in is the tree under test's), a 256x256 float32 device array, against the descriptor path's
  one-call CompiledOperator.execute of the same operator (target: at most 2x);
* cpu: numpy arrays of 16x16 and 256x256 float32, against numpy's mean of the same arrays
  (target: at most 2x + 10 us);
* opencl: the same arrays on PoCL, against a bare pyopencl round trip of the same bytes (write the
  inputs, one kernel, read the result; target: at most 1.2x);
* cuda (a GPU only): CuPy and PyTorch CUDA arrays of 256x256, against cupy.mean / torch.mean
  (target: at most their host time);
* large: a 256 MiB float32 reduction on PoCL, the functional call on a numpy array against the
  descriptor path's recorded list over device buffers (target: at least 0.95 of its speed).

Figures: us (per call), ref_us (the yardstick's), ratio (us / ref_us, from the same process).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROUNDS = 3
OVER_ROUNDS = "best"
FIGURES = {"us": "lower", "ratio": "lower"}
SHAPES = ((16, 16), (256, 256))
YARDSTICK = {"fake": "descriptor execute", "cpu": "numpy", "opencl": "bare pyopencl",
             "large": "descriptor list", "cuda": "cupy / torch mean"}


def add_arguments(ap) -> None:
    ap.add_argument("--devices", default="fake,cpu,opencl,large", help="comma-separated, from "
                    + ", ".join(YARDSTICK) + " (default %(default)s)")
    ap.add_argument("--calls", type=int, default=200, help="calls per timed repeat (default %(default)s)")


def cases(args) -> list:
    bad = [d for d in args.devices.split(",") if d not in YARDSTICK]
    if bad:
        raise SystemExit(f"front_door: unknown device {', '.join(bad)}; give some of {', '.join(YARDSTICK)}")
    return args.devices.split(",")


def per_call_us(fns: dict, calls: int, repeats: int = 9) -> dict:
    from benches.timing import interleaved
    return {k: min(v) * 1e6 for k, v in interleaved(fns, repeats, calls, warmup=2).items()}


def run(args, device: str) -> dict:
    pairs = globals()[f"probe_{device}"](args.calls)
    return {case: {"us": us, "ref_us": ref, "ratio": us / ref} for case, (us, ref) in pairs.items()}


def verdict(args, row: str, figure: str, figs: dict) -> str:
    if figure != "ratio":
        return ""
    device = "large" if "MiB" in row else row.split()[0]
    us, ref = figs["us"], figs["ref_us"]
    ok = {"fake": us <= 2 * ref, "cpu": us <= 2 * ref + 10, "large": ref / us >= 0.95,
          "cuda": us <= ref}.get(device, us <= 1.2 * ref)
    return f"target {'met' if ok else 'NOT met'} (against {YARDSTICK[device]})"


def probe_fake(calls: int) -> dict:
    import numpy as np
    import pytest
    sys.path.insert(0, str(Path(os.environ.get("BENCH_TREE", ".")) / "tests"))
    from fake_cupy import DevPtr, FakeCupyArray, fake_cuda_backend

    import gpu_mean as gm

    class Log(list):           # the fake's call log, not kept (it would grow for the whole run)
        def append(self, item):
            pass

    log = Log()
    be, _ = fake_cuda_backend(pytest.MonkeyPatch(), log)
    dev = gm.Device(be)
    shape = (256, 256)
    a, b = (FakeCupyArray(DevPtr(bytearray(256 * 256 * 4), 0, log), shape, np.float32) for _ in range(2))
    f32 = gm.DataType.FLOAT32
    x = gm.TensorDesc(f32, shape)
    rd = dev.compile_operator(dev.create_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x,
                                                                gm.TensorDesc(f32, (256, 1)), (1,))))
    md = dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(x, x, x)))
    ib, ob = dev.create_buffer(x.total_size_in_bytes), dev.create_buffer(x.total_size_in_bytes)
    t = per_call_us({"reduce": lambda: gm.reduce_mean(a, [1], device=dev),
                     "reduce execute": lambda: rd.execute(inputs=[ib], outputs=[ob]),
                     "mean": lambda: gm.mean(a, b, device=dev),
                     "mean execute": lambda: md.execute(inputs=[ib, ib], outputs=[ob])}, calls)
    return {"fake reduce_mean 256x256": (t["reduce"], t["reduce execute"]),
            "fake mean(a, b) 256x256": (t["mean"], t["mean execute"])}


def probe_cpu(calls: int) -> dict:
    import numpy as np

    import gpu_mean as gm
    dev = gm.create_device("cpu")
    fns = {}
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        s = f"{shape[0]}x{shape[1]}"
        fns[("gm", "reduce", s)] = lambda a=a: gm.reduce_mean(a, [1], device=dev)
        fns[("np", "reduce", s)] = lambda a=a: np.mean(a, axis=1, keepdims=True)
        fns[("gm", "mean", s)] = lambda a=a, b=b: gm.mean(a, b, device=dev)
        fns[("np", "mean", s)] = lambda a=a, b=b: np.mean((a, b), axis=0)
    return _pairs("cpu", "np", per_call_us(fns, calls))


def _pairs(device: str, yardstick: str, t: dict) -> dict:
    """{row: (gpu_mean's us, the yardstick's us)} per shape and call, from per_call_us's figures keyed
    (who, call, shape)."""
    out = {}
    for shape in SHAPES:
        s = f"{shape[0]}x{shape[1]}"
        out[f"{device} reduce_mean {s}"] = (t[("gm", "reduce", s)], t[(yardstick, "reduce", s)])
        out[f"{device} mean(a, b) {s}"] = (t[("gm", "mean", s)], t[(yardstick, "mean", s)])
    return out


def probe_opencl(calls: int) -> dict:
    import numpy as np
    import pyopencl as cl

    import gpu_mean as gm
    dev = gm.create_device("opencl")
    q = dev.cl_queue
    prg = cl.Program(q.context, (Path(__file__).with_name("bare_mean.cl")).read_text()).build()
    row_mean, mean2 = prg.row_mean, prg.mean2
    mf = cl.mem_flags
    fns = {}
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        s = f"{shape[0]}x{shape[1]}"
        ba, bb = (cl.Buffer(q.context, mf.READ_ONLY, a.nbytes) for _ in range(2))
        by = cl.Buffer(q.context, mf.WRITE_ONLY, a.nbytes)
        yr, ym = np.empty((shape[0], 1), np.float32), np.empty(shape, np.float32)

        def bare_reduce(a=a, ba=ba, by=by, yr=yr, n=shape[1], rows=shape[0]):
            cl.enqueue_copy(q, ba, a, is_blocking=False)
            row_mean(q, (rows,), None, ba, by, np.int32(n))
            cl.enqueue_copy(q, yr, by, is_blocking=True)
            return yr

        def bare_mean(a=a, b=b, ba=ba, bb=bb, by=by, ym=ym):
            cl.enqueue_copy(q, ba, a, is_blocking=False)
            cl.enqueue_copy(q, bb, b, is_blocking=False)
            mean2(q, (a.size,), None, ba, bb, by)
            cl.enqueue_copy(q, ym, by, is_blocking=True)
            return ym

        fns[("gm", "reduce", s)] = lambda a=a: gm.reduce_mean(a, [1], device=dev)
        fns[("bare", "reduce", s)] = bare_reduce
        fns[("gm", "mean", s)] = lambda a=a, b=b: gm.mean(a, b, device=dev)
        fns[("bare", "mean", s)] = bare_mean
    return _pairs("opencl", "bare", per_call_us(fns, calls))


def descriptor_path(dev, x):
    """A reduction over axis 1 through a recorded command list on device buffers holding ``x`` (the
    kernel alone): returns a function that executes the list and waits."""
    import gpu_mean as gm
    xd = gm.TensorDesc(gm.DataType.FLOAT32, x.shape)
    yd = gm.TensorDesc(gm.DataType.FLOAT32, (x.shape[0], 1))
    cop = dev.compile_operator(dev.create_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, (1,))))
    init = dev.create_operator_initializer([cop])
    cl0 = dev.create_command_list()
    dev.create_command_recorder().record_dispatch(cl0, init, dev.create_binding_table(init))
    dev.execute_command_lists([cl0])
    a, y = dev.create_buffer(xd.total_size_in_bytes), dev.create_buffer(yd.total_size_in_bytes)
    a.write(x)
    table = dev.create_binding_table(cop)
    table.bind_inputs([gm.BufferBinding(a)])
    table.bind_outputs([gm.BufferBinding(y)])
    if cop.binding_properties.temporary_resource_size:
        table.bind_temporary_resource(gm.BufferBinding(dev.create_buffer(cop.binding_properties.temporary_resource_size)))
    cl = dev.create_command_list()
    dev.create_command_recorder().record_dispatch(cl, cop, table)
    cl.close()

    def go():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return go


def probe_large(calls: int) -> dict:
    """A 256 MiB float32 reduction over rows of 1024 on OpenCL: the functional call on a numpy array
    (bound in place on PoCL) against the descriptor path over device buffers holding the same values."""
    import numpy as np

    import gpu_mean as gm
    from benches.timing import interleaved
    dev = gm.create_device("opencl")
    x = np.random.default_rng(0).standard_normal((1 << 16, 1 << 10)).astype(np.float32)
    listed = descriptor_path(dev, x)
    t = interleaved({"gm": lambda: gm.reduce_mean(x, [1], device=dev), "list": listed}, 5, max(1, calls // 50))
    return {"opencl reduce_mean 256 MiB": (min(t["gm"]) * 1e6, min(t["list"]) * 1e6)}


def probe_cuda(calls: int) -> dict:
    """The repeated call on CuPy and PyTorch CUDA arrays against cupy.mean and torch.mean of the same
    arrays (host time per call: the calls are queued, one synchronize per timed loop)."""
    import cupy as cp

    import gpu_mean as gm
    dev = gm.create_device("cuda")
    x = cp.random.standard_normal((256, 256), dtype=cp.float32)
    a, b = x, x + 1
    fns = {("gm", "reduce cupy"): lambda: gm.reduce_mean(x, [1], device=dev),
           ("peer", "reduce cupy"): lambda: cp.mean(x, axis=1, keepdims=True),
           ("gm", "mean cupy"): lambda: gm.mean(a, b, device=dev),
           ("peer", "mean cupy"): lambda: cp.mean(cp.stack((a, b)), axis=0)}
    try:
        import torch
        tx = torch.as_tensor(x, device="cuda")
        fns[("gm", "reduce torch")] = lambda: gm.reduce_mean(tx, [1], device=dev)
        fns[("peer", "reduce torch")] = lambda: torch.mean(tx, 1, keepdim=True)
    except ImportError:
        pass
    t = per_call_us(fns, calls)
    cp.cuda.runtime.deviceSynchronize()
    names = {"reduce cupy": "reduce_mean cupy 256x256", "mean cupy": "mean(a, b) cupy 256x256",
             "reduce torch": "reduce_mean torch 256x256"}
    return {f"cuda {names[w]}": (t[("gm", w)], t[("peer", w)]) for w in names if ("gm", w) in t}
