"""Host-side planning and launch geometry: pure functions, no device."""
from __future__ import annotations

import types

from gpu_mean.descriptors.tensor import packed_strides
from gpu_mean.descriptors.types import DataType, KernelOp
from gpu_mean.kernels import elementwise_kernels, reduce_kernels
from gpu_mean.kernels import opencl_geometry as launch
from gpu_mean.runtime import planning

F = DataType.FLOAT32
ROW_PF, COL_PF = launch.DEFAULT_TUNING.row_prefetch_bytes, launch.DEFAULT_TUNING.col_prefetch_rows


def test_coalesce_packed_to_one_dim():
    shape = (4, 3, 5)
    st = packed_strides(shape)
    assert planning.coalesce_elementwise(shape, [st, st, st]) == ((60,), ((1,), (1,), (1,)))


def test_coalesce_broadcast_keeps_two_dims():
    shape = (4, 3, 5)
    shp, strides = planning.coalesce_elementwise(shape, [(0, 5, 1), packed_strides(shape), packed_strides(shape)])
    assert shp == (4, 15) and strides == ((0, 1), (15, 1), (15, 1))


def test_coalesce_drops_size_one_and_orders_by_output():
    shape = (1, 3, 1, 4)
    out = (12, 1, 12, 3)      # output is column-major in (3, 4)
    shp, strides = planning.coalesce_elementwise(shape, [(12, 4, 4, 1), out])
    assert shp == (4, 3) and strides == ((1, 4), (3, 1))


def test_coalesce_all_size_one():
    assert planning.coalesce_elementwise((1, 1), [(1, 1), (1, 1)]) == ((1,), ((1,), (1,)))


def test_plan_contiguous_flag():
    p = planning.ElementwisePlan(KernelOp.MEAN, F, 2, (60,), ((1,), (1,), (1,)))
    assert p.contiguous and p.count == 60
    assert not planning.ElementwisePlan(KernelOp.MEAN, F, 2, (4, 15), ((0, 1), (15, 1), (15, 1))).contiguous


def _plan(shape, axes, in_strides=None, out_strides=None):
    in_strides = in_strides or packed_strides(shape)
    out_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    out_strides = out_strides or packed_strides(out_shape)
    return planning.plan_reduce(KernelOp.REDUCE_MEAN, F, shape, in_strides, out_strides, axes)


def test_reduce_classes():
    p = _plan((64, 1024, 1024), (2,))
    assert p.cls == "row" and p.n_out == 65536 and p.n_reduce == 1024 and p.keep_shape == (65536,)
    p = _plan((64, 1024, 1024), (1,))
    assert p.cls == "col" and p.inner == 1024 and p.row_stride == 1024 and p.keep_shape[:-1] == (64,)
    p = _plan((64, 1024, 1024), (0,))
    assert p.cls == "col" and p.inner == 1 << 20 and p.keep_shape[:-1] == ()
    p = _plan((64, 1024, 1024), (0, 1, 2))
    assert p.cls == "row" and p.n_out == 1 and p.red_shape == (1 << 26,)
    p = _plan((6, 5, 7, 3), (0, 2))
    assert p.cls == "general" and p.red_shape == (6, 7) and p.keep_shape == (5, 3)


def test_reduce_merges_adjacent_reduced_axes():
    p = _plan((2, 3, 4, 5), (2, 3))
    assert p.cls == "row" and p.red_shape == (20,) and p.keep_shape == (6,)
    p = _plan((2, 3, 4, 5), (0, 1))
    assert p.cls == "col" and p.red_shape == (6,) and p.keep_shape == (20,)


def test_reduce_permuted_input_becomes_row():
    # input laid out column-major: reducing axis 0 reads contiguous memory
    p = _plan((300, 64), (0,), in_strides=(1, 300))
    assert p.cls == "row" and p.row_stride == 1


def test_reduce_no_axes_and_size_one_axes():
    p = _plan((3, 4), ())
    assert p.n_reduce == 1 and p.red_shape == () and p.cls == "general"
    p = _plan((3, 1, 4), (1,))
    assert p.n_reduce == 1 and p.red_shape == ()


def test_split_count():
    assert planning.split_count(65536, 1024, target_units=32, min_chunk=32768) == 1
    assert planning.split_count(1, 1 << 26, target_units=32, min_chunk=32768) == 32
    assert planning.split_count(1, 1000, target_units=32, min_chunk=32768) == 1     # too short to split
    assert planning.split_count(4, 200_000, target_units=64, min_chunk=32768) == 6  # capped by min_chunk
    assert planning.chunk_length(100, 3, 8) == 40


def test_reduce_geometry_cpu():
    g = launch.reduce_geometry(_plan((64, 1024, 1024), (0, 1, 2)), compute_units=2)
    assert g.kernel == "row" and g.n_chunks == 32 and g.grid == (1, 32) and g.chunk * 32 >= 1 << 26
    assert g.local == (1, 1)   # one work-item per work-group: PoCL spreads them over the cores
    g = launch.reduce_geometry(_plan((64, 1024, 1024), (2,)), compute_units=2)
    assert g.n_chunks == 1 and g.grid == (65536, 1) and g.local == (64, 1)
    g = launch.reduce_geometry(_plan((64, 1024, 1024), (1,)), compute_units=2)
    assert g.kernel == "col" and g.grid == (1, 64, 1) and g.local == (1, 1, 1) and g.cols == 1024
    g = launch.reduce_geometry(_plan((2, 100_000, 33), (1,)), compute_units=2)
    assert g.kernel == "col" and g.n_chunks > 1 and g.grid[2] == g.n_chunks and g.chunk * g.n_chunks >= 100_000


def test_reduce_geometry_gpu_splits_more():
    from gpu_mean.kernels import gpu_geometry
    cpu = launch.reduce_geometry(_plan((8, 1 << 20), (1,)), compute_units=2)
    gpu = gpu_geometry.reduce_geometry(_plan((8, 1 << 20), (1,)), sms=132)
    assert gpu.n_chunks > cpu.n_chunks > 1


def test_ew_geometry():
    assert launch.ew_contig_geometry(1000, 4) == ((256,), (256,))
    assert launch.ew_contig_geometry(4 * 256 + 1, 4) == ((512,), (256,))


def test_reduce_geometry_interleaved_dense_runs():
    g = launch.reduce_geometry(_plan((64, 1024, 1024), (0, 2)), compute_units=2)
    assert g.row_multi and g.kernel == "row" and g.grid == (1024, 64) and g.n_chunks == 64 and g.length == 1024
    g = launch.reduce_geometry(_plan((6, 5, 7, 3), (0, 2)), compute_units=2)
    assert not g.row_multi and g.kernel == "general"   # innermost reduced run is strided


def test_reduce_geometry_cpu_prefetch_only_where_the_lines_are_read():
    """Software prefetch (CPU devices) runs past what a work-item reads; the planner issues it only
    where that waste is small: adjacent or long rows, column chunks of many rows, never on GPUs."""
    def geo(shape, axes, dtype=DataType.FLOAT32, cpu=True, strides=None):
        out_strides = packed_strides(tuple(1 if i in axes else s for i, s in enumerate(shape)))
        in_strides = strides or packed_strides(shape)
        plan = planning.plan_reduce(KernelOp.REDUCE_MEAN, dtype, shape, in_strides, out_strides, axes)
        if not cpu:     # the GPU shape has no software prefetch at all
            macros = reduce_kernels.gpu_variant(plan, sms=132).macros
            return types.SimpleNamespace(prefetch=int(macros.get("PREFETCH", 0)))
        return launch.reduce_geometry(plan, compute_units=2)
    assert geo((64, 1024, 1024), (2,)).prefetch == ROW_PF        # adjacent rows
    assert geo((64, 1024, 1024), (0, 1, 2)).prefetch == ROW_PF   # one long run in chunks
    assert geo((64, 1024, 1024), (1,)).prefetch == COL_PF          # 1024 rows per chunk
    assert geo((64, 1024, 1024), (0,)).prefetch == 0                                 # chunks of 64 rows
    g = geo((64, 1024, 1024), (0, 2))             # interleaved: dense runs of 1024, adjacent for one k
    assert g.row_multi and g.prefetch == ROW_PF
    assert geo((64, 1024, 1024), (0, 2), strides=(1 << 21, 2048, 1)).prefetch == 0   # padded runs
    assert geo((64, 1024, 1024), (2,), cpu=False).prefetch == 0
    assert geo((64, 1024, 1024), (1,), cpu=False).prefetch == 0
    # padded rows of 100 elements (stride 128): the next row is not where the prefetch lands
    assert geo((5000, 100), (1,), strides=(128, 1)).prefetch == 0
    assert geo((5000, 100), (1,)).prefetch == ROW_PF
    # padded but long rows: the waste past each row is at most 1/32 of it
    assert geo((8, 1 << 15), (1,), DataType.FLOAT16, strides=(1 << 16, 1)).prefetch == ROW_PF
    assert geo((8, 1 << 13), (1,), DataType.FLOAT16, strides=(1 << 14, 1)).prefetch == 0


def test_ew_prefetch_only_for_dense_or_long_rows():
    import gpu_mean as gm

    def pf(shape, b_strides=None, dt=DataType.FLOAT32, cpu=True):
        t, tb = gm.TensorDesc(dt, shape), gm.TensorDesc(dt, shape, b_strides)
        plan = planning.plan_operator(gm.ElementWiseMeanDesc(t, tb, t))
        if not cpu:     # the GPU shape has no software prefetch at all
            return int(elementwise_kernels.gpu_variant(plan, api="opencl", sms=132).macros.get("PREFETCH", 0))
        return launch.ew_prefetch(plan)
    assert pf((64, 1024, 1024)) == ROW_PF                 # one dense run
    assert pf((64, 1 << 20), (0, 1)) == ROW_PF            # broadcast, rows of 4 MB
    assert pf((1 << 16, 100), (0, 1)) == 0                                   # rows of 400 bytes
    assert pf((64, 1 << 14), (0, 1), DataType.FLOAT16) == 0                  # rows of 32 KB
    assert pf((64, 1 << 15), (0, 1), DataType.FLOAT16) == ROW_PF
    assert pf((64, 1 << 20), (1, 64)) == 0                                   # permuted: the strided kernel
    assert pf((64, 1024, 1024), cpu=False) == 0


def test_program_cache_is_bounded_and_keeps_the_recently_used():
    from gpu_mean.kernels.source import ProgramCache
    cache, builds = ProgramCache(capacity=3), []

    def get(k):
        return cache.get(k, lambda: builds.append(k) or f"program {k}")
    for k in "abc":
        get(k)
    assert get("a") == "program a" and builds == ["a", "b", "c"]     # a hit builds nothing
    get("d")                                                           # evicts b, the least recently used
    assert len(cache) == 3
    get("a"), get("c")
    assert builds == ["a", "b", "c", "d"]
    get("b")
    assert builds[-1] == "b" and len(cache) == 3
