"""One reduction's time split by kernel (main, finalize; the GPU shape's exact pass), for each shape
class of the profiler on seeded normal data (zero mean: the bound test's hard case), at 4 and 32 MiB.
On the CPU shape the outputs the bound leaves open are redone inside the kernel that stored them
(reduce_cpu_exact.h: gm_redo_open), so their cost is part of that kernel's time.

    PYTHONPATH=<tree> python tools/kernel_split.py opencl:0 FLOAT32,FLOAT16

Each launch is timed alone (the queue finished before and after it), fastest of 7 runs; the figures
include each launch's own latency (about 0.035 ms for an empty one on PoCL). Run it with PYTHONPATH
set to another checkout to compare trees (the kernels' names and launches are the same)."""
import sys
import time

import numpy as np

import gpu_mean as gm
from gpu_mean.checks import profiler
from gpu_mean.kernels import programs

dev = gm.create_device(sys.argv[1] if len(sys.argv) > 1 else "opencl:0")
dts = tuple(gm.DataType[t] for t in (sys.argv[2] if len(sys.argv) > 2 else "FLOAT32").split(","))
orig = programs.ReduceProgram.run
seen: dict[str, list[float]] = {}


def run(self, inputs, outputs, temporary):
    be = self.be
    launch0 = be.launch

    def launch(h, args, geo, traffic):
        be.queue.finish()
        t0 = time.perf_counter()
        r = launch0(h, args, geo, traffic)
        be.queue.finish()
        seen.setdefault(geo.kernel, []).append(time.perf_counter() - t0)
        return r
    be.launch = launch
    try:
        orig(self, inputs, outputs, temporary)
    finally:
        del be.launch


programs.ReduceProgram.run = run
for mb in (4, 32):
    n = (mb << 20) // 4
    for case in profiler.class_cases(n, dts):
        if not case.klass.startswith("R"):
            continue
        rng = np.random.default_rng(24)
        arrs = [rng.standard_normal(t.total_size_in_bytes // t.numpy_dtype.itemsize).astype(t.numpy_dtype)
                for t in case.desc().input_tensors()]
        go = profiler.prepare_device(dev, case, arrs)
        seen.clear()
        for _ in range(7):
            go()
        print(mb, case.klass, case.dtype.name, "  ".join(f"{k} {min(v) * 1e3:.3f}" for k, v in seen.items()))
