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
