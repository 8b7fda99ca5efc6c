"""The FLOAT32 REDUCE AVERAGE accuracy promise, exactly as stated, on every device.

* Same-signed data: within 1 ulp of the exact mean, at any length.
* Mixed signs: within DirectML's reduceMean tolerance of N + 2 ulp (N = the number of values
  averaged), with the ulp taken at the mean of the magnitudes, mean(|x|). The published tolerance
  (WebNN's conformance tests, reviewed by the DirectML team) measures N + 2 ulp as the distance
  between the bit patterns of the result and the expected result; no summation can promise that
  when the values cancel: 1000 values near +-FLT_MAX whose exact mean is -0.0532 come out as 0.0,
  which is 10^9 ulp of -0.0532 but 0 ulp at the scale of the data.
* Devices without fp64 (``DeviceInfo.fp64`` false) accumulate in compensated float32; a sum past
  FLT_MAX goes to the exact pass, so both promises hold there too, near FLT_MAX included.

The CPU device and the OpenCL kernels keep a stronger promise for FLOAT32, FLOAT16 and BFLOAT16
(issue 22, stages 1 and 2): the correctly rounded mean for every input, with and without fp64
(tests/test_correct_rounding.py); this file's tolerance is the one every device is also held to.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import oracle
import pytest
from helpers import run

import gpu_mean as gm
from gpu_mean import DataType as D

AVG = gm.ReduceFunction.AVERAGE
F32 = np.float32
FLT_MAX = float(np.finfo(F32).max)


def reduce_rows(device, x: np.ndarray) -> np.ndarray:
    desc = gm.ReduceDesc(AVG, gm.TensorDesc(D.FLOAT32, x.shape), gm.TensorDesc(D.FLOAT32, (x.shape[0], 1)), (1,))
    return run(device, desc, [x])[:, 0]


def exact_means(x):
    return [s / x.shape[1] for s in oracle.exact_sum_rows(x)]


def check_same_sign(got, x):
    for k, m in enumerate(exact_means(x)):
        want = oracle.round_fraction(m, F32)
        d = oracle.ulp_distance(got[k], want, F32)
        assert d <= 1, f"row {k}: got {got[k]!r}, the exact mean rounds to {want!r} ({d} ulp)"


def check_mixed(got, x):
    n = x.shape[1]
    abs_means = exact_means(np.abs(x.astype(np.float64)))
    for k, m in enumerate(exact_means(x)):
        assert np.isfinite(got[k]), f"row {k}: got {got[k]!r}, exact mean {float(m)!r}"
        ulp = Fraction(float(np.spacing(F32(oracle.round_fraction(abs_means[k], F32)))))
        err = abs(Fraction(float(got[k])) - m)
        assert err <= (n + 2) * ulp, (f"row {k}: got {got[k]!r}, exact mean {float(m)!r}: error {float(err):.3g} "
                                      f"is {float(err / ulp):.3g} ulp of mean(|x|), over N + 2 = {n + 2}")


def cancelling(rng, n, scale, small):
    """n values: pairs +-v (v up to ``scale``), two copies of ``small`` and a 0 for odd n, shuffled.

    The exact mean is 2 * small / n while the data are of the order of ``scale``."""
    v = (rng.uniform(0.5, 1.0, (n - 2) // 2) * scale).astype(F32)
    x = np.concatenate([v, -v, F32([small, small]), np.zeros(n - 2 - 2 * v.size, F32)])
    rng.shuffle(x)
    return x


@pytest.mark.parametrize("exponent", [-100, -20, 0, 20, 100])
@pytest.mark.parametrize("n", [1, 3, 1000, 65537])
@pytest.mark.parametrize("sign", [1, -1])
def test_same_signed_within_one_ulp(device, exponent, n, sign):
    rng = np.random.default_rng([n, exponent + 200])
    x = (sign * rng.uniform(1.0, 2.0, (3, n)) * 2.0**exponent).astype(F32)
    check_same_sign(reduce_rows(device, x), x)


def test_same_signed_long_row_within_one_ulp(device):
    rng = np.random.default_rng(5)
    x = rng.uniform(0.0, 1e-3, (1, 1 << 20)).astype(F32) + F32(1e-4)
    check_same_sign(reduce_rows(device, x), x)


def test_same_signed_near_flt_max_within_one_ulp(device):
    x = (np.random.default_rng(6).uniform(0.5, 1.0, (2, 1000)) * FLT_MAX).astype(F32)
    check_same_sign(reduce_rows(device, x), x)


@pytest.mark.parametrize("n", [2, 5, 1000, 100_001])
def test_mixed_signs_within_n_plus_2_ulp_of_mean_abs(device, n):
    rng = np.random.default_rng(n)
    x = np.stack([rng.standard_normal(n).astype(F32),                       # mild cancellation
                  cancelling(rng, n, 1e30, -26.6),                            # exact mean ~1e-31 of the data
                  (rng.standard_normal(n) * 1e-3 + 1.0).astype(F32)])         # nearly same-signed
    check_mixed(reduce_rows(device, x), x)


def test_mixed_signs_near_flt_max(device):
    # values near +-FLT_MAX that cancel: exact mean -0.0532 (the case README's accuracy paragraph cites)
    x = cancelling(np.random.default_rng(1), 1000, FLT_MAX, -26.6)[None]
    assert float(exact_means(x)[0]) == pytest.approx(-0.0532)
    check_mixed(reduce_rows(device, x), x)
