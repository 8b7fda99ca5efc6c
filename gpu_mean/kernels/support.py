"""Which data types each backend's kernels compute, per mean operation: the one table that
``Device.create_operator`` consults (through ``Backend.kernel_refusal``) and that the tests read
for what each device must compute and what it must refuse.

Operations not listed here (ADD, IDENTITY) compute every type their descriptors' tables allow on
every backend. A type a device's hardware lacks (FLOAT64 without fp64) is refused before this table
is read (``Backend.storage_refusal``).

Issue 21 adds BFLOAT16, FLOAT64, INT64 and UINT64 (``tables.EXTENSION_TYPES``): the CPU device and
the OpenCL and CUDA kernels compute them (docs/design.md, "The extension types' kernels"), the wide
sum's two-word totals included. Every test that reads this table computes where it
says so, against the exact oracle, and checks the refusal elsewhere.
"""
from __future__ import annotations

from ..descriptors.tables import DIRECTML_MEAN_TYPES, EXTENSION_TYPES
from ..descriptors.types import DataType, KernelOp

MEAN_OPS = (KernelOp.MEAN, KernelOp.NARY_MEAN, KernelOp.REDUCE_MEAN, KernelOp.REDUCE_SUM)
_ALL = DIRECTML_MEAN_TYPES | EXTENSION_TYPES

# the GPU kernels (OpenCL and CUDA: one source): every type, the wide sum's two-word totals (FLOAT64,
# INT64, UINT64 inputs, two output tensors: reduce_meta.h's GM_WIDE_SUM) included
_GPU = {KernelOp.MEAN: _ALL, KernelOp.NARY_MEAN: _ALL, KernelOp.REDUCE_MEAN: _ALL, KernelOp.REDUCE_SUM: _ALL}
KERNEL_TYPES: dict[str, dict[KernelOp, frozenset]] = {
    "cpu": {op: _ALL for op in MEAN_OPS},
    "opencl": dict(_GPU),
    "cuda": dict(_GPU),
}

# the operations' names in refusals
OP_WORDS = {KernelOp.MEAN: "element-wise mean", KernelOp.NARY_MEAN: "n-ary mean",
            KernelOp.REDUCE_MEAN: "mean reduction", KernelOp.REDUCE_SUM: "wide sum reduction"}
API_NAMES = {"cpu": "CPU", "opencl": "OpenCL", "cuda": "CUDA"}


def computes(backend: str, op: KernelOp, dt: DataType) -> bool:
    """Whether ``backend``'s kernels compute ``op`` over ``dt`` (operations outside the table: yes)."""
    types = KERNEL_TYPES.get(backend, {}).get(op)
    return types is None or dt in types


def not_built(backend: str, op: KernelOp, dt: DataType) -> str | None:
    """Why ``backend`` cannot compute ``op`` over ``dt`` (None when it can)."""
    if computes(backend, op, dt):
        return None
    where = " or ".join(repr(b) for b in KERNEL_TYPES if computes(b, op, dt))
    return (f"the {OP_WORDS[op]} kernel for {dt.name} is not built yet on the {API_NAMES.get(backend, backend)} "
            f"backend (gpu_mean issue 21)" + (f"; device {where} computes it" if where else ""))
