"""Calls past one buffer of the device run in pieces (frontends/split.py), on every device variant:
a Device over the variant's own backend with ``max_alloc_bytes`` lowered makes the split path run on
small arrays. Every result is compared bit for bit with the same call on the unsplit device, and with
the exact oracle; each test checks that the call was really cut."""
from __future__ import annotations

import math
import os
import weakref

import numpy as np
import oracle
import pytest

import gpu_mean as gm
from gpu_mean.frontends import arrays, split

SMALL = 64 << 10      # pieces small enough to be copied through pooled buffers (below)
LARGE = 1 << 20       # pieces of 128 KiB or more: bound in place where the device works in host memory

_lowered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@pytest.fixture(autouse=True)
def copied_below_128k(monkeypatch):
    """Pieces below 128 KiB copy through pooled buffers and larger ones bind in place, as the
    functional calls once chose on every device working in host memory (they bind any size in place
    today): both ways of binding a piece are tested here."""
    monkeypatch.setattr(arrays, "HOST_IN_PLACE_MIN_BYTES", 128 << 10)


def lowered(device, limit: int):
    """The variant's own backend (fp64 off, GPU paths, ...) as a Device whose largest buffer is ``limit``."""
    per = _lowered.setdefault(device, {})
    dev = per.get(limit)
    if dev is None or dev.get_device_removed_reason() is not None:
        dev = per[limit] = gm.Device(device.backend, device.feature_level, max_alloc_bytes=limit)
    return dev


@pytest.fixture
def pieces(monkeypatch):
    """Counts the pieces split calls are cut into."""
    seen = []
    real = split.boxes

    def counting(shape, chunks):
        for b in real(shape, chunks):
            seen.append(b)
            yield b
    monkeypatch.setattr(split, "boxes", counting)
    return seen


def rng(seed):
    return np.random.default_rng(seed)


def data(name: str, shape, dtype, seed: int = 0):
    """Named, seeded data: ``positive`` same-signed values (within 1 ulp of the exact mean on every
    device), ``grid`` multiples of 1/16 whose every partial sum is exact even in float32 (bit-identical
    on devices without fp64 too), ``wide`` integers over the whole range."""
    r = rng(seed)
    dtype = np.dtype(dtype)
    if name == "positive":
        return (r.random(shape) + 0.5).astype(dtype)
    if name == "grid":
        return (r.integers(-64, 64, shape) / 16).astype(dtype)
    if name == "wide":
        info = np.iinfo(dtype)
        return r.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    raise KeyError(name)


def check_reduce(device, x, axes, keepdims=True, limit=SMALL):
    got = gm.reduce_mean(x, axes, keepdims=keepdims, device=lowered(device, limit))
    want = gm.reduce_mean(x, axes, keepdims=keepdims, device=device)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert oracle.equal_bits(got, want), (axes, np.flatnonzero(got != want)[:5])
    ax = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    if axes is None and x.dtype.kind == "f":     # one long row: integer-mantissa sums, not a loop over it
        total = oracle.exact_sum_rows(np.ascontiguousarray(x).reshape(1, -1))[0]
        exact = np.full(got.shape, oracle.round_fraction(total / x.size, x.dtype), x.dtype)
    else:
        exact = oracle.reduce_mean(x, ax, x.dtype).reshape(got.shape)
    if x.dtype.kind == "f":
        assert max_ulps(got, exact) <= 1
    else:
        np.testing.assert_array_equal(got, exact)
    return got


def max_ulps(got, exact) -> int:
    """The largest distance in ulps between finite results, 0 where they are equal (+0.0 == -0.0)."""
    return max((oracle.ulp_distance(g, e, got.dtype) for g, e in zip(got.ravel(), exact.ravel())
                if g != e and np.isfinite(e)), default=0)


# --- reductions: every class of axes, cut or not ------------------------------------------------

@pytest.mark.parametrize("axes", [[0], [1], None, [-1]], ids=["crossing", "inside", "all", "last"])
@pytest.mark.parametrize("name,dtype", [("positive", np.float32), ("grid", np.float32), ("positive", np.float16),
                                        ("wide", np.int32), ("wide", np.uint32)])
def test_reduce_2d_in_copied_pieces(device, pieces, axes, name, dtype):
    x = data(name, (300, 1000), dtype)
    check_reduce(device, x, axes)
    assert len(pieces) > 1


@pytest.mark.parametrize("axes", [[0], [1], [2], [0, 2], [1, 2], [0, 1], None])
def test_reduce_3d_with_a_middle_axis_cut(device, pieces, axes):
    """A slab of dimension 0 is past the limit, so dimension 1 is cut too: reduced axes cut in the
    middle, outside and not at all."""
    x = data("grid", (8, 200, 30), np.float32, seed=1)
    check_reduce(device, x, axes, limit=4096 * 4)
    assert len(pieces) > 8


@pytest.mark.parametrize("axes", [(0,), (1,)])
def test_cut_pieces_are_summed_on_the_device_silently(device, axes, monkeypatch):
    """Pieces whose reduced axis is cut give the device's exact partials (Device.exact_partials: the
    kernels' superaccumulator on OpenCL and CUDA, no fp64 needed), so no device hands its pieces to
    the CPU device or warns, with or without fp64; the result is one launch's bits."""
    import warnings
    calls = []
    real = gm.Device.exact_partials
    monkeypatch.setattr(gm.Device, "exact_partials", lambda self, *a: calls.append(self) or real(self, *a))
    x = data("grid", (300, 1000), np.float32, 3)
    small = lowered(device, SMALL)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = gm.reduce_mean(x, axes=list(axes), device=small)
    said = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert not said, said
    cuts = axes == (0,)          # (300, 1000) is cut along dimension 0 only
    assert (len(calls) > 1 and all(c is small for c in calls)) if cuts else not calls
    np.testing.assert_array_equal(got, gm.reduce_mean(x, axes=list(axes), device=device))


@pytest.mark.parametrize("axes", [[0], [1], None])
def test_reduce_in_place_pieces(device, pieces, axes):
    """Pieces of 128 KiB or more: bound in place on devices that work in host memory."""
    x = data("positive", (1024, 1536), np.float32, seed=2)
    check_reduce(device, x, axes, limit=LARGE)
    assert len(pieces) > 4


def test_reduce_views_keepdims_and_ints(device, pieces):
    x = data("positive", (600, 700), np.float32, seed=3)
    check_reduce(device, x.T, [0])                    # transposed: the cut follows memory, dimension 1
    check_reduce(device, x.T, [1], keepdims=False)
    check_reduce(device, x[::2, 5::3], [0, 1], keepdims=False)
    xi = data("wide", (500, 300), np.int32, seed=4)
    check_reduce(device, xi, None, keepdims=False)    # sums past 2^63 would need Python integers
    assert len(pieces) > 5


def test_reduce_sign_of_zero_and_specials(device):
    x = np.full((200, 500), -0.0, np.float32)
    check_reduce(device, x, [0])
    check_reduce(device, x, None)
    y = data("positive", (200, 500), np.float32, seed=5)
    y[150, 7], y[3, 9], y[199, 9] = np.inf, np.inf, -np.inf
    y[100, 11] = np.nan
    got = gm.reduce_mean(y, [0], device=lowered(device, SMALL))
    np.testing.assert_array_equal(got, gm.reduce_mean(y, [0], device=device))
    assert got[0, 7] == np.inf and np.isnan(got[0, 9]) and np.isnan(got[0, 11])


def test_partial_sums_add_exactly_across_pieces(device, pieces):
    """Totals that cancel across pieces: 2^60 + 1 - 2^60 is 1 in exact arithmetic and 0 in plain
    float64 addition; the split call's double-double addition keeps the 1 (one launch may not)."""
    x = np.zeros((9000, 8), np.float32)
    x[0], x[4500], x[8999] = 2.0**60, 1.0, -(2.0**60)
    got = gm.reduce_mean(x, [0], keepdims=False, device=lowered(device, SMALL))
    np.testing.assert_array_equal(got, np.full(8, np.float32(1 / 9000)))
    assert len(pieces) >= 3


# --- element-wise means --------------------------------------------------------------------------

def check_mean(device, *xs, limit=SMALL):
    got = gm.mean(*xs, device=lowered(device, limit))
    want = gm.mean(*xs, device=device)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert oracle.equal_bits(got, want)
    if len(xs) == 2:
        exact = oracle.fast_mean2(*np.broadcast_arrays(*xs), xs[0].dtype)
    else:
        exact = oracle.nary_mean(xs, xs[0].dtype) if len(xs) > 1 else xs[0]
    if len(xs) > 2 and got.dtype.kind == "f" and not device.info.fp64:
        assert max_ulps(got, exact) <= 1     # the n-ary mean's compensated float sum: within 1 ulp
    else:
        np.testing.assert_array_equal(got, exact)    # correctly rounded
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32])
def test_mean_in_pieces(device, pieces, dtype):
    name = "wide" if np.dtype(dtype).kind in "iu" else "positive"
    a, b, c = (data(name, (300, 500), dtype, seed=s) for s in (6, 7, 8))
    check_mean(device, a, b)
    check_mean(device, a, b, c)
    check_mean(device, a)
    check_mean(device, a, b[7], b[:, :1])              # broadcast rows and columns
    check_mean(device, a[:, :1], b[:1])                # small inputs, a result past the limit
    assert len(pieces) > 4


def test_mean_cuts_an_inner_dimension_when_a_broadcast_input_is_past_the_limit(device, pieces):
    a = data("positive", (3, 40000), np.float32, seed=9)
    b = data("positive", (40000,), np.float32, seed=10)    # 160 KB: every piece must cut dimension 1
    check_mean(device, a, b)
    assert len(pieces) > 3 * 2
    check_mean(device, a, np.float32(2.5))                 # a scalar: every piece reads all of it


def test_mean_in_place_pieces(device, pieces):
    a, b = data("positive", (1024, 1024), np.float32, 11), data("positive", (1024, 1024), np.float32, 12)
    check_mean(device, a, b, limit=LARGE)
    check_mean(device, a.T, b[::-1], limit=LARGE)          # a transposed view, a copied negative stride
    assert len(pieces) > 8


def test_frontends_split_too(device, pieces):
    from gpu_mean import openvino
    from gpu_mean.frontends import onnx_ops
    x = data("positive", (300, 400), np.float32, seed=13)
    small = lowered(device, SMALL)
    np.testing.assert_array_equal(openvino.reduce_mean(x, [0], keep_dims=True, device=small),
                                  gm.reduce_mean(x, [0], device=device))
    reduce18 = onnx_ops.get_op("ReduceMean", 18)({"keepdims": 0})
    np.testing.assert_array_equal(reduce18.run([x, np.array([1])], small), gm.reduce_mean(x, [1], False, device=device))
    mean13 = onnx_ops.get_op("Mean", 13)({})
    np.testing.assert_array_equal(mean13.run([x, x[3]], small), gm.mean(x, x[3], device=device))
    assert len(pieces) > 3


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_a_dask_chunk_past_one_buffer_sums_in_pieces(device, pieces, axes):
    pytest.importorskip("dask")
    from gpu_mean.dask import partials
    small = lowered(device, SMALL)
    for x in (data("grid", (300, 1000), np.float32, 15), data("wide", (300, 1000), np.int32, 16)):
        p = partials.chunk_sum(x, axes, device=small)
        if p.digits is not None:      # float chunks: exact totals on every device (issue 22)
            from fractions import Fraction

            from gpu_mean.runtime import exact
            keep = [d for d in range(x.ndim) if d not in axes]
            rows = np.transpose(x, keep + list(axes)).reshape(-1 if keep else 1, p.count)
            got = exact.to_ints(p.digits.reshape(p.digits.shape[0], -1))
            assert [Fraction(t) * Fraction(2) ** -149 for t in got] == oracle.exact_sum_rows(rows)
            continue
        want = x.sum(axis=axes, keepdims=True, dtype=np.float64 if x.dtype.kind == "f" else np.int64)
        assert p.hi.dtype == want.dtype and p.count == math.prod(x.shape[a] for a in axes)
        np.testing.assert_array_equal(p.hi, want)
    assert len(pieces) > 4


# --- device arrays -------------------------------------------------------------------------------

def test_device_arrays_in_pieces(device, pieces):
    if device.info.backend != "opencl":
        pytest.skip("pyopencl arrays: OpenCL devices (CuPy's run only with a GPU)")
    import pyopencl.array as cla
    small = lowered(device, SMALL)
    x = data("grid", (300, 700), np.float32, seed=14)
    g = cla.to_device(small.cl_queue, x)
    for axes in ([0], [1], None):
        r = gm.reduce_mean(g, axes, device=small)
        assert isinstance(r, cla.Array)
        assert oracle.equal_bits(r.get(), gm.reduce_mean(x, axes, device=device))
    m = gm.mean(g, g[5], device=small)
    assert isinstance(m, cla.Array)
    assert oracle.equal_bits(m.get(), gm.mean(x, x[5], device=device))
    assert len(pieces) > 6


# --- the limit itself ----------------------------------------------------------------------------

def test_a_call_past_the_limit_is_split_and_one_within_is_not(device):
    small = lowered(device, SMALL)
    assert arrays.Call([np.zeros(SMALL // 4 + 1, np.float32)], small, "t").mode == "split"
    assert arrays.Call([np.zeros(SMALL // 4, np.float32)], small, "t").mode != "split"
    assert arrays.Call([np.zeros(SMALL // 4 + 1, np.float32)], device, "t").mode != "split"


def test_create_buffer_past_the_largest_buffer_names_the_limit(device):
    small = lowered(device, SMALL)
    with pytest.raises(gm.InvalidArgumentError, match=f"max_alloc_bytes .*= {SMALL} bytes"):
        small.create_buffer(SMALL + 4)
    small.create_buffer(SMALL)
    if device.info.backend == "opencl":
        limit = device.max_alloc_bytes
        assert limit == device.backend.cl_device.max_mem_alloc_size
        if limit < device.info.global_memory:
            with pytest.raises(gm.InvalidArgumentError, match=f"CL_DEVICE_MAX_MEM_ALLOC_SIZE = {limit} bytes"):
                device.create_buffer(limit + 4)


@pytest.mark.parametrize("bad", [0, 100, -1, 1.5, True, "1M"])
def test_max_alloc_bytes_is_checked(device, bad):
    with pytest.raises(gm.InvalidArgumentError, match="max_alloc_bytes"):
        gm.Device(device.backend, max_alloc_bytes=bad)


def test_create_device_takes_max_alloc_bytes():
    dev = gm.create_device("cpu", max_alloc_bytes=1 << 20)
    assert dev.max_alloc_bytes == 1 << 20 and "max_alloc_bytes" in dev.max_alloc_name
    assert gm.create_device("cpu").max_alloc_bytes is None


# --- the planner (pure) --------------------------------------------------------------------------

def spans(chunks, tensors):
    return [sum((c - 1) * s for c, s in zip(chunks, st)) + 1 for st, _ in tensors]


@pytest.mark.parametrize("shape,strides,limit", [
    ((1000, 1000), (1000, 1), 4096 * 4),          # rows
    ((1000, 1000), (1, 1000), 4096 * 4),          # a transposed view: the cut follows memory
    ((7, 300, 300), (90000, 300, 1), 1000 * 4),   # a slab past the limit: two dimensions cut
    ((3, 5), (5, 1), 4),                          # one element per piece
])
def test_plan_chunks_fits_and_cuts_the_outer_dimension(shape, strides, limit):
    tensors = [(strides, 4)]
    chunks = split.plan_chunks(shape, tensors, limit)
    assert all(s * 4 <= limit for s in spans(chunks, tensors))
    # the outermost dimension in memory is cut first; an inner one only once the outer is down to 1
    order = sorted(range(len(shape)), key=lambda d: -strides[d])
    cut = [d for d in order if chunks[d] < shape[d]]
    assert cut and all(chunks[d] == 1 for d in cut[:-1])
    # pieces are as large as the limit allows: one more element along the last cut would not fit
    grown = list(chunks)
    grown[cut[-1]] += 1
    if grown[cut[-1]] <= shape[cut[-1]]:
        assert max(spans(grown, tensors)) * 4 > limit or chunks[cut[-1]] * 2 > shape[cut[-1]] // 2


def test_plan_chunks_past_dml_element_limit():
    n = 2**33 + 5
    chunks = split.plan_chunks((n,), [((1,), 2)], None)
    assert chunks[0] <= gm.descriptors.tensor.MAX_ELEMENTS and -(-n // chunks[0]) == 3
    # a broadcast (stride 0) tensor counts more elements than it addresses
    chunks = split.plan_chunks((2**20, 2**13), [((0, 1), 4)], None)
    assert chunks[0] * chunks[1] <= gm.descriptors.tensor.MAX_ELEMENTS
    assert split.plan_chunks((4, 5), [((5, 1), 4)], None) == (4, 5)


def test_plan_chunks_refuses_a_limit_below_one_element():
    with pytest.raises(gm.InvalidArgumentError, match="one element"):
        split.plan_chunks((4,), [((1,), 8)], 4)


# --- what README says of PoCL's figures ------------------------------------------------------------

def pocl():
    from gpu_mean import backends
    found, reason = backends._discover("opencl")
    for be in found:
        if "Portable Computing Language" in be.info.platform and be.info.device_type == "CPU":
            return be
    pytest.skip(f"no PoCL CPU device: {reason or 'another OpenCL platform'}")


def test_pocl_largest_buffer_is_a_quarter_of_its_memory_rounded_up_to_a_power_of_two():
    be = pocl()
    quarter = be.cl_device.global_mem_size // 4
    assert be.max_alloc == max(1 << (quarter - 1).bit_length(), 128 << 20)
    assert gm.Device(be).max_alloc_bytes == be.max_alloc


def test_pocl_counts_buffers_over_numpy_memory_against_its_largest_buffer():
    be = pocl()
    cl = be.cl
    host = np.zeros(be.max_alloc + 4096, np.uint8)      # never touched: no resident memory
    with pytest.raises(cl.Error, match="INVALID_BUFFER_SIZE"):
        cl.Buffer(be.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.USE_HOST_PTR, hostbuf=host)
    assert be.arrays.host_in_place(host, False) is None  # so the calls never ask it: they cut the array


def test_pocl_memory_limit_caps_the_figures():
    import subprocess
    import sys
    be = pocl()
    if be.cl_device.global_mem_size <= 7 << 30:
        pytest.skip("PoCL reports 7 GiB or less here: POCL_MEMORY_LIMIT=7 would change nothing")
    code = ("import pyopencl as cl; d = [d for p in cl.get_platforms() for d in p.get_devices() "
            "if 'Portable' in p.name][0]; print(d.global_mem_size, d.max_mem_alloc_size)")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "POCL_MEMORY_LIMIT": "7"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert [int(v) for v in out] == [7 << 30, 2 << 30]


def test_host_arrays_in_pieces_on_a_stand_in_cuda_device(monkeypatch, pieces):
    """The CUDA glue under split calls (tests/fake_cupy.py: no GPU; kernels do not compute): each
    piece's bytes cross the bus once through the pinned staging, one launch per piece, and a cut
    reduced axis reads each piece's partial sums back."""
    from fake_cupy import fake_cuda_backend
    log = []
    be, state = fake_cuda_backend(monkeypatch, log)
    dev = gm.Device(be, max_alloc_bytes=SMALL)
    a = data("positive", (64, 1000), np.float32, 17)      # 256 KB: five pieces of at most 64 KiB

    def count(kind):
        return [e for e in log if e[0] == kind]
    with dev:       # closed at the end: the stand-in leaves nothing for a later gm.free_memory()
        for call, uploaded in ((lambda: gm.mean(a, a, device=dev), 2 * a.nbytes),
                               (lambda: gm.reduce_mean(a, [1], device=dev), a.nbytes),
                               (lambda: gm.reduce_mean(a, [0], device=dev), a.nbytes)):
            log.clear()
            pieces.clear()
            res = call()
            assert type(res) is np.ndarray and len(pieces) >= 4
            assert sum(e[2] for e in count("h2d")) == uploaded
            assert len(count("launch")) + len(count("graph")) >= len(pieces)
            assert len(count("d2h")) >= len(pieces)         # each piece's result or partial sums back


def test_extension_types_in_pieces_where_no_reduced_axis_is_cut(pieces):
    """FLOAT64 (a gm.ext type, computed by the CPU device): element-wise and inside-piece reductions
    split like the others; a cut reduced axis adds the pieces' exact totals (the same bits as one
    launch); INT64 with a cut reduced axis is refused, naming the type and the limit."""
    small = gm.create_device("cpu", max_alloc_bytes=SMALL)
    x = data("positive", (300, 100), np.float64, 18)
    for got, want in ((gm.mean(x, x[::-1], device=small), gm.mean(x, x[::-1], device="cpu")),
                      (gm.reduce_mean(x, [1], device=small), gm.reduce_mean(x, [1], device="cpu"))):
        assert oracle.equal_bits(got, want)
    assert len(pieces) > 4
    assert oracle.equal_bits(gm.reduce_mean(x, [0], device=small), gm.reduce_mean(x, [0], device="cpu"))
    xi = x.astype(np.int64)     # INT64 with a cut reduced axis: the pieces' two-word totals (below)
    np.testing.assert_array_equal(gm.reduce_mean(xi, [0], device=small), gm.reduce_mean(xi, [0], device="cpu"))


def int64_data(dtype, shape, seed):
    """Full-range INT64 / UINT64 values with rows and columns of the extremes (INT64_MIN, INT64_MAX,
    UINT64_MAX): totals past 2^63 and 2^64 whichever axes are reduced."""
    x = data("wide", shape, dtype, seed)
    info = np.iinfo(dtype)
    x[:, 0] = info.min if dtype == np.int64 else info.max
    x[0, :] = info.max
    x[1, ::2] = info.min
    return x


@pytest.mark.parametrize("axes", [[0], [1], None], ids=["crossing", "inside", "all"])
@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_int64_pieces_give_two_word_totals(device, pieces, axes, dtype):
    """INT64 / UINT64 with a reduced axis cut (issue 26): each piece's 128-bit total (ReduceSumDesc's
    two words, on the device), added with carries, the mean truncated toward zero once: the unsplit
    call's result bit for bit, and the oracle's (check_reduce), on every device variant."""
    x = int64_data(dtype, (300, 1000), 19)
    check_reduce(device, x, axes)
    assert len(pieces) > 1
    ax = (0, 1) if axes is None else tuple(axes)
    totals = np.sum(x.astype(object), axis=ax)
    assert np.max(np.abs(totals)) >= 2**64     # the sums pass 2^64 (and 2^63)


def test_int64_totals_in_pieces_are_exact(device, pieces):
    """The combined words themselves (split.word_totals) are Python's integer sums."""
    small = lowered(device, SMALL)
    for dtype in (np.int64, np.uint64):
        x = int64_data(dtype, (300, 1000), 20)
        call = arrays.Call([x], small, "ReduceMean")
        assert call.mode == "split"
        hi, lo = split.word_totals(call, (0,)).words()
        assert [int(h) * 2**64 + int(w) for h, w in zip(hi.ravel(), lo.ravel())] == \
            [int(t) for t in np.sum(x.astype(object), axis=0)]
    assert len(pieces) > 2


def test_a_dask_int64_chunk_past_one_buffer_gives_two_words(device, pieces):
    """gpu_mean.dask: an INT64 / UINT64 chunk past one buffer of the device sums in pieces, its
    128-bit total in two words (the chunk partial of ReduceSumDesc's two outputs)."""
    pytest.importorskip("dask")
    from gpu_mean.dask import partials
    small = lowered(device, SMALL)
    for dtype in (np.int64, np.uint64):
        x = int64_data(dtype, (300, 1000), 21)
        for axes in ((0,), (1,), (0, 1)):
            p = partials.chunk_sum(x, axes, device=small)
            totals = np.sum(x.astype(object), axis=axes, keepdims=True)
            assert p.hi.shape == totals.shape and p.lo.dtype == np.uint64
            assert [int(h) * 2**64 + int(w) for h, w in zip(p.hi.ravel(), p.lo.ravel())] == \
                [int(t) for t in totals.ravel()]
            np.testing.assert_array_equal(partials.finish(p, dtype), gm.reduce_mean(x, axes, device=device))
    assert len(pieces) > 4


def test_float64_with_a_cut_reduced_axis_gives_one_launch_bits(device, monkeypatch):
    """FLOAT64 with a cut reduced axis: every device adds its pieces' exact totals (OpenCL and CUDA:
    the kernels' 68-limb superaccumulator, gm_reduce_limbs, added on the device), the bits of one
    launch and of the CPU device, for positive data and for +-DBL_MAX that cancel; a device without
    fp64 has no FLOAT64 tensors at all."""
    if device.info.backend != "cpu" and not device.info.fp64:
        pytest.skip("FLOAT64 needs fp64")
    x = data("positive", (300, 100), np.float64, 18)
    big = np.finfo(np.float64).max
    y = np.concatenate([np.full((150, 100), big), np.full((150, 100), -big)])
    y[7] = data("positive", (1, 100), np.float64, 19)
    small = gm.Device(device.backend, device.feature_level, max_alloc_bytes=SMALL)
    from gpu_mean.runtime import device as device_mod
    seen, real, real_add = [], gm.Device.exact_partials, device_mod._DeviceTotals.add
    monkeypatch.setattr(gm.Device, "exact_partials", lambda self, *a: seen.append(self) or real(self, *a))
    monkeypatch.setattr(device_mod._DeviceTotals, "add",      # the pieces combined on the device (issue 26)
                        lambda self, *a: seen.append(self.device) or real_add(self, *a))
    for arr in (x, y):
        seen.clear()
        one = gm.reduce_mean(arr, [0], device=device)
        assert oracle.equal_bits(gm.reduce_mean(arr, [0], device=small), one)
        assert oracle.equal_bits(one, gm.reduce_mean(arr, [0], device="cpu"))
        assert len(seen) > 1 and all(d is small for d in seen)
    assert oracle.equal_bits(gm.reduce_mean(x, [1], device=small), gm.reduce_mean(x, [1], device=device))
