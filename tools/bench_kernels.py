"""Kernel throughput per shape class, this tree against another checkout, side by side in one run.

    git worktree add --detach /tmp/before <commit>
    python tools/bench_kernels.py --before /tmp/before --device opencl --mb 64 --rounds 3

For every shape class of the profiler (gpu_mean.checks.profiler.class_cases), ``--rounds`` rounds each
run one fresh process per tree, alternating (which tree goes first swaps every round), so that the
machine's drift falls on both trees within seconds of each other; each process times the class
through a recorded command list on device buffers, median of ``--repeat`` runs after a warm-up
(or their fastest, ``--stat min``), and prints GB/s (bytes each input read once +
output written once, over time). The table gives each class's median over the rounds, before and
after, their ratio, the median of the rounds' own ratios ("paired"), the fastest rounds' ratio
("best"), and every round's figure.

``--pair A,B`` (two DataType names) compares two data types of the same class instead, in both trees:
each round runs one process per tree (trees alternating), and each process prepares both types' cases
and interleaves their runs; the table gives per tree each round's A/B ratio of bytes per second and
their median, so that A's share of B's speed is measured within one process, before and after, in one run:

    python tools/bench_kernels.py --before /tmp/pre13 --pair BFLOAT16,FLOAT16 --only R6 --stat min
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import median

PROBE = """
import json, sys, gpu_mean as gm
from gpu_mean.checks import profiler
spec = sys.argv[1]
if spec.startswith("opencl") and spec.endswith(("-nofp64", "-gpupaths")):   # the test variants (tests/conftest.py)
    from gpu_mean.backends import opencl
    dev = gm.Device(opencl.make_backend(int(spec.split(":")[1].split("-")[0]), allow_fp64="-nofp64" not in spec,
                                        gpu_paths="-gpupaths" in spec))
else:
    dev = gm.create_device(spec)
n, repeat, which = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
case = profiler.class_cases(n, tuple(gm.DataType[t] for t in sys.argv[5].split(",")))[which]
if sys.argv[7] == "normal":     # seeded standard normal values (zero mean: the bound tests' hard case)
    import numpy as np
    rng = np.random.default_rng(24)
    go = profiler.prepare_device(dev, case, [rng.standard_normal(t.total_size_in_bytes // t.numpy_dtype.itemsize)
                                             .astype(t.numpy_dtype) for t in case.desc().input_tensors()])
else:
    go = profiler.prepare_device(dev, case)
if sys.argv[6] == "min":
    import time
    go()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        go()
        ts.append(time.perf_counter() - t0)
    t = min(ts)
else:
    t = profiler.median_time(go, repeat)
print(json.dumps({f"{case.klass} {case.dtype.name}": case.traffic / t / 1e9}))
"""


def measure(tree: Path, device: str, n: int, repeat: int, which: int, dtypes: str, stat: str = "median",
            data: str = "ones") -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", PROBE, device, str(n), str(repeat), str(which), dtypes, stat, data],
                         env=env, capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, help="a checkout of the tree to compare with")
    ap.add_argument("--device", default="opencl", help="a device spec, or a test variant: opencl:0-nofp64, "
                    "opencl:0-gpupaths, opencl:0-gpupaths-nofp64")
    ap.add_argument("--mb", type=int, default=64, help="MiB of float32 input per case (float16 cases: half)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="run only the classes whose name contains this text (e.g. n-ary)")
    ap.add_argument("--dtypes", default="FLOAT32,FLOAT16", help="DataType names, comma-separated (default "
                    "FLOAT32,FLOAT16; e.g. BFLOAT16,FLOAT16)")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="each process's figure: the median of its runs (default), or the fastest run (less "
                    "sensitive to other users' load on a shared machine; a best case, not a typical one)")
    ap.add_argument("--data", choices=("ones", "normal"), default="ones",
                    help="the inputs' values: all ones (default), or seeded standard normal values (zero mean; "
                    "needs profiler.prepare_device's data argument in both trees)")
    ap.add_argument("--pair", default="", help="two DataType names A,B: per tree, each round's A/B ratio of "
                    "the same class (the four processes of a round back to back)")
    a = ap.parse_args()
    if a.pair:
        return pair_main(a)
    trees = {"before": a.before.resolve(), "after": Path(__file__).resolve().parent.parent}
    n = a.mb * (1 << 20) // 4
    from gpu_mean import DataType
    from gpu_mean.checks import profiler
    cases = profiler.class_cases(n, tuple(DataType[t] for t in a.dtypes.split(",")))
    chosen = [i for i, c in enumerate(cases) if a.only in f"{c.klass} {c.dtype.name}"]
    print(f"{a.device}, {a.mb} MiB float32 inputs, GB/s, median of {a.rounds} alternating rounds "
          f"(each the {a.stat} of {a.repeat} runs), {a.data} data")
    print("after/before: the medians' ratio; paired: the median of each round's ratio (the two processes of a "
          "round run seconds apart, so a jump of the machine's bandwidth between rounds cancels); best: the "
          "fastest round's ratio")
    print(f"{'class':34s} {'before':>8s} {'after':>8s} {'after/before':>13s} {'paired':>7s} {'best':>5s}   "
          "rounds before | after", flush=True)
    for which in chosen:
        runs: dict = {label: {} for label in trees}
        for r in range(a.rounds):
            for label, tree in (list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]):
                for key, v in measure(tree, a.device, n, a.repeat, which, a.dtypes, a.stat, a.data).items():
                    runs[label].setdefault(key, []).append(v)
        for key, f in runs["after"].items():
            b = runs["before"][key]
            paired = median(x / y for x, y in zip(f, b))
            print(f"{key:34s} {median(b):8.2f} {median(f):8.2f} {median(f) / median(b):13.2f} {paired:7.2f} "
                  f"{max(f) / max(b):5.2f}   "
                  f"{' '.join(f'{x:.1f}' for x in b)} | {' '.join(f'{x:.1f}' for x in f)}", flush=True)
    return 0


PAIR_PROBE = """
import json, sys, time, gpu_mean as gm
from gpu_mean.checks import profiler
spec = sys.argv[1]
if spec.startswith("opencl") and spec.endswith(("-nofp64", "-gpupaths")):
    from gpu_mean.backends import opencl
    dev = gm.Device(opencl.make_backend(int(spec.split(":")[1].split("-")[0]), allow_fp64="-nofp64" not in spec,
                                        gpu_paths="-gpupaths" in spec))
else:
    dev = gm.create_device(spec)
n, repeat = int(sys.argv[2]), int(sys.argv[3])
cases = profiler.class_cases(n, tuple(gm.DataType[t] for t in sys.argv[5].split(",")))
gos = []
for w in map(int, sys.argv[4].split(",")):
    case = cases[w]
    data = None
    if sys.argv[7] == "normal":
        import numpy as np
        rng = np.random.default_rng(24)
        data = [rng.standard_normal(t.total_size_in_bytes // t.numpy_dtype.itemsize).astype(t.numpy_dtype)
                for t in case.desc().input_tensors()]
    gos.append((case, profiler.prepare_device(dev, case, data)))
ts = [[] for _ in gos]
for g in gos:
    g[1]()
for r in range(repeat):     # the two cases' runs interleaved, the first one swapped every run
    for j in (range(len(gos)) if r % 2 == 0 else reversed(range(len(gos)))):
        t0 = time.perf_counter()
        gos[j][1]()
        ts[j].append(time.perf_counter() - t0)
import statistics
pick = min if sys.argv[6] == "min" else statistics.median
print(json.dumps([c.traffic / pick(t) / 1e9 for (c, _), t in zip(gos, ts)]))
"""


def pair_main(a) -> int:
    """--pair A,B: A's bytes per second over B's, class by class, round by round, in both trees; each
    process runs both types' cases, their runs interleaved (a jump of the machine's bandwidth between
    processes then falls on both)."""
    trees = {"before": a.before.resolve(), "after": Path(__file__).resolve().parent.parent}
    n = a.mb * (1 << 20) // 4
    from gpu_mean import DataType
    from gpu_mean.checks import profiler
    da, db = a.pair.split(",")
    cases = profiler.class_cases(n, (DataType[da], DataType[db]))
    half = len(cases) // 2
    chosen = [i for i in range(half) if a.only in cases[i].klass]
    print(f"{a.device}, {a.mb} MiB float32 inputs, {a.data} data, {a.rounds} rounds, one process per tree and "
          f"round (trees alternating), each running both types' cases interleaved, the {a.stat} of {a.repeat} runs "
          f"each; ratio: {da}/{db} bytes per second in the same process")
    print(f"{'class':26s} {'tree':6s} {da + ' GB/s':>13s} {db + ' GB/s':>13s} {'ratio':>7s}   rounds' ratios "
          f"({da} GB/s | {db} GB/s)")
    for which in chosen:
        got: dict = {label: ([], []) for label in trees}
        for r in range(a.rounds):
            for label, tree in (list(trees.items()) if r % 2 == 0 else list(trees.items())[::-1]):
                env = dict(os.environ, PYTHONPATH=str(tree))
                out = subprocess.run([sys.executable, "-c", PAIR_PROBE, a.device, str(n), str(a.repeat),
                                      f"{which},{which + half}", f"{da},{db}", a.stat, a.data],
                                     env=env, capture_output=True, text=True, check=True, cwd=tree)
                va, vb = json.loads(out.stdout.strip().splitlines()[-1])
                got[label][0].append(va)
                got[label][1].append(vb)
        for label in trees:
            xa, xb = got[label]
            ratios = [x / y for x, y in zip(xa, xb)]
            print(f"{cases[which].klass:26s} {label:6s} {median(xa):13.2f} {median(xb):13.2f} {median(ratios):7.3f}   "
                  f"{' '.join(f'{x:.3f}' for x in ratios)}  ({' '.join(f'{x:.1f}' for x in xa)} | "
                  f"{' '.join(f'{x:.1f}' for x in xb)})", flush=True)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
