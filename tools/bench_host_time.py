"""Host time per tiny execute, this tree against another checkout, side by side in one run.

    git worktree add --detach /tmp/before <commit>
    python tools/bench_host_time.py --before /tmp/before --devices cpu opencl --rounds 3

Each round runs, for every device, one fresh process per tree (alternating, so that the machine's
drift falls on both): the profiler's host-time figure (a recorded command list of one 16-element
mean or a 4x16 reduction, executed and synchronized) and the one-call ``CompiledOperator.execute`` of the same operator.
Medians of 2000 calls each, in microseconds.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys, numpy as np, gpu_mean as gm
from gpu_mean.checks import profiler
dev = gm.create_device(sys.argv[1])
t = gm.TensorDesc(gm.DataType.FLOAT32, (16,))
if sys.argv[2] == "reduce":
    x, y = gm.TensorDesc(gm.DataType.FLOAT32, (4, 16)), gm.TensorDesc(gm.DataType.FLOAT32, (4, 1))
    cop = dev.compile_operator(dev.create_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x, y, [1])))
    ins = [dev.create_buffer(256)]
else:
    cop = dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(t, t, t)))
    ins = [dev.create_buffer(64)] * 2
b = dev.create_buffer(64)
cop.execute(inputs=ins, outputs=[b])
listed = profiler.host_overhead(dev, 2000)
single = profiler.median_time(lambda: cop.execute(inputs=ins, outputs=[b]), 2000)
print(f"{listed * 1e6:.1f} {single * 1e6:.1f}")
"""


def measure(tree: Path, device: str, op: str) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", PROBE, device, op], env=env, capture_output=True, text=True,
                         check=True, cwd=tree)
    listed, single = out.stdout.split()
    return float(listed), float(single)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, help="a checkout of the tree to compare with")
    ap.add_argument("--devices", nargs="+", default=["cpu", "opencl"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", nargs="+", default=["mean", "reduce"], choices=["mean", "reduce"],
                    help="mean: a 16-element ELEMENT_WISE_MEAN; reduce: REDUCE AVERAGE of (4, 16) over axis 1")
    a = ap.parse_args()
    trees = {"before": a.before.resolve(), "after": Path(__file__).resolve().parent.parent}
    print("host time per tiny execute, us: recorded list execute+synchronize | one-call execute()")
    for r in range(a.rounds):
        for dev, op in [(d, o) for d in a.devices for o in a.ops]:
            row = [f"round {r + 1} {dev:7s} {op:6s}"]
            for label, tree in trees.items():
                listed, single = measure(tree, dev, op)
                row.append(f"{label} {listed:6.1f} | {single:6.1f}")
            print("   ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
