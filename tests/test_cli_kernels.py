"""gpu-mean kernels (issue 38, point 2): the kernels one call would launch, their geometry and the
expanded source each compiler receives, on the reference device (none), an OpenCL device in either
shape and CUDA without a GPU (the plan for a 132-SM GPU)."""
from __future__ import annotations

import pytest

from gpu_mean import cli
from gpu_mean.backends import cuda_compile, opencl
from gpu_mean.kernels import gpu_geometry, reduce_kernels
from gpu_mean.kernels.source import kernel_text
from gpu_mean.runtime import planning

REDUCE = ["--op", "reduce", "--dtype", "f32", "--shape", "4096,16", "--axes", "1"]


def run(capsys, *argv):
    rc = cli.main(["kernels", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def reduce_plan(shape, axes):
    import gpu_mean as gm
    x = gm.TensorDesc(gm.DataType.FLOAT32, shape)
    y = gm.TensorDesc(gm.DataType.FLOAT32, tuple(1 if i in axes else s for i, s in enumerate(shape)))
    return planning.plan_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x, y, axes=axes))


def test_the_reference_device_has_no_kernels(capsys):
    rc, out, _ = run(capsys, "--device", "cpu", *REDUCE)
    assert rc == 0 and "no kernels" in out and "numpy" in out


def test_cuda_without_a_gpu_prints_the_132_sm_plan(capsys, monkeypatch):
    from gpu_mean import backends
    from gpu_mean.errors import UnsupportedError

    def absent(kind, index):
        raise UnsupportedError("create_device: no cuda device is present: test")
    monkeypatch.setattr(backends, "find_backend", absent)
    rc, out, _ = run(capsys, "--device", "cuda", *REDUCE, "--source")
    v = reduce_kernels.gpu_variant(reduce_plan((4096, 16), (1,)), sms=132)
    assert rc == 0 and "132-SM" in out and "opencl_kernels/reduce_gpu.cl" in out
    for launch in (v.main,):      # the launches a CUDA program runs, in order, as grid and block
        assert f"{launch.kernel:<28} grid {launch.grid} block {launch.local_size}" in out
    # no exact pass: the kernels redo what they leave open
    assert not [line for line in out.splitlines() if line.strip().startswith("gm_reduce_exact")]
    # the source is what NVRTC compiles for the variant, byte for byte
    assert out.endswith(cuda_compile.variant_source("reduce_gpu.cl", v.macros))
    assert "__kernel void gm_reduce_row(" in out and '#include "' not in out and "_serial(" not in out
    assert max(v.main.grid) <= gpu_geometry.MAX_X


def test_cuda_lists_the_spread_redo_of_a_long_whole_reduction(capsys, monkeypatch):
    """A whole reduction of 2^26 values on 132 SMs: main pass, finalize pass, then the spread redo
    (reduce_kernels.spread_runs), in that order, with their grids."""
    from gpu_mean import backends
    from gpu_mean.errors import UnsupportedError
    monkeypatch.setattr(backends, "find_backend", lambda k, i: (_ for _ in ()).throw(UnsupportedError("none")))
    rc, out, _ = run(capsys, "--device", "cuda", "--op", "reduce", "--dtype", "f32", "--shape", str(1 << 26))
    v = reduce_kernels.gpu_variant(reduce_plan((1 << 26,), (0,)), sms=132)
    names = [line.split()[0] for line in out.splitlines() if line.startswith("  gm_")]
    assert rc == 0 and names == ["gm_reduce_row", "gm_reduce_finalize", "gm_spread_redo"]
    assert f"gm_spread_redo               grid {v.spread.grid} block {v.spread.local_size}" in out


def test_cuda_element_wise_mean_lists_both_kernels(capsys, monkeypatch):
    from gpu_mean import backends
    from gpu_mean.errors import UnsupportedError
    monkeypatch.setattr(backends, "find_backend", lambda k, i: (_ for _ in ()).throw(UnsupportedError("none")))
    rc, out, _ = run(capsys, "--device", "cuda", "--op", "mean", "--dtype", "f16", "--shape", "1024,1024")
    assert rc == 0 and "gm_ew_contig_vec" in out and "gm_ew_contig_scalar" in out
    assert "elementwise_gpu.cl" in out and "block (256,)" in out


@pytest.mark.skipif(not opencl.discover()[0], reason="no OpenCL device")
@pytest.mark.parametrize("spec", ["opencl:0", "opencl:0-gpupaths"])
def test_opencl_prints_the_programs_launches_and_source(capsys, spec):
    rc, out, _ = run(capsys, "--device", spec, *REDUCE, "--source")
    assert rc == 0
    be = opencl.make_backend(0, gpu_paths=spec.endswith("gpupaths"))
    from gpu_mean.kernels import programs
    v = programs.reduce_variant(be, reduce_plan((4096, 16), (1,)))
    shape = "CPU" if be.cpu_shaped else "GPU"
    assert f"(opencl, {shape} shape)" in out and f"opencl_kernels/{v.file}" in out
    assert f"{v.main.kernel:<28} global {v.main.global_size}" in out
    assert out.endswith(kernel_text("opencl", v.file, v.macros))
    assert ("_serial(" in out) == be.cpu_shaped


def test_a_shape_is_required_and_axes_must_fit(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["kernels", "--device", "cpu", "--shape", "4,x"])
    assert e.value.code == 2
    assert run(capsys, "--device", "cpu")[0] == 2
    rc, _, err = run(capsys, "--device", "cpu", "--shape", "4,4", "--axes", "2")
    assert rc == 2 and "axes" in err
