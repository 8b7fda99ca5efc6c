"""The official ONNX backend test runner, restricted to the mean tests, on every device present.

The generated ids carry the device: OnnxBackendNodeModelTest_opencl_0::test_mean_example_cpu runs on
opencl:0. The _cuda ids run only on a backend bound to a CUDA device.
"""
from __future__ import annotations

import pytest

pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402
from conftest import _wanted  # noqa: E402

from gpu_mean import backends, onnx_backend  # noqa: E402

PATTERN = r"(test_mean_|test_reduce_mean_|test_operator_reduced_mean)"


def _register():
    for spec in _wanted():
        if spec.endswith(("-nofp64", "-gpupaths")):   # test-only variants of opencl:0, run by the other suites
            continue
        found, _ = backends._discover(spec.split(":")[0])
        if not found:
            continue
        bt = onnx.backend.test.BackendTest(onnx_backend.backend_for(spec), __name__)
        bt.include(PATTERN)
        for name, case in bt.test_cases.items():
            cls = type(f"{name}_{spec.replace(':', '_')}", (case,), {})
            globals()[cls.__name__] = cls


_register()


def test_runner_selects_the_mean_cases():
    bt = onnx.backend.test.BackendTest(onnx_backend.backend_for("cpu"), "probe")
    bt.include(PATTERN)
    names = {t for case in bt.test_cases.values() for t in dir(case) if t.startswith("test_")}
    for must in ("test_mean_example_cpu", "test_mean_one_input_cpu", "test_mean_two_inputs_cpu",
                 "test_reduce_mean_keepdims_random_cpu", "test_reduce_mean_negative_axes_keepdims_example_cpu",
                 "test_reduce_mean_default_axes_keepdims_random_cpu"):
        assert must in names


def test_unsupported_node_is_a_skip_not_a_pass():
    import unittest

    from onnx import TensorProto, helper
    node = helper.make_node("Relu", ["x"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(unittest.SkipTest, match="Relu"):
        onnx_backend.prepare(helper.make_model(g), "CPU")


def test_cuda_claimed_only_by_a_cuda_bound_backend():
    assert onnx_backend.backend_for("cpu").supports_device("CPU")
    assert not onnx_backend.backend_for("cpu").supports_device("CUDA")
