"""One program class per kernel family, for every backend that runs the kernels of opencl_kernels/
(OpenCL and CUDA): which variant a plan gets, the arguments of each launch, the order of launches,
the bounds-checked build's status buffer. What differs between the APIs is behind a few verbs of
``KernelBackend`` (below), each backend module implementing only what is native to its API:
compile a kernel, pass a buffer, pass a struct, pass the element-wise inputs, launch.

A launch's arguments are one tuple, made again only when the bindings change (the program keeps
the tuple of the last run), so a replayed dispatch costs a lookup and a launch; OpenCL sets only
the kernel arguments that differ from the last launch of the same kernel (pyopencl's set_arg
costs ~11 us for a scalar on PoCL), CUDA passes the tuple by value.
"""
from __future__ import annotations

import numpy as np

from ..runtime import planning
from ..runtime.backend import Backend, Program
from . import checked, elementwise_kernels, reduce_kernels, support
from . import opencl_geometry as geometry
from .reduce_kernels import Launch

VEC_ALIGN = 16      # the vector kernels' loads and stores: every operand's address a multiple of this
_U0 = np.uint64(0)


class KernelBackend(Backend):
    """A backend that runs the kernels of opencl_kernels/ (OpenCL, CUDA). Its verbs:

    - ``kernel(filename, macros, name)``: a handle to one kernel of one compiled variant;
    - ``launch(handle, args, launch, nbytes)``: enqueue it with ``args`` (a tuple; the same tuple
      object again means the same arguments), ``launch`` its geometry, ``nbytes`` the bytes it moves;
    - ``buffer_arg(native)``: what a kernel's pointer parameter receives for a buffer (None: no buffer);
    - ``struct_arg(packed)``: what a metadata struct parameter receives for its bytes (a structured
      numpy array: OpenCL a constant buffer, CUDA the struct by value);
    - ``input_seam(variant, n_inputs)``: an object whose ``args(inputs, itemsize)`` gives the
      element-wise kernels' input arguments (elementwise_kernels.input_seam: the macros side);
    - ``address(native)``: a buffer's device address, for the vector kernels' alignment (0 where
      every buffer starts aligned to more than VEC_ALIGN);
    - ``forget_args(handle)``: drop what the handle keeps of its last arguments.

    And the attributes the variant builders read: ``api``, ``cpu_shaped`` (the serial kernels of an
    OpenCL CPU device), ``gpu_sms`` (the width of the GPU geometry), ``fp64``, ``max_param_bytes``,
    ``tuning``, ``compute_units``, ``checked``, ``device_fence`` (a fence orders a work-item's global
    stores for every work-group of the device: the spread redo's last-arriving group needs it;
    reduce_kernels.gpu_variant)."""

    api = ""
    cpu_shaped = False
    device_fence = False
    fp64 = True
    checked = False
    max_param_bytes = 4096
    tuning = geometry.DEFAULT_TUNING
    compute_units = 1

    def kernel_refusal(self, op, dt):
        return support.not_built(self.info.backend, op, dt)

    def kernel(self, filename: str, macros: dict, name: str):
        raise NotImplementedError

    def launch(self, handle, args: tuple, launch: Launch, nbytes: int) -> None:
        raise NotImplementedError

    def buffer_arg(self, native):
        raise NotImplementedError

    def struct_arg(self, packed: np.ndarray):
        raise NotImplementedError

    def input_seam(self, variant, n_inputs: int):
        raise NotImplementedError

    def address(self, native) -> int:
        return 0

    def memory(self, native) -> tuple:
        """(what memory the buffer lies in, its start's address there): two buffers whose first items
        are equal may overlap, by their addresses. By default every buffer is its own memory; OpenCL
        buffers over host memory compare by the host address."""
        return id(native), 0

    def forget_args(self, handle) -> None:
        pass

    def compile(self, plan, flags) -> Program:
        if isinstance(plan, planning.ReducePlan):
            return ReduceProgram(self, plan)
        return ElementwiseProgram(self, plan)

    def exact_limbs(self, plan: planning.ReducePlan, data: np.ndarray) -> np.ndarray:
        """The exact partials of a packed host array ``data`` laid out as ``plan`` (a REDUCE_MEAN plan
        over packed strides, ``reduce_kernels.limbs_ok``): the int64 array (n_out, K + 1) of every
        output's superaccumulator limbs (32-bit digits, limb j weighing 2^(32 j) units of the format's
        smallest subnormal; FLOAT16's 2^-24, FLOAT32's and BFLOAT16's 2^-149) and exact.h's flags in
        the last word. The caller holds the device's lock."""
        return self._limbs_program(plan).run(data)

    def _limbs_program(self, plan: planning.ReducePlan) -> LimbsProgram:
        progs = self.__dict__.setdefault("_limbs_programs", {})
        prog = progs.get(plan)
        if prog is None:
            if len(progs) >= 32:
                progs.clear()
            prog = progs[plan] = LimbsProgram(self, plan)
        return prog

    def dd_partials(self, dt, data, n_o: int, rows: int, inner: int, os: int):
        """The exact double-double partials of ``data``, a packed host array of ``dt`` values (or, on the
        GPU shape, a packed device array this backend's bridge owns: a CuPy chunk) viewed as (n_o, rows,
        inner) with row stride ``inner`` and outer stride ``os`` (n_o and rows at least 1; CPU shape:
        inner a multiple of 8; GPU shape: any inner, and the last row may be short: only elements below
        ``os`` of an outer index are read), summed over the rows (opencl_kernels/reduce_cpu_ddp.h,
        reduce_gpu_ddp.h): (h, c, flag) on the host, each (n_o, n_s, inner), the rows cut into n_s
        segments; h + c is the exact total of a segment's column where flag is 0. None where the device
        has no such kernel (no fp64, not FLOAT32 / FLOAT16 / BFLOAT16). The caller holds the device's
        lock."""
        if not self.fp64 or dt not in reduce_kernels.DDP_TYPES:
            return None
        progs = self.__dict__.setdefault("_ddp_programs", {})
        prog = progs.get(dt)
        if prog is None:
            prog = progs[dt] = DDPartialsProgram(self, dt)
        return prog.run(data, n_o, rows, inner, os)

    def dd_fold(self, hs: list, cs: list, count: int):
        """gpu_mean.dask's exact double-double partials added (``DDFoldProgram``): k same-sized FLOAT64
        host arrays ``hs`` and ``cs``, the partials' pairs; with ``count`` > 0 also the FLOAT32 means
        of totals of ``count`` values where the kernel settles them. (h, c, flag, means) flat host
        arrays (flag bit 0: the output's additions could err; bit 1: its mean is settled), or None
        where this device has no such kernel (not the CPU shape, no fp64, no host memory in place).
        The caller holds the device's lock."""
        if not self.fp64 or not self.cpu_shaped:
            return None
        prog = self.__dict__.get("_dd_fold")
        if prog is None:
            prog = self.__dict__["_dd_fold"] = DDFoldProgram(self)
        return prog.run(hs, cs, count)

    def exact_totals(self, dt, n_total: int) -> LimbsTotals:
        """Running exact totals of ``n_total`` outputs of ``dt`` values kept on the device (exact.h's
        K limbs and the flags each, zero): pieces add into them (``LimbsTotals.add``) and they are
        rounded there once (``LimbsTotals.mean``); nothing but the means is read back. The caller
        holds the device's lock."""
        return LimbsTotals(self, reduce_kernels.LIMB_COUNT[dt], n_total)


class LimbsProgram:
    """gm_reduce_limbs (opencl_kernels/reduce_gpu.cl) or gm_reduce_limbs_serial (reduce_cpu.cl):
    the exact partials of split pieces and gpu_mean.dask chunks (docs/design.md, "Partials across
    boundaries"). The input is copied into a device buffer, the kernel writes each (run, output)
    pair's limbs and flags, and the runs are added on the host (integers, exact)."""

    def __init__(self, be: KernelBackend, plan: planning.ReducePlan):
        self.be, self.plan = be, plan
        v = self.variant = reduce_kernels.limbs_variant(
            plan, cpu_shaped=be.cpu_shaped, fp64=be.fp64, compute_units=be.compute_units, sms=be.gpu_sms,
            tuning=be.tuning, checked=be.checked)
        self.kernel = be.kernel(v.file, v.macros, v.launch.kernel)
        self.meta = be.struct_arg(reduce_kernels.pack_meta(plan))
        self.checked = _Checked(be, 4) if be.checked else None

    def _partials(self, data: np.ndarray) -> tuple:
        """(partials, input) buffers of ``data``: each (run, output) pair's limbs and flags, on the
        device; the launch may still run: the caller keeps the input alive until a blocking command
        (a buffer over host memory, PoCL's USE_HOST_PTR, must outlive the kernel that reads it)."""
        v, be, plan = self.variant, self.be, self.plan
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        inp = be.alloc(max(raw.nbytes, 16))
        be.write(inp, 0, raw)
        part = be.alloc(v.words * 8)
        args = v.args(be.buffer_arg(inp), 0, be.buffer_arg(part), 0, self.meta, plan.n_reduce)
        if self.checked is not None:
            self.checked.status.arm(checked.reduce_bounds(plan, 0, 0, 0, 0, v.words, 0))
            args += self.checked.tail
        be.launch(self.kernel, args, v.launch, raw.nbytes)
        if self.checked is not None:
            self.checked.status.check(v.launch.kernel)
        be.forget_args(self.kernel)
        return part, inp

    def run(self, data: np.ndarray) -> np.ndarray:
        v, be, plan = self.variant, self.be, self.plan
        part, _inp = self._partials(data)
        words = be.read(part, 0, v.words * 8).view(np.int64).reshape(v.n_chunks, plan.n_out, v.limbs + 1)
        limbs = words[:, :, :v.limbs].sum(axis=0)       # runs' digits below 2^32 each: no overflow
        flags = np.bitwise_or.reduce(words[:, :, v.limbs], axis=0)
        return np.concatenate([limbs, flags[:, None]], axis=1)


class DDPartialsProgram:
    """gm_dd_partials_serial (opencl_kernels/reduce_cpu_ddp.h) or, on the GPU shape, gm_dd_partials
    (reduce_gpu_ddp.h): gpu_mean.dask's chunk totals as exact double-doubles. One compiled variant per
    type (the macros of a fixed REDUCE AVERAGE plan's variant, GM_DDP on); the input bound in place
    where the device works in host memory, or where a device array lies (ordered after the caller's
    stream), else copied into a buffer."""

    def __init__(self, be: KernelBackend, dt):
        self.be = be
        self.macros = reduce_kernels.ddp_macros(dt, cpu_shaped=be.cpu_shaped, compute_units=be.compute_units,
                                                sms=be.gpu_sms, tuning=be.tuning, checked=be.checked)
        self.name = "gm_dd_partials_serial" if be.cpu_shaped else "gm_dd_partials"
        self.kernel = be.kernel(reduce_kernels.kernel_file(self.macros), self.macros, self.name)
        self.checked = _Checked(be, 4) if be.checked else None

    def _input(self, data):
        be = self.be
        if not isinstance(data, np.ndarray):        # a device array of this backend's bridge
            be.arrays.before([data])
            return be.arrays.memory(data, data.nbytes)[0], data.nbytes
        raw = data.reshape(-1).view(np.uint8)
        inp = be.arrays.host_in_place(raw, False)
        if inp is None:
            inp = be.alloc(max(raw.nbytes, 16))
            be.write(inp, 0, raw)
        return inp, raw.nbytes

    def run(self, data, n_o: int, rows: int, inner: int, os: int) -> tuple:
        be = self.be
        n_s, seg, launch = reduce_kernels.ddp_launch(n_o, rows, inner, cpu_shaped=be.cpu_shaped,
                                                     compute_units=be.compute_units, sms=be.gpu_sms)
        nl = n_o * n_s * inner
        inp, nbytes = self._input(data)
        out = be.alloc(16 * nl)
        flag = be.alloc(max(nl, 16))
        i64 = np.int64
        args = (be.buffer_arg(inp), be.buffer_arg(out), be.buffer_arg(flag), i64(n_o), i64(n_s), i64(rows), i64(seg),
                i64(inner), i64(os))
        if not be.cpu_shaped:
            args += (i64(os),)          # lim: an outer index's elements (the lanes' last row may be short)
        if self.checked is not None:
            n_in = (n_o - 1) * os + min(rows * inner, os)
            self.checked.status.arm([checked.Bound("input", 0, n_in), checked.Bound("output", 0, 2 * nl),
                                     checked.Bound("partials", 0, 0), checked.Bound("flags", 0, nl)])
            args += self.checked.tail
        be.launch(self.kernel, args, launch, nbytes)
        hc = be.read(out, 0, 16 * nl).view(np.float64)       # blocking: the kernel is done with the input
        if self.checked is not None:
            self.checked.status.check(launch.kernel)
        bad = be.read(flag, 0, nl)
        be.forget_args(self.kernel)
        shape = (n_o, n_s, inner)
        return hc[:nl].reshape(shape), hc[nl:].reshape(shape), bad.reshape(shape)


class DDFoldProgram:
    """gm_dd_fold (opencl_kernels/reduce_cpu_ddp.h) on a CPU-shaped device that works in host memory:
    gpu_mean.dask's combine and aggregate of exact double-double partials. The partials' pairs are
    stacked into one host array bound in place, and the sums, flags and FLOAT32 means are written
    into host arrays bound in place: no copy but the stacking."""

    def __init__(self, be: KernelBackend):
        self.be = be
        self.macros = reduce_kernels.ddp_macros(reduce_kernels.D.FLOAT32, cpu_shaped=True,
                                                compute_units=be.compute_units, tuning=be.tuning, checked=be.checked)
        self.kernel = be.kernel(reduce_kernels.kernel_file(self.macros), self.macros, "gm_dd_fold")
        self.checked = _Checked(be, 4) if be.checked else None

    def run(self, hs: list, cs: list, count: int):
        be, arrays = self.be, self.be.arrays
        if not getattr(arrays, "host_memory", False):
            return None
        k, n = len(hs), hs[0].size
        n8 = -(-n // 8) * 8
        stack, stack_buf = arrays.host_output(16 * k * n8)
        if stack_buf is None:
            return None
        st = stack.view(np.float64).reshape(k, 2, n8)
        for i, (h, c) in enumerate(zip(hs, cs)):
            st[i, 0, :n], st[i, 1, :n] = h.reshape(-1), c.reshape(-1)
        st[:, :, n:] = 0.0
        out, out_buf = arrays.host_output(16 * n8)
        means, means_buf = arrays.host_output(4 * n8 if count else 16)
        flag, flag_buf = arrays.host_output(n8)
        if out_buf is None or means_buf is None or flag_buf is None:
            return None
        span, launch = reduce_kernels.fold_launch(n8, be.compute_units)
        args = (be.buffer_arg(stack_buf), be.buffer_arg(out_buf), be.buffer_arg(means_buf), be.buffer_arg(flag_buf),
                np.int64(k), np.int64(n8), np.int64(span), np.float64(count))
        if self.checked is not None:
            self.checked.status.arm([checked.Bound("pairs", 0, 2 * k * n8), checked.Bound("sums", 0, 2 * n8),
                                     checked.Bound("means", 0, n8 if count else 0), checked.Bound("flags", 0, n8)])
            args += self.checked.tail
        be.launch(self.kernel, args, launch, 16 * (k + 1) * n8)
        be.finish()         # the kernel is done with the stack and has written the outputs in place
        if self.checked is not None:
            self.checked.status.check(launch.kernel)
        be.forget_args(self.kernel)
        o = out.view(np.float64)
        return o[:n], o[n8:n8 + n], flag[:n], means.view(np.float32)[:n]


class LimbsTotals:
    """Exact totals of a split call's outputs on the device (issue 26: the pieces combined on the
    device): K limbs and the flags per output, in one buffer, zero at first. ``add`` runs a piece's
    gm_reduce_limbs and then gm_limbs_add (opencl_kernels/reduce_limbs.h), which adds the piece's runs into the outputs
    it covers and moves the carries up; ``mean`` runs gm_limbs_round (exact.h's division and
    rounding) and reads the means back. Nothing else leaves the device."""

    def __init__(self, be: KernelBackend, limbs: int, n_total: int):
        self.be, self.limbs, self.n_total = be, limbs, n_total
        self.words = n_total * (limbs + 1)
        self.acc = be.alloc(self.words * 8)
        be.write(self.acc, 0, np.zeros(self.words * 8, np.uint8))
        self.prog: LimbsProgram | None = None   # the last piece's program (its macros: the type's)
        self._held: tuple = ()      # the last piece's buffers, until a blocking command has drained them

    def add(self, plan: planning.ReducePlan, data: np.ndarray, dst: np.ndarray) -> None:
        """Add the exact totals of the host array ``data`` (laid out as ``plan``) into outputs ``dst``
        (int64 indices of the whole call's outputs, one per output of the plan, in its order)."""
        be = self.be
        prog = self.prog = be._limbs_program(plan)
        v = prog.variant
        assert v.limbs == self.limbs and dst.shape == (plan.n_out,)
        part, inp = prog._partials(data)
        idx = be.alloc(max(dst.nbytes, 16))
        be.write(idx, 0, np.ascontiguousarray(dst, np.int64).view(np.uint8))   # blocking: drains the last piece
        launch = reduce_kernels.combine_launch("gm_limbs_add", plan.n_out, be.cpu_shaped)
        handle = be.kernel(v.file, v.macros, launch.kernel)
        args = (be.buffer_arg(part), be.buffer_arg(self.acc), be.buffer_arg(idx), np.int64(plan.n_out),
                np.int64(v.n_chunks))
        self._launch(prog, handle, args, launch, [checked.Bound("partials", 0, v.words),
                                                  checked.Bound("output", 0, 0),
                                                  checked.Bound("running totals", 0, self.words),
                                                  checked.Bound("destinations", 0, plan.n_out)])
        self._held = (part, inp, idx)

    def mean(self, n: int, dtype) -> np.ndarray:
        """The correctly rounded means of the totals (``n`` values each, n < 2^32) as a flat array of
        ``dtype`` (the values' type)."""
        be, prog = self.be, self.prog
        dtype = np.dtype(dtype)
        out = be.alloc(max(self.n_total * dtype.itemsize, 16))
        launch = reduce_kernels.combine_launch("gm_limbs_round", self.n_total, be.cpu_shaped)
        handle = be.kernel(prog.variant.file, prog.variant.macros, launch.kernel)
        args = (be.buffer_arg(self.acc), be.buffer_arg(out), np.int64(self.n_total), np.uint64(n))
        self._launch(prog, handle, args, launch, [checked.Bound("input", 0, 0),
                                                  checked.Bound("output", 0, self.n_total),
                                                  checked.Bound("running totals", 0, self.words),
                                                  checked.Bound("flags", 0, 0)])
        res = be.read(out, 0, self.n_total * dtype.itemsize).view(dtype).copy()
        self._held = ()
        return res

    def _launch(self, prog: LimbsProgram, handle, args: tuple, launch: Launch, bounds: list) -> None:
        be = self.be
        if prog.checked is not None:
            prog.checked.status.arm(bounds)
            args += prog.checked.tail
        be.launch(handle, args, launch, self.words * 8)
        if prog.checked is not None:
            prog.checked.status.check(launch.kernel)
        be.forget_args(handle)


def reduce_variant(be: KernelBackend, plan: planning.ReducePlan) -> reduce_kernels.ReduceVariant:
    if be.cpu_shaped:
        return reduce_kernels.cpu_variant(plan, compute_units=be.compute_units, fp64=be.fp64, tuning=be.tuning,
                                          checked=be.checked)
    return reduce_kernels.gpu_variant(plan, sms=be.gpu_sms, fp64=be.fp64, checked=be.checked, spread=be.device_fence)


def elementwise_variant(be: KernelBackend, plan: planning.ElementwisePlan) -> elementwise_kernels.ElementwiseVariant:
    if be.cpu_shaped:
        return elementwise_kernels.cpu_variant(plan, fp64=be.fp64, max_param_bytes=be.max_param_bytes,
                                               tuning=be.tuning, checked=be.checked)
    return elementwise_kernels.gpu_variant(plan, api=be.api, sms=be.gpu_sms, fp64=be.fp64,
                                           max_param_bytes=be.max_param_bytes, checked=be.checked)


def program_source(be: KernelBackend, plan) -> tuple:
    """(kernel file, macros) of the one program ``be.compile(plan)`` builds (every kernel a plan
    launches comes from one variant's text), without building it: what a backend compiles ahead."""
    v = reduce_variant(be, plan) if isinstance(plan, planning.ReducePlan) else elementwise_variant(be, plan)
    return v.file, v.macros


class _Checked:
    """A checked program's status buffer (gpu_mean/kernels/checked.py): armed with the bounds before
    the first launch of a run, read after every launch."""

    def __init__(self, be: KernelBackend, n_args: int):
        self.status = checked.StatusBuffer(be, n_args)
        self.tail = (be.buffer_arg(self.status.native),)     # every checked kernel's last argument


class ElementwiseProgram(Program):
    """opencl_kernels/elementwise_gpu.cl or elementwise_cpu.cl (ElementwiseVariant.file): one launch,
    the vector kernel when every operand is aligned."""

    def __init__(self, be: KernelBackend, plan: planning.ElementwisePlan):
        self.be, self.plan = be, plan
        v = self.variant = elementwise_variant(be, plan)
        self.handles = {launch.kernel: be.kernel(v.file, v.macros, launch.kernel)
                        for launch in (v.scalar, v.vec, v.inplace) if launch is not None}
        self.fixed = v.fixed_args(plan.scale, plan.bias, be.struct_arg(v.dims) if v.dims is not None else None)
        self.seam = be.input_seam(v, plan.n_inputs)
        self.checked = _Checked(be, plan.n_inputs + 1) if be.checked else None
        self.itemsize = int(plan.dtype.element_size)
        self.traffic = plan.count * self.itemsize * (plan.n_inputs + 1)    # bytes read and written
        self._last = None       # (bindings, launch, args) of the last run

    launches = 1        # kernels per execute (the profiler's diagnostics)

    def run(self, inputs, outputs, temporary):
        key = (outputs[0], *inputs)
        last = self._last
        if last is None or last[0] != key:      # replays with unchanged bindings reuse the tuple
            last = self._last = (key, *self._arguments(inputs, outputs[0]))
        _, launch, args = last
        be, chk = self.be, self.checked
        if chk is None:
            be.launch(self.handles[launch.kernel], args, launch, self.traffic)
            return
        isz = self.itemsize
        chk.status.arm(checked.elementwise_bounds(self.plan, [off // isz for _, off in inputs],
                                                  outputs[0][1] // isz))
        be.launch(self.handles[launch.kernel], args, launch, self.traffic)
        chk.status.check(launch.kernel)

    def run_bound(self, inputs, outputs, temporary):
        """A launch over the caller's memory (it moves from call to call): the arguments built from
        the fixed part made once and the bound buffers; nothing kept of them afterwards."""
        if self.checked is not None:
            super().run_bound(inputs, outputs, temporary)
            return
        launch, args = self._arguments(inputs, outputs[0])
        handle = self.handles[launch.kernel]
        self.be.launch(handle, args, launch, self.traffic)
        self.be.forget_args(handle)

    def _arguments(self, inputs, output) -> tuple:
        v, be, isz = self.variant, self.be, self.itemsize
        out, ooff = output
        aligned = v.vec is not None and all((be.address(b) + off) % VEC_ALIGN == 0 for b, off in (output, *inputs))
        args = (be.buffer_arg(out), np.uint64(ooff // isz) if ooff else _U0) + self.fixed + self.seam.args(inputs, isz)
        if self.checked is not None:
            args += self.checked.tail
        if v.inplace is not None and self._overlaps(inputs, output):
            return v.inplace, args
        return (v.vec if aligned else v.scalar), args

    def _overlaps(self, inputs, output) -> bool:
        """Whether the output's elements share memory with an input's (in place): the same memory
        (``KernelBackend.memory``) and intersecting element ranges."""
        isz, be = self.itemsize, self.be
        bounds = checked.elementwise_bounds(self.plan, [off // isz for _, off in inputs], output[1] // isz)
        (omem, obase), ob = be.memory(output[0]), bounds[-1]
        o0, o1 = obase + ob.lo * isz, obase + ob.hi * isz
        for (buf, _), b in zip(inputs, bounds):
            mem, base = be.memory(buf)
            if mem == omem and base + b.lo * isz < o1 and o0 < base + b.hi * isz:
                return True
        return False

    def forget_bindings(self):
        self._last = None
        for h in self.handles.values():
            self.be.forget_args(h)


class ReduceProgram(Program):
    """opencl_kernels/reduce_gpu.cl or reduce_cpu.cl (ReduceVariant.file): the main kernel, then the
    finalize pass of a split reduction. The correctly rounded means (GM_EXACT) have no exact pass of
    their own in either shape: the kernel that stores an output redoes it exactly when the bound test
    leaves it open (redo_open: the finalize pass is given the input too). A split of few long outputs
    (reduce_kernels.spread_runs) leaves them to gm_spread_redo instead, which spreads each open
    output's redo over the device."""

    def __init__(self, be: KernelBackend, plan: planning.ReducePlan):
        self.be, self.plan = be, plan
        v = self.variant = reduce_variant(be, plan)
        self.main = be.kernel(v.file, v.macros, v.main.kernel)
        self.fin = be.kernel(v.file, v.macros, v.finalize.kernel) if v.finalize else None
        # the spread redo of a few long outputs (reduce_kernels.spread_runs): a launch after the finalize pass
        self.spread = be.kernel(v.file, v.macros, v.spread.kernel) if v.spread else None
        self.meta = be.struct_arg(reduce_kernels.pack_meta(plan, v.depth))
        self.temporary_size = v.temporary_size
        self.itemsize = int(plan.dtype.element_size)
        self.out_itemsize = int(plan.output_type.element_size)
        self.part_bytes = v.acc_bytes     # one chunk partial (16 or 32 bytes for the extension types)
        self.traffic = (plan.n_reduce * self.itemsize + self.out_itemsize) * plan.n_out
        # the wide sum's two-word totals: a second output, the low word (reduce_meta.h: GM_WIDE_SUM)
        self.wide = reduce_kernels.wide_sum(plan)
        # the checked build's bounds: input, output, partials, flags, and the wide sum's low word or the
        # spread redo's arrival counts (reduce_meta.h: GM_A_LO, GM_A_CNT)
        self.checked = _Checked(be, 5 if self.wide or v.spread else 4) if be.checked else None
        self._last = None       # (bindings, main and finalize args, element offsets) of the last run
        self._slots = None      # run_bound's templates: (temporary, main args, finalize args, slots)

    def run(self, inputs, outputs, temporary):
        v = self.variant
        key = (inputs[0], outputs[0], temporary if v.temporary_size else None, outputs[1] if self.wide else None)
        last = self._last
        if last is None or last[0] != key:
            last = self._last = (key, *self._arguments(inputs[0], outputs[0], temporary,
                                                       outputs[1] if self.wide else None))
        _, main, fin, spread, offs = last
        be, chk = self.be, self.checked
        if chk is not None:
            bounds = checked.reduce_bounds(self.plan, *offs[:4], v.partial_bytes // self.part_bytes, v.flag_bytes)
            if self.wide:
                bounds.append(checked.low_word_bound(self.plan, offs[4]))
            if spread is not None:
                bounds.append(self._counts_bound(offs[6]))
            chk.status.arm(bounds)
        be.launch(self.main, main, v.main, self.traffic)
        if chk is not None:
            chk.status.check(v.main.kernel)
        if fin is not None:
            be.launch(self.fin, fin, v.finalize, 0)
            if chk is not None:
                chk.status.check(v.finalize.kernel)
        if spread is not None:
            if chk is not None:     # the partials argument is the limbs now, in longs
                chk.status.arm(checked.reduce_bounds(self.plan, *offs[:2], offs[5], offs[3],
                                                     v.spread_limb_bytes // 8, v.flag_bytes)
                               + [self._counts_bound(offs[6])])
            be.launch(self.spread, spread, v.spread, 0)
            if chk is not None:
                chk.status.check(v.spread.kernel)

    def run_bound(self, inputs, outputs, temporary):
        """A launch over the caller's memory, which moves from call to call: the argument tuples are
        built once (per temporary binding) and only the input's and output's buffer and offset are
        substituted (ReduceVariant.MAIN_SLOTS, finalize_slots); nothing is kept of the caller's
        buffers afterwards. The checked build (its bounds) and the wide sum (its second output) run
        the full path."""
        if self.checked is not None or self.wide:
            super().run_bound(inputs, outputs, temporary)
            return
        v, be = self.variant, self.be
        temp = temporary if v.temporary_size else None
        slots = self._slots
        if slots is None or slots[0] != temp:
            self._last = None
            main, fin, spread, _ = self._arguments(inputs[0], outputs[0], temporary)
            slots = self._slots = (temp, list(main), list(fin) if fin is not None else None, v.finalize_slots,
                                   list(spread) if spread is not None else None)
        _, main, fin, fslots, spread = slots
        (ib, ioff), (ob, ooff) = inputs[0], outputs[0]
        ia, oa = be.buffer_arg(ib), be.buffer_arg(ob)
        io = np.uint64(ioff // self.itemsize) if ioff else _U0
        oo = np.uint64(ooff // self.out_itemsize) if ooff else _U0
        at_in, at_out = v.MAIN_SLOTS["in"], v.MAIN_SLOTS["out"]
        main[at_in], main[at_in + 1], main[at_out], main[at_out + 1] = ia, io, oa, oo
        be.launch(self.main, tuple(main), v.main, self.traffic)
        main[at_in] = main[at_out] = None       # the template keeps no caller's buffer
        if fin is not None:
            at_out = fslots["out"]
            fin[at_out], fin[at_out + 1] = oa, oo
            at_in = fslots.get("in")
            if at_in is not None:
                fin[at_in], fin[at_in + 1] = ia, io
            be.launch(self.fin, tuple(fin), v.finalize, 0)
            fin[at_out] = None
            if at_in is not None:
                fin[at_in] = None
            be.forget_args(self.fin)
        if spread is not None:
            at_in, at_out = v.SPREAD_SLOTS["in"], v.SPREAD_SLOTS["out"]
            spread[at_in], spread[at_in + 1], spread[at_out], spread[at_out + 1] = ia, io, oa, oo
            be.launch(self.spread, tuple(spread), v.spread, 0)
            be.forget_args(self.spread)
            spread[at_in] = spread[at_out] = None
        be.forget_args(self.main)

    def _arguments(self, binding_in, binding_out, temporary, binding_lo=None) -> tuple:
        v, be = self.variant, self.be
        (ib, ioff), (ob, ooff) = binding_in, binding_out
        tb, toff = temporary if v.temporary_size else (None, 0)
        t_bytes = toff
        # the flags follow the partials in the temporary (element offsets in bytes: uchar); the wide
        # sum has none and binds flag_off 0 (its gm_store reads the output's kept index there)
        foff = 0 if self.wide else toff + v.partial_bytes
        ioff, ooff, toff = ioff // self.itemsize, ooff // self.out_itemsize, toff // self.part_bytes
        inp, out = be.buffer_arg(ib), be.buffer_arg(ob)
        part = be.buffer_arg(tb if v.finalize else None)
        flag = be.buffer_arg(tb if v.flag_bytes else None)
        lo, loff = (), 0
        if binding_lo is not None:      # the low word: 8-byte elements (UINT64 or FLOAT64)
            loff = binding_lo[1] // 8
            lo = (be.buffer_arg(binding_lo[0]), np.uint64(loff))
        tail = self.checked.tail if self.checked is not None else ()
        main = v.main_args(inp, ioff, out, ooff, part, toff, flag, foff, self.meta, lo) + tail
        n_out, n = self.plan.n_out, self.plan.n_reduce
        spread, limbs_off, cnt_off, cnt = None, 0, 0, ()
        if v.spread:        # the limbs after the flags (a multiple of 16 bytes), in longs; then the counts, in ints
            limbs_off, tbuf = (t_bytes + v.partial_bytes + v.flag_bytes) // 8, be.buffer_arg(tb)
            cnt_off = limbs_off * 2 + v.spread_limb_bytes // 4
            cnt = (tbuf, np.uint64(cnt_off))
            spread = v.spread_args(inp, ioff, tbuf, limbs_off, flag, foff, out, ooff, cnt_off, self.meta, n_out,
                                   n) + tail
        fin = None
        if v.finalize:
            fin = v.finalize_args(part, toff, out, ooff, flag, foff, self.meta, n_out, n, lo, inp, ioff, cnt) + tail
        return main, fin, spread, (ioff, ooff, toff, foff, loff, limbs_off, cnt_off)

    def _counts_bound(self, cnt_off: int) -> checked.Bound:
        """The spread redo's arrival counts (reduce_meta.h: GM_A_CNT), in ints."""
        return checked.Bound("arrival counts", cnt_off, cnt_off + int(self.plan.n_out))

    # -- diagnostics (the profiler's; never called by run) ------------------------------------------
    @property
    def launches(self) -> int:
        """Kernels launched per execute: the main kernel and the finalize pass of a split reduction (the
        open outputs are redone inside them: no exact pass of its own), and for a split of few long
        outputs the spread redo (reduce_kernels.spread_runs)."""
        return 1 + (self.fin is not None) + (self.spread is not None)

    @property
    def flag_region(self) -> tuple | None:
        """(byte offset in the temporary resource, bytes, outputs, a bit per output?) of the flags the
        main pass (or the finalize pass) writes on every execute: a byte per output, or a bit per output
        where GM_FLAG_BITS (docs/design.md, "The flags"); None where the variant writes none (means
        rounded without a bound test, the wide sum)."""
        v = self.variant
        if not v.flag_bytes or self.wide:
            return None
        return v.partial_bytes, v.flag_bytes, int(self.plan.n_out), bool(v.macros.get("GM_FLAG_BITS"))

    def open_outputs(self, flags: np.ndarray) -> int:
        """How many outputs the bound left open (each redone exactly by the kernel that stored it), from
        the flag bytes of the temporary resource after an execute (``flag_region``'s bytes)."""
        _, nbytes, n_out, bits = self.flag_region
        raw = np.asarray(flags, np.uint8).reshape(-1)[:nbytes]
        if bits:
            return int(np.unpackbits(raw, bitorder="little")[:n_out].sum())
        return int(np.count_nonzero(raw[:n_out]))

    def forget_bindings(self):
        self._last = None
        for h in (self.main, self.fin, self.spread):
            if h is not None:
                self.be.forget_args(h)
