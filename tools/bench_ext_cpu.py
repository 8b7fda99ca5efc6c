"""The CPU device on the extension types (issue 21), side by side in one run: each operation over
BFLOAT16, FLOAT64, INT64 and UINT64 against the same operation over FLOAT32 (DirectML's path, the
CPU device's speed before) and against numpy doing the nearest plain thing (a float64 sum, an int64
sum that wraps: faster and weaker). Ratios, measured in interleaved rounds (tools' profiler.measure),
so that load from other processes falls on every contender alike.

    python tools/bench_ext_cpu.py [--mib 4] [--repeat 7] [--device cpu]

``--device opencl`` (or any device name) measures that device's kernels the same way.
"""
from __future__ import annotations

import argparse

import numpy as np

import gpu_mean as gm
from gpu_mean.checks.profiler import measure

D = gm.DataType
T = gm.TensorDesc


def compiled(dev, desc, xs):
    cop = dev.compile_operator(dev.create_operator(desc))
    ins = []
    for t, x in zip(desc.input_tensors(), xs):
        b = dev.create_buffer(t.total_size_in_bytes)
        b.write(np.ascontiguousarray(x).reshape(-1).view(np.uint8))
        ins.append(b)
    outs = [dev.create_buffer(max(t.total_size_in_bytes, 4)) for t in desc.output_tensors()]
    return lambda: cop.execute(inputs=ins, outputs=outs)


def data(dt, shape, rng):
    if dt.is_float:
        return rng.standard_normal(shape).astype(dt.numpy_dtype)
    info = np.iinfo(dt.numpy_dtype)
    return rng.integers(info.min // 4, info.max // 4, shape, dtype=dt.numpy_dtype)


def cases(n: int):
    """(name, {contender: descriptor builder}) per operation; rows of 1024 (the column reduction sums
    the rows: 1024 outputs)."""
    shape, red = (n // 1024, 1024), (n // 1024, 1)
    out = []
    for op in ("mean", "nary3", "reduce rows", "reduce columns"):
        row = {}
        for dt in (D.FLOAT32, D.BFLOAT16, D.FLOAT64, D.INT64, D.UINT64):
            t = T(dt, shape)
            if op == "mean":
                cls = gm.ElementWiseMeanDesc if dt == D.FLOAT32 else gm.ext.MeanDesc
                row[dt.name] = lambda t=t, cls=cls: cls(t, t, t)
            elif op == "nary3":
                row[dt.name] = lambda t=t: gm.ext.NaryMeanDesc([t, t, t], t)
            else:
                ax = (1,) if op == "reduce rows" else (0,)
                r = T(dt, red if op == "reduce rows" else (1, 1024))
                if dt == D.FLOAT32:
                    row[dt.name] = lambda t=t, r=r, ax=ax: gm.ReduceDesc(gm.ReduceFunction.AVERAGE, t, r, ax)
                else:
                    row[dt.name] = lambda t=t, r=r, ax=ax: gm.ext.ReduceMeanDesc(t, r, ax)
        out.append((op, row))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=float, default=4.0, help="MiB of float32 per input (default 4)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--device", default="cpu", help="the device measured (default: the CPU device)")
    a = ap.parse_args()
    n = int(a.mib * 2**20) // 4 // 1024 * 1024
    dev = gm.create_device(a.device)
    rng = np.random.default_rng(0)
    print(f"{dev.name}, {n} elements per input (rows of 1024); median of {a.repeat} interleaved samples; "
          "ratio = time / FLOAT32's time")
    for op, row in cases(n):
        fns = {}
        for name, build in row.items():
            desc = build()
            xs = [data(t.data_type, t.sizes, rng) for t in desc.input_tensors()]
            fns[name] = compiled(dev, desc, xs)
        x64 = rng.standard_normal((n // 1024, 1024))
        i64 = data(D.INT64, (n // 1024, 1024), rng)
        if op.startswith("reduce"):
            ax = 1 if op == "reduce rows" else 0
            fns["numpy f64 mean (plain sum)"] = lambda x=x64, ax=ax: x.mean(axis=ax)
            fns["numpy int64 sum // n (wraps)"] = lambda x=i64, ax=ax: x.sum(axis=ax) // x.shape[ax]
        elif op == "mean":
            fns["numpy f64 (a+b)*0.5"] = lambda x=x64: (x + x) * 0.5
        else:
            fns["numpy f64 (a+b+c)/3"] = lambda x=x64: (x + x + x) / 3
        t = measure(fns, a.repeat)
        base = t["FLOAT32"].median
        print(f"{op}:")
        for name, tm in t.items():
            print(f"  {name:30s} {tm.median * 1e3:8.3f} ms +-{tm.spread:4.0%}  {tm.median / base:5.2f}x")


if __name__ == "__main__":
    main()
