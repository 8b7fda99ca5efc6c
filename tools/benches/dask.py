"""gpu_mean.dask on a LocalCluster against dask.array.mean, and 1 worker against 2.

Each process (one per tree, case and round) starts its own LocalCluster of worker processes (one
thread each, memory limit --worker-mb; with --cuda a dask-cuda LocalCUDACluster and CuPy chunks),
checks that every worker imported the tree under test's gpu_mean (the workers inherit the process's
PYTHONPATH, the tree first; another gpu_mean is an error), and times its case there: gpu_mean.dask
and Dask's own reductions take turns within the process (benches/timing.py), each first in turn,
after one untimed run of each (imports, compiles), so each ratio comes from one cluster's same
seconds. Arrays are float32, made chunk by chunk on the workers from a seed per chunk (every tree
and round reduces the same values).

Cases without --wide:

* scaling: reduce_mean over axis 0 of a (rows, 16) array of --stream-mb, generated on the workers
  and never persisted (larger than one worker's memory limit), on a cluster of 1 worker and then
  of 2 (two clusters in turn, not interleaved). Figures: 1_worker_s, 2_workers_s, scaling
  (1_worker_s / 2_workers_s).
* compare: on 2 workers, a (rows, 16) array of --compare-mb persisted: reduce_mean over axis 0 and
  over every axis against dask.array.mean and dask.array.mean(dtype=float64), with each one's worst
  error in fp32 ulps against a float64 dask.array.mean (within 2^-26 ulp of the exact mean at these
  sizes); and mean(a, b) of the array's two halves against dask.array.stack([a, b]).mean(axis=0)
  and (a + b) / 2 (the results persisted on the workers, not gathered).

Cases with --wide (issue 43): on 2 workers, a (16384, 32768) array (--wide-shape) in chunks of
(2048, 32768) (--wide-chunk-rows) persisted, reduced over axis 0, axis 1 and all axes, on normal
and centered data (--kinds; centered: each chunk minus its own mean over the reduced axes, so every
output's exact mean is a rounding residue), and the tall (rows, 16) array of the same bytes in 8
chunks over axis 0 (--no-tall to leave it out). Also partial_B/output: the bytes one chunk's
partial sends per output (pickled, as Dask ships it).

Figures per timed row: gm_s and dask_s (the best of --repeat, seconds), gm_median_s, dask_median_s,
GB/s (ours: the array's bytes over gm_s) and vs_dask = dask_s / gm_s, the old tools/bench_dask.py's
"vs dask" column: above 1.0, gpu_mean.dask is faster than dask.array.mean.

    python tools/bench.py dask --device opencl --stream-mb 1024 --worker-mb 384
    python tools/bench.py dask --before HEAD~1 --device opencl --compare-mb 2048 --repeat 5
    python tools/bench.py dask --wide --before HEAD~1 --device opencl --worker-mb 10240 --repeat 3
    python tools/bench.py dask --cuda --device cuda
    python tools/bench.py dask --pairs --before HEAD~1 --device opencl

--pairs: the chunk step alone, no cluster: two processes at once (as two workers), each reducing its own
--wide chunk over axis 0 and over axis 1, gpu_mean.dask's step and numpy's float32 sum in turns
(gm_s, numpy_s: a process's median seconds a chunk, the lowest of four: two runs of two processes;
vs_numpy = numpy_s / gm_s).

A process costs about 3 s on a 2-core machine before its case (Python, Dask, a cluster of 2), plus
its arrays: made, persisted, and each run --repeat + 1 times.
"""
from __future__ import annotations

import math
import os
import pickle
from pathlib import Path

ROUNDS = 3
FIGURES = {"gm_s": "lower", "gm_median_s": "lower", "GB/s": "higher", "vs_dask": "higher", "vs_add": "higher",
           "vs_numpy": "higher",
           "1_worker_s": "lower", "2_workers_s": "lower", "scaling": "higher"}
WIDE_AXES = {"axis 0": (0,), "axis 1": (1,), "all axes": None}


def add_arguments(ap) -> None:
    import argparse
    ap.add_argument("--device", default="cpu", help="gpu_mean device on every worker (default: cpu)")
    ap.add_argument("--stream-mb", type=int, default=1024, help="MiB of the scaling case's array (default 1024)")
    ap.add_argument("--worker-mb", type=int, default=512, help="memory limit per worker, MiB (not with --cuda; "
                    "default 512)")
    ap.add_argument("--compare-mb", type=int, default=256, help="MiB of the compare case's array (default 256)")
    ap.add_argument("--chunk-mb", type=int, default=32, help="MiB a chunk, without --wide (default 32)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each, taking turns (default 3)")
    ap.add_argument("--cuda", action="store_true", help="dask-cuda LocalCUDACluster and CuPy chunks (without --wide)")
    ap.add_argument("--wide", action="store_true", help="issue 43's cases: many outputs, every axis, normal and "
                    "centered data, the tall (rows, 16) array")
    ap.add_argument("--wide-shape", type=int, nargs=2, default=(16384, 32768), metavar=("ROWS", "COLS"))
    ap.add_argument("--wide-chunk-rows", type=int, default=2048)
    ap.add_argument("--kinds", default="normal,centered", help="--wide data kinds (default %(default)s)")
    ap.add_argument("--tall", action=argparse.BooleanOptionalAction, default=True, help="--wide: the tall case")
    ap.add_argument("--only", default="", help="only the cases whose name contains this text (e.g. 'axis 0')")
    ap.add_argument("--pairs", action="store_true", help="the chunk step alone in two processes at once, no "
                    "cluster: gpu_mean.dask's against numpy's float32 sum over each axis of a --wide chunk")


def cases(args) -> list:
    if args.pairs:
        return [f"pairs {axes}" for axes in ("axis 0", "axis 1")]
    if not args.wide:
        out = ["scaling", "compare"]
    else:
        out = [f"{kind} {axes}" for kind in args.kinds.split(",") for axes in WIDE_AXES]
        out += ["tall axis 0"] if args.tall else []
    picked = [c for c in out if args.only in c]
    if not picked:
        raise SystemExit(f"dask: no case contains {args.only!r}; the cases: {', '.join(out)}")
    return picked


# -- the cluster, and the tree its workers import ------------------------------------------------------

def _tree() -> Path:
    """The tree under test: the harness names it in BENCH_TREE; else the one this process imported."""
    if os.environ.get("BENCH_TREE"):
        return Path(os.environ["BENCH_TREE"]).resolve()
    import gpu_mean
    return Path(gpu_mean.__file__).resolve().parent.parent


def _gpu_mean_file() -> str:
    import gpu_mean
    return gpu_mean.__file__


def cluster(n_workers: int, worker_mb: int, cuda: bool):
    """A LocalCluster of worker processes that import the tree under test: its path first on the
    PYTHONPATH they inherit (os.environ, as the harness set it) and then tools/ (this module's package,
    whose block functions they unpickle)."""
    tools = str(Path(__file__).resolve().parent.parent)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in (str(_tree()), tools)]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(_tree()), tools, *rest])
    if cuda:
        from dask_cuda import LocalCUDACluster  # one worker per visible GPU
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n_workers)), dashboard_address=None)
    from distributed import LocalCluster
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                        memory_limit=f"{worker_mb}MiB")


def check_workers(client) -> None:
    """Every worker's gpu_mean lies in the tree under test, or the run fails saying where it came from."""
    tree = _tree()
    files = client.run(_gpu_mean_file)
    bad = {w: f for w, f in files.items() if not Path(f).resolve().is_relative_to(tree)}
    if bad or not files:
        raise RuntimeError(f"dask workers imported gpu_mean from {sorted(set(bad.values())) or 'nowhere'}, not from "
                           f"the tree under test {tree} (their PYTHONPATH: {os.environ.get('PYTHONPATH')!r})")


def timed(client, runs: dict, repeats: int, persist=False) -> dict:
    """{name: [seconds, one per repeat]}: the lazy results of ``runs`` computed (or persisted on the
    workers and dropped) in turns, each first in turn, after one untimed run of each."""
    import distributed

    from benches.timing import interleaved

    def go(lazy):
        if persist:
            kept = client.persist(lazy)
            distributed.wait(kept)
            del kept
        else:
            client.compute(lazy, sync=True)
    return interleaved({n: (lambda lz=lz: go(lz)) for n, lz in runs.items()}, repeats, warmup=1)


def figures(t: dict, nbytes: int, ours: str = "gm", theirs: str = "dask") -> dict:
    import statistics
    gm, dk = min(t[ours]), min(t[theirs])
    return {"gm_s": gm, "gm_median_s": statistics.median(t[ours]), "dask_s": dk,
            "dask_median_s": statistics.median(t[theirs]), "GB/s": nbytes / gm / 1e9, "vs_dask": dk / gm}


# -- the arrays ----------------------------------------------------------------------------------------

def _block(block_info=None, n_cols=16):
    # deterministic per block, so every cluster reduces the same data
    import numpy as np
    loc = block_info[None]["array-location"]
    rng = np.random.default_rng(loc[0][0])
    return rng.random((loc[0][1] - loc[0][0], n_cols), dtype=np.float32)


def make_array(mb: int, chunk_mb: int, cuda: bool, n_cols: int = 16):
    import dask.array as da
    import numpy as np
    rows = mb * 2**20 // (4 * n_cols)
    chunk_rows = max(1, chunk_mb * 2**20 // (4 * n_cols))
    x = da.map_blocks(_block, n_cols=n_cols, chunks=(da.core.normalize_chunks(chunk_rows, (rows,))[0], (n_cols,)),
                      dtype=np.float32, meta=np.empty((0, 0), np.float32))
    if cuda:
        import cupy
        x = x.map_blocks(cupy.asarray, dtype=np.float32, meta=cupy.empty((0, 0), np.float32))
    return x


def _wide_block(block_info=None, n_cols=32768, kind="normal", axis=None):
    """A block of normal values, deterministic per block; ``centered``: minus the block's own mean over
    ``axis`` (the chunking keeps every reduced axis but axis 0 whole, so over axis 1 every output's
    mean is a rounding residue; over axis 0 and all axes each chunk's is)."""
    import numpy as np
    loc = block_info[None]["array-location"]
    rows = loc[0][1] - loc[0][0]
    x = np.random.default_rng(loc[0][0]).standard_normal((rows, loc[1][1] - loc[1][0]))
    if kind == "centered":
        x -= x.mean(axis=axis, keepdims=True)
    return x.astype(np.float32)


def to_host(x):
    import numpy as np
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def worst_ulp(got, ref64) -> float:
    import numpy as np
    got = to_host(got).astype(np.float64).ravel()
    ref = to_host(ref64).astype(np.float64).ravel()
    return float(np.max(np.abs(got - ref) / np.spacing(ref.astype(np.float32)).astype(np.float64)))


# -- the cases -----------------------------------------------------------------------------------------

def run(args, case: str) -> dict:
    from distributed import Client
    if case.startswith("pairs"):
        return pairs(args, case)
    if case == "scaling":
        return scaling(args)
    n_workers = 2
    with cluster(n_workers, max(args.worker_mb, 0 if args.wide else args.compare_mb), args.cuda and not args.wide) \
            as c, Client(c) as client:
        check_workers(client)
        return compare(args, client) if case == "compare" else wide(args, client, case)


def scaling(args) -> dict:
    from distributed import Client

    from gpu_mean import dask as gmd
    x = make_array(args.stream_mb, args.chunk_mb, args.cuda)
    lazy = gmd.reduce_mean(x, [0], keepdims=False, device=args.device)
    best = {}
    for n in (1, 2):
        with cluster(n, args.worker_mb, args.cuda) as c, Client(c) as client:
            check_workers(client)
            client.compute(gmd.reduce_mean(x[: x.chunks[0][0] * n], [0], device=args.device), sync=True)  # warm up
            best[n] = min(timed(client, {"gm": lazy}, args.repeat)["gm"])
    row = f"scaling reduce_mean axis 0 {x.shape} ({args.stream_mb} MiB, {x.numblocks[0]} chunks), 1 worker / 2"
    return {row: {"1_worker_s": best[1], "2_workers_s": best[2], "scaling": best[1] / best[2]}}


def compare(args, client) -> dict:
    import dask.array as da
    import distributed
    import numpy as np

    from gpu_mean import dask as gmd
    y = make_array(args.compare_mb, args.chunk_mb, args.cuda).persist()
    distributed.wait(y)
    out = {}
    for what, axes in (("axis 0", [0]), ("all axes", None)):
        ax = None if axes is None else tuple(axes)
        runs = {"gm": gmd.reduce_mean(y, axes, keepdims=False, device=args.device), "dask": da.mean(y, axis=ax),
                "dask_f8": da.mean(y, axis=ax, dtype=np.float64).astype(np.float32)}
        ref = client.compute(da.mean(y, axis=ax, dtype=np.float64), sync=True)
        t = timed(client, runs, args.repeat)
        f = figures(t, y.nbytes) | {"dask_f8_s": min(t["dask_f8"])}
        for name, lazy in runs.items():
            f[f"{name}_ulp"] = worst_ulp(client.compute(lazy, sync=True), ref)
        out[f"reduce_mean {what} {y.shape} ({args.compare_mb} MiB, {y.numblocks[0]} chunks)"] = f
    half = y.numblocks[0] // 2 * y.chunks[0][0]
    xa, xb = y[:half], y[half:2 * half]
    if half:
        t = timed(client, {"gm": gmd.mean(xa, xb, device=args.device), "dask": da.stack([xa, xb]).mean(axis=0),
                           "add": (xa + xb) / 2}, args.repeat, persist=True)
        f = figures(t, xa.nbytes * 2)
        f |= {"add_s": min(t["add"]), "vs_add": min(t["add"]) / f["gm_s"]}
        out[f"mean(a, b) of 2 x {xa.shape}, against dask stack().mean(0) and (a + b) / 2"] = f
    return out


def _pair_worker(which: str, axes: tuple, device: str, rows: int, cols: int, repeat: int, barrier, out) -> None:
    import time

    import numpy as np

    from gpu_mean.dask import partials
    x = np.random.default_rng(os.getpid()).standard_normal((rows, cols)).astype(np.float32)
    step = {"np": lambda: np.sum(x, axis=axes, dtype=np.float32),
            "gm": lambda: partials.chunk_sum(x, axes, device=device)}[which]
    step()
    times = []
    for _ in range(repeat):
        barrier.wait()                      # both processes start each chunk together
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    out.put(sorted(times)[len(times) // 2])


def pairs(args, case: str) -> dict:
    """The chunk step alone, as a 2-worker cluster runs it: two processes at once, each reducing its own
    (--wide-chunk-rows, columns) float32 chunk, gpu_mean.dask's (partials.chunk_sum) and numpy's float32
    sum (Dask's mean_chunk) in turns, under Dask's malloc setting; the median seconds a chunk."""
    import multiprocessing as mp
    axes = WIDE_AXES[case.split(" ", 1)[1]]
    os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", "65536")     # as distributed's nanny starts workers
    ctx = mp.get_context("spawn")
    res = {}
    for _ in range(2):
        for which in ("np", "gm"):
            out, barrier = ctx.Queue(), ctx.Barrier(2)
            procs = [ctx.Process(target=_pair_worker, args=(which, axes or (0, 1), args.device, args.wide_chunk_rows,
                                                            args.wide_shape[1], 4 * args.repeat, barrier, out))
                     for _ in range(2)]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
            res.setdefault(which, []).extend(out.get() for _ in procs)
    gm, npy = min(res["gm"]), min(res["np"])
    row = f"{case}: a ({args.wide_chunk_rows}, {args.wide_shape[1]}) float32 chunk in each of two processes at once"
    return {row: {"gm_s": gm, "numpy_s": npy, "vs_numpy": npy / gm}}


def partial_bytes(block, axes, device) -> float:
    """Bytes one chunk's partial sends to the next step, per output (pickled, as Dask ships it)."""
    from gpu_mean.dask import partials
    p = partials.chunk_sum(block, axes, device=device)
    n_out = block.size // math.prod(block.shape[d] for d in axes)
    return len(pickle.dumps(p, protocol=5)) / n_out


def wide(args, client, case: str) -> dict:
    import dask.array as da
    import distributed
    import numpy as np

    from gpu_mean import dask as gmd
    rows, cols = args.wide_shape
    crow = args.wide_chunk_rows
    kind, what = case.split(" ", 1)
    if kind == "tall":
        n = rows * cols // 16
        shape, chunks, kind, axes = (n, 16), (max(1, n // 8), 16), "normal", (0,)
    else:
        shape, chunks, axes = (rows, cols), (crow, cols), WIDE_AXES[what]
    ax = 0 if axes == (0,) else 1 if axes == (1,) else None
    y = da.map_blocks(_wide_block, n_cols=shape[1], kind=kind, axis=ax, chunks=da.core.normalize_chunks(chunks, shape),
                      dtype=np.float32, meta=np.empty((0, 0), np.float32)).persist()
    distributed.wait(y)
    t = timed(client, {"gm": gmd.reduce_mean(y, axes, keepdims=False, device=args.device),
                       "dask": da.mean(y, axis=axes)}, args.repeat)
    first = _wide_block({None: {"array-location": [(0, y.chunks[0][0]), (0, shape[1])]}}, shape[1], kind, ax)
    row = f"{case} {shape} in chunks of {y.chunks[0][0]} rows"
    return {row: figures(t, y.nbytes) | {"partial_B/output": partial_bytes(first, axes or (0, 1), args.device)}}
