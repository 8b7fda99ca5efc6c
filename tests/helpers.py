"""Running one operator on a device from numpy arrays."""
from __future__ import annotations

import numpy as np

import gpu_mean as gm


def upload(dev, desc: gm.TensorDesc, logical: np.ndarray, pad: int = 0, fill: int = 0x5A):
    """A buffer holding ``logical`` laid out as ``desc`` says (strides honoured), ``pad`` bytes in."""
    nbytes = pad + desc.total_size_in_bytes
    raw = np.full(nbytes, fill, np.uint8)
    dt = desc.numpy_dtype
    view = np.ndarray(desc.sizes, dt, buffer=raw, offset=pad,
                      strides=tuple(s * dt.itemsize for s in desc.effective_strides))
    view[...] = np.broadcast_to(logical, desc.sizes)
    buf = dev.create_buffer(nbytes)
    buf.write(raw)
    return buf


def run(dev, desc, inputs, *, offset: int = 0, flags=gm.ExecutionFlags.NONE):
    """Execute ``desc`` with fresh buffers; returns the output as the output tensor's logical array."""
    cop = dev.compile_operator(dev.create_operator(desc), flags)
    ins = [gm.BufferBinding(upload(dev, t, x, offset), offset, t.total_size_in_bytes)
           for t, x in zip(desc.input_tensors(), inputs)]
    ot = desc.output_tensors()[0]
    ob = upload(dev, ot, np.zeros(ot.sizes, ot.numpy_dtype), offset)
    cop.execute(inputs=ins, outputs=[gm.BufferBinding(ob, offset, ot.total_size_in_bytes)])
    return ob.read_tensor(ot, offset)


def packed(dt, shape):
    return gm.TensorDesc(dt, shape)


def zero_rule_rows(n: int) -> np.ndarray:
    """Seven named rows of n values (float64, to be cast to the type under test) for the zero rule and
    IEEE's specials: -0.0s alone (-0.0), one +0.0 among them (+0.0), cancelling values (+0.0), an inf
    (inf), inf with -inf (NaN), a NaN (NaN), normal values with a -inf (-inf)."""
    rows = np.full((7, n), -0.0)
    rows[1, 3] = 0.0
    rows[2, 1], rows[2, n - 1] = 2.0, -2.0
    rows[3, n // 2] = np.inf
    rows[4, 0], rows[4, n - 1] = np.inf, -np.inf
    rows[5, n // 3] = np.nan
    rows[6] = np.random.default_rng(n).standard_normal(n)
    rows[6, n - 2] = -np.inf
    return rows


def reduce_mean_desc(dt, shape, axes):
    """REDUCE AVERAGE of ``shape`` over ``axes`` (kept as size 1): DirectML's descriptor for its
    types, gm.ext's for the extension types."""
    out = tuple(1 if i in axes else s for i, s in enumerate(shape))
    if dt in (gm.DataType.FLOAT32, gm.DataType.FLOAT16):
        return gm.ReduceDesc(gm.ReduceFunction.AVERAGE, gm.TensorDesc(dt, shape), gm.TensorDesc(dt, out), tuple(axes))
    return gm.ext.ReduceMeanDesc(gm.TensorDesc(dt, shape), gm.TensorDesc(dt, out), tuple(axes))


def check_reduce_mean(dev, dt, x: np.ndarray, axes) -> np.ndarray:
    """The device's REDUCE AVERAGE of x against the exact oracle, bit for bit (any NaN matches any
    NaN); returns the result, flat."""
    from oracle import equal_bits, reduce_mean
    got = np.asarray(run(dev, reduce_mean_desc(dt, x.shape, axes), [x])).reshape(-1)
    want = np.asarray(reduce_mean(x, tuple(axes), x.dtype)).reshape(-1)
    if not equal_bits(got, want):
        u = f"u{got.dtype.itemsize}"
        bad = np.nonzero((got.view(u) != want.view(u)) & ~(np.isnan(got) & np.isnan(want)))[0]
        raise AssertionError(f"{bad.size} outputs differ, first {got[bad[:3]]} against {want[bad[:3]]}")
    return got


def reduce_plan(dt, shape, axes):
    """The planner's plan for REDUCE AVERAGE of a packed ``shape`` over ``axes``."""
    from gpu_mean.descriptors.types import KernelOp
    from gpu_mean.runtime import planning
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    out = tuple(1 if i in axes else s for i, s in enumerate(shape))
    out_strides = tuple(int(np.prod(out[i + 1:])) for i in range(len(out)))
    return planning.plan_reduce(KernelOp.REDUCE_MEAN, dt, shape, strides, out_strides, axes)


def cpu_reduce_choice(dt, shape, axes, fp64: bool):
    """The CPU shape's geometry and kernel variant for that plan (two compute units)."""
    from gpu_mean.kernels import opencl_geometry, reduce_kernels
    plan = reduce_plan(dt, shape, axes)
    return plan, opencl_geometry.reduce_geometry(plan, compute_units=2), \
        reduce_kernels.cpu_variant(plan, compute_units=2, fp64=fp64)


def exact_values(values, dtype) -> np.ndarray:
    """``values`` in ``dtype``, each of which must be a value of the type (checked)."""
    a = np.asarray(values, np.float64)
    b = a.astype(dtype)
    assert np.array_equal(b.astype(np.float64), a, equal_nan=True), "not values of the type"
    return b
