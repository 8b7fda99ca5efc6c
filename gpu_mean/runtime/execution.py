"""Everything that runs work on a device, in one place: the one-call execute, operator
initialization, recording, command-list execution (launches resolved once, CUDA-graph capture and
replay), synchronize, host<->device copies, and device removal.

Faults (docs/design.md, "faults"): only the exception types a backend names as its own
(``Backend.native_errors``) are device faults. Out-of-memory among them, recognised by the backend,
becomes OutOfMemoryError and leaves the device working; any other native error removes the device
(DeviceRemovedError, now and on every later call). Any other exception is a bug in Python code, ours
or the caller's: it propagates as itself and the device keeps working.

Threads: a Device and a CompiledOperator may be used from several threads at once. Launches,
copies and synchronization hold the backend's lock, which every Device object over that backend
shares (kernel arguments are set on shared kernel objects, staging memory is shared, and a queue or
stream is one ordered sequence), and the one-call execute gives each thread its own temporary
scratch buffer. Binding tables and command recorders are not thread-safe (as in DirectML).
"""
from __future__ import annotations

import threading
import weakref

from ..descriptors.types import PERSISTENT_BUFFER_ALIGNMENT, TEMPORARY_BUFFER_ALIGNMENT, ExecutionFlags
from ..errors import DeviceRemovedError, DmlError, InvalidArgumentError, OutOfMemoryError
from . import bindings as B
from .objects import Buffer, BufferBinding, CommandList, CompiledOperator, Dispatchable, OperatorInitializer


class Executor:
    """The device's runner. ``Device.executor``; objects reach the device's work only through it."""

    def __init__(self, device, backend):
        self.device = device
        self.backend = backend
        self.removed: DmlError | None = None
        self.lock = backend_lock(backend)   # never taken twice by one thread: no public entry nests
        self._local = threading.local()     # per-thread scratch for the one-call execute

    # -- faults
    def check_alive(self) -> None:
        if self.removed is not None:
            raise DeviceRemovedError(f"{self.device.name} was removed: {self.removed}") from self.removed

    def guard(self, what: str, fn, *args):
        """Run a backend call; native errors become OutOfMemoryError or remove the device. Every
        public entry checks that the device is alive before it gets here."""
        try:
            return fn(*args)
        except self.backend.native_errors as e:
            if self.backend.is_out_of_memory(e):
                raise OutOfMemoryError(f"{what} on {self.device.name}: out of memory ({type(e).__name__}: "
                                       f"{e})") from e
            err = DeviceRemovedError(f"{self.device.name}: {what} failed: {type(e).__name__}: {e}")
            self.removed = err
            raise err from e

    # -- memory
    def allocate(self, size: int) -> Buffer:
        self.check_alive()
        dev = self.device
        if dev.max_alloc_bytes is not None and size > dev.max_alloc_bytes:
            # a limit on one buffer, not a shortage of memory: say which limit
            raise InvalidArgumentError(f"allocating {size} bytes: that exceeds {dev.max_alloc_name} = "
                                       f"{dev.max_alloc_bytes} bytes, the largest single buffer of {dev.name}; "
                                       "use several buffers (gm.mean and gm.reduce_mean split larger arrays "
                                       "themselves)")
        try:
            native = self.guard(f"allocating {size} bytes", self.backend.alloc, size)
        except OutOfMemoryError as e:
            # say what the device reports, beside what was asked
            free = self.backend.free_memory()
            free = f", {free} bytes of it free" if free is not None else ""
            raise OutOfMemoryError(f"{e.args[0]}; {self.device.name} reports {self.device.info.global_memory} "
                                   f"bytes of memory{free}") from e.__cause__
        return Buffer(self.device, native, size)

    def write(self, native, offset: int, raw) -> None:
        self.check_alive()
        with self.lock:
            self.guard("a write", self.backend.write, native, offset, raw)

    def round_trip(self, writes, cl: CommandList, native, nbytes: int):
        """Under one hold of the lock: ``writes`` ((native, bytes) uploads the caller keeps unchanged
        until this returns, Backend.write_held), one recorded command list of this device, and the
        read of ``nbytes`` from ``native``'s start (a new uint8 array): a functional call's host
        path (frontends/pool.py: Launch.run_host)."""
        self.check_alive()
        be = self.backend
        with self.lock:
            for dst, raw in writes:
                self.guard("a write", be.write_held, dst, 0, raw)
            self._execute_list(cl)
            return self.guard("a read", be.read, native, 0, nbytes)

    def compute(self, program, arrays):
        """A program's result computed on the host from the caller's arrays where they lie (a device
        whose memory is host memory and whose programs are numpy: ``CpuProgram.compute``). numpy
        holds no device state, so no lock; faults as every backend call's (``guard``)."""
        self.check_alive()
        return self.guard("a computation", program.compute, arrays)

    def read(self, native, offset: int, nbytes: int):
        self.check_alive()
        with self.lock:
            return self.guard("a read", self.backend.read, native, offset, nbytes)

    def host_sync(self, native, nbytes: int) -> None:
        """Wait until the device's writes to host memory bound in place (``native``, made by the
        backend's ArrayBridge.host_in_place) are visible to the host, and all work before them done."""
        self.check_alive()
        with self.lock:
            self.guard("a host sync", self.backend.host_sync, native, nbytes)

    def _scratch(self, size: int) -> BufferBinding:
        buf = getattr(self._local, "scratch", None)
        if buf is None or buf.size < size:
            buf = self._local.scratch = self.allocate(max(size, TEMPORARY_BUFFER_ALIGNMENT))
        return BufferBinding(buf, 0, buf.size)

    # -- the one-call path
    def execute_operator(self, cop: CompiledOperator, inputs: list, outputs: list, temporary, persistent) -> None:
        self.check_alive()
        dev = self.device
        if cop.device is not dev:
            raise InvalidArgumentError("execute: the compiled operator belongs to another device")
        with cop.lock:
            if not cop.initialized:
                self._initialize_for_execute(cop, inputs, persistent)
        if any(cop.owned) and len(inputs) == len(cop.owned):
            inputs = [None if o else b for b, o in zip(inputs, cop.owned)]
        ins = B.operator_inputs(dev, cop, inputs)
        outs = B.operator_outputs(dev, cop, outputs)
        B.check_aliasing(cop.desc, ins, outs)
        props = cop.binding_properties
        pers = B.check_resource(dev, persistent if persistent is not None else cop.persistent_auto,
                                props.persistent_resource_size, PERSISTENT_BUFFER_ALIGNMENT,
                                "execute persistent resource")
        if temporary is None:
            temp = self._scratch(props.temporary_resource_size) if props.temporary_resource_size else None
        else:
            temp = B.check_resource(dev, temporary, props.temporary_resource_size, TEMPORARY_BUFFER_ALIGNMENT,
                                    "execute temporary resource")
            B.check_resources_disjoint(cop.desc, temp, pers, ins, outs)
        args = launch_args(cop, ins, outs, temp, pers)
        with self.lock:
            self.guard(f"executing {cop.desc.name}", cop.program.run, *args)
            self.guard("synchronize", self.backend.finish)

    def run_bound(self, cop: CompiledOperator, inputs, outputs, temporary) -> None:
        """Enqueue ``cop`` over (native buffer, byte offset) pairs that an earlier execution of the
        same operator checked in kind: the functional calls' repeated launch (frontends/pool.py),
        which rebinds only where the caller's arrays lie. Nothing is validated or recorded; the
        program substitutes the pointers into the argument tuple it built once
        (``Program.run_bound``)."""
        self.check_alive()
        with self.lock:
            self.guard(f"executing {cop.desc.name}", cop.program.run_bound, inputs, outputs, temporary)

    def _initialize_for_execute(self, cop: CompiledOperator, inputs: list, persistent) -> None:
        p_size = cop.binding_properties.persistent_resource_size
        if p_size and persistent is None:
            persistent = cop.persistent_auto = self.allocate(p_size)
        pers = B.check_resource(self.device, persistent, p_size, PERSISTENT_BUFFER_ALIGNMENT,
                                "execute persistent resource")
        owned = [None] * len(cop.owned)
        if any(cop.owned):
            if len(inputs) != len(cop.owned):
                raise InvalidArgumentError(f"execute {cop.desc.name}: {len(inputs)} inputs for {len(cop.owned)} "
                                           "input slots")
            for i, (b, t, o) in enumerate(zip(inputs, cop.desc.input_tensors(), cop.owned)):
                if o:
                    if b is None:
                        raise InvalidArgumentError(f"execute {cop.desc.name} {cop.desc.input_names()[i]}: an "
                                                   "OWNED_BY_DML tensor must be given at the first execute")
                    owned[i] = B.as_binding(b, t)
                    B.check_tensor_binding(self.device, owned[i], t, f"execute {cop.desc.name} (initialization)")
        with self.lock:
            if cop.initialized:     # an initializer list ran it meanwhile
                return
            self._initialize([cop], [owned], [pers])
            self.guard("synchronize", self.backend.finish)

    def _initialize(self, ops, ins, outs) -> None:
        """Copy each operator's OWNED_BY_DML inputs into its persistent resource; mark it initialized."""
        for op in ops:
            if op.initialized:
                raise InvalidArgumentError(f"initializer: {op.desc.name} is already initialized; a compiled "
                                           "operator is initialized exactly once")
        for k, op in enumerate(ops):
            p = outs[k] if outs else None
            for b, off, t in zip(ins[k] if ins else (), op.persistent_offsets, op.desc.input_tensors()):
                if b is not None:
                    self.guard("initialization", self.backend.copy, b.buffer.native, b.offset, p.buffer.native,
                               p.offset + off, t.total_size_in_bytes)
            op.initialized = True

    # -- command lists
    def execute_lists(self, lists) -> None:
        self.check_alive()
        for cl in lists:
            if not isinstance(cl, CommandList) or cl.device is not self.device:
                raise InvalidArgumentError("ExecuteCommandLists: every command list must come from this device")
        with self.lock:
            for cl in lists:
                self._execute_list(cl)

    def _execute_list(self, cl: CommandList) -> None:
        be = self.backend
        if cl.graph is not None:
            self.guard("a graph replay", be.replay, cl.graph)
            return
        if cl.launches is None and cl.executions == 1 and cl.dispatches and _replayable(cl):
            # bindings are fixed and every operator initialized: resolve the launches once. Asked on
            # the second execution only, so a list that cannot be resolved is not re-checked on every run
            cl.launches = [(d.program.run, launch_args(d, *b)) for d, b in cl.dispatches]
        if cl.launches is not None:
            if be.supports_graphs:
                launches = cl.launches
                cl.graph = self.guard("a graph capture", be.capture, lambda: _run_launches(launches))
                self.guard("a graph replay", be.replay, cl.graph)
            else:
                self.guard("a command list", _run_launches, cl.launches)
            return
        for d, b in cl.dispatches:
            self._dispatch(d, b)
        cl.executions += 1

    def _dispatch(self, d: Dispatchable, table_or_snapshot) -> None:
        if isinstance(table_or_snapshot, B.BindingTable):      # DESCRIPTORS_VOLATILE: bound at execution
            if table_or_snapshot.dispatchable is not d:
                raise InvalidArgumentError(f"ExecuteCommandLists: the binding table recorded with "
                                           f"{d.desc.name} was reset to another dispatchable; record again")
            snap = table_or_snapshot.snapshot()
            B.check_complete(d, snap)
        else:
            snap = table_or_snapshot
        ins, outs, temp, pers = snap
        if isinstance(d, OperatorInitializer):
            self._initialize(d.operators, ins, outs)
            return
        self.guard(f"executing {d.desc.name}", d.program.run, *launch_args(d, ins, outs, temp, pers))

    def synchronize(self) -> None:
        self.check_alive()
        with self.lock:
            self.guard("synchronize", self.backend.finish)


class CommandRecorder:
    """IDMLCommandRecorder: records dispatches with their bindings into a command list. Not
    thread-safe (as in DirectML)."""

    def __init__(self, device):
        self.device = device

    def record_dispatch(self, command_list: CommandList, dispatchable: Dispatchable, table: B.BindingTable) -> None:
        dev = self.device
        dev.executor.check_alive()
        if not isinstance(command_list, CommandList) or command_list.device is not dev:
            raise InvalidArgumentError("RecordDispatch: the command list must come from this device")
        if command_list.closed:
            raise InvalidArgumentError("RecordDispatch: the command list is closed; reset it before recording")
        if not isinstance(table, B.BindingTable) or table.dispatchable is not dispatchable:
            raise InvalidArgumentError("RecordDispatch: the binding table was created for another dispatchable")
        volatile = isinstance(dispatchable, CompiledOperator) and bool(
            dispatchable.flags & ExecutionFlags.DESCRIPTORS_VOLATILE)
        if volatile:
            command_list.dispatches.append((dispatchable, table))
        else:
            snap = table.snapshot()
            if isinstance(dispatchable, OperatorInitializer):
                B.check_initializer_complete(dispatchable, snap)
            else:
                B.check_complete(dispatchable, snap)
            command_list.dispatches.append((dispatchable, snap))
        command_list.changed()


_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def backend_lock(backend) -> threading.Lock:
    """One lock per backend instance: several Device objects (create_device caches backends, and the
    functional API makes its own Device) drive the same queue or stream and must not interleave."""
    with _locks_guard:
        lock = _locks.get(backend)
        if lock is None:
            lock = _locks[backend] = threading.Lock()
        return lock


def launch_args(cop: CompiledOperator, ins, outs, temp, pers) -> tuple:
    """(inputs, outputs, temporary) as (native buffer, byte offset) pairs for Program.run; an owned
    input reads its copy in the persistent resource."""
    if not cop.initialized:
        raise InvalidArgumentError(f"{cop.desc.name}: executed before initialization; run an operator "
                                   "initializer over it first")
    args = []
    for b, off in zip(ins, cop.persistent_offsets):
        args.append((pers.buffer.native, pers.offset + off) if off is not None else (b.buffer.native, b.offset))
    out_args = [(b.buffer.native, b.offset) for b in outs]
    tmp = (temp.buffer.native, temp.offset) if temp is not None else None
    return args, out_args, tmp


def _replayable(cl: CommandList) -> bool:
    """A list can be resolved once it has run: only compiled operators, bindings fixed at record time."""
    return all(isinstance(d, CompiledOperator) and not isinstance(b, B.BindingTable) for d, b in cl.dispatches)


def _run_launches(launches) -> None:
    for run, args in launches:
        run(*args)
