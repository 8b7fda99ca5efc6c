"""Kernel profiler: time, effective bandwidth and fraction of the device's measured read bandwidth,
side by side with the peers present (numpy, onnxruntime, OpenVINO, CuPy, PyTorch).

The reference of every row is the device's read bandwidth (``readbw.py``): a read-only streaming
kernel over as many bytes as the case moves, run through the device's own queue and allocator and
timed in the same rounds as the case. A mean reads its inputs once and writes its output once. Its
figure may pass 1 of that reference, for two reasons. Written bytes can stream beside the reads: on
this project's PoCL machine a native loop of two reads and a streamed write moves 1.09-1.15x the
bytes per second of a native read-only loop (docs/results/2026-11-27-s15-closing-pocl.md). And two
medians drift apart by their spreads. But its inputs cannot be read faster than the read kernel's
fastest sample reads as many bytes. A row whose input bytes alone pass that is a measurement fault
(drift, or a cache that held what should have streamed), reported as such, never as a speed-up.

How figures are made repeatable (after asv and pyperf): every contender is warmed up, then
calibrated to a number of calls per sample that lasts at least ``MIN_SAMPLE_S`` (asv's sample_time,
pyperf's loops); samples are taken in interleaved rounds (asv's rounds: ours, the read kernel and
every peer in turn, so that the machine's drift is spread over all of them instead of charged to
one); each contender's figure is the median per-call time of its samples and its spread the
interquartile range over the median (asv reports median and IQR; pyperf warns when a benchmark
"may be unstable"). A row whose spread passes ``NOISY_SPREAD`` is marked noisy.

The pause after each block when onnxruntime runs matters on a small CPU machine: its worker threads
spin for tens of milliseconds after a run and halve the bandwidth of whatever runs next on two cores
(measured: 9.8 GB/s right after an onnxruntime run, 18.7 GB/s after a 0.1 s pause).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..descriptors.types import DataType
from ..errors import DmlError
from ..runtime.objects import BufferBinding
from . import readbw
from .cases import Case, op_for
from .peers import gpu_peers, numpy_peer, openvino_peer, ort_peer  # noqa: F401  (ort_peer: tools/bench_prefetch.py)

F32, F16 = DataType.FLOAT32, DataType.FLOAT16
DEFINITIONS = [
    "effective bandwidth = bytes each input read once + output written once, over the median time of one run "
    "(GB/s, higher is better); +-N% = the spread of the samples (interquartile range over the median)",
    "of read bw = that bandwidth against the device's measured read bandwidth (a read-only streaming kernel "
    "over as many bytes, timed in the same rounds); a little above 1 is possible (written bytes stream beside "
    "the reads, and the medians drift by their spreads), but a row whose inputs alone are read faster than the "
    "read kernel's fastest sample is a measurement fault, never a speed-up",
    "noisy = a spread above 20 % (ours or the limit): run again before drawing a conclusion",
    "peers: the same work in another library on the same data, its bandwidth and how many times faster ours is",
]
MIN_SAMPLE_S = 0.005   # calls per sample are calibrated so that one sample lasts at least this long
MAX_LOOPS = 1000
NOISY_SPREAD = 0.20


def _rows(n: int, inner: int) -> tuple:
    inner = max(1, min(inner, n))
    return (max(1, n // inner), inner)


def class_cases(n: int, dtypes=(F32, F16)) -> list[Case]:
    """One case per performance shape class with ``n`` elements per input, for each data type."""
    side = max(1, int((n // 1024) ** 0.5))
    out = []
    for dt in dtypes:
        mean, red = op_for("mean", dt), op_for("reduce", dt)
        out += [Case(mean, dt, _rows(n, 1024), klass="E1 contiguous"),
                Case(mean, dt, _rows(n, 1024), layout="broadcast", klass="E2 broadcast"),
                Case("nary", dt, _rows(n, 1024), inputs=3, klass="N n-ary"),
                Case(red, dt, (n,), (0,), klass="R1 full"),
                Case(red, dt, _rows(n, 4096), (1,), klass="R2 inner, long"),
                Case(red, dt, _rows(n, 8), (1,), klass="R3 inner, short"),
                Case(red, dt, _rows(n, 32768), (0,), klass="R4 outer, many outputs"),
                Case(red, dt, _rows(n, 16), (0,), klass="R5 outer, few outputs"),
                Case(red, dt, (16, 64, side, side), (0, 2, 3), klass="R6 non-adjacent axes")]
    return out


def cases(shape, ops=None, dtypes=(F32, F16), axes=None) -> list[Case]:
    """The cases of one input shape: copy, element-wise and n-ary means and, for 3-D shapes, the
    reductions over the last, middle, first, all and outer two axes (or only ``axes``)."""
    shape = tuple(shape)
    out = [Case("identity", F32, shape)]
    axes_sets = [tuple(axes)] if axes is not None else (
        [(2,), (1,), (0,), (0, 1, 2), (0, 2)] if len(shape) == 3 else [tuple(range(len(shape)))])
    for dt in dtypes:
        mean, red = op_for("mean", dt), op_for("reduce", dt)
        out += [Case(mean, dt, shape), Case(mean, dt, shape, layout="broadcast"),
                Case("nary", dt, shape, inputs=3)]
        out += [Case(red, dt, shape, a) for a in axes_sets]
    return [c for c in out if not ops or c.family in ops or c.op == "identity"]


def prepare_device(dev, case: Case, data=None):
    """A callable that runs ``case`` once on ``dev`` and waits: descriptors, buffers, list recorded once.
    ``data``: one array per input (any shape, the input's element count and type), else all ones."""
    desc = case.desc()
    cop = dev.compile_operator(dev.create_operator(desc))
    init = dev.create_operator_initializer([cop])
    rec = dev.create_command_recorder()
    cl0 = dev.create_command_list()
    rec.record_dispatch(cl0, init, dev.create_binding_table(init))
    dev.execute_command_lists([cl0])
    ins = []
    for k, t in enumerate(desc.input_tensors()):
        b = dev.create_buffer(t.total_size_in_bytes)
        x = np.ones(t.total_size_in_bytes // t.numpy_dtype.itemsize, t.numpy_dtype) if data is None else data[k]
        b.write(np.ascontiguousarray(x).reshape(-1).view(np.uint8))
        ins.append(BufferBinding(b, 0, t.total_size_in_bytes))
    o = desc.output_tensors()[0]
    ob = dev.create_buffer(o.total_size_in_bytes)
    table = dev.create_binding_table(cop)
    table.bind_inputs(ins)
    table.bind_outputs([BufferBinding(ob, 0, o.total_size_in_bytes)])
    if cop.binding_properties.temporary_resource_size:
        table.bind_temporary_resource(BufferBinding(dev.create_buffer(cop.binding_properties.temporary_resource_size)))
    cl = dev.create_command_list()
    rec.record_dispatch(cl, cop, table)

    def go():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return go


PAUSE_S = 0.15   # after each block when peers run: lets a peer's spinning worker threads go to sleep


@dataclass
class Timing:
    """One contender's samples: seconds per call of each sample, ``loops`` calls per sample."""
    samples: list = field(default_factory=list)
    loops: int = 1

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def spread(self) -> float:
        """Interquartile range over the median (0 with fewer than 2 samples)."""
        if len(self.samples) < 2:
            return 0.0
        q25, q75 = np.percentile(self.samples, [25, 75])
        return float((q75 - q25) / self.median) if self.median > 0 else 0.0

    def to_json(self) -> dict:
        return {"time_s": self.median, "spread": self.spread, "loops": self.loops, "samples_s": list(self.samples)}


def calibrate(fn, min_sample_s: float = MIN_SAMPLE_S) -> int:
    """Calls per sample so that a sample lasts at least ``min_sample_s`` (one call after warm-up)."""
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return max(1, min(MAX_LOOPS, math.ceil(min_sample_s / max(t, 1e-9))))


def measure(fns: dict, repeat: int, pause: float = 0.0, min_sample_s: float = MIN_SAMPLE_S) -> dict:
    """{name: Timing}: every callable warmed up and calibrated, then ``repeat`` samples each, taken in
    interleaved rounds (blocks of one sample, of two when a pause follows each block)."""
    loops = {}
    for name, fn in fns.items():
        fn()                                    # warm-up: first-run costs (builds, page faults) are not timed
        loops[name] = calibrate(fn, min_sample_s)
        time.sleep(pause)
    out = {name: Timing(loops=loops[name]) for name in fns}
    per_block = 2 if pause else 1
    while any(len(t.samples) < repeat for t in out.values()):
        for name, fn in fns.items():
            for _ in range(min(per_block, repeat - len(out[name].samples))):
                n = loops[name]
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                out[name].samples.append((time.perf_counter() - t0) / n)
            time.sleep(pause)
    return out


def side_by_side(fns: dict, repeat: int, pause: float = PAUSE_S) -> dict:
    """{name: median seconds per call}, measured as ``measure`` does."""
    return {name: t.median for name, t in measure(fns, repeat, pause).items()}


def median_time(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def host_overhead(dev, repeat=200) -> float:
    """Seconds per execution of a recorded command list of one 16-element mean, with synchronize:
    the per-call host cost of the DirectML-shaped path."""
    return median_time(prepare_device(dev, Case("mean", F32, (16,))), repeat)


def list_vs_single(dev, n: int = 100, repeat: int = 20) -> tuple[float, float]:
    """Seconds for ``n`` tiny dispatches recorded in one command list (replayed: a CUDA graph where
    the backend has them) and for the same dispatches as ``n`` separate command lists."""
    desc = Case("mean", F32, (256,)).desc()
    cop = dev.compile_operator(dev.create_operator(desc))
    a, b = dev.create_buffer(1024), dev.create_buffer(1024)
    cop.execute(inputs=[a, a], outputs=[b])
    table = dev.create_binding_table(cop)
    table.bind_inputs([a, a])
    table.bind_outputs([b])
    rec = dev.create_command_recorder()
    one = dev.create_command_list()
    singles = []
    for _ in range(n):
        rec.record_dispatch(one, cop, table)
        single = dev.create_command_list()
        rec.record_dispatch(single, cop, table)
        singles.append(single)

    def run_list():
        dev.execute_command_lists([one])
        dev.synchronize()

    def run_singles():
        for single in singles:
            dev.execute_command_lists([single])
        dev.synchronize()
    run_list()
    return median_time(run_list, repeat), median_time(run_singles, repeat)


def skip_reason(dev, case: Case) -> str | None:
    """Why ``case`` cannot run on ``dev`` (None when it can)."""
    try:
        dev.create_operator(case.desc())
    except DmlError as e:
        return str(e)
    except ValueError as e:
        return str(e)
    return None


def profile(dev, case_list: list[Case], repeat: int, peers: bool, log=print) -> tuple[list, list]:
    """Times every case beside the device's read kernel over as many bytes (and the peers); returns
    (result dicts, skipped dicts)."""
    results, skipped, limits = [], [], {}
    for case in case_list:
        if case.op == "identity" and case.layout == "packed" and case.dtype == F32:
            continue   # the copy kernel is no longer a baseline; IDENTITY is not a mean
        why = skip_reason(dev, case)
        if why:
            skipped.append({"case": case.name, "shape": list(case.shape), "reason": why})
            log(f"  skipped {case.name} {case.shape}: {why}")
            continue
        n = int(np.prod(case.shape))
        traffic = case.traffic
        if traffic not in limits:
            limits[traffic] = readbw.read_kernel(dev, traffic)
        read_fn, read_bytes = limits[traffic]
        fns = {"ours": prepare_device(dev, case), "read": read_fn}
        if peers:
            fns["numpy"] = numpy_peer(case)
            fns["onnxruntime"] = ort_peer(case)
            fns["openvino"] = openvino_peer(case)
            fns.update(gpu_peers(case))
            if peers is not True:   # a chosen set of peers
                fns = {k: f for k, f in fns.items() if k in ("ours", "read") or k in peers}
        fns = {k: f for k, f in fns.items() if f is not None}
        timings = measure(fns, repeat, pause=PAUSE_S if {"onnxruntime", "openvino"} & set(fns) else 0.0)
        ours, read = timings.pop("ours"), timings.pop("read")
        t = ours.median
        bw, limit = traffic / t / 1e9, read_bytes / read.median / 1e9
        fraction = bw / limit
        best = read_bytes / min(read.samples) / 1e9         # the read kernel's fastest sample
        input_bw = case.read_traffic / t / 1e9              # ours' inputs alone
        spread = max(ours.spread, read.spread)
        row = {**case.to_json(), "bytes": traffic, "input_bytes": n * case.dtype.numpy_dtype.itemsize,
               "time_s": t, "spread": ours.spread, "loops": ours.loops, "samples_s": ours.samples, "gbps": bw,
               "limit": "measured read bandwidth", "limit_gbps": limit, "limit_time_s": read.median,
               "limit_spread": read.spread, "limit_best_gbps": best, "fraction_of_read_bandwidth": fraction,
               "input_gbps": input_bw, "noisy": spread > NOISY_SPREAD, "measurement_fault": input_bw > best,
               "peers": {p: {"time_s": tp.median, "spread": tp.spread, "gbps": traffic / tp.median / 1e9,
                             "ours_faster": tp.median / t, "noisy": max(tp.spread, ours.spread) > NOISY_SPREAD}
                         for p, tp in timings.items()}}
        results.append(row)
        log(format_row(case, row))
    return results, skipped


def format_fraction(row: dict) -> str:
    """'0.93 of read bw' -- or, for inputs read faster than the read kernel's fastest sample, the fault it is."""
    if row["measurement_fault"]:
        return (f"inputs read at {row['input_gbps']:.1f} GB/s, ABOVE the read kernel's fastest "
                f"{row['limit_best_gbps']:.1f} GB/s: measurement fault, not a result")
    return (f"{row['fraction_of_read_bandwidth']:4.2f} of read bw ({row['limit_gbps']:.1f} GB/s "
            f"+-{row['limit_spread']:.0%})")


def format_row(case: Case, row: dict) -> str:
    line = (f"  {case.shape_class:22s} {case.name:26s} {str(case.shape):20s} {row['time_s'] * 1e3:9.3f} ms "
            f"+-{row['spread']:3.0%} {row['gbps']:7.1f} GB/s {format_fraction(row)}")
    if row["noisy"]:
        line += " NOISY"
    for p, v in row["peers"].items():
        line += f" | {p} {v['gbps']:6.1f} GB/s +-{v['spread']:.0%} (ours {v['ours_faster']:4.2f}x)"
        if v["noisy"]:
            line += " noisy"
    return line


def last_level_cache(dev) -> int:
    """Bytes of the device's last-level cache: the GPU's L2 for CUDA, the host's L3 otherwise."""
    if dev.info.backend == "cuda":
        try:
            import cupy
            return int(cupy.cuda.runtime.getDeviceProperties(dev.info.index)["l2CacheSize"])
        except Exception:   # no property: fall back to the host's cache
            pass
    best = 0
    import glob
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        s = open(path).read().strip()
        best = max(best, int(s[:-1]) * {"K": 1024, "M": 2**20}.get(s[-1], 1) if s[-1] in "KM" else int(s))
    return best or 32 * 2**20


def sweep_sizes(llc: int, max_bytes: int) -> list[int]:
    """Input sizes in bytes, by factors of 4 from 16 KiB up to 4x the last-level cache (or
    ``max_bytes``), that limit itself included."""
    limit = min(4 * llc, max_bytes)
    sizes, s = [], 16 * 1024
    while s <= limit:
        sizes.append(s)
        s *= 4
    if not sizes or sizes[-1] < limit:
        sizes.append(limit)
    return sizes
