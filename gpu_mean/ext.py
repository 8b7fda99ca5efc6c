"""Extensions DirectML does not have, under their own names: see gpu_mean/descriptors/ext.py."""
from .descriptors.ext import MAX_NARY_INPUTS, IntegerReduceMeanDesc, NaryMeanDesc, ReduceSumDesc

__all__ = ["IntegerReduceMeanDesc", "MAX_NARY_INPUTS", "NaryMeanDesc", "ReduceSumDesc"]
