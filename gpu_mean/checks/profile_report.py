"""``gpu-mean profile``: choose the cases, run the profiler, print, write JSON and a PNG plot."""
from __future__ import annotations

import json
import time

import numpy as np

from .. import backends
from ..descriptors.types import DataType
from . import profiler, readbw
from .cases import Case


def _select(case_list, ops, dtypes) -> list[Case]:
    return [c for c in case_list if (not ops or c.family in ops) and (not dtypes or c.dtype.name in dtypes)]


def main(device=None, size_mb=256.0, repeat=10, peers=False, ops=None, dtypes=None, shape=None, axes=None,
         sweep=False, json_path=None, plot_path=None, log=print, data="normal") -> int:
    dev = backends.create_device(device)
    t0 = time.perf_counter()
    dts = [DataType[d] for d in dtypes] if dtypes else [profiler.F32, profiler.F16]
    max_bytes = int(size_mb * 2**20)
    llc = profiler.last_level_cache(dev)
    if sweep:
        sizes = profiler.sweep_sizes(llc, max_bytes)
    else:
        sizes = [max_bytes]
    peak = readbw.cuda_peak_gbps(dev)
    log(f"profile: {dev.name}; median and spread of {repeat} samples per case, after a warm-up, in interleaved "
        f"rounds; last-level cache {llc / 2**20:.0f} MiB")
    log(f"  data: {data} ({profiler.DATA_HELP[data]}; seeded)")
    log("  limit of every row: the device's traffic bandwidth for the case's bytes, measured beside it" + (
        f"; peak {peak:.0f} GB/s from the memory clock and bus width" if peak else ""))
    for d in profiler.DEFINITIONS:
        log(f"  {d}")
    asked = sorted(peers) if isinstance(peers, set) else bool(peers)
    report = {"device": dev.name, "backend": dev.info.backend, "repeat": repeat, "peers_requested": asked,
              "data": data, "data_description": profiler.DATA_HELP[data],
              "limit": profiler.LIMIT, "peak_gbps": peak, "noisy_spread": profiler.NOISY_SPREAD,
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
        results, skipped = profiler.profile(dev, chosen, repeat, peers, log, data=data)
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
    rows = report["results"]
    noisy = sum(r["noisy"] for r in rows)
    faults = sum(r["measurement_fault"] for r in rows)
    over = [r for r in rows if r["fraction_of_limit"] > 1 and not r["measurement_fault"]]
    above = sum(r["above_limit"] for r in over)
    log(f"profile: {plural(len(rows), 'case')} timed on {data} data, {len(report['skipped'])} skipped; {noisy} noisy, "
        f"{faults} measurement faults (inputs read faster than the read kernel's fastest sample), "
        f"{above} above the traffic limit ({len(over) - above} more above 1.0 within the spreads); "
        f"{report['seconds']:.1f} s")
    return 0


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# one colour and marker per contender, the same in every panel and in the legend
STYLES = {"gpu_mean": ("tab:blue", "o"), "numpy": ("tab:orange", "s"), "onnxruntime": ("tab:green", "^"),
          "openvino": ("tab:brown", "P"),
          "cupy": ("tab:red", "D"), "torch": ("tab:purple", "v")}
LIMIT_STYLE = {"color": "black", "linestyle": "--", "linewidth": 1.5}
BANDWIDTH_LABEL = "effective bandwidth, GB/s\n(bytes read once + written once, over time)"


def _style(name: str) -> tuple:
    return STYLES.get(name, ("tab:gray", "x"))


def figure(report: dict):
    """The profile as a matplotlib Figure (no pyplot state): with one size, a bar per case with a
    marker per peer and the read-bandwidth limit as a line; with a sweep, a panel per case of
    bandwidth against input size, one colour and marker per contender, the limit dashed. The legend
    sits outside the panels, below them."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    rows = report["results"]
    by_case: dict = {}
    for r in rows:
        by_case.setdefault(f"{r['class']}: {r['name']}", []).append(r)
    sizes = report.get("sizes") or sorted({r["input_bytes"] for r in rows})
    contenders = ["gpu_mean"] + sorted({p for r in rows for p in r["peers"]})
    handles = [Line2D([], [], color=_style(c)[0], marker=_style(c)[1], linestyle="-" if len(sizes) > 1 else "",
                      label=c if c != "gpu_mean" else "gpu_mean (ours)") for c in contenders]
    handles.append(Line2D([], [], **LIMIT_STYLE, label="measured traffic bandwidth (the limit)"))
    device = report["device"]
    if len(sizes) == 1:
        from matplotlib.patches import Patch
        handles[0] = Patch(color=_style("gpu_mean")[0], alpha=0.8, label="gpu_mean (ours)")
        names = list(by_case)
        fig = Figure(figsize=(10, 1.2 + 0.42 * len(names)), layout="constrained")
        ax = fig.add_subplot()
        ys = np.arange(len(names))
        ax.barh(ys, [by_case[n][0]["gbps"] for n in names], height=0.6, color=_style("gpu_mean")[0], alpha=0.8)
        for y, n in zip(ys, names):
            r = by_case[n][0]
            for peer, v in r["peers"].items():
                colour, marker = _style(peer)
                ax.plot([v["gbps"]], [y], marker=marker, color=colour, markersize=7, linestyle="")
            ax.plot([r["limit_gbps"]] * 2, [y - 0.4, y + 0.4], **LIMIT_STYLE)
        ax.set_yticks(ys, [n + (" (noisy)" if by_case[n][0]["noisy"] else "") for n in names], fontsize=8)
        ax.invert_yaxis()
        ax.set_ylabel("case (performance class: operation)")
        ax.set_xlabel(BANDWIDTH_LABEL)
        ax.set_xlim(0, 1.08 * max([r["limit_gbps"] for r in rows] + [r["gbps"] for r in rows]
                                  + [v["gbps"] for r in rows for v in r["peers"].values()]))
        _title(fig, f"gpu_mean on {_short(device)}: float32 inputs of {sizes[0] / 2**20:.3g} MiB, "
               f"{report.get('data', 'ones')} data")
        ax.grid(True, axis="x", alpha=0.3)
    else:
        names = list(by_case)
        ncols = min(3, len(names))
        nrows = -(-len(names) // ncols)
        fig = Figure(figsize=(4.2 * ncols, 2.9 * nrows + 1.2), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax, name in zip(axes.flat, names):
            rs = sorted(by_case[name], key=lambda r: r["input_bytes"])
            xs = [r["input_bytes"] for r in rs]
            colour, marker = _style("gpu_mean")
            ax.plot(xs, [r["gbps"] for r in rs], color=colour, marker=marker, markersize=4)
            for peer in sorted({p for r in rs for p in r["peers"]}):
                pts = [(r["input_bytes"], r["peers"][peer]["gbps"]) for r in rs if peer in r["peers"]]
                colour, marker = _style(peer)
                ax.plot(*zip(*pts), color=colour, marker=marker, markersize=4)
            ax.plot(xs, [r["limit_gbps"] for r in rs], **LIMIT_STYLE)
            ax.set_xscale("log", base=2)
            ax.set_title(name, fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("input size, bytes (log scale)", fontsize=8)
            ax.set_ylabel("effective bandwidth, GB/s", fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(names):]:
            ax.set_visible(False)
        _title(fig, f"gpu_mean on {_short(device)}: effective bandwidth (bytes read once + written once, "
               f"over time) against input size, {report.get('data', 'ones')} data")
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8)
    return fig


def _title(fig, text: str) -> None:
    """A figure title wrapped to the figure's width (about 11 characters per inch at 11 points)."""
    import textwrap
    fig.suptitle(textwrap.fill(text, max(30, int(fig.get_figwidth() * 11))), fontsize=11)


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def plot(report: dict, path: str) -> str:
    """Writes ``figure(report)`` as a PNG; returns what was done (matplotlib is the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'gpu_mean[plot]')"
    if not report["results"]:
        return "no plot: no case was timed"
    figure(report).savefig(path, dpi=110)
    return f"plot written to {path}"
