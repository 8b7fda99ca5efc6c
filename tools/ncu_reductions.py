"""The slow reductions of the first GPU run, for Nsight Compute (tools/gpu_pass.sh's ncu step):
float32 gm.reduce_mean on CuPy arrays of random normal data, each call warmed up first (kernels
compiled and loaded), then run once between cudaProfilerStart and cudaProfilerStop (cupyx.profiler.profile), so that
``ncu --profile-from-start off`` profiles exactly those launches.
Run: ncu --profile-from-start off -k regex:gm_reduce python tools/ncu_reductions.py"""
from __future__ import annotations

import cupy as cp
import cupyx.profiler

import gpu_mean as gm

# (shape, axes): rows of 16 values (R3's short rows), columns of 65536 values (R4), rows of 65536 (R2)
CALLS = [((1 << 24, 16), [1]), ((65536, 4096), [0]), ((4096, 65536), [1])]


def main() -> None:
    rng = cp.random.default_rng(0)
    xs = [(rng.standard_normal(shape, dtype=cp.float32), axes) for shape, axes in CALLS]
    for x, axes in xs:          # warm-up: compile, load, allocate
        gm.reduce_mean(x, axes=axes, device="cuda")
    cp.cuda.Device().synchronize()
    with cupyx.profiler.profile():       # cudaProfilerStart ... cudaProfilerStop
        for x, axes in xs:
            gm.reduce_mean(x, axes=axes, device="cuda")
        cp.cuda.Device().synchronize()
    for shape, axes in CALLS:
        print(f"profiled: float32 {shape} axes {axes}, random normal data")


if __name__ == "__main__":
    main()
