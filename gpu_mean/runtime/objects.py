"""The DirectML object model: buffers, operators, compiled operators, initializers, binding tables,
command recorders and command lists. Backend-neutral: a backend supplies memory verbs and, per
compiled operator, a launch program (``Program``).

Binding misuse raises InvalidArgumentError at once, naming the rule (DirectML's void Bind* methods
would remove the device instead; a Python library can say what is wrong where it is wrong).
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

import numpy as np

from ..descriptors.operators import IN_PLACE_ANY, IN_PLACE_NONE, OperatorDesc
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import (
    MINIMUM_BUFFER_TENSOR_ALIGNMENT,
    PERSISTENT_BUFFER_ALIGNMENT,
    TEMPORARY_BUFFER_ALIGNMENT,
    ExecutionFlags,
    TensorFlags,
)
from ..errors import InvalidArgumentError

_ids = itertools.count(1)


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


class Buffer:
    """A device memory allocation (a D3D12 DEFAULT-heap buffer in DirectML terms)."""

    def __init__(self, device, native, size: int):
        self.device = device
        self.native = native
        self.size = size
        self.id = next(_ids)

    def __repr__(self):
        return f"<Buffer #{self.id} {self.size} bytes on {self.device.name}>"

    def _range(self, offset: int, nbytes: int, what: str):
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise InvalidArgumentError(f"Buffer.{what}: range [{offset}, {offset + nbytes}) lies outside the "
                                       f"{self.size}-byte buffer")

    def write(self, array, offset: int = 0) -> None:
        """Copy a host array's bytes (C order) into the buffer at ``offset`` bytes."""
        self.device._check_alive()
        data = np.ascontiguousarray(array)
        raw = data.reshape(-1).view(np.uint8)
        self._range(int(offset), raw.size, "write")
        self.device._guard(self.device.backend.write, self.native, int(offset), raw)

    def read(self, dtype=np.uint8, count: int | None = None, offset: int = 0) -> np.ndarray:
        """Read ``count`` elements of ``dtype`` from ``offset`` bytes (all the rest when count is None)."""
        self.device._check_alive()
        dt = np.dtype(dtype)
        if count is None:
            count = (self.size - int(offset)) // dt.itemsize
        nbytes = int(count) * dt.itemsize
        self._range(int(offset), nbytes, "read")
        raw = self.device._guard(self.device.backend.read, self.native, int(offset), nbytes)
        return raw.view(dt).copy()

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
        from ..interop import export_tensor
        return export_tensor(self, desc, offset)

    @staticmethod
    def wrap_array(device, array) -> tuple[BufferBinding, TensorDesc]:
        """A caller's device array as ``(BufferBinding, TensorDesc)`` to bind, strides kept, no copy:
        numpy arrays on the CPU device, CuPy / DLPack / ``__cuda_array_interface__`` arrays on the
        same GPU for CUDA, pyopencl arrays made with ``device.cl_queue`` for OpenCL. The binding's
        Buffer holds the array's memory alive; the caller must not free or resize it while work
        that binds it is pending."""
        from ..interop import wrap_array
        return wrap_array(device, array)


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
    device = None
    binding_properties: BindingProperties

    def _input_count(self) -> int:
        raise NotImplementedError


class CompiledOperator(Dispatchable):
    """IDMLCompiledOperator: holds the backend's launch program for one validated operator."""

    def __init__(self, device, op: Operator, flags: ExecutionFlags, program):
        self.device = device
        self.operator = op
        self.desc = op.desc
        self.flags = flags
        self.program = program
        self.initialized = False
        self._lock = threading.Lock()
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
        self._default_table = None

    def __repr__(self):
        return f"<CompiledOperator {self.desc.name} on {self.device.name}>"

    def _input_count(self):
        return len(self.desc.input_tensors())

    def execute(self, inputs, outputs, temporary=None, persistent=None) -> None:
        """Initialize once if needed, bind, record, submit and wait: the one-call path.

        ``inputs``/``outputs`` are Buffers (bound at offset 0 with the tensor's total size) or
        BufferBindings. Owned (OWNED_BY_DML) inputs are consumed by the first initialization.
        """
        dev = self.device
        with self._lock:
            if self.initialized and any(self.owned):
                ins = [None if o else i for i, o in zip(inputs, self.owned)]
            else:
                ins = list(inputs)
            p_size = self.binding_properties.persistent_resource_size
            if not self.initialized:
                if p_size and persistent is None:
                    persistent = dev.create_buffer(p_size)
                self._persistent_auto = persistent
                init = dev.create_operator_initializer([self])
                table = dev.create_binding_table(init)
                if any(self.owned):
                    arr = [_as_binding(b, t) if o else None
                           for b, t, o in zip(inputs, self.desc.input_tensors(), self.owned)]
                    table.bind_inputs([BufferArrayBinding(arr)])
                    ins = [None if o else i for i, o in zip(inputs, self.owned)]
                table.bind_outputs([BufferBinding(persistent) if p_size else None])
                dev._run_now(init, table)
            elif persistent is None:
                persistent = getattr(self, "_persistent_auto", None)
            table = dev.create_binding_table(self)
            table.bind_inputs([None if i is None else _as_binding(i, t)
                               for i, t in zip(ins, self.desc.input_tensors())])
            table.bind_outputs([_as_binding(o, t) for o, t in zip(outputs, self.desc.output_tensors())])
            t_size = self.binding_properties.temporary_resource_size
            if t_size:
                if temporary is None:
                    temporary = dev._scratch(t_size)
                table.bind_temporary_resource(_as_binding(temporary, None))
            if p_size:
                table.bind_persistent_resource(_as_binding(persistent, None))
            dev._run_now(self, table)


def _as_binding(b, desc: TensorDesc | None) -> BufferBinding:
    if isinstance(b, BufferBinding):
        return b
    if isinstance(b, Buffer):
        size = desc.total_size_in_bytes if desc is not None else b.size
        return BufferBinding(b, 0, min(size, b.size) if desc is None else size)
    raise InvalidArgumentError(f"expected a Buffer or BufferBinding, got {type(b).__name__}")


class OperatorInitializer(Dispatchable):
    """IDMLOperatorInitializer: initializes each target compiled operator exactly once."""

    def __init__(self, device, ops):
        self.device = device
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

    def _input_count(self):
        return len(self.operators)


class BindingTable:
    """IDMLBindingTable: one binding per slot, validated as it is bound (directml.md 4.5)."""

    def __init__(self, device, dispatchable: Dispatchable):
        self.device = device
        self.reset(dispatchable)

    def reset(self, dispatchable: Dispatchable) -> None:
        if not isinstance(dispatchable, Dispatchable) or dispatchable.device is not self.device:
            raise InvalidArgumentError("BindingTable: the dispatchable must be a compiled operator or initializer "
                                       "of this device")
        self.dispatchable = dispatchable
        self.inputs = None
        self.outputs = None
        self.temporary = None
        self.persistent = None

    # -- helpers
    def _check_buffer(self, b: BufferBinding, what: str) -> None:
        if b.buffer.device is not self.device:
            raise InvalidArgumentError(f"{what}: the buffer belongs to device {b.buffer.device.name}, not "
                                       f"{self.device.name}; a buffer is used only on the device that made it")
        if b.offset < 0 or b.size < 0 or b.offset + b.size > b.buffer.size:
            raise InvalidArgumentError(f"{what}: range [{b.offset}, {b.offset + b.size}) lies outside the "
                                       f"{b.buffer.size}-byte buffer")

    def _check_tensor_binding(self, b: BufferBinding, t: TensorDesc, what: str) -> None:
        self._check_buffer(b, what)
        a = t.guaranteed_base_offset_alignment
        if b.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT and not (a and b.offset % a == 0):
            rule = f"a multiple of 16 or of GuaranteedBaseOffsetAlignment ({a})" if a else "a multiple of 16"
            raise InvalidArgumentError(f"{what}: Offset {b.offset} must be {rule}")
        if b.size < t.total_size_in_bytes:
            raise InvalidArgumentError(f"{what}: SizeInBytes is too small. {b.size} was provided, but "
                                       f"{t.total_size_in_bytes} was expected (TotalTensorSizeInBytes)")

    def _check_resource(self, b, required: int, align: int, what: str):
        if b is None:
            if required:
                raise InvalidArgumentError(f"{what}: the operator needs {required} bytes; a binding is required")
            return None
        b = _as_binding(b, None)
        self._check_buffer(b, what)
        if b.offset % align:
            raise InvalidArgumentError(f"{what}: Offset {b.offset} must be a multiple of {align}")
        if b.size < required:
            raise InvalidArgumentError(f"{what}: SizeInBytes {b.size} is below the required {required}")
        return b

    # -- Bind*
    def bind_inputs(self, bindings) -> None:
        d = self.dispatchable
        bindings = list(bindings)
        if len(bindings) == 0:
            self.inputs = None
            return
        n = d._input_count()
        if len(bindings) != n:
            raise InvalidArgumentError(f"BindInputs: {len(bindings)} bindings for {n} input slots; bind exactly one "
                                       "per slot (None for an absent one)")
        if isinstance(d, OperatorInitializer):
            out = []
            for op, arr in zip(d.operators, bindings):
                ts = op.desc.input_tensors()
                if arr is None:
                    arr = BufferArrayBinding([None] * len(ts))
                if not isinstance(arr, BufferArrayBinding):
                    arr = BufferArrayBinding(arr)
                if arr.bindings and len(arr.bindings) != len(ts):
                    raise InvalidArgumentError(f"BindInputs (initializer): {len(arr.bindings)} bindings for the "
                                               f"{len(ts)} inputs of {op.desc.name}")
                items = arr.bindings or (None,) * len(ts)
                for i, (b, t, owned) in enumerate(zip(items, ts, op.owned)):
                    what = f"BindInputs (initializer) {op.desc.name} {op.desc.input_names()[i]}"
                    if owned and b is None:
                        raise InvalidArgumentError(f"{what}: an OWNED_BY_DML tensor must be bound at initialization")
                    if not owned and b is not None:
                        raise InvalidArgumentError(f"{what}: only OWNED_BY_DML tensors are bound at initialization")
                    if b is not None:
                        self._check_tensor_binding(_as_binding(b, t), t, what)
                out.append(tuple(None if b is None else _as_binding(b, t) for b, t in zip(items, ts)))
            self.inputs = out
            return
        names, ts = d.desc.input_names(), d.desc.input_tensors()
        out = []
        for b, t, name, owned in zip(bindings, ts, names, d.owned):
            what = f"BindInputs {d.desc.name} {name}"
            if owned:
                if b is not None:
                    raise InvalidArgumentError(f"{what}: an OWNED_BY_DML tensor must not be bound at execution")
                out.append(None)
                continue
            if b is None:
                raise InvalidArgumentError(f"{what}: the tensor is required; None binds nothing")
            b = _as_binding(b, t)
            self._check_tensor_binding(b, t, what)
            out.append(b)
        self.inputs = out
        self._check_aliasing()

    def bind_outputs(self, bindings) -> None:
        d = self.dispatchable
        bindings = list(bindings)
        if len(bindings) == 0:
            self.outputs = None
            return
        if isinstance(d, OperatorInitializer):
            if len(bindings) != len(d.operators):
                raise InvalidArgumentError(f"BindOutputs (initializer): {len(bindings)} bindings for "
                                           f"{len(d.operators)} persistent resources")
            self.outputs = [self._check_resource(b, op.binding_properties.persistent_resource_size,
                                                 PERSISTENT_BUFFER_ALIGNMENT,
                                                 f"BindOutputs (initializer) persistent resource of {op.desc.name}")
                            for b, op in zip(bindings, d.operators)]
            return
        names, ts = d.desc.output_names(), d.desc.output_tensors()
        if len(bindings) != len(ts):
            raise InvalidArgumentError(f"BindOutputs: {len(bindings)} bindings for {len(ts)} output slots")
        out = []
        for b, t, name in zip(bindings, ts, names):
            what = f"BindOutputs {d.desc.name} {name}"
            if b is None:
                raise InvalidArgumentError(f"{what}: the output is required; None binds nothing")
            b = _as_binding(b, t)
            self._check_tensor_binding(b, t, what)
            out.append(b)
        for (i, x), (j, y) in itertools.combinations(enumerate(out), 2):
            if _writeable(x, ts[i]).overlaps(_writeable(y, ts[j])):
                raise InvalidArgumentError(f"BindOutputs: the writeable ranges of outputs {i} and {j} overlap")
        self.outputs = out
        self._check_aliasing()

    def bind_temporary_resource(self, binding) -> None:
        req = self.dispatchable.binding_properties.temporary_resource_size
        self.temporary = self._check_resource(binding, req, TEMPORARY_BUFFER_ALIGNMENT, "BindTemporaryResource")

    def bind_persistent_resource(self, binding) -> None:
        d = self.dispatchable
        if isinstance(d, OperatorInitializer):
            raise InvalidArgumentError("BindPersistentResource: an initializer has no persistent resource; bind the "
                                       "targets' persistent resources as its outputs")
        req = d.binding_properties.persistent_resource_size
        self.persistent = self._check_resource(binding, req, PERSISTENT_BUFFER_ALIGNMENT, "BindPersistentResource")

    def _check_aliasing(self) -> None:
        """Rule 8 of directml.md 4.5 and section 5: inputs may alias an output only in place."""
        d = self.dispatchable
        if self.inputs is None or self.outputs is None or isinstance(d, OperatorInitializer):
            return
        desc = d.desc
        ins, outs = desc.input_tensors(), desc.output_tensors()
        for j, ob in enumerate(self.outputs):
            wo = _writeable(ob, outs[j])
            aliased = []
            for i, ib in enumerate(self.inputs):
                if ib is None or not ib.overlaps(wo):
                    continue
                name = desc.input_names()[i]
                if desc.in_place == IN_PLACE_NONE:
                    raise InvalidArgumentError(f"{desc.name}: {name} overlaps the output's range; this operator "
                                               "does not execute in place")
                t, o = ins[i], outs[j]
                same_desc = (t.sizes == o.sizes and t.effective_strides == o.effective_strides
                             and t.total_size_in_bytes == o.total_size_in_bytes)
                if not same_desc:
                    raise InvalidArgumentError(f"{desc.name}: {name} aliases the output but their Sizes, Strides or "
                                               "TotalTensorSizeInBytes differ; in place needs identical tensors")
                if (ib.offset, ib.size) != (ob.offset, ob.size):
                    raise InvalidArgumentError(f"{desc.name}: {name} overlaps the output at offset {ib.offset} size "
                                               f"{ib.size} vs {ob.offset} size {ob.size}; in place needs the same "
                                               "binding range")
                aliased.append(i)
            if len(aliased) > 1 and desc.in_place != IN_PLACE_ANY:
                raise InvalidArgumentError(f"{desc.name}: {len(aliased)} inputs alias the output; the operator lets "
                                           "the output alias one of its inputs only")

    def snapshot(self):
        ins = None if self.inputs is None else list(self.inputs)
        outs = None if self.outputs is None else list(self.outputs)
        return ins, outs, self.temporary, self.persistent


def _writeable(b: BufferBinding, t: TensorDesc) -> BufferBinding:
    return BufferBinding(b.buffer, b.offset, t.total_size_in_bytes)


class CommandList:
    """A recorded sequence of dispatches; it may be executed many times."""

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
        self._changed()

    def _changed(self) -> None:
        self.executions = 0
        self.graph = None
        self.launches = None


class CommandRecorder:
    """IDMLCommandRecorder."""

    def __init__(self, device):
        self.device = device

    def record_dispatch(self, command_list: CommandList, dispatchable: Dispatchable, table: BindingTable) -> None:
        dev = self.device
        dev._check_alive()
        if not isinstance(command_list, CommandList) or command_list.device is not dev:
            raise InvalidArgumentError("RecordDispatch: the command list must come from this device")
        if command_list.closed:
            raise InvalidArgumentError("RecordDispatch: the command list is closed; reset it before recording")
        if not isinstance(table, BindingTable) or table.dispatchable is not dispatchable:
            raise InvalidArgumentError("RecordDispatch: the binding table was created for another dispatchable")
        volatile = isinstance(dispatchable, CompiledOperator) and bool(
            dispatchable.flags & ExecutionFlags.DESCRIPTORS_VOLATILE)
        if not volatile:
            dev._check_complete(dispatchable, table.snapshot())
        command_list.dispatches.append((dispatchable, table if volatile else table.snapshot()))
        command_list._changed()
