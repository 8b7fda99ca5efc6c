"""``gpu-mean demo``: the main job in under a minute. On the best device present it builds a few
descriptors, runs them and checks them against the CPU reference device, runs the quick conformance
pass against the exact oracle, and times four shape classes against the device's measured read bandwidth and the peers,
then says in plain lines what was verified and how fast it was."""
from __future__ import annotations

import sys
import time

import numpy as np

from .. import backends
from ..backends import cuda, diskcache
from ..descriptors.types import DataType
from . import conformance, profiler
from .cases import Case
from .progress import CompileNotice, progress_bar

F32, F16, I32, U32 = DataType.FLOAT32, DataType.FLOAT16, DataType.INT32, DataType.UINT32
SHOWCASE = [Case("mean", F32, (2, 3, 4), layout="broadcast"), Case("reduce", F16, (64, 1024), (1,)),
            Case("nary", I32, (4, 5), inputs=3), Case("int_reduce", U32, (3, 7, 5), (0, 2))]
DEMO_MIB = 32


def _run(d, desc, datas) -> np.ndarray:
    ins = []
    for t, data in zip(desc.input_tensors(), datas):
        b = d.create_buffer(t.total_size_in_bytes)
        b.write(data)
        ins.append(b)
    o = desc.output_tensors()[0]
    ob = d.create_buffer(o.total_size_in_bytes)
    d.compile_operator(d.create_operator(desc)).execute(inputs=ins, outputs=[ob])
    return ob.read_tensor(o)


def _showcase(dev, log) -> bool:
    """Each showcase case on ``dev`` against the CPU reference device; the CPU device itself is
    checked against the exact oracle (comparing it with itself would say nothing)."""
    on_cpu = dev.info.backend == "cpu"
    ref = None if on_cpu else backends.create_device("cpu")
    ok_all = True
    for i, case in enumerate(SHOWCASE):
        desc = case.desc()
        datas = [conformance.random_data(t.data_type, t.total_size_in_bytes // t.numpy_dtype.itemsize, 7 * i + j)
                 for j, t in enumerate(desc.input_tensors())]
        if on_cpu:
            xs = [conformance.logical_view(d, t) for d, t in zip(datas, desc.input_tensors())]
            want = conformance.expected(case, desc, xs)
        else:
            want = _run(ref, desc, datas)
        err = conformance.ulp_error(_run(dev, desc, datas), want)
        tol = conformance.tolerance(case)
        ok = 0 <= err <= tol
        ok_all &= ok
        how = ("bit for bit" if err == 0 else f"within {err} ulp (tolerance {tol})") if ok else f"OFF by {err}"
        what = f"axes {list(case.axes)}" if case.axes is not None else case.layout
        log(f"   {'ok  ' if ok else 'FAIL'} {case.operator:22s} {case.dtype.name:8s} {str(case.shape):12s} "
            f"{what:12s} matches {'the exact oracle' if on_cpu else 'the CPU reference'} {how}")
    return ok_all


def main(device=None, log=print) -> int:
    t0 = time.perf_counter()
    dev = backends.create_device(device)
    status = backends.backend_status()     # after the choice: it knows the GPUs auto passed over
    # an NVIDIA GPU that the CUDA backend cannot use says so on its own line, whatever the device
    nvidia = dev.info.backend != "cuda" and status["cuda"] is not None and cuda.nvidia_driver() is not None
    absent = "; ".join(f"{k}: {v}" for k, v in status.items()
                       if v and k != dev.info.backend and not (nvidia and k == "cuda"))
    passed = "; ".join(f"{i.id} ({i.name}): {i.unavailable}" for i in backends.list_devices()
                       if i.unavailable and status[i.backend] is None)
    log(f"gpu-mean demo on {dev.name}, feature level {dev.feature_level.label}")
    if nvidia:
        log(f"   NOTE: an NVIDIA GPU is present, but the CUDA backend cannot use it: {status['cuda']}")
    if absent and device is None:
        log(f"   (chosen as the best device present; absent: {absent})")
    if passed and device is None:
        log(f"   (passed over, cannot be used: {passed})")
    log("1. Four operators built as descriptors, executed, and compared with "
        + ("the exact oracle:" if dev.info.backend == "cpu" else "the numpy CPU reference device:"))
    # said once, under the first step that compiles a kernel (none when the kernel cache has them all)
    notice = CompileNotice(log, f"   compiling kernels ({diskcache.describe()}) ...")
    with notice.watch():
        ok1 = _showcase(dev, log)
    # 4-D only: a cold PoCL kernel cache compiles a third fewer kernels than for 1-D, 4-D and 8-D
    # (measured 21 s against 32 s), which keeps the demo under a minute on the CI machine
    log("2. Quick conformance pass: every operator x data type the feature level offers, in 4-D, with "
        "packed, broadcast, permuted and padded layouts, checked against an exact rational oracle, "
        "plus invalid descriptors that must be rejected")
    with progress_bar(conformance.count(dev, True, ranks=(4,)), enabled=sys.stderr.isatty()) as bar, \
            notice.watch(bar):
        rep = conformance.run_suite(dev, quick=True, progress=bar, ranks=(4,))
    s = rep["summary"]
    log(f"   {'ok  ' if s['ok'] else 'FAIL'} {s['passed']} cases passed, {s['failed']} failed (floats bit-exact "
        f"for element-wise, within 1 ulp of the exact mean for reductions; integers exact); "
        f"{s['negative_passed']} of {s['negative_passed'] + s['negative_failed']} invalid descriptors rejected "
        f"({rep['seconds']:.0f} s)")
    log(f"3. Speed on {DEMO_MIB} MiB float32 inputs of random normal data: median of 8 samples after a warm-up, "
        "interleaved with the device's traffic and read kernels and the peers; +-N% = spread (interquartile range "
        "over the median). GB/s = bytes read once + written once, over time, higher is better; 'of traffic bw' = "
        "against a streaming kernel that reads the case's input bytes and writes its output bytes (the limit); "
        "'of read bw' = against a read-only kernel over as many bytes (inputs read faster than its fastest "
        "sample: a measurement fault):")
    n = DEMO_MIB * 2**20 // 4
    picks = [c for c in profiler.class_cases(n, (F32,)) if c.shape_class in (
        "E1 contiguous", "R1 full", "R2 inner, long", "R4 outer, many outputs")]
    with notice.watch():
        results, _ = profiler.profile(dev, picks, repeat=8, peers=True, log=lambda *a: None)
    for r in results:
        peers = ", ".join(f"{p} {v['gbps']:.1f} GB/s" for p, v in r["peers"].items()) or "no peer present"
        noisy = " NOISY" if r["noisy"] else ""
        log(f"   {r['class']:24s} {r['name']:22s} {r['gbps']:6.1f} GB/s +-{r['spread']:.0%} = "
            f"{profiler.format_fraction(r)}{noisy}; {peers}")
    ok = ok1 and s["ok"]
    secs = time.perf_counter() - t0
    if ok:
        log(f"PASS: {dev.info.id} computed every checked mean correctly ({secs:.0f} s). More: gpu-mean conformance "
            "--quick (1-D, 4-D and 8-D, as a table), gpu-mean profile --sweep --peers --plot profile.png")
    else:
        log(f"FAIL: see the lines marked FAIL above ({secs:.0f} s); gpu-mean conformance lists every failing case")
    return 0 if ok else 1
