"""Each shape class against what the machine itself allows: a native loop of the same pattern and bytes.

The machine's limit is a native loop (native.c, compiled here with gcc -O3 -march=native -fopenmp) on
every core: for a reduction, 512-bit loads summed (the bytes read once); for an element-wise class with
k full-size inputs, k 512-bit loads added and scaled, the result written with streaming stores; both
with software prefetch 2 KB ahead (as the library's CPU kernels). Its arrays are as large as the
class's (at least 1 GiB read in all, so no cache holds them). Each process times one class on the
device (a recorded command list on device buffers, as the kernels benchmark) and the native loop, in
turns (benches/timing.py), the median of --repeat runs each; for R4 (the outer axis, many outputs)
also a native loop of the column kernel's own pattern. Figures: GB/s (the device), machine_GB/s and
ratio (device / machine; the issue tracker aims at 0.85 or more for every class). Only a CPU device
(PoCL, the CPU device) has the machine's memory as its limit; on a GPU the ratio says nothing.
"""
from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

ROUNDS = 3
FIGURES = {"GB/s": "higher", "ratio": "higher"}


def add_arguments(ap) -> None:
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--mb", type=float, default=256, help="MiB of float32 input per case (float16 cases: half)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--only", default="", help="only the classes whose name contains this text")


def _cases(args):
    from benches import gm_module
    profiler = gm_module("gpu_mean.checks.profiler")
    return profiler.class_cases(int(args.mb * (1 << 20)) // 4)


def cases(args) -> list:
    return [str(i) for i, c in enumerate(_cases(args)) if args.only in f"{c.klass} {c.dtype.name}"]


def build_native() -> ctypes.CDLL:
    folder = Path(tempfile.mkdtemp(prefix="gm-native-"))
    lib = folder / "native.so"
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", str(lib),
                    str(Path(__file__).with_name("native.c"))], check=True)
    so = ctypes.CDLL(str(lib))
    so.gm_native_read.restype = ctypes.c_double
    so.gm_native_read.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    so.gm_native_mean.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    so.gm_native_cols.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    return so


class Native:
    """The native loop of one pattern over ``nbytes`` of traffic: reads only (``k`` = 0) or k full
    inputs and one output of nbytes / (k + 1) each."""

    def __init__(self, so, k: int, nbytes: int):
        import numpy as np

        from benches import gm_module

        aligned_empty = gm_module("gpu_mean.bridges.arrays").aligned_empty
        self.so, self.k = so, k
        per = nbytes // (k + 1) if k else nbytes
        self.n = per // 4 // 64 * 64
        self.nbytes = self.n * 4 * ((k + 1) if k else 1)
        self.arrays = [aligned_empty(self.n * 4, 64).view(np.float32) for _ in range(max(k, 1) + (1 if k else 0))]
        for x in self.arrays:
            x[:] = 1.0                      # touched: every page mapped before timing
        self.ptrs = (ctypes.c_void_p * max(k, 1))(*[x.ctypes.data for x in self.arrays[:max(k, 1)]])

    def __call__(self):
        if self.k == 0:
            self.so.gm_native_read(self.arrays[0].ctypes.data, self.n)
        else:
            self.so.gm_native_mean(self.k, self.ptrs, self.arrays[-1].ctypes.data, self.n)


class NativeCols:
    """The native loop of the column kernel's pattern (gm_native_cols) over at least ``nbytes``: the
    case's row length in bytes and the kernel's column block in bytes, as floats."""

    def __init__(self, so, row_bytes: int, block_bytes: int, nbytes: int):
        import numpy as np

        from benches import gm_module

        aligned_empty = gm_module("gpu_mean.bridges.arrays").aligned_empty
        self.so = so
        self.cols, self.blk = row_bytes // 4, min(block_bytes // 4, row_bytes // 4)
        self.rows = -(-nbytes // row_bytes) // 4 * 4
        self.nbytes = self.rows * self.cols * 4
        self.a = aligned_empty(self.nbytes, 64).view(np.float32)
        self.a[:] = 1.0
        self.out = np.zeros(self.cols, np.float64)

    def __call__(self):
        self.so.gm_native_cols(self.a.ctypes.data, self.rows, self.cols, self.blk, self.out.ctypes.data)


def full_inputs(case) -> int:
    """0 for a reduction (reads only), else the element-wise class's inputs read at full size."""
    import numpy as np

    from benches import gm_module

    distinct_elements = gm_module("gpu_mean.checks.cases").distinct_elements
    d = case.desc()
    if case.family == "reduce":
        return 0
    outs = int(np.prod(d.output_tensors()[0].sizes))
    return max(sum(distinct_elements(t) == outs for t in d.input_tensors()), 1)


def run(args, which: str) -> dict:
    import gpu_mean as gm
    from benches import gm_module
    from benches.timing import interleaved, median
    profiler = gm_module("gpu_mean.checks.profiler")
    case = _cases(args)[int(which)]
    so = build_native()
    dev = gm.create_device(args.device)
    go = profiler.prepare_device(dev, case)
    k = full_inputs(case)
    native = Native(so, k, max(case.traffic, 1 << 30))
    fns = {"device": go, "machine": native}
    nbytes = {"device": case.traffic, "machine": native.nbytes}
    if case.klass.startswith("R4"):
        item = case.dtype.numpy_dtype.itemsize
        cols = NativeCols(so, case.shape[-1] * item, 1024 * item, max(case.traffic, 1 << 30))
        fns["columns"], nbytes["columns"] = cols, cols.nbytes
    t = interleaved(fns, args.repeat)
    gbs = {k: nbytes[k] / median(v) / 1e9 for k, v in t.items()}
    row = {"GB/s": gbs["device"], "machine_GB/s": gbs["machine"], "ratio": gbs["device"] / gbs["machine"]}
    if "columns" in gbs:           # the column kernel's own pattern: blocks of 1024 columns, rows strided
        row["columns_GB/s"], row["ratio_columns"] = gbs["columns"], gbs["device"] / gbs["columns"]
    return {f"{case.klass} {case.dtype.name}": row}
