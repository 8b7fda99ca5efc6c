"""One kernel source for both APIs: the text the OpenCL compiler receives for a GPU-shaped reduction
and the text NVRTC receives for the same plan differ only in the dialect header between the
variant's macros and the kernel file; the file itself (reduce_gpu.cl with its includes in place,
opencl_kernels/common.h among them), and so every rounding, overflow, chunking and
finalize step, is byte for byte the same. Needs an OpenCL device and NVRTC with the CUDA headers."""
from __future__ import annotations

import pytest
from test_cuda_nvrtc import nvrtc_missing
from test_cuda_static import RED_CASES, reduce_desc

import gpu_mean as gm
from gpu_mean.backends import cuda_compile, opencl
from gpu_mean.kernels import reduce_kernels
from gpu_mean.kernels.source import assembled, kernel_source
from gpu_mean.kernels.typespell import header
from gpu_mean.runtime import planning

# the OpenCL side is pyopencl's: without it (a minimal install, a GPU machine with CUDA only) skip, not fail
pyopencl = pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install 'gpu_mean[opencl]')")

pytestmark = [pytest.mark.skipif(not opencl.discover()[0], reason="no OpenCL device"),
              pytest.mark.skipif(nvrtc_missing() is not None, reason="NVRTC or the CUDA headers are absent")]


class Recorded(Exception):
    """NVRTC was handed a source (recorded, not compiled)."""


@pytest.fixture
def sources(monkeypatch):
    """Every source handed to pyopencl.Program and to NVRTC while the fixture is active."""
    seen = {"opencl": [], "cuda": []}
    monkeypatch.setenv("GPU_MEAN_CACHE_DIR", "off")     # every program compiled from its text, none loaded
    real_program = pyopencl.Program

    def program(ctx, src):
        seen["opencl"].append(src)
        return real_program(ctx, src)

    def compile_(self, source, options, name="gm_kernel.cu"):
        seen["cuda"].append(source)      # the text is what is compared: NVRTC's compile of it is
        raise Recorded                   # test_cuda_nvrtc.py's (a CI minute saved)

    monkeypatch.setattr(pyopencl, "Program", program)
    monkeypatch.setattr(cuda_compile.Nvrtc, "compile", compile_)
    return seen


@pytest.mark.parametrize("case", RED_CASES, ids=lambda c: f"{c[0].__name__}_{c[1].name}_{c[2]}_{c[3]}")
def test_nvrtc_and_opencl_receive_the_same_kernel_file(sources, case):
    plan = planning.plan_operator(reduce_desc(*case))
    # a fresh backend, so that its program cache builds (and the OpenCL compiler sees) this variant
    dev = gm.Device(opencl.make_backend(0, gpu_paths=True))
    dev.compile_operator(dev.create_operator(reduce_desc(*case)))
    macros = reduce_kernels.gpu_variant(plan, sms=opencl.GPUPATHS_SMS).macros
    with pytest.raises(Recorded):
        cuda_compile.build(reduce_kernels.GPU_FILE, macros, 90)
    (cl_src,) = [s for s in sources["opencl"] if "gm_reduce" in s]     # not discovery's probe kernel
    (cu_src,) = sources["cuda"]
    body = assembled(reduce_kernels.GPU_FILE)     # reduce_gpu.cl with its includes in place
    cl_dialect, cu_dialect = kernel_source("opencl_kernels", "dialect.h"), kernel_source("cuda_kernels", "dialect.h")
    assert cl_src == header(macros) + cl_dialect + body
    assert cu_src == header(macros) + cu_dialect + body
    # and the GPU-shaped kernels are what both compile: the CPU-shaped ones are not in their text
    assert "gm_reduce_row(" in body and "_serial(" not in body and "GM_CPU_SHAPE" not in header(macros)
    assert body.startswith("// The reductions' GPU-shaped kernels")
    assert kernel_source("opencl_kernels", "common.h") in body
