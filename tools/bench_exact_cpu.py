"""The CPU device's correctly rounded float means (issue 22, stage 1) against the formulas they
replace, side by side in one process, rounds interleaved (the machine is shared: ratios, not times).

    PYTHONPATH=. python tools/bench_exact_cpu.py [--rounds 7]

"before": main's formulas before issue 22 (a FLOAT64 sum, one division, one rounding; FLOAT64 in
double-double); "after": runtime/exact.py (the same sum, plus max|x|, the bound test per output, the
exact fallback for what it leaves open). Also the adversarial cost: the after path on data whose
every output needs the exact fallback (+-max cancelling) against normal data of the same shape."""
from __future__ import annotations

import argparse
import time

import ml_dtypes
import numpy as np

from gpu_mean.descriptors.types import DataType as D
from gpu_mean.runtime import numerics, wide

F64 = np.float64


def before_reduce(x, axes, dt):
    n = int(np.prod([x.shape[a] for a in axes]))
    if dt == D.FLOAT64:
        return numerics._mean0_before(x, axes)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.sum(x, axis=axes, dtype=F64, keepdims=True)
        if dt == D.BFLOAT16:
            return wide.f64_to_bf16(s / F64(n))
        return (s / F64(n)).astype(dt.numpy_dtype)


def before_nary(xs, dt):
    with np.errstate(over="ignore", invalid="ignore"):
        s = xs[0].astype(F64)
        for x in xs[1:]:
            s = s + x.astype(F64)
        return (s / F64(len(xs))).astype(dt.numpy_dtype)


def _mean0_before(x, axes):
    rows = numerics._rows0(x, axes)
    n, m = rows.shape
    out = np.empty(m, F64)
    step = max(1, 4 * numerics.BLOCK // n)
    for j in range(0, m, step):
        out[j:j + step] = wide.f64_mean0(rows[:, j:j + step])
    return out.reshape(numerics._kept(x.shape, axes))


numerics._mean0_before = _mean0_before


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def side_by_side(rounds, a, b) -> tuple:
    """Best times of two calls (functions with their arguments), rounds interleaved."""
    ta = tb = float("inf")
    for _ in range(rounds):
        ta = min(ta, timed(*a))
        tb = min(tb, timed(*b))
    return ta, tb


def cases(rng):
    shapes = {"rows 2048x4096 axis 1": ((2048, 4096), (1,)), "cols 4096x2048 axis 0": ((4096, 2048), (0,)),
              "all 4M": ((2048, 2048), (0, 1)), "NCHW 32x64x32x32 axes 2,3": ((32, 64, 32, 32), (2, 3))}
    for dt, npdt in TYPES:
        for name, (shape, axes) in shapes.items():
            if dt in (D.FLOAT64, D.BFLOAT16) and name.startswith("NCHW"):
                continue
            yield f"reduce {dt.name} {name}", dt, rng.standard_normal(shape).astype(npdt), axes


TYPES = ((D.FLOAT32, np.float32), (D.FLOAT16, np.float16), (D.BFLOAT16, ml_dtypes.bfloat16), (D.FLOAT64, np.float64))


def before_nary_any(xs, dt):
    if dt in (D.FLOAT32, D.FLOAT16):
        return before_nary(xs, dt)
    if dt == D.BFLOAT16:
        return numerics._blocks(lambda *p: wide.f64_to_bf16(before_nary(list(p), D.FLOAT64)), xs, xs[0].dtype)
    return numerics._blocks(lambda *p: wide.f64_nary_mean(list(p)), xs, xs[0].dtype)


def cancelling(rng, shape, axis, big, npdt):
    """Pairs +-v near ``big`` along ``axis``, shuffled, one value 1.0: every output's exact mean is
    1/n while its values are near ``big`` (the FLOAT64 sum loses it: the exact fallback decides)."""
    n = shape[axis]
    other = shape[1 - axis]
    v = rng.uniform(0.5, 1.0, (other, n // 2 - 1)) * big
    rows = np.concatenate([v, -v, np.ones((other, 1)), np.zeros((other, 1))], axis=1)
    rows = rng.permuted(rows, axis=1)
    x = rows.astype(npdt)
    return x if axis == 1 else np.ascontiguousarray(x.T)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'case':48s} {'before ms':>10s} {'after ms':>10s} {'after/before':>12s}")
    for name, dt, x, axes in cases(rng):
        tb, ta = side_by_side(args.rounds, (before_reduce, x, axes, dt), (numerics.reduce_mean, x, axes, dt))
        print(f"{name:48s} {tb * 1e3:10.2f} {ta * 1e3:10.2f} {ta / tb:12.2f}")
    for dt, npdt in TYPES:
        for k in (3, 8):
            xs = [rng.standard_normal(1 << 20).astype(npdt) for _ in range(k)]
            tb, ta = side_by_side(args.rounds, (before_nary_any, xs, dt), (numerics.nary_mean, xs, dt))
            print(f"{f'n-ary {dt.name} {k} inputs of 1M':48s} {tb * 1e3:10.2f} {ta * 1e3:10.2f} {ta / tb:12.2f}")
    print("\nadversarial: every output needs the exact fallback (+-max cancelling), after path only")
    print(f"{'case':48s} {'normal ms':>10s} {'cancel ms':>10s} {'cancel/normal':>13s}")
    for dt, npdt, big in ((D.FLOAT32, np.float32, 3.4e38), (D.FLOAT16, np.float16, 65000.0),
                          (D.BFLOAT16, ml_dtypes.bfloat16, 3.3e38), (D.FLOAT64, np.float64, 1.7e308)):
        for shape, axis in (((256, 4096), 1), ((4096, 256), 0)):
            normal = rng.standard_normal(shape).astype(npdt)
            cancel = cancelling(rng, shape, axis, big, npdt)
            tn, tc = side_by_side(max(2, args.rounds // 2), (numerics.reduce_mean, normal, (axis,), dt),
                                  (numerics.reduce_mean, cancel, (axis,), dt))
            name = f"reduce {dt.name} {shape} axis {axis}"
            print(f"{name:48s} {tn * 1e3:10.2f} {tc * 1e3:10.2f} {tc / tn:13.1f}")


if __name__ == "__main__":
    main()
