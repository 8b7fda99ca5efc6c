"""gpu_mean.dask on a real dask.distributed LocalCluster with two worker processes.

Every result is compared with gm.reduce_mean / gm.mean on one device (the numpy reference device):
bit-exact for integers and element-wise Mean, within 1 ulp for float reductions, plus an exact
rational oracle for some. Chunkings are random, uneven and include size-1 chunks; small
``split_every`` values force Dask's intermediate combine steps.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
import warnings
import zlib

import numpy as np
import oracle
import pytest

pytest.importorskip("dask.array")
pytest.importorskip("distributed")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import gpu_mean as gm  # noqa: E402
from gpu_mean import backends  # noqa: E402
from gpu_mean import dask as gmd  # noqa: E402
from gpu_mean.dask import partials  # noqa: E402
from gpu_mean.frontends import arrays, pool  # noqa: E402
from gpu_mean.runtime.objects import Buffer  # noqa: E402

SHAPE = (5, 4, 3, 6)
ALL_AXES = [c for r in range(5) for c in itertools.combinations(range(4), r)]   # 16 combinations


def _device_params():
    found, reason = backends._discover("opencl")
    return ["cpu", pytest.param("opencl", marks=[] if found else pytest.mark.skip(reason=f"no OpenCL: {reason}"))]


@pytest.fixture(scope="module")
def client():
    # GPU_MEAN_DEVICE in the workers' environment is what device=None resolves to on a worker
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"GPU_MEAN_DEVICE": "cpu"}) as cluster, Client(cluster) as c:
        yield c


def random_chunks(rng, n):
    """Uneven chunks of an axis of length n, size-1 chunks likely."""
    out = []
    while sum(out) < n:
        out.append(min(int(rng.choice([1, 2, n])), n - sum(out)))
    return tuple(out)


def positive(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return (rng.random(shape) * 100 + 1).astype(dtype)   # same-signed: the 1-ulp promise holds
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)   # extremes: exactness


def max_ulp(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    return max((oracle.ulp_distance(g, w, want.dtype) for g, w in zip(got.ravel(), want.ravel())), default=0)


def check_close(got, want):
    if want.dtype.kind == "f":
        assert max_ulp(got, want) <= 1
    else:
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("device", _device_params())
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32])
def test_every_axis_combination_matches_one_device(client, device, dtype):
    """All 16 axis sets of a 4-D array (the empty set: every axis), random chunkings, keepdims both
    ways, negative axes, fan-in 2 (several combine levels) and Dask's default, in one compute. The
    default run takes one float and one integer type per device (tests/conftest.py, DASK_AXES_KEPT)."""
    rng = np.random.default_rng(zlib.crc32(f"{device} {np.dtype(dtype).name}".encode()))   # same every run
    x = positive(rng, SHAPE, dtype)
    lazies, wants = [], []
    for i, axes in enumerate(ALL_AXES):
        dx = da.from_array(x, chunks=tuple(random_chunks(rng, n) for n in SHAPE))
        keep = bool(i % 2)
        axes_arg = [a - 4 if rng.random() < 0.5 else a for a in axes]
        lazies.append(gmd.reduce_mean(dx, axes_arg, keepdims=keep, device=device, split_every=[2, None][i % 3 == 0]))
        wants.append(gm.reduce_mean(x, axes, keepdims=keep, device="cpu"))
    for lazy, got, want in zip(lazies, client.compute(lazies, sync=True), wants):
        assert type(lazy._meta) is np.ndarray and lazy.shape == want.shape and lazy.dtype == want.dtype
        check_close(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_floats_within_one_ulp_of_the_exact_mean(client, dtype):
    """A long reduced axis in many uneven chunks against the exact rational mean, rounded once."""
    rng = np.random.default_rng(3)
    x = (rng.random((3, 4000)) * 7 + 0.5).astype(dtype)
    cuts = np.unique(np.concatenate([[0, 4000], rng.integers(1, 4000, 150)]))
    dx = da.from_array(x, chunks=((1, 2), tuple(np.diff(cuts).tolist())))   # ~150 uneven chunks
    # fan-in 3: a deep combine tree; 1000: one aggregate folds every partial in turn
    lazies = [gmd.reduce_mean(dx, [1], keepdims=False, device="cpu", split_every=k) for k in (3, 1000)]
    for got in dask.compute(*lazies):
        for row, g in zip(oracle.exact_sum_rows(x.astype(np.float64)), got):
            want = oracle.round_fraction(row / x.shape[1], dtype)
            assert oracle.ulp_distance(g, want, dtype) <= 1


@pytest.mark.parametrize("device", _device_params())
def test_integer_mean_is_exact_and_truncates_toward_zero(client, device):
    """Negative totals truncate toward zero once at the end (floor division would be 1 lower)."""
    x = np.array([[-7, 0, 0, 0, 0, 0], [2**31 - 1] * 6, [-2**31] * 5 + [-2**31 + 1]], np.int32)   # -2^31 + 1/6
    dx = da.from_array(x, chunks=(1, (1, 2, 2, 1)))
    got = gmd.reduce_mean(dx, [1], keepdims=False, device=device, split_every=2).compute()
    np.testing.assert_array_equal(got, np.array([-1, 2**31 - 1, -2**31 + 1], np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_broadcasting_mean_across_differently_chunked_inputs(client, dtype):
    rng = np.random.default_rng(11)
    shapes = [(4, 1, 6), (5, 1), (6,), (1, 5, 6)]
    xs = [positive(rng, s, dtype) for s in shapes]
    dxs = [da.from_array(x, chunks=tuple(random_chunks(rng, n) for n in x.shape)) for x in xs]
    # identity, DML ELEMENT_WISE_MEAN and the n-ary mean, in one graph: their keys must not collide
    lazies = [gmd.mean(*dxs[:k], device="cpu") for k in (1, 2, 3, 4)]
    for k, lazy, got in zip((1, 2, 3, 4), lazies, client.compute(lazies, sync=True)):
        want = gm.mean(*xs[:k], device="cpu")
        assert lazy.shape == want.shape and type(lazy._meta) is np.ndarray
        np.testing.assert_array_equal(got, want)   # element-wise Mean is correctly rounded: bit-exact
        assert got.dtype == want.dtype


def test_zero_size_and_empty_axes_follow_gm_reduce_mean(client):
    f = da.zeros((3, 0, 2), dtype=np.float32, chunks=2)
    i = da.zeros((3, 0, 2), dtype=np.int32, chunks=2)
    assert np.isnan(gmd.reduce_mean(f, [1]).compute()).all()
    np.testing.assert_array_equal(gmd.reduce_mean(i, [1], keepdims=False).compute(), np.zeros((3, 2), np.int32))
    assert gmd.reduce_mean(f, [0]).compute().shape == (1, 0, 2)
    x = da.from_array(np.arange(12, dtype=np.int32).reshape(3, 4), chunks=2)
    np.testing.assert_array_equal(gmd.reduce_mean(x, [], noop_with_empty_axes=True).compute(), x.compute())
    assert gmd.reduce_mean(x, [], keepdims=False).compute() == 5
    with pytest.raises(gm.InvalidArgumentError, match="name an axis twice"):
        gmd.reduce_mean(x, [1, -1])
    with pytest.raises(gm.InvalidArgumentError, match="out of range"):
        gmd.reduce_mean(x, [2])
    with pytest.raises(gm.UnsupportedTypeError, match="int16 is not supported"):
        gmd.reduce_mean(x.astype(np.int16))
    with pytest.raises(gm.InvalidArgumentError, match="data types"):
        gmd.mean(x, x.astype(np.uint32))


def test_device_none_is_the_workers_own_and_compiled_once_per_shape(client):
    """device=None resolves on each worker ($GPU_MEAN_DEVICE=cpu in the workers' environment); 48 equal
    chunks (a shape no other test uses) make one launch per worker that ran any, and launch once per chunk.
    INT32 data: the CPU device's float chunks give exact totals with no launch to compile."""
    def reset():
        partials.stats.update(compiled=0, launched=0)
    client.run(reset)
    x = (np.random.default_rng(5).random((48, 3, 10)) * 1e6).astype(np.int32)
    got = gmd.reduce_mean(da.from_array(x, chunks=(1, 3, 10)), [1]).compute()
    np.testing.assert_array_equal(got, gm.reduce_mean(x, [1], device="cpu"))
    stats = client.run(lambda: dict(partials.stats))
    names = client.run(lambda: gm.frontends.functional.get_device(None).name)
    assert all(n == gm.create_device("cpu").name for n in names.values())
    assert sum(s["launched"] for s in stats.values()) == 48
    assert all(s["compiled"] == (1 if s["launched"] else 0) for s in stats.values())


def test_cupy_chunks_stay_cupy_on_the_cuda_device(client):
    cp = pytest.importorskip("cupy")
    found, reason = backends._discover("cuda")
    if not found:
        pytest.skip(f"no CUDA device: {reason}")
    rng = np.random.default_rng(4)
    x, xi = positive(rng, SHAPE, np.float32), positive(rng, SHAPE, np.int32)
    lazies, wants = [], []
    for h in (x, xi):
        dx = da.from_array(h, chunks=(2, 3, 1, 4)).map_blocks(cp.asarray, meta=cp.empty((0,) * 4, h.dtype))
        lazies += [gmd.reduce_mean(dx, [0, 2], device="cuda", split_every=2), gmd.mean(dx, dx[:1], device="cuda")]
        wants += [gm.reduce_mean(h, [0, 2], device="cpu"), gm.mean(h, h[:1], device="cpu")]
    for lazy, got, want in zip(lazies, client.compute(lazies, sync=True), wants):
        assert isinstance(lazy._meta, cp.ndarray) and isinstance(got, cp.ndarray)
        check_close(cp.asnumpy(got), want)


@pytest.mark.parametrize("layout", ["packed", "strided"])
def test_chunks_are_used_in_place_or_through_reused_pooled_buffers(device, monkeypatch, layout):
    """A chunk takes gm.reduce_mean's path: where the device works in host memory a numpy chunk of
    128 KiB or more is bound where it lies (no Buffer.write: no copy; the cpu device at any size),
    elsewhere its bytes are copied
    once into pooled buffers, which the next chunks of its shape reuse; a strided chunk is described
    by its strides, never repacked."""
    made, writes = [], []

    class Spy(arrays.Call):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    write = Buffer.write
    monkeypatch.setattr(partials, "Call", Spy)
    monkeypatch.setattr(Buffer, "write", lambda b, a, offset=0: (writes.append(a.nbytes), write(b, a, offset))[1])
    rng = np.random.default_rng(8)
    bases = [rng.random((256, 512), dtype=np.float32) for _ in range(3)]
    # float chunks give exact totals (Device.exact_partials, test_exact_partials.py), not this path
    bases = [(b * 1e6).astype(np.int32) for b in bases]
    chunks = [b[:, ::2] if layout == "strided" else b[:, :256].copy() for b in bases]
    allocations = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # a device without fp64 sums on the CPU device
        for c in chunks:
            p = partials.chunk_sum(c, (1,), device=device)
            np.testing.assert_allclose(p.hi, c.sum(axis=1, keepdims=True, dtype=np.float64), rtol=1e-12)
            assert p.hi.dtype == (np.int64 if c.dtype == np.int32 else np.float64)
            allocations.append(pool.device_cache(made[-1].dev).pool.allocations)
    assert allocations[0] == allocations[-1]          # the first chunk's launch serves the others
    call = made[0]
    assert all(o.strides == ((512, 2) if layout == "strided" else (256, 1)) for c in made for o in c.ops)
    if call.bridge.host_memory:
        # the cpu device computes from the chunk where it lies (direct); PoCL binds it in place
        assert {c.mode for c in made} <= {"direct", "device", "host in place"} and writes == []
    else:
        assert {c.mode for c in made} == {"host"} and writes == [c.ops[0].span_bytes for c in made]


def test_threads_of_one_worker_share_its_device(device):
    """Dask's threaded scheduler: four threads run chunks of one process on one device at once (no
    lock of gpu_mean.dask's own; the functional path is thread-safe) and every total is exact."""
    rng = np.random.default_rng(12)
    x = rng.integers(-2**31, 2**31, (64, 40000), dtype=np.int64).astype(np.int32)   # 160 KiB chunks: in place
    dx = da.from_array(x, chunks=(1, 40000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = dask.compute(gmd.reduce_mean(dx, [1], device=device, split_every=4), scheduler="threads",
                           num_workers=4)[0]
    np.testing.assert_array_equal(got, gm.reduce_mean(x, [1], device="cpu"))


def test_combining_past_64_bits_stays_exact():
    """A Dask array may sum more than 2^32 INT32 values per output; the 64-bit total then moves to
    Python integers instead of wrapping."""
    big = np.array([2**63 - 2**31, -(2**63) + 5], np.int64)
    p = partials.PartialSum(big, None, 2**32)
    total = partials.combine_sums([[p, p], [p]])
    assert total.count == 3 * 2**32 and [int(v) for v in total.hi] == [3 * int(v) for v in big]
    res = partials.finish(total, np.int32)
    assert res.dtype == np.int32
    assert res.tolist() == [(2**63 - 2**31) // 2**32, -((2**63 - 5) // 2**32)]
    m = partials.PartialSum(np.array([-(2**62)], np.int64), None, 3 * 2**30)   # the two sum to INT64_MIN
    assert partials.finish(partials.add(m, m), np.int32).tolist() == [-(2**63 // (3 * 2**31))]
    u = partials.PartialSum(np.array([2**64 - 1], np.uint64), None, 2**32 + 1)
    assert partials.finish(partials.add(u, u), np.uint32).tolist() == [(2 * (2**64 - 1)) // (2 * (2**32 + 1))]


def test_compensated_combine_keeps_what_float64_adds_lose():
    """hi + lo carries the low bits a plain float64 add drops (1 + 2^-60 - 1 is 2^-60, not 0)."""
    parts = [partials.PartialSum(np.array([v]), None, 1) for v in (1.0, 2.0**-60, -1.0)]
    total = partials.combine_sums(parts)
    assert total.hi[0] + total.lo[0] == 2.0**-60
    inf = partials.combine_sums([partials.PartialSum(np.array([np.inf]), None, 1)] * 2)
    assert partials.finish(inf, np.float32)[0] == np.inf   # an infinite total is not turned into NaN


def test_a_device_without_fp64_sums_float_chunks_itself_exactly():
    """Float chunks on a device without fp64 give the device's exact partials (integer limbs: no
    fp64 needed), the CPU device's digits exactly, with no warning and no CPU fallback."""
    found, reason = backends._discover("opencl")
    if not found:
        pytest.skip(f"no OpenCL: {reason}")
    from gpu_mean.backends import opencl
    from gpu_mean.runtime import exact
    nofp64 = gm.Device(opencl.make_backend(0, allow_fp64=False))
    x = np.random.default_rng(2).random((4, 9)).astype(np.float32)
    before = partials.stats["cpu_fallback"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = partials.chunk_sum(x, (1,), device=nofp64)
        partials.chunk_sum(x.astype(np.int32), (1,), device=nofp64)
    assert not [w for w in caught if "no fp64" in str(w.message)] and partials.stats["cpu_fallback"] == before
    np.testing.assert_array_equal(p.digits, exact.limbs(x, (1,), x.dtype))
    np.testing.assert_array_equal(p.flags, exact.nonfinite_flags(x, (1,)))


def test_import_gpu_mean_does_not_import_dask():
    code = "import sys, gpu_mean as gm, numpy as np; gm.mean(np.ones(2, np.float32)); assert 'dask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "GPU_MEAN_DEVICE": "cpu"})


def test_a_worker_killed_mid_compute_is_replaced_and_the_result_is_right(client, tmp_path):
    """One worker process dies on its third chunk (a marker file makes it happen once in all); the
    nanny restarts it, the scheduler reruns the lost tasks and the partials that died with it."""
    marker = str(tmp_path / "killed")

    def install_killer():
        # runs in each worker; the restarted worker is a fresh process without it
        original, calls = partials.run_sum, [0]

        def run_sum(block, axes, device):
            calls[0] += 1
            if calls[0] == 3:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    pass
                else:
                    os._exit(1)
            return original(block, axes, device)
        partials.run_sum = run_sum

    before = set(client.scheduler_info()["workers"])
    client.run(install_killer)
    x = positive(np.random.default_rng(9), (40, 6, 5), np.int32)
    got = gmd.reduce_mean(da.from_array(x, chunks=(2, 3, 5)), [0, 2], device="cpu", split_every=2).compute()
    assert os.path.exists(marker)
    np.testing.assert_array_equal(got, gm.reduce_mean(x, [0, 2], device="cpu"))
    client.wait_for_workers(2)
    assert set(client.scheduler_info()["workers"]) != before   # one worker really was replaced


def _levels(lazy) -> int:
    """The combine and aggregate levels of a reduction's graph (its layers past the chunks and the input)."""
    return sum(1 for name in lazy.dask.layers if "-partial-" in name or "-aggregate-" in name)


@pytest.mark.parametrize("blocks, axes, levels", [
    ((8, 1), (0,), 1),              # 8 chunks along the reduced axis: the aggregate adds them all
    ((16, 1), (0,), 1),
    ((8, 1), (0, 1), 1),            # Dask's own default (2 a axis) would take 3 levels
    ((4, 4), (0, 1), 1),
    ((17, 1), (0,), 2),             # past the fan-in: levels of 16
    ((300, 1), (0,), 3),
])
def test_the_default_fan_in_adds_a_row_of_chunks_in_one_task(blocks, axes, levels):
    x = da.zeros((blocks[0] * 3, blocks[1] * 5), chunks=(3, 5), dtype=np.float32)
    assert x.numblocks == blocks
    lazy = gmd.reduce_mean(x, list(axes), device="cpu")
    assert _levels(lazy) == levels, (blocks, axes, dict(lazy.dask.layers))
    with dask.config.set(split_every=2):          # the caller's config is Dask's to apply
        assert _levels(gmd.reduce_mean(x, list(axes), device="cpu")) > 1
    assert _levels(gmd.reduce_mean(x, list(axes), device="cpu", split_every=2)) > 1


def test_the_fan_in_keeps_one_tasks_partials_within_the_budget():
    # chunks of 2^22 outputs: a digits partial of 96 bytes an output is 384 MiB, past the 256 MiB a task
    # may hold, so the fan-in falls to Dask's 4 and 8 chunks take two levels
    x = da.zeros((8, 1 << 22), chunks=(1, 1 << 22), dtype=np.float32)
    assert gmd.fan_in(x, (0,)) == 4
    assert _levels(gmd.reduce_mean(x, [0], device="cpu")) == 2
    small = da.zeros((8, 1 << 10), chunks=(1, 1 << 10), dtype=np.float32)
    assert gmd.fan_in(small, (0,)) == {0: 8}


@pytest.mark.parametrize("device", _device_params())
def test_a_scalars_mean_is_its_value_zero_dimensional(device):
    """A 0-d Dask array: its value, 0-d, as gm.reduce_mean gives it (the chunk step once crashed on the
    CPU device and gave shape (1,) on OpenCL)."""
    for v in (np.float32(3.5), np.int32(-7), np.float16(-0.0), np.float64(1e308)):
        x = da.from_array(v)
        for keep in (True, False):
            lazy = gmd.reduce_mean(x, keepdims=keep, device=device)
            got = np.asarray(lazy.compute(scheduler="synchronous"))
            want = gm.reduce_mean(v, keepdims=keep)
            assert lazy.shape == got.shape == np.shape(want) == (), (v, keep, got.shape)
            assert got.dtype == v.dtype and got.tobytes() == np.asarray(want).tobytes(), (v, got, want)
