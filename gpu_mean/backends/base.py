"""What a backend supplies: memory verbs, and a Program per compiled operator."""
from __future__ import annotations

import numpy as np


class Program:
    """A compiled operator's launch plan on one backend."""

    temporary_size = 0

    def run(self, inputs, outputs, temporary) -> None:
        """Enqueue the work. ``inputs``/``outputs`` are (native buffer, byte offset) pairs."""
        raise NotImplementedError


class Backend:
    """A device's verbs. Subclasses set ``info`` (a DeviceInfo)."""

    info = None

    def alloc(self, nbytes: int):
        raise NotImplementedError

    def write(self, native, offset: int, data: np.ndarray) -> None:
        raise NotImplementedError

    def read(self, native, offset: int, nbytes: int) -> np.ndarray:
        raise NotImplementedError

    def copy(self, src, src_offset: int, dst, dst_offset: int, nbytes: int) -> None:
        raise NotImplementedError

    def compile(self, desc, flags) -> Program:
        raise NotImplementedError

    def finish(self) -> None:
        pass

    def is_out_of_memory(self, exc: Exception) -> bool:
        return False

    # A backend that can record a command list's launches once and replay them (CUDA graphs) sets
    # supports_graphs and implements capture(record) -> handle, where record() enqueues the launches,
    # and replay(handle).
    supports_graphs = False

    def capture(self, record):
        raise NotImplementedError

    def replay(self, handle) -> None:
        raise NotImplementedError
