"""The cost of a Dask-like chunk's exact partials against the FLOAT64 partials of ReduceSumDesc (a
benchmark, not a test; docs/design.md, "Partials across boundaries").

    python tools/bench_exact_partials.py                          # opencl:0, 4096 x 4096 float32
    python tools/bench_exact_partials.py --device opencl:0 --rows 4096 --cols 4096 --repeat 7
    python tools/bench_exact_partials.py --nofp64                 # the same device without fp64
    python tools/bench_exact_partials.py --dtypes float32,float64 # FLOAT64 chunks too (fp64 devices)
    python tools/bench_exact_partials.py --split-mb 16            # and split calls' combine, device / host

For one chunk (seeded normal values) and each reduction (axis 0, axis 1, every axis), rounds take
turns (each first in turn) between:

* ``wide``: ``gpu_mean.dask.partials.run_sum``, the chunk's ReduceSumDesc launch (FLOAT64 totals,
  the chunk bound in place where the device works in host memory; a FLOAT64 chunk: the double-double
  total, two output tensors, the chunk copied in), what a device chunk gave before; skipped without
  fp64 (there the CPU device summed the chunk: ``cpu-digits``);
* ``exact``: ``Device.exact_partials``, the device's superaccumulator limbs, converted to the CPU
  digits (the chunk copied into a device buffer, the runs' limbs added on the host);
* ``cpu-digits``: ``runtime.exact.limbs`` and ``nonfinite_flags`` in numpy (the CPU device's exact
  partials, and what a device without fp64 used for split pieces);
* ``mean``: ``gm.reduce_mean`` of the chunk on the device (one REDUCE AVERAGE launch, correctly
  rounded: the fast pass and its bound), for scale where the device has no ``wide`` sum of the type
  (FLOAT64 on OpenCL: ReduceSumDesc's two-word FLOAT64 sum is not built there).

With ``--split-mb M``, also ``gm.reduce_mean`` of the chunk on the device with its buffers lowered
to M MiB (a split call whose reduced axis is cut) two ways: ``split-device``, the pieces' partials
added and rounded on the device (issue 26: gm_limbs_add, gm_limbs_round), and ``split-host``, the
pieces' limbs read back and added on the host (``split.device_means`` switched off).

Prints the median seconds of each, GB/s of the chunk's bytes, and exact / wide; then checks that the
exact partials equal the CPU digits bit for bit (and the two split ways give the same bits).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpu_mean as gm  # noqa: E402
from gpu_mean.dask import partials  # noqa: E402
from gpu_mean.frontends.arrays import data_type_of  # noqa: E402
from gpu_mean.runtime import exact  # noqa: E402


def device_of(spec: str, nofp64: bool):
    if nofp64:
        from gpu_mean.backends import opencl
        return gm.Device(opencl.make_backend(int(spec.split(":")[1]), allow_fp64=False))
    return gm.create_device(spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--nofp64", action="store_true", help="the OpenCL device with fp64 switched off")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dtypes", default="float32", help="comma-separated: float32, float16, float64")
    ap.add_argument("--split-mb", type=int, default=0, help="also time split calls with buffers of this many MiB")
    args = ap.parse_args(argv)
    dev = device_of(args.device, args.nofp64)
    for name in args.dtypes.split(","):
        if name == "float64" and not dev.info.fp64:
            print("float64: skipped (no fp64: the device holds no FLOAT64 tensor)")
            continue
        x = np.random.default_rng(0).standard_normal((args.rows, args.cols)).astype(name)
        if one_type(dev, x, args.repeat, args.split_mb):
            return 1
    return 0


def split_host(small, x, axes):
    from gpu_mean.frontends import split
    real = split.device_means
    split.device_means = lambda *a: None
    try:
        return gm.reduce_mean(x, axes=list(axes), device=small)
    finally:
        split.device_means = real


def one_type(dev, x, repeat: int, split_mb: int = 0) -> int:
    dt = data_type_of(x.dtype, "bench")
    print(f"device {dev.name}, fp64 {dev.info.fp64}; chunk {x.shape} {x.dtype} ({x.nbytes / 2**20:.0f} MiB); "
          f"median of {repeat} interleaved rounds")
    ways = {"exact": lambda axes: dev.exact_partials(x, axes, dt),
            "cpu-digits": lambda axes: (exact.limbs(x, axes, x.dtype), exact.nonfinite_flags(x, axes))}
    ways["mean"] = lambda axes: gm.reduce_mean(x, axes=list(axes), device=dev)
    if dev.info.fp64:
        try:
            partials.run_sum(x[:2, :2], (0,), dev)
            ways["wide"] = lambda axes: partials.run_sum(x, axes, dev)
        except gm.UnsupportedTypeError as e:
            print(f"  wide: skipped ({str(e).split('does not support: ')[-1].split(';')[0]})")
    if split_mb:
        small = gm.Device(dev.backend, dev.feature_level, max_alloc_bytes=split_mb << 20)
        ways["split-device"] = lambda axes: gm.reduce_mean(x, axes=list(axes), device=small)
        ways["split-host"] = lambda axes: split_host(small, x, axes)
    for axes in ((0,), (1,), (0, 1)):
        for fn in ways.values():       # warm-up: compile, pools
            fn(axes)
        times = {k: [] for k in ways}
        names = list(ways)
        for r in range(repeat):
            order = names[r % len(names):] + names[:r % len(names)]
            for k in order:
                t0 = time.perf_counter()
                ways[k](axes)
                times[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        line = ", ".join(f"{k} {med[k] * 1e3:.1f} ms ({x.nbytes / med[k] / 1e9:.2f} GB/s)" for k in names)
        ratio = f"; exact / mean {med['exact'] / med['mean']:.2f}x"
        ratio += f", exact / wide {med['exact'] / med['wide']:.2f}x" if "wide" in med else ""
        print(f"axes {axes}: {line}{ratio}")
        d, f = ways["exact"](axes)
        same = np.array_equal(d, exact.limbs(x, axes, x.dtype)) and np.array_equal(f, exact.nonfinite_flags(x, axes))
        print(f"  exact partials == CPU digits: {same}")
        if split_mb:
            a, b = ways["split-device"](axes), ways["split-host"](axes)
            same = same and np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
            print(f"  split-device == split-host bits: {same}")
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
