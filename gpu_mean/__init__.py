"""gpu_mean: DirectML's operator-descriptor model for the mean operators, on CUDA, OpenCL and numpy."""
from . import ext
from ._version import __version__ as __version__
from .backends import backend_status, create_device, list_devices
from .descriptors import (
    BindingType,
    DataType,
    ElementWiseAddDesc,
    ElementWiseIdentityDesc,
    ElementWiseMeanDesc,
    ExecutionFlags,
    Feature,
    FeatureLevel,
    OperatorType,
    ReduceDesc,
    ReduceFunction,
    ScaleBias,
    TensorDesc,
    TensorFlags,
    calc_buffer_tensor_size,
)
from .errors import (
    DeviceRemovedError,
    DmlError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KernelBoundsError,
    KernelBuildError,
    OutOfMemoryError,
    UnsupportedError,
    UnsupportedTypeError,
)
from .runtime.bindings import BindingTable
from .runtime.device import Device, DeviceInfo
from .runtime.execution import CommandRecorder
from .runtime.objects import (
    BindingProperties,
    Buffer,
    BufferArrayBinding,
    BufferBinding,
    CommandList,
    CompiledOperator,
    Operator,
    OperatorInitializer,
)

__all__ = [
    "BindingProperties", "BindingTable", "BindingType", "Buffer", "BufferArrayBinding", "BufferBinding",
    "CommandList", "CommandRecorder", "CompiledOperator", "DataType", "Device", "DeviceInfo", "DeviceRemovedError",
    "DmlError", "ElementWiseAddDesc", "ElementWiseIdentityDesc", "ElementWiseMeanDesc", "ExecutionFlags", "Feature",
    "FeatureLevel", "InvalidArgumentError", "InvalidArgumentTypeError", "KernelBoundsError", "KernelBuildError",
    "Operator", "OperatorInitializer", "OperatorType",
    "OutOfMemoryError", "ReduceDesc", "ReduceFunction", "ScaleBias", "TensorDesc", "TensorFlags", "UnsupportedError",
    "UnsupportedTypeError",
    "backend_status", "calc_buffer_tensor_size", "create_device", "ext", "free_memory", "list_devices", "mean",
    "memory_pool", "reduce_mean",
]


_FUNCTIONAL = ("mean", "reduce_mean", "free_memory", "memory_pool")


def __dir__():
    return sorted(set(globals()) | set(_FUNCTIONAL))


def __getattr__(name):
    # the frontends import the device layer; load them on first use
    if name in _FUNCTIONAL:
        from .frontends import functional
        value = globals()[name] = getattr(functional, name)     # later lookups skip this function
        return value
    raise AttributeError(f"module 'gpu_mean' has no attribute {name!r}")
