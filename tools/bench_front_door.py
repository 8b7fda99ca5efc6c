"""Host time per small ``gm.reduce_mean`` / ``gm.mean`` call against what the call should cost, this
tree and an earlier commit side by side (the front door's targets: docs/design.md, "The life of one
functional call").

    python tools/bench_front_door.py [--before 76f0454] [--devices fake,cpu,opencl] [--rounds 3]

The earlier commit is checked out as a git worktree. Each round runs one fresh process per tree
(alternating, so that the shared machine's drift falls on both); within a process every case is
timed against its yardstick in interleaved repeats, so each ratio comes from one process:

* ``fake``: the CUDA backend over tests/fake_cupy.py (no GPU: only gpu_mean's Python is timed),
  ``gm.reduce_mean`` of a 256x256 float32 device array over axis 1 and ``gm.mean`` of two, against
  the descriptor path's one-call ``CompiledOperator.execute`` of the same operator on the same fake
  device (target: at most 2x);
* ``cpu``: numpy arrays of 16x16 and 256x256 float32, against numpy's mean of the same arrays
  (``np.mean(x, axis=1, keepdims=True)``, ``np.mean((a, b), axis=0)``; target: at most 2x + 10 us);
* ``opencl``: the same numpy arrays on PoCL, against a bare pyopencl round trip of the same bytes
  (write the inputs, one kernel, read the result; target: at most 1.2x);
* ``cuda`` (a GPU only; not in the default list): CuPy and PyTorch CUDA arrays of 256x256, against
  ``cupy.mean`` / ``torch.mean`` of the same arrays (target: at most their host time);
* ``large``: a 256 MiB float32 reduction on PoCL, the functional call on a numpy array against the
  descriptor path's recorded list over device buffers (target: at least 0.95 of its speed).

Best (minimum) microseconds per call over the rounds; the table prints each tree's figure and ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from bench_arrays import descriptor_path  # (the sibling scripts' descriptor path and timing loop)
from bench_functional import per_call_us

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ((16, 16), (256, 256))


# -- the probes: run inside the tree being measured ----------------------------------------------

def probe_fake(calls: int) -> dict:
    sys.path.insert(0, str(Path(os.environ["BENCH_TREE"]) / "tests"))
    import pytest
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
    fns = {"reduce_mean 256x256": lambda: gm.reduce_mean(a, [1], device=dev),
           "reduce execute": lambda: rd.execute(inputs=[ib], outputs=[ob]),
           "mean(a, b) 256x256": lambda: gm.mean(a, b, device=dev),
           "mean execute": lambda: md.execute(inputs=[ib, ib], outputs=[ob])}
    t = per_call_us(fns, calls)
    return {"fake reduce_mean 256x256": (t["reduce_mean 256x256"], t["reduce execute"]),
            "fake mean(a, b) 256x256": (t["mean(a, b) 256x256"], t["mean execute"])}


def probe_cpu(calls: int) -> dict:
    import gpu_mean as gm
    dev = gm.create_device("cpu")
    out, fns = {}, {}
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        s = f"{shape[0]}x{shape[1]}"
        fns[("gm", "reduce", s)] = lambda a=a: gm.reduce_mean(a, [1], device=dev)
        fns[("np", "reduce", s)] = lambda a=a: np.mean(a, axis=1, keepdims=True)
        fns[("gm", "mean", s)] = lambda a=a, b=b: gm.mean(a, b, device=dev)
        fns[("np", "mean", s)] = lambda a=a, b=b: np.mean((a, b), axis=0)
    t = per_call_us(fns, calls)
    for shape in SHAPES:
        s = f"{shape[0]}x{shape[1]}"
        out[f"cpu reduce_mean {s}"] = (t[("gm", "reduce", s)], t[("np", "reduce", s)])
        out[f"cpu mean(a, b) {s}"] = (t[("gm", "mean", s)], t[("np", "mean", s)])
    return out


BARE_KERNELS = """
__kernel void row_mean(__global const float *x, __global float *y, int n) {
    int r = get_global_id(0); float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[r * n + i];
    y[r] = s / n;
}
__kernel void mean2(__global const float *a, __global const float *b, __global float *y) {
    int i = get_global_id(0); y[i] = (a[i] + b[i]) * 0.5f;
}
"""


def probe_opencl(calls: int) -> dict:
    import pyopencl as cl

    import gpu_mean as gm
    dev = gm.create_device("opencl")
    q = dev.cl_queue
    prg = cl.Program(q.context, BARE_KERNELS).build()
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
    t = per_call_us(fns, calls)
    out = {}
    for shape in SHAPES:
        s = f"{shape[0]}x{shape[1]}"
        out[f"opencl reduce_mean {s}"] = (t[("gm", "reduce", s)], t[("bare", "reduce", s)])
        out[f"opencl mean(a, b) {s}"] = (t[("gm", "mean", s)], t[("bare", "mean", s)])
    return out


def probe_large(calls: int) -> dict:
    """A 256 MiB float32 reduction over rows of 1024 on OpenCL: the functional call on a numpy array
    (bound in place on PoCL) against the descriptor path's recorded list over device buffers holding
    the same values (execute + synchronize)."""
    import gpu_mean as gm
    dev = gm.create_device("opencl")
    x = np.random.default_rng(0).standard_normal((1 << 16, 1 << 10)).astype(np.float32)
    listed = descriptor_path(gm, dev, x)
    t = per_call_us({"gm": lambda: gm.reduce_mean(x, [1], device=dev), "list": listed}, max(1, calls // 50),
                    repeats=5)
    return {"opencl reduce_mean 256 MiB": (t["gm"], t["list"])}


def probe_cuda(calls: int) -> dict:
    """On a GPU: the repeated call on CuPy and PyTorch CUDA arrays against cupy.mean and torch.mean
    of the same arrays (host time per call: the calls are queued, one synchronize per timed loop)."""
    import cupy as cp

    import gpu_mean as gm
    dev = gm.create_device("cuda")
    x = cp.random.standard_normal((256, 256), dtype=cp.float32)
    a, b = x, x + 1
    sync = cp.cuda.runtime.deviceSynchronize
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
    sync()
    out = {}
    for what in ("reduce cupy", "mean cupy", "reduce torch"):
        if ("gm", what) in t:
            name = {"reduce cupy": "reduce_mean cupy 256x256", "mean cupy": "mean(a, b) cupy 256x256",
                    "reduce torch": "reduce_mean torch 256x256"}[what]
            out[f"cuda {name}"] = (t[("gm", what)], t[("peer", what)])
    return out


PROBES = {"fake": probe_fake, "cpu": probe_cpu, "opencl": probe_opencl, "large": probe_large, "cuda": probe_cuda}
YARDSTICK = {"fake": "descriptor execute", "cpu": "numpy", "opencl": "bare pyopencl",
             "large": "descriptor list", "cuda": "cupy / torch mean"}


def target(device: str, call_us: float, ref_us: float) -> bool:
    if device == "fake":
        return call_us <= 2 * ref_us
    if device == "cpu":
        return call_us <= 2 * ref_us + 10
    if device == "large":
        return ref_us / call_us >= 0.95
    if device == "cuda":
        return call_us <= ref_us
    return call_us <= 1.2 * ref_us


# -- the driver ------------------------------------------------------------------------------------

def worktree(rev: str) -> Path:
    path = Path("/tmp") / f"gpu_mean-bench-{rev}"
    if not path.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                       capture_output=True)
    return path


def measure(tree: Path, device: str, calls: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), BENCH_TREE=str(tree))
    out = subprocess.run([sys.executable, __file__, "--probe", device, "--calls", str(calls)], env=env, cwd=tree,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the {device} probe in {tree} failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="76f0454", help="the commit to compare with (a git worktree of it)")
    ap.add_argument("--devices", default="fake,cpu,opencl,large")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.probe:
        print(json.dumps(PROBES[a.probe](a.calls)))
        return 0
    # --before none: this tree alone (a machine without the git history, such as the GPU pass's)
    trees = {"after": ROOT} if a.before == "none" else {"before": worktree(a.before), "after": ROOT}
    best: dict = {}
    for _ in range(a.rounds):
        for device in a.devices.split(","):
            for label, tree in trees.items():
                for case, (us, ref) in measure(tree, device, a.calls).items():
                    old = best.get((label, case))
                    if old is None or us < old[0]:
                        best[(label, case)] = (us, ref)
    print(f"us per call, best of {a.rounds} rounds x 9 repeats of {a.calls} calls; before = {a.before}")
    print(f"{'case':<30} {'yardstick':<19} {'before':>8} {'ratio':>6} {'after':>8} {'ratio':>6} {'ref':>7}  target")
    rows = []
    for case in [k[1] for k in best if k[0] == "after"]:
        device = "large" if "MiB" in case else case.split()[0]
        b, br = best.get(("before", case), (float("nan"), float("nan")))
        us, ref = best[("after", case)]
        ok = target(device, us, ref)
        rows.append({"case": case, "before_us": b, "before_ref_us": br, "after_us": us, "after_ref_us": ref,
                     "target_met": ok})
        print(f"{case:<30} {YARDSTICK[device]:<19} {b:8.1f} {b / br:6.2f} {us:8.1f} {us / ref:6.2f} {ref:7.1f}  "
              f"{'met' if ok else 'NOT met'}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
