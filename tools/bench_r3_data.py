"""R3's FLOAT16 rows of 8 on three kinds of data, this tree against another checkout, in one run.

    python tools/bench_r3_data.py --before /tmp/before [--rounds 2]

The CPU-shaped kernel sums a block of eight rows in float when the block's values span at most 10
binades and in double otherwise (reduce_cpu_short.h: gm_exact_in_float), so its speed depends on the data:
all ones (every block in float), standard normal values (a few blocks in double) and values spread
over 30 binades in every row (every block in double, after the check). Each round runs one process
per tree, alternating; GB/s of input read.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import numpy as np
import gpu_mean as gm
from gpu_mean.runtime.objects import BufferBinding
from gpu_mean.checks import profiler
dev = gm.create_device("opencl")
rows = (32 << 20) // 4 // 8


def run(cop, table):
    rec, cl = dev.create_command_recorder(), dev.create_command_list()
    rec.record_dispatch(cl, cop, table)
    return cl


def prep(x):
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, gm.TensorDesc(gm.DataType.FLOAT16, x.shape),
                         gm.TensorDesc(gm.DataType.FLOAT16, (rows, 1)), (1,))
    cop = dev.compile_operator(dev.create_operator(desc))
    init = dev.create_operator_initializer([cop])
    dev.execute_command_lists([run(init, dev.create_binding_table(init))])
    bi, bo = dev.create_buffer(x.nbytes), dev.create_buffer(rows * 2)
    bi.write(x)
    t = dev.create_binding_table(cop)
    t.bind_inputs([BufferBinding(bi, 0, x.nbytes)])
    t.bind_outputs([BufferBinding(bo, 0, rows * 2)])
    cl = run(cop, t)

    def go():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return go


rng = np.random.default_rng(0)
data = {"ones": np.ones((rows, 8), np.float16), "normal": rng.standard_normal((rows, 8)).astype(np.float16),
        "30 binades": (rng.standard_normal((rows, 8)) * 2.0 ** rng.integers(-20, 10, (rows, 8))).astype(np.float16)}
gos = {k: prep(v) for k, v in data.items()}
res = {k: [] for k in gos}
for _ in range(5):
    for k, go in gos.items():
        res[k].append(rows * 8 * 2 / profiler.median_time(go, 9) / 1e9)
for k, v in res.items():
    print(f"{k} {float(np.median(v)):.1f} GB/s")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    trees = {"before": a.before.resolve(), "after": Path(__file__).resolve().parent.parent}
    for r in range(a.rounds):
        for label, tree in trees.items():
            out = subprocess.run([sys.executable, "-c", PROBE], env=dict(os.environ, PYTHONPATH=str(tree)),
                                 capture_output=True, text=True, check=True, cwd=tree).stdout.split("\n")
            print(f"round {r + 1} {label:6s} " + " | ".join(x for x in out if x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
