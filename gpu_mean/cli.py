"""gpu-mean: run the mean operators on the best device present and say how correct and how fast they are.

Exit codes: 0 success; 1 a conformance or demo check failed; 2 a usage error (a bad option or
value, a device that is not present); 3 the device failed while running.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from . import __version__

OPS = ("mean", "add", "identity", "reduce", "nary", "int_reduce")
DTYPE_ALIASES = {"f32": "FLOAT32", "f16": "FLOAT16", "f64": "FLOAT64"}
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
        raise argparse.ArgumentTypeError(f"{text!r} is not a data type; choose from f32, f16, "
                                         + ", ".join(valid))
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


def _ints(text: str) -> tuple:
    try:
        v = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give comma-separated integers, e.g. 64,1024,256") from None
    if not v or any(x < 0 for x in v):
        raise argparse.ArgumentTypeError(f"{text!r}: give non-negative integers, e.g. 64,1024,256")
    return v


PEERS = ("numpy", "onnxruntime", "cupy", "torch")


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
    from .tools import conformance
    return conformance.main(args.device, args.feature_level, args.quick, args.json, args.op, args.dtype)


def cmd_profile(args) -> int:
    from .tools import profile_report
    if args.axes is not None and args.shape is None:
        return _usage("profile", "--axes needs --shape")
    if args.shape and args.axes and max(args.axes) >= len(args.shape):
        return _usage("profile", f"--axes {list(args.axes)} out of range for a {len(args.shape)}-D --shape")
    return profile_report.main(args.device, args.size_mb, args.repeat, args.peers, args.op, args.dtype,
                               args.shape, args.axes, args.sweep, args.json, args.plot)


def cmd_demo(args) -> int:
    from .tools import demo
    return demo.main(args.device)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-mean", description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"gpu-mean {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{demo,devices,conformance,profile}")
    d = sub.add_parser("demo", help="the main job: build, run and check a few operators, a quick "
                       "conformance pass and a short profile on the best device, in plain words")
    d.add_argument("--device", type=_device, default=None, help="auto (default): cuda, else opencl, else cpu")
    sub.add_parser("devices", help="list the devices present and why an absent backend is absent")
    c = sub.add_parser("conformance", help="support table and accuracy of every operator on a device")
    c.add_argument("--device", type=_device, default=None, help="auto (default), cpu, opencl[:N], cuda[:N]")
    c.add_argument("--feature-level", type=_level, default=None, help="e.g. 3.0; default: the device's maximum")
    c.add_argument("--quick", action="store_true", help="1-D, 4-D and the largest rank only, smaller shapes")
    c.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    c.add_argument("--op", type=str.lower, choices=OPS, action="append", help="only this operation (repeatable)")
    c.add_argument("--dtype", type=_dtype, action="append", help="only this data type (repeatable)")
    pr = sub.add_parser("profile", help="time the kernels against the device's copy kernel and the peers")
    pr.add_argument("--device", type=_device, default=None)
    pr.add_argument("--op", type=str.lower, choices=OPS, action="append", help="only this operation (repeatable)")
    pr.add_argument("--dtype", type=_dtype, action="append", help="f32 or f16 (repeatable; default both)")
    pr.add_argument("--shape", type=_ints, default=None, help="one input shape, e.g. 64,1024,256 (default: a "
                    "shape per performance class, --size-mb per input)")
    pr.add_argument("--axes", type=_ints, default=None, help="reduction axes for --shape, e.g. 0,2")
    pr.add_argument("--size-mb", type=_positive(float), default=256.0, help="bytes of one float32 input, MiB "
                    "(the largest size with --sweep)")
    pr.add_argument("--sweep", action="store_true", help="sizes from 16 KiB to 4x the last-level cache "
                    "(capped by --size-mb)")
    pr.add_argument("--repeat", type=_positive(int), default=10, help="timed runs per case (median)")
    pr.add_argument("--peers", nargs="?", const=True, default=False, type=_peers, metavar="LIST",
                    help="also time the peers present (numpy, onnxruntime, cupy, torch), or only those listed, "
                    "e.g. --peers cupy,torch")
    pr.add_argument("--json", metavar="FILE", help="write every number as JSON")
    pr.add_argument("--plot", metavar="FILE.png", help="plot bandwidth against size (needs matplotlib)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    # pyopencl warns on every kernel build that printed anything (PoCL's clang notes): nothing a user acts on
    warnings.filterwarnings("ignore", message="Non-empty compiler output")
    from .errors import DmlError
    try:
        return {"devices": cmd_devices, "conformance": cmd_conformance, "profile": cmd_profile,
                "demo": cmd_demo}[args.cmd](args)
    except DmlError as e:   # a device that fails after it was found: one line, not a traceback
        print(f"gpu-mean {args.cmd}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_DEVICE
    except OSError as e:    # e.g. --json into a folder that does not exist
        print(f"gpu-mean {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
