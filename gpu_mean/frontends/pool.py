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
memory) binds the caller's memory, whose address changes from call to call: its
operator is compiled with DESCRIPTORS_VOLATILE, so the list recorded once reads the binding table
at execution and each call only rebinds the table (no recording, no host synchronize).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..descriptors.types import ExecutionFlags
from ..runtime.objects import BufferBinding

MAX_LAUNCHES = 64          # call signatures kept per device; the least recently used goes first
MAX_POOLED_PER_SIZE = 4    # free buffers kept per size class


class BufferPool:
    """Free device buffers of one device by size class (powers of two from 256 bytes)."""

    def __init__(self, dev):
        self.dev = dev
        self.free: dict = {}
        self.allocations = 0     # create_buffer calls made for the pool (tests count them)
        self.lock = threading.Lock()   # take and give come from any thread

    @staticmethod
    def size_class(nbytes: int) -> int:
        return max(256, 1 << (int(nbytes) - 1).bit_length())

    def take(self, nbytes: int):
        size = self.size_class(nbytes)
        with self.lock:
            free = self.free.get(size)
            if free:
                return free.pop()
            self.allocations += 1
        return self.dev.create_buffer(size)

    def give(self, buf) -> None:
        with self.lock:
            free = self.free.setdefault(buf.size, [])
            if len(free) < MAX_POOLED_PER_SIZE:
                free.append(buf)


class Released(Exception):
    """A launch evicted from the cache while a caller still held it."""


class Launch:
    """One compiled operator on one device, initialized, with its command list recorded."""

    def __init__(self, dev, desc, host: bool, pool: BufferPool):
        self.dev, self.desc, self.host, self.pool = dev, desc, host, pool
        self.released = False
        self.lock = threading.Lock()
        flags = ExecutionFlags.NONE if host else ExecutionFlags.DESCRIPTORS_VOLATILE
        cop = self.cop = dev.compile_operator(dev.create_operator(desc), flags)
        self.in_tensors = desc.input_tensors()
        self.out_tensor = desc.output_tensors()[0]
        self.out_count = self.out_tensor.element_count
        props = cop.binding_properties
        self.owned = []
        temp = self._take(props.temporary_resource_size) if props.temporary_resource_size else None
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
        self.cl = dev.create_command_list()
        if host:
            dev.create_command_recorder().record_dispatch(self.cl, cop, table)
            self.cl.close()

    def _take(self, nbytes: int):
        b = self.pool.take(max(int(nbytes), 4))
        self.owned.append(b)
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
            for buf, span in zip(self.inputs, spans):
                if span.size:
                    buf.write(span)
            self.dev.execute_command_lists([self.cl])
            return self.output.read(self.out_tensor.numpy_dtype, self.out_count)

    def run_device(self, inputs, output) -> None:
        """Bind the callers' memory (BufferBindings) and enqueue; nothing waits on the host."""
        with self.lock:
            if self.released:
                raise Released
            self._execute_bound(inputs, output)

    def _execute_bound(self, inputs, output) -> None:
        self.table.bind_inputs(inputs)
        self.table.bind_outputs([output])
        if not self.cl.dispatches:
            self.dev.create_command_recorder().record_dispatch(self.cl, self.cop, self.table)
            self.cl.close()
        try:
            self.dev.execute_command_lists([self.cl])
        finally:
            # the list read the table when it ran: let go of the caller's memory until the next call
            self.table.bind_inputs([])
            self.table.bind_outputs([])

    def release(self) -> None:
        """Hand the buffers back to the pool (the caller holds ``lock``); a thread that took this
        launch from the cache before it was evicted gets Released and looks it up again."""
        self.released = True
        for b in self.owned:
            self.pool.give(b)
        self.owned = []


class DeviceCache:
    def __init__(self, dev):
        self.pool = BufferPool(dev)
        self.launches: OrderedDict = OrderedDict()
        self.lock = threading.Lock()


_caches_lock = threading.Lock()


def device_cache(dev) -> DeviceCache:
    # kept on the device itself: the cache refers back to its device, so a weak-keyed table would
    # never let either go, while a plain reference cycle is collected with the device
    c = dev.__dict__.get("_functional_cache")
    if c is None:
        with _caches_lock:
            c = dev.__dict__.setdefault("_functional_cache", DeviceCache(dev))
    return c


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
