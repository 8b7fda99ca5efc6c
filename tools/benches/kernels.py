"""Kernel throughput per shape class (the profiler's class_cases), through a recorded command list.

Each process times one class on device buffers (gpu_mean.checks.profiler.prepare_device): the
--stat (median, or min: the fastest, less sensitive to other users' load) of --repeat runs after a
warm-up, as GB/s (each input read once + the output written once, over time).

--pair A,B (two DataType names) times two data types of each class in the same process instead, their
runs interleaved, and reports A's bytes per second over B's (A/B) beside both figures: A's share of
B's speed measured within one process, in each tree:

    python tools/bench.py kernels --before <commit> --pair BFLOAT16,FLOAT16 --only R6 --stat min
"""
from __future__ import annotations

ROUNDS = 3
FIGURES = {"GB/s": "higher"}     # with --pair A,B also "A GB/s" and "B GB/s" (the last word counts)


def add_arguments(ap) -> None:
    ap.add_argument("--device", default="opencl", help="a device spec, or a test variant: opencl:0-nofp64, "
                    "opencl:0-gpupaths, opencl:0-gpupaths-nofp64 (default %(default)s)")
    ap.add_argument("--mb", type=float, default=64, help="MiB of float32 input per case (float16 cases: half)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", default="", help="only the classes whose name contains this text (e.g. n-ary)")
    ap.add_argument("--dtypes", default="FLOAT32,FLOAT16", help="DataType names, comma-separated (default "
                    "%(default)s)")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="each process's figure: the median of its runs (default), or the fastest run")
    ap.add_argument("--data", choices=("ones", "normal"), default="ones",
                    help="the inputs' values: all ones (default), or seeded standard normal values (zero mean)")
    ap.add_argument("--pair", default="", help="two DataType names A,B: both types of each class in one process, "
                    "runs interleaved, and A's bytes per second over B's")


def _n(args) -> int:
    return int(args.mb * (1 << 20)) // 4


def _cases(args, dtypes: str):
    from benches import gm_module
    from gpu_mean import DataType
    profiler = gm_module("gpu_mean.checks.profiler")
    return profiler.class_cases(_n(args), tuple(DataType[t] for t in dtypes.split(",")))


def cases(args) -> list:
    if args.pair:
        if len(args.pair.split(",")) != 2:
            raise SystemExit(f"kernels: --pair {args.pair}: give two DataType names, A,B")
        cs = _cases(args, args.pair)
        half = len(cs) // 2
        return [f"{i},{i + half}" for i in range(half) if args.only in cs[i].klass]
    return [str(i) for i, c in enumerate(_cases(args, args.dtypes)) if args.only in f"{c.klass} {c.dtype.name}"]


def device(spec: str):
    """A device spec, or one of the test variants of tests/conftest.py."""
    import gpu_mean as gm
    if spec.startswith("opencl") and spec.endswith(("-nofp64", "-gpupaths")):
        from gpu_mean.backends import opencl
        return gm.Device(opencl.make_backend(int(spec.split(":")[1].split("-")[0]), allow_fp64="-nofp64" not in spec,
                                             gpu_paths="-gpupaths" in spec))
    return gm.create_device(spec)


def prepared(dev, case, data: str):
    from benches import gm_module
    profiler = gm_module("gpu_mean.checks.profiler")
    if data == "normal":       # seeded standard normal values (zero mean: the bound tests' hard case)
        import numpy as np
        rng = np.random.default_rng(24)
        return profiler.prepare_device(dev, case, [
            rng.standard_normal(t.total_size_in_bytes // t.numpy_dtype.itemsize).astype(t.numpy_dtype)
            for t in case.desc().input_tensors()])
    return profiler.prepare_device(dev, case)


def run(args, which: str) -> dict:
    from benches.timing import interleaved, pick
    dev = device(args.device)
    cs = _cases(args, args.pair or args.dtypes)
    chosen = [cs[int(i)] for i in which.split(",")]
    t = interleaved({j: prepared(dev, c, args.data) for j, c in enumerate(chosen)}, args.repeat)
    gbs = [c.traffic / pick(t[j], args.stat) / 1e9 for j, c in enumerate(chosen)]
    if args.pair:
        a, b = args.pair.split(",")
        return {chosen[0].klass: {f"{a} GB/s": gbs[0], f"{b} GB/s": gbs[1], f"{a}/{b}": gbs[0] / gbs[1]}}
    return {f"{chosen[0].klass} {chosen[0].dtype.name}": {"GB/s": gbs[0]}}
