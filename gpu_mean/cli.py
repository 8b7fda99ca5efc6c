"""The ``gpu-mean`` command: devices, conformance, profile."""
from __future__ import annotations

import argparse
import sys


def cmd_devices(args) -> int:
    from . import backends
    status = backends.backend_status()
    for info in backends.list_devices():
        print(f"{info.id:10s} {info.name} | vendor {info.vendor} | {info.device_type} | "
              f"{info.global_memory / 2**30:.1f} GiB | fp16 {'yes' if info.fp16 else 'storage only'} | "
              f"fp64 {'yes' if info.fp64 else 'no'} | max feature level {info.max_feature_level.label}")
    for kind, reason in status.items():
        if reason:
            print(f"{kind:10s} absent: {reason}")
    return 0


def cmd_conformance(args) -> int:
    from .tools import conformance
    return conformance.main(args.device, args.feature_level, args.quick)


def cmd_profile(args) -> int:
    from .tools import profiler
    return profiler.main(args.device, args.size_mb, args.repeat, args.peers)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu-mean", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("devices", help="list the devices present and why an absent backend is absent")
    c = sub.add_parser("conformance", help="run the conformance suite on a device")
    c.add_argument("--device", default=None, help="auto (default), cpu, opencl[:N], cuda[:N]")
    c.add_argument("--feature-level", default=None, help="e.g. 3.0; default: the device's maximum")
    c.add_argument("--quick", action="store_true", help="fewer seeds and smaller shapes")
    pr = sub.add_parser("profile", help="time the kernels and compare with the copy bandwidth and peers")
    pr.add_argument("--device", default=None)
    pr.add_argument("--size-mb", type=int, default=256, help="bytes of one input tensor, MiB")
    pr.add_argument("--repeat", type=int, default=10)
    pr.add_argument("--peers", action="store_true", help="also time numpy/onnxruntime/CuPy/PyTorch where present")
    args = p.parse_args(argv)
    return {"devices": cmd_devices, "conformance": cmd_conformance, "profile": cmd_profile}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
