"""The GPU-shaped reductions (issue 40), run on PoCL with the geometry CUDA computes for a 132-SM GPU
(``opencl:0-gpupaths``, with and without fp64): what a GPU would launch, how many outputs the main
pass leaves open, and that an open output is redone by the kernel that stored it.

- No exact pass of its own: a reduction is one launch, or two when it is split (the finalize pass);
  an output the bound test leaves open is summed exactly by the work-group that stored it
  (reduce_gpu_redo.h), so an execute with nothing open does no exact work at all.
- Short rows (at most 32 values: gm_reduce_tile, gm_reduce_short) are proven exact by their exponent span where it
  allows (reduce_gpu.cl: gm_span_store), exact ties included: no output of normal, uniform, ones or
  centered data is left open. Columns the same way, by their smallest exponent field and the sum of
  their magnitudes, through the chunk partials of a split column (reduce_gpu_span.h).
- Every class on centered data that no span proof takes (values minus their mean over the reduced
  axes, one of them 2^-100: every FLOAT32 output open) gives the oracle's bits: the redo path of each
  kernel (row, short, column, general, finalize).
The span-limit rows run on every device; the rest on the GPU-shaped ones.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import oracle
import pytest
from helpers import check_reduce_mean, exact_values

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.kernels import reduce_kernels

BF16 = np.dtype(ml_dtypes.bfloat16)
TYPES = {"float32": (np.dtype(np.float32), D.FLOAT32), "float16": (np.dtype(np.float16), D.FLOAT16),
         "bfloat16": (BF16, D.BFLOAT16)}
# the profiler's reduction classes (gpu_mean/checks/cases.py), small enough for PoCL
CLASSES = {"R1": ((1 << 16,), (0,)), "R2": ((16, 4096), (1,)), "R3": ((1 << 13, 8), (1,)),
           "R4": ((512, 1024), (0,)), "R5": ((1 << 13, 16), (0,)), "R6": ((4, 16, 32, 32), (0, 2, 3))}


def gpu_shaped(device, fp64: bool = False):
    """Skip where the device runs the CPU-shaped kernels, or (``fp64``) has no fp64: its float-float
    pair proves no exact tie (no span test: short rows of eight normal FLOAT32 values leave about one
    in ten open there, redone exactly)."""
    be = device.backend
    if not getattr(be, "gpu_paths", False) and device.info.backend != "cuda":
        pytest.skip(f"{device.info.id} runs the CPU-shaped kernels")
    if fp64 and not device.info.fp64:
        pytest.skip(f"{device.info.id}: no fp64, no span proof")


def data(kind: str, shape, axes, npdt, seed=7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.standard_normal(shape)
    elif kind == "uniform":
        x = rng.uniform(0.0, 1.0, shape)
    elif kind == "ones":
        x = np.ones(shape)
    elif kind == "centered":    # every mean a rounding residue near zero
        x = rng.standard_normal(shape)
        x = x - x.mean(axis=axes, keepdims=True)
    else:   # "unprovable": centered, with one value 2^-100 per output, which no span proof takes
        x = rng.standard_normal(shape)
        first = tuple(slice(0, 1) if d in axes else slice(None) for d in range(len(shape)))
        x[first] = 0.0
        n = np.prod([shape[d] for d in axes])
        x = x - x.sum(axis=axes, keepdims=True) / (n - 1)
        x[first] = 2.0 ** -100
    return x.astype(npdt)


def _plan(dt: D, shape, axes):
    from helpers import reduce_plan
    return reduce_plan(dt, shape, axes)


def reduce_op(device, dt: D, shape, axes):
    out = tuple(1 if d in axes else s for d, s in enumerate(shape))
    xd, yd = gm.TensorDesc(dt, shape), gm.TensorDesc(dt, out)
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, axes) if dt != D.BFLOAT16 else \
        gm.ext.ReduceMeanDesc(xd, yd, axes)
    return device.compile_operator(device.create_operator(desc)), xd, yd


def run_counted(device, dt: D, x: np.ndarray, axes):
    """(result, kernels launched per execute, outputs the main pass left open or None)."""
    cop, xd, yd = reduce_op(device, dt, x.shape, axes)
    X = device.create_buffer(xd.total_size_in_bytes)
    X.write(x)
    Y = device.create_buffer(yd.total_size_in_bytes)
    size = cop.binding_properties.temporary_resource_size
    T = device.create_buffer(size) if size else None
    cop.execute(inputs=[X], outputs=[Y], temporary=T)
    return Y.read_tensor(yd), cop.launches, cop.open_outputs(T)


@pytest.mark.parametrize("cls", list(CLASSES))
@pytest.mark.parametrize("tname", list(TYPES))
def test_one_launch_or_two_and_no_exact_pass(device, cls, tname):
    """At most two kernels per execute (main, and the finalize pass of a split reduction), whatever
    the data: the open outputs are redone inside them (before issue 40: a third, gm_reduce_exact,
    after every execute, scanning every output's flag). A split of few outputs of at least
    reduce_kernels.SPREAD_MIN_N values each is the exception: the next test."""
    gpu_shaped(device)
    npdt, dt = TYPES[tname]
    shape, axes = CLASSES[cls]
    cop, _, _ = reduce_op(device, dt, shape, axes)
    v = cop.program.variant
    launches = [v.main.kernel] + ([v.finalize.kernel] if v.finalize else [])
    assert cop.launches == len(launches) <= 2 and "gm_reduce_exact" not in launches and not v.spread


@pytest.mark.parametrize("shape, axes", [((1 << 15,), (0,)), ((4, 1 << 14), (1,)), ((1 << 14, 3), (0,))])
@pytest.mark.parametrize("tname", ["float32", "bfloat16"])
def test_open_outputs_of_few_long_sums_are_redone_across_the_device(device, shape, axes, tname, monkeypatch):
    """Cancelling values and one 2^-100 per output (no bound or span proof settles the sum) over 2^20 and more values
    per output, in one, three and four outputs (the row kernel, the column kernel), on the GPU-shaped devices
    with or without fp64 (the CPU shape redoes its open outputs in its own kernels, which other tests cover), here from
    2^14 values (SPREAD_MIN_N lowered, so that the oracle stays quick: 4 to 8 runs an output): the oracle's
    bits; every output is left open by the finalize pass and redone by gm_spread_redo across many work-groups,
    a run of the output each, the last to arrive adding the runs and rounding once (before: by the one
    work-group that finalized it, one SM's work on a GPU: 280 ms for 2^26 values on the H200; then in two
    launches more); normal data opens none, through the same three launches."""
    gpu_shaped(device)
    npdt, dt = TYPES[tname]
    n_out = math.prod(shape) // math.prod(shape[a] for a in axes)
    big = reduce_kernels.gpu_variant(_plan(dt, tuple(s * 64 if d in axes else s for d, s in enumerate(shape)), axes),
                                     sms=device.backend.gpu_sms)
    assert big.spread is not None       # 2^20 values and more an output: spread as they are
    monkeypatch.setattr(reduce_kernels, "SPREAD_MIN_N", 1 << 14)
    (a,) = axes
    half = tuple(s // 2 if d == a else s for d, s in enumerate(shape))
    y = np.random.default_rng(40).standard_normal(half).astype(npdt).astype(np.float64)
    cancel = np.concatenate([y, -y], axis=a)        # each value beside its negation: a zero total
    at = [slice(None)] * len(shape)
    at[a] = 0
    cancel[tuple(at)] = 2.0 ** -100                 # and one 2^-100 in place of a pair: the total 2^-100,
    at[a] = shape[a] // 2                           # a mean far below any bound of its sum
    cancel[tuple(at)] = 0.0
    for x, want_open in ((cancel.astype(npdt), n_out), (data("normal", shape, axes, npdt, seed=40), 0)):
        got = check_reduce_mean(device, dt, x, axes)
        if want_open:
            assert (got.astype(np.float64) == 2.0 ** -100 / shape[a]).all()
        v = reduce_op(device, dt, shape, axes)[0].program.variant
        assert v.spread is not None and v.spread_runs > 1 and v.macros["K_SPREAD"] == 1
        _, launches, opened = run_counted(device, dt, x, axes)
        # without fp64 the pair's bound may leave a normal output open, BFLOAT16's settle a tiny one
        assert launches == 3 and (opened == want_open if device.info.fp64 else opened >= min(want_open, 1))


@pytest.mark.parametrize("tname", ["float32", "bfloat16"])
def test_a_device_without_device_wide_fences_redoes_in_the_finalize_pass(device, tname, monkeypatch):
    """The spread redo's last-arriving group reads what the other groups wrote after a fence, which
    must order global memory for the whole device: CUDA's __threadfence does, OpenCL 1.2's mem_fence
    on a GPU only within the work-group (KernelBackend.device_fence). Without it the plan keeps the
    open outputs in the finalize pass (two launches), and the mean is the oracle's bits: cancelling
    values and one 2^-100, every output open (SPREAD_MIN_N lowered as above)."""
    gpu_shaped(device)
    be = device.backend
    assert be.device_fence == (device.info.backend == "cuda" or device.info.device_type == "CPU")
    monkeypatch.setattr(reduce_kernels, "SPREAD_MIN_N", 1 << 14)
    npdt, dt = TYPES[tname]
    n = 1 << 15
    y = np.random.default_rng(41).standard_normal(n // 2).astype(npdt).astype(np.float64)
    x = np.concatenate([y, -y])
    x[0], x[n // 2] = 2.0 ** -100, 0.0
    x = x.astype(npdt)
    monkeypatch.setattr(be, "device_fence", False, raising=False)
    plan_v = reduce_kernels.gpu_variant(_plan(dt, (n,), (0,)), sms=be.gpu_sms, fp64=be.fp64, spread=False)
    assert plan_v.spread is None and plan_v.macros["K_SPREAD"] == 0
    cop, _, _ = reduce_op(device, dt, (n,), (0,))
    if cop.program.variant.spread is not None:      # an earlier test's program of the same plan, cached
        pytest.skip("the device's program cache holds this plan's spread variant")
    got, launches, opened = run_counted(device, dt, x, (0,))
    assert launches == 2 and (opened == 1 or not device.info.fp64)
    assert got.astype(np.float64).item() == 2.0 ** -100 / n


@pytest.mark.parametrize("kind", ["normal", "uniform", "ones", "centered"])
@pytest.mark.parametrize("n", [2, 5, 8, 16, 32])
@pytest.mark.parametrize("tname", ["float32", "bfloat16"])
def test_short_rows_leave_nothing_open(device, kind, n, tname):
    """Rows of at most 32 values: the exponent span proves each row's FLOAT64 sum exact, ties
    included (before issue 40: about one row of eight normal FLOAT32 values in ten was an exact tie
    the bound could not settle, and went to the exact pass)."""
    gpu_shaped(device, fp64=True)
    npdt, dt = TYPES[tname]
    x = data(kind, (2048, n), (1,), npdt, seed=n)
    got, launches, open_ = run_counted(device, dt, x, (1,))
    # dense rows of a power-of-two length: a work-item per row from local memory; others: lanes per row
    assert cop_name(device, dt, x.shape, (1,)) == ("gm_reduce_tile" if n & (n - 1) == 0 else "gm_reduce_short")
    assert launches == 1 and open_ == 0
    check_reduce_mean(device, dt, x, (1,))


def cop_name(device, dt, shape, axes) -> str:
    return reduce_op(device, dt, shape, axes)[0].program.variant.main.kernel


@pytest.mark.parametrize("cls", list(CLASSES))
@pytest.mark.parametrize("kind", ["normal", "uniform", "ones"])
@pytest.mark.parametrize("tname", list(TYPES))
def test_ordinary_data_leaves_nothing_open(device, cls, kind, tname):
    """Normal, uniform and ones data: every output settled by the main pass (the bound or the span).
    R4 (columns of 512 rows, split in chunks on a 132-SM GPU) is settled by the columns' span proof
    (reduce_gpu_span.h): about 1 normal column in 500 is an exact tie of the rounding, which no bound
    settles (test_columns_exact_ties_need_the_span_proof)."""
    gpu_shaped(device, fp64=True)
    npdt, dt = TYPES[tname]
    shape, axes = CLASSES[cls]
    x = data(kind, shape, axes, npdt)
    _, _, open_ = run_counted(device, dt, x, axes)
    assert open_ in (0, None), f"{open_} outputs open"


@pytest.mark.parametrize("cls", list(CLASSES) + ["general", "split-rows", "split-cols"])
@pytest.mark.parametrize("tname", list(TYPES))
def test_centered_data_redone_in_place_give_the_oracles_bits(device, cls, tname):
    """Centered data whose one value 2^-100 per output keeps the span proof out (its smallest exponent
    field makes the limit tiny): every FLOAT32 and BFLOAT16 output is left to the bound, which cannot
    place a rounding residue, so they are open: each kernel's redo (row, short, column, finalize; the
    general kernel by one work-item) gives the correctly rounded mean. (The CPU shape's redo takes the
    adversarial rows of test_correct_rounding.py; here the GPU shape's alone, to keep the suite's time.)"""
    gpu_shaped(device)
    npdt, dt = TYPES[tname]
    if cls == "general":    # a broadcast input (a zero innermost stride): the general kernel
        base = data("unprovable", (64, 40), (1,), npdt)
        xd = gm.TensorDesc(dt, (64, 40, 3), strides=(40, 1, 0))
        yd = gm.TensorDesc(dt, (64, 1, 1))
        desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, (1, 2)) if dt != D.BFLOAT16 else \
            gm.ext.ReduceMeanDesc(xd, yd, (1, 2))
        cop = device.compile_operator(device.create_operator(desc))
        if getattr(device.backend, "gpu_paths", False):
            assert cop.program.variant.main.kernel == "gm_reduce_general"
        X = device.create_buffer(xd.total_size_in_bytes)
        X.write(base)
        Y = device.create_buffer(yd.total_size_in_bytes)
        cop.execute(inputs=[X], outputs=[Y])
        want = oracle.reduce_mean(np.repeat(base[:, :, None], 3, axis=2), (1, 2), npdt)
        assert oracle.equal_bits(Y.read_tensor(yd), want)
        return
    # split-cols: 4096 columns of 256 rows, split in a few chunks: the finalize pass's FIN_LANES form
    extra = {"split-rows": ((4, 1 << 16), (1,)), "split-cols": ((256, 4096), (0,))}
    shape, axes = extra[cls] if cls in extra else CLASSES[cls]
    x = data("unprovable", shape, axes, npdt)
    if cls == "split-cols" and getattr(device.backend, "gpu_paths", False):
        macros = reduce_op(device, dt, shape, axes)[0].program.variant.macros
        assert macros["FIN_LANES"] == 1, macros
    check_reduce_mean(device, dt, x, axes)
    if getattr(device.backend, "gpu_paths", False) and device.info.fp64 and tname == "float32" and cls != "R3":
        opened = run_counted(device, dt, x, axes)[2]
        assert opened and opened > 0, f"{cls}: nothing left open, no redo ran"


def test_short_rows_at_the_span_limit(device):
    """Rows of eight FLOAT32 values (docs/design.md, "Short rows on the GPU"; the CPU shape's columns take the
    same rows, test_fast_paths_exact.py):
    - exact ties (the mean of seven ones and 1 + 2^-21 is 1 + 2^-24) round to even, an exact mean
      stays: the span proves them without a redo; the same negated;
    - 27 binades, beyond the limit for n = 8 (28 - 3 = 25): 1, 1, 1, 1, 1.96875 + 2^-21, 1.96875,
      2^-4 - 2^-27, 2^-27 (1 + 2^-23), whose exact mean 1 + 2^-24 + 2^-53 lies just above a midpoint;
      the lanes' double tree (offsets 4, 2, 1) loses the 2^-50 to a tie at 8, so a limit two binades
      looser would round it to 1.0; the bound cannot settle it either, so it is redone exactly;
    - zeros alone (-0.0 and +0.0 rules), subnormals, infinities, inf with -inf."""
    tie = [1.0] * 7 + [1.0 + 2.0 ** -21]
    exact = [1.0] * 7 + [1.0 + 2.0 ** -20]
    wide = [1.0] * 4 + [1.96875 + 2.0 ** -21, 1.96875, 2.0 ** -4 - 2.0 ** -27, 2.0 ** -27 * (1 + 2.0 ** -23)]
    neg = [[-v for v in r] for r in (tie, exact, wide)]

    def mean(rows):
        return check_reduce_mean(device, D.FLOAT32, exact_values(np.array(rows * 8), np.float32), (1,))
    got = mean([tie, exact, neg[0], neg[1]])
    assert (got[0::4] == np.float32(1.0)).all() and (got[1::4] == np.float32(1.0 + 2.0 ** -23)).all()
    got = mean([wide, neg[2]])
    assert (got[0::2] == np.float32(1.0 + 2.0 ** -23)).all()
    got = mean([[-0.0] * 8, [-0.0] * 7 + [0.0]])
    assert (got[0::2].view(np.uint32) == 0x80000000).all() and (got[1::2].view(np.uint32) == 0).all()
    mean([[2.0 ** -149] * 7 + [2.0 ** -148], [np.inf] * 8, [np.inf] * 4 + [-np.inf] * 4])


@pytest.mark.parametrize("n, axis", [(8, 1), (512, 1), (512, 0), (1 << 14, 1)])
@pytest.mark.parametrize("tname", ["float32", "bfloat16"])
def test_a_subnormal_that_breaks_a_tie_is_no_zero_to_the_span_proofs(device, n, axis, tname):
    """n - 2 ones, 2 + n 2^-p and the smallest subnormal: the exact mean lies just above the midpoint
    1 + 2^-p, so it rounds up, but the FLOAT64 sum cannot hold the subnormal beside n and lands on the
    midpoint, which rounds down. The span proofs (short rows: GM_SPAN, n = 8; rows, columns and split
    rows: GM_MSPAN_P) must see the subnormal's exponent and refuse; counted as a zero (a device whose
    float conversion flushes subnormals, had the proofs read the field through one) they would prove
    the sum exact and store the midpoint's rounding. On every device: the oracle's bits; on the
    GPU-shaped devices with fp64, every such output is left open by the main pass and redone."""
    npdt, dt = TYPES[tname]
    p = 24 if tname == "float32" else 8
    tiny = 2.0 ** (-149 if p == 24 else -133)
    row = [1.0] * (n - 2) + [2.0 + n * 2.0 ** -p, tiny]
    assert float(np.asarray(row[-2], npdt).astype(np.float64)) == row[-2]       # the values are the type's
    x = exact_values(np.array([row, [-v for v in row]] * 16, dtype=np.float64), npdt)
    x = x if axis == 1 else x.T.copy()
    got = check_reduce_mean(device, dt, x, (axis,)).astype(np.float64).ravel()
    assert (got[0::2] == 1.0 + 2.0 ** (1 - p)).all() and (got[1::2] == -1.0 - 2.0 ** (1 - p)).all()
    if getattr(device.backend, "gpu_paths", False) and device.info.fp64:
        assert run_counted(device, dt, x, (axis,))[2] == 32


def test_columns_exact_ties_need_the_span_proof(device, monkeypatch):
    """Without the columns' span proof (gpu_col_span 0), R4's normal FLOAT32 data leaves columns open:
    exact ties of the rounding, redone exactly; with it, none. The same bits either way."""
    gpu_shaped(device, fp64=True)
    shape, axes = CLASSES["R4"]
    x = data("normal", shape, axes, np.float32)
    with_proof, _, opened = run_counted(device, D.FLOAT32, x, axes)
    assert opened == 0
    monkeypatch.setattr(reduce_kernels, "gpu_col_span", lambda plan, fp64: 0)
    without, _, opened = run_counted(device, D.FLOAT32, x, axes)
    assert opened and opened > 0, "no exact tie in this data: the test shows nothing"
    want = oracle.reduce_mean(x, axes, np.float32)
    assert oracle.equal_bits(with_proof, want) and oracle.equal_bits(without, want)


def _limit_columns(npdt, n: int) -> np.ndarray:
    """Columns of n values at the columns' span proof's edges (FLOAT32 p = 24, BFLOAT16 p = 8; every
    value a multiple of 2^q, q = e - 127 - p + 1 for the smallest exponent field e):
    - exact ties: n - 1 ones and 1 + n 2^-p (a midpoint mean, 1 + 2^-p: rounds to even), negated too;
    - magnitudes 2^(53 - p - ceil(log2 n)) with alternating signs and one 1.0 (q = 1 - p): the sum of
      magnitudes just below 2^(q + 52) (proven), and the same with the magnitudes doubled (past it:
      the bound decides);
    - zeros, -0.0 alone, subnormals, an inf, inf with -inf, a NaN, 2^127s (n of them pass FLOAT32);
    - FLOAT32, n = 2^k >= 512, last: n - 2 ones, 2 + n 2^-24 - 2^-21 and 2^-21 + 2^(k - 53) (q = -44:
      m, past 2^k, is far above 2^(q + 52) = 2^8: no proof). The exact mean 1 + 2^-24 + 2^-53 rounds
      up, but the FLOAT64 sum cannot hold the 2^(k - 53) (half an ulp at 2^k: it rounds to even) and
      lands on the midpoint, which rounds down: a proof taken with a larger field (another
      work-item's, tree's or chunk's) gets it wrong. The bound cannot settle it either: it is the one
      column left open, redone exactly. (The GPU shape's m, the sum of the partial sums' magnitudes,
      now stands several times above any one of them: the "alt" columns are settled by the bound.)"""
    p = 24 if npdt == np.float32 else 8
    tie = [1.0] * (n - 1) + [1.0 + n * 2.0 ** -p]
    big = 2.0 ** (53 - p - (n - 1).bit_length())
    alt = [big * (1 if i % 2 else -1) for i in range(n - 1)] + [1.0]
    cols = [tie, [-v for v in tie], alt, [2 * v for v in alt[:-1]] + [1.0],
            [0.0] * n, [-0.0] * n, [2.0 ** (-149 if p == 24 else -133)] * n,
            [np.inf] + [1.0] * (n - 1), [np.inf, -np.inf] + [0.0] * (n - 2), [np.nan] + [1.0] * (n - 1),
            [2.0 ** 127] * n]
    if p == 24 and n >= 512 and n & (n - 1) == 0:
        k = n.bit_length() - 1
        cols.append([1.0] * (n - 2) + [2 + n * 2.0 ** -24 - 2.0 ** -21, 2.0 ** -21 + 2.0 ** (k - 53)])
    return exact_values(np.array(cols, dtype=np.float64).T.copy(), npdt)


@pytest.mark.parametrize("n, width", [(512, 64), (48, 64), (512, 2048)])
@pytest.mark.parametrize("tname", ["float32", "bfloat16"])
def test_columns_at_the_span_limit(device, n, width, tname):
    """The columns of _limit_columns, repeated across ``width`` columns, in a column reduction split
    in chunks (512 rows: partials carry the field) and unsplit (48 rows), on every device: the
    oracle's bits. On the GPU-shaped devices with fp64, the ties and the proven columns are settled
    by the main pass (nothing open but what the proof must leave to the bound or the redo)."""
    npdt, dt = TYPES[tname]
    cols = _limit_columns(npdt, n)
    x = np.tile(cols, (1, -(-width // cols.shape[1])))[:, :width].copy()
    got = check_reduce_mean(device, dt, x, (0,))
    period = cols.shape[1]
    lost = period == 12         # the tie-breaker the FLOAT64 sum loses: its columns stay open, redone
    if getattr(device.backend, "gpu_paths", False) and device.info.fp64:
        assert run_counted(device, dt, x, (0,))[2] == (len(range(11, width, period)) if lost else 0)
    if lost:
        assert (got[11::period].astype(np.float64) == 1.0 + 2.0 ** -23).all()
    assert (got[0::period].astype(np.float64) == 1.0).all() and (got[1::period].astype(np.float64) == -1.0).all()


@pytest.mark.parametrize("n, height", [(512, 64), (48, 64), (1 << 14, 12)])
@pytest.mark.parametrize("tname", ["float32", "bfloat16"])
def test_rows_at_the_span_limit(device, n, height, tname):
    """_limit_columns' values as rows of n, in the row kernel: whole rows (512, 48: a 32-wide slice per
    row) and rows split in chunks (2^14 values, 12 rows: a work-group per row and chunk, whose partials
    carry the field to the finalize pass), on every device: the oracle's bits. On the GPU-shaped
    devices with fp64 the ties are settled by the main pass: nothing open but the row whose FLOAT64
    sum loses its tie-breaker (FLOAT32, 512 and 2^14), which the proof must refuse through the slice,
    the group tree and the chunks alike (before issue 40's row proof: every exact tie open, as in R2
    at 1 GiB, 3 of 65536 BFLOAT16 rows of normal data)."""
    npdt, dt = TYPES[tname]
    rows = _limit_columns(npdt, n).T
    x = np.tile(rows, (-(-height // rows.shape[0]), 1))[:height].copy()
    got = check_reduce_mean(device, dt, x, (1,))
    period = rows.shape[0]
    lost = period == 12
    if getattr(device.backend, "gpu_paths", False) and device.info.fp64:
        v = reduce_op(device, dt, x.shape, (1,))[0].program.variant
        assert v.main.kernel == "gm_reduce_row" and (v.n_chunks > 1) == (n == 1 << 14)
        assert v.macros["WARP_ROWS"] == int(n != 1 << 14)
        assert run_counted(device, dt, x, (1,))[2] == (len(range(11, height, period)) if lost else 0)
    if lost:
        assert (got[11::period].astype(np.float64) == 1.0 + 2.0 ** -23).all()
    assert (got[0::period].astype(np.float64) == 1.0).all() and (got[1::period].astype(np.float64) == -1.0).all()
