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
    asked = sorted(peers) if isinstance(peers, set) else bool(peers)
    report = {"device": dev.name, "backend": dev.info.backend, "repeat": repeat, "peers_requested": asked,
              "last_level_cache_bytes": llc, "definitions": profiler.DEFINITIONS, "started": time.strftime(
                  "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "sizes": sizes,
              "results": [], "skipped": []}
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


PEER_STYLES = {"numpy": ":", "onnxruntime": "-.", "cupy": "--", "torch": (0, (6, 2))}


def plot(report: dict, path: str) -> str:
    """A PNG of effective bandwidth against input size: one line per case, the copy kernel drawn as
    the ceiling, each peer dashed in its case's colour (one dash style per peer). With one size only,
    a bar per case instead. Returns what was done (matplotlib is optional: the ``plot`` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'gpu_mean[plot]')"
    by_case: dict = {}
    for r in report["results"]:
        by_case.setdefault(f"{r['class']}: {r['name']}", []).append(r)
    if not by_case:
        return "no plot: no case was timed"
    sizes = sorted({r["input_bytes"] for r in report["results"]})
    fig, ax = plt.subplots(figsize=(11, 6.5))
    peers_seen = set()
    if len(report.get("sizes", sizes)) == 1:
        names = list(by_case)
        ys = range(len(names))
        ax.barh(ys, [by_case[n][0]["gbps"] for n in names], color="tab:blue", label="gpu_mean")
        for n, y in zip(names, ys):
            for peer, v in by_case[n][0]["peers"].items():
                peers_seen.add(peer)
                ax.plot([v["gbps"]], [y], marker="|", markersize=14, color="black")
                ax.annotate(peer, (v["gbps"], y), fontsize=6, xytext=(2, 3), textcoords="offset points")
        copy = float(np.median([r["copy_gbps"] for r in report["results"]]))
        ax.axvline(copy, color="black", linewidth=2, alpha=0.5, label=f"copy kernel {copy:.1f} GB/s (ceiling)")
        ax.set_yticks(list(ys), names, fontsize=7)
        ax.invert_yaxis()
        mib = report.get("sizes", sizes)[0] / 2**20
        ax.set_xlabel(f"effective bandwidth, GB/s (higher is better); float32 inputs of {mib:.3g} MiB; | = a peer")
        ax.legend(fontsize=7)
    else:
        copy: dict = {}
        for name, rows in by_case.items():
            rows.sort(key=lambda r: r["input_bytes"])
            xs = [r["input_bytes"] for r in rows]
            (line,) = ax.plot(xs, [r["gbps"] for r in rows], marker="o", markersize=3, label=name)
            for r in rows:
                copy.setdefault(r["input_bytes"], []).append(r["copy_gbps"])
            for peer in sorted({p for r in rows for p in r["peers"]}):
                peers_seen.add(peer)
                pts = [(r["input_bytes"], r["peers"][peer]["gbps"]) for r in rows if peer in r["peers"]]
                ax.plot(*zip(*pts), linestyle=PEER_STYLES.get(peer, "--"), color=line.get_color(), alpha=0.7)
        cx = sorted(copy)
        ax.plot(cx, [float(np.median(copy[x])) for x in cx], color="black", linewidth=3, alpha=0.4,
                label="copy kernel (ceiling)")
        handles, labels = ax.get_legend_handles_labels()
        for peer in sorted(peers_seen):
            handles.append(Line2D([], [], color="gray", linestyle=PEER_STYLES.get(peer, "--")))
            labels.append(f"{peer} (same colour as its case)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes of one input (log scale)")
        ax.set_ylabel("effective bandwidth, GB/s (higher is better)")
        ax.legend(handles, labels, fontsize=7, ncol=2)
    ax.set_title(f"gpu_mean on {report['device']}: bytes read once + written once, over time")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot written to {path}"
