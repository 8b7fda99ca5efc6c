"""IDMLDevice: creates buffers and objects, validates operators at its feature level, compiles
them (plan once, then the backend's program), and hands running to its executor."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..descriptors.operators import OperatorDesc
from ..descriptors.types import DataType, ExecutionFlags, Feature, FeatureLevel, KernelOp
from ..errors import (
    DeviceRemovedError,
    DmlError,
    InvalidArgumentError,
    OutOfMemoryError,
    UnsupportedError,
    UnsupportedTypeError,
)
from . import planning
from .bindings import BindingTable
from .execution import CommandRecorder, Executor
from .objects import Buffer, CommandList, CompiledOperator, Operator, OperatorInitializer

_serials = itertools.count(1)
# the smallest max_alloc_bytes a Device takes: room for a reduction's temporary partials and a few
# elements per piece (tests lower the limit to exercise split calls on small arrays)
MIN_MAX_ALLOC = 4096


def _alloc_limit(backend, setting) -> tuple[int | None, str]:
    """(bytes, name) of the largest single buffer: the backend's own limit (OpenCL:
    CL_DEVICE_MAX_MEM_ALLOC_SIZE) or a lower ``max_alloc_bytes`` given to the Device; (None, "")
    when neither exists."""
    limit, name = getattr(backend, "max_alloc", None), getattr(backend, "max_alloc_name", "")
    if setting is not None:
        if isinstance(setting, bool) or not isinstance(setting, int) and not hasattr(setting, "__index__"):
            raise InvalidArgumentError(f"Device: max_alloc_bytes must be an integer, got {type(setting).__name__}")
        setting = int(setting)
        if setting < MIN_MAX_ALLOC:
            raise InvalidArgumentError(f"Device: max_alloc_bytes = {setting}; it must be at least {MIN_MAX_ALLOC}")
        if limit is None or setting < limit:
            limit, name = setting, "max_alloc_bytes (set on this Device)"
    return limit, name


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
    unavailable: str | None = None  # why a listed device cannot be used (e.g. a GPU another process holds)
    variant: str = ""       # "checked": the bounds-checked kernel build (gpu_mean/kernels/checked.py)

    @property
    def max_feature_level(self) -> FeatureLevel:
        # IDENTITY takes FLOAT64 from FL 4.1; every other row of our tables this device implements.
        return FeatureLevel.FL_6_4 if self.fp64 else FeatureLevel.FL_4_0

    @property
    def id(self) -> str:
        base = self.backend if self.backend == "cpu" else f"{self.backend}:{self.index}"
        return f"{base}-{self.variant}" if self.variant else base


class Device:
    """A device at a feature level: every operator created on it is validated against that level.
    ``max_alloc_bytes`` lowers the largest buffer it allocates below the hardware's own limit
    (``Device.max_alloc_bytes`` / ``max_alloc_name``: the limit in force and its name). Thread-safe:
    several threads may create objects on it and execute compiled operators at once."""

    def __init__(self, backend, feature_level: FeatureLevel | None = None, max_alloc_bytes: int | None = None):
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
        self.max_alloc_bytes, self.max_alloc_name = _alloc_limit(backend, max_alloc_bytes)
        self.serial = next(_serials)
        self.executor = Executor(self, backend)
        self._close_hooks: list = []

    def close(self) -> None:
        """Give back what this Device object keeps between calls (the buffers and compiled launches
        that gm.mean / gm.reduce_mean pool for it) and retire it: every later call raises
        DeviceRemovedError saying it was closed. Other Device objects over the same hardware, and new
        ones, keep working. ``with gm.create_device(...) as dev:`` closes it on leaving the block."""
        if self.executor.removed is None:
            self.executor.removed = DeviceRemovedError(f"{self.name} was closed (Device.close)")
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            hook()

    def on_close(self, hook) -> None:
        """Call ``hook()`` when this Device is closed (the layers above release what they keep)."""
        self._close_hooks.append(hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def exact_partials(self, x, axes: tuple, dt: DataType):
        """The exact totals of the host array ``x`` (FLOAT32, FLOAT16 or BFLOAT16 values, type ``dt``)
        over ``axes`` (kept as size 1), as ``runtime/exact.py``'s (digits, flags): the partial sums
        that split pieces and gpu_mean.dask chunks add in any grouping and round once (docs/design.md,
        "Partials across boundaries"). OpenCL and CUDA: the device's superaccumulator
        (``KernelBackend.exact_limbs``, no fp64 needed); the CPU device: numpy. ``x`` must fit one
        buffer of the device (the caller cuts larger arrays)."""
        import numpy as np

        from . import exact
        self.executor.check_alive()
        axes = tuple(sorted(int(a) for a in axes))
        kept = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
        be = self.backend
        if getattr(be, "exact_limbs", None) is None or x.size == 0:
            return exact.limbs(x, axes, x.dtype), exact.nonfinite_flags(x, axes)
        shape = tuple(int(s) for s in x.shape)
        strides = _packed(shape)
        out_strides = tuple(0 if d in axes else s for d, s in enumerate(_packed(kept)))
        plan = planning.plan_reduce(KernelOp.REDUCE_MEAN, dt, shape, strides, out_strides, axes)
        if plan.n_reduce >= 1 << 32:
            return exact.limbs(x, axes, x.dtype), exact.nonfinite_flags(x, axes)
        with self.executor.lock:
            words = self.executor.guard("exact partial sums", be.exact_limbs, plan, np.asarray(x))
        return exact.from_device_limbs(words, x.dtype, kept)

    def dd_partials(self, x, axes: tuple, dt: DataType):
        """Exact double-double totals of ``x`` (FLOAT32, FLOAT16 or BFLOAT16 values, type ``dt``): a
        host array, or a packed device array of this device's bridge (a CuPy chunk on its CUDA device)
        over ``axes`` (kept as size 1): (h, c, inexact), FLOAT64, FLOAT64 and bool host arrays
        of the kept shape, h + c the exact total where ``inexact`` is False (elsewhere the caller takes
        the values' digits: an inf or NaN, values over too many binades); -0.0s alone give h -0.0. One
        pass of the device's gm_dd_partials_serial (opencl_kernels/reduce_cpu_ddp.h; the GPU shape's
        gm_dd_partials, reduce_gpu_ddp.h) over the values viewed as (outer, reduced, inner), its
        segments' and lanes' pairs added here by error-free sums (``wide.dd_add_exact``). None where
        the device has no such kernel (the CPU device, no fp64), ``x`` is past one buffer of this
        Device (``max_alloc_bytes``) or 2^32 values, or the reduced axes are not one block of neighbours
        (on the CPU shape also: with the inner size a multiple of 8 or 1): gpu_mean.dask then takes
        ``exact_partials``, or for a CuPy chunk its FLOAT64 partials. A device array that is not
        packed is packed first (a copy on its device)."""
        import numpy as np

        from . import wide
        self.executor.check_alive()
        be = self.backend
        if getattr(be, "dd_partials", None) is None or x.size == 0 or x.size >= 1 << 32:
            return None
        if dt not in (DataType.FLOAT32, DataType.FLOAT16, DataType.BFLOAT16) or not self.info.fp64:
            return None
        if self.max_alloc_bytes is not None and x.nbytes > self.max_alloc_bytes:
            return None     # past one buffer of this Device: exact_partials cuts it into pieces
        axes = tuple(sorted(int(a) for a in axes))
        if isinstance(x, np.ndarray):
            x = np.ascontiguousarray(x)
        elif be.cpu_shaped or not be.arrays.owns(x):
            return None     # another device's array: the caller's path names the mismatch
        elif tuple(x.strides) != tuple(s * x.dtype.itemsize for s in _packed(x.shape)):
            x = be.arrays.packed(x)     # a device array: read where it lies, packed
        kept = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        plan = planning.plan_reduce(KernelOp.REDUCE_MEAN, dt, x.shape, _packed(x.shape),
                                    tuple(0 if d in axes else s for d, s in enumerate(_packed(kept))), axes)
        if not plan.red_shape:              # no reduced axis past size 1: each total is one value
            return self._single_values(x, dt, kept)
        if len(plan.red_shape) != 1:        # more than one block of reduced axes
            return None
        rows, inner = plan.red_shape[0], plan.red_strides[0]     # packed: the reduced run's stride
        n_o = plan.n_out // inner
        # GPU shape: rows as 8 lanes only where the lanes' 8 pairs read back are few beside the row's
        # values; shorter rows a work-item each (inner 1, below)
        lanes = inner == 1 and (be.cpu_shaped or rows >= DDP_GPU_LANES_MIN_ROWS)
        tail = None
        if lanes and not be.cpu_shaped:     # rows as (rows / 8, 8) lanes, the last lanes' row short
            shape = (n_o, -(-rows // 8), 8, rows)
        elif lanes:        # a reduction over the last axis: its rows as (rows / 8, 8) lanes, the rest here
            n_rows, tail = rows // 8, x.reshape(n_o, rows)[:, rows // 8 * 8:]
            if n_rows == 0:
                return None
            shape = (n_o, n_rows, 8, rows)
        elif inner % 8 == 0 or not be.cpu_shaped:       # the GPU shape: a work-item a column, any inner
            shape = (n_o, rows, inner, rows * inner)
        else:
            return None
        with self.executor.lock:
            res = self.executor.guard("exact double-double partials", be.dd_partials, dt, x, *shape)
        if res is None:
            return None
        h3, c3, f3 = res
        h, c, bad = wide.dd_add_exact_along(h3, c3, f3 != 0, 1)      # the segments
        if lanes:                               # the 8 lanes, then the last values of each row
            h, c, bad = wide.dd_add_exact_along(h, c, bad, 1)
            for ph, pc in ([(t, 0.0) for t in tail.astype(np.float64).T] if tail is not None else []):
                h, c, b = wide.dd_add_exact(h, c, ph, pc)
                bad |= b
        return h.reshape(kept), c.reshape(kept), bad.reshape(kept)

    def dd_fold(self, hs: list, cs: list, count: int):
        """gpu_mean.dask's exact double-double partials (k pairs of same-sized FLOAT64 host arrays)
        added output by output on this device, and with ``count`` > 0 their FLOAT32 means settled
        where ``exact.settle_near``'s test settles them (``KernelBackend.dd_fold``: gm_dd_fold of
        opencl_kernels/reduce_cpu_ddp.h): (h, c, flag, means), flat; None where this device has no
        such kernel (only CPU-shaped OpenCL devices with fp64 that work in host memory have one)."""
        self.executor.check_alive()
        be = self.backend
        if getattr(be, "dd_fold", None) is None or not self.info.fp64:
            return None
        with self.executor.lock:
            return self.executor.guard("adding double-double partials", be.dd_fold, hs, cs, count)

    def _single_values(self, x, dt: DataType, kept: tuple) -> tuple:
        """dd_partials where every output has one value: the values themselves as FLOAT64 (exact), a
        device array's copied to the host; an inf or NaN flagged (its digits carry the flags)."""
        import numpy as np
        if not isinstance(x, np.ndarray):
            be = self.backend
            native, off, nbytes = be.arrays.memory(x, x.nbytes)
            with self.executor.lock:
                be.arrays.before([x])
                raw = self.executor.guard("exact double-double partials", be.read, native, off, nbytes)
            x = np.frombuffer(raw, dt.numpy_dtype)
        h = np.asarray(x, dtype=np.float64).reshape(kept)
        with np.errstate(invalid="ignore"):
            return h, np.zeros_like(h), ~np.isfinite(h)

    def device_totals(self, dt: DataType, n_total: int):
        """Exact totals of ``n_total`` outputs of ``dt`` values kept on this device (issue 26: a split
        call's pieces combined on the device), or None where the device has no kernels for them (the
        CPU device). ``add(x, axes, dst)`` adds the exact totals of the host array ``x`` over ``axes``
        into the outputs ``dst`` (int64 indices, one per kept element of ``x`` in row-major order),
        ``mean(n, dtype)`` gives every output's correctly rounded mean of ``n`` (< 2^32) values, flat."""
        if getattr(self.backend, "exact_totals", None) is None:
            return None
        return _DeviceTotals(self, dt, n_total)

    @property
    def name(self) -> str:
        return f"{self.info.id} ({self.info.name})"

    def describe(self) -> str:
        """The name and which Device object this is (two objects may drive the same hardware)."""
        return f"Device object #{self.serial} {self.name}"

    def __repr__(self):
        return f"<Device #{self.serial} {self.name} FL {self.feature_level.label}>"

    def get_device_removed_reason(self) -> DmlError | None:
        """None while the device works; after removal, the error that removed it."""
        return self.executor.removed

    # -- features
    def check_feature_support(self, feature: Feature, query=None):
        self.executor.check_alive()
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
        return self.supports_type(DataType(query))

    def supports_type(self, dt: DataType) -> bool:
        """Whether tensors of ``dt`` can live on this device (TENSOR_DATA_TYPE_SUPPORT). Which
        operators compute it is ``type_refusal``'s question."""
        if dt in (DataType.UNKNOWN, DataType.UINT4, DataType.INT4):
            return False
        return self.backend.storage_refusal(dt) is None

    def type_refusal(self, op: KernelOp, dt: DataType) -> str | None:
        """Why this device cannot compute ``op`` (a descriptor's ``kernel_op``) over ``dt``: the
        hardware lacks the type, or the backend has no kernel for it yet; None when it can."""
        why = self.backend.storage_refusal(dt)
        if why is None:
            why = self.backend.kernel_refusal(op, dt)
        return why

    # -- objects
    def create_buffer(self, size: int) -> Buffer:
        self.executor.check_alive()
        if isinstance(size, bool) or not isinstance(size, int) and not hasattr(size, "__index__"):
            raise InvalidArgumentError(f"create_buffer: size must be an integer, got {type(size).__name__}")
        size = int(size)
        if size <= 0:
            raise InvalidArgumentError(f"create_buffer: size {size} must be > 0")
        limit = self.info.global_memory
        if limit and size > limit:
            # refused before the backend sees it: some allocators fail on such sizes with errors
            # that are not out-of-memory (numpy: "Maximum allowed dimension exceeded")
            raise OutOfMemoryError(f"create_buffer: {size} bytes exceed the {limit} bytes of memory of {self.name}")
        return self.executor.allocate(size)

    def create_operator(self, desc: OperatorDesc) -> Operator:
        self.executor.check_alive()
        if not isinstance(desc, OperatorDesc):
            raise InvalidArgumentError(f"CreateOperator: expected an operator descriptor, got {type(desc).__name__}")
        desc.validate(self.feature_level)
        for n, t in zip(desc.input_names() + desc.output_names(), desc.input_tensors() + desc.output_tensors()):
            why = self.backend.storage_refusal(t.data_type)
            if why:
                raise UnsupportedTypeError(f"{desc.name}: {n} has data type {t.data_type.name}, which {self.name} "
                                           f"does not support: {why}")
        # the kernel is chosen by the operands' type (a wide sum's output type follows from it)
        name, t = desc.input_names()[0], desc.input_tensors()[0]
        why = self.backend.kernel_refusal(desc.kernel_op, t.data_type)
        if why:
            raise UnsupportedTypeError(f"{desc.name}: {name} has data type {t.data_type.name}, which {self.name} "
                                       f"does not support: {why}")
        return Operator(self, desc)

    def compile_operator(self, op: Operator, flags: ExecutionFlags = ExecutionFlags.NONE) -> CompiledOperator:
        """Plan once (gpu_mean/runtime/planning.py), then build the backend's program for the plan."""
        self.executor.check_alive()
        if not isinstance(op, Operator) or op.device is not self:
            raise InvalidArgumentError("CompileOperator: the operator must be created on this device")
        try:
            flags = ExecutionFlags(int(flags))
        except ValueError as e:
            raise InvalidArgumentError(f"CompileOperator: unknown execution flags {flags!r}") from e
        if int(flags) & ~0x7:
            raise InvalidArgumentError(f"CompileOperator: unknown execution flags 0x{int(flags):x}")
        plan = planning.plan_operator(op.desc)
        program = self.executor.guard(f"compiling {op.desc.name}", self.backend.compile, plan, flags)
        return CompiledOperator(self, op, flags, plan, program)

    def compile_ahead(self, descs, workers: int | None = None) -> int:
        """Build the programs of operator descriptors ahead, side by side where the backend can
        (CUDA: NVRTC in ``workers`` threads, default one per CPU), so that compiling their operators
        later finds them built: a conformance pass or a profile pays the slowest compile, not their
        sum. A descriptor the device refuses is skipped (its own create_operator says why). Returns
        how many programs were built ahead: 0 where the backend builds one at a time (the CPU device,
        OpenCL)."""
        self.executor.check_alive()
        pre = getattr(self.backend, "prebuild", None)
        if pre is None:
            return 0
        plans = []
        for d in descs:
            try:
                plans.append(planning.plan_operator(self.create_operator(d).desc))
            except (InvalidArgumentError, UnsupportedError):
                continue
        return self.executor.guard("compiling ahead", pre, plans, workers)

    def create_operator_initializer(self, ops=()) -> OperatorInitializer:
        self.executor.check_alive()
        return OperatorInitializer(self, ops)

    def create_binding_table(self, dispatchable) -> BindingTable:
        self.executor.check_alive()
        return BindingTable(self, dispatchable)

    def create_command_recorder(self) -> CommandRecorder:
        self.executor.check_alive()
        return CommandRecorder(self)

    def create_command_list(self) -> CommandList:
        self.executor.check_alive()
        return CommandList(self)

    # -- execution
    def execute_command_lists(self, lists) -> None:
        self.executor.execute_lists(lists)

    def synchronize(self) -> None:
        self.executor.synchronize()

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


# dd_partials on the GPU shape: rows of at least this many values as 8 lanes (each output's 8 pairs, 136
# bytes a segment, read back beside 1 KB of values at least); shorter ones a work-item a row
DDP_GPU_LANES_MIN_ROWS = 256


def _packed(shape: tuple) -> tuple:
    """Row-major element strides of ``shape``."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


class _DeviceTotals:
    """``Device.device_totals``: the backend's running totals (programs.LimbsTotals), each step under
    the device's lock."""

    def __init__(self, device: Device, dt: DataType, n_total: int):
        device.executor.check_alive()
        self.device, self.dt = device, dt
        with device.executor.lock:
            self.totals = device.executor.guard("exact partial sums", device.backend.exact_totals, dt, n_total)

    def add(self, x, axes: tuple, dst) -> None:
        import numpy as np
        dev = self.device
        dev.executor.check_alive()
        axes = tuple(sorted(int(a) for a in axes))
        shape = tuple(int(s) for s in x.shape)
        kept = tuple(1 if d in axes else s for d, s in enumerate(shape))
        out_strides = tuple(0 if d in axes else s for d, s in enumerate(_packed(kept)))
        plan = planning.plan_reduce(KernelOp.REDUCE_MEAN, self.dt, shape, _packed(shape), out_strides, axes)
        with dev.executor.lock:
            dev.executor.guard("exact partial sums", self.totals.add, plan, np.asarray(x),
                               np.ascontiguousarray(dst, np.int64).reshape(-1))

    def mean(self, n: int, dtype):
        dev = self.device
        dev.executor.check_alive()
        with dev.executor.lock:
            return dev.executor.guard("exact means", self.totals.mean, n, dtype)
