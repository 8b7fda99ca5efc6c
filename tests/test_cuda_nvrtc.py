"""Every CUDA kernel variant the programs request, compiled for sm_90 through the backend's own NVRTC
path (gpu_mean.backends.cuda_compile.build: the same options and headers a GPU run uses), then read:
no flush-to-zero on float32 arithmetic, no spills, no 64-bit division in the element-wise index math.
Needs libnvrtc and the CUDA headers, not a GPU or CuPy."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import pytest
from test_cuda_static import f32_ftz_lines, program_variants

from gpu_mean.backends import cuda_compile

CC = 90     # the H200 the CUDA path is verified on


def _missing() -> str | None:
    try:
        cuda_compile.nvrtc()
        cuda_compile.include_dir()
    except cuda_compile.NvrtcError as e:
        return str(e)
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=f"NVRTC or the CUDA headers are absent: {_missing()}")

@cache
def compiled():
    """{variant id: (macros, kernels, CompiledKernel)}, compiled once for the whole module."""
    variants = program_variants()

    def one(v):
        name, fname, macros, kernels = v
        return name, (macros, kernels, cuda_compile.build(fname, macros, CC))

    with ThreadPoolExecutor(2) as ex:
        return dict(ex.map(one, variants))


def test_runtime_options_leave_subnormals_alone():
    opts = cuda_compile.options("sm_90", cuda_compile.include_dir())
    # NVRTC keeps the last value of a repeated option: nothing after ours may turn ftz on
    assert [o for o in opts if "ftz" in o] == ["--ftz=false"]
    assert "--fmad=false" in opts and "--prec-div=true" in opts


def test_every_variant_compiles_for_sm90_without_ftz():
    for name, (_, kernels, out) in compiled().items():
        assert out.cubin, f"{name}: no cubin for sm_{CC}"
        for k in kernels:
            assert f".entry {k}(" in out.ptx, f"{name}: {k} missing from the PTX"
        bad = f32_ftz_lines(out.ptx)
        assert not bad, f"{name}: float32 arithmetic flushes subnormals:\n" + "\n".join(bad[:5])
        assert "warning" not in out.log.lower(), f"{name}: {out.log}"


@pytest.mark.parametrize("variant", ["ew_mean_FLOAT32_2_contig", "ew_scale_bias_FLOAT32_1_strided",
                                     "ew_nary_FLOAT32_5_rows", "red_ReduceDesc_FLOAT32_64x1024_1"])
def test_the_ftz_check_sees_cupys_option(variant):
    # CuPy's RawModule appends -ftz=true to every compile: the check above must catch that PTX in
    # element-wise arithmetic and in the float32 -> float64 conversions of the sums
    name, fname, macros, _ = next(v for v in program_variants() if v[0] == variant)
    rtc = cuda_compile.nvrtc()
    opts = cuda_compile.options(rtc.target(CC), cuda_compile.include_dir()) + ("-ftz=true",)
    out = rtc.compile(cuda_compile.variant_source(fname, macros), opts)
    assert f32_ftz_lines(out.ptx), "compiled with -ftz=true, yet no .ftz float32 instruction was seen"


def test_vector_loads_are_16_bytes():
    for name in ("ew_mean_FLOAT32_2_contig", "ew_mean_FLOAT32_2_rows"):
        assert re.search(r"ld\.global(\.nc)?\.v4\.(f32|b32|u32)", compiled()[name][2].ptx), name
    assert re.search(r"ld\.global(\.nc)?\.v4\.(b32|u32|f32)", compiled()["ew_nary_FLOAT16_64_rows"][2].ptx)


def _resources(name: str) -> dict:
    """{kernel: (registers, stack bytes, spill bytes)} from ptxas's report on one variant."""
    macros = compiled()[name][0]
    rtc = cuda_compile.nvrtc()
    opts = cuda_compile.options(rtc.target(CC), cuda_compile.include_dir()) + ("--ptxas-options=-v",)
    log = rtc.compile(cuda_compile.variant_source("elementwise.cl", macros), opts).log
    out = {}
    for m in re.finditer(r"Function properties for (\w+)\s*\n.*?(\d+) bytes stack frame, (\d+) bytes spill stores, "
                         r"(\d+) bytes spill loads\s*\n.*?Used (\d+) registers", log, re.S):
        out[m.group(1)] = (int(m.group(5)), int(m.group(2)), int(m.group(3)) + int(m.group(4)))
    assert out, log
    return out


@pytest.mark.parametrize("name", ["ew_nary_FLOAT16_64_contig", "ew_nary_FLOAT16_64_strided",
                                  "ew_nary_FLOAT16_64_rows", "ew_nary_FLOAT32_5_strided"])
def test_many_input_mean_does_not_spill(name):
    # loading all 64 vectors before summing took 255 registers and spilled; the strided kernel had a
    # 2 KB stack. Inputs in the outer loop keep VEC accumulators and one vector live.
    for kernel, (regs, stack, spill) in _resources(name).items():
        assert stack == 0 and spill == 0, f"{name} {kernel}: {stack} B stack, {spill} B spilled"
        assert regs <= 64, f"{name} {kernel}: {regs} registers"


def _entry(ptx: str, kernel: str) -> str:
    start = ptx.index(f".entry {kernel}(")
    end = ptx.find(".entry ", start + 1)
    return ptx[start:end if end > 0 else len(ptx)]


@pytest.mark.parametrize("name", ["ew_mean_FLOAT32_2_strided", "ew_nary_FLOAT16_64_strided",
                                  "ew_mean_FLOAT32_2_rows", "ew_add_INT8_2_rows"])
def test_elementwise_index_math_is_32_bit(name):
    _, kernels, out = compiled()[name]
    for k in kernels:
        body = _entry(out.ptx, k)
        # a 64-bit division is a long software sequence per element; sizes this small take the
        # multiply-high division by magic numbers
        assert not re.search(r"\b(div|rem)\.(u|s)64\b", body), f"{name} {k}: 64-bit division"


def test_reduce_kernels_have_no_local_memory():
    for name, (_, kernels, out) in compiled().items():
        if name.startswith("red_"):
            for k in kernels:
                assert ".local" not in _entry(out.ptx, k), f"{name} {k} uses local memory"
