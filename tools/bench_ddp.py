"""One Dask chunk's exact double-double partials (``Device.dd_partials``: gpu_mean.dask's chunk step,
issue 43) against the peer's plain sum of the same chunk (a benchmark, not a test; Dask itself is
not needed, so it runs on a GPU machine without it).

    python tools/bench_ddp.py --device opencl      # numpy chunks, against numpy's float32 sum
    python tools/bench_ddp.py --device cuda        # CuPy chunks read where they lie, against cupy.sum

Cases: a (2048, 32768) FLOAT32 chunk (--mb 256 MiB, the chunk of tools/bench_dask.py --wide) over
axis 0, axis 1 and both, and the tall (2^22, 16) chunk of the same bytes over axis 0; random normal
data. Rounds take turns between the two (each first in turn), best of --repeat; the ratio is the
peer's time over ours (above 1.0: faster than the plain sum). Also printed: the outputs the pairs
left to the digits (flagged).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

def cases(mb: int) -> tuple:
    """(shape, axes): a chunk of ``mb`` MiB of FLOAT32 as (2048, columns) over axis 0, axis 1 and both,
    and as (rows, 16) over axis 0."""
    n = mb << 18                    # values
    wide = (2048, max(1, n // 2048))
    return ((wide, (0,)), (wide, (1,)), (wide, (0, 1)), ((max(1, n // 16), 16), (0,)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mb", type=int, default=256, help="MiB a chunk (default 256)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    from gpu_mean.descriptors.types import DataType
    from gpu_mean.frontends.arrays import get_device
    dev = get_device(args.device)
    cuda = dev.info.backend == "cuda"
    if cuda:
        import cupy as cp
        xp, sync, peer = cp, cp.cuda.get_current_stream().synchronize, "cupy.sum"
    else:
        xp, sync, peer = np, (lambda: None), "numpy.sum"
    rows = []
    print(f"bench_ddp: device {dev.name}, peer {peer}, best of {args.repeat} interleaved rounds")
    print(f"  {'chunk':<16} {'axes':<7} {'ours ms':>8} {'peer ms':>8} {'GB/s':>6} {'vs peer':>8} {'flagged':>8}")
    for shape, axes in cases(args.mb):
        host = np.random.default_rng(43).standard_normal(shape, dtype=np.float32)
        x = xp.asarray(host)
        got = dev.dd_partials(x, axes, DataType.FLOAT32)       # compiled, warm
        if got is None:
            print(f"  {str(shape):<16} {str(axes):<7} no pairs on {dev.name}")
            continue

        def ours(x=x, axes=axes):
            dev.dd_partials(x, axes, DataType.FLOAT32)

        def theirs(x=x, axes=axes):
            xp.sum(x, axis=axes, keepdims=True)
            sync()
        best = {ours: float("inf"), theirs: float("inf")}
        for r in range(args.repeat):
            for f in ((ours, theirs) if r % 2 == 0 else (theirs, ours)):
                sync()
                t0 = time.perf_counter()
                f()
                best[f] = min(best[f], time.perf_counter() - t0)
        flagged = int(np.count_nonzero(got[2]))
        row = {"shape": list(shape), "axes": list(axes), "ours_s": best[ours], "peer_s": best[theirs],
               "ratio": best[theirs] / best[ours], "gbps": host.nbytes / best[ours] / 1e9, "flagged": flagged}
        rows.append(row)
        print(f"  {str(shape):<16} {str(axes):<7} {best[ours] * 1e3:8.2f} {best[theirs] * 1e3:8.2f} "
              f"{row['gbps']:6.1f} {row['ratio']:7.2f}x {flagged:8d}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": dev.name, "peer": peer, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
