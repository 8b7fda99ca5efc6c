"""gm.mean (ONNX Mean-13) and gm.reduce_mean (ONNX ReduceMean-18) over Dask arrays.

Each chunk runs on gpu_mean kernels on its worker's device: ``device=`` names one ("cpu",
"opencl:1", "cuda", ...), or None lets every worker resolve its own (``$GPU_MEAN_DEVICE`` in the
worker's environment, else its best device). Each block takes the path of ``gm.mean`` /
``gm.reduce_mean`` (``gpu_mean.frontends.arrays.Call``): used in place where the device works in host
memory or holds the chunk (CuPy on its GPU), else copied through pooled buffers; launches are kept
per worker process, device and chunk signature. The reduction is Dask's own ``reduction`` (chunk /
combine / aggregate) over partial sums (see ``gpu_mean.dask.partials`` for why they keep the
one-device accuracy); element-wise Mean is Dask's ``blockwise``, which aligns differently chunked
inputs and broadcasts size-1 dimensions.
Chunks may be numpy or CuPy arrays; the result is a lazy Dask array of the same chunk type.

On GPUs, the same calls run on a dask-cuda ``LocalCUDACluster`` with CuPy chunks: each worker sees
its own GPU as cuda:0, so device=None (or "cuda") is that GPU, and partial sums stay on it.

Install with ``pip install "gpu_mean[dask]"``; ``import gpu_mean`` itself never imports Dask.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

try:
    import dask
    import dask.array as da
    from dask.array.utils import meta_from_array
except ImportError as e:   # the optional extra
    raise ImportError('gpu_mean.dask needs Dask: pip install "gpu_mean[dask]"') from e

from ..descriptors.ext import MAX_NARY_INPUTS
from ..descriptors.tensor import packed_strides
from ..errors import InvalidArgumentError, UnsupportedError
from ..frontends.functional import axes_list, data_type_of, get_device, merge_dims, normalize_axes
from ..frontends.functional import mean as _gm_mean
from .partials import PartialSum, aggregate_mean, chunk_sum, combine_sums

__all__ = ["PartialSum", "mean", "reduce_mean"]


def _mean_block(*blocks, device=None):
    return _gm_mean(*blocks, device=get_device(device))


def mean(*arrays, device=None):
    """ONNX Mean-13 over Dask arrays: the element-wise mean of 1..64 same-typed inputs with
    multidirectional broadcasting, each output block computed by ``gm.mean`` on the worker."""
    if not arrays:
        raise InvalidArgumentError("Mean: at least one input is required")
    if len(arrays) > MAX_NARY_INPUTS:
        raise UnsupportedError(f"Mean: {len(arrays)} inputs; gpu_mean takes at most {MAX_NARY_INPUTS}")
    arrays = [da.asarray(a) for a in arrays]
    dtypes = {np.dtype(a.dtype) for a in arrays}
    if len(dtypes) > 1:
        raise InvalidArgumentError(f"Mean: inputs have data types {sorted(map(str, dtypes))}; ONNX Mean takes one "
                                   "type T for every input")
    data_type_of(arrays[0].dtype, "Mean")
    shapes = [a.shape for a in arrays]
    try:
        out_shape = np.broadcast_shapes(*shapes)
    except ValueError as e:
        raise InvalidArgumentError(f"Mean: input shapes {shapes} do not broadcast (ONNX multidirectional "
                                   "broadcasting)") from e
    if len(out_shape) > 8:
        raise UnsupportedError(f"Mean: rank {len(out_shape)} exceeds DirectML's 8 dimensions")
    ndim = len(out_shape)
    args = []
    for a in arrays:
        args += [a, tuple(range(ndim - a.ndim, ndim))]   # right-aligned, as numpy broadcasting
    meta = meta_from_array(arrays[0]._meta, ndim=ndim, dtype=arrays[0].dtype)
    return da.blockwise(partial(_mean_block, device=device), tuple(range(ndim)), *args,
                        dtype=arrays[0].dtype, meta=meta, token="gm-mean")


# The tree's fan-in where the caller and Dask's config name none: how many partials one combine or
# aggregate task adds. Dask's own default, 4 (and for two reduced axes 2 per axis), suits partials that
# cost as much to add as to ship; these add in a few passes per output, so a level of the tree costs
# mostly its round trip through the scheduler (about 5 ms on a LocalCluster) and its transfers. Up to
# FAN_IN partials of a row of chunks are added by the aggregate alone; more go by levels of FAN_IN. One
# task holds at most PARTIALS_BUDGET bytes of partials (by the digits' size an output, the largest).
FAN_IN = 16
PARTIALS_BUDGET = 256 << 20
PARTIAL_BYTES_PER_OUTPUT = 96


def fan_in(x, axes: tuple):
    """``split_every`` for a reduction of the Dask array ``x`` over ``axes`` (normalized): None where Dask's
    config sets one; a dict that makes one level (the aggregate) when the chunks along the reduced axes
    number at most the fan-in; else the fan-in as an integer (Dask spreads it over the axes)."""
    if dask.config.get("split_every", None) is not None:
        return None
    outputs = math.prod(max(c, default=1) for d, c in enumerate(x.chunks) if d not in axes)
    fan = max(4, min(FAN_IN, PARTIALS_BUDGET // max(1, outputs * PARTIAL_BYTES_PER_OUTPUT)))
    if math.prod(x.numblocks[a] for a in axes) <= fan:
        return {a: max(x.numblocks[a], 2) for a in axes}
    return fan


def reduce_mean(x, axes=None, keepdims: bool = True, noop_with_empty_axes: bool = False, device=None,
                split_every=None):
    """ONNX ReduceMean-18 over a Dask array, as Dask's ``reduction`` of wide partial sums.

    Floats are within 1 ulp of the exact mean on same-signed data, integers exact (truncation toward
    zero), at any chunking and ``split_every`` (Dask's tree fan-in; by default ``fan_in``: up to 16
    chunks along the reduced axes are added by one task). A reduction over a zero-size dimension gives
    NaN (floats) or 0 (integers)."""
    x = da.asarray(x)
    data_type_of(x.dtype, "ReduceMean")
    axes = axes_list(axes, "ReduceMean")
    if x.ndim == 0 and not axes:
        return mean(x, device=device)       # a scalar's mean is its value, 0-d as gm.reduce_mean gives it
    if not axes:
        if noop_with_empty_axes:
            return mean(x, device=device)   # identity, each block copied on the worker's device
        axes = tuple(range(x.ndim))
    axes = normalize_axes(axes, x.ndim)
    sizes, _, _ = merge_dims(x.shape, packed_strides(x.shape), axes)
    if len(sizes) > 8:
        # a chunk merges at least as well as the whole array, so the whole array's count is the bound
        raise UnsupportedError(f"ReduceMean: after merging neighbouring axes the tensor still has rank "
                               f"{len(sizes)}; DirectML takes at most 8 dimensions")
    out_ndim = x.ndim if keepdims else x.ndim - len(axes)
    meta = meta_from_array(x._meta, ndim=out_ndim, dtype=x.dtype)
    if split_every is None:
        split_every = fan_in(x, axes)
    return da.reduction(x, partial(chunk_sum, device=device), partial(aggregate_mean, device=device),
                        combine=partial(combine_sums, device=device),
                        axis=axes, keepdims=keepdims, dtype=x.dtype, split_every=split_every,
                        concatenate=False, meta=meta, name="gm-reduce-mean")
