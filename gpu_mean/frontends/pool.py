"""What ``gm.mean`` / ``gm.reduce_mean`` keep between calls: per device, a pool of buffers and a
cache of launches, one per call signature (operator descriptor, which fixes shapes, strides, data
types and axes; and whether the operands are host arrays or device arrays).

Launches are keyed by the call's signature, not by descriptor: building and validating a
descriptor costs more than the whole launch of a tiny tensor, so a cached call builds none.

A host-array launch owns pooled input, output and temporary buffers and a command list recorded
once over them: each call writes the inputs, executes the list (the runtime resolves its launches
on the second execution and, on CUDA, replays them as a graph) and reads the output. A loop over
same-shaped host arrays allocates no device memory after its first call.

A device-array launch (also used for host arrays bound in place on a device that works in host
memory) binds the caller's memory, whose address changes from call to call: its first call checks
the bindings through the binding table, and every call hands the addresses to the program, which puts
them into the argument tuples it built once (``Launch.run_device`` / ``run_pairs``; no recording, no
host synchronize).

The pool (``BufferPool``) rounds a request up to a page (4 KiB), or, below 32 KiB, to a power of two
of at most an eighth of it (16 bytes at least), and reuses a free buffer for a request it exceeds by
at most an eighth: never a doubled request. What it holds -- the buffers of cached launches and the
free ones -- is bounded by ``limit`` (default: an eighth of the device's memory, at most 1 GiB;
``gm.memory_pool(device).set_limit``, as CuPy's ``MemoryPool.set_limit``): past it, free buffers are
given back first, then the least recently used launches with theirs. ``gm.free_memory`` and
``Device.close`` give everything back. An allocation that fails for lack of memory first gives back
the free buffers and idle launches and tries once more; if it fails again, the error says what was
asked, what the device reports and what the pool holds.
"""
from __future__ import annotations

import bisect
import functools
import threading
import weakref
from collections import OrderedDict

import numpy as np

from ..descriptors.types import ExecutionFlags
from ..errors import OutOfMemoryError
from ..runtime import bindings
from ..runtime.objects import BufferBinding

MAX_LAUNCHES = 64          # call signatures kept per device; the least recently used goes first
PAGE = 4096
MIN_GRANULE = 16
REUSE_SLACK = 8            # a free buffer serves a request it exceeds by at most 1/REUSE_SLACK
DEFAULT_LIMIT_CAP = 1 << 30


def request_size(nbytes: int) -> int:
    """A request rounded up to the pool's granularity: a page from 32 KiB on, else the largest power
    of two no more than an eighth of it (at least 16 bytes). Never more than an eighth added."""
    n = max(int(nbytes), 1)
    g = PAGE if n >= 8 * PAGE else max(MIN_GRANULE, 1 << max(0, (n // 8).bit_length() - 1))
    return -(-n // g) * g


def default_limit(dev) -> int:
    mem = int(dev.info.global_memory or 0)
    return min(DEFAULT_LIMIT_CAP, mem // 8) if mem else DEFAULT_LIMIT_CAP


class BufferPool:
    """Device buffers of one device for the functional calls: those in use by cached launches and
    free ones by size. Its methods follow CuPy's MemoryPool: ``used_bytes``, ``free_bytes``,
    ``total_bytes``, ``get_limit``, ``set_limit``, ``free_all_blocks``."""

    def __init__(self, dev, cache: DeviceCache | None = None):
        self.dev = dev
        self.cache = cache
        self.free: dict = {}       # size -> free buffers of that size
        self.sizes: list = []      # the sizes in ``free``, sorted
        self.held = 0              # bytes of every buffer made and not yet given back to the device
        self.free_total = 0
        self.allocations = 0       # create_buffer calls made for the pool (tests count them)
        self.limit = default_limit(dev)
        self.lock = threading.Lock()   # take and give come from any thread

    # -- CuPy's MemoryPool names
    def used_bytes(self) -> int:
        """Bytes in buffers that cached launches hold."""
        return self.held - self.free_total

    def free_bytes(self) -> int:
        """Bytes in free buffers, kept for reuse."""
        return self.free_total

    def total_bytes(self) -> int:
        return self.held

    def get_limit(self) -> int:
        return self.limit

    def set_limit(self, size: int) -> None:
        """Hold at most ``size`` bytes (launches' buffers and free ones); what is held past it now is
        given back at once (a call that needs more still runs, and gives back the excess after)."""
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            from ..errors import InvalidArgumentError
            raise InvalidArgumentError(f"set_limit: size must be an integer >= 0, got {size!r}")
        self.limit = int(size)
        if self.cache is not None:
            self.cache.trim()

    def free_all_blocks(self) -> int:
        """Give every free buffer back to the device; returns the bytes given back."""
        return self.drop_free(0)

    # -- the pool's own verbs
    def take(self, nbytes: int):
        size = request_size(nbytes)
        with self.lock:
            i = bisect.bisect_left(self.sizes, size)
            if i < len(self.sizes) and self.sizes[i] <= size + size // REUSE_SLACK:
                have = self.sizes[i]
                free = self.free[have]
                buf = free.pop()
                if not free:
                    del self.free[have]
                    del self.sizes[i]
                self.free_total -= have
                return buf
            self.allocations += 1
        return self._allocate(size)

    def _allocate(self, size: int):
        try:
            buf = self.dev.create_buffer(size)
        except OutOfMemoryError:
            released = self.cache.release_idle() if self.cache is not None else self.drop_free(0)
            try:
                buf = self.dev.create_buffer(size)
            except OutOfMemoryError as e:
                raise OutOfMemoryError(
                    f"{e.args[0]}; the functional calls' pool holds {self.held} bytes ({self.free_total} free) "
                    f"after giving back {released} bytes and trying again; gm.free_memory() gives back what "
                    "the pool holds") from e
        with self.lock:
            self.held += buf.size
        return buf

    def give(self, buf) -> None:
        with self.lock:
            free = self.free.get(buf.size)
            if free is None:
                free = self.free[buf.size] = []
                bisect.insort(self.sizes, buf.size)
            free.append(buf)
            self.free_total += buf.size

    def drop_free(self, keep_held: int) -> int:
        """Give free buffers back to the device, largest first, until at most ``keep_held`` bytes are
        held (or none is free); returns the bytes given back."""
        dropped = []
        with self.lock:
            while self.sizes and self.held > keep_held:
                size = self.sizes[-1]
                free = self.free[size]
                dropped.append(free.pop())
                if not free:
                    del self.free[size]
                    self.sizes.pop()
                self.free_total -= size
                self.held -= size
        n = sum(b.size for b in dropped)
        del dropped      # the last references: the native memory goes back now
        return n


class Released(Exception):
    """A launch evicted from the cache while a caller still held it."""


class Launch:
    """One compiled operator on one device, initialized, with its command list recorded."""

    def __init__(self, dev, desc, host: bool, pool: BufferPool):
        self.dev, self.desc, self.host, self.pool = dev, desc, host, pool
        self.released = False
        self.lock = threading.Lock()
        self.owned = []
        self.owned_bytes = 0
        try:
            self._build()
        except BaseException:
            self.release()     # whatever was taken goes back to the pool
            raise

    def _build(self) -> None:
        dev, desc, host = self.dev, self.desc, self.host
        flags = ExecutionFlags.NONE if host else ExecutionFlags.DESCRIPTORS_VOLATILE
        cop = self.cop = dev.compile_operator(dev.create_operator(desc), flags)
        self.in_tensors = desc.input_tensors()
        self.out_tensor = desc.output_tensors()[0]
        self.out_count = self.out_tensor.element_count
        props = cop.binding_properties
        temp = self._take(props.temporary_resource_size) if props.temporary_resource_size else None
        self.temp_arg = (temp.native, 0) if temp is not None else None     # run_device's temporary
        self.checked = False        # run_device: the first call's bindings went through the table's checks
        pers = self._take(props.persistent_resource_size) if props.persistent_resource_size else None
        self._initialize(pers)
        table = self.table = dev.create_binding_table(cop)
        if temp is not None:
            table.bind_temporary_resource(BufferBinding(temp))
        if pers is not None:
            table.bind_persistent_resource(BufferBinding(pers))
        self.inputs = self.output = None
        if host:
            self.inputs = [self._take(t.total_size_in_bytes) for t in desc.input_tensors()]
            out_t = desc.output_tensors()[0]
            self.output = self._take(out_t.total_size_in_bytes)
            table.bind_inputs([BufferBinding(b, 0, t.total_size_in_bytes)
                               for b, t in zip(self.inputs, desc.input_tensors())])
            table.bind_outputs([BufferBinding(self.output, 0, out_t.total_size_in_bytes)])
        self.cl = None
        if host:
            self.cl = dev.create_command_list()
            dev.create_command_recorder().record_dispatch(self.cl, cop, table)
            self.cl.close()

    def _take(self, nbytes: int):
        b = self.pool.take(max(int(nbytes), 4))
        self.owned.append(b)
        self.owned_bytes += b.size
        return b

    def _initialize(self, pers) -> None:
        dev = self.dev
        init = dev.create_operator_initializer([self.cop])
        t = dev.create_binding_table(init)
        if pers is not None:
            t.bind_outputs([BufferBinding(pers)])
        cl = dev.create_command_list()
        dev.create_command_recorder().record_dispatch(cl, init, t)
        dev.execute_command_lists([cl])

    def run_host(self, spans) -> np.ndarray:
        """Host arrays through the launch's own buffers: uploads each input's bytes (``spans``), runs,
        and returns the output's bytes (a fresh host array)."""
        with self.lock:
            if self.released:
                raise Released
            # the spans are the caller's arrays, unchanged until the read returns
            writes = [(buf.native, span) for buf, span in zip(self.inputs, spans) if span.size]
            dtype = self.out_tensor.numpy_dtype
            raw = self.dev.executor.round_trip(writes, self.cl, self.output.native, self.out_count * dtype.itemsize)
            return raw.view(dtype)

    def run_direct(self, arrays) -> np.ndarray:
        """The CPU device: the result computed from the caller's arrays where they lie, a new array of
        the result's shape; nothing is bound, copied or recorded."""
        if self.released:
            raise Released
        return self.dev.executor.compute(self.cop.program, arrays).reshape(self.out_shape)

    def run_device(self, inputs, output) -> None:
        """Bind the callers' memory (BufferBindings) and enqueue; nothing waits on the host. The first
        call binds through the binding table, which checks every binding against the operator; a
        repeated call has the same signature (shapes, strides, data types, alignments), so only the
        addresses differ: it hands the (buffer, offset) pairs to the program, which puts them into
        the argument tuples it built once (Executor.run_bound), and validates and records nothing."""
        with self.lock:
            if self.released:
                raise Released
            if not self.checked:
                self._check_bindings(inputs, output)
            self.dev.executor.run_bound(self.cop, [(b.buffer.native, b.offset) for b in inputs],
                                        [(output.buffer.native, output.offset)], self.temp_arg)

    def run_pairs(self, inputs, output) -> None:
        """``run_device`` after the first call, the memory given as (native handle, byte offset)."""
        with self.lock:
            if self.released:
                raise Released
            self.dev.executor.run_bound(self.cop, inputs, [output], self.temp_arg)

    @functools.cached_property
    def result_layout(self) -> tuple:
        """(shape, numpy dtype, elements) of the array a device-array call allocates for the result:
        the result's shape, or flat where TotalTensorSizeInBytes (a multiple of 4) asks for more."""
        t = self.out_tensor
        dtype = t.numpy_dtype
        n = -(-t.total_size_in_bytes // dtype.itemsize)
        return (self.out_shape if n == self.out_count else (n,)), dtype, n

    def _check_bindings(self, inputs, output) -> None:
        """The first call's bindings through the binding table and its checks (sizes, devices,
        alignment, completeness), as an execution of a recorded list would check them."""
        table = self.table
        table.bind_inputs(inputs)
        table.bind_outputs([output])
        try:
            bindings.check_complete(self.cop, table.snapshot())
        finally:
            table.bind_inputs([])
            table.bind_outputs([])
        self.checked = True

    def release(self) -> None:
        """Hand the buffers back to the pool (the caller holds ``lock``); a thread that took this
        launch from the cache before it was evicted gets Released and looks it up again."""
        self.released = True
        for b in self.owned:
            self.pool.give(b)
        self.owned = []
        self.owned_bytes = 0
        # the recorded list and table refer to the buffers: drop them so that they can be freed
        self.cl = self.table = self.inputs = self.output = None


class DeviceCache:
    """One device's launches (by call signature, least recently used first) and buffer pool."""

    def __init__(self, dev):
        self.pool = BufferPool(dev, self)
        self.launches: OrderedDict = OrderedDict()
        self.plans: OrderedDict = OrderedDict()     # frontends/repeat.py: call signature -> Plan
        self.lock = threading.Lock()

    def trim(self) -> None:
        """Bring what the pool holds within its limit: free buffers first, then the least recently
        used launches that hold buffers and are not running."""
        pool = self.pool
        if pool.held <= pool.limit:
            return
        pool.drop_free(pool.limit)
        if pool.held <= pool.limit:
            return
        with self.lock:
            for key in list(self.launches):
                if pool.held <= pool.limit:
                    break
                ln = self.launches[key]
                if ln.owned_bytes and ln.lock.acquire(blocking=False):
                    try:
                        ln.release()
                    finally:
                        ln.lock.release()
                    del self.launches[key]
                    pool.drop_free(pool.limit)

    def release_idle(self) -> int:
        """Under memory pressure: every launch not running now and every free buffer go back to the
        device; returns the bytes given back."""
        before = self.pool.held
        with self.lock:
            for key in list(self.launches):
                ln = self.launches[key]
                if ln.lock.acquire(blocking=False):
                    try:
                        ln.release()
                    finally:
                        ln.lock.release()
                    del self.launches[key]
        self.pool.drop_free(0)
        return before - self.pool.held

    def release_all(self) -> int:
        """Every launch (waiting for one that is running) and every buffer back to the device."""
        before = self.pool.held
        with self.lock:
            launches = list(self.launches.values())
            self.launches.clear()
            self.plans.clear()
        for ln in launches:
            with ln.lock:
                ln.release()
        self.pool.drop_free(0)
        return before - self.pool.held


_caches_lock = threading.Lock()
_caches: weakref.WeakSet = weakref.WeakSet()     # every DeviceCache alive, for free_memory()


def device_cache(dev) -> DeviceCache:
    # kept on the device itself: the cache refers back to its device, so a weak-keyed table would
    # never let either go, while a plain reference cycle is collected with the device
    c = dev.__dict__.get("_functional_cache")
    if c is None:
        with _caches_lock:
            c = dev.__dict__.get("_functional_cache")
            if c is None:
                c = dev.__dict__["_functional_cache"] = DeviceCache(dev)
                _caches.add(c)
                dev.on_close(c.release_all)
    return c


def existing_cache(dev) -> DeviceCache | None:
    """The device's cache if the functional calls made one (never makes one)."""
    return dev.__dict__.get("_functional_cache")


def caches_of(match) -> list:
    """The caches of the devices whose DeviceInfo ``match`` accepts."""
    return [c for c in list(_caches) if match(c.pool.dev.info)]


def release(caches=None) -> int:
    """Give back what the caches hold (default: every device's), and what the native layer keeps
    after that (CuPy's pool); returns the bytes the caches gave back."""
    caches = list(_caches) if caches is None else [c for c in caches if c is not None]
    n = 0
    for c in caches:
        n += c.release_all()
        dev = c.pool.dev
        if dev.get_device_removed_reason() is None:
            dev.executor.guard("releasing cached memory", dev.backend.release_cached)
    return n


def launch_for(dev, signature, host: bool, make) -> Launch:
    """The cached launch for a call signature on ``dev``, made on first use from ``make()``, which
    validates the call and returns (operator descriptor, result shape). The signature holds what
    the descriptor is built from (operand kinds, data types, shapes, strides, alignments, and the
    operator's parameters), so a repeated call builds and validates nothing."""
    cache = device_cache(dev)
    key = (signature, host)
    with cache.lock:
        ln = cache.launches.get(key)
        if ln is not None:
            cache.launches.move_to_end(key)
            return ln
    desc, out_shape = make()
    ln = Launch(dev, desc, host, cache.pool)
    ln.out_shape = out_shape
    ln.cache = cache
    with cache.lock:
        other = cache.launches.get(key)
        if other is not None:           # another thread made the same launch meanwhile: keep one
            cache.launches.move_to_end(key)
            with ln.lock:
                ln.release()
            return other
        cache.launches[key] = ln
        while len(cache.launches) > MAX_LAUNCHES:
            _, old = cache.launches.popitem(last=False)
            with old.lock:
                old.release()
    return ln
