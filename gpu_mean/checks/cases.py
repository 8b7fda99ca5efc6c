"""A test or profile case as a value: operation, data type, shape, axes, layout.

The conformance runner and the profiler both build on ``Case``: the descriptor, the bytes moved and
the display name are all derived from the value, so a new case is one constructor call and nothing
has to be parsed back out of a name.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ext
from ..descriptors import tables
from ..descriptors.operators import (
    ElementWiseAddDesc,
    ElementWiseIdentityDesc,
    ElementWiseMeanDesc,
    ReduceDesc,
    ScaleBias,
)
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType, ReduceFunction

# operation -> the operator's name in reports (DirectML's name, or gm.ext's)
OPERATORS = {
    "mean": "ELEMENT_WISE_MEAN",
    "add": "ELEMENT_WISE_ADD",
    "identity": "ELEMENT_WISE_IDENTITY",
    "reduce": "REDUCE(AVERAGE)",
    "nary": "ext.NaryMean",
    "int_reduce": "ext.IntegerReduceMean",
    "ext_mean": "ext.Mean",
    "ext_reduce": "ext.ReduceMean",
}
# operation -> its table of data types and dimension counts per feature level
TABLES = {"mean": tables.ELEMENT_WISE_MEAN, "add": tables.ELEMENT_WISE_ADD,
          "identity": tables.ELEMENT_WISE_IDENTITY, "reduce": tables.REDUCE_AVERAGE,
          "nary": tables.EXT_NARY_MEAN, "int_reduce": tables.EXT_INTEGER_REDUCE_MEAN,
          "ext_mean": tables.EXT_MEAN, "ext_reduce": tables.EXT_REDUCE_MEAN}
REDUCTIONS = ("reduce", "int_reduce", "ext_reduce")
# gm.ext's operators: gpu_mean's own tables, reported apart from DirectML's
EXTENSIONS = ("nary", "int_reduce", "ext_mean", "ext_reduce")
# what an operation computes, whatever the data type picks as its descriptor
FAMILY = {"ext_mean": "mean", "int_reduce": "reduce", "ext_reduce": "reduce"}
# packed: dense row-major; broadcast: the first input has stride 0 on dim 0; permuted: column-major;
# padded: every stride doubled; permuted+padded: the first input permuted, the second padded;
# mixed (n-ary): packed, broadcast and permuted inputs in turn; scale_bias: IDENTITY with scale and bias
LAYOUTS = ("packed", "broadcast", "permuted", "padded", "permuted+padded", "mixed", "scale_bias")
SHORT = {DataType.FLOAT32: "f32", DataType.FLOAT16: "f16", DataType.FLOAT64: "f64", DataType.BFLOAT16: "bf16"}


def short_type(dt: DataType) -> str:
    return SHORT.get(dt, dt.name.lower())


def op_for(family: str, dt: DataType) -> str:
    """The operation of ``family`` ("mean", "reduce") whose descriptor takes ``dt``: DirectML's for
    its types, gm.ext's otherwise."""
    if dt in tables.EXTENSION_TYPES:
        return {"mean": "ext_mean", "reduce": "ext_reduce"}.get(family, family)
    if family == "reduce" and not dt.is_float:
        return "int_reduce"
    return family


def _layout(dt: DataType, shape: tuple, layout: str) -> TensorDesc:
    packed = TensorDesc(dt, shape)
    if layout == "broadcast":
        return TensorDesc(dt, shape, (0,) + packed.effective_strides[1:])
    if layout == "permuted":
        return TensorDesc(dt, shape, tuple(reversed(TensorDesc(dt, tuple(reversed(shape))).effective_strides)))
    if layout == "padded":
        return TensorDesc(dt, shape, tuple(s * 2 for s in packed.effective_strides))
    return packed


@dataclass(frozen=True)
class Case:
    op: str                        # a key of OPERATORS
    dtype: DataType
    shape: tuple
    axes: tuple | None = None      # reductions only
    layout: str = "packed"
    inputs: int = 2                # the n-ary mean's input count
    klass: str = ""                # the performance class a case list means it to stand for (else derived)

    def __post_init__(self):
        if self.op not in OPERATORS:
            raise ValueError(f"unknown operation {self.op!r}; choose from {', '.join(OPERATORS)}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}; choose from {', '.join(LAYOUTS)}")
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if self.op in REDUCTIONS:
            axes = tuple(range(len(self.shape))) if self.axes is None else tuple(int(a) for a in self.axes)
            object.__setattr__(self, "axes", axes)

    @property
    def operator(self) -> str:
        return OPERATORS[self.op]

    @property
    def family(self) -> str:
        """"mean", "reduce", "nary", "add" or "identity": what the case computes."""
        return FAMILY.get(self.op, self.op)

    @property
    def name(self) -> str:
        """A display string derived from the value (never parsed back)."""
        t = short_type(self.dtype)
        if self.op == "identity":
            base = f"copy {t}" if self.layout == "packed" else f"identity {t} {self.layout}"
        elif self.op in REDUCTIONS:
            base = f"{'int reduce' if self.op == 'int_reduce' else 'reduce'} {t} axes {list(self.axes)}"
            if self.layout != "packed":
                base += f" {self.layout}"
        elif self.op == "nary":
            base = f"mean {t} {self.inputs} inputs (ext)" + ("" if self.layout == "packed" else f" {self.layout}")
        else:
            word = {"packed": "a+b", "broadcast": "broadcast b"}.get(self.layout, self.layout)
            base = f"{self.family} {t} {word}"
        if self.op in ("ext_mean", "ext_reduce"):
            base += " (ext)"
        return base

    @property
    def shape_class(self) -> str:
        """The performance class (E1-E2, N, R1-R6; README "Reading profile output"): as given, else
        derived from the shape and axes (a sweep's smallest sizes would otherwise move a case between classes)."""
        if self.klass:
            return self.klass
        if self.family in ("mean", "add", "identity"):
            return "E2 broadcast" if self.layout == "broadcast" else "E1 contiguous"
        if self.op == "nary":
            return "N n-ary"
        kept = [s for i, s in enumerate(self.shape) if i not in self.axes and s > 1]
        red = [i for i in self.axes if self.shape[i] > 1]
        if not kept:
            return "R1 full"
        if red and red != list(range(red[0], red[-1] + 1)):
            return "R6 non-adjacent axes"
        if red and red[-1] == len(self.shape) - 1:
            n = 1
            for i in red:
                n *= self.shape[i]
            return "R2 inner, long" if n >= 512 else "R3 inner, short"
        outputs = 1
        for s in kept:
            outputs *= s
        return "R4 outer, many outputs" if outputs >= 4096 else "R5 outer, few outputs"

    def output_shape(self) -> tuple:
        if self.op in REDUCTIONS:
            return tuple(1 if i in self.axes else s for i, s in enumerate(self.shape))
        return self.shape

    def desc(self):
        """The operator descriptor this case describes."""
        dt, shape, lay = self.dtype, self.shape, self.layout
        packed = TensorDesc(dt, shape)
        if self.op in ("mean", "add", "ext_mean"):
            cls = {"mean": ElementWiseMeanDesc, "add": ElementWiseAddDesc, "ext_mean": ext.MeanDesc}[self.op]
            if lay == "permuted+padded":
                perm = _layout(dt, shape, "permuted")
                return cls(perm, _layout(dt, shape, "padded"), perm)
            return cls(_layout(dt, shape, lay), packed, packed)
        if self.op == "identity":
            if lay == "scale_bias":
                return ElementWiseIdentityDesc(packed, _layout(dt, shape, "padded"), ScaleBias(0.25, -1.0))
            return ElementWiseIdentityDesc(_layout(dt, shape, lay), packed)
        if self.op == "nary":
            others = ("broadcast", "permuted") if lay == "mixed" else (lay, lay)
            ts = [packed] + [_layout(dt, shape, others[i % 2]) for i in range(self.inputs - 1)]
            return ext.NaryMeanDesc(tuple(ts), packed)
        inp = _layout(dt, shape, lay)
        out = TensorDesc(dt, self.output_shape())
        if self.op == "reduce":
            return ReduceDesc(ReduceFunction.AVERAGE, inp, out, self.axes)
        if self.op == "ext_reduce":
            return ext.ReduceMeanDesc(inp, out, self.axes)
        return ext.IntegerReduceMeanDesc(inp, out, self.axes)

    @property
    def traffic(self) -> int:
        """Bytes each input's distinct elements are read once plus the output written once (a
        broadcast input counts the elements it really has, not the logical shape)."""
        d = self.desc()
        return self.read_traffic + sum(_distinct_bytes(t) for t in d.output_tensors())

    @property
    def read_traffic(self) -> int:
        """The part of ``traffic`` that is read: each input's distinct elements once."""
        return sum(_distinct_bytes(t) for t in self.desc().input_tensors())

    @property
    def read_streams(self) -> int:
        """Inputs read as streams of the largest input's size (a mean of k full-size inputs reads k
        streams side by side; a broadcast input's few bytes are no stream of their own): the traffic
        kernel reads its bytes in as many (readbw.traffic_kernel)."""
        sizes = [_distinct_bytes(t) for t in self.desc().input_tensors()]
        return max(1, sum(1 for b in sizes if b == max(sizes)))

    def to_json(self) -> dict:
        return {"name": self.name, "class": self.shape_class, "operator": self.operator, "op": self.op,
                "dtype": self.dtype.name,
                "shape": list(self.shape), "axes": None if self.axes is None else list(self.axes),
                "layout": self.layout, "inputs": self.inputs if self.op == "nary" else None}


def distinct_elements(t) -> int:
    """A tensor's distinct elements (a dimension of stride 0 counts once)."""
    n = 1
    for s, st in zip(t.sizes, t.effective_strides):
        n *= 1 if st == 0 else s
    return n


def _distinct_bytes(t) -> int:
    return distinct_elements(t) * t.numpy_dtype.itemsize
