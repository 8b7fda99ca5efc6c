"""``gm.mean`` (ONNX Mean-13) and ``gm.reduce_mean`` (ONNX ReduceMean-18) on any device.

Each call builds descriptors, compiles them once per (device, descriptor) and runs them. numpy
arrays in give numpy arrays out; CuPy arrays (or anything exporting ``__dlpack__`` on a CUDA
device) in give CuPy arrays out on the CUDA device, without a trip through the host.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .. import backends
from ..descriptors.ext import MAX_NARY_INPUTS, IntegerReduceMeanDesc, NaryMeanDesc
from ..descriptors.operators import ElementWiseIdentityDesc, ElementWiseMeanDesc, ReduceDesc
from ..descriptors.tensor import TensorDesc, packed_strides
from ..descriptors.types import DataType, ReduceFunction
from ..errors import InvalidArgumentError, UnsupportedError
from ..runtime.device import Device
from ..runtime.objects import Buffer

SUPPORTED = (DataType.FLOAT32, DataType.FLOAT16, DataType.INT32, DataType.UINT32)
_default: dict = {}
_compiled: OrderedDict = OrderedDict()
_CACHE_SIZE = 512


def get_device(device=None) -> Device:
    """A Device, a device string, or None for the process default (``$GPU_MEAN_DEVICE`` or auto)."""
    if isinstance(device, Device):
        return device
    key = device or "__default__"
    dev = _default.get(key)
    if dev is None or dev.get_device_removed_reason() is not None:
        dev = _default[key] = backends.create_device(device)
    return dev


def _compiled_op(dev: Device, desc):
    key = (id(dev), desc)
    cop = _compiled.get(key)
    if cop is None:
        cop = dev.compile_operator(dev.create_operator(desc))
        _compiled[key] = cop
        if len(_compiled) > _CACHE_SIZE:
            _compiled.popitem(last=False)
    else:
        _compiled.move_to_end(key)
    return cop


def data_type_of(dtype, what: str) -> DataType:
    try:
        dt = DataType.from_numpy(dtype)
    except KeyError:
        dt = None
    if dt not in SUPPORTED:
        raise UnsupportedError(f"{what}: data type {np.dtype(dtype)} is not supported; gpu_mean's mean operators "
                               "take float32, float16, int32 and uint32")
    return dt


# -- device arrays ------------------------------------------------------------------------------

def _is_device_array(x) -> bool:
    return hasattr(x, "__cuda_array_interface__") or (hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray))


def _to_cupy(x):
    import cupy
    if isinstance(x, cupy.ndarray):
        return x
    return cupy.from_dlpack(x)


class _Arg:
    """One operand: host data to upload, or a device array wrapped in place."""

    def __init__(self, x, dev: Device):
        self.device_array = None
        if _is_device_array(x):
            if dev.info.backend != "cuda":
                raise InvalidArgumentError(f"a device array was given but the device is {dev.name}; pass "
                                           "device='cuda' or a numpy array")
            arr = _to_cupy(x)
            if not arr.flags.c_contiguous:
                arr = arr.copy()
            self.device_array = arr
            self.shape, self.dtype = tuple(arr.shape), np.dtype(arr.dtype)
        else:
            self.host = np.asarray(x, order="C")   # ascontiguousarray would turn a 0-d array into 1-d
            self.shape, self.dtype = self.host.shape, self.host.dtype

    def buffer(self, dev: Device, nbytes: int) -> Buffer:
        if self.device_array is not None:
            return Buffer(dev, self.device_array.data, max(nbytes, self.device_array.nbytes))
        buf = dev.create_buffer(max(nbytes, 4))
        if self.host.size:
            buf.write(self.host)
        return buf


def _new_output(dev: Device, shape, dtype, device_out: bool, nbytes: int):
    if device_out:
        import cupy
        with cupy.cuda.Device(dev.info.index):
            n = max(-(-nbytes // np.dtype(dtype).itemsize), int(np.prod(shape, dtype=np.int64)))
            arr = cupy.empty(n, dtype)
        return arr, Buffer(dev, arr.data, arr.nbytes)
    return None, dev.create_buffer(max(nbytes, 4))


def _finish(dev, arr, buf, desc, shape, device_out):
    if device_out:
        n = int(np.prod(shape, dtype=np.int64))
        return arr[:n].reshape(shape)
    return buf.read_tensor(desc).reshape(shape)


# -- Mean ---------------------------------------------------------------------------------------

def broadcast_desc(dt: DataType, in_shape, out_shape) -> TensorDesc:
    """The input described with the output's sizes: right-aligned, stride 0 where it broadcasts."""
    out_shape = tuple(out_shape) or (1,)
    in_shape = tuple(in_shape)
    own = packed_strides(in_shape)
    pad = len(out_shape) - len(in_shape)
    strides = []
    for d in range(len(out_shape)):
        j = d - pad
        if j < 0 or in_shape[j] == 1:
            strides.append(0)
        else:
            strides.append(own[j])
    return TensorDesc(dt, out_shape, tuple(strides))


def mean(*arrays, device=None, broadcast: bool = True):
    """ONNX Mean-13: the element-wise mean of 1..64 same-typed inputs with multidirectional broadcasting.

    One input is copied, two run DML ELEMENT_WISE_MEAN, three or more run the one-pass
    ``gm.ext.NaryMeanDesc`` (every input read once, one rounding). Integers truncate toward zero.
    """
    if not arrays:
        raise InvalidArgumentError("Mean: at least one input is required")
    if len(arrays) > MAX_NARY_INPUTS:
        raise UnsupportedError(f"Mean: {len(arrays)} inputs; gpu_mean takes at most {MAX_NARY_INPUTS}")
    dev = get_device(device)
    args = [_Arg(a, dev) for a in arrays]
    dtypes = {a.dtype for a in args}
    if len(dtypes) > 1:
        raise InvalidArgumentError(f"Mean: inputs have data types {sorted(map(str, dtypes))}; ONNX Mean takes one "
                                   "type T for every input")
    dt = data_type_of(args[0].dtype, "Mean")
    shapes = [a.shape for a in args]
    if not broadcast and len(set(shapes)) > 1:
        raise InvalidArgumentError(f"Mean: input shapes {shapes} differ; this opset takes same-shaped inputs")
    try:
        out_shape = np.broadcast_shapes(*shapes)
    except ValueError as e:
        raise InvalidArgumentError(f"Mean: input shapes {shapes} do not broadcast (ONNX multidirectional "
                                   "broadcasting)") from e
    device_out = any(a.device_array is not None for a in args)
    if int(np.prod(out_shape, dtype=np.int64)) == 0:
        return _empty(out_shape, args[0].dtype, dev, device_out)
    if len(out_shape) > 8:
        raise UnsupportedError(f"Mean: rank {len(out_shape)} exceeds DirectML's 8 dimensions")
    descs = [broadcast_desc(dt, a.shape, out_shape) for a in args]
    out_desc = TensorDesc(dt, tuple(out_shape) or (1,))
    if len(args) == 1:
        desc = ElementWiseIdentityDesc(descs[0], out_desc)
    elif len(args) == 2:
        desc = ElementWiseMeanDesc(descs[0], descs[1], out_desc)
    else:
        desc = NaryMeanDesc(tuple(descs), out_desc)
    cop = _compiled_op(dev, desc)
    ins = [a.buffer(dev, d.total_size_in_bytes) for a, d in zip(args, descs)]
    arr, out = _new_output(dev, out_shape, args[0].dtype, device_out, out_desc.total_size_in_bytes)
    cop.execute(inputs=ins, outputs=[out])
    return _finish(dev, arr, out, out_desc, out_shape, device_out)


def _empty(shape, dtype, dev, device_out):
    if device_out:
        import cupy
        with cupy.cuda.Device(dev.info.index):
            return cupy.empty(shape, dtype)
    return np.empty(shape, dtype)


# -- ReduceMean ---------------------------------------------------------------------------------

def normalize_axes(axes, rank: int, *, allow_negative: bool = True, what: str = "ReduceMean") -> tuple:
    out = []
    for a in axes:
        a = int(a)
        if a < 0 and not allow_negative:
            raise InvalidArgumentError(f"{what}: axis {a} is negative; this opset takes axes in [0, {rank - 1}]")
        if not -rank <= a < rank:
            raise InvalidArgumentError(f"{what}: axis {a} is out of range for rank {rank}; axes lie in "
                                       f"[{-rank}, {rank - 1}]")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{what}: axes {list(axes)} name an axis twice; each axis may appear once")
    return tuple(out)


def _merge_dims(shape, axes):
    """Drop size-1 dims and merge neighbours of the same kind (both reduced or both kept)."""
    sizes, red = [], []
    for d, s in enumerate(shape):
        if s == 1:
            continue
        r = d in axes
        if sizes and red[-1] == r:
            sizes[-1] *= s
        else:
            sizes.append(s)
            red.append(r)
    if not sizes:
        return (1,), ()
    return tuple(sizes), tuple(i for i, r in enumerate(red) if r)


def reduce_mean(x, axes=None, keepdims: bool = True, noop_with_empty_axes: bool = False, device=None,
                allow_negative: bool = True, what: str = "ReduceMean"):
    """ONNX ReduceMean-18. Floats: DML REDUCE AVERAGE (wide accumulation, within 1 ulp). INT32/UINT32:
    ``gm.ext.IntegerReduceMeanDesc`` (exact, truncation toward zero). A reduction over a zero-size
    dimension gives NaN (floats) or 0 (integers) without launching a kernel."""
    dev = get_device(device)
    arg = _Arg(x, dev)
    dt = data_type_of(arg.dtype, what)
    shape = arg.shape
    rank = len(shape)
    axes = () if axes is None else tuple(np.atleast_1d(np.asarray(axes, dtype=np.int64)).tolist())
    if not axes:
        if noop_with_empty_axes:
            return mean(x, device=dev)   # identity: a copy on the device
        axes = tuple(range(rank))
    axes = normalize_axes(axes, rank, allow_negative=allow_negative, what=what)
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    out_shape = out_keep if keepdims else tuple(s for d, s in enumerate(shape) if d not in axes)
    device_out = arg.device_array is not None
    n_out = int(np.prod(out_shape, dtype=np.int64))
    if n_out == 0 or any(shape[d] == 0 for d in axes):
        res = _empty(out_shape, arg.dtype, dev, device_out)
        if n_out:
            res[...] = np.nan if dt.is_float else 0   # mean of nothing: NaN for floats, 0 for integers
        return res
    sizes, red_axes = _merge_dims(shape, axes)
    if len(sizes) > 8:
        raise UnsupportedError(f"{what}: after merging neighbouring axes the tensor still has rank {len(sizes)}; "
                               "DirectML takes at most 8 dimensions")
    in_desc = TensorDesc(dt, sizes)
    out_desc = TensorDesc(dt, tuple(1 if d in red_axes else s for d, s in enumerate(sizes)))
    if dt.is_float:
        desc = ReduceDesc(ReduceFunction.AVERAGE, in_desc, out_desc, red_axes)
    else:
        desc = IntegerReduceMeanDesc(in_desc, out_desc, red_axes)
    cop = _compiled_op(dev, desc)
    inp = arg.buffer(dev, in_desc.total_size_in_bytes)
    arr, out = _new_output(dev, out_shape, arg.dtype, device_out, out_desc.total_size_in_bytes)
    cop.execute(inputs=[inp], outputs=[out])
    return _finish(dev, arr, out, out_desc, out_shape, device_out)
