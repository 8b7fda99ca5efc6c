"""IDMLDevice: the object that owns buffers, validates operators and runs command lists."""
from __future__ import annotations

from dataclasses import dataclass

from ..descriptors.operators import OperatorDesc
from ..descriptors.types import DataType, ExecutionFlags, Feature, FeatureLevel
from ..errors import DeviceRemovedError, DmlError, InvalidArgumentError, OutOfMemoryError, UnsupportedError
from .objects import BindingTable, Buffer, CommandList, CommandRecorder, CompiledOperator, Operator, OperatorInitializer


@dataclass(frozen=True)
class DeviceInfo:
    backend: str            # "cpu" | "opencl" | "cuda"
    index: int
    name: str
    vendor: str
    device_type: str        # "CPU" | "GPU" | ...
    global_memory: int      # bytes
    fp16: bool              # native half arithmetic (storage is always supported)
    fp64: bool
    platform: str = ""

    @property
    def max_feature_level(self) -> FeatureLevel:
        # IDENTITY takes FLOAT64 from FL 4.1; every other row of our tables this device implements.
        return FeatureLevel.FL_6_4 if self.fp64 else FeatureLevel.FL_4_0

    @property
    def id(self) -> str:
        return self.backend if self.backend == "cpu" else f"{self.backend}:{self.index}"


class Device:
    """A device at a feature level: every operator created on it is validated against that level."""

    def __init__(self, backend, feature_level: FeatureLevel | None = None):
        self.backend = backend
        self.info: DeviceInfo = backend.info
        top = self.info.max_feature_level
        if feature_level is None:
            feature_level = top
        try:
            feature_level = FeatureLevel(feature_level)
        except ValueError as e:
            raise InvalidArgumentError(f"create_device: {feature_level!r} is not a DML_FEATURE_LEVEL") from e
        if feature_level > top:
            raise UnsupportedError(f"create_device: {self.info.id} ({self.info.name}) supports feature levels up to "
                                   f"{top.label}; minimum level {feature_level.label} was requested")
        self.feature_level = feature_level
        self._removed: DmlError | None = None
        self._scratch_buf: Buffer | None = None

    @property
    def name(self) -> str:
        return f"{self.info.id} ({self.info.name})"

    def __repr__(self):
        return f"<Device {self.name} FL {self.feature_level.label}>"

    # -- removal
    def get_device_removed_reason(self) -> DmlError | None:
        """None while the device works; after removal, the error that removed it."""
        return self._removed

    def _check_alive(self) -> None:
        if self._removed is not None:
            raise DeviceRemovedError(f"{self.name} was removed: {self._removed}") from self._removed

    def _remove(self, reason: DmlError) -> None:
        if self._removed is None:
            self._removed = reason

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except DmlError:
            raise
        except Exception as e:  # a fault on the device itself: DirectML removes the device
            raise self._guard_failed(e) from e

    # -- features
    def check_feature_support(self, feature: Feature, query=None):
        self._check_alive()
        try:
            feature = Feature(feature)
        except ValueError as e:
            raise UnsupportedError(f"CheckFeatureSupport: unknown DML_FEATURE {feature!r}") from e
        if feature == Feature.FEATURE_LEVELS:
            levels = [FeatureLevel(x) for x in (query or [])]
            if not levels:
                raise InvalidArgumentError("CheckFeatureSupport(FEATURE_LEVELS): RequestedFeatureLevelCount is 0")
            ok = [lv for lv in levels if lv <= self.feature_level]
            if not ok:
                raise UnsupportedError(f"CheckFeatureSupport(FEATURE_LEVELS): none of "
                                       f"{[lv.label for lv in levels]} is supported; this device runs at "
                                       f"{self.feature_level.label}")
            return max(ok)
        dt = DataType(query)
        return self._supports_type(dt)

    def _supports_type(self, dt: DataType) -> bool:
        if dt in (DataType.UNKNOWN, DataType.UINT4, DataType.INT4):
            return False
        if dt == DataType.FLOAT64:
            return self.info.fp64
        return True

    # -- objects
    def create_buffer(self, size: int) -> Buffer:
        self._check_alive()
        size = int(size)
        if size <= 0:
            raise InvalidArgumentError(f"create_buffer: size {size} must be > 0")
        try:
            native = self.backend.alloc(size)
        except MemoryError as e:
            raise OutOfMemoryError(f"create_buffer: {size} bytes could not be allocated on {self.name}") from e
        except DmlError:
            raise
        except Exception as e:
            if self.backend.is_out_of_memory(e):
                raise OutOfMemoryError(f"create_buffer: {size} bytes could not be allocated on {self.name}: {e}") from e
            raise self._guard_failed(e) from e
        return Buffer(self, native, size)

    def _guard_failed(self, e: Exception) -> DmlError:
        err = DeviceRemovedError(f"{self.name}: {type(e).__name__}: {e}")
        self._remove(err)
        return err

    def create_operator(self, desc: OperatorDesc) -> Operator:
        self._check_alive()
        if not isinstance(desc, OperatorDesc):
            raise InvalidArgumentError(f"CreateOperator: expected an operator descriptor, got {type(desc).__name__}")
        desc.validate(self.feature_level)
        for n, t in zip(desc.input_names() + desc.output_names(), desc.input_tensors() + desc.output_tensors()):
            if not self._supports_type(t.data_type):
                raise InvalidArgumentError(f"{desc.name}: {n} has data type {t.data_type.name}, which "
                                           f"{self.name} does not support")
        return Operator(self, desc)

    def compile_operator(self, op: Operator, flags: ExecutionFlags = ExecutionFlags.NONE) -> CompiledOperator:
        self._check_alive()
        if not isinstance(op, Operator) or op.device is not self:
            raise InvalidArgumentError("CompileOperator: the operator must be created on this device")
        try:
            flags = ExecutionFlags(int(flags))
        except ValueError as e:
            raise InvalidArgumentError(f"CompileOperator: unknown execution flags {flags!r}") from e
        if int(flags) & ~0x7:
            raise InvalidArgumentError(f"CompileOperator: unknown execution flags 0x{int(flags):x}")
        program = self._guard(self.backend.compile, op.desc, flags)
        return CompiledOperator(self, op, flags, program)

    def create_operator_initializer(self, ops=()) -> OperatorInitializer:
        self._check_alive()
        return OperatorInitializer(self, ops)

    def create_binding_table(self, dispatchable) -> BindingTable:
        self._check_alive()
        return BindingTable(self, dispatchable)

    def create_command_recorder(self) -> CommandRecorder:
        self._check_alive()
        return CommandRecorder(self)

    def create_command_list(self) -> CommandList:
        self._check_alive()
        return CommandList(self)

    # -- execution
    def _check_complete(self, d, bindings) -> None:
        ins, outs, temp, pers = bindings
        if isinstance(d, OperatorInitializer):
            if d.operators and any(op.binding_properties.persistent_resource_size for op in d.operators):
                if outs is None:
                    raise InvalidArgumentError("RecordDispatch: the initializer's outputs (persistent resources) "
                                               "are not bound")
            if any(any(op.owned) for op in d.operators) and ins is None:
                raise InvalidArgumentError("RecordDispatch: the initializer's inputs (OWNED_BY_DML tensors) are "
                                           "not bound")
            return
        if ins is None or outs is None:
            raise InvalidArgumentError(f"RecordDispatch {d.desc.name}: {'inputs' if ins is None else 'outputs'} are "
                                       "not bound; every slot needs its binding before recording")
        props = d.binding_properties
        if props.temporary_resource_size and temp is None:
            raise InvalidArgumentError(f"RecordDispatch {d.desc.name}: the temporary resource "
                                       f"({props.temporary_resource_size} bytes) is not bound")
        if props.persistent_resource_size and pers is None:
            raise InvalidArgumentError(f"RecordDispatch {d.desc.name}: the persistent resource "
                                       f"({props.persistent_resource_size} bytes) is not bound")

    def _dispatch(self, d, bindings) -> None:
        if isinstance(bindings, BindingTable):
            bindings = bindings.snapshot()
            self._check_complete(d, bindings)
        ins, outs, temp, pers = bindings
        if isinstance(d, OperatorInitializer):
            for op in d.operators:
                if op.initialized:
                    raise InvalidArgumentError(f"initializer: {op.desc.name} is already initialized; a compiled "
                                               "operator is initialized exactly once")
            for k, op in enumerate(d.operators):
                if any(op.owned):
                    p = outs[k]
                    for b, off, t in zip(ins[k], op.persistent_offsets, op.desc.input_tensors()):
                        if b is not None:
                            self._guard(self.backend.copy, b.buffer.native, b.offset, p.buffer.native,
                                        p.offset + off, t.total_size_in_bytes)
                op.initialized = True
            return
        self._guard(d.program.run, *self._launch_args(d, ins, outs, temp, pers))

    @staticmethod
    def _launch_args(d, ins, outs, temp, pers):
        """(inputs, outputs, temporary) as (native buffer, byte offset) pairs for Program.run."""
        if not d.initialized:
            raise InvalidArgumentError(f"{d.desc.name}: executed before initialization; run an operator "
                                       "initializer over it first")
        args = []
        for b, off in zip(ins, d.persistent_offsets):
            args.append((pers.buffer.native, pers.offset + off) if off is not None else (b.buffer.native, b.offset))
        out_args = [(b.buffer.native, b.offset) for b in outs]
        tmp = (temp.buffer.native, temp.offset) if temp is not None else None
        return args, out_args, tmp

    def _replayable(self, cl: CommandList) -> bool:
        """A list can be captured once it has run: only compiled operators, bindings fixed at record time."""
        return all(isinstance(d, CompiledOperator) and not isinstance(b, BindingTable) for d, b in cl.dispatches)

    def _execute_list(self, cl: CommandList) -> None:
        be = self.backend
        if cl.graph is not None:
            self._guard(be.replay, cl.graph)
            return
        if cl.launches is None and cl.executions == 1 and cl.dispatches and self._replayable(cl):
            # bindings are fixed and every operator initialized: resolve the launches once. Asked on
            # the second execution only, so a list that cannot be resolved is not re-checked on every run
            cl.launches = [(d.program.run, self._launch_args(d, *b)) for d, b in cl.dispatches]
        if cl.launches is not None:
            if be.supports_graphs:
                launches = cl.launches
                cl.graph = self._guard(be.capture, lambda: _run_launches(launches))
                self._guard(be.replay, cl.graph)
            else:
                self._guard(_run_launches, cl.launches)
            return
        for d, b in cl.dispatches:
            self._dispatch(d, b)
        cl.executions += 1

    def execute_command_lists(self, lists) -> None:
        self._check_alive()
        for cl in lists:
            if not isinstance(cl, CommandList) or cl.device is not self:
                raise InvalidArgumentError("ExecuteCommandLists: every command list must come from this device")
        for cl in lists:
            self._execute_list(cl)

    def synchronize(self) -> None:
        self._check_alive()
        self._guard(self.backend.finish)

    def _run_now(self, d, table) -> None:
        cl = self.create_command_list()
        self.create_command_recorder().record_dispatch(cl, d, table)
        self.execute_command_lists([cl])
        self.synchronize()

    def _scratch(self, size: int) -> Buffer:
        if self._scratch_buf is None or self._scratch_buf.size < size:
            self._scratch_buf = self.create_buffer(max(size, 256))
        return self._scratch_buf

    # -- native handles, for making arrays that live on this device
    @property
    def cl_context(self):
        """The pyopencl Context of an OpenCL device: arrays made in it can be passed to gm.mean /
        gm.reduce_mean and bound through ``Buffer.wrap_array``."""
        return self._native("opencl", "ctx")

    @property
    def cl_queue(self):
        """The pyopencl CommandQueue this OpenCL device runs every command on (in order)."""
        return self._native("opencl", "queue")

    @property
    def cuda_stream(self):
        """The CuPy Stream (non-blocking) this CUDA device launches on."""
        return self._native("cuda", "stream")

    def _native(self, kind: str, attr: str):
        if self.info.backend != kind:
            label = {"opencl": "an OpenCL", "cuda": "a CUDA"}[kind]
            raise UnsupportedError(f"{self.name} is not {label} device; it has no {attr} handle")
        return getattr(self.backend, attr)


def _run_launches(launches) -> None:
    for run, args in launches:
        run(*args)
