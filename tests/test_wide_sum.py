"""The wide sum's two-word totals (gm.ext.ReduceSumDesc over FLOAT64, INT64, UINT64; issue 21) on every
device variant: INT64 / UINT64 totals bit for bit the CPU device's and Python's integer sums (hi * 2^64
+ lo), FLOAT64 totals a normalized double-double within the bound docs/design.md states, with the CPU
device's answers for zeros, inf, NaN and totals past DBL_MAX. Every reduction class the planner picks
(rows, short rows, interleaved axes, columns, the general walk, all axes) and the chunked path with
its finalize pass; the low word bound at its own offset with its own strides.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from ext_support import SUM, run_or_refused
from helpers import upload

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.kernels import programs
from gpu_mean.runtime import planning

T = gm.TensorDesc
I64, U64 = np.iinfo(np.int64), np.iinfo(np.uint64)
DBL_MAX = float(np.finfo(np.float64).max)
NP = {D.FLOAT64: np.float64, D.INT64: np.int64, D.UINT64: np.uint64}
LOW = {D.FLOAT64: D.FLOAT64, D.INT64: D.UINT64, D.UINT64: D.UINT64}
TYPES = [D.FLOAT64, D.INT64, D.UINT64]
IDS = {"ids": lambda d: d.name}

# (name, shape, axes): the classes of the reduction kernels in both shapes; "chunked" takes the split
# path (partials, then the finalize pass) on the kernel devices (checked below)
CASES = [("row", (6, 1000), (1,)), ("short rows", (40, 12), (1,)), ("interleaved", (16, 3, 200), (0, 2)),
         ("col", (500, 40), (0,)), ("general", (6, 5, 7, 3), (0, 2)), ("all axes", (3, 50, 7), (0, 1, 2)),
         ("chunked", (1 << 16,), (0,))]
CASE_IDS = [c[0] for c in CASES]


def kept_shape(shape, axes):
    return tuple(1 if d in axes else s for d, s in enumerate(shape))


def low_desc(dt, o):
    """The low word with strides of its own: every other element (its high word is packed)."""
    packed = [1] * len(o)
    for d in range(len(o) - 2, -1, -1):
        packed[d] = packed[d + 1] * o[d + 1]
    return T(LOW[dt], o, tuple(2 * s for s in packed))


def wide_sum(dev, x, dt, axes, lo_off=32):
    """(high word, low word) of ``x``'s total over ``axes`` on ``dev``; the low word at byte offset
    ``lo_off`` of its buffer, every other element."""
    o = kept_shape(x.shape, axes)
    hi_t, lo_t = T(dt, o), low_desc(dt, o)
    desc = gm.ext.ReduceSumDesc(T(dt, x.shape), hi_t, axes, lo_t)
    cop = dev.compile_operator(dev.create_operator(desc))
    ib = upload(dev, desc.input, x)
    hb = dev.create_buffer(hi_t.total_size_in_bytes)
    lb = upload(dev, lo_t, np.zeros(o, lo_t.numpy_dtype), lo_off)
    cop.execute(inputs=[gm.BufferBinding(ib, 0, desc.input.total_size_in_bytes)],
                outputs=[gm.BufferBinding(hb, 0, hi_t.total_size_in_bytes),
                         gm.BufferBinding(lb, lo_off, lo_t.total_size_in_bytes)])
    return hb.read_tensor(hi_t), lb.read_tensor(lo_t, lo_off)


def kept_index(shape, axes) -> np.ndarray:
    """Each element's output (its kept index, flat)."""
    keep = [d for d in range(len(shape)) if d not in axes]
    if not keep:
        return np.zeros(shape, np.int64)
    idx = np.indices(shape)
    return np.ravel_multi_index(tuple(idx[d] for d in keep), tuple(shape[d] for d in keep))


def int_data(dt, shape, axes, seed) -> list[np.ndarray]:
    """Random full-range values with named outputs (INT64_MIN alone, INT64_MAX alone, the two mixed,
    UINT64_MAX alone: totals past 2^63 and 2^64), and the whole tensor of the extreme value."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(NP[dt])
    x = rng.integers(info.min, info.max, shape, dtype=NP[dt], endpoint=True)
    k = kept_index(shape, axes)
    named = k.max() >= 2    # (one output: the random values alone; the extreme tensor names it)
    if dt == D.INT64:
        if named:
            x[k == 0] = I64.min
            x[k == 1] = I64.max
            x[k == 2] = np.where(np.arange((k == 2).sum()) % 3 == 0, np.int64(I64.max), np.int64(I64.min))
        extreme = np.full(shape, I64.min, np.int64)
    else:
        if named:
            # numpy scalars of the data's type: numpy 2.5 refuses a Python int past int64 in np.where
            # (numpy 2.4 made the two int64, -1 and INT64_MIN, which the assignment wrapped back)
            x[k == 0] = np.uint64(U64.max)
            x[k == 1] = np.where(np.arange((k == 1).sum()) % 2 == 0, np.uint64(U64.max), np.uint64(1 << 63))
        extreme = np.full(shape, U64.max, np.uint64)
    return [x, extreme]


def test_integer_data_is_built_in_its_own_type(monkeypatch):
    """int_data never hands numpy a Python int outside int64 to convert (numpy 2.5 raises
    OverflowError there; numpy 2.4 silently made -1 of UINT64_MAX): np.where is watched here as numpy
    2.5 would convert its arguments, and the named values are exactly the extremes."""
    real = np.where

    def where(cond, *xy):
        for v in xy:
            if isinstance(v, int) and not I64.min <= v <= I64.max:
                raise OverflowError(f"Python int {v} too large to convert to int64 (numpy 2.5)")
        return real(cond, *xy)
    monkeypatch.setattr(np, "where", where)
    for dt in (D.INT64, D.UINT64):
        x, extreme = int_data(dt, (6, 1000), (1,), 1)
        assert x.dtype == NP[dt] and extreme.dtype == NP[dt]
        if dt == D.UINT64:
            assert set(x[1].tolist()) == {2**64 - 1, 2**63} and set(x[0].tolist()) == {2**64 - 1}
        else:
            assert set(x[2].tolist()) == {2**63 - 1, -(2**63)}


def python_sums(x, axes) -> list[int]:
    """The exact totals, output by output (Python integers)."""
    return [int(v) for v in np.ravel(np.sum(x.astype(object), axis=axes, keepdims=True))]


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dt", [D.INT64, D.UINT64], **IDS)
def test_integer_totals_are_python_sums_bit_for_bit_the_cpu_device(device_or_checked, cpu, dt, case):
    _, shape, axes = case
    for j, x in enumerate(int_data(dt, shape, axes, _seed(dt.name, shape))):
        got = run_or_refused(device_or_checked, SUM, dt, lambda x=x: wide_sum(device_or_checked, x, dt, axes))
        want = wide_sum(cpu, x, dt, axes)
        assert got[0].dtype == NP[dt] and got[1].dtype == np.uint64
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        totals = [int(h) * 2**64 + int(lo) for h, lo in zip(got[0].ravel(), got[1].ravel())]
        assert totals == python_sums(x, axes)
        assert max(abs(t) for t in totals) >= 2**64 or j == 0     # the extreme tensor passes 2^64


# --- FLOAT64 ----------------------------------------------------------------------------------

def scaled(v: float) -> int:
    """v * 2^1074 as an integer (every finite double is a multiple of 2^-1074)."""
    p, q = float(v).as_integer_ratio()
    return p * ((1 << 1074) // q)


def f64_data(shape, axes, seed) -> np.ndarray:
    """Random values over many binades, outputs of mixed signs, one output from 2^960 on (gm_dd4's
    scaled sum) and one of cancelling +-DBL_MAX pairs among small values."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-40, 40, shape)
    k = kept_index(shape, axes)
    n0 = int((k == 0).sum())
    x[k == 0] = (0.5 + np.abs(rng.standard_normal(n0))) * 2.0 ** rng.integers(961, 1000, n0)
    n1 = int((k == 1).sum())
    pattern = np.array([DBL_MAX, 1.0, -DBL_MAX, 2.0**-60])
    x[k == 1] = np.where(np.arange(n1) % 8 < 4, pattern[np.arange(n1) % 4], x[k == 1])
    return x


def check_f64(x, axes, hi, lo):
    """hi + lo within docs/design.md's bound of the exact total: (n - 1) 8 u^2 n m for the sum, plus
    the last addition's 3 u^2 of the total (u = 2^-53, m the largest magnitude): n^2 2^-103 m; and
    normalized (hi == fl(hi + lo))."""
    o = hi.shape
    rows = np.moveaxis(x, list(axes), list(range(len(axes)))).reshape(-1, int(np.prod(o)))
    n = rows.shape[0]
    for k, (h, low) in enumerate(zip(hi.ravel(), lo.ravel())):
        exact = sum(scaled(v) for v in rows[:, k])
        m = max(abs(scaled(v)) for v in rows[:, k])
        err = abs(scaled(h) + scaled(low) - exact)
        assert err * 2**103 <= n * n * m, f"output {k}: {float(h)} + {float(low)}, error {err} > bound"
        assert h + low == h, f"output {k}: not normalized"


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_float64_totals_within_the_double_double_bound(device_or_checked, cpu, case):
    _, shape, axes = case
    x = f64_data(shape, axes, _seed("f64", shape))
    got = run_or_refused(device_or_checked, SUM, D.FLOAT64, lambda: wide_sum(device_or_checked, x, D.FLOAT64, axes),
                         also=(D.FLOAT64,))
    if got is None:
        return
    check_f64(x, axes, *got)
    check_f64(x, axes, *wide_sum(cpu, x, D.FLOAT64, axes))      # the CPU device: the same bound


Z = -0.0
# (name, values, expected (hi, lo) or None where hi is non-finite): rows whose totals a plain double sum
# gets wrong, and the CPU device's rules for zeros, inf, NaN and totals past DBL_MAX
SPECIAL = [("cancel DBL_MAX", [DBL_MAX, 1.0, -DBL_MAX, 2.0**-60], (1.0, 2.0**-60)),
           ("cancel 2^900", [2.0**900, 1.0, -(2.0**900), 2.0**-60], (1.0, 2.0**-60)),
           ("partial sum past DBL_MAX", [DBL_MAX, DBL_MAX, -DBL_MAX, Z], (DBL_MAX, 0.0)),
           ("subnormals", [5e-324, 5e-324, -1e-300, 1e-300], (1e-323, 0.0)),
           ("past DBL_MAX", [DBL_MAX, DBL_MAX, Z, Z], None), ("past -DBL_MAX", [-DBL_MAX, -DBL_MAX / 2, Z, Z], None),
           ("inf", [np.inf, 1.0, Z, Z], None), ("inf - inf", [np.inf, -np.inf, Z, Z], None),
           ("nan", [np.nan, 1.0, Z, Z], None), ("-inf beside DBL_MAX", [-np.inf, -np.inf, DBL_MAX, Z], None),
           ("-0.0 alone", [Z, Z, Z, Z], (-0.0, 0.0)), ("one +0.0", [Z, 0.0, Z, Z], (0.0, 0.0)),
           ("cancelled to zero", [1.0, -1.0, Z, Z], (0.0, 0.0)),
           ("DBL_MAX cancelled to zero", [DBL_MAX, -DBL_MAX, Z, Z], (0.0, 0.0))]


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_float64_named_rows_as_the_cpu_device(device_or_checked, cpu, layout):
    rows = np.array([v for _, v, _ in SPECIAL], np.float64)
    x, axes = (rows, (1,)) if layout == "rows" else (np.ascontiguousarray(rows.T), (0,))
    got = run_or_refused(device_or_checked, SUM, D.FLOAT64, lambda: wide_sum(device_or_checked, x, D.FLOAT64, axes),
                         also=(D.FLOAT64,))
    if got is None:
        return
    want = wide_sum(cpu, x, D.FLOAT64, axes)
    for k, (name, _, expect) in enumerate(SPECIAL):
        h, lo, ch, cl = (float(a.ravel()[k]) for a in (*got, *want))
        # the CPU device's high word, bit for bit (a zero's sign, the infinity, NaN)
        assert np.float64(h).tobytes() == np.float64(ch).tobytes() or (np.isnan(h) and np.isnan(ch)), name
        if expect is None:
            assert not np.isfinite(h) and lo == 0 and cl == 0, name
        else:
            assert (h, lo) == expect and np.signbit(h) == np.signbit(expect[0]), name


def test_the_cases_take_every_class_and_the_chunked_path(device):
    """The kernel devices run CASES through the row, column and general kernels, and "chunked"
    through the partials and the finalize pass."""
    if not isinstance(device.backend, programs.KernelBackend):
        pytest.skip("the cpu device runs no kernels")
    classes, chunked = set(), False
    for name, shape, axes in CASES:
        for dt in TYPES if device.backend.fp64 else (D.INT64,):
            o = kept_shape(shape, axes)
            desc = gm.ext.ReduceSumDesc(T(dt, shape), T(dt, o), axes, low_desc(dt, o))
            plan = planning.plan_operator(desc)
            v = programs.reduce_variant(device.backend, plan)
            classes.add(plan.cls)
            if name == "chunked":
                assert v.n_chunks > 1 and v.finalize is not None
                chunked = True
    assert classes == {"row", "col", "general"} and chunked


@pytest.mark.parametrize("dt", TYPES, **IDS)
def test_the_low_word_is_bound_in_the_checked_build(checked_device, dt):
    """The checked build knows the low word's bounds: a run writes inside them only (a violation
    would raise KernelBoundsError), for a packed and a strided low word."""
    x = int_data(dt, (8, 300), (1,), 3)[0] if dt != D.FLOAT64 else f64_data((8, 300), (1,), 3)
    got = run_or_refused(checked_device, SUM, dt, lambda: wide_sum(checked_device, x, dt, (1,), lo_off=64),
                         also=(dt,))
    if got is not None and dt != D.FLOAT64:
        assert [int(h) * 2**64 + int(lo) for h, lo in zip(got[0].ravel(), got[1].ravel())] == python_sums(x, (1,))


def test_a_planted_low_word_write_is_caught(checked_device, monkeypatch):
    """The low word's offset planted one element too far in the launch that stores the totals (the
    main kernel, or the finalize pass of a chunked reduction): the unchecked build writes into the
    bytes after the binding, the checked build raises KernelBoundsError naming the low word."""
    from test_checked import _plant, _unchecked_twin
    x = int_data(D.INT64, (4, 1000), (1,), 5)[0]
    desc = gm.ext.ReduceSumDesc(T(D.INT64, x.shape), T(D.INT64, (4, 1)), (1,), T(D.UINT64, (4, 1)))
    plan = planning.plan_operator(desc)
    guard = np.full(32, 0x5A5A5A5A5A5A5A5A, np.uint64)

    def launch(dev, plant: bool):
        v = programs.reduce_variant(dev.backend, plan)
        # the low word's offset: after the finalize pass's ten arguments and its buffer, or after the
        # main kernel's ten, its tail and its buffer
        kernel, arg = (v.finalize.kernel, 11) if v.finalize else (v.main.kernel, 11 + len(v.tail))
        cop = dev.compile_operator(dev.create_operator(desc))
        ib = upload(dev, desc.input, x)
        hb = dev.create_buffer(32)
        lb = dev.create_buffer(32 + guard.nbytes)
        lb.write(np.concatenate([np.zeros(4, np.uint64), guard]).view(np.uint8))
        with monkeypatch.context() as m:
            if plant:
                _plant(m, kernel, arg, 1)
            cop.execute(inputs=[gm.BufferBinding(ib, 0, x.nbytes)],
                        outputs=[gm.BufferBinding(hb, 0, 32), gm.BufferBinding(lb, 0, 32)])
        raw = lb.read().view(np.uint64)
        return raw[:4], raw[4:]

    _, after = launch(_unchecked_twin(checked_device), True)
    assert np.any(after != guard), "the planted write should land past the binding"
    with pytest.raises(gm.KernelBoundsError) as e:
        launch(checked_device, True)
    assert e.value.argument == "output low word", str(e.value)
    lo, after = launch(checked_device, False)       # an honest launch passes the checks
    assert np.all(after == guard)
    assert [int(v) for v in lo] == [t % 2**64 for t in python_sums(x, (1,))]
