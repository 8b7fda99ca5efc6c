"""Start-up: the first gm.reduce_mean of a new process, with gpu_mean's and PoCL's caches cold or warm.

Each process imports gpu_mean and times its first call gm.reduce_mean(x, axis=1, device=DEVICE) on a
(64, 1024) float32 array (device discovery, the context, the program build and the launch). Two
caches decide what it compiles: gpu_mean's kernel cache (GPU_MEAN_CACHE_DIR) and, on PoCL, PoCL's
own (POCL_CACHE_DIR); each scenario (a case) gives each an empty folder, a folder filled by the
harness's warm-up process, or turns gpu_mean's off:

    cold            both empty                         (a first run, with the cache)
    cold, no cache  gpu_mean's off, PoCL's empty       (a first run before the cache)
    PoCL warm       gpu_mean's off, PoCL's filled      (a second run before the cache)
    ours warm       gpu_mean's filled, PoCL's empty    (a second run, PoCL's cache cleared)
    both warm       both filled                        (a second run with the cache)

--pocl-binaries adds the same scenarios with binaries kept on PoCL ("+bin"; PoCL's build is kept by
PoCL itself otherwise: gpu_mean/backends/opencl.py, keeps_binaries). --cuda adds NVRTC alone (no
GPU needed): cuda_compile.image for the same reduction's GPU variant (sm_90), cold and warm.
Figures: import_s, first_s (the first call), compiled (kernels the process compiled).
"""
from __future__ import annotations

import time
import uuid

ROUNDS = 7
WARMUP_RUN = True          # fills every scenario's "warm" folders before the rounds
FIGURES = {"first_s": "lower", "import_s": "lower"}
SCENARIOS = {            # (gpu_mean's cache, PoCL's cache): "empty", "warm" or "off"; binaries kept on PoCL
    "cold": ("empty", "empty", False),
    "cold, no cache": ("off", "empty", False),
    "PoCL warm": ("off", "warm", False),
    "ours warm": ("warm", "empty", False),
    "both warm": ("warm", "warm", False),
    "cold +bin": ("empty", "empty", True),
    "ours warm +bin": ("warm", "empty", True),
    "both warm +bin": ("warm", "warm", True),
    "nvrtc cold": ("empty", "empty", False),
    "nvrtc warm": ("warm", "empty", False),
}


def add_arguments(ap) -> None:
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--pocl-binaries", action="store_true", help="also the scenarios with binaries kept on PoCL")
    ap.add_argument("--cuda", action="store_true", help="also NVRTC alone: cuda_compile.image cold and warm")


def cases(args) -> list:
    return [s for s in SCENARIOS if (args.pocl_binaries or "+bin" not in s) and (args.cuda or "nvrtc" not in s)]


def env(args, case: str, tree: str, work) -> dict:
    """The two cache folders of this process: a fresh empty one, the (tree, scenario)'s warm one, or
    off."""
    ours, pocl, _ = SCENARIOS[case]
    key = f"{tree}-{case.replace(' ', '_').replace(',', '')}"
    fresh = work / f"{key}-{uuid.uuid4().hex[:8]}"

    def folder(kind: str, which: str) -> str:
        return "off" if which == "off" else str(work / f"{key}-{kind}-warm" if which == "warm" else fresh / kind)
    return {"GPU_MEAN_CACHE_DIR": folder("ours", ours), "POCL_CACHE_DIR": folder("pocl", pocl)}


def run(args, case: str) -> dict:
    t0 = time.perf_counter()
    import numpy as np

    import gpu_mean as gm
    from gpu_mean.backends import diskcache
    t1 = time.perf_counter()
    compiled: list = []
    if case.startswith("nvrtc"):
        from benches import gm_module
        from gpu_mean.backends import cuda_compile
        reduce_kernels = gm_module("gpu_mean.kernels.reduce_kernels")
        from gpu_mean.runtime import planning
        xd, yd = gm.TensorDesc(gm.DataType.FLOAT32, (64, 1024)), gm.TensorDesc(gm.DataType.FLOAT32, (64, 1))
        plan = planning.plan_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, axes=(1,)))
        macros = reduce_kernels.gpu_variant(plan, sms=132).macros
        t1 = time.perf_counter()
        with diskcache.on_compile(compiled.append):
            cuda_compile.image("reduce_gpu.cl", macros, 90, device="NVIDIA H200", driver=13000)
    else:
        if SCENARIOS[case][2]:
            from gpu_mean.backends import opencl
            opencl.keeps_binaries = lambda device: True
        with diskcache.on_compile(compiled.append):
            y = gm.reduce_mean(np.ones((64, 1024), np.float32), axis=1, device=args.device)
        assert float(y[0, 0]) == 1.0
    t2 = time.perf_counter()
    return {case: {"import_s": t1 - t0, "first_s": t2 - t1, "compiled": float(len(compiled))}}
