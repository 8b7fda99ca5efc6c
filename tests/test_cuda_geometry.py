"""GPU launch geometry without a GPU: CUDA's limits hold for random shapes (huge and extreme ones
included), and the GPU-shaped kernels (the text CUDA compiles) run on PoCL with grids capped to a
few blocks, so that their loops over the grid run, and give the exact result."""
from __future__ import annotations

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean.descriptors.tensor import packed_strides
from gpu_mean.descriptors.types import DataType as D
from gpu_mean.descriptors.types import KernelOp
from gpu_mean.kernels import gpu_geometry as geo
from gpu_mean.runtime import planning


def reduce_plan(shape, axes, dt=D.FLOAT32, strides=None):
    out = tuple(1 if i in axes else s for i, s in enumerate(shape))
    return planning.plan_reduce(KernelOp.REDUCE_MEAN, dt, shape, strides or packed_strides(shape),
                                packed_strides(out), axes)


def ew_plan(shape, in_strides, nin=2, dt=D.FLOAT32):
    sh, st = planning.coalesce_elementwise(shape, [in_strides] * nin + [packed_strides(shape)])
    return planning.ElementwisePlan(KernelOp.MEAN, dt, nin, sh, st)


def check_limits(grid, block, smem=0):
    grid = tuple(grid) + (1,) * (3 - len(grid))
    assert 1 <= grid[0] <= geo.MAX_X and 1 <= grid[1] <= geo.MAX_YZ and 1 <= grid[2] <= geo.MAX_YZ, grid
    assert 1 <= int(np.prod(block)) <= geo.MAX_THREADS and len(block) <= 3, block
    assert 0 <= smem <= geo.MAX_STATIC_SMEM


def test_column_grid_is_capped():
    # (100000, 16, 64) over axis 1: gridDim.y was the 100000 outer rows, and the launch failed
    g = geo.reduce_geometry(reduce_plan((100000, 16, 64), (1,)), sms=132)
    assert g.kernel == "col"
    check_limits(g.grid, g.block, g.smem)


def test_nchw_channel_statistics_use_the_row_kernel():
    # (8192, 2, 8192) over (0, 2) put 262144 chunks in gridDim.y, and each 256-thread block had two
    # live threads reading runs 8192 elements apart
    g = geo.reduce_geometry(reduce_plan((8192, 2, 8192), (0, 2)), sms=132)
    assert g.kernel == "row" and g.row_multi and g.length == 8192 and g.runs == 8192
    check_limits(g.grid, g.block, g.smem)
    assert g.grid[0] * g.grid[1] >= 132 * 4     # enough blocks for every SM
    g = geo.reduce_geometry(reduce_plan((64, 256, 56 * 56), (0, 2), D.FLOAT16), sms=132)
    assert g.kernel == "row" and g.row_multi


def test_blocks_fit_the_outputs():
    g = geo.reduce_geometry(reduce_plan((6, 5, 7, 3), (0, 2)), sms=132)
    assert g.kernel == "general" and g.block == (32, 1)
    g = geo.reduce_geometry(reduce_plan((16, 3, 1024), (0, 2)), sms=132)
    assert g.kernel == "row" and g.warp_rows and g.block == (96, 1)    # a warp for each of 3 rows


def test_reduce_geometry_never_one_block():
    g = geo.reduce_geometry(reduce_plan((1 << 28,), (0,)), sms=132)
    assert g.kernel == "row" and g.n_chunks > 100 and g.grid[1] == g.n_chunks        # full reduction split
    g = geo.reduce_geometry(reduce_plan((8, 1 << 24), (1,)), sms=132)
    assert not g.warp_rows and g.n_chunks > 1                                          # few long rows split
    g = geo.reduce_geometry(reduce_plan((1 << 22, 16), (1,)), sms=132)
    # many short dense rows: gm_reduce_tile, a row per thread, 256 rows a block, about 16 blocks per SM
    assert g.kernel == "tile" and g.n_chunks == 1 and g.grid == (132 * 16, 1) and g.block == (256, 1)
    g = geo.reduce_geometry(reduce_plan((1 << 22, 15), (1,)), sms=132)
    # rows of a length that is no power of two: gm_reduce_short, 16 lanes a row, 64 rows a block
    assert g.kernel == "short" and g.lanes == 16 and g.n_chunks == 1 and g.grid == (132 * 16, 1)
    g = geo.reduce_geometry(reduce_plan((1 << 20, 16), (0,)), sms=132)
    assert g.kernel == "col" and g.n_chunks > 1 and g.block == (32, 8)                # few outputs: split R


def _random_shape(rng):
    nd = int(rng.integers(1, 6))
    kind = rng.integers(0, 3)
    if kind == 0:       # extreme aspect ratios
        shape = [1] * nd
        shape[int(rng.integers(0, nd))] = int(rng.integers(1 << 20, 1 << 34))
        for d in range(nd):
            shape[d] = shape[d] if shape[d] > 1 else int(rng.integers(1, 4))
    elif kind == 1:     # more than 2^31 elements
        shape = [int(rng.integers(1 << 8, 1 << 14)) for _ in range(nd)]
        while np.prod(shape, dtype=object) < 1 << 31:
            shape[int(rng.integers(0, nd))] *= 8
    else:
        shape = [int(rng.integers(1, 300)) for _ in range(nd)]
    return tuple(shape)


@pytest.mark.parametrize("seed", range(4))
def test_every_geometry_respects_cudas_limits(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        shape = _random_shape(rng)
        nd = len(shape)
        axes = tuple(d for d in range(nd) if rng.random() < 0.5)
        sms = int(rng.choice([1, 20, 132, 144]))
        g = geo.reduce_geometry(reduce_plan(shape, axes), sms=sms)
        check_limits(g.grid, g.block, g.smem)
        if g.n_chunks > 1:
            check_limits(*g.finalize_geometry(int(np.prod([s for i, s in enumerate(shape) if i not in axes],
                                                          dtype=object))))
        bcast = tuple(0 if rng.random() < 0.3 else s for s in packed_strides(shape))
        p = ew_plan(shape, bcast)
        if geo.ew_uses_rows(p):
            for w in (1, 4):
                check_limits(*geo.ew_rows_geometry(p, w, sms))
        check_limits(geo.ew_grid(p.count, 4, geo.BLOCK, sms), (geo.BLOCK,))


# --- host simulation of the kernels' index mapping -------------------------------------------

@pytest.fixture(scope="module")
def gpupaths():
    """The OpenCL device running the GPU-shaped kernels (what tests/conftest.py calls opencl:0-gpupaths)."""
    from gpu_mean.backends import opencl
    found, reason = opencl.discover()
    if not found:
        pytest.skip(f"no OpenCL device: {reason}")
    return gm.Device(opencl.make_backend(0, gpu_paths=True))


@pytest.fixture
def small_caps(monkeypatch):
    # tiny grid limits, so the kernels' loops over their grid run on small cases
    monkeypatch.setattr(geo, "MAX_X", 3)
    monkeypatch.setattr(geo, "MAX_YZ", 2)


@pytest.mark.parametrize("shape,axes,strides", [
    ((5, 3000), (1,), None), ((300, 12), (1,), None), ((2, 9000), (1,), None), ((9000,), (0,), None),
    ((40, 7, 33), (1,), None), ((700, 40), (0,), None), ((3, 6, 64), (0, 2), None), ((4, 3, 40), (0, 2), None),
    ((6, 5, 7, 3), (0, 2), None), ((7, 11, 13), (0, 1, 2), None), ((3, 4), (), None),
    ((4, 5, 6), (1,), (60, 1, 5)), ((4, 5, 6), (0, 2), (0, 6, 1))])
@pytest.mark.parametrize("sms", [1, 2])
def test_reduce_kernels_loop_over_a_capped_grid(small_caps, gpupaths, shape, axes, strides, sms):
    """The GPU-shaped kernels (the text CUDA compiles) run on PoCL with grids capped at 3 x 2 x 2
    blocks, so every kernel's loops over its grid run: integer-valued data, whose sums are exact, must
    give the correctly rounded mean of every output, bit for bit."""
    from helpers import run
    plan = reduce_plan(shape, axes, strides=strides)
    g = geo.reduce_geometry(plan, sms=sms)
    check_limits(g.grid, g.block, g.smem)
    gpupaths.backend.gpu_sms = sms
    ti = gm.TensorDesc(D.FLOAT32, shape, strides)
    to = gm.TensorDesc(D.FLOAT32, tuple(1 if i in axes else s for i, s in enumerate(shape)))
    x = _broadcast_like(np.random.default_rng(len(shape)).integers(-1000, 1000, shape).astype(np.float32), strides)
    got = run(gpupaths, gm.ReduceDesc(gm.ReduceFunction.AVERAGE, ti, to, axes), [x])
    n = int(np.prod([shape[a] for a in axes])) if axes else 1
    want = (x.astype(np.float64).sum(axis=axes, keepdims=True) / n).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def _broadcast_like(x, strides):
    """``x`` with one value along every dimension whose stride is 0 (what a broadcast tensor holds)."""
    for d, st in enumerate(strides or ()):
        if st == 0:
            x = np.broadcast_to(x.take([0], axis=d), x.shape)
    return x


@pytest.mark.parametrize("shape,in_strides", [((4, 300), (0, 1)), ((3, 5, 70), (0, 70, 1)), ((2, 3, 4, 66), None),
                                              ((5, 7), (1, 5)), ((3, 4, 5), (0, 1, 4)), ((6, 131), (0, 1)),
                                              ((50, 100), (1, 50)), ((3, 2000), (0, 1)), ((9000,), None)])
@pytest.mark.parametrize("sms", [1, 3])
def test_elementwise_kernels_loop_over_a_capped_grid(small_caps, gpupaths, shape, in_strides, sms):
    """The GPU-shaped element-wise kernels (contiguous, rows with and without 16-byte vectors, strided)
    run on PoCL with CUDA's launch geometry for a GPU of 1 or 3 multiprocessors and the grid caps
    above, so that their grid-stride loops run: every output the exact mean of its two inputs."""
    from helpers import run
    plan = ew_plan(shape, in_strides or packed_strides(shape), nin=2)
    if geo.ew_uses_rows(plan):
        for w in ((1, 4) if geo.ew_rows_vectorizable(plan) else (1,)):
            check_limits(*geo.ew_rows_geometry(plan, w, sms))
    else:
        check_limits(geo.ew_grid(plan.count, 4, geo.BLOCK, sms), (geo.BLOCK,))
    gpupaths.backend.gpu_sms = sms
    rng = np.random.default_rng(len(shape) + sms)
    a, b = (_broadcast_like(rng.integers(-1000, 1000, shape).astype(np.float32), in_strides) for _ in range(2))
    t, out = gm.TensorDesc(D.FLOAT32, shape, in_strides), gm.TensorDesc(D.FLOAT32, shape)
    got = run(gpupaths, gm.ElementWiseMeanDesc(t, t, out), [a, b])
    np.testing.assert_array_equal(got, ((a.astype(np.float64) + b) / 2).astype(np.float32))


def test_tile_rows_are_dense_adjacent_power_of_two_rows_of_a_float():
    """gm_reduce_tile stages a block's rows as one run of consecutive values: it takes only rows of
    2, 4, ..., 32 values stored back to back, in FLOAT32, FLOAT16 or BFLOAT16; the rest go to
    gm_reduce_short."""
    assert geo.tile_rows(reduce_plan((4096, 8), (1,)))
    assert geo.tile_rows(reduce_plan((4096, 2), (1,), dt=D.FLOAT16))
    assert geo.tile_rows(reduce_plan((64, 64, 32), (2,), dt=D.BFLOAT16))     # kept dimensions coalesce
    assert not geo.tile_rows(reduce_plan((4096, 8), (1,), strides=(16, 1)))   # padded rows
    assert not geo.tile_rows(reduce_plan((4096, 6), (1,)))                    # no power of two
    assert not geo.tile_rows(reduce_plan((4096, 8), (1,), dt=D.INT32))
    assert not geo.tile_rows(reduce_plan((4096, 64), (1,)))                   # the row kernel's
    assert geo.reduce_geometry(reduce_plan((4096, 8), (1,), strides=(16, 1)), sms=132).kernel == "short"
