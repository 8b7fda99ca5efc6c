"""The descriptor layer: data types, tensor descriptors, support tables, operator descriptors."""
from .operators import (
                        ElementWiseAddDesc,
                        ElementWiseIdentityDesc,
                        ElementWiseMeanDesc,
                        OperatorDesc,
                        ReduceDesc,
                        ScaleBias,
)
from .tensor import TensorDesc, calc_buffer_tensor_size, packed_strides
from .types import (
                        BindingType,
                        DataType,
                        ExecutionFlags,
                        Feature,
                        FeatureLevel,
                        OperatorType,
                        ReduceFunction,
                        TensorFlags,
)

__all__ = [
    "BindingType", "DataType", "ElementWiseAddDesc", "ElementWiseIdentityDesc", "ElementWiseMeanDesc",
    "ExecutionFlags", "Feature", "FeatureLevel", "OperatorDesc", "OperatorType", "ReduceDesc", "ReduceFunction",
    "ScaleBias", "TensorDesc", "TensorFlags", "calc_buffer_tensor_size", "packed_strides",
]
