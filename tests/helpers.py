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
