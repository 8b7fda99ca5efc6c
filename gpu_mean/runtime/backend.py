"""What a backend supplies: memory verbs, and a Program per compiled operator."""
from __future__ import annotations

import functools

import numpy as np

from ..descriptors.types import DataType, KernelOp


class Program:
    """A compiled operator's launch plan on one backend."""

    temporary_size = 0

    def run(self, inputs, outputs, temporary) -> None:
        """Enqueue the work. ``inputs``/``outputs`` are (native buffer, byte offset) pairs."""
        raise NotImplementedError

    def run_bound(self, inputs, outputs, temporary) -> None:
        """``run`` over bindings that change from call to call (a caller's arrays bound in place),
        keeping no reference to them after it: the functional calls' repeated launch."""
        self.run(inputs, outputs, temporary)
        self.forget_bindings()

    def forget_bindings(self) -> None:
        """Drop any reference kept to the buffers of the last run (a program that skips setting
        unchanged arguments keeps them), so that memory bound for one call (a caller's array bound
        in place) is not held after it."""


class Backend:
    """A device's verbs over a plan. Subclasses set ``info`` (a DeviceInfo) and ``native_errors``:
    the exception types of the native layer (driver, runtime, allocator) that mean a device fault.
    Only those are caught by the executor; ``is_out_of_memory`` says which of them are out-of-memory
    (by the native status's name). Anything else a backend raises is a bug and propagates as itself."""

    info = None
    native_errors: tuple = ()
    unavailable: str | None = None    # why this device cannot be used, once known
    # the largest single allocation the device takes, and the name it goes by in messages; None: no
    # limit below the device's memory (split calls: docs/design.md, "arrays larger than one allocation")
    max_alloc: int | None = None
    max_alloc_name: str = ""

    def open(self) -> str | None:
        """Make what the device needs before its first use (a CUDA context and stream): None when it
        is usable, else why not. Listing devices does not call it; choosing one does."""
        return self.unavailable

    def alloc(self, nbytes: int):
        raise NotImplementedError

    def write(self, native, offset: int, data: np.ndarray) -> None:
        """Copy ``data`` (contiguous bytes) to ``native`` at ``offset``. Returns once ``data`` may be
        changed or freed; the copy itself may still be in flight, ordered before every later command."""
        raise NotImplementedError

    def write_held(self, native, offset: int, data: np.ndarray) -> None:
        """``write``, where the caller keeps ``data`` unchanged until its next ``read`` or ``finish``
        (which wait for every earlier command): the copy need not be waited for (the functional
        calls' uploads, read back in the same call)."""
        self.write(native, offset, data)

    def read(self, native, offset: int, nbytes: int) -> np.ndarray:
        """``nbytes`` from ``native`` at ``offset`` after every earlier command, as a new uint8 array
        the caller owns."""
        raise NotImplementedError

    def copy(self, src, src_offset: int, dst, dst_offset: int, nbytes: int) -> None:
        raise NotImplementedError

    def compile(self, plan, flags) -> Program:
        """A Program for a plan (gpu_mean/runtime/planning.py); never sees the descriptor."""
        raise NotImplementedError

    def finish(self) -> None:
        pass

    def host_sync(self, native, nbytes: int) -> None:
        """Wait until the device's writes to host memory bound in place (``arrays.host_in_place``)
        are visible there, and every earlier command is done (nothing to do where execution is
        synchronous)."""

    def is_out_of_memory(self, exc: Exception) -> bool:
        return False

    def free_memory(self) -> int | None:
        """Bytes of device memory free for new allocations now, where the device can tell (CUDA);
        None elsewhere."""
        return None

    def release_cached(self) -> None:
        """Give back memory the native layer keeps for reuse after the library freed it (CuPy's
        memory pool); nothing where freeing already gives it back."""

    # -- data types
    def storage_refusal(self, dt: DataType) -> str | None:
        """Why the device cannot hold or compute ``dt`` at all (None when it can): FLOAT64 needs fp64."""
        if dt == DataType.FLOAT64 and not self.info.fp64:
            return "the device has no fp64"
        return None

    def kernel_refusal(self, op: KernelOp, dt: DataType) -> str | None:
        """Why this backend has no kernel for ``op`` over ``dt`` (None when it has one). The native
        backends read the one table of what each computes, ``gpu_mean/kernels/support.py``."""
        raise NotImplementedError

    # A backend that can record a command list's launches once and replay them (CUDA graphs) sets
    # supports_graphs and implements capture(record) -> handle, where record() enqueues the launches,
    # and replay(handle).
    supports_graphs = False

    def capture(self, record):
        raise NotImplementedError

    def replay(self, handle) -> None:
        raise NotImplementedError

    # -- arrays
    @functools.cached_property
    def arrays(self):
        """This backend's ArrayBridge (gpu_mean/bridges/arrays.py): the arrays its device takes in
        place and how results go back; made on first use (``make_arrays``)."""
        return self.make_arrays()

    def make_arrays(self):
        """This device's ArrayBridge (gpu_mean/bridges/): the host bridge for the CPU device, CuPy's
        or pyopencl's for a GPU. The runtime never imports a bridge; each backend names its own."""
        raise NotImplementedError
