"""The CUDA backend without a GPU: every kernel variant compiles with nvcc, and the host-side
planning (launch geometry, argument packing) is checked as pure functions."""
from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gpu_mean.backends import cuda_geometry as launch
from gpu_mean.backends import cuda_macros
from gpu_mean.backends.kernels import kernel_dir, kernel_source
from gpu_mean.backends.typespell import header
from gpu_mean.descriptors.tensor import packed_strides
from gpu_mean.descriptors.types import DataType as D
from gpu_mean.descriptors.types import KernelOp
from gpu_mean.runtime import planning

NVCC = shutil.which("nvcc")

EW_VARIANTS = [
    ("mean", D.FLOAT32, 2, 1, False), ("mean", D.FLOAT16, 2, 3, False), ("mean", D.INT32, 2, 2, False),
    ("mean", D.UINT32, 2, 8, False), ("add", D.FLOAT16, 2, 1, False), ("add", D.INT8, 2, 2, False),
    ("add", D.UINT64, 2, 1, False), ("identity", D.FLOAT16, 1, 2, False), ("identity", D.FLOAT32, 1, 1, True),
    ("identity", D.FLOAT64, 1, 4, True), ("identity", D.INT16, 1, 1, False), ("nary_mean", D.FLOAT32, 5, 1, False),
    ("nary_mean", D.FLOAT16, 64, 3, False), ("nary_mean", D.INT32, 3, 2, False),
    ("nary_mean", D.UINT32, 7, 1, False),
]


def _plan(shape, axes, dt=D.FLOAT32):
    out_shape = tuple(1 if i in axes else s for i, s in enumerate(shape))
    op = KernelOp.REDUCE_MEAN
    return planning.plan_reduce(op, dt, shape, packed_strides(shape), packed_strides(out_shape), axes)


def _ew_plan(op: str, dt, nin: int, ndim: int, sb: bool):
    """An element-wise plan of ``ndim`` coalesced dimensions (broadcast inputs keep them apart)."""
    shape = (3,) * ndim
    bc = tuple(0 if d % 2 else s for d, s in enumerate(packed_strides(shape)))
    strides = (bc if ndim > 1 else packed_strides(shape),) * nin + (packed_strides(shape),)
    return planning.ElementwisePlan(KernelOp(op), dt, nin, shape, strides, 0.5 if sb else 1.0, 0.0, sb)


RED_VARIANTS = [(D.FLOAT32, (64, 1024), (1,), True), (D.FLOAT16, (8, 100000), (1,), False),
                (D.INT32, (300, 64), (0,), False), (D.UINT32, (6, 5, 7, 3), (0, 2), False),
                (D.FLOAT32, (7, 11, 13), (0, 1, 2), False), (D.FLOAT32, (3, 4), (), False)]


def _sources():
    for op, dt, nin, ndim, sb in EW_VARIANTS:
        m = cuda_macros.ew_macros(_ew_plan(op, dt, nin, ndim, sb))
        yield f"ew_{op}_{dt.name}_{nin}_{ndim}", m, "elementwise.cu"
    for dt, shape, axes, warp in RED_VARIANTS:
        yield f"red_{dt.name}_{len(shape)}_{len(axes)}", cuda_macros.reduce_macros(_plan(shape, axes, dt), 256,
                                                                                   warp, 8), "reduce.cu"


def test_kernel_files_exist():
    assert {p.name for p in kernel_dir("cuda_kernels").glob("*.cu")} == {"elementwise.cu", "reduce.cu"}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_every_cuda_kernel_variant_compiles(tmp_path):
    jobs = []
    for name, macros, fname in _sources():
        src = tmp_path / f"{name}.cu"
        src.write_text(header(macros) + kernel_source("cuda_kernels", fname))
        jobs.append((name, src))

    def compile_one(job):
        name, src = job
        r = subprocess.run([NVCC, "--ptx", "-arch=sm_90", "--std=c++17", "--fmad=false", "-o",
                            str(src.with_suffix(".ptx")), str(src)], capture_output=True, text=True)
        return name, r.returncode, r.stderr

    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(compile_one, jobs))
    failed = [(n, err) for n, rc, err in results if rc != 0]
    assert not failed, "\n".join(f"{n}:\n{err}" for n, err in failed)
    ptx = (tmp_path / "ew_mean_FLOAT32_2_1.ptx").read_text()
    assert "gm_ew_contig_vec" in ptx and re.search(r"ld\.global(\.nc)?\.v4\.f32", ptx)   # 16-byte vector loads


def test_inputs_struct_is_passed_by_value():
    packed = cuda_macros.pack_inputs([16, 32, 48])
    assert packed.dtype.itemsize == 24 and packed.shape == (1,)
    assert list(packed["p"][0]) == [16, 32, 48]
    assert cuda_macros.inputs_struct(64).itemsize == 512   # far below CUDA's 4 KB parameter limit


def test_cuda_ew_grid():
    assert launch.cuda_ew_grid(1000, 4, 256, 132) == (1,)
    assert launch.cuda_ew_grid(1 << 30, 4, 256, 132) == (132 * 8,)


def test_cuda_reduce_geometry_never_one_block():
    g = launch.cuda_reduce_geometry(_plan((1 << 28,), (0,)), sms=132)
    assert g.kernel == "row" and g.n_chunks > 100 and g.grid[1] == g.n_chunks        # full reduction split
    g = launch.cuda_reduce_geometry(_plan((8, 1 << 24), (1,)), sms=132)
    assert not g.warp_rows and g.n_chunks > 1                                          # few long rows split
    g = launch.cuda_reduce_geometry(_plan((1 << 22, 16), (1,)), sms=132)
    assert g.warp_rows and g.n_chunks == 1 and g.grid == ((1 << 22) // 8, 1)          # many short rows
    g = launch.cuda_reduce_geometry(_plan((1 << 20, 16), (0,)), sms=132)
    assert g.kernel == "col" and g.n_chunks > 1 and g.block == (32, 8)                # few outputs: split R
    g = launch.cuda_reduce_geometry(_plan((1024, 65536), (0,)), sms=132)
    assert g.kernel == "col" and g.grid[0] == 2048                                     # many outputs


def test_cuda_macros_integer_add_wraps_through_unsigned():
    m = cuda_macros.ew_macros(_ew_plan("add", D.INT32, 2, 1, False))
    assert m["CT"] == "unsigned long long" and m["FROM_CT(x)"] == "((int)(unsigned int)(x))"
    m = cuda_macros.ew_macros(_ew_plan("identity", D.FLOAT16, 1, 1, False))
    assert m["T"] == "unsigned short" and m["VEC"] == 8
    assert np.dtype(np.float16).itemsize == 2


# --- the argument tuples the CUDA programs pass, checked against the kernels' signatures ---------

def _signatures():
    """{kernel name: [parameter C types]} parsed from the .cu files."""
    sigs = {}
    for fname in ("elementwise.cu", "reduce.cu"):
        src = kernel_source("cuda_kernels", fname)
        for m in re.finditer(r'extern "C" __global__ void (\w+)\(([^)]*)\)', src):
            params = [" ".join(p.replace("__restrict__", "").split()) for p in m.group(2).split(",")]
            sigs[m.group(1)] = [p.rsplit(" ", 1)[0] for p in params]
    return sigs


_SCALARS = {"unsigned long long": np.uint64, "long long": np.int64, "float": np.float32, "int": np.int32}


def _check_args(kernel: str, args):
    sig = _signatures()[kernel]
    assert len(args) == len(sig), f"{kernel}: {len(args)} arguments for {len(sig)} parameters"
    for i, (ctype, arg) in enumerate(zip(sig, args)):
        if ctype.endswith("*"):
            assert isinstance(arg, (np.uint64, _FakeArray)), f"{kernel} arg {i} ({ctype}): {type(arg).__name__}"
        elif ctype.startswith("const gm_inputs"):
            assert isinstance(arg, np.ndarray) and arg.dtype.names == ("p",), f"{kernel} arg {i}: by-value struct"
        else:
            assert type(arg) is _SCALARS[ctype], f"{kernel} arg {i} ({ctype}): {type(arg).__name__}"


class _FakeArray:
    """Stands for a CuPy array of metadata in device memory."""


class _FakeFn:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def __call__(self, grid, block, args, stream=None):
        self.calls.append((self.name, grid, block, args))


class _FakeBackend:
    sms = 132

    def __init__(self):
        self.calls = []
        self.dev = __import__("contextlib").nullcontext()
        self.stream = None

    def function(self, filename, macros, name):
        assert name in _signatures(), name
        return _FakeFn(name, self.calls)

    def device_constant(self, values):
        return _FakeArray()


class _Mem:
    def __init__(self, ptr):
        self.ptr = ptr


@pytest.mark.parametrize("desc_kind", ["contig", "contig_unaligned", "strided", "nary"])
def test_cuda_elementwise_arguments_match_the_kernels(desc_kind):
    import gpu_mean as gm
    from gpu_mean.backends.cuda import CudaElementwiseProgram
    t = gm.TensorDesc(D.FLOAT32, (4, 300))
    if desc_kind == "strided":
        desc = gm.ElementWiseMeanDesc(gm.TensorDesc(D.FLOAT32, (4, 300), (1, 4)), t, t)
    elif desc_kind == "nary":
        desc = gm.ext.NaryMeanDesc((t, t, t), t)
    else:
        desc = gm.ElementWiseMeanDesc(t, t, t)
    be = _FakeBackend()
    prog = CudaElementwiseProgram(be, planning.plan_operator(desc))
    off = 4 if desc_kind == "contig_unaligned" else 0
    prog.run([(_Mem(4096), off)] * len(desc.input_tensors()), [(_Mem(8192), 0)], None)
    (name, grid, block, args), = be.calls
    assert name == {"contig": "gm_ew_contig_vec", "contig_unaligned": "gm_ew_contig_scalar",
                    "strided": "gm_ew_strided", "nary": "gm_ew_contig_vec"}[desc_kind]
    _check_args(name, args)
    assert int(args[0]) == 8192 and list(args[1]["p"][0]) == [4096 + off] * len(desc.input_tensors())
    assert block == (256,) and grid[0] >= 1


@pytest.mark.parametrize("shape,axes", [((64, 1024), (1,)), ((1 << 20,), (0,)), ((300, 64), (0,)),
                                        ((6, 5, 7, 3), (0, 2))])
def test_cuda_reduce_arguments_match_the_kernels(shape, axes):
    import gpu_mean as gm
    from gpu_mean.backends.cuda import CudaReduceProgram
    out = tuple(1 if i in axes else s for i, s in enumerate(shape))
    desc = gm.ReduceDesc(gm.ReduceFunction.AVERAGE, gm.TensorDesc(D.FLOAT32, shape), gm.TensorDesc(D.FLOAT32, out),
                         axes)
    be = _FakeBackend()
    prog = CudaReduceProgram(be, planning.plan_operator(desc))
    tmp = (_Mem(1 << 20), 256) if prog.temporary_size else None
    prog.run([(_Mem(4096), 0)], [(_Mem(8192), 16)], tmp)
    for name, grid, block, args in be.calls:
        _check_args(name, args)
        assert all(g >= 1 for g in grid) and 1 <= int(np.prod(block)) <= 1024
    names = [c[0] for c in be.calls]
    assert names[0].startswith("gm_reduce_") and (names[1:] == ["gm_reduce_finalize"]) == bool(prog.temporary_size)
