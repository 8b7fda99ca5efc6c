"""NVRTC's time for the CUDA kernels `gpu-mean conformance --device cuda` builds (no GPU needed).

Each process makes the CUDA backend over the stand-in for CuPy (tests/fake_cupy.py) with the real
NVRTC (cuda_compile.image, gpu_mean's kernel cache off), takes the descriptors of the quick or the
full conformance pass (checks/conformance.plan, as `gpu-mean conformance` lists them) and compiles
their programs ahead (Device.compile_ahead, NVRTC in --workers threads). Figures: variants (the
distinct programs compiled), seconds (wall time), and per file the seconds summed over its variants
one after another when --workers is 1, else NVRTC's time per thread added up (reduce_s,
elementwise_s).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROUNDS = 1
FIGURES = {"seconds": "lower", "variants": None, "reduce_s": "lower", "elementwise_s": "lower"}


def add_arguments(ap) -> None:
    ap.add_argument("--passes", default="quick", help="quick, full or both (comma-separated)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="NVRTC threads (default: the cores)")
    ap.add_argument("--limit", type=int, default=0, help="the first N descriptors only (0: all; a smoke run)")


def cases(args) -> list:
    return args.passes.split(",")


def env(args, case, tree, work) -> dict:
    return {"GPU_MEAN_CACHE_DIR": "off"}


def run(args, case: str) -> dict:
    import pytest
    sys.path.insert(0, str(Path(os.environ.get("BENCH_TREE", ".")) / "tests"))
    from fake_cupy import fake_cuda_backend

    import gpu_mean as gm
    from benches import gm_module
    from gpu_mean.backends import cuda_compile
    conformance = gm_module("gpu_mean.checks.conformance")
    image = cuda_compile.image                      # the real NVRTC, which the stand-in replaces
    mp = pytest.MonkeyPatch()
    be, _ = fake_cuda_backend(mp, [])
    mp.setattr(cuda_compile, "image", image)
    spent = {"reduce_gpu.cl": 0.0, "elementwise_gpu.cl": 0.0}

    def timed(filename, macros, *a, **k):
        t = time.perf_counter()
        try:
            return image(filename, macros, *a, **k)
        finally:
            spent[filename] = spent.get(filename, 0.0) + time.perf_counter() - t
    mp.setattr(cuda_compile, "image", timed)
    dev = gm.Device(be)
    sections, _ = conformance.plan(dev, case == "quick")
    descs = []
    for sec in sections:
        for cell in sec["cells"]:
            for c in cell["cases"]:
                try:
                    descs.append(c.desc())
                except gm.DmlError:
                    pass
    if args.limit:
        descs = descs[:args.limit]
    t = time.perf_counter()
    n = dev.compile_ahead(descs, workers=args.workers)
    wall = time.perf_counter() - t
    mp.undo()
    return {f"{case} conformance, {args.workers} thread(s)": {
        "seconds": wall, "variants": n, "reduce_s": spent["reduce_gpu.cl"],
        "elementwise_s": spent["elementwise_gpu.cl"]}}
