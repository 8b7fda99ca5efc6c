"""The n-ary mean's kernel time by the data it meets, this tree against another checkout, side by side.

    git worktree add --detach /tmp/before <commit>
    python tools/bench_nary_data.py --before /tmp/before --device opencl --mb 32 --rounds 5

The correctly rounded n-ary mean (issue 22) decides most elements from a FLOAT64 sum and sends the
others through the exact path (docs/design.md, "Correct rounding"), so its time depends on
the values: ``ones`` (what tools/bench_kernels.py times), ``normal`` (standard normal values: about
5 % of FLOAT32 means of three lie exactly on a midpoint), ``ties`` (every mean exactly a midpoint),
``adversarial`` (every element +-largest beside a tiny value: every element takes the exact path,
whose TwoSum step decides it), ``inexact`` (FLOAT32: 1, 2^-40 and -2^-80 times values in [1, 2):
the FLOAT64 sum rounds, the sum of its errors does not, the same TwoSum step; FLOAT16: 1, 2^-12,
-2^-23, the FLOAT32 sum rounds), ``superacc`` (FLOAT32: -2^-100 for the third: the errors' sum
rounds too, the superaccumulator for every element; FLOAT16 as ``inexact``; FLOAT64, which has no
wider sum: ``inexact`` 1, 2^-30, -2^-45 (the TwoSum pair exact), ``superacc`` 1, 2^-60, -2^-130).
Each round runs one fresh process per tree and data kind, alternating trees; each process times the
3-input mean over (n/1024, 1024) tensors on device buffers (median of ``--repeat`` runs after a
warm-up) and prints GB/s (inputs read once and the output written once, over time).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import median

PROBE = r"""
import json, sys
import numpy as np
import gpu_mean as gm
from gpu_mean.runtime.objects import BufferBinding
from gpu_mean.checks import profiler
spec, n, repeat, dtname, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
dev = gm.create_device(spec)
dt = getattr(gm.DataType, dtname)
npdt = np.dtype({"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64}[dtname])
rows = n // 1024
t = gm.TensorDesc(dt, (rows, 1024))
desc = gm.ext.NaryMeanDesc([t] * 3, t)
rng = np.random.default_rng(1)
big = float(np.finfo(npdt).max)
tiny = float(np.finfo(npdt).smallest_subnormal)
if kind == "ones":
    data = [np.ones(n, npdt)] * 3
elif kind == "normal":
    data = [rng.standard_normal(n).astype(npdt) for _ in range(3)]
elif kind == "ties":       # every mean exactly a midpoint (tests/test_correct_rounding.py: exact_ties)
    p = {"FLOAT32": 24, "FLOAT16": 11, "FLOAT64": 53}[dtname]
    head = np.floor(rng.uniform(1.5, 2.0, (2, n)) * 2.0 ** (p - 1)) / 2.0 ** (p - 1)
    s = head.sum(axis=0)
    odd = np.floor(((s + 0.75) * 2.0 ** p / 3 - 1) / 2) * 2 + 1
    data = [head[0].astype(npdt), head[1].astype(npdt), (3 * odd / 2.0 ** p - s).astype(npdt)]
elif kind in ("inexact", "superacc"):   # exponents far apart: a FLOAT64 sum that rounds
    u = [rng.uniform(1.0, 2.0, n) for _ in range(3)]
    far = -(2.0 ** -80) if kind == "inexact" else -(2.0 ** -100)
    far64 = (1.0, 2.0 ** -30, -(2.0 ** -45)) if kind == "inexact" else (1.0, 2.0 ** -60, -(2.0 ** -130))
    sc = {"FLOAT32": (1.0, 2.0 ** -40, far), "FLOAT16": (1.0, 2.0 ** -12, -(2.0 ** -23)), "FLOAT64": far64}[dtname]
    data = [(a * s).astype(npdt) for a, s in zip(u, sc)]
else:                      # adversarial: +-largest and a tiny value in every element
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    data = [(sign * big).astype(npdt), (-sign * big).astype(npdt), (rng.integers(1, 100, n) * tiny).astype(npdt)]
cop = dev.compile_operator(dev.create_operator(desc))
init = dev.create_operator_initializer([cop])
rec = dev.create_command_recorder()
cl0 = dev.create_command_list()
rec.record_dispatch(cl0, init, dev.create_binding_table(init))
dev.execute_command_lists([cl0])
ins = []
for x in data:
    b = dev.create_buffer(x.nbytes)
    b.write(np.ascontiguousarray(x))
    ins.append(BufferBinding(b, 0, x.nbytes))
ob = dev.create_buffer(n * npdt.itemsize)
table = dev.create_binding_table(cop)
table.bind_inputs(ins)
table.bind_outputs([BufferBinding(ob, 0, n * npdt.itemsize)])
cl = dev.create_command_list()
rec.record_dispatch(cl, cop, table)
def go():
    dev.execute_command_lists([cl])
    dev.synchronize()
print(json.dumps(4 * n * npdt.itemsize / profiler.median_time(go, repeat) / 1e9))
"""


def measure(tree: Path, device: str, n: int, repeat: int, dt: str, kind: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", PROBE, device, str(n), str(repeat), dt, kind], env=env,
                         capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, help="a checkout of the tree to compare with")
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--mb", type=int, default=32, help="MiB of float32 input per input tensor (float16: half)")
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="ones,normal,ties,adversarial,inexact,superacc")
    ap.add_argument("--dtypes", default="FLOAT32,FLOAT16")
    a = ap.parse_args()
    trees = {"before": a.before.resolve(), "after": Path(__file__).resolve().parent.parent}
    n = a.mb * (1 << 20) // 4
    print(f"{a.device}, 3-input n-ary mean, {a.mb} MiB float32 per input, GB/s, median of {a.rounds} alternating "
          f"rounds (each the median of {a.repeat} runs)")
    print(f"{'case':24s} {'before':>8s} {'after':>8s} {'after/before':>13s}   rounds before | after", flush=True)
    for dt in a.dtypes.split(","):
        for kind in a.kinds.split(","):
            runs: dict = {label: [] for label in trees}
            for _ in range(a.rounds):
                for label, tree in trees.items():
                    runs[label].append(measure(tree, a.device, n, a.repeat, dt, kind))
            b, f = runs["before"], runs["after"]
            print(f"{dt + ' ' + kind:24s} {median(b):8.2f} {median(f):8.2f} {median(f) / median(b):13.2f}   "
                  f"{' '.join(f'{x:.1f}' for x in b)} | {' '.join(f'{x:.1f}' for x in f)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
