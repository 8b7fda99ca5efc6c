"""The independent exact oracle lives in the package (the conformance runner checks the CPU device
against it); the tests import it from here."""
from gpu_mean.checks.oracle import *  # noqa: F401,F403
from gpu_mean.checks.oracle import add2, equal_bits, exact, exact_sum_rows, mean2, round_fraction, ulp_distance  # noqa: F401
