"""Exact device partials (issue 22 with issue 26; docs/design.md, "Partials across boundaries"):
split calls whose reduced axis is cut and gpu_mean.dask chunks on OpenCL (and CUDA) devices sum
their pieces with the kernels' superaccumulator (reduce_gpu.cl: gm_reduce_limbs, both kernel shapes,
with and without fp64), so that every chunking gives the bits of one launch, the correctly rounded
mean of the exact oracle, for FLOAT32, FLOAT16 and BFLOAT16. The data are seeded and named
(test_correct_rounding.py's rows: normal values, +-largest values that cancel, exact ties,
subnormals, -0.0 alone, inf and NaN); a lowered per-allocation limit (``max_alloc_bytes``) makes
small arrays cut."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import oracle
import pytest
from test_correct_rounding import BF16, adversarial_matrix, as_type, check_bits, want_reduce

import gpu_mean as gm
from gpu_mean.descriptors.types import KernelOp
from gpu_mean.frontends import split
from gpu_mean.frontends.arrays import data_type_of
from gpu_mean.runtime import exact

NARROW = [np.dtype(np.float32), np.dtype(np.float16), BF16]
IDS = ["float32", "float16", "bfloat16"]
F64 = np.dtype(np.float64)
ALL = NARROW + [F64]           # FLOAT64: the 68-limb superaccumulator (exact.h: gm_xacc_d), fp64 devices
ALL_IDS = IDS + ["float64"]


def held64(device, dt):
    """FLOAT64 tensors exist only where the device has fp64 (refused at storage elsewhere)."""
    if dt == F64 and device.info.backend != "cpu" and not device.info.fp64:
        pytest.skip(f"{device.info.id}: no fp64, FLOAT64 is refused")


def lowered(device, limit: int):
    """The variant's own backend (fp64 off, GPU paths, bounds-checked, ...) with its largest buffer lowered."""
    return gm.Device(device.backend, device.feature_level, max_alloc_bytes=limit)


def counting(monkeypatch):
    """The pieces a call is cut into, and the devices that summed a piece exactly (read back, or
    added into running totals on the device)."""
    from gpu_mean.runtime import device as device_mod
    seen, real, real_add = [], gm.Device.exact_partials, device_mod._DeviceTotals.add
    monkeypatch.setattr(gm.Device, "exact_partials", lambda self, *a: seen.append(self) or real(self, *a))
    monkeypatch.setattr(device_mod._DeviceTotals, "add",
                        lambda self, *a: seen.append(self.device) or real_add(self, *a))
    return seen


# the exponent of each type's smallest subnormal: the unit of the exact partials' digits
UNIT = {np.dtype(np.float32): -149, np.dtype(np.float16): -24, BF16: -133, F64: -1074}


def decoded_totals(digits: np.ndarray) -> list:
    """The tests' own reading of exact partials: digit j weighs 2^(16 j) units (signed int64 digits,
    so any normalization reads the same)."""
    d = digits.reshape(digits.shape[0], -1).astype(object)
    return [sum(int(d[j, k]) << (16 * j) for j in range(d.shape[0])) for k in range(d.shape[1])]


def oracle_totals(arr: np.ndarray, axes: tuple, dt) -> list:
    """The exact sum over ``axes`` of each output's finite values, in units of the type's smallest
    subnormal (an integer: every value is a multiple of it), from the independent oracle."""
    kept = [d for d in range(arr.ndim) if d not in axes]
    rows = np.transpose(arr, kept + list(axes)).reshape(-1, int(np.prod([arr.shape[a] for a in axes])))
    r64 = rows.astype(np.float64)
    finite = np.where(np.isfinite(r64), r64, 0.0)
    out = []
    for total in oracle.exact_sum_rows(finite):
        t = total * Fraction(2) ** -UNIT[dt]
        assert t.denominator == 1
        out.append(int(t))
    return out


def oracle_flags(arr: np.ndarray, axes: tuple) -> np.ndarray:
    """(a NaN, a +inf, a -inf, every value -0.0) per output, kept as size 1, in the tests' words."""
    r64 = arr.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.stack([np.isnan(r64).any(axis=axes, keepdims=True), (r64 == np.inf).any(axis=axes, keepdims=True),
                         (r64 == -np.inf).any(axis=axes, keepdims=True),
                         ((r64 == 0) & np.signbit(r64)).all(axis=axes, keepdims=True)])


@pytest.mark.parametrize("dt", ALL, ids=ALL_IDS)
def test_device_partials_are_the_exact_digits(device_or_checked, dt):
    """Device.exact_partials gives each output's exact total (its finite values summed exactly, as the
    independent oracle sums them) and the inf / NaN / -0.0 flags of the same values, over every class
    of axes (rows, columns, a middle axis, all axes, strided views)."""
    held64(device_or_checked, dt)
    rng = np.random.default_rng(31)
    x = adversarial_matrix(dt, rng, n=96)                     # (outputs, 96 values), inf and NaN rows too
    cube = x.reshape(x.shape[0], 8, 12)
    for arr, axes in ((x, (1,)), (x, (0,)), (x, (0, 1)), (cube, (1,)), (cube, (0, 2)), (x[::2, 1::3], (1,))):
        digits, flags = device_or_checked.exact_partials(arr, axes, data_type_of(arr.dtype, "test"))
        assert decoded_totals(digits) == oracle_totals(arr, axes, dt), f"{arr.shape} {axes}"
        np.testing.assert_array_equal(flags, oracle_flags(arr, axes), err_msg=f"{arr.shape} {axes}")


@pytest.mark.parametrize("dt", ALL, ids=ALL_IDS)
def test_split_chunkings_on_the_device_give_one_launch_bits(device_or_checked, dt, monkeypatch):
    """A cut reduced axis at several limits, and random permutations of the values: the bits of one
    launch, which are the oracle's; the pieces are summed by the device itself (no CPU fallback)."""
    device = device_or_checked
    held64(device, dt)
    rng = np.random.default_rng(41)
    x = np.ascontiguousarray(adversarial_matrix(dt, rng).T)             # (240 values, outputs)
    want = want_reduce(x, (0,), dt)
    one = gm.reduce_mean(x, axes=[0], device=device)
    check_bits(one, want, f"{dt} one launch on {device.info.id}")
    seen = counting(monkeypatch)
    for limit in (1 << 16, 12288, 8192, 4096):
        small = lowered(device, limit)
        seen.clear()
        check_bits(gm.reduce_mean(x, axes=[0], device=small), want, f"{dt} pieces of at most {limit} bytes")
        if limit < x.nbytes:
            assert len(seen) > 1 and all(d is small for d in seen), (limit, len(seen))
    for seed in range(2):
        perm = np.ascontiguousarray(x[np.random.default_rng(seed).permutation(x.shape[0])])
        check_bits(gm.reduce_mean(perm, axes=[0], device=lowered(device, 4096)), want, f"{dt} permuted {seed}")
    # every axis: one long row of all the values, cut into pieces
    flat = np.ascontiguousarray(np.concatenate([x[:, :4], x[:, -8:]], axis=1))   # cancelling, spanning, normal
    total = want_reduce(flat, (0, 1), dt)
    check_bits(gm.reduce_mean(flat, axes=None, device=device), total, f"{dt} all axes, one launch")
    check_bits(gm.reduce_mean(flat, axes=None, device=lowered(device, 4096)), total, f"{dt} all axes in pieces")


@pytest.mark.parametrize("dt", ALL, ids=ALL_IDS)
@pytest.mark.parametrize("name", ["max_cancelling", "ties", "subnormal", "negative_zero", "nonfinite"])
def test_named_sets_in_pieces(device, dt, name):
    """Each named set alone, long enough to be cut: +-largest values that cancel beside a small one,
    exact ties, subnormals, -0.0 only (the result -0.0), inf and NaN (IEEE's)."""
    held64(device, dt)
    rng = np.random.default_rng(51)
    info = {np.dtype(np.float16): (65504.0, 2.0 ** -24), np.dtype(np.float32): (3.4028234663852886e38, 2.0 ** -149),
            BF16: (3.3895313892515355e38, 2.0 ** -133), F64: (np.finfo(np.float64).max, 5e-324)}[dt]
    n, cols = 3000, 6
    if name == "max_cancelling":
        v = as_type(rng.uniform(0.5, 1.0, (n // 2 - 1, cols)) * info[0], dt)
        x = np.concatenate([v, -v, as_type(np.full((2, cols), 3.0), dt)])
    elif name == "ties":
        a = as_type(np.ldexp(rng.uniform(1.0, 2.0, cols), 3), dt)
        b = np.nextafter(a, dt.type(np.inf)).astype(dt) if dt != BF16 else (a.view(np.uint16) + 1).view(BF16)
        x = np.tile(np.stack([a, b]), (n // 2, 1))
    elif name == "subnormal":
        x = as_type(rng.integers(-50, 51, (n, cols)) * info[1], dt)
    elif name == "negative_zero":
        x = np.full((n, cols), -0.0, dt)
    else:
        x = as_type(rng.standard_normal((n, cols)), dt)
        x[5, 0], x[2999, 1], x[7, 2], x[100, 2], x[1500, 3] = np.nan, np.inf, np.inf, -np.inf, -np.inf
    x = np.ascontiguousarray(x[rng.permutation(n)])
    want = want_reduce(x, (0,), dt)
    check_bits(gm.reduce_mean(x, axes=[0], device=device), want, f"{name} one launch")
    check_bits(gm.reduce_mean(x, axes=[0], device=lowered(device, 4096)), want, f"{name} in pieces")
    if name == "negative_zero":
        assert np.all(np.signbit(gm.reduce_mean(x, axes=[0], device=lowered(device, 4096)).astype(np.float32)))


@pytest.mark.parametrize("dt", ALL, ids=ALL_IDS)
def test_dask_chunkings_on_the_device_give_one_launch_bits(device, dt):
    """gpu_mean.dask on the device at several chunkings and fan-ins: the bits of one launch and of
    the oracle; every float chunk's partial is exact (digits, PartialSum.digits, or exact double-doubles,
    PartialSum.exact_dd), none a FLOAT64 total."""
    held64(device, dt)
    da = pytest.importorskip("dask.array")
    import gpu_mean.dask as gmd
    from gpu_mean.dask import partials
    rng = np.random.default_rng(61)
    x = adversarial_matrix(dt, rng)                                       # (outputs, 240 values)
    want = want_reduce(x, (1,), dt)
    check_bits(gm.reduce_mean(x, axes=[1], device=device), want, f"{dt} one launch")
    p = partials.chunk_sum(x[:, :50], (1,), device=device)
    # exact digits, or (an OpenCL CPU device, issue 43) exact double-doubles with digits for what they
    # cannot hold: never an inexact FLOAT64 total
    assert (p.digits is not None and p.hi is None) or (p.exact_dd and device.info.backend != "cpu")
    for chunks, every in (((x.shape[0], 240), None), ((7, 17), 2), ((x.shape[0], 1), 3), ((5, 100), 4)):
        got = gmd.reduce_mean(da.from_array(x, chunks=chunks), [1], device=device,
                              split_every=every).compute(scheduler="synchronous")
        check_bits(got, want, f"{dt} Dask chunks {chunks}, split_every={every}")
    perm = x[:, rng.permutation(x.shape[1])]
    got = gmd.reduce_mean(da.from_array(perm, chunks=(9, 31)), [1], device=device).compute(scheduler="synchronous")
    check_bits(got, want, f"{dt} Dask, permuted")
    # a chunk past one buffer of the device: its pieces' exact partials, added
    got = gmd.reduce_mean(da.from_array(x, chunks=(x.shape[0], 120)), [1], device=lowered(device, 4096),
                          split_every=2).compute(scheduler="synchronous")
    check_bits(got, want, f"{dt} Dask chunks past one buffer")


def test_limbs_tensor_counts_against_the_limit(device, monkeypatch):
    """A device's pieces are planned so that the limbs it writes (K + 1 longs per output) fit one
    buffer too: many outputs of few values are cut along the kept axis as well."""
    x = as_type(np.random.default_rng(71).standard_normal((40, 2000)), np.dtype(np.float32))
    seen = counting(monkeypatch)
    small = lowered(device, 8192)
    got = gm.reduce_mean(x, axes=[0], device=small)
    check_bits(got, want_reduce(x, (0,), np.dtype(np.float32)), "outputs cut")
    if device.info.backend != "cpu":
        assert len(seen) >= 2000 * 88 // 8192
    assert split.DEVICE_LIMBS[data_type_of(x.dtype, "t")] == 10


def test_cuda_glue_with_a_stand_in_gpu(monkeypatch):
    """The CUDA backend's exact partials (programs.LimbsProgram over CudaBackend's verbs, a stand-in
    CuPy): the GPU-shaped gm_reduce_limbs of the GM_EXACT variant, 64-wide blocks, a grid within 8
    blocks per SM, the arguments in the kernel's order; the launch emulated on the host (each (run,
    output) pair's limbs from the values, as the kernel writes them) so that the runs' sum and the
    conversion give the CPU device's digits."""
    from fake_cupy import fake_backend

    from gpu_mean.kernels import programs
    be = fake_backend([])
    be.checked, be.fp64 = False, True
    mem, built, launched = {}, [], []

    class Ptr(int):
        @property
        def ptr(self):
            return int(self)

    def alloc(nbytes):
        p = Ptr(len(mem) + 1)
        mem[p] = np.zeros(nbytes, np.uint8)
        return p

    def write(native, offset, data):
        mem[native][offset:offset + data.nbytes] = data.reshape(-1).view(np.uint8)

    def kernel(filename, macros, name):
        built.append((filename, name, macros.get("GM_EXACT"), macros.get("EX_WG")))

        def handle(grid, block, args, stream=None):
            launched.append((name, grid, block))
            inp, _, part, _, meta, n_out, n, n_chunks, clen = args
            vals = mem[int(inp)].view(np.float32).reshape(int(n), int(n_out))
            words = mem[int(part)].view(np.int64).reshape(int(n_chunks), int(n_out), 11)
            for c in range(int(n_chunks)):
                run = vals[c * int(clen):(c + 1) * int(clen)]
                for k, t in enumerate(exact.to_ints(exact.limbs(run, (0,), run.dtype).reshape(19, -1))):
                    words[c, k, :10] = [(t >> (32 * j)) & 0xFFFFFFFF for j in range(9)] + [t >> 288]
                    words[c, k, 10] = 8 * bool(np.any((run[:, k] != 0) | ~np.signbit(run[:, k])))
        return handle

    monkeypatch.setattr(be, "alloc", alloc, raising=False)
    monkeypatch.setattr(be, "write", write, raising=False)
    monkeypatch.setattr(be, "read", lambda native, offset, nbytes: mem[native][offset:offset + nbytes].copy(),
                        raising=False)
    monkeypatch.setattr(be, "kernel", kernel, raising=False)
    x = as_type(np.random.default_rng(81).standard_normal((20000, 3)) * 1e30, np.dtype(np.float32))
    plan = programs.planning.plan_reduce(KernelOp.REDUCE_MEAN, data_type_of(x.dtype, "t"), x.shape, (3, 1),
                                         (0, 1), (0,))
    words = be.exact_limbs(plan, x)
    assert built == [("reduce_gpu.cl", "gm_reduce_limbs", 1, 64)]
    (name, grid, block), = launched
    assert block == (64,) and 1 <= grid[0] <= 132 * 8
    digits, flags = exact.from_device_limbs(words, x.dtype, (1, 3))
    np.testing.assert_array_equal(digits, exact.limbs(x, (0,), x.dtype))
    np.testing.assert_array_equal(flags, exact.nonfinite_flags(x, (0,)))


def float64_blocks(rng) -> dict:
    """FLOAT64 columns of 5000 values for gm_reduce_limbs' 128-bit block sums (exponent fields within
    63 of each other) and the blocks that fall back value by value (a wider span, inf or NaN)."""
    n = 5000

    def span(lo, width, signs=True):
        m = rng.uniform(1.0, 2.0, n)
        v = np.ldexp(m, rng.integers(lo, lo + width + 1, n))
        return np.where(rng.random(n) < 0.5, -v, v) if signs else v

    cols = {
        "normal": rng.standard_normal(n),
        "span_63": span(-30, 63),                               # the widest block sum: 2^(53 + 63 + 10)
        "span_63_same_sign": span(-30, 63, signs=False),        # carries into the high word
        "span_64": span(-30, 64),                               # one exponent too wide: value by value
        "top": span(1023 - 63, 63),                             # up to DBL_MAX's binade: the top limbs
        "max_cancelling": np.concatenate([np.full(n // 2, np.finfo(np.float64).max),
                                          np.full(n // 2, -np.finfo(np.float64).max)]) + 0.0,
        "subnormal_and_small": np.concatenate([rng.integers(-2 ** 52, 2 ** 52, n // 2) * 5e-324,
                                               span(-1022, 60)[:n - n // 2]]),
        "zeros_and_one": np.where(rng.random(n) < 0.999, -0.0, 0.0) + np.where(np.arange(n) == 4321, 1.0, 0.0) * 1,
        "negative_zero": np.full(n, -0.0),
        "one_nan": np.where(np.arange(n) == 3000, np.nan, rng.standard_normal(n)),
        "whole_range": span(-1074, 2097)[:n].clip(-np.finfo(np.float64).max, np.finfo(np.float64).max),
    }
    cols["max_cancelling"][17] = 3.0
    cols["negative_zero"][:] = -0.0
    return cols


def test_float64_blocks_are_exact(device_or_checked):
    """FLOAT64 partials of long columns and rows, whose blocks the kernel sums in 128-bit integers
    where the exponents allow and value by value elsewhere: runtime/exact.py's digits and flags, bit
    for bit; random permutations and cuts of the same values give the one launch's bits."""
    device = device_or_checked
    held64(device, F64)
    rng = np.random.default_rng(91)
    cols = float64_blocks(rng)
    x = np.ascontiguousarray(np.stack(list(cols.values()), axis=1))      # (5000 values, outputs)
    for arr, axes in ((x, (0,)), (np.ascontiguousarray(x.T), (1,)), (x[::3], (0,)), (x, (0, 1))):
        digits, flags = device.exact_partials(arr, axes, data_type_of(arr.dtype, "test"))
        np.testing.assert_array_equal(digits, exact.limbs(arr, axes, arr.dtype), err_msg=f"{arr.shape} {axes}")
        np.testing.assert_array_equal(flags, exact.nonfinite_flags(arr, axes), err_msg=f"{arr.shape} {axes}")
    want = want_reduce(x, (0,), F64)
    check_bits(gm.reduce_mean(x, axes=[0], device=device), want, "float64 one launch")
    check_bits(gm.reduce_mean(x, axes=[0], device="cpu"), want, "float64 on the CPU device")
    for seed, limit in ((0, 1 << 16), (1, 20000), (2, 8192)):
        perm = np.ascontiguousarray(x[np.random.default_rng(seed).permutation(x.shape[0])])
        check_bits(gm.reduce_mean(perm, axes=[0], device=lowered(device, limit)), want,
                   f"float64 permuted {seed}, pieces of at most {limit} bytes")


def test_float64_dask_chunks_on_a_device_without_fp64(device):
    """A device without fp64 holds no FLOAT64 tensor: gpu_mean.dask sums its FLOAT64 chunks on the
    CPU device (a warning says so), exact digits all the same, the CPU device's bits; with fp64 the
    device's own superaccumulator gives them, with no warning."""
    da = pytest.importorskip("dask.array")
    import warnings

    import gpu_mean.dask as gmd
    from gpu_mean.dask import partials
    x = np.ascontiguousarray(np.stack(list(float64_blocks(np.random.default_rng(93)).values()))[:, :600])
    want = want_reduce(x, (1,), F64)
    before = partials.stats["cpu_fallback"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = partials.chunk_sum(x, (1,), device=device)
        got = gmd.reduce_mean(da.from_array(x, chunks=(5, 77)), [1], device=device).compute(scheduler="synchronous")
    np.testing.assert_array_equal(p.digits, exact.limbs(x, (1,), x.dtype))
    check_bits(got, want, f"float64 Dask on {device.info.id}")
    fell_back = [w for w in caught if "no fp64" in str(w.message)]
    if device.info.backend != "cpu" and not device.info.fp64:
        assert fell_back and partials.stats["cpu_fallback"] > before
    else:
        assert not fell_back and partials.stats["cpu_fallback"] == before


@pytest.mark.parametrize("dt", ALL, ids=ALL_IDS)
def test_split_pieces_combine_on_the_device(device_or_checked, dt, monkeypatch):
    """Issue 26: on an OpenCL (or CUDA) device a split call's pieces add their exact partials into
    running totals on the device (reduce_limbs.h: gm_limbs_add) and are rounded there once
    (gm_limbs_round): no piece's limbs are read back (LimbsProgram.run never runs), only the means;
    the oracle's bits, one launch's and the CPU device's, at several cuts and permutations; every
    axis cut; named sets (+-largest cancelling, whole exponent range, subnormals, ties, -0.0 alone,
    inf and NaN: adversarial_matrix's rows)."""
    device = device_or_checked
    held64(device, dt)
    if device.info.backend == "cpu":
        pytest.skip("the CPU device adds its pieces' digits in numpy")
    from gpu_mean.kernels import programs
    reads, means, real_mean = [], [], programs.LimbsTotals.mean
    monkeypatch.setattr(programs.LimbsProgram, "run", lambda self, data: reads.append(1) / 0)
    monkeypatch.setattr(programs.LimbsTotals, "mean",
                        lambda self, *a: means.append(self.n_total) or real_mean(self, *a))
    seen = counting(monkeypatch)
    rng = np.random.default_rng(101)
    x = np.ascontiguousarray(adversarial_matrix(dt, rng).T)             # (240 values, outputs)
    want = want_reduce(x, (0,), dt)
    check_bits(gm.reduce_mean(x, axes=[0], device="cpu"), want, f"{dt} the CPU device")
    one = gm.reduce_mean(x, axes=[0], device=device)
    check_bits(one, want, f"{dt} one launch")
    totals = x.shape[1] * 8 * (split.DEVICE_LIMBS[data_type_of(dt, "t")] + 1)    # the running totals fit too
    limits = [limit for limit in (4096, 8192, 12288, 24576, 32768, 49152) if totals <= limit < x.nbytes]
    assert len(limits) >= 2
    for limit in limits:
        seen.clear()
        means.clear()
        got = gm.reduce_mean(x, axes=[0], device=lowered(device, limit))
        check_bits(got, want, f"{dt} combined on the device, pieces of at most {limit} bytes")
        assert len(seen) > 1 and means == [x.shape[1]], (limit, len(seen), means)
    for seed in range(2):
        perm = np.ascontiguousarray(x[np.random.default_rng(seed).permutation(x.shape[0])])
        check_bits(gm.reduce_mean(perm, axes=[0], device=lowered(device, limits[seed])), want, f"{dt} permuted {seed}")
    flat = np.ascontiguousarray(np.concatenate([x[:, :4], x[:, -8:]], axis=1))
    check_bits(gm.reduce_mean(flat, axes=None, device=lowered(device, 4096)), want_reduce(flat, (0, 1), dt),
               f"{dt} all axes combined on the device")
    assert not reads


def test_large_pieces_combine_on_the_device(device):
    """Pieces of 4 MiB and more (PoCL backs such buffers with host memory, USE_HOST_PTR): each piece's
    input buffer outlives the kernels that read it while the next piece is prepared (LimbsTotals
    holds it until a blocking command; freed early, the kernel read freed memory and the process
    crashed); the CPU device's bits."""
    x = as_type(np.random.default_rng(111).standard_normal((2048, 2048)), np.dtype(np.float32))
    got = gm.reduce_mean(x, axes=[0], device=lowered(device, 4 << 20))     # four pieces of 4 MiB
    check_bits(got, gm.reduce_mean(x, axes=[0], device="cpu"), "float32 pieces of 4 MiB")
