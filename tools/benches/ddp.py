"""One Dask chunk's exact double-double partials (Device.dd_partials) against the plain sum of it.

gpu_mean.dask's chunk step (issue 43) on one chunk, against the peer's plain sum of the same chunk
(numpy's float32 sum for host chunks, cupy.sum for CuPy chunks read where they lie); Dask itself is
not needed. Cases: a (2048, columns) FLOAT32 chunk of --mb MiB (the chunk of the dask benchmark's
--wide) over axis 0, axis 1 and both, and the tall (rows, 16) chunk of the same bytes over axis 0;
random normal data; best of --repeat, the two taking turns. Figures: ms (ours), peer_ms, GB/s (ours),
vs_peer (the peer's time over ours: above 1.0, faster than the plain sum) and flagged (the outputs
the pairs left to the digits).

    python tools/bench.py ddp --device opencl      # numpy chunks
    python tools/bench.py ddp --device cuda        # CuPy chunks
"""
from __future__ import annotations

ROUNDS = 1
OVER_ROUNDS = "best"
FIGURES = {"ms": "lower", "GB/s": "higher", "vs_peer": "higher"}


def add_arguments(ap) -> None:
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each, taking turns (default %(default)s)")
    ap.add_argument("--mb", type=int, default=256, help="MiB a chunk (default %(default)s)")


def shapes(mb: int) -> list:
    """(shape, axes): a chunk of ``mb`` MiB of FLOAT32 as (2048, columns) over axis 0, axis 1 and both,
    and as (rows, 16) over axis 0."""
    n = mb << 18                    # values
    wide = (2048, max(1, n // 2048))
    return [(wide, (0,)), (wide, (1,)), (wide, (0, 1)), ((max(1, n // 16), 16), (0,))]


def cases(args) -> list:
    return [str(i) for i in range(len(shapes(args.mb)))]


def run(args, which: str) -> dict:
    import numpy as np

    from benches.timing import interleaved
    from gpu_mean.descriptors.types import DataType
    from gpu_mean.frontends.arrays import get_device
    shape, axes = shapes(args.mb)[int(which)]
    dev = get_device(args.device)
    if dev.info.backend == "cuda":
        import cupy as cp
        xp, sync, peer = cp, cp.cuda.get_current_stream().synchronize, "cupy.sum"
    else:
        xp, sync, peer = np, None, "numpy.sum"
    host = np.random.default_rng(43).standard_normal(shape, dtype=np.float32)
    x = xp.asarray(host)
    row = f"{shape} axes {axes}, against {peer}"
    got = dev.dd_partials(x, axes, DataType.FLOAT32)       # compiled, warm
    if got is None:
        return {row: {"no pairs on this device": 1.0}}
    t = interleaved({"ours": lambda: dev.dd_partials(x, axes, DataType.FLOAT32),
                     "peer": lambda: xp.sum(x, axis=axes, keepdims=True)}, args.repeat, warmup=0, sync=sync)
    ours, theirs = min(t["ours"]), min(t["peer"])
    return {row: {"ms": ours * 1e3, "peer_ms": theirs * 1e3, "GB/s": host.nbytes / ours / 1e9,
                  "vs_peer": theirs / ours, "flagged": float(np.count_nonzero(got[2]))}}
