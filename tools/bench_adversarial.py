"""The cost of correct rounding's exact pass: each reduction class of the profiler on three kinds of
data, in one process, interleaved round by round (issue 22; docs/results/2026-11-24-correct-rounding-kernels-pocl.md).

    python tools/bench_adversarial.py --device opencl --mb 32 --rounds 5 --repeat 5 [--dtypes FLOAT64]

- ones: the profiler's data (every output settled by the bound test in the main pass);
- normal: random normal values (nearly every output settled; FLOAT16 rows past 2^11 values leave
  some open, the float pre-sum's bound);
- cancelling: pairs +-v with v near the type's largest value, shuffled, and two small values: the
  bound settles nothing, every output goes through gm_reduce_exact (the adversarial worst case);
- centered: normal values minus their mean over the reduced axes (data just standardized): each
  output's exact mean is a rounding residue near zero, so the bound settles almost nothing and the
  exact pass's second tier decides (the realistic worst case).

Prints GB/s (bytes read once + written once over the median time) per data kind and the ratio of
each to ones.
"""
from __future__ import annotations

import argparse
from statistics import median

import ml_dtypes
import numpy as np

import gpu_mean as gm
from gpu_mean.checks import profiler


def data(kind: str, shape, npdt, rng, axes=()) -> np.ndarray:
    n = int(np.prod(shape))
    if kind == "ones":
        return np.ones(n, npdt).reshape(shape)
    if kind == "normal":
        return rng.standard_normal(n).astype(npdt).reshape(shape)
    if kind == "centered":
        x = rng.standard_normal(n).reshape(shape)
        return (x - x.mean(axis=tuple(axes), keepdims=True)).astype(npdt)
    big = float(ml_dtypes.finfo(npdt).max)   # numpy's finfo does not know bfloat16
    v = (rng.uniform(0.5, 1.0, n // 2) * big).astype(npdt)
    x = np.concatenate([v, -v, np.full(n - 2 * v.size, 3.0, npdt)])
    rng.shuffle(x)
    return x.reshape(shape)


def prepare(dev, case, x: np.ndarray):
    return profiler.prepare_device(dev, case, [x])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--mb", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="R", help="the classes whose name contains this text")
    ap.add_argument("--dtypes", default="FLOAT32,FLOAT16", help="DataType names, comma-separated (e.g. FLOAT64)")
    a = ap.parse_args()
    dev = gm.create_device(a.device)
    n = a.mb * (1 << 20) // 4
    kinds = ("ones", "normal", "cancelling", "centered")
    rng = np.random.default_rng(22)
    print(f"{a.device}, {a.mb} MiB float32 inputs, GB/s, median of {a.rounds} interleaved rounds "
          f"(each the median of {a.repeat} runs)")
    print(f"{'class':34s} " + " ".join(f"{k:>10s}" for k in kinds) + "   normal/ones  cancelling/ones  centered/ones")
    for case in profiler.class_cases(n, tuple(gm.DataType[t] for t in a.dtypes.split(","))):
        name = f"{case.klass} {case.dtype.name}"
        if a.only not in name or not case.klass.startswith("R"):
            continue
        shape = case.desc().input_tensors()[0].sizes
        npdt = case.dtype.numpy_dtype
        runs = {k: prepare(dev, case, data(k, case.shape, npdt, rng, case.axes).reshape(shape)) for k in kinds}
        times: dict = {k: [] for k in kinds}
        for _ in range(a.rounds):
            for k in kinds:
                times[k].append(profiler.median_time(runs[k], a.repeat))
        gbs = {k: case.traffic / median(times[k]) / 1e9 for k in kinds}
        print(f"{name:34s} " + " ".join(f"{gbs[k]:10.2f}" for k in kinds)
              + f"   {gbs['normal'] / gbs['ones']:11.2f}  {gbs['cancelling'] / gbs['ones']:15.3f}"
              + f"  {gbs['centered'] / gbs['ones']:13.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
