"""The exception family: every error carries the DirectML HRESULT it stands for."""
from __future__ import annotations

E_INVALIDARG = 0x80070057
E_OUTOFMEMORY = 0x8007000E
DXGI_ERROR_UNSUPPORTED = 0x887A0004
DXGI_ERROR_DEVICE_REMOVED = 0x887A0005


class DmlError(Exception):
    """Base of every gpu_mean error; ``hresult`` is the DirectML code it maps to."""

    hresult = 0x80004005  # E_FAIL

    def __init__(self, message: str, hresult: int | None = None):
        super().__init__(message)
        if hresult is not None:
            self.hresult = hresult

    def __str__(self) -> str:
        return f"{super().__str__()} (HRESULT 0x{self.hresult:08X})"


class InvalidArgumentError(DmlError, ValueError):
    hresult = E_INVALIDARG


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """A descriptor field given a Python type it does not take (a float or a string where a UINT goes).

    It is an InvalidArgumentError, so E_INVALIDARG like every other invalid argument, and a TypeError,
    so code written for Python's conventions catches it too.
    """


class UnsupportedError(DmlError):
    hresult = DXGI_ERROR_UNSUPPORTED


class UnsupportedTypeError(UnsupportedError, TypeError):
    """An operand of a type or data type the mean operators do not take (DXGI_ERROR_UNSUPPORTED;
    also a TypeError, as Python code expects of a wrong argument type)."""


class DeviceRemovedError(DmlError):
    hresult = DXGI_ERROR_DEVICE_REMOVED


class OutOfMemoryError(DmlError, MemoryError):
    hresult = E_OUTOFMEMORY


class KernelBuildError(DmlError):
    """A kernel failed to compile; the message holds the whole build log."""


class KernelBoundsError(DmlError):
    """A kernel of a checked device (``opencl:0-checked``) accessed an element outside the bounds of
    one of its arguments: a bug in a kernel or in its launch, caught before it touched memory. The
    device keeps working. ``kernel``, ``argument``, ``index``, ``width`` (elements from ``index``) and
    ``bounds`` ([lo, hi) in elements) say which access."""

    def __init__(self, message: str, *, kernel: str, argument: str, index: int, width: int, bounds: tuple):
        super().__init__(message)
        self.kernel, self.argument, self.index, self.width, self.bounds = kernel, argument, index, width, bounds
