"""Near the real limits: a FLOAT16 array of just over 2^31 elements and just over 2^32 bytes, on every
device variant where the host has the memory (skipped with the reason elsewhere).

It passes PoCL's CL_DEVICE_MAX_MEM_ALLOC_SIZE (a power of two, 4 GiB on a 24 GiB machine), so the
OpenCL devices split it, and every index past 2^31 goes through 64-bit arithmetic or wraps. The data
expose a wrap: the rows past element 2^31 hold 1.0 and the first as many rows 0.25, so an index taken
modulo 2^31 (or a byte offset modulo 2^32) reads 0.25 where 1.0 is, and a negative 32-bit index
reads outside the array; markers sit on the last element before 2^31 and on the very last one.
"""
from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

import gpu_mean as gm

C = 1024
TAIL = 2**10 + 1                      # rows past element 2^31
R = 2**31 // C + TAIL                 # 2^31 + 2^20 + 1024 elements, 2^32 + 2^21 + 2048 bytes
N = R * C
NEED = 10 << 30                       # the array, a result as large, and room for the rest


def available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


@pytest.fixture(scope="module")
def big():
    if available() < NEED:
        pytest.skip(f"needs {NEED >> 30} GiB of free host memory for a {N * 2 / 2**30:.1f} GiB FLOAT16 array and "
                    f"its mean; {available() / 2**30:.1f} GiB are available")
    x = np.zeros((R, C), np.float16)      # untouched pages stay shared zero pages until written
    x[:TAIL] = 0.25
    x[R - TAIL:] = 1.0
    x[R - TAIL - 1, C - 1] = 2.0           # element 2^31 - 1, the last a signed 32-bit index reaches
    x[R - 1, C - 1] = 3.0                  # the very last element
    yield x
    del x


def f16(q: Fraction) -> np.float16:
    from gpu_mean.checks.oracle import round_fraction
    return np.float16(round_fraction(q, np.float16))


pytestmark = pytest.mark.slow


def test_just_past_2_to_31_elements_and_2_to_32_bytes(device, big):
    x = big
    assert x.size > 2**31 and x.nbytes > 2**32
    # every axis: the tail's 1.0s and the markers against the head's 0.25s
    total = Fraction(TAIL * C) * Fraction(1, 4) + Fraction((TAIL - 1) * C + C - 1) + 2 + 3
    got = gm.reduce_mean(x, device=device)
    assert got.shape == (1, 1) and got[0, 0] == f16(total / N)
    # rows: each row's own value, the markers' rows by their sums
    rows = gm.reduce_mean(x, [1], keepdims=False, device=device)
    want = np.zeros(R, np.float16)
    want[:TAIL], want[R - TAIL:] = 0.25, 1.0
    want[R - TAIL - 1] = f16(Fraction(2, C))
    want[R - 1] = f16(Fraction(C - 1 + 3, C))
    np.testing.assert_array_equal(rows, want)
    # columns: crossing every piece
    cols = gm.reduce_mean(x, [0], keepdims=False, device=device)
    head_tail = Fraction(TAIL, 4) + TAIL
    want = np.full(C, f16(head_tail / R), np.float16)
    want[C - 1] = f16((head_tail - 1 + 3 + 2) / R)
    np.testing.assert_array_equal(cols, want)
    if device.info.backend == "cpu":
        return      # the CPU device's element-wise mean makes float32 copies: 16 GiB more for this array
    m = gm.mean(x, x, device=device)
    assert m.shape == x.shape
    assert np.array_equal(m.view(np.uint16), x.view(np.uint16))
