"""OpenVINO ReduceMean-1 (its own opset): ``keep_dims`` defaults to false; ``axes`` is required,
scalar or 1-D, unique, in [-r, r-1]; empty ``axes`` is an identity."""
from __future__ import annotations

import numpy as np

from .frontends import functional


def reduce_mean(data, axes, keep_dims: bool = False, device=None):
    ax = np.atleast_1d(np.asarray(axes)).astype(np.int64).ravel().tolist()
    return functional.reduce_mean_op(data, axes=ax, keepdims=keep_dims, noop_with_empty_axes=True, device=device,
                                  what="OpenVINO ReduceMean-1")
