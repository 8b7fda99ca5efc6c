"""The device conformance suite: for a device at a feature level, what each operator supports and
whether every result matches the CPU reference within its tolerance.

Tolerances (reference/directml.md 7, tightened by DESIGN.md): element-wise MEAN, ADD, IDENTITY and
integer paths bit-exact; REDUCE AVERAGE and the n-ary mean within 1 ulp of the reference.
"""
from __future__ import annotations

import time
import zlib

import numpy as np

from .. import backends
from ..descriptors import tables
from ..descriptors.ext import IntegerReduceMeanDesc, NaryMeanDesc
from ..descriptors.operators import ElementWiseAddDesc, ElementWiseIdentityDesc, ElementWiseMeanDesc, ReduceDesc
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType, Feature, FeatureLevel, ReduceFunction
from ..errors import DmlError

D = DataType
OPERATORS = {
    "ELEMENT_WISE_MEAN": tables.ELEMENT_WISE_MEAN,
    "ELEMENT_WISE_ADD": tables.ELEMENT_WISE_ADD,
    "ELEMENT_WISE_IDENTITY": tables.ELEMENT_WISE_IDENTITY,
    "REDUCE(AVERAGE)": tables.REDUCE_AVERAGE,
    "ext.NaryMean": tables.EXT_NARY_MEAN,
    "ext.IntegerReduceMean": tables.EXT_INTEGER_REDUCE_MEAN,
}


def _data(dt: DataType, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.is_float:
        return (rng.random(shape) * 8 + 0.25).astype(dt.numpy_dtype)
    info = np.iinfo(dt.numpy_dtype)
    return rng.integers(info.min, info.max, shape, dtype=dt.numpy_dtype, endpoint=True)


def _cases(op: str, dt: DataType, ndim: int, quick: bool):
    """(description, descriptor) pairs: packed, broadcast, padded and permuted layouts."""
    base = (3, 5, 7, 4, 2, 3, 2, 2)[:ndim] if quick else (5, 9, 17, 6, 3, 4, 2, 3)[:ndim]
    if ndim == 4 and not quick:
        base = (2, 3, 33, 65)
    shape = tuple(base)
    packed = TensorDesc(dt, shape)
    bc = TensorDesc(dt, shape, (0,) + packed.effective_strides[1:])
    perm = TensorDesc(dt, shape, tuple(reversed(TensorDesc(dt, tuple(reversed(shape))).effective_strides)))
    pad = TensorDesc(dt, shape, tuple(s * 2 for s in packed.effective_strides))
    if op in ("ELEMENT_WISE_MEAN", "ELEMENT_WISE_ADD"):
        cls = ElementWiseMeanDesc if op == "ELEMENT_WISE_MEAN" else ElementWiseAddDesc
        yield "packed", cls(packed, packed, packed)
        yield "broadcast", cls(bc, packed, packed)
        yield "permuted+padded", cls(perm, pad, perm)
    elif op == "ELEMENT_WISE_IDENTITY":
        yield "copy", ElementWiseIdentityDesc(perm, packed)
        if dt in (D.FLOAT32, D.FLOAT16, D.FLOAT64):
            from ..descriptors.operators import ScaleBias
            yield "scale_bias", ElementWiseIdentityDesc(packed, pad, ScaleBias(0.25, -1.0))
    elif op == "ext.NaryMean":
        yield "three_inputs", NaryMeanDesc((packed, bc, perm), packed)
    else:
        cls = ReduceDesc if op == "REDUCE(AVERAGE)" else IntegerReduceMeanDesc
        axes_sets = [(ndim - 1,), (0,), tuple(range(ndim))]
        if ndim >= 3:
            axes_sets.append((0, ndim - 1))
        for axes in axes_sets:
            out = TensorDesc(dt, tuple(1 if i in axes else s for i, s in enumerate(shape)))
            args = (ReduceFunction.AVERAGE,) if cls is ReduceDesc else ()
            yield f"axes{list(axes)}", cls(*args, packed if axes != (0,) else perm, out, axes)


def _run(dev, desc, seed):
    ins = []
    for i, t in enumerate(desc.input_tensors()):
        b = dev.create_buffer(t.total_size_in_bytes)
        b.write(_data(t.data_type, (t.total_size_in_bytes // t.numpy_dtype.itemsize,), seed + i))
        ins.append(b)
    o = desc.output_tensors()[0]
    ob = dev.create_buffer(o.total_size_in_bytes)
    dev.compile_operator(dev.create_operator(desc)).execute(inputs=ins, outputs=[ob])
    return [b.read() for b in ins], ob.read_tensor(o)


def _compare(got, want, exact: bool) -> int:
    """The largest ulp distance (0 when bit-identical); -1 for a mismatch of NaN placement."""
    if got.dtype.kind != "f":
        return 0 if np.array_equal(got, want) else int(np.max(np.abs(got.astype(np.int64) - want.astype(np.int64))))
    gn, wn = np.isnan(got), np.isnan(want)
    if np.any(gn != wn):
        return -1
    it = {2: np.int16, 4: np.int32, 8: np.int64}[got.dtype.itemsize]
    g, w = got[~gn].view(it).astype(np.int64), want[~wn].view(it).astype(np.int64)
    return int(np.max(np.abs(g - w))) if g.size else 0


def run_suite(dev, quick=False, log=print) -> tuple[int, int]:
    """Runs every (operator, data type, rank) the device's level supports; returns (passed, failed)."""
    ref = backends.create_device("cpu")
    passed = failed = 0
    for op, table in OPERATORS.items():
        row = tables.support_row(table, dev.feature_level)
        if row is None:
            log(f"  {op:24s} not available at FL {dev.feature_level.label}")
            continue
        log(f"  {op:24s} {tables.describe_row(row)}")
        for dt in sorted(row[2]):
            if not dev.check_feature_support(Feature.TENSOR_DATA_TYPE_SUPPORT, dt):
                log(f"    {dt.name:8s} skipped: the device does not support the type")
                continue
            for ndim in sorted({min(row[1]), 4, max(row[1])} & set(row[1])):
                for name, desc in _cases(op, dt, ndim, quick):
                    seed = zlib.crc32(f"{op}{dt.name}{ndim}{name}".encode())
                    tol = 0 if op.startswith("ELEMENT_WISE") or not dt.is_float else 1
                    try:
                        inputs, got = _run(dev, desc, seed)
                        _, want = _run(ref, desc, seed)
                        ulp = _compare(got, want, tol == 0)
                        ok = 0 <= ulp <= tol
                        msg = f"max {ulp} ulp (tolerance {tol})" if ulp >= 0 else "NaN placement differs"
                    except DmlError as e:
                        ok, msg = False, str(e)
                    passed += ok
                    failed += not ok
                    if not ok or not quick:
                        log(f"    {'PASS' if ok else 'FAIL'} {dt.name:8s} {ndim}D {name:16s} {msg}")
    return passed, failed


def main(device=None, feature_level=None, quick=False) -> int:
    level = None
    if feature_level:
        level = FeatureLevel[f"FL_{feature_level.replace('.', '_')}"]
    dev = backends.create_device(device, level)
    print(f"conformance: {dev.name}, feature level {dev.feature_level.label}")
    t0 = time.perf_counter()
    passed, failed = run_suite(dev, quick)
    print(f"conformance: {passed} passed, {failed} failed in {time.perf_counter() - t0:.1f} s")
    return 1 if failed else 0
