"""The reduction family's kernels (opencl_kernels/reduce_gpu.cl, reduce_cpu.cl) from a plan: one macro set, one metadata
layout, one argument list and one geometry per kernel shape, for the CUDA and the OpenCL backends
alike. Pure: CI compiles every variant for CUDA and runs the GPU-shaped ones on PoCL without a GPU.

A backend asks for a ``ReduceVariant`` (``gpu_variant`` for CUDA and OpenCL GPUs, ``cpu_variant`` for
OpenCL CPU devices), builds ``kernel_text(api, variant.file, variant.macros)`` and launches
``variant.main`` (then ``variant.finalize`` when the reduction is split) with the arguments of
``main_args`` / ``finalize_args``: only binding the buffers is left to the backend.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from ..descriptors.types import DataType as D
from ..descriptors.types import KernelOp
from ..runtime import planning
from . import gpu_geometry, opencl_geometry
from .typespell import OPENCL as spell

WIDE_INT = (D.INT64, D.UINT64)
# the argument positions that change with the bindings (the rest is fixed when the program is made)
MAIN_BINDINGS = (0, 1, 2, 3, 4, 5, 6, 7)    # in, in_off, out, out_off, part, part_off, flag, flag_off
FINALIZE_BINDINGS = (0, 1, 4, 5, 6, 7)      # part, part_off, out, out_off, flag, flag_off
# the types whose REDUCE AVERAGE the kernels round correctly (issue 22, stage 2): a bound test in the
# store and an exact sum of the outputs it leaves open
EXACT_TYPES = (D.FLOAT32, D.FLOAT16, D.BFLOAT16)
EX_WG = 64          # superaccumulators a work-group merges (GPU shape: reduce_gpu_redo.h, gm_reduce_limbs)
EX_WG_F64 = 16      # FLOAT64's (552 bytes each: 8.6 KiB of local memory in every GM_EXACT kernel)
F16_DIRECT = 1 << 13        # FLOAT16 sums of at most this many values: their quotient rounded once to
                            # half is the correctly rounded mean (the sums: planning.F16_EXACT_SUM)
XBLOCK = 64     # the CPU shape's GM_EXACT loops restart their accumulators every XBLOCK passes


def exact_mean(plan: planning.ReducePlan, fp64: bool) -> bool:
    """Whether the plan's kernels are the correctly rounded ones (GM_EXACT: the bound test, flags and
    the exact redo of open outputs): REDUCE AVERAGE of FLOAT32, FLOAT16, BFLOAT16 (without fp64: GM_FF, the
    float-float sum and its bound)."""
    if plan.dtype == D.FLOAT16 and fp64 and plan.n_reduce <= F16_DIRECT:
        return False
    if plan.dtype == D.FLOAT64:     # stage 3: the double-double's bound test, gm_xacc_d (fp64 only)
        return plan.op == KernelOp.REDUCE_MEAN and fp64 and plan.n_reduce < 1 << 32
    return plan.op == KernelOp.REDUCE_MEAN and plan.dtype in EXACT_TYPES and plan.n_reduce < 1 << 32


def f16_direct(plan: planning.ReducePlan, fp64: bool) -> bool:
    """FLOAT16 REDUCE AVERAGE of at most F16_DIRECT values per output, with fp64: the FLOAT64 sum is
    exact in any order (no float pre-sum then), its quotient is correctly rounded, and rounding that
    once to half is the correctly rounded mean: no bound test, no flags, no exact pass (docs/design.md,
    "The kernels' fast path and exact pass"). Why: the sum S is a multiple of 2^-24; for a mean in
    the binade [2^k, 2^(k+1)), k >= -13, the half midpoints are multiples of 2^(k-11) >= 2^-24, so a
    mean that is no midpoint lies at least 2^-24 / n from one (2^-25 / n below 2^-13), more than the
    quotient's own rounding, 2^(k-53) <= 2^-38 (|mean| < 2^16), whenever n < 2^14 (issue 24: the
    bound was 2^12 with one distance, 2^-25 / n, for every binade; n <= 2^13 keeps the sum exact)."""
    return plan.op == KernelOp.REDUCE_MEAN and plan.dtype == D.FLOAT16 and fp64 and plan.n_reduce <= F16_DIRECT


def wide_sum(plan: planning.ReducePlan) -> bool:
    """Whether the plan is the wide sum's two-word total (REDUCE_SUM of FLOAT64, INT64, UINT64: a
    high and a low output, GM_WIDE_SUM)."""
    return plan.op == KernelOp.REDUCE_SUM and (plan.dtype in WIDE_INT or plan.dtype == D.FLOAT64)


def h16_cols(plan: planning.ReducePlan, fp64: bool, g) -> bool:
    """Whether the CPU shape's column kernel sums FLOAT16 REDUCE AVERAGE columns exactly (reduce_cpu_cols.h:
    GM_H16C): chunks of at most planning.F16_EXACT_SUM rows (opencl_geometry.reduce_geometry caps them), so
    each column's FLOAT64 chunk sum is exact in any order and no largest magnitude is kept; the
    partial's m is |s| / rows, as GM_H16's runs. With fp64, for the correctly rounded variant
    (exact_mean), where every column block is whole (the kernel's vector path)."""
    return (plan.op == KernelOp.REDUCE_MEAN and plan.dtype == D.FLOAT16 and fp64 and g.kernel == "col"
            and exact_mean(plan, fp64) and plan.inner % g.cols == 0 and g.chunk <= planning.F16_EXACT_SUM)


COL_SPAN_ROWS = 1 << 8     # FLOAT32 / BFLOAT16 columns of at most this many rows test their span (GM_COL_SPAN)


def col_span(plan: planning.ReducePlan, g) -> int | None:
    """GM_COL_SPAN (reduce_cpu.cl: gm_col_exact) for FLOAT32 or BFLOAT16 columns of at most COL_SPAN_ROWS
    rows in one chunk, every column block whole: the widest exponent span whose FLOAT64 sums are exact
    and whose double quotient, rounded once more, is the correctly rounded mean, 52 - p - ceil(log2 n)
    for p significand bits (FLOAT32 28 - ceil(log2 n), BFLOAT16 44 - ceil(log2 n)); else None."""
    if not (g.kernel == "col" and g.n_chunks == 1 and plan.n_reduce <= COL_SPAN_ROWS and plan.inner % g.cols == 0):
        return None
    return span_limit(plan)


def span_limit(plan: planning.ReducePlan) -> int:
    """52 - p - ceil(log2 n) for FLOAT32 (p = 24) and BFLOAT16 (p = 8): the widest exponent span of n
    values whose FLOAT64 sum is exact and whose double quotient, rounded once more, is the correctly
    rounded mean (GM_COL_SPAN of the CPU shape's columns, GM_SPAN of the GPU shape's short rows)."""
    return 52 - {D.FLOAT32: 24, D.BFLOAT16: 8}[plan.dtype] - (plan.n_reduce - 1).bit_length()


H16_PASSES = 256        # GM_H16: passes of 32 halves per block (at most 4 * 256 values per double lane)
H16_RUN = 1 << 22       # GM_H16: runs shorter than this (2^22 values of at most 2^40 units of 2^-24: a long)


def h16_rows(plan: planning.ReducePlan, fp64: bool, g) -> bool:
    """Whether the CPU shape's row kernel sums FLOAT16 REDUCE AVERAGE runs exactly (reduce_cpu.cl: GM_H16):
    blocks of halves in double lanes (exact), their totals in integer lanes; the run's total rounded
    once is the partial, no largest magnitude kept (issue 24; docs/design.md, "The kernels' fast path
    and exact pass"). With fp64, in the row kernel, for runs shorter than H16_RUN (the integer lanes)."""
    run = g.length if g.row_multi else g.chunk
    return (plan.op == KernelOp.REDUCE_MEAN and plan.dtype == D.FLOAT16 and fp64 and g.kernel == "row"
            and (exact_mean(plan, fp64) or f16_direct(plan, fp64)) and run < H16_RUN)


def b16_rows(plan: planning.ReducePlan, fp64: bool, g) -> bool:
    """Whether the CPU shape's row kernel sums BFLOAT16 REDUCE AVERAGE runs through its own loop
    (reduce_cpu.cl: GM_B16: sixteen values per load, widened to double in eight vectors of lanes): the
    correctly rounded mean with fp64, in the row kernel (docs/design.md, "BFLOAT16 on the CPU shape
    with fp64")."""
    return plan.dtype == D.BFLOAT16 and fp64 and g.kernel == "row" and exact_mean(plan, fp64)


def b16_cols(plan: planning.ReducePlan, fp64: bool, g) -> bool:
    """Whether the CPU shape's column kernel loads BFLOAT16 REDUCE AVERAGE columns sixteen at a time,
    widening the even and the odd columns apart (reduce_cpu_cols.h: GM_B16C): the correctly rounded mean with
    fp64, column blocks of a multiple of 16."""
    return plan.dtype == D.BFLOAT16 and fp64 and g.kernel == "col" and g.cols % 16 == 0 and exact_mean(plan, fp64)


def meta_struct(plan: planning.ReducePlan) -> np.dtype:
    """numpy twin of the kernels' ``gm_rmeta`` (arrays of at least one element: C has no empty ones);
    the kernel checks its size against META_BYTES in both languages. The wide sum's two-word totals
    add the low word's kept strides (``keep_lo``) at the end."""
    kn, rn = max(len(plan.keep_shape), 1), max(len(plan.red_shape), 1)
    fields = [("keep_shape", np.int64, (kn,)), ("keep_in", np.int64, (kn,)), ("keep_out", np.int64, (kn,)),
              ("red_shape", np.int64, (rn,)), ("red_in", np.int64, (rn,)), ("depth", np.int64)]
    if wide_sum(plan):
        fields.append(("keep_lo", np.int64, (kn,)))
    return np.dtype(fields, align=True)


def pack_meta(plan: planning.ReducePlan, depth: int = 0) -> np.ndarray:
    """The metadata as one struct: CUDA passes it by value, OpenCL uploads its bytes as a constant buffer.
    ``depth``: the variant's bound on the additions any value passes through (``ReduceVariant.depth``)."""
    arr = np.zeros(1, meta_struct(plan))
    arr["depth"][0] = depth
    kn, rn = len(plan.keep_shape), len(plan.red_shape)
    for name, values, n in (("keep_shape", plan.keep_shape, kn), ("keep_in", plan.keep_in_strides, kn),
                            ("keep_out", plan.keep_out_strides, kn), ("red_shape", plan.red_shape, rn),
                            ("red_in", plan.red_strides, rn)):
        arr[name][0, :n] = values
    if wide_sum(plan):
        arr["keep_lo"][0, :kn] = plan.keep_lo_strides
    return arr


def type_macros(plan: planning.ReducePlan, fp64: bool, checked: bool = False) -> dict:
    """Types, loads and the final rounding, spelled in OpenCL C (the CUDA dialect maps the same names):
    the accumulator is the plan's (FLOAT64 becomes a compensated float pair on a device without fp64;
    INT64 / UINT64 the two sums of common.h's GM_WIDE_ADD, WIDE_INT; FLOAT64 input the two
    double-doubles of gm_dd4, WIDE_FLOAT); REDUCE_MEAN divides once and rounds once to the input's
    type, REDUCE_SUM stores the accumulator; ``checked`` turns on the bounds checks (GM_CHECKED)."""
    dt = plan.dtype
    kn, rn = len(plan.keep_shape), len(plan.red_shape)
    wide_int, wide_float = dt in WIDE_INT, dt == D.FLOAT64
    exact = exact_mean(plan, fp64)
    bf16_ff = dt == D.BFLOAT16 and not fp64 and not exact    # two compensated float pairs (common.h: gm_ff4)
    compensated = dt.is_float and not fp64 and not bf16_ff and not exact
    acc = "float" if compensated or bf16_ff or (exact and not fp64) else "ulong" if wide_int else spell(plan.acc)
    m = {"KN": kn, "RN": rn, "KNA": max(kn, 1), "RNA": max(rn, 1), "META_BYTES": meta_struct(plan).itemsize,
         "T": spell(dt), "OUT_T": spell(plan.output_type), "ACC": acc, "COMPENSATED": int(compensated),
         "WIDE_INT": int(wide_int), "WIDE_FLOAT": int(wide_float), "GM_BF16_NOFP64": int(bf16_ff),
         "USE_FP64": int(dt.is_float and fp64 or plan.output_type == D.FLOAT64),
         "GM_ACC0": "-0.0" if acc in ("float", "double") else "0"}
    if checked:
        m["GM_CHECKED"] = 1
    if wide_sum(plan):
        # the two-word total: gm_store writes the high word to out and the low word to the extra
        # output (reduce_meta.h: GM_WIDE_SUM); no STORE_RESULT (a kernel that used it would not compile)
        m.update({"GM_WIDE_SUM": 1, "LO_T": "double" if wide_float else "ulong"})
    if exact:
        m.update({"GM_EXACT": 1, "GM_FF": int(not fp64), "GM_X_H": int(dt == D.FLOAT16),
                  "GM_X_BF16": int(dt == D.BFLOAT16), "GM_X_D": int(wide_float)})
    if dt == D.FLOAT16:
        m["LOAD1(p)"] = f"(({acc})vload_half(0, (p)))"
    elif dt == D.BFLOAT16:
        m["LOAD1(p)"] = f"(({acc})gm_bf16_to_float(*(p)))"
    elif wide_int or wide_float:
        m["LOAD1(p)"] = "(*(p))"      # the accumulator splits the value itself
    else:
        m["LOAD1(p)"] = f"(({acc})*(p))"
    if wide_sum(plan):
        pass
    elif plan.op == KernelOp.REDUCE_SUM:
        m["STORE_RESULT(t, n, p)"] = "(*(p) = (t))"
    elif dt == D.FLOAT16:
        m["STORE_RESULT(t, n, p)"] = f"vstore_half_rte((t) / ({acc})(n), 0, (p))"
    elif dt == D.BFLOAT16:
        # rounded once: through float rounded to odd from fp64; without it the float quotient
        m["STORE_RESULT(t, n, p)"] = ("(*(p) = gm_double_to_bf16((t) / (double)(n)))" if not bf16_ff
                                      else "(*(p) = gm_float_to_bf16(gm_ff4_mean((t), (n))))")
    elif wide_int:
        m["STORE_RESULT(t, n, p)"] = f"(*(p) = ({spell(dt)})gm_wide_div((t).s, (t).c, (n), {int(dt == D.INT64)}))"
    elif wide_float:
        m["STORE_RESULT(t, n, p)"] = "(*(p) = gm_dd4_mean((t), (n)))"
    else:   # floats round once to the type; integers: C division truncates toward zero
        m["STORE_RESULT(t, n, p)"] = f"(*(p) = ({spell(dt)})((t) / ({acc})(n)))"
    return m


SHORT_TYPES = (D.FLOAT32, D.FLOAT16, D.INT32, D.UINT32, D.BFLOAT16)


F64_SHORT = (8, 16, 32)     # FLOAT64 REDUCE AVERAGE row lengths of the short-rows kernel (a power of two)


def short_rows(plan: planning.ReducePlan, fp64: bool) -> int:
    """The row length the CPU shape's short-rows kernel takes for this plan (0: not that kernel):
    one reduced run of 8, 16, 24 or 32 dense elements per output, rows one after another, outputs
    dense, an accumulator with a vector type (not the compensated pair of a device without fp64).
    FLOAT64: REDUCE AVERAGE over rows of F64_SHORT (reduce_cpu_short_f64.h: the TwoSum tree, gm_d8_rows)."""
    f64 = plan.dtype == D.FLOAT64 and exact_mean(plan, fp64) and plan.n_reduce in F64_SHORT
    if plan.cls != "row" or (plan.dtype not in SHORT_TYPES and not f64) or (plan.dtype.is_float and not fp64):
        return 0
    if plan.dtype == D.BFLOAT16 and exact_mean(plan, fp64) and plan.n_reduce != 8:
        return 0    # correct rounding: only rows of 8 have the float-exact path (the rest would all go exact)
    length = plan.n_reduce
    if length % 8 or not 8 <= length <= 32 or len(plan.red_shape) != 1 or plan.red_strides[0] != 1:
        return 0
    dense = len(plan.keep_shape) == 1 and plan.keep_in_strides[0] == length and plan.keep_out_strides[0] == 1
    return length if dense and plan.n_out >= 8 else 0


def half_through_odd(v: str, vw: int) -> str:
    """Doubles ``v`` (vw lanes) as floats rounded to odd, for a vstore_half_rte that then rounds once:
    PoCL stores a double vector as halves one lane at a time in software (about 2 GB/s), and its
    round-toward-zero conversion is slow too. f = v rounded to nearest, stepped one ulp toward zero
    where it rounded away, the last bit set where inexact; float keeps 13 more bits than half."""
    f, back = f"convert_float{vw}({v})", f"convert_double{vw}(convert_float{vw}({v}))"
    return (f"as_float{vw}((as_uint{vw}({f}) + convert_uint{vw}(isgreater(fabs({back}), fabs({v})))) | "
            f"(convert_uint{vw}(isnotequal({back}, ({v}))) & 1u))")


def quotient8(plan: planning.ReducePlan, acc: str) -> str:
    """Eight totals t divided by n: for a power of two the product by its reciprocal, which is exact
    (the same value as the quotient; a 512-bit double division has a throughput of about 16 cycles)."""
    n = plan.n_reduce
    if plan.dtype.is_float and n > 0 and n & (n - 1) == 0:
        return f"((t) * ({acc}8)({1.0 / n!r}))"
    return f"((t) / ({acc}8)(({acc})(n)))"


def store8_result(plan: planning.ReducePlan, acc: str) -> str:
    """STORE8_RESULT(t, n, p): eight accumulated totals divided by n, each rounded once, stored at p."""
    if plan.op == KernelOp.REDUCE_SUM:
        return "vstore8((t), 0, (p))"
    q = quotient8(plan, acc)
    if plan.dtype == D.FLOAT16:
        return f"vstore_half8_rte({half_through_odd(q, 8)}, 0, (p))"
    if plan.dtype == D.BFLOAT16:    # through float rounded to odd, as gm_double_to_bf16
        return f"GM_VSTORE_BF16(8, gm_float8_to_bf16({half_through_odd(q, 8)}), (p))"
    return f"vstore8(convert_{spell(plan.dtype)}8({q}), 0, (p))"


GPU_FILE, CPU_FILE = "reduce_gpu.cl", "reduce_cpu.cl"


def kernel_file(macros: dict) -> str:
    """The kernel file of a variant's shape: the program of the GPU shape holds reduce_gpu.cl's kernels
    and headers, that of the CPU shape (GM_CPU_SHAPE, cpu_variant) reduce_cpu.cl's."""
    return CPU_FILE if macros.get("GM_CPU_SHAPE") else GPU_FILE


@dataclass(frozen=True)
class Launch:
    """One kernel launch in OpenCL's terms: the global size (work-items per dimension) and the local
    size (None: the runtime picks; GPU-shaped launches always set it). CUDA: grid = global / local."""
    kernel: str
    global_size: tuple
    local_size: tuple | None

    @functools.cached_property
    def grid(self) -> tuple:
        return tuple(g // b for g, b in zip(self.global_size, self.local_size))


def acc_bytes(plan: planning.ReducePlan, fp64: bool) -> int:
    """Bytes of one partial of the kernels' accumulator: the plan's, except BFLOAT16 on a device
    without fp64 (two compensated float pairs, 16 bytes, for a double's 8) and the correctly rounded
    means (the FLOAT64 sum and the largest magnitude, 16 bytes)."""
    if plan.dtype == D.FLOAT64:
        return plan.acc_bytes       # gm_dd4's fields in both forms (GM_EXACT: bhi holds the largest magnitude)
    return 16 if (plan.dtype == D.BFLOAT16 and not fp64) or exact_mean(plan, fp64) else plan.acc_bytes


@dataclass(frozen=True)
class ReduceVariant:
    macros: dict
    main: Launch
    tail: tuple                 # the main kernel's typed scalars after the metadata argument
    finalize: Launch | None     # the second pass of a split reduction
    n_chunks: int
    temporary_size: int         # bytes of chunk partials, then the flags (0: one pass without flags)
    acc_bytes: int = planning.ACC_BYTES     # bytes of one partial (binding offsets divide by it)
    redo_open: bool = False         # GM_EXACT: each kernel redoes the outputs it left open (reduce_cpu_exact.h:
    #                                 gm_redo_open; reduce_gpu_redo.h); the finalize pass also reads the input
    flag_bytes: int = 0             # bytes of flags after the partials (a byte, or a bit, per output)
    depth: int = 0                  # the bound on additions per value (pack_meta)
    spread: Launch | None = None    # gm_spread_redo (spread_runs), after the finalize pass
    spread_runs: int = 0
    spread_clen: int = 0
    spread_bytes: int = 0           # its limbs after the flags (runs x outputs x (K + 1) longs), then
    #                                 the outputs' arrival counts (an int each; spread_counts)
    spread_limb_bytes: int = 0      # the first part: the limbs' bytes

    @property
    def file(self) -> str:
        """The kernel file the variant's program is built from (kernel_file)."""
        return kernel_file(self.macros)

    @property
    def partial_bytes(self) -> int:
        """Bytes of chunk partials at the temporary's start (the flags follow them, then the spread
        redo's limbs)."""
        return self.temporary_size - self.flag_bytes - self.spread_bytes

    SPREAD_SLOTS = {"in": 0, "out": 6}      # gm_spread_redo's input and output

    def spread_args(self, inp, in_off, part, limbs_off, flag, flag_off, out, out_off, cnt_off, meta, n_out: int,
                    n: int) -> tuple:
        """gm_spread_redo's arguments (``limbs_off`` in longs, ``flag_off`` in bytes, ``cnt_off`` in ints;
        the limbs and the counts are in the temporary resource, ``part``)."""
        u64, i64 = np.uint64, np.int64
        return (inp, u64(in_off), part, u64(limbs_off), flag, u64(flag_off), out, u64(out_off), part, u64(cnt_off),
                meta, i64(n_out), u64(n), i64(self.spread_runs), i64(self.spread_clen))

    def main_args(self, inp, in_off, out, out_off, part, part_off, flag, flag_off, meta, lo: tuple = ()) -> tuple:
        """The main kernel's arguments: buffers (whatever the backend passes for them) and element offsets;
        ``lo``: the wide sum's low word (its buffer and element offset, GM_WIDE_SUM), after the rest."""
        u64 = np.uint64
        return (inp, u64(in_off), out, u64(out_off), part, u64(part_off), flag, u64(flag_off),
                np.int32(self.n_chunks > 1), meta) + self.tail + lo

    # where main_args and finalize_args put the bound input's and output's (buffer, offset): the
    # repeated launch substitutes them into the tuple built once (programs.ReduceProgram.run_bound)
    MAIN_SLOTS = {"in": 0, "out": 2}

    @property
    def finalize_slots(self) -> dict:
        return {"out": 4, "in": 10} if self.redo_open else {"out": 4}

    def finalize_args(self, part, part_off, out, out_off, flag, flag_off, meta, n_out: int, n: int,
                      lo: tuple = (), inp=None, in_off: int = 0, cnt: tuple = ()) -> tuple:
        """``inp``, ``in_off``: the input (redo_open: the outputs the pass leaves open are summed again);
        ``cnt``: the spread redo's arrival counts (their buffer and offset in ints), which the pass zeroes."""
        u64 = np.uint64
        own = (inp, u64(in_off)) if self.redo_open else ()
        return (part, u64(part_off), np.int64(self.n_chunks), np.int64(n_out), out, u64(out_off), flag,
                u64(flag_off), meta, u64(n)) + own + lo + cnt



# Every __kernel of reduce_gpu.cl and reduce_cpu.cl (and of their headers) sits under one of these
# flags, and a variant turns on only the kernels its program launches: NVRTC compiles the others too
# when they are there (a FLOAT32 row variant 2.35 -> 1.10 s, a tile variant 2.46 -> 0.49 s, with the
# exact partials' three kernels and the other classes' out; docs/design.md, "Kernels").
KERNEL_FLAGS = ("K_ROW", "K_COL", "K_GENERAL", "K_SHORT", "K_TILE", "K_FIN", "K_LIMBS", "K_SPREAD")


def kernel_flags(*on: str) -> dict:
    """The KERNEL_FLAGS macros: 1 for the kernels named in ``on``, 0 for the rest."""
    assert set(on) <= set(KERNEL_FLAGS), on
    return {f: int(f in on) for f in KERNEL_FLAGS}


def _main_flags(kernel: str, split: bool, spread: bool = False) -> dict:
    """The flags of a reduction program: its main kernel's, the finalize pass's when it is split, and
    the spread redo's (spread_runs)."""
    return kernel_flags(f"K_{kernel.upper()}", *(("K_FIN",) if split else ()), *(("K_SPREAD",) if spread else ()))


# The open outputs of a split GM_EXACT reduction of at most SPREAD_MAX_OUT outputs and at least
# SPREAD_MIN_N values each are redone across the device (reduce_gpu.cl: gm_spread_redo)
# instead of by the one work-group that finalized each: an open output of 2^26 values (centered R1)
# was one SM's work, 280 ms on the H200 (docs/design.md, "Known limits", before)
SPREAD_MAX_OUT = 64
SPREAD_MIN_N = 1 << 20


def spread_runs(plan: planning.ReducePlan, n_chunks: int, sms: int) -> tuple:
    """(runs, values per run) of the spread redo: as limbs_variant cuts a GPU's exact partials (8
    work-groups a SM over the outputs, no run under LIMBS_MIN_RUN); (0, 0) where the plan takes the
    redo inside its finalize pass (one pass, many outputs, few values, no superaccumulator)."""
    n, n_out = plan.n_reduce, plan.n_out
    if n_chunks <= 1 or n_out > SPREAD_MAX_OUT or n < SPREAD_MIN_N or not limbs_ok(plan):
        return 0, 0
    runs = max(1, min(_cdiv(sms * 8, n_out), n // LIMBS_MIN_RUN))
    clen = _cdiv(n, runs)
    return _cdiv(n, clen), clen


def gpu_variant(plan: planning.ReducePlan, *, sms: int, fp64: bool = True, checked: bool = False,
                spread: bool = True) -> ReduceVariant:
    """The GPU-shaped kernels with the shared geometry (gpu_geometry.reduce_geometry); ``checked``:
    the bounds-checked build (gpu_mean/kernels/checked.py); ``spread``: the device's fences order
    global memory for every work-group (KernelBackend.device_fence), so that the spread redo may be
    used (spread_runs; else the finalize pass redoes its open outputs itself)."""
    g = gpu_geometry.reduce_geometry(plan, sms=sms)
    fin_grid, fin_block = g.finalize_geometry(plan.n_out)
    split = g.n_chunks > 1
    fin_lanes = split and g.fin_lanes(plan.n_out)     # the finalize pass's form (else FIN_W outputs a group)
    fin_w = g.fin_w(plan.n_out) if split and not fin_lanes else 1
    m = type_macros(plan, fp64, checked)
    # unused sizes of the other kernels keep fixed values, so that they add no program variants
    m.update({"WG": g.block[0] if g.kernel in ("row", "short", "tile") else 32, "WARP_ROWS": int(g.warp_rows),
              "ROW_MULTI": int(g.row_multi), "COL_Y": g.block[1] if g.kernel == "col" else 8, "COL_W": g.col_w,
              "FIN_WG": fin_block[0] if g.n_chunks > 1 else 32, "SHORT_LPR": g.lanes,
              "FIN_LANES": int(fin_lanes), "FIN_W": fin_w})
    runs, clen = spread_runs(plan, g.n_chunks, sms) if spread and exact_mean(plan, fp64) else (0, 0)
    m.update(_main_flags(g.kernel, split, runs > 0))
    if g.kernel == "short":
        m.update({"SHORT_U": gpu_geometry.SHORT_U, "GM_SPAN": short_span(plan, fp64)})
    if g.kernel == "tile":
        m.update({"SHORT_TILE": g.length, "GM_SPAN": short_span(plan, fp64), "EL_T": EL_FORMS[plan.dtype][0],
                  "EL_ACC(x)": EL_FORMS[plan.dtype][1]})
    v16 = row_vectors(plan, g)
    if v16:
        m.update({"V16": v16, "EL_T": EL_FORMS[plan.dtype][0], "EL_ACC(x)": EL_FORMS[plan.dtype][1]})
    if g.kernel in ("col", "row") and gpu_col_span(plan, fp64):
        m["GM_MSPAN_P"] = gpu_col_span(plan, fp64)
    i64, n_out = np.int64, plan.n_out
    tail = (i64(n_out), i64(g.length), i64(g.chunk), i64(g.n_chunks), np.uint64(plan.n_reduce))
    if g.kernel in ("row", "short", "tile"):
        tail += (i64(g.runs),)
    elif g.kernel == "col":
        tail += (i64(plan.inner), i64(plan.row_stride), i64(n_out // plan.inner))
    block = tuple(g.block) + (1,) * (len(g.grid) - len(g.block))
    main = Launch(f"gm_reduce_{g.kernel}", tuple(a * b for a, b in zip(g.grid, block)), block)
    fin = None
    if g.n_chunks > 1:
        fin = Launch("gm_reduce_finalize", (fin_grid[0] * fin_block[0],), fin_block)
    ab = acc_bytes(plan, fp64)
    if not exact_mean(plan, fp64):
        return ReduceVariant(m, main, tail, fin, g.n_chunks, _temporary(plan, g.n_chunks, ab), ab)
    m["EX_WG"] = ex_wg(plan)
    # no value passes through more additions than: its work-item's chain, the merges of the
    # accumulators and the work-group trees (gm_group_sum: 5 + 5 levels), then the finalize pass
    # (a chain of chunks per work-item, its tree); slack for the tails
    if g.kernel == "row":
        width = 32 if g.warp_rows else g.block[0]
        per_chunk = (_cdiv(g.length, 4 * width) + 8 + g.chunk) if g.row_multi else _cdiv(g.chunk, 4 * width)
        # the tails: up to three vectors (or elements) and an element more into one accumulator
        per_chunk += 20 + 3 * v16
    elif g.kernel == "col":
        # four accumulators a chain of chunk / (4 COL_Y) rows each, three rows more and three merges
        # for one, then the tile's COL_Y * 32 / COL_W in order: within this bound
        per_chunk = _cdiv(g.chunk, 2 * g.block[1]) + g.block[1] * (32 // g.col_w) + 8
    elif g.kernel == "short":
        per_chunk = _cdiv(g.length, g.lanes) + 5     # a lane's values, then the lanes' tree
    elif g.kernel == "tile":
        per_chunk = g.length + 2                     # a work-item's chain over its row
    else:
        per_chunk = g.chunk + 4
    # the finalize pass: a chain of chunks per thread, then (not FIN_LANES) the block's tree
    if g.n_chunks <= 1:
        fin_depth = 0
    elif fin_lanes:
        fin_depth = g.n_chunks + 12
    else:   # a phase's chunks, then the phases' tree (at most 8 levels)
        fin_depth = _cdiv(g.n_chunks, fin_block[0] // fin_w) + 12
    # no exact pass: the kernel that stores an output redoes it when the bound leaves it open
    # (reduce_gpu_redo.h), the finalize pass from the input it is given too (redo_open); but the
    # spread plans' finalize pass leaves its open outputs to gm_spread_redo
    v = _exact_variant(plan, m, main, tail, fin, g.n_chunks, ab, False, per_chunk + fin_depth)
    if not runs:
        return v
    limbs = runs * plan.n_out * (LIMB_COUNT[plan.dtype] + 1) * 8
    redo = limbs + spread_counts(plan.n_out)
    groups, wg = max(1, min(runs * plan.n_out, sms * 8, gpu_geometry.MAX_X)), m["EX_WG"]
    return replace(v, temporary_size=v.temporary_size + redo, spread_bytes=redo, spread_limb_bytes=limbs,
                   spread_runs=runs, spread_clen=clen, spread=Launch("gm_spread_redo", (groups * wg,), (wg,)))


def spread_counts(n_out: int) -> int:
    """Bytes of the spread redo's arrival counts: an int per output, in 16-byte steps."""
    return _round_up(4 * n_out, 16)


# the row kernel's 16-byte loads (reduce_gpu.cl: gm_run_sum): per type, the storage of an element in the
# vector and its conversion to the accumulator (ACC: LOAD1's)
EL_FORMS = {D.FLOAT32: ("float", "((ACC)(x))"), D.FLOAT16: ("ushort", "((ACC)gm_half_to_float(x))"),
             D.BFLOAT16: ("ushort", "((ACC)gm_bf16_to_float(x))")}
assert set(EL_FORMS) == gpu_geometry.TILE_TYPES     # the 16-byte loads and the tile kernel take the same types


def row_vectors(plan: planning.ReducePlan, g: gpu_geometry.ReduceGeometry) -> int:
    """V16 of the row kernel: the elements of one 16-byte load for FLOAT32, FLOAT16 and BFLOAT16 (the
    kernel tests each run's alignment and takes the vectors where it allows), 0 (off) elsewhere."""
    if g.kernel != "row" or plan.dtype not in gpu_geometry.TILE_TYPES:
        return 0
    return 16 // int(plan.dtype.element_size)


def short_span(plan: planning.ReducePlan, fp64: bool) -> int:
    """GM_SPAN of gm_reduce_short (reduce_gpu.cl: gm_span_store): for FLOAT32 and BFLOAT16 REDUCE
    AVERAGE with fp64, the widest exponent span of a row whose FLOAT64 sum is exact and whose double
    quotient rounded once more is the correctly rounded mean, 52 - p - ceil(log2 n) (col_span's
    argument); 0 (off) for every other variant."""
    if not (exact_mean(plan, fp64) and fp64 and plan.dtype in (D.FLOAT32, D.BFLOAT16)):
        return 0
    return span_limit(plan)


def gpu_col_span(plan: planning.ReducePlan, fp64: bool) -> int:
    """GM_MSPAN_P of gm_reduce_col, gm_reduce_row and their finalize pass (reduce_gpu_span.h): the
    format's precision p (FLOAT32 24, BFLOAT16 8) where short_span's conditions hold (among them
    ceil(log2 n) <= 51 - p: the span proof's rounding argument asks 52 - p), else 0 (off)."""
    if short_span(plan, fp64) <= 0:
        return 0
    return {D.FLOAT32: 24, D.BFLOAT16: 8}[plan.dtype]


def ex_wg(plan: planning.ReducePlan) -> int:
    """The superaccumulators a GPU work-group merges for an exact sum (a power of two)."""
    return EX_WG_F64 if plan.dtype == D.FLOAT64 else EX_WG


def cpu_variant(plan: planning.ReducePlan, *, compute_units: int, fp64: bool,
                tuning: opencl_geometry.OpenCLTuning = opencl_geometry.DEFAULT_TUNING,
                checked: bool = False) -> ReduceVariant:
    """The serial vector kernels for OpenCL CPU devices (opencl_geometry.reduce_geometry)."""
    short = short_rows(plan, fp64)
    if short:
        g = opencl_geometry.short_geometry(plan, compute_units=compute_units, tuning=tuning)
    else:
        g = opencl_geometry.reduce_geometry(plan, compute_units=compute_units, tuning=tuning)
    m = type_macros(plan, fp64, checked)
    dt, acc = plan.dtype, m["ACC"]
    if dt in SHORT_TYPES and not m["COMPENSATED"] and not m["GM_BF16_NOFP64"]:     # one vector word per output
        m["STORE8_RESULT(t, n, p)"] = store8_result(plan, acc)
    if short:
        m["SHORT_LEN"] = short
        if dt == D.FLOAT16 and short == 8:
            m["LOAD16(p)"] = "vload_half16(0, (p))"     # two rows of 8 per load
            # blocks whose float sums are exact (reduce_cpu_short.h: gm_exact_in_float): the total times 1/8
            # is exact too, so one rounding to half (or the exact double, for the wide sum)
            m["STORE8_FLOAT(t, p)"] = ("vstore8(convert_double8(t), 0, (p))" if plan.op == KernelOp.REDUCE_SUM
                                       else "vstore_half8_rte((t) * 0.125f, 0, (p))")
        elif dt == D.BFLOAT16 and short == 8:
            m["LOAD16(p)"] = "as_float16(convert_uint16(GM_VLOAD_BF16(16, (p))) << 16)"
            # as FLOAT16's, within 13 binades (reduce_cpu_short.h: gm_exact_in_float); one rounding to bfloat16
            m["EXACT_BF16"] = 1
            m["STORE8_FLOAT(t, p)"] = ("vstore8(convert_double8(t), 0, (p))" if plan.op == KernelOp.REDUCE_SUM
                                       else "GM_VSTORE_BF16(8, gm_float8_to_bf16_finite((t) * 0.125f), (p))")
    h16 = h16_rows(plan, fp64, g)
    h16c = h16_cols(plan, fp64, g)
    b16 = b16_rows(plan, fp64, g)
    m.update({"GM_CPU_SHAPE": 1, "GM_XBLOCK": XBLOCK, "COLS": g.cols, "ROW_MULTI": int(g.row_multi),
              "GM_H16": int(h16), "GM_H16C": int(h16c), "GM_H16_PASSES": H16_PASSES, "GM_B16": int(b16),
              "GM_B16C": int(b16_cols(plan, fp64, g)),
              "PREFETCH": g.prefetch,
              # the row kernel's float pre-sum of halves (the other kernels' FLOAT16 sums stay exact)
              "HALF_BLOCKS": int(dt == D.FLOAT16 and g.kernel == "row" and not f16_direct(plan, fp64)
                                 and not exact_mean(plan, fp64)),
              "ACC8": acc + "8",
              "TO_ACC8(v)": f"convert_{acc}8(v)",
              "X8": acc + "8"})
    if dt == D.FLOAT16:
        m["LOAD8(p)"] = f"convert_{acc}8(vload_half8(0, (p)))"
    elif dt == D.BFLOAT16:
        m["LOAD8(p)"] = f"convert_{acc}8(as_float8(convert_uint8(GM_VLOAD_BF16(8, (p))) << 16))"
    elif dt in WIDE_INT:
        # the values as they are: the accumulator takes their high halves with the type's own shift
        m.update({"LOAD8(p)": "vload8(0, (p))", "X8": spell(dt) + "8"})
    elif dt == D.FLOAT64:
        m["LOAD8(p)"] = "vload8(0, (p))"      # the double-doubles' vectors split nothing
    else:
        m["LOAD8(p)"] = f"convert_{acc}8(vload8(0, (p)))"
    i64 = np.int64
    tail = (i64(plan.n_out), i64(g.length), i64(g.chunk), np.uint64(plan.n_reduce))
    if g.kernel == "col":
        tail += (i64(plan.inner), i64(plan.row_stride))
    # FLOAT64's short rows have a kernel of their own (a TwoSum tree: reduce_cpu_short_f64.h)
    kind = "short_f64" if short and dt == D.FLOAT64 else g.kernel
    m.update(_main_flags("short" if short else g.kernel, g.n_chunks > 1))
    main = Launch(f"gm_reduce_{kind}_serial", tuple(g.grid), g.local)
    # a work-item per work-group: with the runtime's choice, the redo of a few long columns' open
    # outputs (reduce_cpu.cl: the finalize pass's groups of eight) ran on one core of PoCL (R5 on
    # standardized columns: 2.25 -> 1.3 ms for the finalize pass)
    fin = Launch("gm_reduce_finalize_serial", (plan.n_out,), (1,)) if g.n_chunks > 1 else None
    ab = acc_bytes(plan, fp64)
    if not exact_mean(plan, fp64):
        return ReduceVariant(m, main, tail, fin, g.n_chunks, _temporary(plan, g.n_chunks, ab), ab)
    # the stored values as floats (GM_IN8M keeps their largest magnitude before the conversion)
    for w in (8, 16) if dt != D.FLOAT64 else ():
        m[f"RAW{w}(p)"] = {D.FLOAT32: f"vload{w}(0, (p))", D.FLOAT16: f"vload_half{w}(0, (p))",
                           D.BFLOAT16: f"as_float{w}(convert_uint{w}(GM_VLOAD_BF16({w}, (p))) << 16)"}[dt]
    if dt == D.FLOAT32 and fp64:     # eight results through one vector bound test (gm_settle8)
        m.update({"GM_SETTLE8": 1, "GM_Q8(t, n)": quotient8(plan, acc)})
    if m["GM_B16C"]:                 # the same for BFLOAT16's columns (gm_settle8_bf16)
        m.update({"GM_SETTLE8_BF16": 1, "GM_Q8(t, n)": quotient8(plan, acc),
                  "GM_BF16_BITS8(v)": f"gm_float8_to_bf16({half_through_odd('(v)', 8)})"})
    if (m.get("GM_SETTLE8") or m.get("GM_SETTLE8_BF16")) and (span := col_span(plan, g)) is not None:
        # columns of few rows: blocks whose values span at most this many binades take their exact
        # sums' quotients rounded once, ties included (reduce_cpu.cl: gm_col_exact)
        m["GM_COL_SPAN"] = span
    bits = bool(short)
    if bits:
        m["GM_FLAG_BITS"] = 1       # a bit per row, eight rows per byte (each work-item owns whole bytes)
        if dt == D.FLOAT32 and fp64 and short in (8, 16, 32):
            m["GM_SHORT_POW2"] = 1  # exact sums of eight rows decided by one rounding (gm_rows_exact)
    # no value passes through more additions than (reduce_cpu.cl's and its headers' loops): its vector lane's chain and
    # the joins, the horizontal sum and the tail (row), the row tree (short), the four-row pre-sum and
    # the column's chain (col), the walk (general); then the finalize pass's chain of chunks
    if short:
        per_chunk = short
    elif h16 or h16c:           # the run's exact total rounded once, or the chunk's exact total
        per_chunk = 1           # (reduce_cpu.cl: GM_H16, GM_H16C)
    elif b16:                   # a lane's chain (one addition per pass of 64), the passes of sixteen after
        # them (3), the lanes' tree (3), the horizontal sum (8) and the tail (15) (reduce_cpu.cl: GM_B16)
        per_chunk = _cdiv(g.chunk, 64) + 29
    elif g.kernel == "row":     # blocks of XBLOCK passes of 32 values (a lane's chain), then the rest
        per_chunk = XBLOCK + _cdiv(g.chunk, 32 * XBLOCK) + 32
    elif g.kernel == "col" and plan.inner % g.cols == 0:
        per_chunk = XBLOCK + _cdiv(g.chunk, 4 * XBLOCK) + 12   # four rows pre-summed, blocks of XBLOCK
    else:
        per_chunk = g.chunk + 8                 # a walk, or the columns past the last whole block
    fin_depth = g.n_chunks + 2 if g.n_chunks > 1 else 0
    # no exact pass: each kernel redoes the outputs it left open (reduce_cpu_exact.h: gm_redo_open)
    return _exact_variant(plan, m, main, tail, fin, g.n_chunks, ab, bits, per_chunk + fin_depth)


def _exact_variant(plan, m, main, tail, fin, n_chunks, ab, bits, depth) -> ReduceVariant:
    """A GM_EXACT variant: the flags after the partials (a bit per output where ``bits``), the kernels
    redoing their open outputs themselves (redo_open), the depth of the bound (never more than n - 1,
    which holds for every summation tree; 0 for a FLOAT16 sum that is exact)."""
    depth = max(0, min(plan.n_reduce - 1, depth))
    if plan.dtype == D.FLOAT64:
        depth = plan.n_reduce - 1   # the double-double's bound is tiny even so (8 u^2 per addition)
    if plan.dtype == D.FLOAT16 and plan.n_reduce <= planning.F16_EXACT_SUM:
        depth = 0
    flag_bytes = _cdiv(plan.n_out, 8) if bits else plan.n_out
    temp = _temporary(plan, n_chunks, ab)
    return ReduceVariant(m, main, tail, fin, n_chunks, temp + _round_up(flag_bytes, 16), ab, True,
                         _round_up(flag_bytes, 16), depth)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def _temporary(plan: planning.ReducePlan, n_chunks: int, nbytes: int) -> int:
    return plan.temporary_size(n_chunks) // plan.acc_bytes * nbytes


# -- exact partials (gm_reduce_limbs; docs/design.md, "Partials across boundaries") -----------------

LIMB_COUNT = {D.FLOAT32: 10, D.BFLOAT16: 10, D.FLOAT16: 3, D.FLOAT64: 68}    # exact.h's GM_XK_F, _H, _D
LIMBS_MIN_RUN = 1 << 12     # values per run at least (a run's limbs cost (K + 1) * 8 bytes to write and add)


def limbs_ok(plan: planning.ReducePlan) -> bool:
    """Whether gm_reduce_limbs takes the plan: a float type with a superaccumulator, fewer than 2^32
    values per output (gm_exact_range's count and the rounding's divisor)."""
    return plan.dtype in LIMB_COUNT and plan.n_reduce < 1 << 32


@dataclass(frozen=True)
class LimbsVariant:
    """gm_reduce_limbs(_serial): the macros of the plan's GM_EXACT variant (REDUCE AVERAGE of the
    same input: the superaccumulator type and its walk), the launch, and how each output's values are
    cut into runs (n_chunks runs of clen values, each writing its own limbs)."""
    macros: dict
    launch: Launch
    n_chunks: int
    clen: int
    limbs: int          # K, the limbs of a run (K + 1 longs with the flags)
    n_out: int

    @property
    def file(self) -> str:
        return kernel_file(self.macros)

    @property
    def words(self) -> int:
        """The longs the kernel writes: K + 1 per (run, output) pair."""
        return self.n_chunks * self.n_out * (self.limbs + 1)

    def args(self, inp, in_off, part, part_off, meta, n: int) -> tuple:
        u64, i64 = np.uint64, np.int64
        return (inp, u64(in_off), part, u64(part_off), meta, i64(self.n_out), u64(n), i64(self.n_chunks),
                i64(self.clen))


# the GPU shape's exact partials use none of the main kernels' geometry: those macros take fixed values
# (or go), so that every plan of one type and rank shares one limbs program
LIMBS_UNUSED = ("EL_T", "EL_ACC(x)", "SHORT_U", "SHORT_TILE", "V16", "GM_SPAN", "GM_MSPAN_P")
LIMBS_GEOMETRY = {"WG": 32, "WARP_ROWS": 0, "ROW_MULTI": 0, "COL_Y": 8, "COL_W": 32, "FIN_WG": 32, "SHORT_LPR": 0,
                  "FIN_LANES": 0, "FIN_W": 1}


def limbs_variant(plan: planning.ReducePlan, *, cpu_shaped: bool, fp64: bool, compute_units: int = 1,
                  sms: int = 1, tuning: opencl_geometry.OpenCLTuning = opencl_geometry.DEFAULT_TUNING,
                  checked: bool = False) -> LimbsVariant:
    """The exact partials' kernel for ``plan`` (a REDUCE_MEAN plan of a FLOAT32, FLOAT16 or BFLOAT16
    input, ``limbs_ok``): enough runs per output that the device has work for every core (CPU shape:
    16 work-items per compute unit; GPU shape: 8 work-groups per SM), none shorter than LIMBS_MIN_RUN."""
    assert plan.op == KernelOp.REDUCE_MEAN and limbs_ok(plan)
    # FLOAT16 means of few values have no GM_EXACT variant with fp64 (f16_direct): the macros without
    # fp64 then (the limbs kernel uses no floating point)
    fp64 = fp64 and exact_mean(plan, fp64)
    n, n_out = plan.n_reduce, plan.n_out
    if cpu_shaped:
        m = cpu_variant(plan, compute_units=compute_units, fp64=fp64, tuning=tuning, checked=checked).macros
        target = compute_units * 16
    else:
        m = gpu_variant(plan, sms=sms, fp64=fp64, checked=checked).macros
        target = sms * 8
    m = {**m, **kernel_flags("K_LIMBS")}    # gm_reduce_limbs(_serial), gm_limbs_add, gm_limbs_round only
    if not cpu_shaped:      # the main kernels' geometry fixed: one program per type and rank, not per shape
        m = {k: v for k, v in m.items() if k not in LIMBS_UNUSED}
        m.update(LIMBS_GEOMETRY)
    want = _cdiv(target, max(n_out, 1))
    n_chunks = max(1, min(want, n // LIMBS_MIN_RUN))
    clen = _cdiv(max(n, 1), n_chunks)
    n_chunks = _cdiv(max(n, 1), clen)
    pairs = n_chunks * n_out
    if cpu_shaped:
        launch = Launch("gm_reduce_limbs_serial", (pairs,), (1,))
    else:
        groups = max(1, min(pairs, sms * 8, gpu_geometry.MAX_X))
        wg = m["EX_WG"]
        launch = Launch("gm_reduce_limbs", (groups * wg,), (wg,))
    return LimbsVariant(m, launch, n_chunks, clen, LIMB_COUNT[plan.dtype], n_out)


def combine_launch(kernel: str, n_out: int, cpu_shaped: bool) -> Launch:
    """gm_limbs_add / gm_limbs_round (exact partials combined on the device): a work-item per output;
    GPU shape in groups of EX_WG."""
    if cpu_shaped:
        return Launch(kernel, (max(n_out, 1),), None)
    return Launch(kernel, (_round_up(max(n_out, 1), EX_WG),), (EX_WG,))


# -- exact double-double partials (gm_dd_partials_serial: opencl_kernels/reduce_cpu_ddp.h; the GPU
# shape's gm_dd_partials: reduce_gpu_ddp.h) ------------------------------------------------------------

DDP_TYPES = (D.FLOAT32, D.FLOAT16, D.BFLOAT16)
DDP_MIN_SEG = 1 << 10       # rows per segment at least (each segment's pairs are read back and added)
# the CPU shape's work-items per compute unit at least, rows cut into segments for them: each segment's
# pairs are added on the host, 0.8 ms for a second segment of 32768 outputs (a (2048, 32768) FLOAT32 chunk
# over axis 0, 8 work-items of 512 vectors: 16 gave 2 segments, 17.8-18.2 ms on one PoCL thread; 4 one
# segment, 16.4-16.9 ms)
DDP_ITEMS_PER_UNIT = 4
# vectors of 8 columns a work-item sums (reduce_cpu_ddp.h: GM_DDP_V): rows of up to 4096 columns, 16 KB
# contiguous, the block state 64 KB (a (2048, 32768) FLOAT32 chunk over axis 0 on PoCL, 1 thread, beside
# numpy's 16-22 ms, noisy; 4 rows a pass: V = 16 30.3, 64 25.1, 128 21-23, 256 20.3, 512 19-23, 1024
# 20.0 ms; 8 rows a pass: 256, 512 and 1024 all 16.4-18.7 ms)
DDP_V = 512
DDP_PREFETCH_BYTES = 1024  # the CPU shape's lanes (one stream a work-item): software prefetch ahead (GM_DDP_PF)
DDP_GPU_WG = 256            # the GPU shape's work-group (a work-item a column and segment)
DDP_GPU_MIN_SEG = 256       # its rows per segment at least (a segment's pair is 17 bytes read back)


def ddp_macros(dt: D, *, cpu_shaped: bool = True, compute_units: int = 1, sms: int = 1,
               tuning: opencl_geometry.OpenCLTuning = opencl_geometry.DEFAULT_TUNING, checked: bool = False) -> dict:
    """The macros of gm_dd_partials_serial (CPU shape) or gm_dd_partials (GPU shape) for ``dt``: those
    of the shape's variant of one fixed REDUCE AVERAGE plan (the type's loads, the exact tier's
    format), GM_DDP on. The kernels read their layout from their arguments, so one program serves
    every chunk shape."""
    plan = planning.plan_reduce(KernelOp.REDUCE_MEAN, dt, (8, 1 << 16), (1 << 16, 1), (1, 0), (1,))
    if not cpu_shaped:
        m = dict(gpu_variant(plan, sms=sms, fp64=True, checked=checked).macros)
        assert m.get("GM_EXACT") and m.get("USE_FP64")
        m.update({"GM_DDP": 1, **kernel_flags()})     # gm_dd_partials only
        return m
    m = dict(cpu_variant(plan, compute_units=compute_units, fp64=True, tuning=tuning, checked=checked).macros)
    assert m.get("GM_EXACT") and m.get("USE_FP64") and m["RN"] == 1
    m.update({"GM_DDP": 1, "GM_DDP_V": DDP_V, "GM_DDP_PF": DDP_PREFETCH_BYTES if m.get("PREFETCH") else 0,
              **kernel_flags()})     # gm_dd_partials_serial only
    return m


FOLD_ITEMS_PER_UNIT = 4    # gm_dd_fold's work-items per compute unit (each a run of outputs, 8 at a time)


def fold_launch(n8: int, compute_units: int) -> tuple:
    """(span, launch) of gm_dd_fold over ``n8`` outputs (a multiple of 8): runs of ``span`` outputs (a
    multiple of 8), a work-item (and work-group) each, about FOLD_ITEMS_PER_UNIT per compute unit."""
    items = max(1, min(n8 // 8, compute_units * FOLD_ITEMS_PER_UNIT))
    span = _cdiv(_cdiv(n8, items), 8) * 8
    return span, Launch("gm_dd_fold", (_cdiv(n8, span),), (1,))


def ddp_launch(n_o: int, rows: int, inner: int, *, cpu_shaped: bool, compute_units: int = 1, sms: int = 1) -> tuple:
    """(n_s, seg, launch) of the shape's kernel: the rows cut into n_s segments of seg rows, enough for
    the device (CPU shape: about DDP_ITEMS_PER_UNIT work-items per compute unit, a work-item per outer index, segment
    and DDP_V vectors of columns, a work-group each, which PoCL spreads; GPU shape: about 2048 a SM,
    a work-item per outer index, segment and column, the grid capped at CUDA's limit, which the kernel
    loops over), but no segment shorter than the shape's DDP_MIN_SEG / DDP_GPU_MIN_SEG rows."""
    items = n_o * (_cdiv(inner, 8 * DDP_V) if cpu_shaped else inner)       # a segment's work-items
    want, least = (compute_units * DDP_ITEMS_PER_UNIT, DDP_MIN_SEG) if cpu_shaped else (sms * 2048, DDP_GPU_MIN_SEG)
    n_s = max(1, min(_cdiv(want, items), rows // least))
    seg = _cdiv(rows, n_s)
    n_s = _cdiv(rows, seg)
    if cpu_shaped:
        return n_s, seg, Launch("gm_dd_partials_serial", (items * n_s,), (1,))
    groups = max(1, min(_cdiv(items * n_s, DDP_GPU_WG), gpu_geometry.MAX_X))
    return n_s, seg, Launch("gm_dd_partials", (groups * DDP_GPU_WG,), (DDP_GPU_WG,))
