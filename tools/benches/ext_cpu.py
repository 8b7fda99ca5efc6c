"""A device on the extension types (issue 21): each operation over BFLOAT16, FLOAT64, INT64 and UINT64
against the same operation over FLOAT32 and against numpy doing the nearest plain thing.

In one process per operation (a case): the five types' compiled operators (cop.execute on device
buffers) and numpy's nearest plain thing (a float64 sum, an int64 sum that wraps: faster and weaker),
timed in turns (benches/timing.py), the median of --repeat; rows of 1024 (the column reduction sums
the rows: 1024 outputs). Figures: ms, and x_f32 (the time over FLOAT32's in the same process).
--device opencl (or any device name) measures that device's kernels the same way.
"""
from __future__ import annotations

ROUNDS = 1
FIGURES = {"ms": "lower", "x_f32": "lower"}
OPS = ("mean", "nary3", "reduce rows", "reduce columns")


def add_arguments(ap) -> None:
    ap.add_argument("--mib", type=float, default=4.0, help="MiB of float32 per input (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--device", default="cpu", help="the device measured (default: the CPU device)")


def cases(args) -> list:
    return list(OPS)


def compiled(dev, desc, xs):
    import numpy as np
    cop = dev.compile_operator(dev.create_operator(desc))
    ins = []
    for t, x in zip(desc.input_tensors(), xs):
        b = dev.create_buffer(t.total_size_in_bytes)
        b.write(np.ascontiguousarray(x).reshape(-1).view(np.uint8))
        ins.append(b)
    outs = [dev.create_buffer(max(t.total_size_in_bytes, 4)) for t in desc.output_tensors()]
    return lambda: cop.execute(inputs=ins, outputs=outs)


def data(dt, shape, rng):
    import numpy as np
    if dt.is_float:
        return rng.standard_normal(shape).astype(dt.numpy_dtype)
    info = np.iinfo(dt.numpy_dtype)
    return rng.integers(info.min // 4, info.max // 4, shape, dtype=dt.numpy_dtype)


def descriptor(op: str, dt, n: int):
    import gpu_mean as gm
    D, T = gm.DataType, gm.TensorDesc
    shape, red = (n // 1024, 1024), (n // 1024, 1)
    t = T(dt, shape)
    if op == "mean":
        return (gm.ElementWiseMeanDesc if dt == D.FLOAT32 else gm.ext.MeanDesc)(t, t, t)
    if op == "nary3":
        return gm.ext.NaryMeanDesc([t, t, t], t)
    ax = (1,) if op == "reduce rows" else (0,)
    r = T(dt, red if op == "reduce rows" else (1, 1024))
    return gm.ReduceDesc(gm.ReduceFunction.AVERAGE, t, r, ax) if dt == D.FLOAT32 else gm.ext.ReduceMeanDesc(t, r, ax)


def run(args, op: str) -> dict:
    import numpy as np

    import gpu_mean as gm
    from benches.timing import interleaved, median
    D = gm.DataType
    n = int(args.mib * 2**20) // 4 // 1024 * 1024
    dev = gm.create_device(args.device)
    rng = np.random.default_rng(0)
    fns = {}
    for dt in (D.FLOAT32, D.BFLOAT16, D.FLOAT64, D.INT64, D.UINT64):
        desc = descriptor(op, dt, n)
        fns[dt.name] = compiled(dev, desc, [data(t.data_type, t.sizes, rng) for t in desc.input_tensors()])
    x64 = rng.standard_normal((n // 1024, 1024))
    i64 = data(D.INT64, (n // 1024, 1024), rng)
    if op.startswith("reduce"):
        ax = 1 if op == "reduce rows" else 0
        fns["numpy f64 mean (plain sum)"] = lambda: x64.mean(axis=ax)
        fns["numpy int64 sum // n (wraps)"] = lambda: i64.sum(axis=ax) // i64.shape[ax]
    elif op == "mean":
        fns["numpy f64 (a+b)*0.5"] = lambda: (x64 + x64) * 0.5
    else:
        fns["numpy f64 (a+b+c)/3"] = lambda: (x64 + x64 + x64) / 3
    t = {k: median(v) for k, v in interleaved(fns, args.repeat).items()}
    return {f"{op}: {name}": {"ms": s * 1e3, "x_f32": s / t["FLOAT32"]} for name, s in t.items()}
