"""Extensions DirectML does not have, under their own names: see gpu_mean/descriptors/ext.py."""
from .descriptors.ext import (
    MAX_NARY_INPUTS,
    IntegerReduceMeanDesc,
    MeanDesc,
    NaryMeanDesc,
    ReduceMeanDesc,
    ReduceSumDesc,
)
from .descriptors.tables import EXTENSION_TYPES

__all__ = ["EXTENSION_TYPES", "IntegerReduceMeanDesc", "MAX_NARY_INPUTS", "MeanDesc", "NaryMeanDesc",
           "ReduceMeanDesc", "ReduceSumDesc"]
