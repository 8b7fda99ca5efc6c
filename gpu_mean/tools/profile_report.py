"""``gpu-mean profile``: choose the cases, run the profiler, print, write JSON and a PNG plot."""
from __future__ import annotations

import json
import time

import numpy as np

from .. import backends
from ..descriptors.types import DataType
from . import profiler
from .cases import Case


def _select(case_list, ops, dtypes) -> list[Case]:
    return [c for c in case_list if (not ops or c.op in ops) and (not dtypes or c.dtype.name in dtypes)]


def main(device=None, size_mb=256.0, repeat=10, peers=False, ops=None, dtypes=None, shape=None, axes=None,
         sweep=False, json_path=None, plot_path=None, log=print) -> int:
    dev = backends.create_device(device)
    t0 = time.perf_counter()
    dts = [DataType[d] for d in dtypes] if dtypes else [profiler.F32, profiler.F16]
    max_bytes = int(size_mb * 2**20)
    llc = profiler.last_level_cache(dev)
    if sweep:
        sizes = profiler.sweep_sizes(llc, max_bytes)
    else:
        sizes = [max_bytes]
    log(f"profile: {dev.name}; median of {repeat} runs per case; last-level cache {llc / 2**20:.0f} MiB")
    for d in profiler.DEFINITIONS:
        log(f"  {d}")
    report = {"device": dev.name, "backend": dev.info.backend, "repeat": repeat, "peers_requested": peers,
              "last_level_cache_bytes": llc, "definitions": profiler.DEFINITIONS, "started": time.strftime(
                  "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": [], "skipped": []}
    for size in sizes:
        n = max(1, size // 4)
        if shape:
            chosen = _select(profiler.cases(shape, ops, dts, axes), ops, dtypes)
        else:
            chosen = _select(profiler.class_cases(n, dts), ops, dtypes)
        log(f"input of {size / 2**20:.3g} MiB ({n} float32 elements per input):" if not shape else
            f"input shape {tuple(shape)}:")
        if not chosen:
            log("  no case matches the --op/--dtype choice")
        results, skipped = profiler.profile(dev, chosen, repeat, peers, log)
        for r in results:
            r["input_bytes"] = size if not shape else int(np.prod(shape)) * 4
        report["results"] += results
        report["skipped"] += skipped
    ho = profiler.host_overhead(dev)
    t_list, t_single = profiler.list_vs_single(dev)
    graphs = "replayed as a CUDA graph" if dev.backend.supports_graphs else "no graph replay"
    log(f"  host time per execute+synchronize of a 16-element mean: {ho * 1e6:.1f} us")
    log(f"  100 tiny dispatches: one command list {t_list * 1e6:.0f} us ({graphs}), one by one "
        f"{t_single * 1e6:.0f} us ({t_single / t_list:.1f}x)")
    report.update(host_overhead_s=ho, list_of_100_s=t_list, single_100_s=t_single,
                  seconds=round(time.perf_counter() - t0, 2))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1)
        log(f"profile: JSON written to {json_path}")
    if plot_path:
        msg = plot(report, plot_path)
        log(f"profile: {msg}")
    log(f"profile: {len(report['results'])} cases timed, {len(report['skipped'])} skipped, "
        f"{report['seconds']:.1f} s")
    return 0


def plot(report: dict, path: str) -> str:
    """A PNG of effective bandwidth against input size: one line per case, the copy ceiling drawn,
    peers dashed. Returns what was done (matplotlib is optional: the ``plot`` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'gpu_mean[plot]')"
    fig, ax = plt.subplots(figsize=(10, 6))
    by_case: dict = {}
    for r in report["results"]:
        by_case.setdefault(f"{r['class']}: {r['name']}", []).append(r)
    copy: dict = {}
    for name, rows in by_case.items():
        rows.sort(key=lambda r: r["input_bytes"])
        xs = [r["input_bytes"] for r in rows]
        (line,) = ax.plot(xs, [r["gbps"] for r in rows], marker="o", label=name)
        for r in rows:
            copy.setdefault(r["input_bytes"], []).append(r["copy_gbps"])
        for peer in sorted({p for r in rows for p in r["peers"]}):
            pts = [(r["input_bytes"], r["peers"][peer]["gbps"]) for r in rows if peer in r["peers"]]
            ax.plot(*zip(*pts), linestyle="--", color=line.get_color(), alpha=0.6, label=f"{name} ({peer})")
    if copy:
        cx = sorted(copy)
        ax.plot(cx, [float(np.median(copy[x])) for x in cx], color="black", linewidth=3, alpha=0.5,
                label="copy kernel (ceiling)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes of one input")
    ax.set_ylabel("effective bandwidth, GB/s (higher is better)")
    ax.set_title(f"gpu_mean on {report['device']}")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot written to {path}"
