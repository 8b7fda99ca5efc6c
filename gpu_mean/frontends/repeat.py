"""The repeated functional call: what ``gm.mean`` / ``gm.reduce_mean`` do when a call has the
signature of an earlier one.

A call's signature is the operator and its parameters (axes, keepdims, the ONNX opset's rules), the
device, and per input the array's type, data type, shape, strides and alignment. Everything the
first call with a signature works out -- axes and shapes normalized, the operator descriptor built
and validated, the operator compiled and initialized, the launch's bindings checked, its argument
tuples built -- holds for every later call with that signature. So the first call keeps a ``Plan``
(in the device's DeviceCache, beside its launch), and a repeated call does only:

1. compute the signature from the arrays (``lookup``: attribute reads; a device array is resolved
   once, by one bridge call, as the first call resolved it: CuPy arrays as they are, DLPack
   producers through CuPy);
2. re-describe the operands over the new arrays (``Call.again``: no type classification);
3. on the CPU device, compute the result from the new arrays' bytes where they lie (no Call, no
   copy, no launch: ``Launch.run_direct``); elsewhere,
   allocate the result in the caller's library, order the streams, and launch: the launch hands
   the new addresses to the program, which substitutes them into its argument tuples
   (``Launch.run_device``, ``Executor.run_bound``), or, for host arrays copied through the launch's
   own buffers, writes them and replays the recorded command list;
4. hand the result back as the caller's type.

A call on arrays of the device's own array type (``ArrayBridge.native_type``: ``cupy.ndarray`` on
CUDA) skips even the lookup: its signature is read straight from the arrays' attributes
(``ArrayBridge.native_signature``: data type, shape, strides, the GPU it lives on), with the
``device`` argument, and finds its plan in one table (``_fast``); ``Plan.run_native`` then allocates
the result, orders the streams and launches, nothing else.

Anything else -- the first call, a call split into pieces, an empty result, an array no plan takes
(a Python list, a CPU DLPack producer, a numpy subclass) -- runs the full path in
``functional.py``. A plan whose launch was given back (the pool's limit, ``gm.free_memory``) or
whose device was removed is dropped there and then, and the call takes the full path, which makes
a new one. Errors are the full path's: a signature that fails never gets a plan.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..bridges.arrays import classify, hand_back
from ..runtime.device import Device
from ..runtime.interop import host_span
from . import arrays as _arrays
from . import pool
from .arrays import Call, _device_for, get_device

MAX_PLANS = 4 * pool.MAX_LAUNCHES      # per device; the least recently used goes first
MISS = object()                        # lookup / Plan.run: take the full path

# the plans of numpy and native arrays, across devices: (operator key, device argument, signatures)
# -> Plan. Weak: a plan lives as long as its device's cache keeps it (MAX_PLANS, gm.free_memory), and
# a Device argument is keyed by its id, so that this table keeps no device alive.
_NATIVE: dict = {}                     # an exact array type -> its signature (ArrayBridge.native_signature)
_fast: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class Plan:
    """One call signature's call (``Call``, its operands to be replaced) and its cached launch."""

    __slots__ = ("call", "launch", "direct", "spans", "native", "fast", "__weakref__")

    def __init__(self, call: Call, inputs=()):
        # the first call's arrays are not kept: the plan must not hold the caller's memory
        template = call.again([None] * len(call.ops), bind=False)
        template.__dict__.pop("natives", None)
        self.call, self.launch = template, call.launch
        # the CPU device: the arrays go as they are (the signature fixed their layout); no Call
        self.direct = call.mode == "direct"
        self.spans = [o.span_bytes or 1 for o in call.ops]
        # run_native takes it: device arrays bound as they are (none packed), the bindings checked
        self.native = (call.mode == "device" and call.launch.checked and len(inputs) == len(call.ops)
                       and getattr(call.bridge, "native_type", None) is not None
                       and all(o.array is x for o, x in zip(call.ops, inputs)))
        # found by ``_fast``: numpy arrays (the call's key fixes their layout) or native ones
        self.fast = self.native or call.kind == "host"

    def again(self, arrays, device):
        """The call on arrays ``_fast`` found this plan for: MISS where ``device`` would now name
        another Device than the plan's (the full path's ``get_device``), the launch was given back or
        the device removed."""
        ln = self.launch
        dev = ln.dev
        if (ln.released or dev.executor.removed is not None
                or _named(device, dev, arrays[0] if self.native else None) is not dev):
            return MISS
        if self.native:
            return self.run_native(arrays)
        if self.direct:     # the CPU device: Launch.run_direct, without its layers
            return dev.executor.compute(ln.cop.program, arrays).reshape(ln.out_shape)
        mode = self.call.mode
        try:
            if mode == "host":
                return ln.run_host([host_span(x, n) for x, n in zip(arrays, self.spans)]).reshape(ln.out_shape)
            if mode == "host in place" and ln.checked:
                return self._in_place(arrays)
        except pool.Released:
            return MISS
        return self.run(arrays)

    def _in_place(self, arrays):
        """numpy arrays bound where they lie on a device that works in host memory, the result written
        into a new numpy array: each array's handle made (``ArrayBridge.host_in_place``) and handed
        to the launch as it is, with no Buffer or binding around it (the first call checked them)."""
        ln, bridge = self.launch, self.call.bridge
        ins = []
        for x, n in zip(arrays, self.spans):
            h = bridge.host_in_place(host_span(x, n), False)
            if h is None:
                return MISS         # an address the device cannot take in place: the full path copies
            ins.append((h, 0))
        t = ln.out_tensor
        nbytes = t.total_size_in_bytes
        span, native = bridge.host_output(nbytes)
        ln.run_pairs(ins, (native, 0))
        ln.dev.executor.host_sync(native, nbytes)
        return span[:ln.out_count * t.numpy_dtype.itemsize].view(t.numpy_dtype).reshape(ln.out_shape)

    def run_native(self, arrays):
        """A repeated call on the device's native arrays (``again``): the result allocated, the
        streams ordered and the kernels launched over the arrays' memory; MISS where the launch was
        given back meanwhile."""
        ln = self.launch
        c = self.call
        bridge = c.bridge
        mem = bridge.memory
        ins = [mem(x, n)[:2] for x, n in zip(arrays, self.spans)]
        arr, res = c._new_result(ln, arrays[0])
        try:
            bridge.ordered(arrays, res, ln.run_pairs, ins, mem(arr, arr.nbytes or 1)[:2])
        except pool.Released:
            return MISS
        if ln.pool.held > ln.pool.limit:
            ln.cache.trim()
        return hand_back(res, c.rule, c.ops[0].dtype)

    def run(self, arrays):
        ln = self.launch
        if ln.released:
            return MISS
        if self.direct:
            try:
                return ln.run_direct(arrays)
            except pool.Released:
                return MISS
        c = self.call.again(arrays)
        if c is None:
            return MISS
        try:
            res = c._run(ln, None, False)
        except pool.Released:
            return MISS
        if ln.pool.held > ln.pool.limit:
            ln.cache.trim()
        return hand_back(res, c.rule, c.ops[0].dtype)


def _named(device, dev, x=None):
    """The Device the full path would take for ``device`` (``get_device``; with a native array ``x``
    and no ``device``, ``_device_for``), where that is ``dev`` or not yet made; else another."""
    if isinstance(device, Device):
        return device
    if device is None:
        device = "__default__" if x is None else dev.backend.arrays.native_default(x)
    return _arrays._default.get(device)


def _host_signature(x) -> tuple:
    return x.dtype, x.shape, x.strides


def fast_key(op_key, inputs, device):
    """The signature of a call on numpy arrays or on native arrays of one type (``_NATIVE``), with
    the ``device`` argument; None for any other call."""
    t = type(inputs[0])
    sig = _host_signature if t is np.ndarray else _NATIVE.get(t)
    if sig is None or any(type(x) is not t for x in inputs):
        return None
    return (op_key, device if device is None or type(device) is str else id(device), tuple(map(sig, inputs)))


def lookup(op_key, inputs, device, what: str):
    """(plan or None, the call's full key or None where no plan can take it, or (device, kinds,
    resolved operands) of device arrays for the full path: an array is looked up and resolved once
    per call, ``ArrayBridge.operand``)."""
    seen = None
    if all(type(x) is np.ndarray for x in inputs):
        dev = get_device(device)
        key = (op_key, tuple((x.dtype, x.shape, x.strides) for x in inputs))
        arrays = inputs
    else:
        kinds = [classify(x, i, what) for i, x in enumerate(inputs)]
        if any(k not in ("cuda", "opencl") for k, _ in kinds):
            return None, None
        dev = _device_for(kinds, inputs, device)
        bridge = dev.backend.arrays
        if any(k != bridge.kind for k, _ in kinds):
            return None, None           # the full path says which array is on which device
        # each array resolved once (view, shape, dtype, strides): the full path's Call takes them as they are
        ops = [bridge.operand(x, f"{what} input {i}", where) for i, (x, (_, where)) in enumerate(zip(inputs, kinds))]
        arrays = [o[0] for o in ops]
        key = (op_key, tuple((type(x), dt, shape, st, bridge.alignment(a))
                             for x, (a, shape, dt, st) in zip(inputs, ops)))
        seen = (dev, kinds, ops)
    if dev.executor.removed is not None:
        return None, None
    cache = pool.device_cache(dev)
    plan = cache.plans.get(key)
    if plan is None:
        return None, (cache, key, seen)
    return (plan, arrays), (cache, key, seen)


def run(op_key, inputs, device, what: str):
    """The result of a repeated call, or (MISS, key): the caller takes the full path and hands
    ``key`` and its Call to ``keep``."""
    try:
        fk = fast_key(op_key, inputs, device)
        if fk is not None:
            plan = _fast.get(fk)
            if plan is not None:
                res = plan.again(inputs, device)
                if res is not MISS:
                    return res, None
                _forget(fk)
        else:
            hash(op_key)
    except TypeError:
        return MISS, None
    found, key = lookup(op_key, inputs, device, what)
    if key is not None:
        key += (fk, inputs, device)
    if found is not None:
        plan, arrays = found
        res = plan.run(arrays)
        if res is not MISS:
            if fk is not None and plan.fast:
                _fast[fk] = plan
            return res, key
        cache, k = key[:2]
        with cache.lock:
            cache.plans.pop(k, None)
    return MISS, key


def seen(key):
    """What ``run`` learnt of device arrays, for the full path's Call (None: nothing)."""
    return None if key is None else key[2]


def keep(key, call: Call) -> None:
    """Keep the plan of a call that ran whole (not split, not empty) on the full path."""
    if key is None or getattr(call, "launch", None) is None or call.mode == "split":
        return
    cache, k, seen_, fk, inputs, device = key
    if seen_ is None and any(s < 0 or s % dt.itemsize for dt, _, strides in k[1] for s in strides):
        # a numpy array the call packed first (negative strides, strides that are not whole elements):
        # a plan would read the next array's memory with the packed copy's strides
        return
    plan = Plan(call, inputs)
    with cache.lock:
        cache.plans[k] = plan
        cache.plans.move_to_end(k)
        while len(cache.plans) > MAX_PLANS:
            cache.plans.popitem(last=False)
    if plan.native:
        t = call.bridge.native_type
        if t not in _NATIVE:
            _NATIVE[t] = call.bridge.native_signature
            fk = fast_key(k[0], inputs, device)
    if fk is not None and plan.fast:
        _fast[fk] = plan


def _forget(fk) -> None:
    try:
        del _fast[fk]
    except KeyError:        # another thread's, or the plan's own weak reference went first
        pass
