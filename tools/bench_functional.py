"""Host time per tiny ``gm.reduce_mean`` / ``gm.mean`` call, before and after, in one run.

"before" is ``gpu_mean/frontends/functional.py`` as it was at a git revision (default: the
commit before the cached-launch functional API), loaded beside the current one; "after" is the
current module; "recorded list" is the DirectML-shaped path doing the same work per call (write
the inputs, execute a recorded command list, read the output) and "bare replay" that list alone
with a synchronize. On OpenCL, "pyopencl arrays" is the device-array path (no host round trip;
one queue finish per loop, amortized).

    python tools/bench_functional.py [--devices cpu,opencl] [--rev 68a4cc1] [--calls 300]
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import gpu_mean as gm

ROOT = Path(__file__).resolve().parent.parent


def load_before(rev: str):
    src = subprocess.run(["git", "show", f"{rev}:gpu_mean/frontends/functional.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "functional_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("gpu_mean.frontends._before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def per_call_us(fns: dict, calls: int, repeats: int = 9) -> dict:
    """Best time per call of each function; the functions take turns, so that load from other
    processes on a shared machine falls on all of them alike."""
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


def recorded(dev, x):
    """(write + execute + read, execute + synchronize) through a recorded command list."""
    xd = gm.TensorDesc(gm.DataType.FLOAT32, x.shape)
    yd = gm.TensorDesc(gm.DataType.FLOAT32, (x.shape[0], 1))
    cop = dev.compile_operator(dev.create_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, (1,))))
    init = dev.create_operator_initializer([cop])
    t0 = dev.create_binding_table(init)
    cl0 = dev.create_command_list()
    dev.create_command_recorder().record_dispatch(cl0, init, t0)
    dev.execute_command_lists([cl0])
    a, y = dev.create_buffer(xd.total_size_in_bytes), dev.create_buffer(yd.total_size_in_bytes)
    table = dev.create_binding_table(cop)
    table.bind_inputs([gm.BufferBinding(a)])
    table.bind_outputs([gm.BufferBinding(y)])
    if cop.binding_properties.temporary_resource_size:
        table.bind_temporary_resource(dev.create_buffer(cop.binding_properties.temporary_resource_size))
    cl = dev.create_command_list()
    dev.create_command_recorder().record_dispatch(cl, cop, table)
    cl.close()

    def full():
        a.write(x)
        dev.execute_command_lists([cl])
        return y.read(np.float32)

    def bare():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return full, bare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="cpu,opencl")
    ap.add_argument("--rev", default="68a4cc1")
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    before = load_before(args.rev)
    from gpu_mean.frontends import functional as after
    x = np.random.default_rng(0).random((16, 16)).astype(np.float32)
    print(f"host time per call, us (best of 9 interleaved runs of {args.calls} calls); x: float32 {x.shape}")
    print(f"{'device':<10} {'call':<26} {'before':>8} {'after':>8} {'recorded list':>14} {'bare replay':>12}")
    for spec in args.devices.split(","):
        dev = gm.create_device(spec)
        full, bare = recorded(dev, x)
        rows = [("reduce_mean(x, [1])", lambda m, d=dev: m.reduce_mean(x, [1], device=d)),
                ("mean(x, x)", lambda m, d=dev: m.mean(x, x, device=d)),
                ("reduce_mean(x.T, [1])", lambda m, d=dev: m.reduce_mean(x.T, [1], device=d))]
        fns = {"recorded": full, "bare": bare}
        for name, call in rows:
            fns[("before", name)] = lambda c=call: c(before)
            fns[("after", name)] = lambda c=call: c(after)
        if dev.info.backend == "opencl":
            import pyopencl.array as cla
            g = cla.to_device(dev.cl_queue, x)
            fns["device"] = lambda g=g, d=dev: after.reduce_mean(g, [1], device=d)
        t = per_call_us(fns, args.calls)
        for i, (name, _) in enumerate(rows):
            extra = f"{t['recorded']:14.1f} {t['bare']:12.1f}" if i == 0 else ""
            print(f"{spec:<10} {name:<26} {t[('before', name)]:8.1f} {t[('after', name)]:8.1f} {extra}")
        if "device" in t:
            # enqueue only: the results stay stream-ordered on the device, nothing waits on the host
            print(f"{spec:<10} {'pyopencl arrays in/out':<26} {'':>8} {t['device']:8.1f}")
            dev.cl_queue.finish()

if __name__ == "__main__":
    main()
