"""Arrays of 1, 2 and 5 GiB through the functional calls, against numpy, and the memory they hold.

One fresh process per size (so the first call is a first call: no launch cached, no pooled buffer,
kernels from PoCL's disk cache at most) makes a float32 array of that size and times, call by call,
gm.reduce_mean(x, [0]), gm.reduce_mean(x, [1]) and gm.mean(x, x) beside numpy's x.mean(0), x.mean(1)
and (x + x) * 0.5: the first call of each, then the median of --repeat later calls taken in turns with
numpy's (benches/timing.py). Then what the functional calls' pool holds, and the process's resident
memory before the calls, after them and after gm.free_memory (MiB).

--pocl-memory-limit GIB sets PoCL's POCL_MEMORY_LIMIT in the processes: PoCL then reports that much
global memory and a quarter of it, rounded up to a power of two, as its largest buffer (7 gives the
2 GiB of the machine issue 26 was found on, where a 3 GiB array passes it).
"""
from __future__ import annotations

import os

ROUNDS = 1
FIGURES = {"first_ms": "lower", "later_ms": "lower", "later/numpy": "lower"}


def add_arguments(ap) -> None:
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--sizes", default="1,2,5", help="GiB per array, comma-separated (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="later calls timed per call (default %(default)s)")
    ap.add_argument("--pocl-memory-limit", type=int, help="POCL_MEMORY_LIMIT (GiB) for the measured processes")


def cases(args) -> list:
    return args.sizes.split(",")


def env(args, case, tree, work) -> dict:
    return {"POCL_MEMORY_LIMIT": str(args.pocl_memory_limit)} if args.pocl_memory_limit else {}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(args, size: str) -> dict:
    import gc

    import numpy as np

    import gpu_mean as gm
    from benches.timing import interleaved
    gib = float(size)
    dev = gm.create_device(args.device)
    x = np.empty((int(gib * 2**30) // 4096, 1024), np.float32)
    x[...] = 0.5
    # memory this process has never touched costs a first-touch page fault (seconds per GiB on a VM
    # whose memory the hypervisor hands out lazily): touch a result's worth once, for both contenders
    warm = np.ones_like(x)
    del warm
    gc.collect()
    before = rss_mib()
    calls = {
        "reduce_mean(x, [0])": (lambda: gm.reduce_mean(x, [0], device=dev), lambda: x.mean(axis=0)),
        "reduce_mean(x, [1])": (lambda: gm.reduce_mean(x, [1], device=dev), lambda: x.mean(axis=1)),
        "mean(x, x)": (lambda: gm.mean(x, x, device=dev), lambda: (x + x) * np.float32(0.5)),
    }
    out = {}
    for name, (ours, theirs) in calls.items():
        try:
            first = interleaved({"ours": ours, "numpy": theirs}, 1, warmup=0)
        except Exception:          # a call past the device's largest buffer failed before issue 26
            out[f"{gib:g} GiB {name}"] = {"failed": 1.0}
            continue
        later = interleaved({"ours": ours, "numpy": theirs}, args.repeat, warmup=0)
        o, n = float(np.median(later["ours"])), float(np.median(later["numpy"]))
        out[f"{gib:g} GiB {name}"] = {"first_ms": first["ours"][0] * 1e3, "numpy_first_ms": first["numpy"][0] * 1e3,
                                      "later_ms": o * 1e3, "numpy_later_ms": n * 1e3, "later/numpy": o / n}
        gc.collect()
    after = rss_mib()
    held = gm.memory_pool(dev).total_bytes() / 2**20
    gm.free_memory()
    gc.collect()
    largest = (getattr(dev, "max_alloc_bytes", 0) or 0) / 2**20
    out[f"{gib:g} GiB memory (MiB)"] = {"pool_held": held, "rss_before": before, "rss_after_calls": after,
                                        "rss_after_free": rss_mib(), "largest_buffer": largest}
    return out
