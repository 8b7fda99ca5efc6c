"""``gm.mean`` (ONNX Mean-13) and ``gm.reduce_mean`` (ONNX ReduceMean-18) on any device.

Arrays go in and come back as the caller holds them (see ``arrays.py`` for the table): numpy in,
numpy out; CuPy, PyTorch (CPU or CUDA), pyopencl and other DLPack producers in, the same library
out; device arrays never travel through the host. Strided views are described, not copied.
Compiled operators, recorded command lists and host-path buffers are kept per call signature
(``pool.py``): a repeated call with host arrays builds, validates and allocates no device memory;
one with device arrays rebinds them and allocates only its result.
"""
from __future__ import annotations

import math

import numpy as np

from ..backends import parse_device
from ..descriptors.ext import (
    MAX_NARY_INPUTS,
    IntegerReduceMeanDesc,
    MeanDesc,
    NaryMeanDesc,
    ReduceMeanDesc,
    ReduceSumDesc,
)
from ..descriptors.operators import ElementWiseIdentityDesc, ElementWiseMeanDesc, ReduceDesc
from ..descriptors.tables import EXTENSION_TYPES, WIDE_SUM_TYPE
from ..descriptors.tensor import TensorDesc, packed_strides
from ..descriptors.types import DataType, ReduceFunction
from ..errors import InvalidArgumentError, UnsupportedError
from ..runtime.device import Device
from . import pool, repeat, split
from .arrays import (  # noqa: F401  (public names)
    CPU_IN_PLACE_MIN_BYTES,
    SUPPORTED,
    Call,
    UnsupportedTypeError,
    data_type_of,
    get_device,
)

# -- Mean ---------------------------------------------------------------------------------------

def broadcast_desc(dt: DataType, in_shape, out_shape, in_strides=None, align: int = 0) -> TensorDesc:
    """The input described with the output's sizes: right-aligned, stride 0 where it broadcasts."""
    out_shape = tuple(out_shape) or (1,)
    in_shape = tuple(in_shape)
    own = packed_strides(in_shape) if in_strides is None else tuple(in_strides)
    pad = len(out_shape) - len(in_shape)
    strides = [0 if d < pad or in_shape[d - pad] == 1 else own[d - pad] for d in range(len(out_shape))]
    return TensorDesc(dt, out_shape, tuple(strides), guaranteed_base_offset_alignment=align)


def mean(*arrays, device=None):
    """ONNX Mean-13: the element-wise mean of 1 to 64 inputs of one data type, with numpy-style
    (multidirectional) broadcasting.

    ``arrays``: numpy, CuPy, PyTorch, pyopencl or other DLPack arrays, all of one library, of
    float32, float16, int32 or uint32 (DirectML's types), or bfloat16 (``ml_dtypes.bfloat16``
    numpy arrays, PyTorch bfloat16 tensors), float64, int64 or uint64 (the extension types, computed
    where the device's backend has their kernels; today the CPU device). Python lists and
    array-likes are taken as ``numpy.asarray`` takes them, with a numpy result; masked arrays are
    refused. The result has the inputs' type and
    lives where they live. Strided views (slices, transposes, broadcasts) are described by the
    TensorDesc's strides, never repacked: device arrays are bound where they are; host arrays are
    read in place on a device that works in host memory (the CPU device at any size, an OpenCL CPU
    device or unified-memory GPU where it takes the address), else uploaded as the bytes they span
    through pooled buffers. A copy is made only of an input with negative
    strides or strides that are not a whole number of elements, which a TensorDesc cannot describe.
    ``device``: a Device, a string such as ``"opencl"`` or ``"cuda:0"``, or None (default): the
    device the inputs live on, or for host arrays ``$GPU_MEAN_DEVICE`` or the best device present.

    One input is copied, two run DML ELEMENT_WISE_MEAN, three or more the one-pass
    ``gm.ext.NaryMeanDesc`` (every input read once, one rounding). The extension types run
    ``gm.ext.MeanDesc`` for two inputs and ``gm.ext.NaryMeanDesc`` otherwise (one input included).
    Integers truncate toward zero. Arrays past the device's largest buffer
    (``Device.max_alloc_bytes``) or DirectML's 2^32 - 1 elements run piece by piece, each piece
    written into its place in the result (``split.py``).
    """
    return mean_op(arrays, device)


def mean_op(arrays, device, broadcast: bool = True, what: str = "Mean", types=None, type_list: str = ""):
    """``mean`` for the frontends: ``broadcast`` (Mean before opset 8 takes same-shaped inputs),
    ``what`` (the operator name errors give) and ``types`` (an opset's type constraint, spelled
    ``type_list`` in errors; None: every type ``gm.mean`` takes)."""
    if not arrays:
        raise InvalidArgumentError(f"{what}: at least one input is required")
    if len(arrays) > MAX_NARY_INPUTS:
        raise UnsupportedError(f"{what}: {len(arrays)} inputs; gpu_mean takes at most {MAX_NARY_INPUTS}")
    res, key = repeat.run(("mean", broadcast, what, types), arrays, device, what)
    if res is not repeat.MISS:
        return res
    call = Call(arrays, device, what, repeat.seen(key))
    ops = call.ops
    dtypes = {o.dtype for o in ops}
    if len(dtypes) > 1:
        raise InvalidArgumentError(f"{what}: inputs have data types {sorted(map(str, dtypes))}; ONNX Mean takes one "
                                   "type T for every input")
    if types is not None:
        data_type_of(ops[0].dtype, what, types, type_list)
    shapes = [o.shape for o in ops]
    if not broadcast and len(set(shapes)) > 1:
        raise InvalidArgumentError(f"{what}: input shapes {shapes} differ; this opset takes same-shaped inputs")
    try:
        out_shape = np.broadcast_shapes(*shapes)
    except ValueError as e:
        raise InvalidArgumentError(f"{what}: input shapes {shapes} do not broadcast (ONNX multidirectional "
                                   "broadcasting)") from e
    count = math.prod(out_shape)
    if count == 0:
        return call.empty_result(out_shape)
    if len(out_shape) > 8:
        raise UnsupportedError(f"{what}: rank {len(out_shape)} exceeds DirectML's 8 dimensions")
    if call.mode == "split" or split.too_big(call, count, count * ops[0].dtype.itemsize):
        return split.run_mean(call, out_shape, mean_desc)
    res = call.run(("mean", call.signature), lambda: mean_desc(call, ops, out_shape))
    repeat.keep(key, call)
    return res


def mean_desc(call: Call, ops, out_shape, layout=None):
    """(descriptor, result shape) of one mean launch: IDENTITY, ELEMENT_WISE_MEAN or the n-ary mean
    over ``ops`` broadcast to ``out_shape``. ``layout``: (element strides, alignment) of the view a
    piece of a split call writes, else a packed result."""
    dt = data_type_of(ops[0].dtype, call.what)
    descs = [broadcast_desc(dt, o.shape, out_shape, o.strides, call.alignment(o)) for o in ops]
    if layout is None:
        out_desc = TensorDesc(dt, tuple(out_shape) or (1,))
    else:
        out_desc = TensorDesc(dt, tuple(out_shape), layout[0], guaranteed_base_offset_alignment=layout[1])
    ext = dt in EXTENSION_TYPES
    if len(ops) == 1 and not ext:
        return ElementWiseIdentityDesc(descs[0], out_desc), out_shape
    if len(ops) == 2:
        return (MeanDesc if ext else ElementWiseMeanDesc)(descs[0], descs[1], out_desc), out_shape
    return NaryMeanDesc(tuple(descs), out_desc), out_shape


# -- ReduceMean ---------------------------------------------------------------------------------

def normalize_axes(axes, rank: int, *, allow_negative: bool = True, what: str = "ReduceMean") -> tuple:
    out = []
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise InvalidArgumentError(f"{what}: axes must be integers; got {a!r} ({type(a).__name__}) in "
                                       f"{axes!r}")
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


def axes_list(axes, what: str) -> tuple:
    """``axes`` as given (None, an integer, a sequence or a 1-D integer array) as a tuple of its items."""
    if axes is None:
        return ()
    if isinstance(axes, np.ndarray):
        if axes.ndim > 1 or (axes.size and axes.dtype.kind not in "iu"):
            raise InvalidArgumentError(f"{what}: axes must be a 1-D array of integers, got {axes.dtype} with shape "
                                       f"{axes.shape}")
        return tuple(axes.reshape(-1).tolist())
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, (bool, np.bool_)):
        return (axes,)
    if isinstance(axes, (list, tuple)):
        return tuple(axes)
    raise InvalidArgumentError(f"{what}: axes must be None, an integer or a sequence of integers, got {axes!r} "
                               f"({type(axes).__name__})")


def merge_dims(shape, strides, axes):
    """Drop size-1 dims and merge neighbours of the same kind (both reduced or both kept) whose
    strides let one index walk both: stride[d] == stride[d+1] * size[d+1]."""
    return merge_dims_out(shape, strides, axes)[:3]


def merge_dims_out(shape, strides, axes, out_strides=None):
    """``merge_dims`` and the output's strides over the merged dims: kept neighbours merge only
    where the output's strides let one index walk both too (``out_strides``: the output's element
    strides over the input's dims; None: a packed output, which always merges)."""
    sizes, st, red, ost = [], [], [], []
    for d, (n, s) in enumerate(zip(shape, strides)):
        if n == 1:
            continue
        r = d in axes
        o = 0 if out_strides is None or r else out_strides[d]
        if sizes and red[-1] == r and st[-1] == s * n and ost[-1] == o * n:
            sizes[-1] *= n
            st[-1] = s
            ost[-1] = o
        else:
            sizes.append(n)
            st.append(s)
            red.append(r)
            ost.append(o)
    if not sizes:
        return (1,), (1,), (), (1,)
    return tuple(sizes), tuple(st), tuple(i for i, r in enumerate(red) if r), tuple(ost)


def reduce_mean(x, axes=None, keepdims: bool = True, noop_with_empty_axes: bool = False, device=None, axis=None):
    """ONNX ReduceMean-18: the mean of ``x`` over ``axes``.

    ``x``: an array as ``gm.mean`` takes it (DirectML's float32, float16, int32, uint32, or the
    extension types bfloat16, float64, int64, uint64); the result has its type and lives where it
    lives. Strided views are described, not repacked, as for ``gm.mean`` (a copy only for negative
    strides or strides that are not whole elements).
    ``axes``: None (default) or an integer, a sequence of integers or a 1-D integer array; negative
    axes count from the back; each axis at most once. Anything else is an InvalidArgumentError.
    ``keepdims``: True (default, as ONNX; numpy's default is False) keeps reduced axes as size 1.
    ``noop_with_empty_axes``: False (default): no axes reduces every axis; True: no axes is an
    identity (a copy).
    ``device``: as for ``gm.mean`` (default None: where ``x`` lives, else the default device).
    ``axis``: numpy's name for ``axes`` (an integer, a tuple or None); give one of the two.

    Floats run DML REDUCE AVERAGE (wide accumulation, within 1 ulp); integers
    ``gm.ext.IntegerReduceMeanDesc`` (exact, truncation toward zero); the extension types
    ``gm.ext.ReduceMeanDesc`` (the same promises). A reduction over a zero-size dimension gives NaN
    (floats) or 0 (integers) without launching a kernel. An ``x`` past the device's largest buffer
    or DirectML's 2^32 - 1 elements runs in pieces; where a reduced axis is cut, the pieces' wide
    partial sums are added exactly and divided once (``split.py``).
    """
    if axis is not None:
        if axes is not None:
            raise InvalidArgumentError(f"ReduceMean: axes={axes!r} and axis={axis!r} were both given; axis is "
                                       "numpy's name for axes: give one")
        axes = axis
    return reduce_mean_op(x, axes, keepdims, noop_with_empty_axes, device)


def reduce_mean_op(x, axes=None, keepdims: bool = True, noop_with_empty_axes: bool = False, device=None,
                   allow_negative: bool = True, what: str = "ReduceMean", types=None, type_list: str = ""):
    """``reduce_mean`` for the frontends: ``allow_negative`` (opsets before 11 refuse negative axes),
    ``what`` (the operator name errors give) and ``types`` / ``type_list`` (as for ``mean_op``)."""
    axes = axes_list(axes, what)
    key = None
    if all(type(a) is int for a in axes):     # 1.0, True and np.float32(1) hash as 1 does: the full path refuses them
        res, key = repeat.run(("reduce", axes, keepdims, noop_with_empty_axes, allow_negative, what, types), (x,),
                              device, what)
        if res is not repeat.MISS:
            return res
    call = Call([x], device, what, repeat.seen(key))
    op = call.ops[0]
    dt = data_type_of(op.dtype, what, types, type_list)
    shape = op.shape
    rank = len(shape)
    if not axes:
        if noop_with_empty_axes:
            return mean_op([x], call.dev, what=what, types=types, type_list=type_list)   # identity: a copy
        axes = tuple(range(rank))
    axes = normalize_axes(axes, rank, allow_negative=allow_negative, what=what)
    out_keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    out_shape = out_keep if keepdims else tuple(s for d, s in enumerate(shape) if d not in axes)
    n_out = math.prod(out_shape)
    if n_out == 0 or any(shape[d] == 0 for d in axes):
        return call.empty_result(out_shape, (np.nan if dt.is_float else 0) if n_out else None)

    if (call.mode == "split" or split.too_big(call, math.prod(shape), 0)
            or split.too_big(call, n_out, n_out * op.dtype.itemsize)):
        return split.run_reduce(call, axes, out_shape, reduce_desc)

    def make():
        return reduce_desc(call, op, axes)[0], out_shape
    res = call.run(("reduce", call.signature, axes, keepdims), make)
    repeat.keep(key, call)
    return res


def reduce_desc(call: Call, op, axes, layout=None, wide: bool = False):
    """(descriptor, result shape with reduced axes kept as 1) of one reduction over ``op``: REDUCE
    AVERAGE for floats, the exact integer mean for integers, or with ``wide`` the wide partial sums
    (gm.ext.ReduceSumDesc). ``layout``: as for ``mean_desc``, over ``op``'s dims (1 where reduced)."""
    what = call.what
    dt = data_type_of(op.dtype, what)
    shape = op.shape
    out_strides = None
    if layout is not None:
        out_strides = tuple(0 if d in axes else s for d, s in enumerate(layout[0]))
    sizes, strides, red_axes, merged_out = merge_dims_out(shape, op.strides, axes, out_strides)
    if len(sizes) > 8:
        raise UnsupportedError(f"{what}: after merging neighbouring axes the tensor still has rank "
                               f"{len(sizes)}; DirectML takes at most 8 dimensions")
    in_desc = TensorDesc(dt, sizes, strides, guaranteed_base_offset_alignment=call.alignment(op))
    out_dt = WIDE_SUM_TYPE[dt] if wide else dt
    out_sizes = tuple(1 if d in red_axes else s for d, s in enumerate(sizes))
    if layout is None:
        out_desc = TensorDesc(out_dt, out_sizes)
    else:
        out_desc = TensorDesc(out_dt, out_sizes, tuple(0 if n == 1 else s for n, s in zip(out_sizes, merged_out)),
                              guaranteed_base_offset_alignment=layout[1])
    keep = tuple(1 if d in axes else s for d, s in enumerate(shape))
    if wide:
        return ReduceSumDesc(in_desc, out_desc, red_axes), keep
    if dt in EXTENSION_TYPES:
        return ReduceMeanDesc(in_desc, out_desc, red_axes), keep
    if dt.is_float:
        return ReduceDesc(ReduceFunction.AVERAGE, in_desc, out_desc, red_axes), keep
    return IntegerReduceMeanDesc(in_desc, out_desc, red_axes), keep


# -- memory -------------------------------------------------------------------------------------

def free_memory(device=None) -> int:
    """Give back the device memory gm.mean and gm.reduce_mean keep between calls: the buffers and
    compiled launches they pool, and what the native layer keeps after that (CuPy's memory pool).
    ``device``: a Device or a device string (``"opencl:0"``); None (default): every device. Returns
    the bytes the pools gave back. The next call allocates and compiles again as needed."""
    if device is None:
        return pool.release()
    if isinstance(device, Device):
        return pool.release([pool.existing_cache(device)])
    kind, index = parse_device(device)
    # every Device object over that hardware the calls have used ("opencl" and "opencl:0" alike)
    return pool.release(pool.caches_of(lambda info: info.backend == kind and info.index == index))


def memory_pool(device=None) -> pool.BufferPool:
    """The pool of device buffers gm.mean and gm.reduce_mean keep for ``device`` (default: the
    default device), with CuPy's MemoryPool methods: ``used_bytes()`` (held by cached launches),
    ``free_bytes()``, ``total_bytes()``, ``get_limit()``, ``set_limit(nbytes)`` and
    ``free_all_blocks()``. It holds at most its limit between calls (default: an eighth of the
    device's memory, at most 1 GiB)."""
    return pool.device_cache(get_device(device)).pool
