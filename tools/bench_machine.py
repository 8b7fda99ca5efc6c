"""Each shape class against what the machine itself allows, measured side by side in one run.

    python tools/bench_machine.py --device opencl --mb 256 --rounds 3

The machine's limit is a native loop compiled here with gcc (-O3 -march=native -fopenmp), on every
core: for a reduction, 512-bit loads summed (the bytes read once); for an element-wise class with k
full-size inputs, k 512-bit loads added and scaled, the result written with streaming stores (k
reads and one write); both with software prefetch 2 KB ahead (as the library's CPU kernels; without
it the native read measured below PoCL's kernels on the CI machine). Its arrays are as large as the
class's (at least 1 GiB read in all, so no cache holds them). Each round times the class on the
device (through a recorded command list on device buffers, as tools/bench_kernels.py) and then the
native loop of the same pattern and bytes, alternating; the table gives medians over the rounds and
the ratio class / machine, which the issue tracker aims at 0.85 or more for every class. Throughput
counts each input's distinct elements read once plus the output written once (``Case.traffic``) for
both.

Only a CPU device (PoCL, the CPU device) has the machine's memory as its limit; on a GPU the
ratio says nothing.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import tempfile
from pathlib import Path
from statistics import median

import numpy as np

import gpu_mean as gm
from gpu_mean.bridges.arrays import aligned_empty
from gpu_mean.checks import profiler
from gpu_mean.checks.cases import distinct_elements

NATIVE = r"""
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PF
#define PF 2048     /* software prefetch distance in bytes, as the library's CPU kernels */
#endif

/* the sum of n floats (n a multiple of 64), every core, four independent 512-bit accumulators */
double gm_native_read(const float *a, size_t n) {
    double total = 0.0;
    #pragma omp parallel reduction(+:total)
    {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        #pragma omp for schedule(static)
        for (size_t i = 0; i < n; i += 64) {
            _mm_prefetch((const char *)(a + i) + PF, _MM_HINT_T0);
            _mm_prefetch((const char *)(a + i) + PF + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)(a + i) + PF + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)(a + i) + PF + 192, _MM_HINT_T0);
            s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
            s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
            s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
            s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
        }
        total += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    }
    return total;
}

/* column sums of a rows x cols float matrix (rows a multiple of 4, cols of blk, blk of 8) in the
   access pattern of the CPU-shaped column kernel (reduce_cpu_cols.h: gm_reduce_col_serial): each task a
   block of blk adjacent columns over every row, four rows per pass into blk double accumulators,
   the same columns prefetched four rows ahead; every core */
void gm_native_cols(const float *a, size_t rows, size_t cols, size_t blk, double *out) {
    #pragma omp parallel for schedule(static)
    for (size_t cb = 0; cb < cols / blk; ++cb) {
        double acc[4096] __attribute__((aligned(64)));
        for (size_t j = 0; j < blk; ++j) acc[j] = 0.0;
        for (size_t r = 0; r + 4 <= rows; r += 4) {
            const float *p = a + r * cols + cb * blk;
            for (size_t j = 0; j < blk; j += 8) {
                if ((j & 15) == 0 && r + 8 <= rows) {
                    for (int q = 0; q < 4; ++q) _mm_prefetch((const char *)(p + (4 + q) * cols + j), _MM_HINT_T0);
                }
                __m512d s = _mm512_load_pd(acc + j);
                s = _mm512_add_pd(s, _mm512_add_pd(
                        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + j)),
                                      _mm512_cvtps_pd(_mm256_loadu_ps(p + cols + j))),
                        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(p + 2 * cols + j)),
                                      _mm512_cvtps_pd(_mm256_loadu_ps(p + 3 * cols + j)))));
                _mm512_store_pd(acc + j, s);
            }
        }
        for (size_t j = 0; j < blk; ++j) out[cb * blk + j] = acc[j];
    }
}

/* out = mean of k inputs of n floats (n a multiple of 16), streaming stores, every core */
void gm_native_mean(int k, const float *const *in, float *out, size_t n) {
    const __m512 scale = _mm512_set1_ps(1.0f / (float)k);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += 16) {
        for (int j = 0; j < k; ++j) _mm_prefetch((const char *)(in[j] + i) + PF, _MM_HINT_T0);
        __m512 s = _mm512_load_ps(in[0] + i);
        for (int j = 1; j < k; ++j) s = _mm512_add_ps(s, _mm512_load_ps(in[j] + i));
        _mm512_stream_ps(out + i, _mm512_mul_ps(s, scale));
    }
    _mm_sfence();
}
"""


def build_native() -> ctypes.CDLL:
    folder = Path(tempfile.mkdtemp(prefix="gm-native-"))
    (folder / "native.c").write_text(NATIVE)
    lib = folder / "native.so"
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", str(lib),
                    str(folder / "native.c")], check=True)
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
    case's row length in bytes and the kernel's column block in bytes (opencl_geometry: 1024 columns
    of the case's type), as floats."""

    def __init__(self, so, row_bytes: int, block_bytes: int, nbytes: int):
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
    d = case.desc()
    if case.family == "reduce":
        return 0
    outs = int(np.prod(d.output_tensors()[0].sizes))
    full = sum(distinct_elements(t) == outs for t in d.input_tensors())
    return max(full, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="opencl")
    ap.add_argument("--mb", type=int, default=256, help="MiB of float32 input per case (float16 cases: half)")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="only the classes whose name contains this text")
    a = ap.parse_args()
    so = build_native()
    dev = gm.create_device(a.device)
    n = a.mb * (1 << 20) // 4
    cases = [c for c in profiler.class_cases(n) if a.only in f"{c.klass} {c.dtype.name}"]
    print(f"{dev.name} ({a.device}), {a.mb} MiB float32 inputs, {os.cpu_count()} cores for the native loop; "
          f"GB/s, median of {a.rounds} alternating rounds (each the median of {a.repeat} runs)")
    print(f"{'class':34s} {'device':>8s} {'machine':>8s} {'ratio':>6s}   pattern", flush=True)
    for case in cases:
        go = profiler.prepare_device(dev, case)
        k = full_inputs(case)
        native = Native(so, k, max(case.traffic, 1 << 30))
        ours, machine = [], []
        for _ in range(a.rounds):
            ours.append(case.traffic / profiler.median_time(go, a.repeat) / 1e9)
            machine.append(native.nbytes / profiler.median_time(native, a.repeat) / 1e9)
        pattern = "read, summed" if k == 0 else f"{k} read + 1 streamed write"
        print(f"{case.klass + ' ' + case.dtype.name:34s} {median(ours):8.2f} {median(machine):8.2f} "
              f"{median(ours) / median(machine):6.2f}   {pattern}", flush=True)
        if case.klass.startswith("R4"):
            # the outer axis with many outputs: also against a native loop of the column kernel's
            # own pattern (blocks of 1024 columns, rows strided), in alternating rounds
            item = case.dtype.numpy_dtype.itemsize
            cols = NativeCols(so, case.shape[-1] * item, 1024 * item, max(case.traffic, 1 << 30))
            ours, same = [], []
            for _ in range(a.rounds):
                ours.append(case.traffic / profiler.median_time(go, a.repeat) / 1e9)
                same.append(cols.nbytes / profiler.median_time(cols, a.repeat) / 1e9)
            print(f"{'':34s} {median(ours):8.2f} {median(same):8.2f} {median(ours) / median(same):6.2f}   "
                  f"read, summed in the column kernel's pattern ({cols.blk * 4} B of each row per block)", flush=True)
            del cols
        del go, native
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
