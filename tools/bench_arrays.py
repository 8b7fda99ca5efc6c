"""The functional calls on numpy arrays, before and after, in one run (a benchmark, not a test).

"before" is the whole ``gpu_mean`` package of another checkout, imported beside this one as
``gpu_mean_before`` (make it with ``git worktree add /tmp/before25 4bef00a``); every measurement
takes turns between the two and numpy, so load from other processes falls on all alike.

1. Throughput (GB/s of input read, best of --repeats) of ``reduce_mean(x, axes=[1])`` and
   ``mean(a, b)`` on big float32 arrays, beside the same reduction through descriptors on device
   buffers (the kernel alone) and numpy's ``x.mean(axis=1)`` / ``(a + b) / 2``.
2. The same on small arrays (256 x 1024), as us per call.
3. Host time per tiny call (16 x 16), as tools/bench_functional.py measures it.

    python tools/bench_arrays.py --before /tmp/before25 [--devices opencl:0,cpu] [--mb 256]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

import gpu_mean as gm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_functional import per_call_us  # noqa: E402  (the sibling script's timing loop)


def load_before(tree: str):
    d = tempfile.mkdtemp()
    os.symlink(os.path.join(tree, "gpu_mean"), os.path.join(d, "gpu_mean_before"))
    sys.path.insert(0, d)
    import gpu_mean_before
    return gpu_mean_before


def best_times(fns: dict, repeats: int, inner: int = 1) -> dict:
    """Best seconds per call of each function; the functions take turns (bench_functional's timing)."""
    return {name: us / 1e6 for name, us in per_call_us(fns, inner, repeats).items()}


def descriptor_path(gmod, dev, x):
    """reduce over axis 1 through a recorded command list on device buffers: the kernel alone."""
    xd = gmod.TensorDesc(gmod.DataType.FLOAT32, x.shape)
    yd = gmod.TensorDesc(gmod.DataType.FLOAT32, (x.shape[0], 1))
    cop = dev.compile_operator(dev.create_operator(gmod.ReduceDesc(gmod.ReduceFunction.AVERAGE, xd, yd, (1,))))
    init = dev.create_operator_initializer([cop])
    cl0 = dev.create_command_list()
    dev.create_command_recorder().record_dispatch(cl0, init, dev.create_binding_table(init))
    dev.execute_command_lists([cl0])
    a, y = dev.create_buffer(xd.total_size_in_bytes), dev.create_buffer(yd.total_size_in_bytes)
    a.write(x)
    table = dev.create_binding_table(cop)
    table.bind_inputs([gmod.BufferBinding(a)])
    table.bind_outputs([gmod.BufferBinding(y)])
    if cop.binding_properties.temporary_resource_size:
        table.bind_temporary_resource(gmod.BufferBinding(dev.create_buffer(cop.binding_properties.temporary_resource_size)))
    cl = dev.create_command_list()
    dev.create_command_recorder().record_dispatch(cl, cop, table)
    cl.close()

    def run():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="/tmp/before25")
    ap.add_argument("--devices", default="opencl:0,cpu")
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    old = load_before(args.before)
    rng = np.random.default_rng(0)
    n = args.mb << 20
    big = rng.random((n // 4 // 4096, 4096), dtype=np.float32)
    a, b = big[: big.shape[0] // 2], big[big.shape[0] // 2:]        # two inputs of mb/2 each
    small = rng.random((256, 1024), dtype=np.float32)
    s2 = rng.random((256, 1024), dtype=np.float32)
    tiny = rng.random((16, 16), dtype=np.float32)
    print(f"{args.mb} MiB float32 x {big.shape}; mean(a, b) over two halves; small {small.shape}; tiny {tiny.shape}")
    for spec in args.devices.split(","):
        dev_new, dev_old = gm.create_device(spec), old.create_device(spec)
        kernel = descriptor_path(gm, dev_new, big)
        rows = {
            "reduce_mean(x,[1])": (lambda m, d, x=big: m.reduce_mean(x, [1], device=d), lambda: big.mean(axis=1),
                                   big.nbytes),
            "mean(a,b)": (lambda m, d: m.mean(a, b, device=d), lambda: (a + b) / 2, a.nbytes + b.nbytes),
        }
        fns = {"kernel": kernel}
        for name, (call, ref, _) in rows.items():
            fns[(name, "before")] = lambda c=call, d=dev_old: c(old, d)
            fns[(name, "after")] = lambda c=call, d=dev_new: c(gm, d)
            fns[(name, "numpy")] = ref
        t = best_times(fns, args.repeats)
        print(f"\n{spec}: GB/s of input (best of {args.repeats}, interleaved)")
        print(f"  {'call':<22} {'before':>8} {'after':>8} {'numpy':>8} {'descriptors':>12}")
        for name, (_, _, nbytes) in rows.items():
            k = f"{big.nbytes / t['kernel'] / 1e9:12.1f}" if name.startswith("reduce") else ""
            gbs = " ".join(f"{nbytes / t[(name, w)] / 1e9:8.1f}" for w in ("before", "after", "numpy"))
            print(f"  {name:<22} {gbs} {k}")
        for label, x, y, inner in (("small", small, s2, 50), ("tiny", tiny, tiny, 300)):
            rows = {
                "reduce_mean(x,[1])": (lambda m, d, x=x: m.reduce_mean(x, [1], device=d), lambda x=x: x.mean(axis=1)),
                "mean(x,y)": (lambda m, d, x=x, y=y: m.mean(x, y, device=d), lambda x=x, y=y: (x + y) / 2),
                "reduce_mean(x.T,[1])": (lambda m, d, x=x: m.reduce_mean(x.T, [1], device=d),
                                         lambda x=x: x.T.mean(axis=1)),
            }
            fns = {}
            for name, (call, ref) in rows.items():
                fns[(name, "before")] = lambda c=call, d=dev_old: c(old, d)
                fns[(name, "after")] = lambda c=call, d=dev_new: c(gm, d)
                fns[(name, "numpy")] = ref
            t = best_times(fns, 9, inner)
            print(f"  {label} {x.shape}, us per call (best of 9 x {inner})")
            for name in rows:
                print(f"  {name:<22} " + " ".join(f"{t[(name, w)] * 1e6:8.1f}" for w in ("before", "after", "numpy")))


if __name__ == "__main__":
    main()
