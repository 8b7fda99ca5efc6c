"""The harness's one timing helper: functions timed in turns inside one process.

Every benchmark that times more than one thing in a process (its subject and a yardstick: numpy,
CuPy, a bare pyopencl round trip, a native loop, the descriptor path) calls ``interleaved``: the
functions take turns, repeat by repeat, and each goes first in turn, so that load from other
processes on a shared machine falls on all of them alike and a ratio of two figures comes from the
same seconds of the machine's life.
"""
from __future__ import annotations

import statistics
import time


def interleaved(fns: dict, repeats: int, calls: int = 1, warmup: int = 1, sync=None) -> dict:
    """Seconds per call of each function in ``fns`` ({name: function}), one sample per repeat, each
    sample the mean over ``calls`` back-to-back calls; the functions take turns and the one that goes
    first rotates every repeat. Each function is called ``warmup`` times first (compiles, pools).
    ``sync`` (a function) is called before each sample starts and before it ends: for devices whose
    calls are queued. Returns {name: [seconds per call, one per repeat]}."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    if sync:
        sync()
    samples: dict = {name: [] for name in names}
    for r in range(repeats):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn = fns[name]
            if sync:
                sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if sync:
                sync()
            samples[name].append((time.perf_counter() - t0) / calls)
    return samples


def best(samples: list) -> float:
    return min(samples)


def median(samples: list) -> float:
    return statistics.median(samples)


def pick(samples: list, stat: str) -> float:
    """``stat`` "min" (the fastest sample: least disturbed by other users of the machine, a best
    case) or "median"."""
    return best(samples) if stat == "min" else median(samples)


def spread(samples: list) -> float:
    """Interquartile range over the median (0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    q = statistics.quantiles(samples, n=4)
    return (q[2] - q[0]) / statistics.median(samples)
