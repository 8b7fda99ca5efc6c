"""gpu_mean.dask on a LocalCluster: 1 worker against 2, and against dask.array.mean (a benchmark, not a test).

    python tools/bench_dask.py                         # numpy chunks, device "cpu" on every worker
    python tools/bench_dask.py --device opencl --stream-mb 1024 --worker-mb 384
    python tools/bench_dask.py --cuda --device cuda    # dask-cuda LocalCUDACluster, CuPy chunks

1. Scaling: reduce_mean over a float32 array of --stream-mb, generated chunk by chunk on the workers
   (never whole in memory: larger than one worker's memory limit of --worker-mb), on a cluster of 1
   worker and then of 2; the time ratio is printed.
2. Against dask.array.mean, on the 2-worker cluster and the same persisted --compare-mb array: time
   and the worst error in fp32 ulps against a math.fsum reference (a correctly rounded fp64 sum,
   divided once: within 2^-26 ulp of the exact fp32 mean), over axis 0 and over every axis.

With ``--before TREE`` (another checkout, e.g. ``git archive <rev> gpu_mean opencl_kernels | tar -x
-C TREE``) only a before/after comparison runs: its ``gpu_mean`` is imported as ``gpu_mean_before``
here and in the workers, and on one 2-worker cluster, over one persisted --compare-mb array, rounds
take turns between gpu_mean.dask before, after and Dask's own numpy reductions (each first in turn):
``reduce_mean`` over axis 0 and over every axis against ``dask.array.mean``, and ``mean(a, b)`` of
the array's two halves against ``dask.array.stack([a, b]).mean(axis=0)`` and ``(a + b) / 2`` (the
element-wise results are persisted on the workers, not gathered).

    python tools/bench_dask.py --before /tmp/before25 --device opencl --compare-mb 2048 --repeat 5

``--wide`` (issue 43): on one 2-worker cluster, a persisted float32 array of many outputs (default
(16384, 32768) in chunks of (2048, 32768), 2 GiB) reduced over axis 0, axis 1 and all axes, on normal
and on centered data (each chunk minus its own mean over the reduced axes: every output's exact
mean a rounding residue), and the tall (rows, 16) array of the same bytes over axis 0; rounds take
turns between gpu_mean.dask (and, with --before, the other checkout's) and dask.array.mean; first
the bytes each chunk's partial sends per output.

    python tools/bench_dask.py --wide --before /tmp/before43 --device opencl --worker-mb 10240 --repeat 3
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np


def _block(block_info=None, n_cols=16):
    # deterministic per block, so every cluster reduces the same data
    loc = block_info[None]["array-location"]
    rng = np.random.default_rng(loc[0][0])
    return rng.random((loc[0][1] - loc[0][0], n_cols), dtype=np.float32)


def make_array(mb: int, chunk_mb: int, n_cols: int, cuda: bool):
    import dask.array as da
    rows = mb * 2**20 // (4 * n_cols)
    chunk_rows = chunk_mb * 2**20 // (4 * n_cols)
    x = da.map_blocks(_block, n_cols=n_cols, chunks=(da.core.normalize_chunks(chunk_rows, (rows,))[0], (n_cols,)),
                      dtype=np.float32, meta=np.empty((0, 0), np.float32))
    if cuda:
        import cupy
        x = x.map_blocks(cupy.asarray, dtype=np.float32, meta=cupy.empty((0, 0), np.float32))
    return x


def cluster(n_workers: int, worker_mb: int, cuda: bool):
    if cuda:
        from dask_cuda import LocalCUDACluster  # one worker per visible GPU
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n_workers)), dashboard_address=None)
    from distributed import LocalCluster
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                        memory_limit=f"{worker_mb}MiB")


def timed(client, lazy, repeat: int):
    times, res = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        res = client.compute(lazy, sync=True)
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), res


def to_host(x):
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def worst_ulp(got, ref64) -> float:
    got = to_host(got).astype(np.float64).ravel()
    ref = np.asarray(ref64, np.float64).ravel()
    return float(np.max(np.abs(got - ref) / np.spacing(ref.astype(np.float32)).astype(np.float64)))


def load_before(tree: str):
    """``tree``'s gpu_mean as the package ``gpu_mean_before``, here and in worker processes started
    after this (they inherit PYTHONPATH)."""
    d = tempfile.mkdtemp()
    os.symlink(os.path.join(os.path.abspath(tree), "gpu_mean"), os.path.join(d, "gpu_mean_before"))
    sys.path.insert(0, d)
    os.environ["PYTHONPATH"] = os.pathsep.join([d] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                      if p])
    import gpu_mean_before.dask
    return gpu_mean_before.dask


def before_after(a) -> int:
    """gpu_mean.dask before and after against Dask's numpy reductions, interleaved on one cluster."""
    import dask.array as da
    import distributed
    from distributed import Client

    from gpu_mean import dask as gmd
    old = load_before(a.before)
    with cluster(2, a.worker_mb, False) as c, Client(c) as client:
        y = make_array(a.compare_mb, a.chunk_mb, 16, False).persist()
        distributed.wait(y)
        half = y.numblocks[0] // 2 * y.chunks[0][0]
        xa, xb = y[:half], y[half:2 * half]
        print(f"  {y.shape} float32 = {a.compare_mb} MiB in {y.numblocks[0]} chunks of {a.chunk_mb} MiB, persisted "
              f"on 2 worker processes (1 thread each, memory limit {a.worker_mb} MiB); mean(a, b) over its two "
              f"halves {xa.shape}; device {a.device!r}; best and median of {a.repeat} interleaved rounds")
        cases = {}
        for what, axes in (("axis 0", [0]), ("all axes", None)):
            ax = None if axes is None else tuple(axes)
            cases[f"reduce {what}"] = {
                "before": old.reduce_mean(y, axes, keepdims=False, device=a.device),
                "after": gmd.reduce_mean(y, axes, keepdims=False, device=a.device),
                "dask.array.mean": da.mean(y, axis=ax),
                "ref": da.mean(y, axis=ax, dtype=np.float64),
            }
        cases["mean(a, b)"] = {
            "before": old.mean(xa, xb, device=a.device),
            "after": gmd.mean(xa, xb, device=a.device),
            "dask.array.mean": da.stack([xa, xb]).mean(axis=0),
            "(a + b) / 2": (xa + xb) / 2,
        }
        refs = {}

        def run(case, name, lazy):
            if case.startswith("reduce"):
                return client.compute(lazy, sync=True)
            kept = client.persist(lazy)     # element-wise: computed where the chunks lie, then dropped
            distributed.wait(kept)
            del kept
            return None

        times = {(case, name): [] for case, runs in cases.items() for name in runs if name != "ref"}
        for case, runs in cases.items():           # warm up: imports, compiles, pools
            if "ref" in runs:
                refs[case] = np.asarray(run(case, "ref", runs["ref"]))
            for name, lazy in runs.items():
                res = run(case, name, lazy) if name != "ref" else None
                if res is not None:
                    print(f"    {case:15s} {name:16s} worst error {worst_ulp(res, refs[case]):6.2f} fp32 ulp "
                          "(against a float64 dask.array.mean)")
        for r in range(a.repeat):
            for case, runs in cases.items():
                names = [n for n in runs if n != "ref"]
                for name in names[r % len(names):] + names[:r % len(names)]:   # each goes first in turn
                    t = time.perf_counter()
                    run(case, name, runs[name])
                    times[(case, name)].append(time.perf_counter() - t)
        print(f"  {'':15s} {'':16s} {'best s':>8s} {'median s':>9s} {'GB/s':>6s} {'vs dask.array.mean':>19s}")
        nbytes = y.nbytes
        for case, runs in cases.items():
            base = min(times[(case, "dask.array.mean")])
            for name in runs:
                if name != "ref":
                    ts = times[(case, name)]
                    print(f"  {case:15s} {name:16s} {min(ts):8.3f} {statistics.median(ts):9.3f} "
                          f"{nbytes / min(ts) / 1e9:6.2f} {base / min(ts):18.2f}x")
    return 0


def _wide_block(block_info=None, n_cols=32768, kind="normal", axis=None):
    """A block of normal values, deterministic per block; ``centered``: minus the block's own mean over
    ``axis`` (the chunking keeps every reduced axis but axis 0 whole, so over axis 1 every output's
    mean is a rounding residue; over axis 0 and all axes each chunk's is)."""
    loc = block_info[None]["array-location"]
    rows = loc[0][1] - loc[0][0]
    x = np.random.default_rng(loc[0][0]).standard_normal((rows, loc[1][1] - loc[1][0]))
    if kind == "centered":
        x -= x.mean(axis=axis, keepdims=True)
    return x.astype(np.float32)


def partial_bytes(mod, block, axes, device) -> float:
    """Bytes one chunk's partial sends to the next step, per output (pickled, as Dask ships it)."""
    import pickle
    p = mod.partials.chunk_sum(block, axes, device=device)
    n_out = block.size // math.prod(block.shape[d] for d in axes)
    return len(pickle.dumps(p, protocol=5)) / n_out


def many_outputs(a) -> int:
    """Issue 43's benchmark: gpu_mean.dask before and after against Dask's own numpy mean, interleaved
    on one 2-worker cluster, over axis 0, axis 1 and all axes of a persisted float32 array of many
    outputs, on normal and centered data, and over axis 0 of the tall (rows, 16) array."""
    import dask.array as da
    import distributed
    from distributed import Client

    from gpu_mean import dask as gmd
    old = load_before(a.before) if a.before else None
    rows, cols = a.wide_shape
    crow = a.wide_chunk_rows
    nbytes = rows * cols * 4
    print(f"  ({rows}, {cols}) float32 = {nbytes / 2**30:.2f} GiB in chunks of ({crow}, {cols}), persisted on 2 "
          f"worker processes (1 thread each); device {a.device!r}; best and median of {a.repeat} interleaved rounds")
    impls = {"after": gmd} | ({"before": old} if old else {})
    block = _wide_block({None: {"array-location": [(0, crow), (0, cols)]}}, cols)
    for axes in ((0,), (1,), (0, 1)):
        sizes = "  ".join(f"{name} {partial_bytes(mod, block, axes, a.device):8.1f}" for name, mod in impls.items())
        print(f"  bytes per output of one chunk's partial, axes {axes}: {sizes}")
    cases = []
    for kind in a.kinds.split(","):
        for axes in ((0,), (1,), None):
            cases.append((f"{kind:8s} axes {str(axes or 'all'):5s}", (rows, cols), (crow, cols), kind, axes))
    if a.tall:
        cases.append(("normal   tall axis 0", (nbytes // 64, 16), (nbytes // 64 // 8, 16), "normal", (0,)))
    with cluster(2, a.worker_mb, False) as c, Client(c) as client:
        print(f"  {'case':26s} {'run':16s} {'best s':>8s} {'median s':>9s} {'GB/s':>6s} {'vs dask':>8s}")
        for name, shape, chunks, kind, axes in cases:
            ax = 0 if axes == (0,) else 1 if axes == (1,) else None
            y = da.map_blocks(_wide_block, n_cols=shape[1], kind=kind, axis=ax,
                              chunks=da.core.normalize_chunks(chunks, shape), dtype=np.float32,
                              meta=np.empty((0, 0), np.float32)).persist()
            distributed.wait(y)
            runs = {f"gpu_mean {n}": m.reduce_mean(y, axes, keepdims=False, device=a.device) for n, m in impls.items()}
            runs["dask.array.mean"] = da.mean(y, axis=axes)
            times = {n: [] for n in runs}
            for lz in runs.values():
                client.compute(lz, sync=True)       # warm up: imports, compiles
            names = list(runs)
            for r in range(a.repeat):
                for n in names[r % len(names):] + names[:r % len(names)]:
                    t = time.perf_counter()
                    client.compute(runs[n], sync=True)
                    times[n].append(time.perf_counter() - t)
            base = min(times["dask.array.mean"])
            for n, ts in times.items():
                gbs = y.nbytes / min(ts) / 1e9
                print(f"  {name:26s} {n:16s} {min(ts):8.3f} {statistics.median(ts):9.3f} {gbs:6.2f} "
                      f"{base / min(ts):7.2f}x", flush=True)
            del y
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="gpu_mean device on every worker (default: cpu)")
    ap.add_argument("--stream-mb", type=int, default=1024)
    ap.add_argument("--worker-mb", type=int, default=512, help="memory limit per worker (not with --cuda)")
    ap.add_argument("--compare-mb", type=int, default=256)
    ap.add_argument("--chunk-mb", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cuda", action="store_true", help="dask-cuda LocalCUDACluster and CuPy chunks")
    ap.add_argument("--before", help="another checkout: compare its gpu_mean.dask with this one's, interleaved")
    ap.add_argument("--wide", action="store_true", help="issue 43's benchmark: many outputs, every axis, normal and "
                    "centered data, the tall (rows, 16) array; with --before, before and after")
    ap.add_argument("--wide-shape", type=int, nargs=2, default=(16384, 32768))
    ap.add_argument("--wide-chunk-rows", type=int, default=2048)
    ap.add_argument("--kinds", default="normal,centered")
    ap.add_argument("--tall", action=argparse.BooleanOptionalAction, default=True)
    a = ap.parse_args()

    import dask
    import dask.array as da
    import distributed
    from distributed import Client

    from gpu_mean import dask as gmd

    print(f"bench_dask: {platform.node()} {platform.machine()}, {platform.python_version()}, dask {dask.__version__}, "
          f"distributed {distributed.__version__}, device {a.device!r}, chunks {a.chunk_mb} MiB, min/median of "
          f"{a.repeat}")
    if a.wide:
        return many_outputs(a)
    if a.before:
        return before_after(a)
    x = make_array(a.stream_mb, a.chunk_mb, 16, a.cuda)
    lazy = gmd.reduce_mean(x, [0], keepdims=False, device=a.device)
    t = {}
    for n in (1, 2):
        with cluster(n, a.worker_mb, a.cuda) as c, Client(c) as client:
            client.compute(gmd.reduce_mean(x[: x.chunks[0][0] * n], [0], device=a.device), sync=True)  # warm up
            t[n] = timed(client, lazy, a.repeat)
            limit = "" if a.cuda else f", memory limit {a.worker_mb} MiB per worker"
            print(f"  scaling: reduce_mean axis 0 of {x.shape} float32 = {a.stream_mb} MiB in {x.numblocks[0]} "
                  f"chunks, {n} worker(s){limit}: {t[n][0]:.3f} s min, {t[n][1]:.3f} s median")
    print(f"  scaling: 1 worker / 2 workers = {t[1][0] / t[2][0]:.2f}x (min), {t[1][1] / t[2][1]:.2f}x (median)")

    with cluster(2, max(a.worker_mb, a.compare_mb), a.cuda) as c, Client(c) as client:
        y = make_array(a.compare_mb, a.chunk_mb, 16, a.cuda).persist()
        distributed.wait(y)
        # the same blocks made again here: gathering them through one worker would pass its memory limit
        host = make_array(a.compare_mb, a.chunk_mb, 16, False).compute(scheduler="synchronous")
        ref_cols = [math.fsum(host[:, j].tolist()) / host.shape[0] for j in range(host.shape[1])]
        ref_all = math.fsum(math.fsum(host[i:i + 2**20].ravel().tolist()) for i in range(0, host.shape[0], 2**20))
        ref_all /= host.size   # fsum of fsums: within 2^-52 relative, still far below an fp32 ulp
        print(f"  compare: {y.shape} float32 = {a.compare_mb} MiB persisted on 2 workers, {y.numblocks[0]} chunks")
        for what, axes, ref in (("axis 0", [0], ref_cols), ("all axes", None, [ref_all])):
            runs = {
                "gpu_mean.dask.reduce_mean": gmd.reduce_mean(y, axes, keepdims=False, device=a.device),
                "dask.array.mean": da.mean(y, axis=None if axes is None else tuple(axes)),
                "dask.array.mean(dtype=f8)": da.mean(y, axis=None if axes is None else tuple(axes),
                                                     dtype=np.float64).astype(np.float32),
            }
            for name, lz in runs.items():
                client.compute(lz, sync=True)   # warm up: compile, imports
                tmin, tmed, res = timed(client, lz, a.repeat)
                print(f"    {what:8s} {name:27s} {tmin:7.3f} s min {tmed:7.3f} s median   worst error "
                      f"{worst_ulp(res, ref):10.2f} fp32 ulp")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
