"""The CUDA backend without a GPU: the kernel variants the programs ask for, their arguments checked
against the kernels' signatures, the by-value structs and the magic-number division.

``program_variants()`` builds every program of a list of operators on a recording backend, so the
(file, macros, kernel) triples compiled by tests/test_cuda_nvrtc.py are the ones a GPU would build."""
from __future__ import annotations

import contextlib
import ctypes
import re
import shutil
import subprocess
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fake_cupy import CPointer

import gpu_mean as gm
from gpu_mean.backends import cuda
from gpu_mean.backends.cuda import CudaBackend
from gpu_mean.backends.cuda_compile import BASE_OPTIONS, variant_source
from gpu_mean.descriptors.types import DataType as D
from gpu_mean.descriptors.types import KernelOp
from gpu_mean.kernels import elementwise_kernels as ewk
from gpu_mean.kernels import programs, reduce_kernels
from gpu_mean.kernels.programs import ReduceProgram
from gpu_mean.kernels.source import assembled, kernel_dir
from gpu_mean.runtime import planning

NVCC = shutil.which("nvcc")
SHAPE = (4, 300)
LAYOUTS = {"contig": None, "rows": (0, 1), "strided": (1, 4)}     # input strides of a (4, 300) tensor


def _t(dt, strides=None, shape=SHAPE):
    return gm.TensorDesc(dt, shape, strides)


def _ew_desc(kind: str, dt, layout: str, nin: int = 2):
    a, out = _t(dt, LAYOUTS[layout]), _t(dt)
    if kind == "mean":
        return gm.ElementWiseMeanDesc(a, _t(dt), out)
    if kind == "ext_mean":
        return gm.ext.MeanDesc(a, _t(dt), out)
    if kind == "add":
        return gm.ElementWiseAddDesc(a, _t(dt), out)
    if kind == "identity":
        return gm.ElementWiseIdentityDesc(a, out)
    if kind == "scale_bias":
        return gm.ElementWiseIdentityDesc(a, out, gm.ScaleBias(0.5, 1.0))
    return gm.ext.NaryMeanDesc((a,) + (_t(dt),) * (nin - 1), out)


EW_CASES = [("mean", D.FLOAT32, 2), ("mean", D.FLOAT16, 2), ("mean", D.INT32, 2), ("mean", D.UINT32, 2),
            ("add", D.FLOAT16, 2), ("add", D.INT8, 2), ("add", D.UINT64, 2), ("identity", D.FLOAT16, 1),
            ("identity", D.INT16, 1), ("scale_bias", D.FLOAT32, 1), ("scale_bias", D.FLOAT64, 1),
            ("nary", D.FLOAT32, 5), ("nary", D.FLOAT16, 64), ("nary", D.INT32, 3), ("nary", D.UINT32, 7),
            # the extension types (issue 21)
            ("ext_mean", D.BFLOAT16, 2), ("ext_mean", D.FLOAT64, 2), ("ext_mean", D.INT64, 2),
            ("ext_mean", D.UINT64, 2), ("nary", D.BFLOAT16, 64), ("nary", D.FLOAT64, 5), ("nary", D.FLOAT64, 64),
            ("nary", D.INT64, 3), ("nary", D.UINT64, 64)]

# (descriptor class, dtype, shape, axes): row (warp and block per row), row over interleaved axes,
# col, general, split (finalize) and unsplit, the wide sum and the integer mean
RED_CASES = [(gm.ReduceDesc, D.FLOAT32, (64, 1024), (1,)), (gm.ReduceDesc, D.FLOAT16, (8, 100000), (1,)),
             # short rows (gm_reduce_short): the span proof (FLOAT32, BFLOAT16), FLOAT16's exact sums,
             # FLOAT64's superaccumulator, an integer mean, the wide sum's two words
             (gm.ReduceDesc, D.FLOAT32, (4096, 8), (1,)), (gm.ReduceDesc, D.FLOAT16, (4096, 16), (1,)),
             (gm.ext.ReduceMeanDesc, D.BFLOAT16, (4096, 8), (1,)), (gm.ext.ReduceMeanDesc, D.FLOAT64, (4096, 32), (1,)),
             (gm.ext.IntegerReduceMeanDesc, D.INT32, (4096, 5), (1,)), (gm.ext.ReduceSumDesc, D.INT64, (4096, 8), (1,)),
             (gm.ReduceDesc, D.FLOAT32, (1 << 20,), (0,)), (gm.ReduceDesc, D.FLOAT16, (64, 3, 3136), (0, 2)),
             (gm.ReduceDesc, D.FLOAT32, (300, 64), (0,)), (gm.ReduceDesc, D.FLOAT32, (7, 11, 13), (0, 1, 2)),
             (gm.ReduceDesc, D.FLOAT32, (6, 5, 7, 3), (0, 2)), (gm.ReduceDesc, D.FLOAT32, (3, 4), ()),
             (gm.ext.IntegerReduceMeanDesc, D.INT32, (300, 64), (0,)),
             (gm.ext.IntegerReduceMeanDesc, D.UINT32, (6, 5, 7, 3), (0, 2)),
             (gm.ext.ReduceSumDesc, D.FLOAT32, (64, 1024), (1,)),
             # the extension types (issue 21): row, split row (finalize), col, general
             (gm.ext.ReduceMeanDesc, D.BFLOAT16, (64, 1024), (1,)),
             (gm.ext.ReduceMeanDesc, D.BFLOAT16, (300, 64), (0,)),
             (gm.ext.ReduceMeanDesc, D.FLOAT64, (1 << 20,), (0,)), (gm.ext.ReduceMeanDesc, D.FLOAT64, (300, 64), (0,)),
             (gm.ext.ReduceMeanDesc, D.FLOAT64, (6, 5, 7, 3), (0, 2)),
             (gm.ext.ReduceMeanDesc, D.INT64, (8, 100000), (1,)), (gm.ext.ReduceMeanDesc, D.INT64, (300, 64), (0,)),
             (gm.ext.ReduceMeanDesc, D.UINT64, (7, 11, 13), (0, 1, 2)),
             (gm.ext.ReduceSumDesc, D.BFLOAT16, (64, 1024), (1,)),
             # the wide sum's two-word totals (GM_WIDE_SUM: the low word's output): row, split row
             # (finalize), col, general
             (gm.ext.ReduceSumDesc, D.FLOAT64, (64, 1024), (1,)), (gm.ext.ReduceSumDesc, D.FLOAT64, (1 << 20,), (0,)),
             (gm.ext.ReduceSumDesc, D.FLOAT64, (300, 64), (0,)), (gm.ext.ReduceSumDesc, D.INT64, (8, 100000), (1,)),
             (gm.ext.ReduceSumDesc, D.INT64, (6, 5, 7, 3), (0, 2)), (gm.ext.ReduceSumDesc, D.UINT64, (1 << 20,), (0,)),
             (gm.ext.ReduceSumDesc, D.UINT64, (300, 64), (0,))]
LOW_WORD = {D.FLOAT64: D.FLOAT64, D.INT64: D.UINT64, D.UINT64: D.UINT64}


def reduce_desc(cls, dt, shape, axes):
    out_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    out_dt = {D.FLOAT32: D.FLOAT64, D.FLOAT16: D.FLOAT64, D.BFLOAT16: D.FLOAT64}.get(dt, dt) \
        if cls is gm.ext.ReduceSumDesc else dt
    x, y = gm.TensorDesc(dt, shape), gm.TensorDesc(out_dt, out_shape)
    if cls is gm.ext.ReduceSumDesc and dt in LOW_WORD:      # the two-word total: its low word too
        return cls(x, y, axes, gm.TensorDesc(LOW_WORD[dt], out_shape))
    return cls(gm.ReduceFunction.AVERAGE, x, y, axes) if cls is gm.ReduceDesc else cls(x, y, axes)


def outputs_of(plan, mem, off):
    """The output bindings a program's run takes: the wide sum's two-word totals have two."""
    return [(mem, off)] * (len(plan.tensors) - 1 if isinstance(plan, planning.ReducePlan) else 1)


def is_wide_sum(plan) -> bool:
    return isinstance(plan, planning.ReducePlan) and reduce_kernels.wide_sum(plan)


def all_plans():
    """(id, plan) for every case: the operators above, and plans too big for a test to allocate that
    take 64-bit index arithmetic (strided and rows kernels)."""
    for kind, dt, nin in EW_CASES:
        for layout in LAYOUTS:
            yield f"ew_{kind}_{dt.name}_{nin}_{layout}", planning.plan_operator(_ew_desc(kind, dt, layout, nin))
    for cls, dt, shape, axes in RED_CASES:
        yield f"red_{cls.__name__}_{dt.name}_{'x'.join(map(str, shape))}_{''.join(map(str, axes))}", \
            planning.plan_operator(reduce_desc(cls, dt, shape, axes))
    big = 1 << 31
    yield "ew_mean_FLOAT32_2_strided64", planning.ElementwisePlan(
        KernelOp.MEAN, D.FLOAT32, 2, (1 << 20, 1 << 12), ((1, 1 << 20),) * 2 + ((1 << 12, 1),))
    yield "ew_nary_FLOAT16_3_rows64", planning.ElementwisePlan(
        KernelOp.NARY_MEAN, D.FLOAT16, 3, (3, big), ((0, 1),) * 3 + ((big, 1),))


# --- a backend that records what the programs ask for ------------------------------------------

class FakeFn:
    def __init__(self, name, calls, stream):
        self.name, self.calls, self.stream = name, calls, stream

    def __call__(self, grid, block, args, stream=None):
        self.calls.append((self.name, grid, block, args, stream))


class FakeMem:
    def __init__(self, ptr, nbytes):
        self.ptr, self.data = ptr, np.zeros(nbytes, np.uint8)


class FakeBackend(CudaBackend):
    """The CUDA backend's own kernel verbs (kernel, launch, buffer_arg, struct_arg, input_seam),
    over a recording ``function`` and host memory instead of CuPy and a GPU."""
    sms = 132
    cc = 90

    def __init__(self, checked: bool = False):
        self.calls, self.requests = [], []
        self.cp = types.SimpleNamespace(cuda=types.SimpleNamespace(function=types.SimpleNamespace(CPointer=CPointer)))
        self.dev = contextlib.nullcontext()
        self.stream = object()
        self.checked = checked
        self.info = gm.DeviceInfo("cuda", 0, "fake", "NVIDIA", "GPU", 0, True, True, variant="checked")
        self.log = []       # the order of launches and status buffer traffic (a checked backend)

    def function(self, filename, macros, name):
        assert name in signatures(self.checked), name
        self.requests.append((filename, macros, name))
        return FakeFn(name, self.calls, self.stream)

    # the verbs a checked program's status buffer uses
    def alloc(self, nbytes):
        return FakeMem(1 << 40, nbytes)

    def write(self, mem, offset, data):
        self.log.append("arm")
        raw = np.asarray(data).view(np.uint8).ravel()
        mem.data[offset:offset + raw.size] = raw

    def read(self, mem, offset, nbytes):
        self.log.append(f"read after {self.calls[-1][0]}")
        return mem.data[offset:offset + nbytes].copy()


def make_program(be, plan):
    return be.compile(plan, 0)


def program_variants(checked: bool = False):
    """[(id, filename, macros, kernel names)] for every case, as the programs request them: each
    program's one variant (the exact partials' program, of the same plan, with the suffix _limbs)."""
    out = []
    for name, plan in all_plans():
        be = FakeBackend(checked)
        make_program(be, plan)
        groups = [("", be.requests)]
        if (isinstance(plan, planning.ReducePlan) and reduce_kernels.exact_mean(plan, True)
                and reduce_kernels.limbs_ok(plan)):
            n = len(be.requests)
            prog = programs.LimbsProgram(be, plan)     # the exact partials (gm_reduce_limbs), a variant of their own
            for name_ in ("gm_limbs_add", "gm_limbs_round"):    # their combine on the device (LimbsTotals)
                be.kernel(prog.variant.file, prog.variant.macros, name_)
            groups = [("", be.requests[:n]), ("_limbs", be.requests[n:])]
        for suffix, reqs in groups:
            fname, macros, _ = reqs[0]
            assert all(r[0] == fname and r[1] == macros for r in reqs)
            out.append((name + suffix, fname, macros, sorted({r[2] for r in reqs})))
    for dt in reduce_kernels.DDP_TYPES:     # gpu_mean.dask's double-double partials (gm_dd_partials)
        be = FakeBackend(checked)
        programs.DDPartialsProgram(be, dt)
        (fname, macros, kname), = be.requests
        out.append((f"ddp_{dt.name}", fname, macros, [kname]))
    return out


# float32 arithmetic whose PTX carries a .ftz modifier when flushing is on
F32_ARITH = re.compile(r"^\s*(?:@%p\d+\s+)?(add|sub|mul|div|fma|rcp|sqrt|min|max|abs|neg|cvt|setp|testp)"
                       r"[.\w]*\.f32\b.*$", re.M)


def f32_ftz_lines(ptx: str) -> list[str]:
    return [m.group(0).strip() for m in F32_ARITH.finditer(ptx) if ".ftz" in m.group(0)]


def test_kernel_files_exist():
    # every family is portable (opencl_kernels/*.cl): cuda_kernels/ holds the dialect, no second
    # implementation of an operator
    assert {p.name for p in kernel_dir("cuda_kernels").iterdir()} == {"dialect.h"}
    assert {p.name for p in kernel_dir("opencl_kernels").glob("*.cl")} == {"elementwise_gpu.cl", "elementwise_cpu.cl",
                                                                            "reduce_gpu.cl", "reduce_cpu.cl"}


def test_every_class_of_program_is_covered():
    kernels = {k for *_, names in program_variants() for k in names}
    assert kernels == set(signatures()), set(signatures()) - kernels


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_kernels_compile_with_nvcc_too(tmp_path):
    # NVRTC is what runs (tests/test_cuda_nvrtc.py, which needs libnvrtc and compiles every variant
    # with the environment's NVRTC, the reduction variants with NVRTC 12.0 too, and the bounds-checked
    # builds with one); nvcc compiles every reduction variant
    # (the longest sources) with the backend's own option list, and its PTX must not flush either

    def one(v):
        name, fname, macros, _ = v
        src = tmp_path / f"{name}.cu"
        src.write_text(variant_source(fname, macros))
        r = subprocess.run([NVCC, "--ptx", "-arch=sm_90", *BASE_OPTIONS, "-o", str(src.with_suffix(".ptx")),
                            str(src)], capture_output=True, text=True)
        return name, r.returncode, r.stderr, src.with_suffix(".ptx")

    with ThreadPoolExecutor(2) as ex:
        for name, rc, err, ptx in ex.map(one, [v for v in program_variants() if v[1] == "reduce_gpu.cl"]):
            assert rc == 0, f"{name}:\n{err}"
            assert not f32_ftz_lines(ptx.read_text()), f"{name}: .ftz on float32 arithmetic"


def test_structs_are_passed_by_value():
    packed = ewk.pack_inputs([16, 32, 48])
    assert packed.dtype.itemsize == 24 and packed.shape == (1,)
    assert list(packed["p"][0]) == [16, 32, 48]
    plan = planning.plan_operator(_ew_desc("nary", D.FLOAT16, "strided", 64))
    # within the 4 KB every CUDA driver accepts for kernel parameters, pointers included
    assert ewk.dims_struct(plan).itemsize + ewk.inputs_struct(64).itemsize + 64 <= 4096
    dims = ewk.pack_dims(plan)
    assert list(dims["size"][0]) == list(plan.shape) and dims["stride"][0].tolist() == [list(s) for s in plan.strides]


@pytest.mark.parametrize("d", [1, 2, 3, 7, 10, 300, 641, 65535, 65536, 99991, (1 << 30) + 3, (1 << 31) - 1])
def test_magic_division_matches_integer_division(d):
    magic, shift = ewk.magic_divisor(d)
    assert 0 < magic < 1 << 32
    rng = np.random.default_rng(d)
    ns = [0, 1, d - 1, d, d + 1, 2 * d - 1, (1 << 31) - 1] + [int(x) for x in rng.integers(0, 1 << 31, 2000)]
    for n in ns:
        if n < 1 << 31:
            assert ewk.magic_div(n, magic, shift) == n // d, (n, d)


def test_index_width_follows_the_offsets():
    small = planning.plan_operator(_ew_desc("mean", D.FLOAT32, "strided"))
    assert ewk.gpu_macros(small, "cuda", True)["IDX"] == "uint"
    big = planning.ElementwisePlan(KernelOp.MEAN, D.FLOAT32, 2, (1 << 20, 1 << 12),
                                   ((1, 1 << 20), (1, 1 << 20), (1 << 12, 1)))
    m = ewk.gpu_macros(big, "cuda", True)
    assert m["IDX"] == "ulong" and m["IDX32"] == 0 and m["ST"] == "uint"


def test_integer_add_wraps_through_unsigned():
    m = ewk.gpu_macros(planning.plan_operator(_ew_desc("add", D.INT32, "contig")), "cuda", True)
    assert m["CT"] == "ulong" and m["FROM_CT(x)"] == "((int)(uint)(x))"
    m = ewk.gpu_macros(planning.plan_operator(_ew_desc("identity", D.FLOAT16, "contig")), "cuda", True)
    assert m["TS"] == "ushort" and m["VEC"] == 8


# --- the argument tuples the CUDA programs pass, checked against the kernels' signatures ---------

def signatures(checked: bool = False, wide: bool = False, exact: bool = False, spread: bool = False):
    """{kernel name: [parameter types]} of every kernel CUDA compiles: the GPU-shaped kernels of the
    portable files (the CPU-shaped *_serial kernels are OpenCL's only). The input seam
    (GM_INPUT_PARAMS) is CUDA's by-value ``gm_inputs``, the metadata argument its struct; a checked
    build's kernels take the status buffer last (GM_CHK_P); ``wide``: the wide sum's two-word totals
    (reduce_meta.h's GM_WIDE_SUM), whose kernels take the low word's pointer and offset before it;
    ``exact``: the correctly rounded means (GM_EXACT), whose finalize pass takes the input too
    (GM_FIN_IN: it redoes the outputs it leaves open); ``spread``: a split of few long outputs
    (K_SPREAD), whose finalize pass zeroes the spread redo's arrival counts (GM_FIN_CNT)."""
    sigs = {}
    for fname in ("elementwise_gpu.cl", "reduce_gpu.cl"):
        for m in re.finditer(r"__kernel void (\w+)\(((?:[^()]|\([^()]*\))*)\)", assembled(fname)):
            if m.group(1).endswith("_serial"):
                continue
            text = m.group(2).replace("GM_INPUT_PARAMS", ", gm_inputs ins")
            lo = ", LO_T* gm_lo, ulong gm_lo_off" if wide and fname == "reduce_gpu.cl" else ""
            text = text.replace("GM_CHK_P", lo + (", long* gm_chk" if checked else ""))
            text = text.replace("GM_FIN_IN", ", T* in, ulong in_off" if exact else "")
            text = text.replace("GM_FIN_CNT", ", int* cnt, ulong cnt_off" if spread else "")
            params = [" ".join(p.replace("restrict", "").replace("__global", "").replace("const ", "").split())
                      for p in re.split(r",(?![^()]*\))", text)]
            sigs[m.group(1)] = [re.sub(r"GM_META_ARG\((\w+), \w+\)", r"\1 meta", p).rsplit(" ", 1)[0]
                                for p in params]
    return sigs


_SCALARS = {"unsigned long long": np.uint64, "long long": np.int64, "float": np.float32, "int": np.int32,
            "ulong": np.uint64, "long": np.int64}
_STRUCTS = {"gm_inputs": ("p",), "gm_dims": ("size", "magic", "shift", "stride"),
            "gm_rmeta": ("keep_shape", "keep_in", "keep_out", "red_shape", "red_in", "depth")}


def check_args(kernel: str, args, checked: bool = False, wide: bool = False, exact: bool = False,
               spread: bool = False):
    sig = signatures(checked, wide, exact, spread)[kernel]
    assert len(args) == len(sig), f"{kernel}: {len(args)} arguments for {len(sig)} parameters"
    for i, (ctype, arg) in enumerate(zip(sig, args)):
        if ctype.endswith("*"):
            assert isinstance(arg, np.uint64), f"{kernel} arg {i} ({ctype}): {type(arg).__name__}"
        elif ctype in _STRUCTS:
            # CuPy's pointer argument over the struct's bytes, holding them (CudaBackend.struct_arg)
            packed = getattr(arg, "packed", None)
            assert packed is not None and arg.ptr == cuda.struct_address(packed), \
                f"{kernel} arg {i}: {type(arg).__name__}"
            if isinstance(packed, ctypes.Array):    # the inputs' pointers, as CudaInputSeam packs them
                assert ctype == "gm_inputs" and not checked and packed._type_ is ctypes.c_uint64, \
                    f"{kernel} arg {i}: {ctype} as {type(packed).__name__}"
                continue
            arg = packed
            fields = ("p", "off") if checked and ctype == "gm_inputs" else _STRUCTS[ctype]
            if wide and ctype == "gm_rmeta":
                fields += ("keep_lo",)
            assert isinstance(arg, np.ndarray) and arg.shape == (1,) and arg.dtype.names == fields, \
                f"{kernel} arg {i}: the by-value struct {ctype}"
        else:
            assert type(arg) is _SCALARS[ctype], f"{kernel} arg {i} ({ctype}): {type(arg).__name__}"


class Mem:
    def __init__(self, ptr):
        self.ptr = ptr


@pytest.mark.parametrize("name,plan", list(all_plans()), ids=[n for n, _ in all_plans()])
def test_arguments_match_the_kernels_and_launch_on_the_backend_stream(name, plan):
    be = FakeBackend()
    prog = make_program(be, plan)
    tmp = (Mem(1 << 20), 256) if prog.temporary_size else None
    for off in (0, 4):   # aligned and unaligned bindings
        n_in = plan.n_inputs if isinstance(plan, planning.ElementwisePlan) else 1
        prog.run([(Mem(4096), off)] * n_in, outputs_of(plan, Mem(8192), off), tmp)
    assert be.calls
    for kname, grid, block, args, stream in be.calls:
        check_args(kname, args, wide=is_wide_sum(plan), exact=bool(prog.variant.macros.get("GM_EXACT")),
                   spread=bool(getattr(prog.variant, "spread", None)))
        # no table in device memory: every argument is a pointer to a binding or a value (the
        # stride table that was uploaded on CuPy's current stream is gone)
        assert stream is be.stream
        assert all(g >= 1 for g in grid) and 1 <= int(np.prod(block)) <= 1024
    names = [c[0] for c in be.calls]
    if isinstance(prog, ReduceProgram):
        assert ("gm_reduce_finalize" in names) == (prog.variant.finalize is not None)
        # the correctly rounded means: no exact pass of its own (the kernels redo what they leave
        # open), so one launch, or two for a split reduction; a split of few long outputs spreads
        # its open ones' redo over the device: a launch more
        spread = ["gm_spread_redo"] if prog.variant.spread else []
        per_run = ["gm_reduce_main"] + (["gm_reduce_finalize"] if prog.variant.finalize else []) + spread
        assert "gm_reduce_exact" not in names
        assert [n if n in per_run else "gm_reduce_main" for n in names] == per_run * 2
    elif name.endswith("contig"):
        assert names == ["gm_ew_contig_vec", "gm_ew_contig_scalar"]


@pytest.mark.parametrize("name,plan", list(all_plans()), ids=[n for n, _ in all_plans()])
def test_checked_programs_pass_the_status_buffer_and_read_it_after_every_launch(name, plan):
    be = FakeBackend(checked=True)
    prog = make_program(be, plan)
    assert all(m["GM_CHECKED"] == 1 for _, m, _ in be.requests)
    tmp = (Mem(1 << 20), 256) if prog.temporary_size else None
    n_in = plan.n_inputs if isinstance(plan, planning.ElementwisePlan) else 1
    prog.run([(Mem(4096), 16)] * n_in, outputs_of(plan, Mem(8192), 32), tmp)
    kernels = [c[0] for c in be.calls]
    # armed once; again before the spread redo, whose partials argument is its limbs
    assert be.log == ["arm"] + [x for k in kernels for x in (["arm"] if k == "gm_spread_redo" else [])
                                + [f"read after {k}"]]
    for kname, _, _, args, _ in be.calls:
        check_args(kname, args, checked=True, wide=is_wide_sum(plan), exact=bool(prog.variant.macros.get("GM_EXACT")),
                   spread=bool(getattr(prog.variant, "spread", None)))
        assert int(args[-1]) == 1 << 40     # the status buffer, last
    if isinstance(plan, planning.ElementwisePlan):    # buffer starts and element offsets apart
        ins = be.calls[0][3][-2].packed
        assert ins.dtype.names == ("p", "off") and list(ins["p"][0]) == [4096] * n_in
        assert list(ins["off"][0]) == [16 // int(plan.dtype.element_size)] * n_in


def test_a_checked_program_raises_the_recorded_violation():
    plan = planning.plan_operator(reduce_desc(*RED_CASES[0]))
    be = FakeBackend(checked=True)
    prog = make_program(be, plan)
    real_read = be.read

    def read(mem, offset, nbytes):     # the kernel recorded: argument 1 (the output), index 64
        rec = np.zeros(8, np.int64)
        rec[:6] = (1 | 3 << 32, 1, 64, 1, 0, 64)
        mem.data[:64] = rec.view(np.uint8)
        return real_read(mem, offset, nbytes)
    be.read = read
    with pytest.raises(gm.KernelBoundsError, match=r"gm_reduce_\w+ accessed output element 64 outside its bounds "
                                                   r"\[0, 64\).*3 out-of-bounds") as e:
        prog.run([(Mem(4096), 0)], [(Mem(8192), 0)], (Mem(1 << 20), 0) if prog.temporary_size else None)
    assert e.value.argument == "output" and e.value.index == 64 and e.value.bounds == (0, 64)
    assert len(be.calls) == 1     # nothing launched after the violation


def test_the_exact_partials_are_one_program_per_type_and_rank():
    """The GPU shape's exact partials (gm_reduce_limbs and its combine) use none of the main kernels'
    geometry: plans of one type and rank but of other shapes and classes (rows of 1024, of 8, columns)
    share one program, where their main kernels are programs of their own."""
    def plans(dt):
        cls = gm.ReduceDesc if dt in (D.FLOAT32, D.FLOAT16) else gm.ext.ReduceMeanDesc
        return [planning.plan_operator(reduce_desc(cls, dt, shape, axes))
                for shape, axes in (((64, 1024), (1,)), ((4096, 8), (1,)), ((300, 64), (0,)))]
    for dt in (D.FLOAT32, D.FLOAT16, D.BFLOAT16, D.FLOAT64):
        ps = [p for p in plans(dt) if reduce_kernels.limbs_ok(p)]
        limbs = {repr(sorted(reduce_kernels.limbs_variant(p, cpu_shaped=False, fp64=True, sms=132).macros.items()))
                 for p in ps}
        mains = {repr(sorted(reduce_kernels.gpu_variant(p, sms=132).macros.items())) for p in ps}
        assert len(ps) == 3 and len(limbs) == 1 and len(mains) == 3, dt
