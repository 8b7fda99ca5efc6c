"""Operands of ``gm.mean`` / ``gm.reduce_mean`` as callers hold them, and results handed back as
the same type.

=============================  ==========================  ====================================
input                          where it runs               result
=============================  ==========================  ====================================
numpy array or scalar          any device (host upload)    numpy
DLPack producer on the CPU     any device (host upload)    the producer's library, through its
(PyTorch CPU, array-api-strict)                            ``from_dlpack`` (numpy if it has none)
CuPy array                     CUDA, in place              CuPy
DLPack producer on CUDA        CUDA, in place              that library's ``from_dlpack``
(PyTorch CUDA, JAX, ...)                                   (PyTorch CUDA -> PyTorch CUDA)
``__cuda_array_interface__``   CUDA, in place              CuPy
only (Numba, older libraries)
pyopencl array                 OpenCL, in place            pyopencl, on the input's queue
=============================  ==========================  ====================================

bfloat16: numpy and pyopencl arrays of ``ml_dtypes.bfloat16`` (pyopencl stores any numpy dtype),
CuPy's where CuPy has that dtype, and DLPack producers' bfloat16 tensors, read as their int16 bits
through the library's own view (bridges/arrays*.py); results go back as the caller's bfloat16.

Python lists, scalars and other array-likes are taken as ``numpy.asarray`` takes them, with a
numpy result; where numpy infers float64 or int64 (which the mean operators do not take) the error
says so, since narrowing silently would change values. A numpy masked array is refused: its mask
would be ignored (``numpy.ma.mean`` honours it).

Which arrays a device takes in place, and how a result goes back, is the device backend's
``ArrayBridge`` (gpu_mean/bridges/arrays.py); this module only asks it.
"""
from __future__ import annotations

import numpy as np

from .. import backends
from ..bridges.arrays import classify, hand_back, host_operand, result_rule, wrong_device
from ..descriptors.tensor import MAX_ELEMENTS
from ..descriptors.types import DataType
from ..errors import InvalidArgumentError, UnsupportedTypeError
from ..runtime import interop
from ..runtime.device import Device
from ..runtime.objects import Buffer, BufferBinding, native_binding
from . import pool

# DirectML's four mean types, then the extension types (gm.ext descriptors; docs/design.md, "Extension types")
SUPPORTED = (DataType.FLOAT32, DataType.FLOAT16, DataType.INT32, DataType.UINT32,
             DataType.BFLOAT16, DataType.FLOAT64, DataType.INT64, DataType.UINT64)
_SUPPORTED_NAMES = "float32, float16, bfloat16 (ml_dtypes.bfloat16), float64, int32, uint32, int64 or uint64"
NUMPY = ("numpy", None)
# Below this many input bytes the CPU device copies host inputs into pooled buffers and replays a
# recorded command list instead of binding the caller's memory: validating fresh bindings costs
# more than the copy. Measured (2-core shared VM, reduce_mean and mean of float32 squares, us per
# call, copy vs in place): 1 KiB 37 vs 49, 16 KiB 41 vs 54, 64 KiB 52 vs 59, 128 KiB (mean of two
# 64 KiB) 81 vs 79, 256 KiB 96 vs 85.
CPU_IN_PLACE_MIN_BYTES = 128 << 10
# The CPU device computes a functional call from the caller's arrays where they lie, at any size, with
# no copy and no launch ("direct"; docs/design.md, "The life of one functional call"). Off, it takes
# the path every other device takes (tests of the pool switch it off: the cpu device is on every machine).
CPU_DIRECT = True
# The same trade on an OpenCL device that works in host memory (PoCL), where binding in place makes a
# USE_HOST_PTR buffer per array: a repeated call hands those to the launch with no binding around them
# (frontends/repeat.py: Plan._in_place), which is cheaper than copying at any size. Measured (PoCL,
# 2-core VM, mean(a, b) of float32, us per call, copy vs in place, best of 3): 16x16 56 vs 51, 256x256 93 vs 77.
HOST_IN_PLACE_MIN_BYTES = 0
# From this many input bytes a call that copies host arrays into device memory asks how much is free
# (CUDA), so that what one piece copies fits (frontends/split.py).
FREE_CHECK_BYTES = 64 << 20

_default: dict = {}


def get_device(device=None) -> Device:
    """A Device, a device string, or None for the process default (``$GPU_MEAN_DEVICE`` or auto)."""
    if isinstance(device, Device):
        return device
    key = device or "__default__"
    dev = _default.get(key)
    if dev is None or dev.get_device_removed_reason() is not None:
        dev = _default[key] = backends.create_device(device)
    return dev


def _device_for(kinds, sources, device) -> Device:
    """The device asked for; without one, the device the arrays live on (else the default)."""
    if device is not None:
        return get_device(device)
    for (kind, where), x in zip(kinds, sources):
        if kind == "cuda":
            return get_device(f"cuda:{where}")
        if kind == "opencl":
            for info in backends.list_devices():
                if info.backend == "opencl":
                    dev = get_device(f"opencl:{info.index}")
                    if dev.backend.arrays.owns(x):
                        return dev
            raise InvalidArgumentError("the pyopencl array belongs to no gpu_mean OpenCL device's context; make "
                                       "it with gm.create_device('opencl').cl_queue, or pass device=")
    return get_device(None)


class Operand:
    """One input: ``kind`` is "host" or the device's array kind ("cuda", "opencl"); ``array`` the
    numpy or native array over the caller's memory; ``strides`` in elements (>= 0); ``span_bytes``
    the bytes from the first element through the last."""

    __slots__ = ("kind", "array", "shape", "dtype", "strides", "span_elements", "span_bytes")

    def __init__(self, kind, array, shape, dtype, strides):
        self.kind, self.array, self.shape, self.dtype, self.strides = kind, array, shape, dtype, strides
        self.span_elements = interop.span_elements(shape, strides)
        self.span_bytes = self.span_elements * dtype.itemsize

    def like(self, array) -> Operand:
        """This operand's description over another array of the same shape, dtype and strides (a
        repeated call: frontends/repeat.py)."""
        o = Operand.__new__(Operand)
        o.kind, o.array, o.shape, o.dtype, o.strides = self.kind, array, self.shape, self.dtype, self.strides
        o.span_elements, o.span_bytes = self.span_elements, self.span_bytes
        return o

    def piece(self, index: tuple) -> Operand:
        """The operand over a box of its own dimensions (``index``: one slice per dimension), a view
        without a copy; element strides stay those of the whole (0 where a piece has size 1)."""
        if not index:
            return self     # a scalar: every piece reads all of it
        arr = self.array[index]
        shape = tuple(int(n) for n in arr.shape)
        strides = tuple(0 if n == 1 else s for n, s in zip(shape, self.strides))
        return Operand(self.kind, arr, shape, self.dtype, strides)

    def span(self) -> np.ndarray:
        return interop.host_span(self.array, self.span_bytes)


_DATA_TYPES = {np.dtype(DataType(d).numpy_dtype): DataType(d) for d in SUPPORTED}


def data_type_of(dtype, what: str, allowed=None, type_list: str = "") -> DataType:
    """The DataType of a numpy dtype the mean operators take; ``allowed`` narrows the set (an ONNX
    opset's type constraint, spelled ``type_list`` in the error)."""
    dt = _DATA_TYPES.get(dtype)      # a dict lookup: DataType.from_numpy walks every type
    if dt not in SUPPORTED:
        hint = ""
        if np.dtype(dtype).kind in "iub" and np.dtype(dtype).itemsize < 4:
            # narrow integers widen exactly (bool as 0 and 1)
            hint = f"; convert with x.astype(np.{'uint32' if np.dtype(dtype).kind in 'ub' else 'int32'})"
            if np.dtype(dtype).itemsize == 2 and np.dtype(dtype).kind in "iu":
                # how bfloat16 data often travels where a library has no bfloat16 (pyopencl, older CuPy)
                hint += ("; or, if it holds bfloat16 bits, view it as bfloat16 without a copy: "
                         "x.view(ml_dtypes.bfloat16) (numpy, pyopencl; CuPy with ml_dtypes support)")
        raise UnsupportedTypeError(f"{what}: data type {np.dtype(dtype)} is not supported; the mean operators take "
                                   f"{_SUPPORTED_NAMES}{hint}")
    if allowed is not None and dt not in allowed:
        raise UnsupportedTypeError(f"{what}: data type {np.dtype(dtype)} is not in {what}'s type constraint T "
                                   f"({type_list})")
    return dt


def _as_numpy(x, index: int, what: str) -> np.ndarray:
    """A Python object or array-like as numpy takes it; an error where numpy infers a type the mean
    operators do not take, or where the input is not an array at all."""
    if isinstance(x, (str, bytes, dict, set)) or x is None:
        raise UnsupportedTypeError(f"{what}: input {index} is a {interop.type_name(x)}, which is not an array "
                                   "gpu_mean takes (numpy, CuPy, pyopencl, a Python list or anything with __dlpack__ "
                                   "or __cuda_array_interface__)")
    try:
        a = np.asarray(x)
    except Exception as e:
        raise UnsupportedTypeError(f"{what}: input {index} ({interop.type_name(x)}) is not an array numpy can read: "
                                   f"{e}") from e
    if a.dtype == object:
        raise UnsupportedTypeError(f"{what}: input {index} is a {interop.type_name(x)}, which is not an array "
                                   "gpu_mean takes (numpy, CuPy, pyopencl, a Python list or anything with __dlpack__ "
                                   "or __cuda_array_interface__)")
    if a.dtype not in _DATA_TYPES:
        raise UnsupportedTypeError(f"{what}: input {index} is a Python {type(x).__name__}; numpy would infer "
                                   f"{a.dtype} from it, which the mean operators do not take; pass a numpy (or CuPy, "
                                   f"PyTorch, pyopencl) array of {_SUPPORTED_NAMES}, e.g. np.asarray(x, "
                                   "dtype=np.float32)")
    return a


class Call:
    """The operands of one call, classified once (one library, one device) and viewed on that
    device without copies; ``mode`` says how they are bound:

    * "direct": host arrays on the CPU device, any size: numpy computes the result from their bytes
      where they lie (``Launch.run_direct``; CPU_DIRECT off, the tests of the pool: "device" from
      CPU_IN_PLACE_MIN_BYTES on, "host" below);
    * "device": the caller's device arrays, bound in place (``Launch.run_device``);
    * "host in place": numpy arrays on an OpenCL device that works in host memory, bound in place
      through USE_HOST_PTR buffers, the result written into a numpy array (``Launch.run_host``);
    * "host": host arrays copied into pooled buffers (``Launch.run_host``; CUDA: pinned staging);
    * "split": an operand larger than one buffer of the device (``limit``) or than a DirectML tensor
      (2^32 - 1 elements): the call runs in pieces (frontends/split.py), each a Call of its own.
    """

    def __init__(self, inputs, device, what: str, seen=None):
        """``seen``: (device, kinds, resolved operands) of device arrays already classified and
        resolved (frontends/repeat.py's lookup, ``ArrayBridge.operand``), so that no array is looked
        up twice."""
        self.what = what
        if seen is not None:
            self.rule = _one_library(inputs, what)
            self.dev = dev = seen[0]
            self.bridge = dev.backend.arrays
            self.ops = [self._operand(x, i, k, what, where, resolved)
                        for i, (x, (k, where), resolved) in enumerate(zip(inputs, seen[1], seen[2]))]
        elif device is not None and all(type(x) is np.ndarray for x in inputs):
            # the common case, without the general classification
            self.rule = NUMPY
            self.dev = dev = get_device(device)
            self.bridge = dev.backend.arrays
            self.ops = [self._operand(x, i, "host", what) for i, x in enumerate(inputs)]
        else:
            inputs = list(inputs)
            kinds = []
            for i, x in enumerate(inputs):
                if isinstance(x, np.ma.MaskedArray):
                    raise UnsupportedTypeError(f"{what}: input {i} is a numpy masked array; gpu_mean would ignore "
                                               "its mask; use numpy.ma.mean, or pass x.filled(...) or x.data")
                k = classify(x, i, what)
                if k[0] is None:
                    inputs[i] = _as_numpy(x, i, what)
                    k = ("host", None)
                kinds.append(k)
            self.rule = _one_library(inputs, what)
            self.dev = dev = _device_for(kinds, inputs, device)
            self.bridge = dev.backend.arrays
            self.ops = [self._operand(x, i, k, what, where) for i, (x, (k, where)) in enumerate(zip(inputs, kinds))]
        op0 = self.ops[0]
        self.kind = op0.kind
        self.limit = self.dev.max_alloc_bytes
        self.mode = self._mode()
        self.signature = tuple((o.kind, o.dtype.str, o.shape, o.strides, self.alignment(o)) for o in self.ops)

    @classmethod
    def piece(cls, parent: Call, ops, dest=None, dev=None) -> Call:
        """A piece of a split call: ``ops`` are views of the parent's operands; ``dest``, where given,
        the view of the parent's result this piece writes; ``dev`` another device (the CPU device,
        for partial sums a device without fp64 cannot make; ``ops`` are then host arrays)."""
        c = cls.__new__(cls)
        c.what, c.rule = parent.what, parent.rule
        c.dev = dev or parent.dev
        c.bridge = c.dev.backend.arrays
        c.ops = ops
        c.kind = ops[0].kind
        c.limit = parent.limit
        c.mode = c._mode(dest, piece=True)
        c.signature = tuple((o.kind, o.dtype.str, o.shape, o.strides, c.alignment(o)) for o in ops)
        return c

    def _operand(self, x, index: int, kind: str, what: str, where=None, resolved=None) -> Operand:
        """The caller's memory, viewed without a copy unless a TensorDesc cannot describe its strides,
        by one bridge call (``resolved``: what that call gave where it was made already)."""
        bridge = self.bridge

        def check(dtype):
            data_type_of(dtype, what)
        if resolved is not None:
            arr, shape, dtype, strides = resolved
            check(dtype)
        elif kind == "host":
            arr, shape, dtype, strides = host_operand(x, check)
        elif kind != bridge.kind:
            raise wrong_device(x, kind, where, self.dev.name, f"{what} input {index}")
        else:
            arr, shape, dtype, strides = bridge.operand(x, f"{what} input {index}", where, check=check)
        return Operand(kind, arr, shape, dtype, strides)

    def _mode(self, dest=None, piece: bool = False) -> str:
        bridge = self.bridge
        span = sum(o.span_bytes for o in self.ops)
        if not piece:       # a piece was cut to fit (split.plan_chunks)
            if self.kind == "host" and not bridge.host_memory and span >= FREE_CHECK_BYTES:
                free = self.dev.backend.free_memory()
                if free is not None:
                    # a copy of every operand and of the result in device memory at once, with room to spare
                    share = free // (2 * (len(self.ops) + 1))
                    self.limit = share if self.limit is None else min(self.limit, share)
            limit = self.limit
            for o in self.ops:
                if o.span_elements > MAX_ELEMENTS or (limit is not None and o.span_bytes > limit):
                    return "split"
        if self.kind != "host":
            return "device"
        if not bridge.host_memory:
            return "host"
        if bridge.kind == "host":
            if CPU_DIRECT:
                return "direct"
            return "device" if span >= CPU_IN_PLACE_MIN_BYTES else "host"
        if span < HOST_IN_PLACE_MIN_BYTES:
            return "host"
        self.natives = [bridge.host_in_place(o.span(), False) for o in self.ops]
        if dest is not None:
            self.dest_bytes = interop.span_elements(dest.shape, _element_strides(dest)) * dest.dtype.itemsize
            self.natives.append(bridge.host_in_place(interop.host_span(dest, self.dest_bytes), True))
        return "host" if any(n is None for n in self.natives) else "host in place"

    def alignment(self, op) -> int:
        return 0 if op.kind == "host" else self.bridge.alignment(op.array)

    def run(self, signature, make, dest=None, to_host: bool = False):
        """Execute the launch cached for ``signature`` (``make()`` gives its descriptor and result
        shape on first use); the result as the caller's type. ``dest``: an array (a view of a split
        call's result) the result is written into instead; ``to_host``: the result as numpy whatever
        the operands (a split call's partial sums)."""
        while True:
            ln = pool.launch_for(self.dev, signature, self.mode == "host", make)
            try:
                res = self._run(ln, dest, to_host)
            except pool.Released:
                continue
            self.launch = ln
            if ln.pool.held > ln.pool.limit:
                ln.cache.trim()
            return res if dest is not None or to_host else hand_back(res, self.rule, self.ops[0].dtype)

    def again(self, arrays, bind: bool = True) -> Call | None:
        """This call over other arrays of the same signature (a repeated call: frontends/repeat.py):
        the operands re-described without a look at their types; None where the new arrays cannot be
        bound as these were (host memory a device cannot take in place at that address). ``bind``:
        False for a template that holds no arrays."""
        c = Call.__new__(Call)
        c.__dict__.update(self.__dict__)
        c.ops = ops = [o.like(a) for o, a in zip(self.ops, arrays)]
        if bind and c.mode == "host in place":
            c.natives = [self.bridge.host_in_place(o.span(), False) for o in ops]
            if any(n is None for n in c.natives):
                return None
        return c

    def _run(self, ln, dest, to_host):
        mode = self.mode
        if mode in ("direct", "host"):     # a new host array: numpy's (the CPU device) or read back
            if mode == "direct":
                res = ln.run_direct([o.array for o in self.ops])
            else:
                res = ln.run_host([o.span() for o in self.ops]).reshape(ln.out_shape)
            if dest is None:
                return res
            dest[...] = res.reshape(dest.shape)
            return dest
        if mode == "host in place":
            n_in = len(self.ops)
            ins = [BufferBinding(Buffer(self.dev, n, max(t.total_size_in_bytes, o.span_bytes), o.span_bytes), 0,
                                 t.total_size_in_bytes)
                   for n, o, t in zip(self.natives[:n_in], self.ops, ln.in_tensors)]
            res, out, real = self._host_output(ln, dest)
            ln.run_device(ins, out)
            # the kernel's writes visible in the array handed back, all work before them done
            self.dev.executor.host_sync(out.buffer.native, real)
            return res
        arrays = [o.array for o in self.ops]
        if ln.checked and dest is None and not to_host:
            # a launch whose bindings were checked once: the arrays' memory as (handle, offset) pairs
            bridge = self.bridge
            ins = [bridge.memory(o.array, o.span_bytes or 1)[:2] for o in self.ops]
            arr, res = self._new_result(ln)
            bridge.ordered(arrays, res, ln.run_pairs, ins, bridge.memory(arr, arr.nbytes or 1)[:2])
            return res
        ins = [native_binding(self.dev, self.bridge, o.array, max(o.span_bytes, 1), t.total_size_in_bytes)
               for o, t in zip(self.ops, ln.in_tensors)]
        if to_host and self.kind != "host":
            return self._run_to_host(ln, ins, arrays)
        out, res = self._new_output(ln, dest)
        self.bridge.before(arrays)
        ln.run_device(ins, out)
        self.bridge.after(res)
        return res

    def _run_to_host(self, ln, ins, arrays) -> np.ndarray:
        """Device operands, the result read back from a pooled buffer (a split call's partial sums)."""
        t = ln.out_tensor
        buf = ln.pool.take(t.total_size_in_bytes)
        try:
            self.bridge.before(arrays)
            ln.run_device(ins, BufferBinding(buf, 0, t.total_size_in_bytes))
            return buf.read(t.numpy_dtype, ln.out_count).reshape(ln.out_shape)
        finally:
            ln.pool.give(buf)

    def _host_output(self, ln, dest=None):
        """(numpy result, binding of its memory, its real bytes): the kernel writes the array handed
        back (``dest``, where given, through the handle ``_mode`` made over it)."""
        t = ln.out_tensor
        nbytes = t.total_size_in_bytes
        if dest is not None:
            real = self.dest_bytes
            return dest, BufferBinding(Buffer(self.dev, self.natives[-1], max(nbytes, real), real), 0, nbytes), real
        span, native = self.bridge.host_output(nbytes)
        res = span[:ln.out_count * t.numpy_dtype.itemsize].view(t.numpy_dtype).reshape(ln.out_shape)
        return res, BufferBinding(Buffer(self.dev, native, nbytes), 0, nbytes), nbytes

    def _new_result(self, ln, like=None):
        """(array allocated, result): the result allocated by the caller's array library, shaped as
        the result, padded only where TotalTensorSizeInBytes (a multiple of 4) asks for more.
        ``like``: the first input, where the operands hold none (a plan's template)."""
        shape, dtype, n = ln.result_layout
        if like is None:
            like = self.ops[0].array
        arr = np.empty(shape, dtype) if self.kind == "host" else self.bridge.empty(like, shape, dtype)
        return arr, (arr if n == ln.out_count else arr[:ln.out_count].reshape(ln.out_shape))

    def _new_output(self, ln, dest=None):
        """(binding, result array): the result is allocated by the caller's array library, shaped as
        the result, and padded only where TotalTensorSizeInBytes (a multiple of 4) asks for more;
        or ``dest``, bound where it is."""
        t = ln.out_tensor
        dtype = t.numpy_dtype
        if dest is not None:
            real = interop.span_elements(dest.shape, _element_strides(dest)) * dtype.itemsize
            return native_binding(self.dev, self.bridge, dest, max(real, 1), t.total_size_in_bytes), dest
        arr, res = self._new_result(ln)
        return native_binding(self.dev, self.bridge, arr, ln.result_layout[2] * dtype.itemsize,
                              t.total_size_in_bytes), res

    def host_copy(self, op: Operand) -> np.ndarray:
        """A device operand's values as a host array (for partial sums a device without fp64 cannot
        make; the one place a split call reads device operands back)."""
        b = native_binding(self.dev, self.bridge, op.array, max(op.span_bytes, 1))
        self.bridge.before([op.array])
        raw = b.buffer.read(np.uint8, op.span_bytes, b.offset)
        itemsize = op.dtype.itemsize
        return np.ndarray(op.shape, op.dtype, buffer=raw, strides=tuple(s * itemsize for s in op.strides))

    def empty_result(self, shape, fill=None):
        """A result with no kernel launch (zero-size tensors, means of nothing)."""
        res = np.empty(shape, self.ops[0].dtype)
        if fill is not None:
            res[...] = fill
        if self.kind != "host":
            res = self.bridge.from_host(self.ops[0].array, res)
        return hand_back(res, self.rule, self.ops[0].dtype)


def _element_strides(arr) -> tuple:
    """Element strides of a view the library made itself (never negative)."""
    itemsize = np.dtype(arr.dtype).itemsize
    return tuple(0 if n == 1 else int(s) // itemsize for n, s in zip(arr.shape, arr.strides))


def _one_library(arrays, what: str) -> tuple:
    """The one result rule of all inputs; mixing libraries is an error naming the types."""
    rules = {result_rule(x) for x in arrays}
    if len(rules) > 1:
        kinds = sorted({interop.type_name(x) for x in arrays})
        raise UnsupportedTypeError(f"{what}: inputs mix {', '.join(kinds)}; pass arrays of one library (the "
                                   "result comes back as that library's type)")
    return rules.pop()
