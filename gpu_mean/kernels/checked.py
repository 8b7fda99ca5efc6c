"""The bounds-checked kernel build, host side (docs/design.md, "The checked build").

A checked device (``opencl:0-checked``, ``cuda:0-checked``; ``create_device(..., checked=True)``)
builds every kernel with ``GM_CHECKED`` 1 (the variant builders' ``checked``;
opencl_kernels/common.h): each global load and store tests its element index against the bounds of
its kernel argument, the first violation is recorded in a status buffer the kernel takes as its last
argument, and the access goes to a sink instead of outside the binding. Before each launch the
program writes the bounds of every argument into that buffer; after it, it reads the record back
and raises KernelBoundsError naming the kernel, the argument, the index and the bounds. Each launch
is waited for: a checked device is a debugging device, as slow as that makes it.

The bounds are what the plan says each operand spans (not the size of the buffer bound), so a kernel
that reads one element past its tensor inside a larger buffer is caught too.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import KernelBoundsError
from ..runtime import planning

# the status buffer, in 64-bit words (opencl_kernels/common.h: GM_CHK_SINK, GM_CHK_BOUNDS)
RECORD_WORDS = 8
SINK_WORDS = 16
BOUNDS_WORDS = 48
RECORD_BYTES = 8 * RECORD_WORDS


# the trace mode (GM_TRACE; opencl_kernels/common.h): header words and the words of one record
TRACE_HEAD = 8
TRACE_RECORD_WORDS = 4


@dataclass(frozen=True)
class Bound:
    """Kernel argument ``name``'s legal element indices [lo, hi), as the kernel indexes its pointer."""
    name: str
    lo: int
    hi: int


def status_bytes(n_args: int, trace_capacity: int = 0) -> int:
    return 8 * (BOUNDS_WORDS + 2 * n_args + TRACE_RECORD_WORDS * trace_capacity)


def status_words(bounds: list[Bound], trace_capacity: int = 0, n_args: int | None = None) -> np.ndarray:
    """What a launch starts from: no violation recorded, the sink, then every argument's bounds (and,
    in the trace mode, an empty trace region of ``trace_capacity`` records after the ``n_args``
    arguments' bounds the buffer has room for)."""
    w = np.zeros(BOUNDS_WORDS + 2 * len(bounds), np.int64)
    for a, b in enumerate(bounds):
        w[BOUNDS_WORDS + 2 * a: BOUNDS_WORDS + 2 * a + 2] = (b.lo, b.hi)
    if trace_capacity:
        n_args = len(bounds) if n_args is None else n_args
        w[TRACE_HEAD + 1: TRACE_HEAD + 3] = (trace_capacity, BOUNDS_WORDS + 2 * n_args)
    return w


class Trace:
    """The trace mode of a checked backend (``backend.trace``; GM_TRACE, opencl_kernels/common.h): every
    global access of every launch recorded, for the access model (gpu_mean/checks/access_model.py).
    ``launched`` notes each launch (the kernel, its geometry, the source it was built from); each
    status buffer's ``check`` hands its records to ``add``, which attaches them to the last launch."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.launches: list[dict] = []

    def launched(self, kernel: str, launch, source: tuple | None) -> None:
        self.launches.append({"kernel": kernel, "launch": launch, "source": source,
                              "records": np.zeros((0, TRACE_RECORD_WORDS), np.int64), "claimed": 0})

    def add(self, kernel: str, records: np.ndarray, claimed: int) -> None:
        last = self.launches[-1] if self.launches else None
        if last is None or last["kernel"] != kernel:
            raise RuntimeError(f"trace: records of {kernel} with no launch of it noted")
        last["records"], last["claimed"] = records, claimed

    def clear(self) -> None:
        self.launches = []


def span(shape, strides) -> int:
    """Elements from an operand's first through its last (0 for an empty one)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, strides))


def reduce_bounds(plan: planning.ReducePlan, in_off: int, out_off: int, part_off: int, flag_off: int = 0,
                  n_parts: int = 0, n_flags: int = 0) -> list[Bound]:
    """The reduction kernels' arguments (reduce_meta.h: GM_A_IN, GM_A_OUT, GM_A_PART, GM_A_FLAG), indexed
    from each buffer's start; offsets, ``n_parts`` (chunk partials; 0 when the reduction is one pass)
    and ``n_flags`` (flag bytes of the correctly rounded means; 0: none) in elements."""
    n_in = span(plan.keep_shape + plan.red_shape, plan.keep_in_strides + plan.red_strides)
    n_out = span(plan.keep_shape, plan.keep_out_strides)
    return [Bound("input", in_off, in_off + n_in), Bound("output", out_off, out_off + n_out),
            Bound("partials", part_off, part_off + n_parts), Bound("flags", flag_off, flag_off + n_flags)]


def low_word_bound(plan: planning.ReducePlan, lo_off: int) -> Bound:
    """The wide sum's low-word output (reduce_meta.h: GM_A_LO, after the four above), from its offset in
    elements and its own kept strides."""
    return Bound("output low word", lo_off, lo_off + span(plan.keep_shape, plan.keep_lo_strides))


def elementwise_bounds(plan: planning.ElementwisePlan, in_offs, out_off: int) -> list[Bound]:
    """The element-wise kernels' arguments (elementwise.cl: input k is argument k, the output NIN),
    each indexed from its buffer's start; ``in_offs`` and ``out_off`` in elements."""
    spans = [span(plan.shape, st) for st in plan.strides]
    offs = list(in_offs) + [out_off]
    return [Bound(f"input {k}" if k < plan.n_inputs else "output", o, o + n)
            for k, (o, n) in enumerate(zip(offs, spans))]


def check(record: np.ndarray, kernel: str, bounds: list[Bound], device: str) -> None:
    """Raise KernelBoundsError when the launch of ``kernel`` recorded a violation (``record``: the
    status buffer's first RECORD_BYTES)."""
    w = np.frombuffer(record.tobytes(), np.int64, RECORD_WORDS)
    flags = np.frombuffer(record.tobytes()[:8], np.int32)
    if flags[0] == 0:
        return
    arg, index, width, lo, hi, g0, g1 = (int(x) for x in w[1:8])
    name = bounds[arg].name if 0 <= arg < len(bounds) else f"argument {arg}"
    what = f"elements [{index}, {index + width})" if width > 1 else f"element {index}"
    raise KernelBoundsError(
        f"{device}: kernel {kernel} accessed {name} {what} outside its bounds [{lo}, {hi}) "
        f"(first by work-item ({g0}, {g1}); {int(flags[1])} out-of-bounds access(es) in all); the access "
        "was redirected, nothing outside the bindings was touched",
        kernel=kernel, argument=name, index=index, width=width, bounds=(lo, hi))


class StatusBuffer:
    """A checked program's status buffer on its backend: ``arm`` before a launch, ``check`` after."""

    def __init__(self, backend, n_args: int):
        self.backend = backend
        self.trace: Trace | None = getattr(backend, "trace", None)
        self.capacity = self.trace.capacity if self.trace is not None else 0
        self.native = backend.alloc(status_bytes(n_args, self.capacity))
        self.n_args = n_args
        self.bounds: list[Bound] = []

    def arm(self, bounds: list[Bound]) -> None:
        self.bounds = bounds
        self.backend.write(self.native, 0, status_words(bounds, self.capacity, self.n_args))

    def check(self, kernel: str) -> None:
        """Wait for the launch of ``kernel``, then raise on a recorded violation (a raising run launches
        nothing more, and the next run arms the buffer afresh). In the trace mode, first hand the
        launch's records to the trace and empty the region for the next launch."""
        if self.trace is not None:
            self._collect(kernel)
        check(self.backend.read(self.native, 0, RECORD_BYTES), kernel, self.bounds, self.backend.info.id)

    def _collect(self, kernel: str) -> None:
        be = self.backend
        claimed = int(be.read(self.native, 8 * TRACE_HEAD, 8).view(np.int32)[0])
        kept = min(claimed, self.capacity)
        start = BOUNDS_WORDS + 2 * self.n_args
        raw = be.read(self.native, 8 * start, 8 * TRACE_RECORD_WORDS * kept)
        self.trace.add(kernel, raw.view(np.int64).reshape(kept, TRACE_RECORD_WORDS).copy(), claimed)
        be.write(self.native, 8 * TRACE_HEAD, np.zeros(1, np.int64))
