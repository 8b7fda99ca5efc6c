"""The element-wise family's kernels (opencl_kernels/elementwise_gpu.cl, elementwise_cpu.cl, both
over elementwise.h) from a plan: one macro builder, one metadata layout (``gm_dims``), one argument
order and one geometry per kernel shape, for the CUDA and the OpenCL backends alike. Pure, so CI
compiles every CUDA variant and runs the GPU-shaped ones on PoCL without a GPU.

Only the way input pointers travel differs by API (the input seam, ``input_seam``): CUDA passes them
by value in one struct (``gm_inputs``: 64 inputs are 512 bytes of parameters, and the kernel indexes
them in a loop without spilling); OpenCL passes a buffer and an element offset per input, or, when
that would pass the device's parameter limit (``CL_DEVICE_MAX_PARAMETER_SIZE``, 1024 bytes
guaranteed), the offsets in a small constant buffer.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..descriptors.types import DataType, KernelOp
from ..runtime import planning
from . import gpu_geometry, opencl_geometry
from .reduce_kernels import Launch, half_through_odd
from .typespell import OP_CODE
from .typespell import OPENCL as spell

D = DataType
INT31 = 1 << 31
VEC_BYTES = 16
RUN = 64            # CPU shape: elements per work-item, general strides
RUN_ROWS = 1024     # CPU shape: elements per work-item when every innermost dimension is dense
FIXED_PARAM_BYTES = 48      # out, out_off, n, meta, scale, bias
WIDE_64 = (D.FLOAT64, D.INT64, D.UINT64)


# ---- the metadata: sizes, magic divisors, strides ------------------------------------------------

def index_is_32bit(plan: planning.ElementwisePlan) -> bool:
    """32-bit index arithmetic is exact when every flat index and every operand offset is below 2^31
    (the magic-number division needs n < 2^31 for its add not to overflow)."""
    if plan.count >= INT31:
        return False
    return all(sum((s - 1) * st for s, st in zip(plan.shape, strides)) < INT31 for strides in plan.strides)


def _wide_strides(plan) -> bool:
    return any(s >= 1 << 32 for st in plan.strides for s in st)


def dims_struct(plan: planning.ElementwisePlan) -> np.dtype:
    """numpy twin of the kernels' ``gm_dims``: sizes, magic divisors, then every operand's strides."""
    idx = np.uint32 if index_is_32bit(plan) else np.uint64
    st = np.uint64 if _wide_strides(plan) else np.uint32
    nd = plan.ndim
    return np.dtype([("size", idx, (nd,)), ("magic", np.uint32, (nd,)), ("shift", np.uint32, (nd,)),
                     ("stride", st, (plan.n_inputs + 1, nd))], align=True)


def magic_divisor(d: int) -> tuple[int, int]:
    """(magic, shift) with n // d == (mul_hi(n, magic) + n) >> shift for 0 <= n < 2^31, 1 <= d < 2^31
    (Granlund and Montgomery's round-up method; the add cannot overflow 32 bits below 2^31)."""
    if not 1 <= d < INT31:
        raise ValueError(f"magic divisor {d} out of range")
    shift = (d - 1).bit_length()
    return ((1 << 32) * ((1 << shift) - d)) // d + 1, shift


def magic_div(n: int, magic: int, shift: int) -> int:
    """The kernels' 32-bit division, on the host (tests compare it with ``//``)."""
    t = (n * magic) >> 32
    return ((t + n) & 0xFFFFFFFF) >> shift


def pack_dims(plan: planning.ElementwisePlan) -> np.ndarray:
    """The metadata as one struct: CUDA passes it by value, OpenCL uploads its bytes as a constant buffer."""
    arr = np.zeros(1, dims_struct(plan))
    arr["size"][0] = plan.shape
    if index_is_32bit(plan):
        arr["magic"][0], arr["shift"][0] = zip(*(magic_divisor(s) for s in plan.shape))
    arr["stride"][0] = plan.strides
    return arr


@functools.cache
def inputs_struct(n_inputs: int, checked: bool = False) -> np.dtype:
    """CUDA's by-value ``gm_inputs``: NIN 64-bit pointers (binding offsets already added); checked:
    the buffers' starts, then the bindings' element offsets."""
    fields = [("p", np.uint64, (n_inputs,))] + ([("off", np.uint64, (n_inputs,))] if checked else [])
    return np.dtype(fields, align=True)


def pack_inputs(pointers, offsets=None) -> np.ndarray:
    """``pointers`` with the offsets added, or (checked) buffer starts and element ``offsets`` apart."""
    arr = np.zeros(1, inputs_struct(len(pointers), offsets is not None))
    arr["p"][0] = pointers
    if offsets is not None:
        arr["off"][0] = offsets
    return arr


# ---- macros ---------------------------------------------------------------------------------------

def offsets_fit(n_inputs: int, max_param_bytes: int) -> bool:
    """Whether OpenCL can pass a buffer and an offset per input within the device's parameter limit."""
    return FIXED_PARAM_BYTES + 16 * n_inputs <= max_param_bytes


def input_seam(api: str, storage: str, n_inputs: int, offsets_in_buffer: bool = False, by_name: bool = False,
               checked: bool = False) -> dict:
    """How the kernel receives its inputs (see the module's docstring); ``storage`` is the element type.
    Kernels address input k as GM_IN_BASE(ins, k) + GM_IN_OFF(ins, k) + index: the buffer's start and
    the binding's element offset, kept apart where the API passes them apart (OpenCL) and in a checked
    build (so that the checker sees the offset: opencl_kernels/common.h); otherwise the base already
    includes the offset and GM_IN_OFF is 0. ``by_name`` (OpenCL's CPU shape, whose kernels name every
    input with a literal index): the macros paste the parameters' names, so that no array of pointers
    exists (PoCL's work-item vectorizer stalls on one: the element-wise kernels lost 15-25 % of their
    bandwidth)."""
    last = {"GM_LAST_IN": n_inputs - 1}
    if api == "cuda":
        base = f"((const {storage}*)(ins)->p[k])"
        return {"GM_INPUT_PARAMS": ", const __grid_constant__ gm_inputs ins_arg",
                "GM_INPUTS_BIND": "const gm_inputs* ins = &ins_arg;", "GM_INPUTS_PARAM": "const gm_inputs*",
                "GM_IN_BASE(ins, k)": base, "GM_IN_OFF(ins, k)": "((ins)->off[k])" if checked else "0", **last}
    if offsets_in_buffer:
        params = ", __constant const ulong* in_offs" + "".join(
            f", __global const {storage}* in{k}" for k in range(n_inputs))
        offs = [f"in_offs[{k}]" for k in range(n_inputs)]
        named_off = "in_offs[k]"
    else:
        params = "".join(f", __global const {storage}* in{k}, ulong off{k}" for k in range(n_inputs))
        offs = [f"off{k}" for k in range(n_inputs)]
        named_off = "GM_PASTE(off, k)"
    # GM_INPUT_ARGS: the parameters' names, to pass them on (the CPU shape's kernels call an inline body)
    args = "".join(", " + p.split()[-1] for p in params.split(",")[1:])
    seam = {"GM_INPUT_PARAMS": params, "GM_INPUT_ARGS": args,
            "FOREACH_INPUT(X)": " ".join(f"X({k})" for k in range(n_inputs)), **last}
    if by_name:
        return {**seam, "GM_INPUTS_BIND": "", "GM_PASTE(a, b)": "a##b", "GM_IN_BASE(ins, k)": "GM_PASTE(in, k)",
                "GM_IN_OFF(ins, k)": named_off}
    names = ", ".join(f"in{k}" for k in range(n_inputs))
    if checked:     # a private struct of buffer starts and offsets (elementwise.cl: gm_cl_inputs)
        return {**seam, "GM_INPUTS_BIND": f"gm_cl_inputs ins_v = {{{{{names}}}, {{{', '.join(offs)}}}}}; "
                                          "const gm_cl_inputs* ins = &ins_v;",
                "GM_INPUTS_PARAM": "const gm_cl_inputs*", "GM_IN_BASE(ins, k)": "((ins)->p[k])",
                "GM_IN_OFF(ins, k)": "((ins)->off[k])"}
    bind = ", ".join(f"in{k} + {o}" for k, o in enumerate(offs))
    return {**seam, "GM_INPUTS_BIND": f"__global const {storage}* ins[NIN] = {{{bind}}};",
            "GM_INPUTS_PARAM": f"__global const {storage}* const*", "GM_IN_BASE(ins, k)": "(ins)[k]",
            "GM_IN_OFF(ins, k)": "0"}


def common_macros(plan: planning.ElementwisePlan, fp64: bool) -> dict:
    """What both shapes share: the operation, the compute and accumulator types, the metadata layout."""
    dt, ct = plan.dtype, plan.compute
    nary = plan.op == KernelOp.NARY_MEAN
    nary_float = nary and dt.is_float
    if nary_float:
        ct = D.FLOAT32 if dt in (D.FLOAT16, D.BFLOAT16) else dt
    # the 64-bit types' n-ary mean accumulates in two words (opencl_kernels/common.h)
    # NARY_WIDE: 1 INT64 / UINT64 (FLOAT64 is correctly rounded: NARY_CR 5, below)
    nary_wide = 0
    if nary and dt in WIDE_64 and dt != D.FLOAT64:
        nary_wide = 1
    acc_t = ("double" if fp64 else "float") if nary_float else spell(ct)
    if nary_wide:
        acc_t = "ulong"
    idx32 = index_is_32bit(plan)
    arith = not plan.bit_copy
    cr = nary_rounding(plan, fp64)
    return {**cr, "OP": OP_CODE[plan.op], "NIN": plan.n_inputs, "NDIM": plan.ndim,
            "IS_FLOAT": int(dt.is_float and arith), "HAS_SCALE_BIAS": int(plan.has_scale_bias),
            "WIDE_COMPUTE": int(dt == D.FLOAT16 and arith), "ACC_DOUBLE": int(nary_float and fp64),
            "IS_BF16": int(dt == D.BFLOAT16 and arith), "NARY_WIDE": nary_wide,
            "WIDE_INT": int(plan.op == KernelOp.MEAN and dt in (D.INT64, D.UINT64)),
            "IS_SIGNED": int(dt == D.INT64),
            "USE_FP64": int((nary_float and fp64) or (dt == D.FLOAT64 and arith)),
            "CT": spell(ct), "ACC_T": acc_t,
            "IDX32": int(idx32), "IDX": "uint" if idx32 else "ulong", "ST": "ulong" if _wide_strides(plan) else "uint",
            "DIMS_BYTES": dims_struct(plan).itemsize}


NARY_FMT = {D.FLOAT32: (1, 24), D.BFLOAT16: (2, 8), D.FLOAT16: (3, 11)}


def nary_rounding(plan: planning.ElementwisePlan, fp64: bool) -> dict:
    """How the float n-ary mean is rounded correctly (elementwise.cl, above GM_XACC): NARY_CR 0 for
    FLOAT16 with fp64 (its FLOAT64 sum is exact), 1 for FLOAT32 and BFLOAT16 with fp64 (the FLOAT64
    sum where the inputs' exponents prove it exact, decided exactly; the superaccumulator otherwise),
    4 for FLOAT16 and BFLOAT16 without fp64 (the FLOAT32 sum where the exponents prove it exact, its
    quotient by k correctly rounded without trusting OpenCL's float division; the superaccumulator
    otherwise; the CPU shape takes it for FLOAT16 with fp64 too), 2 for FLOAT32 without fp64: the
    superaccumulator for every element. NARY_EXP_OK: exponents at most P - p - ceil(log2 k) apart make
    any sum of the k inputs in a format of P bits (53, or 24) exact; that plus one, shifted into the
    exponent field. GM_RCP: 1/k rounded to nearest float, the quotient's first guess. FLOAT64 (which
    exists only with fp64): NARY_CR 5, the TwoSum pair decided exactly, GM_RCP 1/k rounded to double."""
    if plan.op == KernelOp.NARY_MEAN and plan.dtype == D.FLOAT64:
        return {"NARY_CR": 5, "NARY_FMT": 4, "GM_RCP": (1.0 / plan.n_inputs).hex(), "GM_XLIMBS_LOOP": 1}
    if plan.op != KernelOp.NARY_MEAN or plan.dtype not in NARY_FMT:
        return {}
    code, p = NARY_FMT[plan.dtype]
    if plan.dtype == D.FLOAT16 and fp64:
        return {}
    c = (plan.n_inputs - 1).bit_length()
    if not fp64 and plan.dtype != D.FLOAT32:
        return {"NARY_CR": 4, "NARY_FMT": code, "NARY_EXP_OK": (25 - p - c) << 23,
                "GM_RCP": f"{reciprocal_f32(plan.n_inputs).hex()}f"}
    return {"NARY_CR": 1 if fp64 else 2, "NARY_FMT": code, "NARY_EXP_OK": (54 - p - c) << 23}


def reciprocal_f32(k: int) -> float:
    """1/k rounded to nearest float32 (numpy's float32(1/k) rounds twice, through float64)."""
    f = np.float32(1.0 / k)
    cands = [f, np.nextafter(f, np.float32(0)), np.nextafter(f, np.float32(1))]
    return float(min(cands, key=lambda c: abs(Fraction(float(c)) - Fraction(1, k))))


def gpu_macros(plan: planning.ElementwisePlan, api: str, fp64: bool, offsets_in_buffer: bool = False,
               checked: bool = False) -> dict:
    """The GPU shape: elements moved in their storage type (FLOAT16 as its bits in a ushort)."""
    dt = plan.dtype
    m = common_macros(plan, fp64)
    ct = m["CT"]
    if plan.bit_copy:
        ts = spell.unsigned(dt)
        m.update({"TO_CT(x)": "(x)", "FROM_CT(x)": "(x)", "FROM_ACC(x)": "(x)", "CT": ts})
    elif dt == D.FLOAT16:
        ts = "ushort"
        m.update({"TO_CT(x)": "gm_half_to_float(x)", "FROM_CT(x)": "gm_float_to_half(x)",
                  "FROM_ACC(x)": "gm_double_to_half(x)" if m["ACC_DOUBLE"] else "gm_float_to_half(x)"})
    elif dt == D.BFLOAT16:
        ts = "ushort"
        m.update({"TO_CT(x)": "gm_bf16_to_float(x)", "FROM_CT(x)": "gm_float_to_bf16(x)",
                  "FROM_ACC(x)": "gm_double_to_bf16(x)" if m["ACC_DOUBLE"] else "gm_float_to_bf16(x)"})
    elif dt.is_float:
        ts = spell(dt)
        m.update({"TO_CT(x)": "(x)", "FROM_CT(x)": f"(({ts})(x))", "FROM_ACC(x)": f"(({ts})(x))"})
    elif plan.op in (KernelOp.MEAN, KernelOp.NARY_MEAN):
        ts = spell(dt)
        m.update({"TO_CT(x)": f"(({ct})(x))", "FROM_CT(x)": f"(({ts})(x))", "FROM_ACC(x)": f"(({ts})(x))"})
    else:   # integer ADD wraps: compute in ulong, truncate through the unsigned type of the width
        ts = spell(dt)
        m.update({"TO_CT(x)": f"(({ct})(x))", "FROM_CT(x)": f"(({ts})({spell.unsigned(dt)})(x))",
                  "FROM_ACC(x)": f"(({ts})(x))"})
    m.update({"TS": ts, "VEC": VEC_BYTES // int(dt.element_size)})
    m.update(input_seam(api, ts, plan.n_inputs, offsets_in_buffer, checked=checked))
    if checked:
        m["GM_CHECKED"] = 1
    return m


def cpu_vector_width(plan: planning.ElementwisePlan) -> int:
    """Lanes of the CPU shape's compute vector: 16 for FLOAT16 arithmetic (PoCL converts a
    vload_half16 at the copy kernel's speed, a vload_half4 at 0.75-0.95x of it) and BFLOAT16 (its
    rounding on 16 lanes: about 1.3x of 4 lanes' mean on PoCL, 3x for the n-ary mean) and the FLOAT32
    n-ary mean (its exactness test in 16 lanes: PoCL then uses 512-bit registers, and the correctly
    rounded mean runs at the speed of 4 lanes' plain one; on 4 lanes, about 0.5x) and 8 for the
    FLOAT64 n-ary mean (its TwoSum pair and decision: 2.5x of 4 lanes on PoCL), otherwise 4."""
    converts = plan.op in (KernelOp.MEAN, KernelOp.ADD, KernelOp.NARY_MEAN) or \
        (plan.op == KernelOp.IDENTITY and plan.has_scale_bias)
    if plan.op == KernelOp.NARY_MEAN and plan.dtype == D.FLOAT32:
        return 16
    if plan.op == KernelOp.NARY_MEAN and plan.dtype == D.FLOAT64:
        return 8
    return 16 if plan.dtype in (D.FLOAT16, D.BFLOAT16) and converts else 4


def cpu_macros(plan: planning.ElementwisePlan, fp64: bool, offsets_in_buffer: bool = False,
               tuning: opencl_geometry.OpenCLTuning = opencl_geometry.DEFAULT_TUNING, checked: bool = False) -> dict:
    """The CPU shape (OpenCL only): loads convert to the compute type, stores convert back (FLOAT16
    through vload_half/vstore_half_rte, no cl_khr_fp16 needed)."""
    dt = plan.dtype
    m = common_macros(plan, fp64)
    ct = m["CT"]
    vw = cpu_vector_width(plan)
    t, c = spell(dt), ct
    if plan.bit_copy:
        t = c = spell.unsigned(dt)     # FLOAT16 moves as ushort: no conversion
        m["CT"] = c
        vw = 4
        m.update({"LOADV(p)": "vload4(0, p)", "STOREV(v, p)": "vstore4(v, 0, p)", "LOAD1(p)": "(*(p))",
                  "STORE1(s, p)": "(*(p) = (s))"})
    elif dt == D.FLOAT16:
        m.update({"LOADV(p)": f"vload_half{vw}(0, p)", "STOREV(v, p)": f"vstore_half{vw}_rte(v, 0, p)",
                  "LOAD1(p)": "vload_half(0, p)", "STORE1(s, p)": "vstore_half_rte(s, 0, p)"})
    elif dt == D.BFLOAT16:
        t = "ushort"
        wide = m["ACC_DOUBLE"] and plan.op == KernelOp.NARY_MEAN and not m.get("NARY_CR")
        # GM_VLOAD_BF16 (common.h): PoCL splits a vload16 of ushorts into 4-byte inserts
        load = f"GM_VLOAD_BF16({vw}, p)" if vw in (8, 16) else f"vload{vw}(0, p)"
        m.update({"LOADV(p)": f"as_float{vw}(convert_uint{vw}({load}) << 16)",
                  "STOREV(v, p)": f"GM_VSTORE_BF16({vw}, gm_float{vw}_to_bf16(v), p)",     # doubles: below
                  "LOAD1(p)": "gm_bf16_to_float(*(p))",
                  "STORE1(s, p)": f"(*(p) = gm_{'double' if wide else 'float'}_to_bf16(s))"})
    elif dt.is_float:
        m.update({"LOADV(p)": f"vload{vw}(0, p)", "STOREV(v, p)": f"vstore{vw}(convert_{t}{vw}(v), 0, p)",
                  "LOAD1(p)": "(*(p))", "STORE1(s, p)": f"(*(p) = ({t})(s))"})
    elif plan.op in (KernelOp.MEAN, KernelOp.NARY_MEAN):
        m.update({"LOADV(p)": f"convert_{c}4(vload4(0, p))", "STOREV(v, p)": f"vstore4(convert_{t}4(v), 0, p)",
                  "LOAD1(p)": f"(({c})(*(p)))", "STORE1(s, p)": f"(*(p) = ({t})(s))"})
    else:   # integer ADD wraps: compute in ulong, truncate through the unsigned type of the width
        u = spell.unsigned(dt)
        m.update({"LOADV(p)": f"convert_{c}4(vload4(0, p))",
                  "STOREV(v, p)": f"vstore4(as_{t}4(convert_{u}4(v)), 0, p)",
                  "LOAD1(p)": f"(({c})(*(p)))", "STORE1(s, p)": f"(*(p) = as_{t}(convert_{u}(s)))"})
    acc = m["ACC_T"]
    if plan.op == KernelOp.NARY_MEAN and (dt in (D.FLOAT16, D.BFLOAT16) or m.get("NARY_CR") == 4):
        # the FLOAT32 sum proved exact by the exponents (elementwise.cl: NARY_CR 4): FLOAT16 with or
        # without fp64, BFLOAT16 without
        m.update(nary_rounding(plan, False))
        m.update({"ACC_T": "float", "ACC_DOUBLE": 0, "ACCV": f"float{vw}", "TO_ACCV(v)": "(v)",
                  "GM_ODD_FLOAT(v)": half_through_odd("(v)", vw)})
        if dt == D.BFLOAT16:
            # elementwise.cl (GM_NEED_BF16, GM_BF16_VEC_FINITE): sums that may pass FLT_MAX take the
            # exact path; the vector stores then round without the NaN test
            m["GM_NARY_OVF"] = (255 - (plan.n_inputs - 1).bit_length()) << 23
            m["STOREV(v, p)"] = f"GM_VSTORE_BF16({vw}, gm_float{vw}_to_bf16_finite(v), p)"
    elif m.get("NARY_CR") == 1:
        # results come out as floats holding the rounded values: the stores above are exact
        m.update({"ACCV": f"double{vw}", "TO_ACCV(v)": f"convert_double{vw}(v)"})
        # GM_NARROWV: the quotients rounded once to the format (BFLOAT16 through float rounded to odd)
        m["GM_NARROWV(v)"] = (f"as_float{vw}(convert_uint{vw}(gm_float{vw}_to_bf16({half_through_odd('(v)', vw)}))"
                              " << 16)") if dt == D.BFLOAT16 else f"convert_float{vw}(v)"
        # GM_ODDV: 1 in the lanes whose value (in the format) has an odd last bit
        m["GM_ODDV(v)"] = f"((as_int{vw}(v) >> 16) & 1)" if dt == D.BFLOAT16 else f"(as_int{vw}(v) & 1)"
    elif plan.op == KernelOp.NARY_MEAN and dt.is_float and not m["NARY_WIDE"]:
        m.update({"ACCV": f"{acc}{vw}", "TO_ACCV(v)": f"convert_{acc}{vw}(v)"})
        if dt == D.FLOAT16 and acc == "double":
            # through float rounded to odd: one rounding to half, at PoCL's float speed
            m["STOREV(v, p)"] = f"vstore_half{vw}_rte({half_through_odd('v', vw)}, 0, p)"
        elif dt == D.BFLOAT16 and acc == "double":
            # the same: float keeps 16 more bits than bfloat16
            m["STOREV(v, p)"] = f"GM_VSTORE_BF16({vw}, gm_float{vw}_to_bf16({half_through_odd('v', vw)}), p)"
    else:
        m.update({"ACCV": f"{c}{vw}", "TO_ACCV(v)": "(v)"})
    m["VLOADV(o, p)"] = f"vload{vw}(o, p)"
    m.update({"GM_CPU_SHAPE": 1, "T": t, "VW": vw, "CTV": f"{c}{vw}", "UNROLL": 64 // vw, "RUN": RUN,
              "RUN_ROWS": RUN_ROWS, "PREFETCH": opencl_geometry.ew_prefetch(plan, tuning),
              "PF_LINE": max(1, 64 // int(dt.element_size))})
    m.update(input_seam("opencl", t, plan.n_inputs, offsets_in_buffer, by_name=True))
    if checked:
        m["GM_CHECKED"] = 1
    return m


# ---- launches -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ElementwiseVariant:
    macros: dict
    scalar: Launch              # always valid
    vec: Launch | None          # 16-byte vectors: taken when every operand's address is 16-byte aligned
    n: int                      # the third argument: elements, rows or runs
    dims: np.ndarray | None     # the gm_dims struct (strided and rows kernels)
    offsets_in_buffer: bool = False
    inplace: Launch | None = None   # taken when the output overlaps an input (elementwise.cl: *_inplace_serial)

    @property
    def file(self) -> str:
        """The kernel file of the variant's shape (elementwise_gpu.cl; elementwise_cpu.cl: GM_CPU_SHAPE)."""
        return "elementwise_cpu.cl" if self.macros.get("GM_CPU_SHAPE") else "elementwise_gpu.cl"

    def fixed_args(self, scale: float, bias: float, meta) -> tuple:
        """Arguments 2.. up to the inputs: n, the metadata (when the kernel takes it), scale, bias."""
        head = (np.uint64(self.n),) + ((meta,) if self.dims is not None else ())
        return head + (np.float32(scale), np.float32(bias))


# Every __kernel of elementwise_gpu.cl sits under one of these flags, and a variant turns on only the
# kernels its program launches (as reduce_kernels.KERNEL_FLAGS: NVRTC compiles every kernel in the text)
KERNEL_FLAGS = ("K_CONTIG", "K_ROWS", "K_ROWS_VEC", "K_STRIDED")


def kernel_flags(*on: str) -> dict:
    """The KERNEL_FLAGS macros: 1 for the kernels named in ``on``, 0 for the rest."""
    assert set(on) <= set(KERNEL_FLAGS), on
    return {f: int(f in on) for f in KERNEL_FLAGS}


def gpu_variant(plan: planning.ElementwisePlan, *, api: str, sms: int, fp64: bool = True,
                max_param_bytes: int = 4096, checked: bool = False) -> ElementwiseVariant:
    """The GPU-shaped kernels with the shared geometry (gpu_geometry's element-wise launches);
    ``checked``: the bounds-checked build (gpu_mean/kernels/checked.py)."""
    in_buf = api == "opencl" and not offsets_fit(plan.n_inputs, max_param_bytes)
    m = gpu_macros(plan, api, fp64, in_buf, checked)
    vec, block = m["VEC"], gpu_geometry.BLOCK
    if plan.contiguous:
        m.update(kernel_flags("K_CONTIG"))
        return ElementwiseVariant(
            m, _launch("gm_ew_contig_scalar", gpu_geometry.ew_grid(plan.count, 1, block, sms), (block,)),
            _launch("gm_ew_contig_vec", gpu_geometry.ew_grid(plan.count, vec, block, sms), (block,)),
            plan.count, None, in_buf)
    if gpu_geometry.ew_uses_rows(plan):
        rows_vec = gpu_geometry.ew_rows_vectorizable(plan)
        m.update(kernel_flags("K_ROWS", *(("K_ROWS_VEC",) if rows_vec else ())))
        v = _launch("gm_ew_rows_vec", *gpu_geometry.ew_rows_geometry(plan, vec, sms)) if rows_vec else None
        return ElementwiseVariant(m, _launch("gm_ew_rows_scalar", *gpu_geometry.ew_rows_geometry(plan, 1, sms)), v,
                                  plan.count // plan.shape[-1], pack_dims(plan), in_buf)
    m.update(kernel_flags("K_STRIDED"))
    return ElementwiseVariant(m, _launch("gm_ew_strided", gpu_geometry.ew_grid(plan.count, 1, block, sms), (block,)),
                              None, plan.count, pack_dims(plan), in_buf)


def cpu_variant(plan: planning.ElementwisePlan, *, fp64: bool, max_param_bytes: int,
                tuning: opencl_geometry.OpenCLTuning = opencl_geometry.DEFAULT_TUNING,
                checked: bool = False) -> ElementwiseVariant:
    """The serial vector kernels for OpenCL CPU devices: 64 contiguous elements per work-item
    (measured on PoCL: 4 % above 32 and 10 % above 8 for copy and mean), runs along rows otherwise."""
    in_buf = not offsets_fit(plan.n_inputs, max_param_bytes)
    m = cpu_macros(plan, fp64, in_buf, tuning, checked)
    # the vector loops' second pass (GM_REDO) reads the inputs again: in place, the *_inplace_serial kernels
    redo = plan.op == KernelOp.NARY_MEAN and m.get("NARY_CR") in (1, 4, 5)
    nt = nt_stores(plan, m, tuning, checked)
    if nt:
        m.update(nt)
    if plan.contiguous:
        g, local = opencl_geometry.ew_contig_geometry(plan.count, m["VW"] * m["UNROLL"])
        inplace = Launch("gm_ew_contig_inplace_serial", g, local) if redo else None
        vec = Launch("gm_ew_contig_nt_serial", g, local) if nt else None
        return ElementwiseVariant(m, Launch("gm_ew_contig_serial", g, local), vec, plan.count, None, in_buf, inplace)
    run = RUN_ROWS if plan.rows_dense else RUN
    n_runs = plan.count // plan.shape[-1] * -(-plan.shape[-1] // run)
    g, local = opencl_geometry.round_up_geometry(n_runs, 64)
    name = "gm_ew_rows_serial" if plan.rows_dense else "gm_ew_strided_serial"
    inplace = Launch("gm_ew_rows_inplace_serial", g, local) if redo and plan.rows_dense else None
    # the rows kernel's runs start at a row's start plus a multiple of RUN_ROWS: aligned where every
    # outer stride of the output is a multiple of 16 bytes (the vector launch checks the address)
    rows_nt = nt and plan.rows_dense and all(st * int(plan.dtype.element_size) % 16 == 0
                                             for st in plan.strides[-1][:-1])
    vec = Launch("gm_ew_rows_nt_serial", g, local) if rows_nt else None
    return ElementwiseVariant(m, Launch(name, g, local), vec, n_runs, pack_dims(plan), in_buf, inplace)


def nt_stores(plan: planning.ElementwisePlan, m: dict, tuning: opencl_geometry.OpenCLTuning,
              checked: bool) -> dict | None:
    """The streaming-store macros of the CPU shape (elementwise.cl: STOREV_NT, GM_NT_T) where the
    output has at least ``tuning.nt_store_min_bytes``: the non-temporal store of the value the vector
    store writes. A plain vstore (FLOAT32, FLOAT64, the integer types) stores it as it is; FLOAT16's
    vstore_half converts into a private vector first (PoCL keeps it in registers: measured 1.27x on a
    FLOAT16 mean of 256 MB arrays), BFLOAT16's bits go as they are. Not in the checked build (an
    access outside the bounds goes to the status buffer's sink, whose alignment the streaming store
    must not assume)."""
    if checked or plan.count * int(plan.dtype.element_size) < tuning.nt_store_min_bytes or m["VW"] < 2:
        return None
    vw, store = m["VW"], m["STOREV(v, p)"]

    def halves(vec_t: str, value: str) -> str:
        # two stores of half a vector each (16 bytes): the operands are only 16-byte aligned (a row of
        # 2072 BFLOAT16 is 4144 bytes, 16 modulo 32), and a 32-byte streaming store at such an address
        # faults (PoCL, x86: vmovntdq ymm): a segmentation fault, tests/test_nt_stores.py
        return (f"{{ {vec_t}{vw} gm_nt_v = ({value}); __builtin_nontemporal_store(gm_nt_v.lo, (__global gm_nt_t*)(p)); "
                f"__builtin_nontemporal_store(gm_nt_v.hi, (__global gm_nt_t*)(p) + 1); }}")
    half_t = lambda t: t if vw == 2 else f"{t}{vw // 2}"   # noqa: E731
    if got := re.fullmatch(rf"vstore{vw}\((.*), 0, p\)", store):
        return {"STOREV_NT(v, p)": halves(m["T"], got.group(1)), "GM_NT_T": half_t(m["T"])}
    if got := re.fullmatch(rf"vstore_half{vw}_rte\((.*), 0, p\)", store):
        return {"STOREV_NT(v, p)": f"{{ ushort{vw} gm_nt_h; vstore_half{vw}_rte({got.group(1)}, 0, (half*)&gm_nt_h); "
                                   + halves("ushort", "gm_nt_h") + " }", "GM_NT_T": half_t("ushort")}
    if got := re.fullmatch(rf"GM_VSTORE_BF16\({vw}, (.*), p\)", store):
        return {"STOREV_NT(v, p)": halves("ushort", got.group(1)), "GM_NT_T": half_t("ushort")}
    return None


def _launch(kernel: str, grid: tuple, block: tuple) -> Launch:
    """A launch from CUDA's (grid, block), in OpenCL's terms."""
    block = tuple(block) + (1,) * (len(grid) - len(block))
    return Launch(kernel, tuple(g * b for g, b in zip(grid, block)), block)

