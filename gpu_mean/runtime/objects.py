"""The DirectML object model's values: buffers, bindings, operators, compiled operators,
initializers and command lists. They hold state; they do not run anything. Running lives in
gpu_mean/runtime/execution.py (the device's ``executor``), binding validation and the binding table
in gpu_mean/runtime/bindings.py.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

import numpy as np

from ..descriptors.operators import OperatorDesc
from ..descriptors.tensor import MAX_ELEMENTS, TensorDesc
from ..descriptors.types import PERSISTENT_BUFFER_ALIGNMENT, ExecutionFlags, TensorFlags
from ..errors import InvalidArgumentError, UnsupportedError
from . import interop

_ids = itertools.count(1)


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


class Buffer:
    """A device memory allocation (a D3D12 DEFAULT-heap buffer in DirectML terms).

    ``size`` is what bindings may claim; ``native_size`` the bytes the native memory really has.
    They differ only for a caller's array wrapped as a Buffer, whose binding claims the tensor size
    rounded up to 4 bytes (kernels never touch bytes past the last element); copies stay inside
    ``native_size``."""

    def __init__(self, device, native, size: int, native_size: int | None = None):
        self.device = device
        self.native = native
        self.size = size
        self.native_size = size if native_size is None else native_size
        self.id = next(_ids)

    def __repr__(self):
        return f"<Buffer #{self.id} {self.size} bytes on {self.device.name}>"

    def check_range(self, offset: int, nbytes: int, what: str) -> None:
        """That [offset, offset + nbytes) lies in the native memory (for copies and views)."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.native_size:
            raise InvalidArgumentError(f"Buffer.{what}: range [{offset}, {offset + nbytes}) lies outside the "
                                       f"{self.native_size}-byte buffer")

    def write(self, array, offset: int = 0) -> None:
        """Copy a host array's bytes (C order) into the buffer at ``offset`` bytes."""
        self.device.executor.check_alive()
        data = np.ascontiguousarray(array)
        raw = data.reshape(-1).view(np.uint8)
        self.check_range(int(offset), raw.size, "write")
        self.device.executor.write(self.native, int(offset), raw)

    def read(self, dtype=np.uint8, count: int | None = None, offset: int = 0) -> np.ndarray:
        """Read ``count`` elements of ``dtype`` from ``offset`` bytes (all the rest when count is None)."""
        self.device.executor.check_alive()
        dt = np.dtype(dtype)
        if count is None:
            count = (self.native_size - int(offset)) // dt.itemsize
        nbytes = int(count) * dt.itemsize
        self.check_range(int(offset), nbytes, "read")
        raw = self.device.executor.read(self.native, int(offset), nbytes)
        return raw.view(dt)     # the backend's read is a new array: no second copy

    def read_tensor(self, desc: TensorDesc, offset: int = 0) -> np.ndarray:
        """The logical tensor ``desc`` describes at ``offset``, strides honoured, as a packed array."""
        nbytes = int((desc.last_index + 1) * desc.data_type.element_size)   # through the last element
        raw = self.read(np.uint8, nbytes, offset)
        dt = desc.numpy_dtype
        view = np.ndarray(desc.sizes, dt, buffer=raw, strides=tuple(s * dt.itemsize for s in desc.effective_strides))
        return np.array(view)

    def write_tensor(self, desc: TensorDesc, array, offset: int = 0) -> None:
        """The mirror of ``read_tensor``: write ``array`` as the tensor ``desc`` describes at ``offset``.

        The array's data type must be the descriptor's and its shape the descriptor's sizes (a
        mismatch is an InvalidArgumentError naming both; nothing is converted). Strides are
        honoured: the bytes between a strided tensor's elements keep their contents.
        """
        what = "Buffer.write_tensor"
        if not isinstance(desc, TensorDesc):
            raise InvalidArgumentError(f"{what}: desc must be a TensorDesc, got {type(desc).__name__}")
        a = np.asarray(array)
        dt = desc.numpy_dtype
        if a.dtype != dt:
            raise InvalidArgumentError(f"{what}: the array's data type is {a.dtype} but the TensorDesc's is "
                                       f"{desc.data_type.name} ({dt}); convert with array.astype(np.{dt.name})")
        if a.shape != tuple(desc.sizes) and not (a.ndim == 0 and tuple(desc.sizes) == (1,)):
            raise InvalidArgumentError(f"{what}: the array's shape {a.shape} is not the TensorDesc's sizes "
                                       f"{tuple(desc.sizes)}")
        if desc.is_packed:
            self.write(a, offset)
            return
        if desc.has_overlap():
            raise InvalidArgumentError(f"{what}: strides {desc.strides} map two elements of sizes {desc.sizes} to "
                                       "one place; such a tensor can be read but not written")
        nbytes = int((desc.last_index + 1) * dt.itemsize)
        raw = self.read(np.uint8, nbytes, offset)     # keep what lies between the strided elements
        view = np.ndarray(desc.sizes, dt, buffer=raw, strides=tuple(s * dt.itemsize for s in desc.effective_strides))
        view[...] = a.reshape(desc.sizes)
        self.write(raw, offset)

    def as_tensor(self, desc: TensorDesc, offset: int = 0):
        """This buffer's memory as the tensor ``desc`` describes, in place (no copy): on CUDA an object
        with ``__dlpack__`` and ``__cuda_array_interface__`` (``torch.from_dlpack(v)``,
        ``cupy.asarray(v)``); on OpenCL a ``pyopencl.array.Array`` on ``device.cl_queue``; on the CPU
        device a numpy array. The view keeps this Buffer alive; writes through it are writes to the
        buffer. On CUDA the view names the device's stream, so consumers order their reads after
        work queued on it."""
        if not isinstance(desc, TensorDesc):
            raise InvalidArgumentError(f"as_tensor: desc must be a TensorDesc, got {interop.type_name(desc)}")
        dt = desc.numpy_dtype
        nbytes = interop.span_elements(desc.sizes, desc.effective_strides) * dt.itemsize
        self.check_range(int(offset), nbytes, "as_tensor")
        self.device.executor.check_alive()
        byte_strides = tuple(s * dt.itemsize for s in desc.effective_strides)
        return self.device.backend.arrays.export(self, desc, int(offset), byte_strides)

    @staticmethod
    def wrap_array(device, array) -> tuple[BufferBinding, TensorDesc]:
        """A caller's device array as ``(BufferBinding, TensorDesc)`` to bind, strides kept, no copy:
        numpy arrays on the CPU device, CuPy / DLPack / ``__cuda_array_interface__`` arrays on the
        same GPU for CUDA, pyopencl arrays made with ``device.cl_queue`` for OpenCL. The binding's
        Buffer holds the array's memory alive; the caller must not free or resize it while work
        that binds it is pending."""
        return wrap_array(device, array)


def native_binding(device, bridge, arr, nbytes: int, size: int | None = None) -> BufferBinding:
    """A binding of a native array's memory (``bridge.view``'s result), ``size`` bytes from its first
    element (default: the span rounded up to 4). The Buffer claims at least the 4-byte-rounded size a
    TensorDesc asks for; kernels never touch bytes past the last element, so the claim is never read
    or written, and copies stay inside the real memory."""
    native, off, real = bridge.memory(arr, nbytes)
    claim = (nbytes + 3) & ~3
    return BufferBinding(Buffer(device, native, max(off + claim, real), real), off, claim if size is None else size)


def wrap_array(device, x, what: str = "Buffer.wrap_array"):
    """A caller's array on ``device`` as ``(BufferBinding, TensorDesc)``, its strides kept, no copy."""
    bridge = device.backend.arrays
    arr = bridge.view(x, what)
    dt = interop.data_type(bridge.dtype_of(x, arr), what)     # a bfloat16 tensor viewed as its int16 bits
    shape = tuple(int(n) for n in arr.shape)
    strides = interop.element_strides(shape, arr.strides, arr.dtype.itemsize)
    if strides is None:
        raise UnsupportedError(f"{what}: strides {arr.strides} (bytes) of a {arr.dtype} array are negative or not "
                               "whole elements; a TensorDesc cannot describe them; pass a copy")
    span = interop.span_elements(shape, strides)
    if span > MAX_ELEMENTS:
        raise UnsupportedError(f"{what}: the array addresses {span} elements; a DirectML tensor addresses at most "
                               f"{MAX_ELEMENTS} (2^32 - 1); bind it in pieces (gm.mean and gm.reduce_mean split such "
                               "arrays themselves)")
    nbytes = span * arr.dtype.itemsize
    desc = interop.desc_for(dt, shape, strides, bridge.alignment(arr))
    return native_binding(device, bridge, arr, max(nbytes, 1), max(desc.total_size_in_bytes, nbytes)), desc


@dataclass(frozen=True)
class BufferBinding:
    """DML_BUFFER_BINDING: a range of a buffer. size=None means the rest of the buffer."""

    buffer: Buffer
    offset: int = 0
    size: int | None = None

    def __post_init__(self):
        if not isinstance(self.buffer, Buffer):
            raise InvalidArgumentError(f"BufferBinding: buffer must be a Buffer, got {type(self.buffer).__name__}")
        object.__setattr__(self, "offset", int(self.offset))
        size = self.buffer.size - self.offset if self.size is None else int(self.size)
        object.__setattr__(self, "size", size)

    def overlaps(self, other: BufferBinding) -> bool:
        return (self.buffer is other.buffer and self.offset < other.offset + other.size
                and other.offset < self.offset + self.size)


@dataclass(frozen=True)
class BufferArrayBinding:
    """DML_BUFFER_ARRAY_BINDING: used when binding an initializer's inputs (OWNED_BY_DML tensors)."""

    bindings: tuple

    def __post_init__(self):
        object.__setattr__(self, "bindings", tuple(self.bindings))


@dataclass(frozen=True)
class BindingProperties:
    required_descriptor_count: int
    temporary_resource_size: int
    persistent_resource_size: int


class Operator:
    """IDMLOperator: a validated descriptor; it cannot run until compiled."""

    def __init__(self, device, desc: OperatorDesc):
        self.device = device
        self.desc = desc

    def __repr__(self):
        return f"<Operator {self.desc.name} on {self.device.name}>"


class Dispatchable:
    """What a command list can dispatch: a compiled operator or an operator initializer."""

    device = None
    binding_properties: BindingProperties


class CompiledOperator(Dispatchable):
    """IDMLCompiledOperator: the plan of one validated operator and the backend's program for it.
    Thread-safe: several threads may execute one compiled operator at once."""

    def __init__(self, device, op: Operator, flags: ExecutionFlags, plan, program):
        self.device = device
        self.operator = op
        self.desc = op.desc
        self.flags = flags
        self.plan = plan
        self.program = program
        self.initialized = False
        self.persistent_auto: Buffer | None = None   # the persistent resource execute() allocated
        self.lock = threading.Lock()                 # initialization happens once, whoever asks first
        ins = self.desc.input_tensors()
        self.owned = tuple(bool(t.flags & TensorFlags.OWNED_BY_DML) for t in ins)
        offs, pos = [], 0
        for t, owned in zip(ins, self.owned):
            offs.append(pos if owned else None)
            if owned:
                pos = _round_up(pos + t.total_size_in_bytes, PERSISTENT_BUFFER_ALIGNMENT)
        self.persistent_offsets = tuple(offs)
        n_io = len(ins) + len(self.desc.output_tensors())
        temp = int(program.temporary_size)
        self.binding_properties = BindingProperties(n_io + (temp > 0) + (pos > 0), temp, pos)

    def __repr__(self):
        return f"<CompiledOperator {self.desc.name} on {self.device.name}>"

    def execute(self, inputs, outputs, temporary=None, persistent=None) -> None:
        """Initialize once if needed, validate the bindings as a binding table would, run, and wait.

        ``inputs``/``outputs`` are Buffers (bound at offset 0 with the tensor's total size) or
        BufferBindings, exactly one per slot. Owned (OWNED_BY_DML) inputs are consumed by the first
        initialization and ignored afterwards. Without ``temporary``, a scratch buffer of the
        calling thread is used, so threads never share one.
        """
        self.device.executor.execute_operator(self, list(inputs), list(outputs), temporary, persistent)

    # -- diagnostics (gpu-mean profile's; no part of DirectML's interface, never on an execute's path)
    @property
    def launches(self) -> int | None:
        """Kernels one execute launches (None on the CPU device, which runs no kernel)."""
        return getattr(self.program, "launches", None)

    def open_outputs(self, temporary) -> int | None:
        """How many outputs the last execute's main pass left to the exact pass, read from the flags
        the kernels wrote in ``temporary`` (the Buffer or BufferBinding that execute was given; the
        device is synchronized first). None where the operator writes no flags (the element-wise
        operators, the CPU device, reductions decided without a bound test)."""
        region = getattr(self.program, "flag_region", None)
        if region is None or temporary is None:
            return None
        buf, base = (temporary.buffer, temporary.offset) if isinstance(temporary, BufferBinding) else (temporary, 0)
        off, nbytes = region[0], region[1]
        self.device.synchronize()
        return self.program.open_outputs(buf.read(np.uint8, nbytes, base + off))


class OperatorInitializer(Dispatchable):
    """IDMLOperatorInitializer: initializes each target compiled operator exactly once."""

    def __init__(self, device, ops):
        self.device = device
        self.operators = ()
        self.reset(ops)

    def reset(self, ops) -> None:
        ops = tuple(ops)
        for op in ops:
            if not isinstance(op, CompiledOperator) or op.device is not self.device:
                raise InvalidArgumentError("OperatorInitializer: every target must be a CompiledOperator of this "
                                           "device")
        if len(set(map(id, ops))) != len(ops):
            raise InvalidArgumentError("OperatorInitializer: a compiled operator is listed twice; each is initialized "
                                       "exactly once")
        self.operators = ops
        self.binding_properties = BindingProperties(len(ops), 0, 0)


class CommandList:
    """A recorded sequence of dispatches; it may be executed many times. The executor resolves its
    launches once its bindings are known to be fixed, and on backends with graphs captures them."""

    def __init__(self, device):
        self.device = device
        self.dispatches: list = []
        self.closed = False
        self.executions = 0     # successful executions since the last change
        self.graph = None       # the backend's captured replay (CUDA graph), built on the second execution
        self.launches = None    # (program.run, arguments) per dispatch, resolved on the second execution

    def close(self) -> None:
        self.closed = True

    def reset(self) -> None:
        self.dispatches.clear()
        self.closed = False
        self.changed()

    def changed(self) -> None:
        self.executions = 0
        self.graph = None
        self.launches = None
