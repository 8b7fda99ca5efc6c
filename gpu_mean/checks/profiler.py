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
import zlib
from dataclasses import dataclass, field

import numpy as np

from ..descriptors.types import DataType
from ..errors import DmlError
from ..runtime.objects import BufferBinding
from . import readbw
from .cases import Case, op_for
from .peers import gpu_peers, numpy_peer, openvino_peer, ort_peer  # noqa: F401  (ort_peer: the retired bench_prefetch)

F32, F16 = DataType.FLOAT32, DataType.FLOAT16
DEFINITIONS = [
    "effective bandwidth = bytes each input read once + output written once, over the median time of one run "
    "(GB/s, higher is better); +-N% = the spread of the samples (interquartile range over the median)",
    "of traffic bw = that bandwidth against the device's measured traffic bandwidth (the limit: a streaming "
    "kernel that reads the case's input bytes and writes its output bytes, timed in the same rounds); a "
    "correct row stays below 1 but for the spreads; ABOVE LIMIT = above 1 by more than its spread and the "
    "limit's together (a fault in the limit or the timing, never a speed-up)",
    "of read bw = the same bandwidth against a read-only streaming kernel over as many bytes (the former "
    "reference; above 1 where written bytes stream beside the reads); a row whose inputs alone are read faster "
    "than the read kernel's fastest sample is a measurement fault, never a speed-up",
    "[reductions] launches = kernels per execute; open = outputs the main pass left to the exact pass (read "
    "from the flags after a run); exact = the exact pass's share of the time, where it is a launch of its own "
    "(the GPU shape; the CPU shape redoes open outputs inside its kernels: not separable)",
    "noisy = a spread above 20 % (ours or the limit): run again before drawing a conclusion",
    "peers: the same work in another library on the same data, its bandwidth and how many times faster ours is",
]
# what the inputs hold (``--data``): a reduction's speed depends on it, since the outputs whose bound
# test fails go to the exact pass (docs/design.md, "The flags"); all-ones data never sends one there
DATA_KINDS = ("normal", "uniform", "ones", "centered")
DATA_HELP = {"normal": "random normal, mean 0, deviation 1", "uniform": "random uniform on [0, 1)",
             "ones": "every value 1 (a mean that is exact: no output ever needs the exact pass)",
             "centered": "random normal minus its mean over the reduced axes (over the whole tensor for "
                         "element-wise cases), in the input type: every mean a rounding residue near 0, the "
                         "exact pass's worst case"}
LIMIT = "measured traffic bandwidth (reads the case's input bytes, writes its output bytes)"
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


def data_seed(case: Case, kind: str) -> int:
    return zlib.crc32(repr((case.name, case.shape, case.axes, kind)).encode())


def fill(kind: str, shape, dtype, axes=None, seed: int = 0) -> np.ndarray:
    """An array of ``shape`` in numpy type ``dtype`` holding data of ``kind`` (DATA_KINDS), seeded.
    ``centered``: values minus their mean over ``axes`` (all axes when None), the subtraction in
    float64 of values already in ``dtype``, rounded once to ``dtype``."""
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if kind == "ones":
        return np.ones(shape, dtype)
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.random(shape, np.float32).astype(dtype)
    if kind not in ("normal", "centered"):
        raise ValueError(f"unknown data kind {kind!r}; choose from {', '.join(DATA_KINDS)}")
    x = rng.standard_normal(shape, np.float32).astype(dtype)
    if kind == "normal":
        return x
    axes = tuple(range(len(shape))) if axes is None else tuple(axes)
    wide = x.astype(np.float64)
    wide -= wide.mean(axis=axes, keepdims=True)
    return wide.astype(dtype)


def case_data(case: Case, kind: str) -> list:
    """One array per input of ``case``'s descriptor, as many elements as its buffer holds, of ``kind``:
    an input whose buffer holds the logical shape gets it (centered over the case's reduced axes);
    others (broadcast, padded) a flat array."""
    out = []
    for k, t in enumerate(case.desc().input_tensors()):
        count = t.total_size_in_bytes // t.numpy_dtype.itemsize
        shape = case.shape if count == int(np.prod(case.shape)) else (count,)
        axes = case.axes if case.family == "reduce" and shape == case.shape else None
        out.append(fill(kind, shape, t.numpy_dtype, axes, data_seed(case, kind) + k))
    return out


def peer_maker(case: Case, kind: str):
    """What the peers build their inputs with (the same kind of data as ours): shape -> numpy array."""
    counter = iter(range(1 << 30))

    def make(shape, dtype=None):
        dt = np.dtype(dtype) if dtype is not None else case.dtype.numpy_dtype
        axes = case.axes if case.family == "reduce" and tuple(shape) == case.shape else None
        return fill(kind, shape, dt, axes, data_seed(case, kind) + next(counter))
    return make


def prepare_device(dev, case: Case, data=None):
    """A callable that runs ``case`` once on ``dev`` and waits: descriptors, buffers, list recorded once.
    ``data``: one array per input (any shape, the input's element count and type), else all ones.
    The callable's ``cop`` and ``temporary`` are the compiled operator and its temporary resource
    (None when it has none), for the diagnostics read after a run (``launches``, ``open_outputs``)."""
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
    temp = None
    if cop.binding_properties.temporary_resource_size:
        temp = BufferBinding(dev.create_buffer(cop.binding_properties.temporary_resource_size))
        table.bind_temporary_resource(temp)
    cl = dev.create_command_list()
    rec.record_dispatch(cl, cop, table)

    def go():
        dev.execute_command_lists([cl])
        dev.synchronize()
    go.cop, go.temporary = cop, temp
    go.bindings = (ins, [BufferBinding(ob, 0, o.total_size_in_bytes)])
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


def profile(dev, case_list: list[Case], repeat: int, peers: bool, log=print, data: str = "normal") -> tuple[list, list]:
    """Times every case on inputs of ``data`` (DATA_KINDS) beside the device's traffic kernel (reads the
    case's input bytes, writes its output bytes) and read kernel over as many bytes (and the peers);
    returns (result dicts, skipped dicts)."""
    results, skipped, limits = [], [], {}
    reasons = [skip_reason(dev, c) for c in case_list]
    # every case's kernels built first, side by side where the backend can (CUDA: NVRTC in threads)
    built = dev.compile_ahead([c.desc() for c, why in zip(case_list, reasons) if not why])
    if built:
        log(f"  {built} programs built ahead, side by side")
    for case, why in zip(case_list, reasons):
        if case.op == "identity" and case.layout == "packed" and case.dtype == F32:
            continue   # the copy kernel is no longer a baseline; IDENTITY is not a mean
        if why:
            skipped.append({"case": case.name, "shape": list(case.shape), "reason": why})
            log(f"  skipped {case.name} {case.shape}: {why}")
            continue
        n = int(np.prod(case.shape))
        traffic = case.traffic
        if traffic not in limits:
            limits[traffic] = readbw.read_kernel(dev, traffic)
        read_fn, read_bytes = limits[traffic]
        moved = (case.read_traffic, traffic - case.read_traffic, case.read_streams)
        if moved not in limits:
            limits[moved] = readbw.traffic_kernel(dev, *moved)
        traffic_fn, traffic_bytes = limits[moved]
        ours_fn = prepare_device(dev, case, case_data(case, data))
        fns = {"ours": ours_fn, "traffic": traffic_fn, "read": read_fn}
        if peers:
            make = peer_maker(case, data)
            fns["numpy"] = numpy_peer(case, make=make)
            fns["onnxruntime"] = ort_peer(case, make=make)
            fns["openvino"] = openvino_peer(case, make=make)
            fns.update(gpu_peers(case, make=make))
            if peers is not True:   # a chosen set of peers
                fns = {k: f for k, f in fns.items() if k in ("ours", "traffic", "read") or k in peers}
        fns = {k: f for k, f in fns.items() if f is not None}
        timings = measure(fns, repeat, pause=PAUSE_S if {"onnxruntime", "openvino"} & set(fns) else 0.0)
        ours, moving, read = timings.pop("ours"), timings.pop("traffic"), timings.pop("read")
        t = ours.median
        bw, limit = traffic / t / 1e9, traffic_bytes / moving.median / 1e9
        read_limit = read_bytes / read.median / 1e9
        best = read_bytes / min(read.samples) / 1e9         # the read kernel's fastest sample
        input_bw = case.read_traffic / t / 1e9              # ours' inputs alone
        spread = max(ours.spread, moving.spread)
        cop = ours_fn.cop
        open_outputs = cop.open_outputs(ours_fn.temporary) if case.family == "reduce" else None
        row = {**case.to_json(), "data": data, "bytes": traffic, "input_bytes": n * case.dtype.numpy_dtype.itemsize,
               "time_s": t, "spread": ours.spread, "loops": ours.loops, "samples_s": ours.samples, "gbps": bw,
               "limit": LIMIT, "limit_gbps": limit, "limit_time_s": moving.median,
               "limit_spread": moving.spread, "fraction_of_limit": bw / limit,
               "above_limit": above_limit(bw / limit, ours.spread, moving.spread),
               "read_gbps": read_limit, "read_time_s": read.median, "read_spread": read.spread,
               "limit_best_gbps": best, "fraction_of_read_bandwidth": bw / read_limit,
               "launches": cop.launches, "outputs": int(np.prod(case.output_shape())) if case.family == "reduce"
               else None, "open_outputs": open_outputs,
               "input_gbps": input_bw, "noisy": spread > NOISY_SPREAD, "measurement_fault": input_bw > best,
               "peers": {p: {"time_s": tp.median, "spread": tp.spread, "gbps": traffic / tp.median / 1e9,
                             "ours_faster": tp.median / t, "noisy": max(tp.spread, ours.spread) > NOISY_SPREAD}
                         for p, tp in timings.items()}}
        results.append(row)
        log(format_row(case, row))
    return results, skipped


def format_fraction(row: dict) -> str:
    """'0.93 of traffic bw (...) 0.97 of read bw' -- or, for inputs read faster than the read kernel's
    fastest sample, the fault it is."""
    if row["measurement_fault"]:
        return (f"inputs read at {row['input_gbps']:.1f} GB/s, ABOVE the read kernel's fastest "
                f"{row['limit_best_gbps']:.1f} GB/s: measurement fault, not a result")
    return (f"{row['fraction_of_limit']:4.2f} of traffic bw ({row['limit_gbps']:.1f} GB/s "
            f"+-{row['limit_spread']:.0%}) {row['fraction_of_read_bandwidth']:4.2f} of read bw")


def format_exact(row: dict) -> str:
    """'2 launches, 3/64 open, exact 41%' for a reduction ('' for the rest)."""
    if row.get("open_outputs") is None and row.get("launches") is None:
        return ""
    n = row.get("launches")
    parts = [] if n is None else [f"{n} launch" + ("es" if n != 1 else "")]
    if row.get("open_outputs") is not None:
        parts.append(f"{row['open_outputs']}/{row['outputs']} open")
    return " [" + ", ".join(parts) + "]" if parts else ""


def above_limit(fraction: float, spread: float, limit_spread: float) -> bool:
    """Whether a row is above its limit by more than the two measurements' spreads together: within
    them, a ratio of two medians taken in the same rounds is at the limit, not above it (on the 2-core
    machine the same row measured 1.00-1.05 in three runs, its own and the limit's spreads 2-10 %)."""
    return fraction > 1.0 + spread + limit_spread


def format_row(case: Case, row: dict) -> str:
    line = (f"  {case.shape_class:22s} {case.name:26s} {str(case.shape):20s} {row['time_s'] * 1e3:9.3f} ms "
            f"+-{row['spread']:3.0%} {row['gbps']:7.1f} GB/s {format_fraction(row)}{format_exact(row)}")
    if row.get("above_limit"):
        line += " ABOVE LIMIT"
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
