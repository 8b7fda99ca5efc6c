"""gpu-mean kernels: the kernels one call would launch on a device, their launch geometry and, with
--source, the text each compiler receives (docs/design.md, "Kernels"). Nothing is compiled or run:
the plan, the variant and the launches are the ones the programs compute (kernels/programs.py)."""
from __future__ import annotations

import sys

from .. import backends
from ..backends import cuda_compile
from ..descriptors.types import DataType
from ..errors import DmlError
from ..kernels import elementwise_kernels, programs, reduce_kernels
from ..kernels.source import kernel_text
from ..runtime import planning

GPUPATHS = "-gpupaths"     # the test device (tests/conftest.py): an OpenCL device running the GPU shape
CUDA_SMS = 132      # the GPU the plan is computed for when no CUDA device is present (H100, H200)


def _descriptor(op: str, dt: DataType, shape: tuple, axes: tuple):
    import gpu_mean as gm
    x = gm.TensorDesc(dt, shape)
    if op == "reduce":
        out = tuple(1 if i in axes else s for i, s in enumerate(shape))
        return gm.ReduceDesc(gm.ReduceFunction.AVERAGE, x, gm.TensorDesc(dt, out), axes=axes)
    return gm.ElementWiseMeanDesc(x, gm.TensorDesc(dt, shape), gm.TensorDesc(dt, shape))


def _variant(spec: str, plan):
    """(api, file, variant, launches, note) of ``plan`` on the device ``spec``; launches are
    (kernel, Launch, when) in the order the program runs them."""
    gpupaths = spec.endswith(GPUPATHS)
    kind, index = backends.parse_device(spec.removesuffix(GPUPATHS))
    note = ""
    if kind == "cuda":
        try:
            be = backends.find_backend(kind, index)
            sms, fp64 = be.gpu_sms, be.fp64
        except DmlError:     # no GPU here: CUDA's plan for a 132-SM GPU, as the compile checks build it
            sms, fp64 = CUDA_SMS, True
            note = f"no CUDA device here: the plan for a {CUDA_SMS}-SM GPU (H100, H200)"
        api, cpu_shaped = "cuda", False
        if isinstance(plan, planning.ReducePlan):
            v = reduce_kernels.gpu_variant(plan, sms=sms, fp64=fp64)
        else:
            v = elementwise_kernels.gpu_variant(plan, api="cuda", sms=sms, fp64=fp64)
    else:
        import gpu_mean as gm
        if gpupaths:    # the test device: PoCL running the GPU shape with CUDA's geometry for 132 SMs
            from ..backends import opencl
            be = opencl.make_backend(index, gpu_paths=True)
        else:
            be = gm.create_device(spec).backend
        api, cpu_shaped = "opencl", be.cpu_shaped
        v = (programs.reduce_variant(be, plan) if isinstance(plan, planning.ReducePlan)
             else programs.elementwise_variant(be, plan))
    if isinstance(plan, planning.ReducePlan):
        launches = [(v.main, "main pass")]
        if v.finalize:
            launches.append((v.finalize, "the chunk partials of the split reduction"))
        if v.spread:
            launches.append((v.spread, f"spread redo: the open outputs' {v.spread_runs} runs each, the last "
                                       "one's group adds them and rounds once"))
        fname = v.file
    else:
        launches = [(v.vec, "every operand 16-byte aligned")] if v.vec else []
        launches.append((v.scalar, "otherwise" if v.vec else "always"))
        if v.inplace:
            launches.append((v.inplace, "the output overlaps an input"))
        fname = v.file
    shape = "CPU shape" if cpu_shaped else "GPU shape"
    return api, fname, v, launches, shape, note


def main(device: str, op: str, dtype: str, shape: tuple, axes: tuple | None, source: bool, out=None) -> int:
    out = out or sys.stdout
    dt = DataType[dtype]
    axes = tuple(range(len(shape))) if op == "reduce" and axes is None else tuple(axes or ())
    if any(a >= len(shape) for a in axes):
        print(f"gpu-mean kernels: error: axes {axes} do not fit shape {shape}", file=sys.stderr)
        return 2
    plan = planning.plan_operator(_descriptor(op, dt, shape, axes))
    what = f"REDUCE AVERAGE {dt.name} {shape} axes {axes}" if op == "reduce" else f"MEAN {dt.name} {shape}"
    kind, _ = backends.parse_device(device.removesuffix(GPUPATHS))
    if kind == "cpu":
        print(f"{device}: {what}: no kernels (the numpy reference computes it on the host)", file=out)
        return 0
    api, fname, v, launches, shape_name, note = _variant(device, plan)
    print(f"{device} ({api}, {shape_name}): {what}", file=out)
    if note:
        print(f"  {note}", file=out)
    print(f"  program: opencl_kernels/{fname}, {len(v.macros)} macros", file=out)
    for launch, when in launches:
        if api == "cuda":
            geo = f"grid {launch.grid} block {launch.local_size}"
        else:
            geo = f"global {launch.global_size} local {launch.local_size or 'chosen by the runtime'}"
        print(f"  {launch.kernel:<28} {geo}  ({when})", file=out)
    if source:
        text = cuda_compile.variant_source(fname, v.macros) if api == "cuda" else kernel_text(api, fname, v.macros)
        print(f"---- the text the {'NVRTC' if api == 'cuda' else 'OpenCL'} compiler receives "
              f"({len(text.splitlines())} lines) ----", file=out)
        out.write(text)
    return 0
