"""Start-up: the first ``gm.reduce_mean`` of a new process, cold and warm, in one run.

Each sample is a fresh Python process that imports gpu_mean and times its first call
``gm.reduce_mean(x, axis=1, device=DEVICE)`` on a (64, 1024) float32 array (device discovery, the
context, the program build and the launch). Two caches decide what that process compiles: gpu_mean's
kernel cache (GPU_MEAN_CACHE_DIR) and, on PoCL, PoCL's own (POCL_CACHE_DIR); each scenario gives
each an empty folder, a folder a previous process filled, or turns gpu_mean's off:

    cold            both empty                         (a first run, with the cache)
    cold, no cache  gpu_mean's off, PoCL's empty       (a first run before the cache)
    PoCL warm       gpu_mean's off, PoCL's filled      (a second run before the cache)
    ours warm       gpu_mean's filled, PoCL's empty    (a second run, PoCL's cache cleared)
    both warm       both filled                        (a second run with the cache)

On PoCL the cache keeps only a note that a program was built (PoCL's own cache keeps the build, and
asking PoCL for a binary costs a compile of every kernel: gpu_mean/backends/opencl.py, keeps_binaries);
``--pocl-binaries`` adds the same scenarios with binaries kept on PoCL too ("+bin"), which is what
every other OpenCL driver gets.

Scenarios take turns in every round (shuffled), so load from other processes on a shared machine
falls on all alike; the table gives the median, the spread (interquartile range over the median)
and the fastest sample per scenario, and the compiles the process announced. ``--cuda`` adds NVRTC
alone (no GPU needed): the time of ``cuda_compile.image`` for the same reduction's GPU variant
(sm_90), cold and warm.

    python tools/bench_startup.py [--device opencl:0] [--rounds 7] [--pocl-binaries] [--cuda]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import gpu_mean as gm
from gpu_mean.backends import diskcache
t1 = time.perf_counter()
if len(sys.argv) > 2:                     # --pocl-binaries: keep binaries on PoCL too
    from gpu_mean.backends import opencl
    opencl.keeps_binaries = lambda device: True
compiled = []
with diskcache.on_compile(compiled.append):
    y = gm.reduce_mean(np.ones((64, 1024), np.float32), axis=1, device=sys.argv[1])
t2 = time.perf_counter()
assert float(y[0, 0]) == 1.0
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "compiled": len(compiled)}))
"""

CUDA_CHILD = """
import json, time
t0 = time.perf_counter()
import gpu_mean as gm
from gpu_mean.backends import cuda_compile, diskcache
from gpu_mean.kernels import reduce_kernels
from gpu_mean.runtime import planning
xd, yd = gm.TensorDesc(gm.DataType.FLOAT32, (64, 1024)), gm.TensorDesc(gm.DataType.FLOAT32, (64, 1))
plan = planning.plan_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, axes=(1,)))
macros = reduce_kernels.gpu_variant(plan, sms=132).macros
t1 = time.perf_counter()
compiled = []
with diskcache.on_compile(compiled.append):
    image = cuda_compile.image("reduce_gpu.cl", macros, 90, device="NVIDIA H200", driver=13000)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "compiled": len(compiled)}))
"""

SCENARIOS = {            # (gpu_mean's cache, PoCL's cache): "empty", "warm" or "off"; binaries kept on PoCL
    "cold": ("empty", "empty", False),
    "cold, no cache": ("off", "empty", False),
    "PoCL warm": ("off", "warm", False),
    "ours warm": ("warm", "empty", False),
    "both warm": ("warm", "warm", False),
}
BINARY_SCENARIOS = {
    "cold +bin": ("empty", "empty", True),
    "ours warm +bin": ("warm", "empty", True),
    "both warm +bin": ("warm", "warm", True),
}


def run_child(code: str, args: list, ours: str, pocl: str, binaries: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPU_MEAN_CACHE_DIR": ours, "POCL_CACHE_DIR": pocl}
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *args, *(["binaries"] if binaries else [])], env=env,
                       capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(f"the child failed:\n{r.stderr}")
    return {**json.loads(r.stdout.strip().splitlines()[-1]), "process": wall}


def summary(samples: list) -> str:
    def cell(key):
        v = sorted(s[key] for s in samples)
        med = statistics.median(v)
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [med, med, med]
        return f"{med * 1e3:7.0f} ms +-{(q[2] - q[0]) / med:4.0%} (min {v[0] * 1e3:5.0f})"
    compiled = sorted({s["compiled"] for s in samples})
    return f"{cell('first')}   {cell('process')}   {'/'.join(map(str, compiled)):>8}"


def bench(code: str, args: list, scenarios: dict, rounds: int, seed: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="gm-bench-startup-"))
    try:
        warm_ours, warm_pocl = {False: work / "ours", True: work / "ours-bin"}, {}
        # fill gpu_mean's caches once; each "warm" PoCL folder is filled by a process of its own scenario
        for binaries in {b for _, _, b in scenarios.values()}:
            run_child(code, args, str(warm_ours[binaries]), str(work / f"fill-pocl-{binaries}"), binaries)
        for name, (ours, pocl, binaries) in scenarios.items():
            if pocl == "warm":
                warm_pocl[name] = work / f"pocl-{len(warm_pocl)}"
                run_child(code, args, "off" if ours == "off" else str(warm_ours[binaries]), str(warm_pocl[name]),
                          binaries)
        samples = {name: [] for name in scenarios}
        rng = random.Random(seed)
        for r in range(rounds):
            order = list(scenarios)
            rng.shuffle(order)
            for name in order:
                ours, pocl, binaries = scenarios[name]
                fresh = work / f"r{r}-{len(samples[name])}-{order.index(name)}"
                o = {"off": "off", "warm": str(warm_ours[binaries]), "empty": str(fresh / "ours")}[ours]
                p = str(warm_pocl[name]) if pocl == "warm" else str(fresh / "pocl")
                samples[name].append(run_child(code, args, o, p, binaries))
        return samples
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--pocl-binaries", action="store_true", help="also the scenarios with binaries kept on PoCL")
    ap.add_argument("--cuda", action="store_true", help="also NVRTC alone: cuda_compile.image cold and warm")
    a = ap.parse_args(argv)
    head = f"{'scenario':16s} {'first call':>28s}   {'whole process':>28s}   compiled"
    print(f"bench_startup: first gm.reduce_mean on {a.device}, a fresh process per sample, {a.rounds} rounds, "
          f"scenarios interleaved; median +-spread (IQR/median)")
    print(head)
    scenarios = {**SCENARIOS, **(BINARY_SCENARIOS if a.pocl_binaries else {})}
    for name, s in bench(CHILD, [a.device], scenarios, a.rounds, a.seed).items():
        print(f"{name:16s} {summary(s)}")
    if a.cuda:
        print("\nNVRTC alone (no GPU): cuda_compile.image for the same reduction's GPU variant, sm_90")
        print(head)
        nv = {"cold": ("empty", "empty", False), "warm": ("warm", "empty", False)}
        for name, s in bench(CUDA_CHILD, [], nv, a.rounds, a.seed).items():
            print(f"{name:16s} {summary(s)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
