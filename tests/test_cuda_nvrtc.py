"""Every CUDA kernel variant the programs request, compiled for sm_90 through the backend's own NVRTC
path (gpu_mean.backends.cuda_compile.build: the same options and headers a GPU run uses), then read:
no flush-to-zero on float32 arithmetic, no spills, no 64-bit division in the element-wise index math.
Needs libnvrtc and the CUDA headers, not a GPU or CuPy. Each check runs with two NVRTCs: the one the
environment's extras installed (NVRTC 13 in CI, from cuda-compile) and NVRTC 12.0 with its headers
from .nvrtc12 (tools/setup.sh installs it; $GPU_MEAN_NVRTC12 names another libnvrtc.so.12), the
oldest NVRTC the cuda12 extra allows. NVRTC 12.0 compiles the reduction variants only (the longest
sources, the ones whose registers, stack and rounding a compiler version is most likely to change;
two thirds of its compile time): the checks of element-wise variants skip on it, saying so. What
this verifies is the compiler's output; no kernel has run
on a GPU here (docs/results/ holds every GPU run there has been)."""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
from conftest import nvrtc_missing
from test_cuda_static import f32_ftz_lines, program_variants

from gpu_mean.backends import cuda_compile

CC = 90     # compute capability 9.0 (H100, H200): the target the compile checks read
NVRTC12 = os.environ.get("GPU_MEAN_NVRTC12") or str(
    Path(__file__).resolve().parents[1] / ".nvrtc12" / "nvidia" / "cuda_nvrtc" / "lib" / "libnvrtc.so.12")
INSTALLS = {"nvrtc-env": None, "nvrtc12.0": NVRTC12}


pytestmark = pytest.mark.skipif(nvrtc_missing() is not None,
                                reason=f"NVRTC or the CUDA headers are absent: {nvrtc_missing()}")


@pytest.fixture(scope="module", params=list(INSTALLS))
def rtc(request):
    """The NVRTC of one installation, as cuda_compile.nvrtc() finds it ($GPU_MEAN_NVRTC first)."""
    path = INSTALLS[request.param]
    if path is not None and not os.path.isfile(path):
        pytest.skip(f"{path} is absent: bash tools/setup.sh installs NVRTC 12.0 there")
    with pytest.MonkeyPatch.context() as mp:
        if path is not None:
            mp.setenv("GPU_MEAN_NVRTC", path)
        cuda_compile.nvrtc.cache_clear()
        try:
            found = cuda_compile.nvrtc()
            assert path is None or found.path == path, found.path
            yield found
        finally:
            cuda_compile.nvrtc.cache_clear()


REPORT = ("--ptxas-options=-v",)   # ptxas's register and spill report in the log; the code is the same


def reductions_only(path: str) -> bool:
    """Whether the NVRTC at ``path`` compiles the reduction variants only (NVRTC 12.0: its element-wise
    variants are short, index arithmetic and one rounding each, and cost a CI minute)."""
    return path == INSTALLS["nvrtc12.0"]


@cache
def compiled(path: str, checked: bool = False):
    """{variant id: (macros, kernels, CompiledKernel)}: every variant (``checked``: its bounds-checked
    build; reductions_only: the reduction variants) compiled once per NVRTC (the one at ``path``, which
    the rtc fixture makes cuda_compile's choice), with the backend's own source and options
    (cuda_compile.build's) plus ptxas's report, so that every check below reads one compile. The tests
    of one NVRTC run in one pytest-xdist worker (tests/conftest.py), which compiles each variant once."""
    assert cuda_compile.nvrtc().path == path
    variants = [v for v in program_variants(checked) if not reductions_only(path) or v[1] == "reduce_gpu.cl"]
    assert variants

    def one(v):
        name, fname, macros, kernels = v
        rtc, src, opts = cuda_compile._compile_inputs(fname, macros, CC, None)
        return name, (macros, kernels, rtc.compile(src, opts + REPORT, fname))

    with ThreadPoolExecutor(2) as ex:
        return dict(ex.map(one, variants))


def entries(ptx: str) -> set:
    """The kernels (.entry) of a PTX text."""
    return set(re.findall(r"^\.(?:visible )?\.?entry (\w+)\(", ptx, re.M))


def compiled_variant(rtc, name: str):
    """compiled(rtc.path)[name]; an element-wise variant on an NVRTC that compiles the reductions only
    skips, saying so (a name compiled by none is still a KeyError)."""
    got = compiled(rtc.path)
    if name not in got and reductions_only(rtc.path) and any(v[0] == name for v in program_variants()):
        pytest.skip(f"NVRTC {rtc.version} compiles the reduction variants only, not {name}")
    return got[name]


def test_runtime_options_leave_subnormals_alone():
    opts = cuda_compile.options("sm_90", cuda_compile.include_dir())
    # NVRTC 12.9 and 13 keep the last value of a repeated option (12.0-12.8 reject a repeat): nothing
    # after ours may turn ftz on
    assert [o for o in opts if "ftz" in o] == ["--ftz=false"]
    assert "--fmad=false" in opts and "--prec-div=true" in opts


def test_every_variant_compiles_for_sm90_without_ftz(rtc):
    # every variant this NVRTC compiles (NVRTC 12.0: the reductions; reductions_only)
    for name, (_, kernels, out) in compiled(rtc.path).items():
        assert out.cubin, f"{name}: no cubin for sm_{CC}"
        # the kernels the program launches and no other (reduce_kernels.KERNEL_FLAGS: NVRTC compiles
        # every kernel in the text, launched or not)
        assert entries(out.ptx) == set(kernels), f"{name}: {sorted(entries(out.ptx))} != {kernels}"
        bad = f32_ftz_lines(out.ptx)
        assert not bad, f"{name}: float32 arithmetic flushes subnormals:\n" + "\n".join(bad[:5])
        assert "warning" not in out.log.lower(), f"{name}: {out.log}"


@pytest.mark.parametrize("variant", ["ew_mean_FLOAT32_2_contig", "ew_scale_bias_FLOAT32_1_strided",
                                     "ew_nary_FLOAT32_5_rows", "red_ReduceDesc_FLOAT32_64x1024_1"])
def test_the_ftz_check_sees_cupys_option(rtc, variant):
    # CuPy's RawModule appends -ftz=true to every compile: the check above must catch that PTX in
    # element-wise arithmetic and in the float32 -> float64 conversions of the sums. Our --ftz=false
    # is taken out rather than overridden: NVRTC 12.0-12.8 refuse an option given twice ("--ftz (-ftz)
    # defined more than once"), so this holds on every NVRTC the extras allow by construction.
    name, fname, macros, _ = next(v for v in program_variants() if v[0] == variant)
    base = cuda_compile.options(rtc.target(CC), cuda_compile.include_dir(rtc.path))
    opts = tuple(o for o in base if not o.startswith("--ftz")) + ("-ftz=true",)
    out = rtc.compile(cuda_compile.variant_source(fname, macros), opts)
    assert f32_ftz_lines(out.ptx), "compiled with -ftz=true, yet no .ftz float32 instruction was seen"


def test_vector_loads_are_16_bytes(rtc):
    for name in ("ew_mean_FLOAT32_2_contig", "ew_mean_FLOAT32_2_rows"):
        assert re.search(r"ld\.global(\.nc)?\.v4\.(f32|b32|u32)", compiled_variant(rtc, name)[2].ptx), name
    assert re.search(r"ld\.global(\.nc)?\.v4\.(b32|u32|f32)", compiled_variant(rtc, "ew_nary_FLOAT16_64_contig")[2].ptx)


def _from_log(log: str) -> dict:
    """{kernel: (registers, stack bytes, spill bytes)} from ptxas's -v report in NVRTC's program log
    (empty when the log holds none: some NVRTC 13 builds leave it empty). A device function compiled
    apart (GM_COLD) has a properties line and no register line; a kernel's frame counts its callees'."""
    out, fn, frame = {}, None, None
    for line in log.splitlines():
        if m := re.search(r"Function properties for (\w+)", line):
            fn, frame = m.group(1), None
        elif fn and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                                    line)):
            frame = (int(m.group(1)), int(m.group(2)) + int(m.group(3)))
        elif fn and frame and (m := re.search(r"Used (\d+) registers", line)):
            out[fn] = (int(m.group(1)), *frame)
            fn = None
    return out


def _depot(body: str) -> int:
    return sum(int(d) for d in re.findall(r"\.local\s.*__local_depot\d+\[(\d+)\]", body))


def _from_cubin(out) -> dict:
    """The same from the cubin's own attributes (cuda_compile.cubin_resources: registers and stack
    frame). The cubin does not count spills apart: they are the frame beyond the local arrays the PTX
    declares (the kernel's __local_depot, and the largest of the device functions' it may call), so
    that difference is given as the spill bytes, an upper bound."""
    res = {}
    funcs = [b for b in re.split(r"(?=\.func\s|\.entry\s)", out.ptx) if b.startswith(".func")]
    callee = max((_depot(b) for b in funcs), default=0)
    for kernel, (regs, frame) in cuda_compile.cubin_resources(out.cubin).items():
        if f".entry {kernel}(" not in out.ptx:
            continue        # a device function's own section, not a kernel
        res[kernel] = (regs, frame, max(0, frame - _depot(_entry(out.ptx, kernel)) - callee))
    return res


def _resources(rtc, name: str) -> dict:
    """{kernel: (registers, stack bytes, spill bytes)} of one variant: ptxas's -v report where NVRTC's
    log holds it, else the cubin's attributes; where neither can be read (no cubin: this NVRTC does
    not know sm_90), the test is skipped saying so, never passed or failed on an empty log."""
    return _read_resources(compiled_variant(rtc, name)[2], name)


def _read_resources(out, name: str) -> dict:
    res = _from_log(out.log)
    if res:
        return res
    if out.cubin:
        res = _from_cubin(out)
        if res:
            return res
    pytest.skip(f"{name}: no register or spill counts to read: NVRTC's log holds no ptxas report "
                f"({len(out.log)} characters) and {'the cubin names no kernel' if out.cubin else 'there is no cubin'}")


def test_cubin_attributes_agree_with_ptxas_report(rtc):
    """The cubin reading (what an NVRTC with an empty log gets) gives ptxas's own figures: registers
    and stack frame of every kernel, spills 0 where ptxas reports none, on a variant with a stack (the
    FLOAT64 exact pass's limbs) and one without. An empty log takes the cubin's path; neither skips."""
    import dataclasses
    variants = compiled(rtc.path)
    # the stackless one: an element-wise variant, or a reduction's without FLOAT64's superaccumulator
    # where this NVRTC compiles the reductions only
    picked = ["ew_nary_FLOAT32_5_strided" if "ew_nary_FLOAT32_5_strided" in variants else
              next(k for k, v in variants.items() if k.startswith("red_") and not v[0].get("GM_X_D")),
              next(k for k, v in variants.items() if k.startswith("red_") and v[0].get("GM_X_D"))]
    for name in picked:
        out = variants[name][2]
        logged = _from_log(out.log)
        if not logged:
            pytest.skip(f"NVRTC {rtc.version} leaves the ptxas report out of its log: nothing to compare with")
        assert _from_cubin(out) == logged, name
        assert _read_resources(dataclasses.replace(out, log=""), name) == logged
        with pytest.raises(pytest.skip.Exception, match="no cubin"):
            _read_resources(dataclasses.replace(out, log="", cubin=b""), name)


@pytest.mark.parametrize("name", ["ew_nary_FLOAT16_64_contig", "ew_nary_FLOAT16_64_strided",
                                  "ew_nary_FLOAT16_64_rows", "ew_nary_FLOAT32_5_strided",
                                  "ew_nary_FLOAT64_64_contig", "ew_nary_FLOAT64_5_rows", "ew_nary_UINT64_64_rows",
                                  "ew_nary_BFLOAT16_64_strided"])
def test_many_input_mean_does_not_spill(rtc, name):
    # loading all 64 vectors before summing took 255 registers and spilled; the strided kernel had a
    # 2 KB stack. Inputs in the outer loop keep VEC accumulators and one vector live. The FLOAT64
    # n-ary mean's exact path (elements whose TwoSum errors' sum rounded, sums past 2^1000 or below
    # 2^-960, inf, NaN) is FLOAT64's superaccumulator, whose 68 limbs live in local memory as in the
    # reduction's exact pass (_float64_exact_pass below): that array and nothing more.
    allowed = XACC_D_BYTES if "FLOAT64" in name else 0
    for kernel, (regs, stack, spill) in _resources(rtc, name).items():
        assert stack <= allowed and spill == 0, f"{name} {kernel}: {stack} B stack, {spill} B spilled"
        assert regs <= 64, f"{name} {kernel}: {regs} registers"


XACC_D_BYTES = 8 * 68 + 8      # exact.h: gm_xacc_d, 68 limbs and the flags word, padded to 8


def test_correctly_rounded_reductions_do_not_spill(rtc):
    """Issue 22, stage 2: the GM_EXACT variants (the bound's m beside the sum, the flags, and the
    redo of an open output inside the kernel that stored it, with its superaccumulator limbs in
    registers; issue 40) compile without stack or spills."""
    seen = {}
    for name, (macros, _kernels, _) in compiled(rtc.path).items():
        if not name.startswith("red_") or not macros.get("GM_EXACT"):
            continue
        res = _resources(rtc, name)
        for kernel, (_regs, stack, spill) in res.items():
            if _float64_superaccumulator(macros, kernel):
                continue    # stage 3: FLOAT64's 68 limbs live in local memory ("stack"), see below
            assert stack == 0 and spill == 0, f"{name} {kernel}: {stack} B stack, {spill} B spilled"
        seen[name] = {k: v[0] for k, v in sorted(res.items())}
    assert any("gm_reduce_row" in r for r in seen.values()) and any("gm_reduce_col" in r for r in seen.values()), seen
    print(f"\ncorrectly rounded reductions on sm_{CC}, registers per kernel: {seen}")


def _float64_superaccumulator(macros: dict, kernel: str) -> bool:
    """FLOAT64's exact sum (issue 22 stage 3, GM_X_D): its superaccumulator has 68 limbs (2046 + 53
    bits and the count), too many for registers, and a value's digits go to limbs chosen at run time,
    so the array lives in CUDA's local memory (the per-thread "stack", cached in L1), touched only
    when an output is redone. Every kernel that may redo an output holds one (issue 40: the kernel
    that stores an output redoes it when the bound leaves it open, no exact pass of its own), and so
    do FLOAT64's exact partials kernel (gm_reduce_limbs), the rounding of their running totals, and
    the spread redo (gm_spread_redo)."""
    return bool(macros.get("GM_X_D")) and kernel in ("gm_reduce_row", "gm_reduce_short", "gm_reduce_col",
                                                     "gm_reduce_general", "gm_reduce_finalize", "gm_reduce_limbs",
                                                     "gm_limbs_round", "gm_spread_redo")


def test_float64_superaccumulator_is_the_only_stack_user(rtc):
    """The exception above is the superaccumulator's alone: in the FLOAT64 GM_EXACT variants no kernel
    uses more stack than one gm_xacc_d, none spills, and the main kernels and the exact partials
    compile (the exact partials in a variant of their own, named _limbs)."""
    seen, kinds = 0, set()
    for name, (macros, _kernels, _) in compiled(rtc.path).items():
        if not name.startswith("red_") or not macros.get("GM_X_D"):
            continue
        res = _resources(rtc, name)
        kinds |= set(res)
        for kernel, (_regs, stack, spill) in res.items():
            limit = XACC_D_BYTES if _float64_superaccumulator(macros, kernel) else 0
            assert stack <= limit and spill == 0, f"{name} {kernel}: {stack} B stack, {spill} B spilled"
        print(f"\n{name}: {res}")
        seen += 1
    assert seen and {"gm_reduce_limbs", "gm_reduce_row", "gm_reduce_col"} <= kinds, kinds


def _entry(ptx: str, kernel: str) -> str:
    start = ptx.index(f".entry {kernel}(")
    ends = [e for e in (ptx.find(".entry ", start + 1), ptx.find(".func ", start + 1)) if e > 0]
    return ptx[start:min(ends, default=len(ptx))]


@pytest.mark.parametrize("name", ["ew_mean_FLOAT32_2_strided", "ew_nary_FLOAT16_64_strided",
                                  "ew_mean_FLOAT32_2_rows", "ew_add_INT8_2_rows"])
def test_elementwise_index_math_is_32_bit(rtc, name):
    _, kernels, out = compiled_variant(rtc, name)
    for k in kernels:
        body = _entry(out.ptx, k)
        # a 64-bit division is a long software sequence per element; sizes this small take the
        # multiply-high division by magic numbers
        assert not re.search(r"\b(div|rem)\.(u|s)64\b", body), f"{name} {k}: 64-bit division"


def test_reduce_kernels_have_no_local_memory(rtc):
    for name, (macros, kernels, out) in compiled(rtc.path).items():
        if name.startswith("red_"):
            for k in kernels:
                if _float64_superaccumulator(macros, k):
                    continue
                assert ".local" not in _entry(out.ptx, k), f"{name} {k} uses local memory"


def test_every_checked_variant_compiles(rtc):
    """The bounds-checked build (GM_CHECKED; opencl:0-checked runs it on PoCL) of every variant compiles
    for CUDA too: the status buffer last, inputs as buffer starts and offsets, the shuffles off. With
    the environment's NVRTC (13 in CI, as on the GPU machines); NVRTC 12.0 compiles the plain reduction
    variants above, and the checked build differs from them only in address arithmetic (a CI minute saved)."""
    if rtc.path == INSTALLS["nvrtc12.0"]:
        pytest.skip("the checked build is compiled by the environment's NVRTC only")
    for name, (_, kernels, out) in compiled(rtc.path, checked=True).items():
        assert entries(out.ptx) == set(kernels), f"{name}: {sorted(entries(out.ptx))} != {kernels}"
        assert "atom.global.cas" in out.ptx or "atom.cas" in out.ptx, f"{name}: no status word CAS"
        assert "shfl" not in out.ptx, f"{name}: a checked build keeps the warp shuffle off"
