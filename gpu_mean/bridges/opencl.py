"""The OpenCL backend's arrays: pyopencl arrays of its context, and numpy arrays in place where the
device works in host memory (an OpenCL CPU device such as PoCL, or a GPU with unified host memory).

Queue rule: the backend's queue is in order, so arrays made on it need nothing; for arrays of
another queue of the context it waits (on the device, not the host) for their pending pyopencl
events and everything queued before on their queues, and a result made on another queue makes that
queue wait for our kernels before its next command.

Host memory: a numpy array is bound through a ``CL_MEM_USE_HOST_PTR`` buffer over its own bytes
when its address is a multiple of ``host_ptr_alignment``, the smallest alignment at which a probe
at backend creation saw a kernel's write land in the host array itself (PoCL: any address; an
implementation that copies unaligned host pointers gets a larger alignment, or none, and copies
through pooled buffers). Results are written into the numpy array handed back and made visible
with a blocking map (the OpenCL rule for USE_HOST_PTR memory), which is also the wait for the work.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..runtime.interop import offset_alignment, type_name
from .arrays import ArrayBridge, aligned_empty

_PROBE = "__kernel void gm_probe_host(__global uchar* a) { a[get_global_id(0)] = 7; }"
PROBE_ALIGNMENTS = (2, 16, 128, 4096)


class ClArrays(ArrayBridge):
    kind = "opencl"

    def __init__(self, backend):
        super().__init__(backend)
        self.cl = backend.cl
        import pyopencl.array as cla
        self.cla = cla
        self.host_memory = bool(backend.cl_device.host_unified_memory)
        self.host_ptr_alignment = probe_host_ptr_alignment(backend) if self.host_memory else None
        self.host_memory = self.host_ptr_alignment is not None

    def owns(self, x) -> bool:
        return isinstance(x, self.cla.Array) and x.context == self.backend.ctx

    def view(self, x, what: str, where=None):
        if not isinstance(x, self.cla.Array):
            raise InvalidArgumentError(f"{what}: {self.name} wraps pyopencl arrays, got {type_name(x)}")
        if x.context != self.backend.ctx:
            raise InvalidArgumentError(f"{what}: the pyopencl array belongs to another OpenCL context than "
                                       f"{self.name}'s; make it with dev.cl_queue "
                                       "(pyopencl.array.to_device(dev.cl_queue, a))")
        return x

    def memory(self, arr, nbytes: int):
        return arr.base_data, int(arr.offset), arr.base_data.size

    def alignment(self, arr) -> int:
        return offset_alignment(int(arr.offset), arr.dtype.itemsize)

    def _queue(self, like):
        q = getattr(like, "queue", None)
        return q or self.backend.queue

    def empty(self, like, shape, dtype):
        return self.cla.empty(self._queue(like), shape, dtype)

    def from_host(self, like, a: np.ndarray):
        return self.cla.to_device(self._queue(like), a)

    def packed(self, arr):
        # pyopencl copies strided device arrays only through the host
        q = self.backend.queue
        return self.cla.to_device(q, np.ascontiguousarray(arr.get(queue=q)))

    def before(self, arrays) -> None:
        q = self.backend.queue
        others = {id(a.queue): a.queue for a in arrays if a.queue is not None and a.queue != q}
        if not others:
            return
        cl = self.cl
        events = [e for a in arrays for e in a.events]
        for other in others.values():
            events.append(cl.enqueue_marker(other))
            other.flush()
        cl.enqueue_barrier(q, wait_for=events)

    def after(self, result) -> None:
        q = self.backend.queue
        if result.queue is None or result.queue == q:
            return
        cl = self.cl
        done = cl.enqueue_marker(q)
        result.add_event(done)
        cl.enqueue_barrier(result.queue, wait_for=[done])
        q.flush()

    def export(self, buffer, desc, offset: int, byte_strides):
        return self.cla.Array(self.backend.queue, desc.sizes, desc.numpy_dtype, data=buffer.native,
                              offset=int(offset), strides=byte_strides)

    def host_in_place(self, span: np.ndarray, writable: bool):
        if not self.host_memory or span.ctypes.data % self.host_ptr_alignment:
            return None
        if span.nbytes > self.backend.max_alloc:
            return None     # past CL_DEVICE_MAX_MEM_ALLOC_SIZE, which binds host-pointer buffers too
        mf = self.cl.mem_flags
        access = mf.READ_WRITE if writable else mf.READ_ONLY
        try:
            return self.cl.Buffer(self.backend.ctx, access | mf.USE_HOST_PTR, hostbuf=span)
        except self.cl.Error:
            return None     # the driver would not wrap it (out of resources): the caller copies instead

    def host_output(self, nbytes: int):
        """(host array of ``nbytes`` at the alignment the device uses in place, its buffer) for a
        result the kernel writes straight into."""
        span = aligned_empty(nbytes, self.host_ptr_alignment)
        return span, self.host_in_place(span, True)


def probe_host_ptr_alignment(backend) -> int | None:
    """The smallest alignment (of PROBE_ALIGNMENTS) at which a USE_HOST_PTR buffer is the host
    array itself: a kernel's write shows in the array without a map. None: never (copy instead)."""
    cl = backend.cl
    try:
        kernel = cl.Program(backend.ctx, _PROBE).build().gm_probe_host
        mf = cl.mem_flags
        for a in PROBE_ALIGNMENTS:
            raw = np.zeros(2 * 4096 + 64, np.uint8)
            start = (-raw.ctypes.data) % 4096 + a     # aligned to ``a`` and to no larger power of two
            host = raw[start:start + 64]
            buf = cl.Buffer(backend.ctx, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host)
            kernel(backend.queue, (64,), None, buf)
            backend.queue.finish()
            if (host == 7).all():
                return a
    except cl.Error:
        return None
    return None
