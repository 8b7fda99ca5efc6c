"""The reductions for Nsight Compute (tools/gpu_pass.sh's ncu step): gm.reduce_mean on CuPy arrays,
one call per reduction class R1-R6 at 256 MiB of float32 (and the same element counts in float16),
the three slow calls of the first GPU run, and two calls on centered data (every output open, the
redo's worst case). Each call is warmed up first (kernels compiled and loaded), then run once between
cudaProfilerStart and cudaProfilerStop (cupyx.profiler.profile) inside an NVTX range named after it,
so that ``ncu --profile-from-start off --nvtx`` profiles exactly those launches and names their call.
Run: ncu --profile-from-start off --nvtx -k regex:gm_reduce python tools/ncu_reductions.py"""
from __future__ import annotations

import cupy as cp
import cupyx.profiler

import gpu_mean as gm

N = 1 << 26          # elements per input: 256 MiB of float32
# (name, shape, axes): the profiler's classes at N elements (gpu_mean/checks/profiler.py), then the
# first run's slow calls (rows of 16, columns of 65536, rows of 65536)
CLASSES = [("R1", (N,), [0]), ("R2", (N // 4096, 4096), [1]), ("R3", (N // 8, 8), [1]),
           ("R4", (N // 32768, 32768), [0]), ("R5", (N // 16, 16), [0]), ("R6", (16, 64, 256, 256), [0, 2, 3])]
SLOW = [("rows16", (1 << 24, 16), [1]), ("cols65536", (65536, 4096), [0]), ("rows65536", (4096, 65536), [1])]
CENTERED = [("R2c", (N // 4096, 4096), [1]), ("R4c", (N // 32768, 32768), [0])]


def _nvtx():
    try:
        from cupy.cuda import nvtx
        return nvtx.RangePush, nvtx.RangePop
    except Exception:          # NVTX missing: the calls are still profiled, in the order printed below
        return (lambda _name: None), (lambda: None)


def _data(rng, shape, axes, dtype, centered: bool):
    x = rng.standard_normal(shape, dtype=cp.float32)
    if centered:               # minus the mean over the reduced axes, computed in float64
        x = (x.astype(cp.float64) - x.astype(cp.float64).mean(axis=tuple(axes), keepdims=True)).astype(cp.float32)
    return x.astype(dtype)


def main() -> None:
    rng = cp.random.default_rng(0)
    calls = []
    for dtype in (cp.float32, cp.float16):
        for name, shape, axes in CLASSES:
            label = f"{name} {cp.dtype(dtype).name} {shape} axes {axes}"
            calls.append((label, _data(rng, shape, axes, dtype, False), axes))
    for name, shape, axes in SLOW:
        calls.append((f"{name} float32 {shape} axes {axes}", _data(rng, shape, axes, cp.float32, False), axes))
    for name, shape, axes in CENTERED:
        calls.append((f"{name} float32 {shape} axes {axes} centered", _data(rng, shape, axes, cp.float32, True), axes))
    for _label, x, axes in calls:          # warm-up: compile, load, allocate
        gm.reduce_mean(x, axes=axes, device="cuda")
    cp.cuda.Device().synchronize()
    push, pop = _nvtx()
    with cupyx.profiler.profile():       # cudaProfilerStart ... cudaProfilerStop
        for label, x, axes in calls:
            push(label)
            gm.reduce_mean(x, axes=axes, device="cuda")
            cp.cuda.Device().synchronize()
            pop()
    for label, _x, _axes in calls:
        print(f"profiled: {label}")


if __name__ == "__main__":
    main()
