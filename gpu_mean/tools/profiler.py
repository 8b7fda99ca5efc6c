"""Kernel profiler: time, effective bandwidth and fraction of the device's copy bandwidth measured
in the same run, side by side with the peers present (numpy, onnxruntime, CuPy, PyTorch).

The copy baseline is the device's own IDENTITY kernel on a contiguous float32 tensor with as many
elements as the case's input, timed side by side with every case like a peer. Times are medians
over ``repeat`` runs after a warm-up; compare ratios within one run only.

Ours and the peers are timed side by side: in rounds, each round a block of runs of ours and then of
every peer, with a pause after each block when peers run. The pause matters on a small CPU machine:
onnxruntime's worker threads spin for tens of milliseconds after a run and halve the bandwidth of
whatever runs next on two cores (measured: 9.8 GB/s right after an onnxruntime run, 18.7 GB/s after
a 0.1 s pause). Rounds spread the VM's bandwidth drift over every contender instead of charging it to one.
"""
from __future__ import annotations

import time

import numpy as np

from ..descriptors.types import DataType
from ..errors import DmlError
from ..runtime.objects import BufferBinding
from .cases import Case
from .peers import gpu_peers, numpy_peer, ort_peer  # noqa: F401  (ort_peer: tools/bench_prefetch.py)

F32, F16 = DataType.FLOAT32, DataType.FLOAT16
DEFINITIONS = [
    "effective bandwidth = bytes each input read once + output written once, over time (GB/s, higher is better)",
    "fraction of copy = this case's effective bandwidth against the device's own copy kernel (IDENTITY, "
    "float32, same element count) timed alternately with it; higher is better, 1.0 = as fast as a copy",
    "peers: the same work in another library on the same data, its bandwidth and how many times faster ours is",
]


def _rows(n: int, inner: int) -> tuple:
    inner = max(1, min(inner, n))
    return (max(1, n // inner), inner)


def class_cases(n: int, dtypes=(F32, F16)) -> list[Case]:
    """One case per performance shape class with ``n`` elements per input, for each data type."""
    side = max(1, int((n // 1024) ** 0.5))
    out = []
    for dt in dtypes:
        out += [Case("mean", dt, _rows(n, 1024), klass="E1 contiguous"),
                Case("mean", dt, _rows(n, 1024), layout="broadcast", klass="E2 broadcast"),
                Case("nary", dt, _rows(n, 1024), inputs=3, klass="N n-ary"),
                Case("reduce", dt, (n,), (0,), klass="R1 full"),
                Case("reduce", dt, _rows(n, 4096), (1,), klass="R2 inner, long"),
                Case("reduce", dt, _rows(n, 8), (1,), klass="R3 inner, short"),
                Case("reduce", dt, _rows(n, 32768), (0,), klass="R4 outer, many outputs"),
                Case("reduce", dt, _rows(n, 16), (0,), klass="R5 outer, few outputs"),
                Case("reduce", dt, (16, 64, side, side), (0, 2, 3), klass="R6 non-adjacent axes")]
    return out


def cases(shape, ops=None, dtypes=(F32, F16), axes=None) -> list[Case]:
    """The cases of one input shape: copy, element-wise and n-ary means and, for 3-D shapes, the
    reductions over the last, middle, first, all and outer two axes (or only ``axes``)."""
    shape = tuple(shape)
    out = [Case("identity", F32, shape)]
    axes_sets = [tuple(axes)] if axes is not None else (
        [(2,), (1,), (0,), (0, 1, 2), (0, 2)] if len(shape) == 3 else [tuple(range(len(shape)))])
    for dt in dtypes:
        out += [Case("mean", dt, shape), Case("mean", dt, shape, layout="broadcast"),
                Case("nary", dt, shape, inputs=3)]
        out += [Case("reduce", dt, shape, a) for a in axes_sets]
    return [c for c in out if not ops or c.op in ops or c.op == "identity"]


def prepare_device(dev, case: Case):
    """A callable that runs ``case`` once on ``dev`` and waits: descriptors, buffers, list recorded once."""
    desc = case.desc()
    cop = dev.compile_operator(dev.create_operator(desc))
    init = dev.create_operator_initializer([cop])
    rec = dev.create_command_recorder()
    cl0 = dev.create_command_list()
    rec.record_dispatch(cl0, init, dev.create_binding_table(init))
    dev.execute_command_lists([cl0])
    ins = []
    for t in desc.input_tensors():
        b = dev.create_buffer(t.total_size_in_bytes)
        b.write(np.ones(t.total_size_in_bytes // t.numpy_dtype.itemsize, t.numpy_dtype))
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


def side_by_side(fns: dict, repeat: int, rounds: int | None = None, pause: float = PAUSE_S) -> dict:
    """{name: median seconds}: every callable warmed up, then timed in ``rounds`` alternating blocks
    (by default blocks of two calls: this VM's bandwidth drifts over seconds, and one slow period
    inside a block of four once cost a case 40 % against the copy kernel measured before it)."""
    times: dict = {name: [] for name in fns}
    rounds = rounds or max(1, -(-repeat // 2))
    per_round = max(1, -(-repeat // rounds))
    for fn in fns.values():
        fn()
        time.sleep(pause)
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            time.sleep(pause)
    return {name: float(np.median(ts)) for name, ts in times.items()}


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
    """Times every case beside a copy kernel of its element count (and the peers); returns
    (result dicts, skipped dicts)."""
    results, skipped, copies = [], [], {}
    for case in case_list:
        if case.op == "identity" and case.layout == "packed" and case.dtype == F32:
            continue   # the copy itself is the baseline of every row
        why = skip_reason(dev, case)
        if why:
            skipped.append({"case": case.name, "shape": list(case.shape), "reason": why})
            log(f"  skipped {case.name} {case.shape}: {why}")
            continue
        n = int(np.prod(case.shape))
        copy = Case("identity", F32, (n,))
        if n not in copies:
            copies[n] = prepare_device(dev, copy)
        fns = {"ours": prepare_device(dev, case), "copy": copies[n]}
        if peers:
            fns["numpy"] = numpy_peer(case)
            fns["onnxruntime"] = ort_peer(case)
            fns.update(gpu_peers(case))
            if peers is not True:   # a chosen set of peers
                fns = {k: f for k, f in fns.items() if k in ("ours", "copy") or k in peers}
        fns = {k: f for k, f in fns.items() if f is not None}
        times = side_by_side(fns, repeat, pause=PAUSE_S if "onnxruntime" in fns else 0.0)
        t, tc = times.pop("ours"), times.pop("copy")
        bw, copy_bw = case.traffic / t / 1e9, copy.traffic / tc / 1e9
        row = {**case.to_json(), "bytes": case.traffic, "input_bytes": n * case.dtype.numpy_dtype.itemsize,
               "time_s": t, "gbps": bw, "copy_time_s": tc,
               "copy_gbps": copy_bw, "fraction_of_copy": bw / copy_bw,
               "peers": {p: {"time_s": tp, "gbps": case.traffic / tp / 1e9, "ours_faster": tp / t}
                         for p, tp in times.items()}}
        results.append(row)
        line = (f"  {case.shape_class:22s} {case.name:26s} {str(case.shape):20s} {t * 1e3:9.3f} ms {bw:7.1f} GB/s "
                f"{row['fraction_of_copy']:5.2f} of copy")
        for p, v in row["peers"].items():
            line += f" | {p} {v['gbps']:6.1f} GB/s (ours {v['ours_faster']:4.2f}x)"
        log(line)
    return results, skipped


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
