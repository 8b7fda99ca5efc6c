"""Arrays of 1, 2 and 5 GiB through the functional calls, against numpy (a benchmark, not a test).

For each size a fresh process (so that the first call is a first call: no launch cached, no pooled
buffer, kernels from PoCL's disk cache at most) makes a float32 array of that size and times, call
by call, ``gm.reduce_mean(x, [0])``, ``gm.reduce_mean(x, [1])`` and ``gm.mean(x, x)`` beside numpy's
``x.mean(0)``, ``x.mean(1)`` and ``(x + x) * 0.5``: the first call of each, then the median of
--rounds later calls taken in turns with numpy's. It then reports what the functional calls' pool
holds, and the process's resident memory before the calls, after them, and after gm.free_memory.

With --before TREE the same process runs with another checkout's gpu_mean first, size by size
(before, after, before, after, ...), so both meet the same load from other processes.
--pocl-memory-limit GIB sets PoCL's POCL_MEMORY_LIMIT in the processes: PoCL then reports that much
global memory and a quarter of it, rounded up to a power of two, as its largest buffer (7 gives the
2 GiB of the machine issue 26 was found on, where a 3 GiB array passes it).

    python tools/bench_large.py [--device opencl:0] [--sizes 1,2,5] [--rounds 3] [--before /tmp/main]
                                [--pocl-memory-limit 7]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import numpy as np

CALLS = ("reduce_mean(x, [0])", "reduce_mean(x, [1])", "mean(x, x)")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def pool_held(gm, dev) -> int | None:
    """Bytes the functional calls' pool holds for ``dev`` (computed from the internals where the
    checkout has no gm.memory_pool)."""
    if hasattr(gm, "memory_pool"):
        return gm.memory_pool(dev).total_bytes()
    from gpu_mean.frontends import pool
    c = pool.device_cache(dev)
    free = sum(b.size for bufs in c.pool.free.values() for b in bufs)
    return free + sum(b.size for ln in c.launches.values() for b in ln.owned)


def timed(fn):
    t = time.perf_counter()
    r = fn()
    dt = time.perf_counter() - t
    del r
    return dt


def child(gib: float, device: str, rounds: int) -> dict:
    import gpu_mean as gm
    dev = gm.create_device(device)
    x = np.empty((int(gib * 2**30) // 4096, 1024), np.float32)
    x[...] = 0.5
    # memory this process has never touched costs a first-touch page fault (seconds per GiB on a VM
    # whose memory the hypervisor hands out lazily): touch a result's worth once, for both contenders
    warm = np.ones_like(x)
    del warm
    gc.collect()
    out = {"gib": gib, "device": dev.name, "max_alloc": getattr(dev, "max_alloc_bytes", None),
           "global_memory": dev.info.global_memory, "rss_before": rss(), "calls": {}}
    calls = {
        "reduce_mean(x, [0])": (lambda: gm.reduce_mean(x, [0], device=dev), lambda: x.mean(axis=0)),
        "reduce_mean(x, [1])": (lambda: gm.reduce_mean(x, [1], device=dev), lambda: x.mean(axis=1)),
        "mean(x, x)": (lambda: gm.mean(x, x, device=dev), lambda: (x + x) * np.float32(0.5)),
    }
    for name, (ours, theirs) in calls.items():
        rec = out["calls"][name] = {}
        try:
            rec["first"] = timed(ours)
        except Exception as e:     # the state before: a call past the device's largest buffer fails
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        rec["numpy_first"] = timed(theirs)
        later, numpy_later = [], []
        for _ in range(rounds):
            if "error" not in rec:
                later.append(timed(ours))
            numpy_later.append(timed(theirs))
        rec["later"] = float(np.median(later)) if later else None
        rec["numpy_later"] = float(np.median(numpy_later))
        gc.collect()
    out["rss_after_calls"] = rss()
    out["pool_held"] = pool_held(gm, dev)
    out["freed"] = gm.free_memory() if hasattr(gm, "free_memory") else None
    gc.collect()
    out["rss_after_free"] = rss()
    return out


def run_child(tree: str | None, gib: float, device: str, rounds: int, pocl_limit: int | None) -> dict:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree)
    if pocl_limit:
        env["POCL_MEMORY_LIMIT"] = str(pocl_limit)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(gib), "--device", device, "--rounds", str(rounds)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode:
        return {"gib": gib, "crashed": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}
    return json.loads(p.stdout.strip().splitlines()[-1])


def ms(t) -> str:
    return "-" if t is None else f"{t * 1e3:8.0f}"


def report(label: str, r: dict) -> None:
    if "crashed" in r:
        print(f"{label} {r['gib']:g} GiB: the process failed: {r['crashed']}")
        return
    mib = 2**20
    print(f"\n{label}, {r['gib']:g} GiB float32 on {r['device']} (largest buffer {r['max_alloc']}, memory "
          f"{r['global_memory']}):")
    print(f"  {'call':22s} {'first ms':>9s} {'numpy':>8s} {'later ms':>9s} {'numpy':>8s} {'later/numpy':>12s}")
    for name, c in r["calls"].items():
        if "error" in c:
            print(f"  {name:22s} {c['error']}")
            continue
        ratio = c["later"] / c["numpy_later"]
        print(f"  {name:22s} {ms(c['first'])} {ms(c['numpy_first'])} {ms(c['later'])} {ms(c['numpy_later'])} "
              f"{ratio:11.2f}x")
    before, after, freed = r["rss_before"], r["rss_after_calls"], r["rss_after_free"]
    print(f"  pool holds {r['pool_held'] / mib:.1f} MiB after the calls; resident memory {before / mib:.0f} MiB "
          f"before, {after / mib:.0f} after the calls, {freed / mib:.0f} after gm.free_memory "
          f"({(freed - before) / before * 100:+.1f} % of before)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--sizes", default="1,2,5", help="GiB per array, comma-separated (default 1,2,5)")
    ap.add_argument("--rounds", type=int, default=3, help="later calls timed per call (default 3)")
    ap.add_argument("--before", help="another checkout's tree, run first size by size")
    ap.add_argument("--pocl-memory-limit", type=int, help="POCL_MEMORY_LIMIT (GiB) for the measured processes")
    ap.add_argument("--child", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child, a.device, a.rounds)))
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for gib in (float(s) for s in a.sizes.split(",")):
        if a.before:
            report("before", run_child(a.before, gib, a.device, a.rounds, a.pocl_memory_limit))
        report("after", run_child(here, gib, a.device, a.rounds, a.pocl_memory_limit))


if __name__ == "__main__":
    main()
