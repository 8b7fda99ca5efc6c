"""Host time per small ``gm.reduce_mean`` / ``gm.mean`` call against what the call should cost, this
tree and an earlier commit side by side (the front door's targets: docs/design.md, "The functional
call's path").

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
  (write the inputs, one kernel, read the result; target: at most 1.2x).

Best (minimum) microseconds per call over the rounds; the table prints each tree's figure and ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ((16, 16), (256, 256))


def per_call_us(fns: dict, calls: int, repeats: int = 7) -> dict:
    """Best microseconds per call of each function, the functions taking turns."""
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():
        fn()
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t) / calls * 1e6)
    return best


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


PROBES = {"fake": probe_fake, "cpu": probe_cpu, "opencl": probe_opencl}
YARDSTICK = {"fake": "descriptor execute", "cpu": "numpy", "opencl": "bare pyopencl"}


def target(device: str, call_us: float, ref_us: float) -> bool:
    if device == "fake":
        return call_us <= 2 * ref_us
    if device == "cpu":
        return call_us <= 2 * ref_us + 10
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
    ap.add_argument("--devices", default="fake,cpu,opencl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.probe:
        print(json.dumps(PROBES[a.probe](a.calls)))
        return 0
    trees = {"before": worktree(a.before), "after": ROOT}
    best: dict = {}
    for _ in range(a.rounds):
        for device in a.devices.split(","):
            for label, tree in trees.items():
                for case, (us, ref) in measure(tree, device, a.calls).items():
                    old = best.get((label, case))
                    if old is None or us < old[0]:
                        best[(label, case)] = (us, ref)
    print(f"us per call, best of {a.rounds} rounds x 7 repeats of {a.calls} calls; before = {a.before}")
    print(f"{'case':<30} {'yardstick':<19} {'before':>8} {'ratio':>6} {'after':>8} {'ratio':>6} {'ref':>7}  target")
    rows = []
    for case in [k[1] for k in best if k[0] == "after"]:
        device = case.split()[0]
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
