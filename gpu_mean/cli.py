"""gpu-mean: run the mean operators on the best device present and say how correct and how fast they are.

Exit codes: 0 success; 1 a conformance or demo check failed; 2 a usage error (a bad option or
value, a device that is not present); 3 the device failed while running.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from . import __version__

OPS = ("mean", "add", "identity", "reduce", "nary", "int_reduce", "ext_mean", "ext_reduce")
DTYPE_ALIASES = {"f32": "FLOAT32", "f16": "FLOAT16", "f64": "FLOAT64", "bf16": "BFLOAT16"}
# what profile times: the types of the mean operators, DirectML's and the extension's
MEAN_DTYPES = ("FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64", "INT32", "UINT32", "INT64", "UINT64")
EXIT_FAILED, EXIT_USAGE, EXIT_DEVICE = 1, 2, 3


def _device(spec: str) -> str:
    """The device string, checked against the devices present, so a typo is one line, not a traceback."""
    from . import backends
    from .errors import DmlError
    try:
        kind, index = backends.parse_device(spec)
        backends.find_backend(kind, index)
    except DmlError as e:
        present = ", ".join(["auto"] + [i.id for i in backends.list_devices()])
        msg = str(e).split(": ", 1)[-1].split(" (HRESULT")[0]
        raise argparse.ArgumentTypeError(f"{spec!r}: {msg} (present: {present})") from e
    return spec


def _level(text: str):
    from .descriptors.types import FeatureLevel
    name = "FL_" + text.strip().upper().removeprefix("FL_").removeprefix("FL").replace(".", "_")
    if name not in FeatureLevel.__members__:
        raise argparse.ArgumentTypeError(f"{text!r} is not a feature level; choose from "
                                         + ", ".join(f.label for f in FeatureLevel))
    return FeatureLevel[name]


def _dtype(text: str) -> str:
    from .descriptors.types import DataType
    name = DTYPE_ALIASES.get(text.lower(), text.upper())
    valid = [d.name for d in DataType if d.name not in ("UNKNOWN", "UINT4", "INT4")]
    if name not in valid:
        raise argparse.ArgumentTypeError(f"{text!r} is not a data type; choose from f32, f16, bf16, f64, "
                                         + ", ".join(valid))
    return name


def _mean_dtype(text: str) -> str:
    name = _dtype(text)
    if name not in MEAN_DTYPES:
        raise argparse.ArgumentTypeError(f"{text!r}: profile times the mean operators' types; choose from f32, f16, "
                                         "bf16, f64, int32, uint32, int64, uint64")
    return name


def _positive(kind):
    def check(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
        return v
    return check


def _int_list(text: str, example: str) -> tuple:
    parts = text.split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated non-negative integers, e.g. {example}")
    return tuple(int(p) for p in parts)


def _shape(text: str) -> tuple:
    v = _int_list(text, "64,1024,256")
    if any(x == 0 for x in v) or len(v) > 8:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 to 8 sizes, each at least 1, e.g. 64,1024,256")
    return v


def _axes(text: str) -> tuple:
    v = _int_list(text, "0,2")
    if len(set(v)) != len(v):
        raise argparse.ArgumentTypeError(f"{text!r}: each axis at most once, e.g. 0,2")
    return v


PEERS = ("numpy", "onnxruntime", "openvino", "cupy", "torch")
PEER_MODULES = {"numpy": ("numpy",), "onnxruntime": ("onnxruntime", "onnx"), "openvino": ("openvino",),
                "cupy": ("cupy",), "torch": ("torch",)}
PROFILE_OPS = ("mean", "nary", "reduce")   # what profile times; the copy kernel and IDENTITY are not a choice
DATA_KINDS = ("normal", "uniform", "ones", "centered")   # profile --data: checks/profiler.py DATA_KINDS


def _importable(*modules) -> bool:
    import importlib
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:   # absent, or present and broken: either way it cannot run
            return False
    return True


def _peers(text: str) -> set:
    names = {x.strip().lower() for x in text.split(",") if x.strip()}
    bad = names - set(PEERS)
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(PEERS)}")
    return names


def cmd_devices(args) -> int:
    from . import backends
    status = backends.backend_status()
    for info in backends.list_devices(probe=True):
        if info.unavailable:
            print(f"{info.id:10s} {info.name} | unavailable: {info.unavailable}")
            continue
        print(f"{info.id:10s} {info.name} | vendor {info.vendor} | {info.device_type} | "
              f"{info.global_memory / 2**30:.1f} GiB | fp16 {'yes' if info.fp16 else 'storage only'} | "
              f"fp64 {'yes' if info.fp64 else 'no'} | max feature level {info.max_feature_level.label}")
    for kind, reason in status.items():
        if reason:
            print(f"{kind:10s} absent: {reason}")
    return 0


def _usage(cmd: str, msg: str) -> int:
    print(f"gpu-mean {cmd}: error: {msg}", file=sys.stderr)
    return EXIT_USAGE


def cmd_conformance(args) -> int:
    why = args.json and _folder_problem(args.json)
    if why:
        return _usage("conformance", f"--json {args.json}: {why}")
    from .checks import conformance
    return conformance.main(args.device, args.feature_level, args.quick, args.json, args.op, args.dtype)


def _folder_problem(path: str) -> str | None:
    """Why a file cannot be written at ``path`` (None when it can), checked before any work."""
    import os
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"{path!r} is a folder"
    if not os.path.isdir(folder):
        return f"the folder {folder!r} does not exist"
    if not os.access(folder, os.W_OK):
        return f"the folder {folder!r} is not writable"
    return None


def cmd_profile(args) -> int:
    if args.axes is not None and args.shape is None:
        return _usage("profile", "--axes needs --shape")
    if args.shape and args.axes and max(args.axes) >= len(args.shape):
        return _usage("profile", f"--axes {','.join(map(str, args.axes))} out of range for a "
                      f"{len(args.shape)}-D --shape: axes are 0 to {len(args.shape) - 1}")
    for opt, path in (("--json", args.json), ("--plot", args.plot)):
        why = path and _folder_problem(path)
        if why:
            return _usage("profile", f"{opt} {path}: {why}")
    if args.plot and not _importable("matplotlib"):
        return _usage("profile", "--plot needs matplotlib, which is not installed (pip install 'gpu_mean[plot]')")
    if isinstance(args.peers, set):
        missing = sorted(p for p in args.peers if not _importable(*PEER_MODULES[p]))
        if missing:
            present = [p for p in PEERS if _importable(*PEER_MODULES[p])]
            return _usage("profile", f"--peers {','.join(missing)}: not installed; installed peers: "
                          f"{', '.join(present) or 'none'}")
    from .checks import profile_report
    return profile_report.main(args.device, args.size_mb, args.repeat, args.peers, args.op, args.dtype,
                               args.shape, args.axes, args.sweep, args.json, args.plot, data=args.data)


def cmd_kernels(args) -> int:
    from .checks import kernel_listing
    if args.shape is None:
        return _usage("kernels", "give --shape, e.g. --shape 4096,16")
    if args.access:
        from .checks import access_model
        return access_model.main(args.op, args.dtype, args.shape, args.axes, data=args.data, json_path=args.json,
                                 index=_opencl_index(args.device))
    return kernel_listing.main(args.device or "auto", args.op, args.dtype, args.shape, args.axes, args.source)


def _opencl_index(spec: str | None) -> int:
    """The OpenCL device the access model runs on: N of opencl:N[-gpupaths], else 0."""
    from . import backends
    if spec and spec.startswith("opencl"):
        return backends.parse_device(spec)[1]
    return 0


def _kernel_device(spec: str) -> str:
    """A device present (opencl:N-gpupaths: the test device running the GPU shape), or cuda[:N] without
    one (the plan then is CUDA's for a 132-SM GPU)."""
    if spec.endswith("-gpupaths"):
        return _device(spec.removesuffix("-gpupaths")) + "-gpupaths"
    if spec.split(":")[0].split("-")[0] == "cuda":
        from . import backends
        from .errors import DmlError
        try:
            backends.parse_device(spec)
        except DmlError as e:
            raise argparse.ArgumentTypeError(f"{spec!r}: {str(e).split(': ', 1)[-1]}") from e
        return spec
    return _device(spec)


def cmd_demo(args) -> int:
    from .checks import demo
    return demo.main(args.device)


DEVICE_HELP = "auto, cpu, opencl[:N] or cuda[:N] (default: $GPU_MEAN_DEVICE, else auto: cuda, else opencl, else cpu)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-mean", description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gpu-mean {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{demo,devices,conformance,profile,kernels}")
    d = sub.add_parser("demo", help="the main job: build, run and check a few operators, a quick "
                       "conformance pass and a short profile on the best device, in plain words")
    d.add_argument("--device", type=_device, default=None, help=DEVICE_HELP)
    sub.add_parser("devices", help="list the devices present and why an absent backend is absent")
    c = sub.add_parser("conformance", help="support table and accuracy of every operator on a device")
    c.add_argument("--device", type=_device, default=None, help=DEVICE_HELP)
    c.add_argument("--feature-level", type=_level, default=None, help="e.g. 3.0; default: the device's maximum")
    c.add_argument("--quick", action="store_true", help="1-D, 4-D and the largest rank only, smaller shapes")
    c.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    c.add_argument("--op", type=str.lower, choices=OPS, action="append", help="only this operation (repeatable)")
    c.add_argument("--dtype", type=_dtype, action="append", help="only this data type (repeatable)")
    pr = sub.add_parser("profile", help="time the kernels against the device's measured read bandwidth and "
                        "the peers")
    pr.add_argument("--device", type=_device, default=None, help=DEVICE_HELP)
    pr.add_argument("--op", type=str.lower, choices=PROFILE_OPS, action="append",
                    help="only this operation (repeatable; default all)")
    pr.add_argument("--dtype", type=_mean_dtype, action="append",
                    help="f32, f16, bf16, f64, int32, uint32, int64 or uint64 (repeatable; default f32 and f16); "
                    "a type the device has no kernel for is listed as skipped with the reason")
    pr.add_argument("--shape", type=_shape, default=None, help="one input shape, e.g. 64,1024,256 (default: a "
                    "shape per performance class, --size-mb per input)")
    pr.add_argument("--axes", type=_axes, default=None, help="reduction axes for --shape, e.g. 0,2")
    pr.add_argument("--size-mb", type=_positive(float), default=256.0, help="bytes of one float32 input, MiB "
                    "(the largest size with --sweep; default %(default)g)")
    pr.add_argument("--sweep", action="store_true", help="sizes from 16 KiB to 4x the last-level cache "
                    "(capped by --size-mb)")
    pr.add_argument("--repeat", type=_positive(int), default=10, help="timed samples per case and contender, "
                    "in interleaved rounds; median and spread reported (default %(default)s)")
    pr.add_argument("--peers", nargs="?", const=True, default=False, type=_peers, metavar="LIST",
                    help="also time the peers present (numpy, onnxruntime, openvino, cupy, torch), or only those "
                    "listed, e.g. --peers cupy,torch")
    pr.add_argument("--data", choices=DATA_KINDS, default="normal",
                    help="what the inputs hold (seeded): normal (default), uniform on [0, 1), ones, or centered "
                         "(normal minus its mean over the reduced axes: the exact pass's worst case)")
    pr.add_argument("--json", metavar="FILE", help="write every number as JSON")
    pr.add_argument("--plot", metavar="FILE.png", help="plot bandwidth against size (needs matplotlib)")
    k = sub.add_parser("kernels", help="the kernels one call would launch, their geometry and (--source) the "
                       "text each compiler receives; compiles and runs nothing")
    k.add_argument("--device", type=_kernel_device, default=None, help=DEVICE_HELP + "; cuda without a GPU: the "
                   "plan for a 132-SM GPU")
    k.add_argument("--op", type=str.lower, choices=("reduce", "mean"), default="reduce",
                   help="reduce: REDUCE AVERAGE over --axes; mean: the element-wise mean of two inputs of --shape")
    k.add_argument("--dtype", type=_dtype, default="FLOAT32", help="f32, f16, bf16, f64, ... (default f32)")
    k.add_argument("--shape", type=_shape, default=None, help="the input shape, e.g. 4096,16")
    k.add_argument("--axes", type=_axes, default=None, help="reduction axes, e.g. 1 (default: all)")
    k.add_argument("--source", action="store_true", help="also print the fully expanded source the compiler "
                   "receives (the variant's macros, the dialect header, the kernel file with its includes)")
    k.add_argument("--access", action="store_true", help="run the call once on opencl:N-gpupaths built checked in "
                   "its trace mode and print the access model: per kernel and load site the 32-byte sectors each "
                   "warp instruction touches against the minimum, and work-groups per SM on an H100/H200 "
                   "(docs/design.md, \"The access model\"); exit 1 when a main-pass load is below 0.9")
    k.add_argument("--data", choices=DATA_KINDS, default="normal", help="with --access: what the input holds")
    k.add_argument("--json", metavar="FILE", help="with --access: also write the model as JSON")
    return p


def _env_device() -> str | None:
    """The problem with $GPU_MEAN_DEVICE when a command would use it (None when there is none)."""
    import os
    spec = os.environ.get("GPU_MEAN_DEVICE")
    if not spec:
        return None
    try:
        _device(spec)
    except argparse.ArgumentTypeError as e:
        return f"GPU_MEAN_DEVICE={e}"
    return None


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "device", "no device") is None:
        why = _env_device()
        if why:
            return _usage(args.cmd, why)
    # pyopencl warns on every kernel build that printed anything (PoCL's clang notes): nothing a user acts on
    warnings.filterwarnings("ignore", message="Non-empty compiler output")
    from .errors import DmlError
    try:
        return {"devices": cmd_devices, "conformance": cmd_conformance, "profile": cmd_profile,
                "demo": cmd_demo, "kernels": cmd_kernels}[args.cmd](args)
    except DmlError as e:   # a device that fails after it was found: one line, not a traceback
        print(f"gpu-mean {args.cmd}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_DEVICE
    except OSError as e:    # e.g. --json into a folder that does not exist
        print(f"gpu-mean {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
