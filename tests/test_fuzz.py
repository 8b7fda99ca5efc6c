"""Property-based fuzzer over every descriptor class, at random feature levels, on every device.

Property: each generated case is either
* refused at construction with InvalidArgumentTypeError (when a field got a wrong Python type),
* refused (at construction or by create_operator) with InvalidArgumentError, or UnsupportedError for
  a REDUCE function other than AVERAGE, where the case breaks a rule that tests/fuzz_rules.py writes
  down in the tests' own words (so over-strict validation fails, whatever any other device does), or
  with UnsupportedTypeError where the device must refuse the type (tests/ext_support.py: the tests'
  own table; today only FLOAT64 on a device without fp64), or
* accepted only when it breaks no rule, then created, compiled and executed (in place, output bound
  over an identical input, where the operator allows it and the case asks for it), and checked
  against the independent oracle (tests/oracle.py), never against another device: bit for bit for
  the element-wise means and additions, copies and ScaleBias, the integer and n-ary means, the
  integer wide sums (a 128-bit total's two words) and every float REDUCE AVERAGE on every device
  (the exact mean rounded once; CUDA included: the kernels are OpenCL's text), on data of mixed
  signs with zeros, infinities, NaN, +-max and subnormals; the float wide sums on positive data to
  2^-30 of the total (2^-100 for a FLOAT64 total's two words);
  every output buffer has poisoned guard bytes before and after its binding, and poisoned bytes
  inside its range that its strides do not address: all must be untouched.
No other exception, and the device is never removed.

CI runs a fixed, derandomized set of 1000 examples per device (profile ``fuzz-ci``; about 40 s for
cpu and opencl:0 on PoCL with 2 cores, most of it OpenCL kernel builds), the bounds-checked builds of
both kernel shapes included (opencl:0-checked, opencl:0-gpupaths-checked: any out-of-bounds access
of a kernel raises KernelBoundsError, so the case fails). A longer run with fresh
random examples (profile ``fuzz-long``):

    GPU_MEAN_FUZZ_EXAMPLES=20000 GPU_MEAN_TEST_DEVICES=cpu,opencl:0 python -m pytest -q tests/test_fuzz.py
"""
from __future__ import annotations

import os
import re
from fractions import Fraction

import fuzz_cases
import fuzz_rules
import ml_dtypes
import numpy as np
import oracle
import pytest
from ext_support import refusal
from helpers import upload
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import gpu_mean as gm
from gpu_mean import DataType as D
from gpu_mean.descriptors import tables

_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large,
           HealthCheck.filter_too_much]
settings.register_profile("fuzz-ci", max_examples=1000, deadline=None, derandomize=True,
                          suppress_health_check=_HEALTH, print_blob=True)
settings.register_profile("fuzz-long", max_examples=int(os.environ.get("GPU_MEAN_FUZZ_EXAMPLES", "0") or 0) or 1,
                          deadline=None, derandomize=False, suppress_health_check=_HEALTH, print_blob=True)
PROFILE = settings.get_profile("fuzz-long" if os.environ.get("GPU_MEAN_FUZZ_EXAMPLES") else "fuzz-ci")

POISON = 0xA5
GUARD = 64
_devices: dict = {}


def at_level(device, level):
    """A device sharing ``device``'s backend (and its kernel cache) that enforces ``level``."""
    key = (id(device.backend), level)
    dev = _devices.get(key)
    if dev is None or dev.get_device_removed_reason() is not None:
        dev = _devices[key] = gm.Device(device.backend, feature_level=level)
    return dev


def make_data(rng, dt: D, shape, positive: bool):
    npdt = dt.numpy_dtype
    if dt.is_float:
        if positive:
            scale = 2.0 ** rng.integers(-10, 10) if dt == D.FLOAT16 else 2.0 ** rng.integers(-60, 60)
            return (rng.uniform(0.5, 2.0, shape) * scale).astype(npdt)
        fi = ml_dtypes.finfo(npdt)
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.max, -fi.max, fi.tiny, fi.tiny / 4,
                         -fi.smallest_subnormal, 1.0, -3.5], npdt)
        x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 8)).astype(npdt)
        special = rng.random(shape) < 0.15
        x[special] = rng.choice(pool, int(special.sum()))
        return x
    info = np.iinfo(npdt)
    return rng.integers(info.min, info.max, shape, dtype=npdt, endpoint=True)


def logical_data(rng, t: gm.TensorDesc, positive: bool) -> np.ndarray:
    """Data for input ``t`` drawn per memory element, so that broadcast and overlapping elements agree."""
    phys = make_data(rng, t.data_type, (t.last_index + 1,), positive)
    view = np.lib.stride_tricks.as_strided(phys, t.sizes, [s * phys.itemsize for s in t.effective_strides])
    return view.copy()


def addressed_bytes(t: gm.TensorDesc) -> np.ndarray:
    """Byte offsets (from the binding offset) that the tensor's elements occupy."""
    size = t.numpy_dtype.itemsize
    offs = np.zeros(1, np.int64)
    for n, s in zip(t.sizes, t.effective_strides):
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    return (offs[:, None] * size + np.arange(size)).ravel()


def poisoned(dev, t: gm.TensorDesc, x, off: int):
    """A buffer of POISON bytes, GUARD bytes longer than the binding, with ``x`` in ``t``'s elements."""
    nbytes = off + t.total_size_in_bytes + GUARD
    raw = np.full(nbytes, POISON, np.uint8)
    if x is not None:
        dt = t.numpy_dtype
        view = np.ndarray(t.sizes, dt, buffer=raw, offset=off, strides=[s * dt.itemsize for s in t.effective_strides])
        view[...] = x
    buf = dev.create_buffer(nbytes)
    buf.write(raw)
    return buf


def in_place_input(desc) -> int | None:
    """The input to alias with the output, when the operator allows it and the descriptors are identical."""
    if desc.in_place == "none":
        return None
    out = desc.output_tensors()[0]
    same = [i for i, t in enumerate(desc.input_tensors()) if t == out]
    return same[0] if same else None


def execute(dev, desc, xs, alias: int | None = None):
    """Run ``desc`` on ``dev`` (output bound over input ``alias`` when given).

    Returns (logical outputs, raw output buffers, binding offsets), one of each per output."""
    cop = dev.compile_operator(dev.create_operator(desc))
    outs, bufs, offs = [], [], []
    for ot in desc.output_tensors():
        off = max(16, ot.guaranteed_base_offset_alignment)
        buf = poisoned(dev, ot, None if alias is None else xs[alias], off)
        outs.append(gm.BufferBinding(buf, off, ot.total_size_in_bytes))
        bufs.append(buf)
        offs.append(off)
    ins = []
    for i, (t, x) in enumerate(zip(desc.input_tensors(), xs)):
        in_off = max(16, t.guaranteed_base_offset_alignment)
        ins.append(outs[0] if i == alias else gm.BufferBinding(upload(dev, t, x, in_off), in_off,
                                                               t.total_size_in_bytes))
    cop.execute(inputs=ins, outputs=outs)
    return ([b.read_tensor(ot, off) for b, ot, off in zip(bufs, desc.output_tensors(), offs)],
            [b.read(np.uint8, b.size) for b in bufs], offs)


def check_guards(raw, off, t: gm.TensorDesc):
    touched = np.zeros(raw.size, bool)
    touched[off + addressed_bytes(t)] = True
    bad = np.nonzero(~touched & (raw != POISON))[0]
    assert bad.size == 0, (f"bytes written outside the output's elements at {bad[:8].tolist()} (binding offset {off}, "
                           f"TotalTensorSizeInBytes {t.total_size_in_bytes})")


def _rows(desc, xs):
    """The values each output element combines, one row per output element in its logical order."""
    if isinstance(desc, gm.ext.NaryMeanDesc):
        stacked = np.stack([np.broadcast_to(x, desc.output.sizes) for x in xs], axis=-1)
        return stacked.reshape(-1, len(xs))
    axes = tuple(desc.axes)
    kept = [d for d in range(xs[0].ndim) if d not in axes]
    return np.transpose(xs[0], kept + list(axes)).reshape(int(np.prod(desc.output.sizes)), -1)


def exact_sums(desc, xs) -> list:
    return list(oracle.exact_sum_rows(_rows(desc, xs)))


def correctly_rounded(dev, desc, dt: D) -> bool:
    """Whether ``dev`` is held to the exact mean rounded once for this reduction: every device, for
    every float type it accepts (issue 22; CUDA runs the same kernel text as OpenCL, issue 39)."""
    return isinstance(desc, (gm.ReduceDesc, gm.ext.ReduceMeanDesc)) and dt.is_float


def expected_outputs(case, desc, xs) -> list:
    """The independent oracle's outputs (tests/oracle.py) for the operators checked bit for bit:
    element-wise means (integers truncated toward zero), additions (integers wrap), copies and
    ScaleBias, the integer and n-ary means, and the integer wide sums (a 128-bit total as a high and a
    low word)."""
    out_dt = desc.output_tensors()[0].numpy_dtype
    if case.op in ("mean", "ext_mean"):
        return [oracle.fast_mean2(xs[0], xs[1], out_dt)]
    if case.op == "add":
        return [oracle.fast_add2(xs[0], xs[1], out_dt)]
    if case.op in ("identity", "identity_sb"):
        return [oracle.identity(xs[0], out_dt, desc.scale_bias)]
    if case.op == "nary":
        return [oracle.nary_mean(xs, out_dt)]
    if case.op in ("int_reduce", "ext_reduce", "reduce"):
        return [oracle.reduce_mean(xs[0], tuple(desc.axes), out_dt)]
    assert case.op == "sum" and not case.float_reduction, case.op
    totals = _rows(desc, xs).astype(object).sum(axis=1).reshape(desc.output.sizes)   # Python ints: exact
    if len(desc.output_tensors()) == 1:
        return [totals.astype(out_dt)]
    hi = np.array([t >> 64 for t in totals.ravel()], dtype=object).reshape(totals.shape)
    lo = np.array([t & (2**64 - 1) for t in totals.ravel()], dtype=object).reshape(totals.shape)
    return [hi.astype(out_dt), lo.astype(np.uint64)]


def exact_bits(desc, xs, dt: D) -> np.ndarray:
    """The oracle's correctly rounded means (IEEE for inf and NaN) with the library's zero: an exact
    zero total is -0.0 when every value is -0.0, +0.0 otherwise."""
    rows = _rows(desc, xs)
    want = oracle.mean_rows(rows, dt.numpy_dtype).astype(np.float64)
    r64 = rows.astype(np.float64)
    zeros = np.all(r64 == 0, axis=1)
    neg0 = np.all((r64 == 0) & np.signbit(r64), axis=1)
    want = np.where(zeros, np.where(neg0, -0.0, 0.0), want)
    return want.astype(dt.numpy_dtype).reshape(desc.output.sizes)


def run_case(device, case: fuzz_cases.Case):
    dev = at_level(device, case.level)
    if case.bad_type is not None:
        with pytest.raises(gm.InvalidArgumentTypeError, match=case.bad_type.replace("[", r"\[")) as e:
            fuzz_cases.build(case)
        assert isinstance(e.value, TypeError)
        return "bad type"
    rule = fuzz_rules.broken_rule(case, fuzz_cases.TABLES[case.op],
                                  tables.EXT_REDUCE_SUM_OUTPUT if case.op == "sum" else None)
    try:
        desc = fuzz_cases.build(case)
        dev.create_operator(desc)
    except (gm.InvalidArgumentError, gm.UnsupportedError) as e:
        if isinstance(e, gm.UnsupportedTypeError):
            # the device lacks the type: as the tests' own table says (tests/ext_support.py)
            assert rule is None, f"refused for its type, but the case breaks a rule first: {rule}"
            dt = next(t.data_type for t in desc.input_tensors() + desc.output_tensors() if t.data_type.name in str(e))
            pattern = refusal(dev, desc.kernel_op, dt)
            assert pattern is not None and re.search(pattern, str(e)), f"{dev.name} refuses unexpectedly: {e}"
            return "data type absent"
        # a refusal must name a rule the case breaks (tests/fuzz_rules.py), never one it keeps
        assert rule is not None, f"{dev.name} refuses a case that breaks no rule: {e}"
        if isinstance(e, gm.UnsupportedError):
            assert rule == "only AVERAGE is implemented", (rule, e)
        return "refused"
    assert rule is None, f"{dev.name} accepted a case that breaks a rule ({rule})"
    for t in desc.input_tensors() + desc.output_tensors():
        assert refusal(dev, desc.kernel_op, t.data_type) is None, f"{dev.name} accepted {t.data_type.name}"
    rng = np.random.default_rng(case.seed)
    dt = desc.output_tensors()[0].data_type
    exact = case.float_reduction and correctly_rounded(dev, desc, dt)
    # the float wide sums are checked to a relative bound: positive data; every other case takes
    # zeros, inf, NaN, +-max and subnormals
    xs = [logical_data(rng, t, case.float_reduction and case.op == "sum") for t in desc.input_tensors()]
    alias = in_place_input(desc) if case.in_place else None
    gots, raws, offs = execute(dev, desc, xs, alias)
    for raw, off, t in zip(raws, offs, desc.output_tensors()):
        check_guards(raw, off, t)
    got = gots[0]
    if case.float_reduction and isinstance(desc, gm.ext.ReduceSumDesc):
        # the wide total: exact to far below one ulp of the input's type (2^-30 of the total); a
        # FLOAT64 total is the double-double hi + lo, within 2^-100 of it
        lo = gots[1] if len(gots) > 1 else np.zeros_like(got)
        tol = 2**100 if len(gots) > 1 else 2**30
        for idx, s in zip(np.ndindex(got.shape), exact_sums(desc, xs)):
            total = Fraction(float(got[idx])) + Fraction(float(lo[idx]))
            assert abs(total - s) <= abs(s) / tol, f"output {idx}: {got[idx]!r} + {lo[idx]!r} vs {float(s)}"
    elif exact:
        want = exact_bits(desc, xs, dt)
        assert oracle.equal_bits(got, want), f"{dev.name}: not the correctly rounded means:\n{got}\n{want}"
    elif case.float_reduction and isinstance(desc, gm.ext.NaryMeanDesc):
        # issue 22: the exact mean rounded once, bit for bit (-0.0 for an exact zero total of -0.0s)
        want = oracle.nary_mean(xs, dt.numpy_dtype)
        assert oracle.equal_bits(got, want), f"{dev.name}: not the correctly rounded n-ary mean:\n{got}\n{want}"
    else:
        wants = expected_outputs(case, desc, xs)
        assert len(gots) == len(wants)
        for g, want in zip(gots, wants):
            assert oracle.equal_bits(g, want), f"{dev.name}: not the oracle's result:\n{g}\n{want}"
    return "executed" if alias is None else "executed in place"


# the bounds-checked builds (GPU_MEAN_TEST_DEVICES unset: CI) take the first CHECKED_EXAMPLES of the
# derandomized descriptors: they look for accesses outside a tensor's range, which the planted tests
# (tests/test_checked.py) aim at directly, and every descriptor kind is among the first few hundred;
# the plain devices check every result against the oracle on all of the profile's examples
CHECKED_EXAMPLES = 400


def test_fuzz_descriptors(device_or_checked):
    device = device_or_checked
    examples = PROFILE.max_examples
    if device.info.variant.endswith("checked") and not os.environ.get("GPU_MEAN_TEST_DEVICES") \
            and not os.environ.get("GPU_MEAN_FUZZ_EXAMPLES"):
        examples = min(examples, CHECKED_EXAMPLES)

    @settings(PROFILE, max_examples=examples)
    @given(data=st.data())
    def fuzz(data):
        case = data.draw(fuzz_cases.cases(device.info.max_feature_level), label="case")
        outcome = run_case(device, case)
        event(f"{case.op}: {outcome}")   # pytest --hypothesis-show-statistics shows the mix
        assert device.get_device_removed_reason() is None
        assert at_level(device, case.level).get_device_removed_reason() is None, outcome
    fuzz()
