"""Software prefetch on a CPU OpenCL device, off against on, side by side in one process.

    python tools/bench_prefetch.py                       # every profiler case of a 256 MiB input
    python tools/bench_prefetch.py --cases "reduce f32 axes [1]" "reduce f32 axes [2]" --peers

"off" is a backend of its own built with prefetch distances of 0 (an ``OpenCLTuning`` passed to
``opencl.make_backend``), so every kernel is compiled without the prefetch; "on" is a second backend
with the shipped tuning. Each backend has its own program cache, so neither reuses the other's kernels.
``--peers`` adds onnxruntime where the profiler has it for the case.
"""
from __future__ import annotations

import argparse
import dataclasses

import gpu_mean as gm
from gpu_mean.backends import opencl
from gpu_mean.checks import profiler
from gpu_mean.kernels import opencl_geometry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="opencl:0", help="an OpenCL device, opencl:N")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--cases", nargs="*", help="profiler case names (default: all)")
    ap.add_argument("--peers", action="store_true")
    a = ap.parse_args()
    n = a.size_mb * 2**20 // 4
    shape = (64, 1024, n // (64 * 1024))
    cases = [c for c in profiler.cases(shape) if not a.cases or c.name in a.cases]
    index = int(a.device.partition(":")[2] or 0)
    shipped = opencl_geometry.DEFAULT_TUNING
    off = dataclasses.replace(shipped, row_prefetch_bytes=0, col_prefetch_rows=0)
    fns, traffic = {}, {}
    for label, tuning in (("off", off), ("on", shipped)):
        dev = gm.Device(opencl.make_backend(index, tuning=tuning))
        for c in cases:
            fns[(c.name, label)] = profiler.prepare_device(dev, c)
            traffic[(c.name, label)] = c.traffic
    if a.peers:
        for c in cases:
            f = profiler.ort_peer(c, shape)
            if f is not None:
                fns[(c.name, "onnxruntime")], traffic[(c.name, "onnxruntime")] = f, c.traffic
    times = profiler.side_by_side(fns, a.repeat)
    print(f"prefetch off/on on {dev.name}; float32 input {shape}; median of {a.repeat}")
    for c in cases:
        line = f"  {c.name:26s}"
        for label in ("off", "on", "onnxruntime"):
            if (c.name, label) in times:
                line += f" | {label} {traffic[(c.name, label)] / times[(c.name, label)] / 1e9:6.1f} GB/s"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
