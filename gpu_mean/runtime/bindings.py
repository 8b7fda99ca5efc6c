"""Binding validation (docs/design.md, "binding rules") and IDMLBindingTable: the checks are pure
functions shared by the binding table and the one-call ``CompiledOperator.execute``, so both paths
accept and reject exactly the same things.

Every check raises InvalidArgumentError at once, naming the rule (DirectML's void Bind* methods would
remove the device instead; a Python library can say what is wrong where it is wrong).
"""
from __future__ import annotations

import itertools

from ..descriptors.operators import IN_PLACE_ANY, IN_PLACE_NONE
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import (
    MINIMUM_BUFFER_TENSOR_ALIGNMENT,
    PERSISTENT_BUFFER_ALIGNMENT,
    TEMPORARY_BUFFER_ALIGNMENT,
)
from ..errors import InvalidArgumentError
from .objects import Buffer, BufferArrayBinding, BufferBinding, CompiledOperator, Dispatchable, OperatorInitializer


def as_binding(b, desc: TensorDesc | None) -> BufferBinding:
    """A Buffer binds at offset 0 with the tensor's total size (the whole buffer for a resource)."""
    if isinstance(b, BufferBinding):
        return b
    if isinstance(b, Buffer):
        size = desc.total_size_in_bytes if desc is not None else b.size
        return BufferBinding(b, 0, size)
    raise InvalidArgumentError(f"expected a Buffer or BufferBinding, got {type(b).__name__}")


def check_buffer(device, b: BufferBinding, what: str) -> None:
    if b.buffer.device is not device:
        other = b.buffer.device
        raise InvalidArgumentError(f"{what}: the buffer was created by {other.describe()}, not by {device.describe()};"
                                   " a buffer is used only on the Device object that made it")
    if b.offset < 0 or b.size < 0 or b.offset + b.size > b.buffer.size:
        raise InvalidArgumentError(f"{what}: range [{b.offset}, {b.offset + b.size}) lies outside the "
                                   f"{b.buffer.size}-byte buffer")


def check_tensor_binding(device, b: BufferBinding, t: TensorDesc, what: str) -> None:
    check_buffer(device, b, what)
    # a nonzero GuaranteedBaseOffsetAlignment is a promise about every binding of the tensor (the
    # offset is a multiple of it, smaller or larger than 16); without one, 16-byte alignment
    a = t.guaranteed_base_offset_alignment
    align = a or MINIMUM_BUFFER_TENSOR_ALIGNMENT
    if b.offset % align:
        rule = f"a multiple of GuaranteedBaseOffsetAlignment ({a})" if a else "a multiple of 16"
        raise InvalidArgumentError(f"{what}: Offset {b.offset} must be {rule}")
    if b.size < t.total_size_in_bytes:
        raise InvalidArgumentError(f"{what}: SizeInBytes is too small. {b.size} was provided, but "
                                   f"{t.total_size_in_bytes} was expected (TotalTensorSizeInBytes)")


def check_resource(device, b, required: int, align: int, what: str) -> BufferBinding | None:
    """A temporary or persistent resource binding (None where the operator needs none)."""
    if b is None:
        if required:
            raise InvalidArgumentError(f"{what}: the operator needs {required} bytes; a binding is required")
        return None
    b = as_binding(b, None)
    check_buffer(device, b, what)
    if b.offset % align:
        raise InvalidArgumentError(f"{what}: Offset {b.offset} must be a multiple of {align}")
    if b.size < required:
        raise InvalidArgumentError(f"{what}: SizeInBytes {b.size} is below the required {required}")
    return b


def operator_inputs(device, cop, bindings) -> list:
    """The execution-time input bindings of a compiled operator, one per slot, validated; an
    OWNED_BY_DML slot takes None (its data lives in the persistent resource)."""
    d = cop.desc
    names, ts = d.input_names(), d.input_tensors()
    if len(bindings) != len(ts):
        raise InvalidArgumentError(f"BindInputs {d.name}: {len(bindings)} bindings for {len(ts)} input slots; bind "
                                   "exactly one per slot (None for an OWNED_BY_DML one)")
    out = []
    for b, t, name, owned in zip(bindings, ts, names, cop.owned):
        what = f"BindInputs {d.name} {name}"
        if owned:
            if b is not None:
                raise InvalidArgumentError(f"{what}: an OWNED_BY_DML tensor must not be bound at execution")
            out.append(None)
            continue
        if b is None:
            raise InvalidArgumentError(f"{what}: the tensor is required; None binds nothing")
        b = as_binding(b, t)
        check_tensor_binding(device, b, t, what)
        out.append(b)
    return out


def operator_outputs(device, cop, bindings) -> list:
    d = cop.desc
    names, ts = d.output_names(), d.output_tensors()
    if len(bindings) != len(ts):
        raise InvalidArgumentError(f"BindOutputs {d.name}: {len(bindings)} bindings for {len(ts)} output slots")
    out = []
    for b, t, name in zip(bindings, ts, names):
        what = f"BindOutputs {d.name} {name}"
        if b is None:
            raise InvalidArgumentError(f"{what}: the output is required; None binds nothing")
        b = as_binding(b, t)
        check_tensor_binding(device, b, t, what)
        out.append(b)
    for (i, x), (j, y) in itertools.combinations(enumerate(out), 2):
        if writeable(x, ts[i]).overlaps(writeable(y, ts[j])):
            raise InvalidArgumentError(f"BindOutputs: the writeable ranges of outputs {i} and {j} overlap")
    return out


def writeable(b: BufferBinding, t: TensorDesc) -> BufferBinding:
    return BufferBinding(b.buffer, b.offset, t.total_size_in_bytes)


def check_aliasing(desc, ins, outs) -> None:
    """Inputs may alias an output only in place: identical tensors, the same binding range."""
    in_ts, out_ts = desc.input_tensors(), desc.output_tensors()
    for j, ob in enumerate(outs):
        wo = writeable(ob, out_ts[j])
        aliased = []
        for i, ib in enumerate(ins):
            if ib is None or not ib.overlaps(wo):
                continue
            name = desc.input_names()[i]
            if desc.in_place == IN_PLACE_NONE:
                raise InvalidArgumentError(f"{desc.name}: {name} overlaps the output's range; this operator "
                                           "does not execute in place")
            t, o = in_ts[i], out_ts[j]
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


def check_resources_disjoint(desc, temporary, persistent, ins, outs) -> None:
    """The temporary resource is scratch the kernels overwrite: it may share no byte with a tensor
    or with the persistent resource (a temporary over the input would corrupt it mid-execution)."""
    if temporary is None:
        return
    others = [(n, b) for n, b in zip(desc.input_names(), ins) if b is not None]
    others += [(n, writeable(b, t)) for n, b, t in zip(desc.output_names(), outs, desc.output_tensors())]
    if persistent is not None:
        others.append(("the persistent resource", persistent))
    for name, b in others:
        if temporary.overlaps(b):
            raise InvalidArgumentError(f"{desc.name}: the temporary resource [{temporary.offset}, "
                                       f"{temporary.offset + temporary.size}) overlaps {name} [{b.offset}, "
                                       f"{b.offset + b.size}) of the same buffer; the temporary must be "
                                       "memory of its own")


def check_complete(cop, bindings) -> None:
    """Every slot a compiled operator needs is bound (checked when recording)."""
    ins, outs, temp, pers = bindings
    name = cop.desc.name
    if ins is None or outs is None:
        raise InvalidArgumentError(f"RecordDispatch {name}: {'inputs' if ins is None else 'outputs'} are "
                                   "not bound; every slot needs its binding before recording")
    props = cop.binding_properties
    if props.temporary_resource_size and temp is None:
        raise InvalidArgumentError(f"RecordDispatch {name}: the temporary resource "
                                   f"({props.temporary_resource_size} bytes) is not bound")
    if props.persistent_resource_size and pers is None:
        raise InvalidArgumentError(f"RecordDispatch {name}: the persistent resource "
                                   f"({props.persistent_resource_size} bytes) is not bound")


def check_initializer_complete(init, bindings) -> None:
    ins, outs = bindings[0], bindings[1]
    ops = init.operators
    if ops and any(op.binding_properties.persistent_resource_size for op in ops) and outs is None:
        raise InvalidArgumentError("RecordDispatch: the initializer's outputs (persistent resources) are not bound")
    if any(any(op.owned) for op in ops) and ins is None:
        raise InvalidArgumentError("RecordDispatch: the initializer's inputs (OWNED_BY_DML tensors) are not bound")


class BindingTable:
    """IDMLBindingTable: one binding per slot, validated as it is bound. Not thread-safe: one
    thread binds and records at a time (as in DirectML)."""

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

    def bind_inputs(self, bindings) -> None:
        d = self.dispatchable
        bindings = list(bindings)
        if len(bindings) == 0:
            self.inputs = None
            return
        if isinstance(d, OperatorInitializer):
            self.inputs = self._initializer_inputs(d, bindings)
            return
        self.inputs = operator_inputs(self.device, d, bindings)
        self._check_aliasing()

    def _initializer_inputs(self, init: OperatorInitializer, bindings) -> list:
        if len(bindings) != len(init.operators):
            raise InvalidArgumentError(f"BindInputs: {len(bindings)} bindings for {len(init.operators)} input slots; "
                                       "bind exactly one per slot (None for an absent one)")
        out = []
        for op, arr in zip(init.operators, bindings):
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
                    check_tensor_binding(self.device, as_binding(b, t), t, what)
            out.append(tuple(None if b is None else as_binding(b, t) for b, t in zip(items, ts)))
        return out

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
            self.outputs = [check_resource(self.device, b, op.binding_properties.persistent_resource_size,
                                           PERSISTENT_BUFFER_ALIGNMENT,
                                           f"BindOutputs (initializer) persistent resource of {op.desc.name}")
                            for b, op in zip(bindings, d.operators)]
            return
        self.outputs = operator_outputs(self.device, d, bindings)
        self._check_aliasing()

    def bind_temporary_resource(self, binding) -> None:
        req = self.dispatchable.binding_properties.temporary_resource_size
        self.temporary = check_resource(self.device, binding, req, TEMPORARY_BUFFER_ALIGNMENT,
                                        "BindTemporaryResource")
        self._check_aliasing()

    def bind_persistent_resource(self, binding) -> None:
        d = self.dispatchable
        if isinstance(d, OperatorInitializer):
            raise InvalidArgumentError("BindPersistentResource: an initializer has no persistent resource; bind the "
                                       "targets' persistent resources as its outputs")
        req = d.binding_properties.persistent_resource_size
        self.persistent = check_resource(self.device, binding, req, PERSISTENT_BUFFER_ALIGNMENT,
                                         "BindPersistentResource")
        self._check_aliasing()

    def _check_aliasing(self) -> None:
        d = self.dispatchable
        if not isinstance(d, CompiledOperator):
            return
        ins, outs = self.inputs or [], self.outputs or []
        if self.inputs is not None and self.outputs is not None:
            check_aliasing(d.desc, ins, outs)
        check_resources_disjoint(d.desc, self.temporary, self.persistent, ins, outs)

    def snapshot(self) -> tuple:
        ins = None if self.inputs is None else list(self.inputs)
        outs = None if self.outputs is None else list(self.outputs)
        return ins, outs, self.temporary, self.persistent
