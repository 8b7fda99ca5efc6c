"""The official ONNX backend test runner, restricted to the mean tests, on every device present.

The generated ids carry the device: OnnxBackendNodeModelTest_opencl_0::test_mean_example_cpu runs on
opencl:0. The _cuda ids are collected only for a backend bound to a CUDA device.
"""
from __future__ import annotations

import re
import unittest
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402
from conftest import _wanted  # noqa: E402

from gpu_mean import backends, onnx_backend  # noqa: E402

PATTERN = r"(test_mean_|test_reduce_mean_|test_operator_reduced_mean)"


def _mean_cases(backend) -> dict:
    """{class name: the runner's test functions whose ids match PATTERN}. The runner's classes carry
    all ~3800 node tests with the unmatched ones marked skip; only the mean cases are collected here,
    so that the suite reports what it runs. Building the cases runs onnx's own numpy code, whose
    overflow and divide-by-zero warnings (Cast, ReduceLogSum, ...) say nothing about this project."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        bt = onnx.backend.test.BackendTest(backend, __name__)
        bt.include(PATTERN)
        cases = bt.test_cases
    # an id runs on one ONNX device; ids for a device the backend does not claim would only be skips
    devices = tuple(f"_{d.lower()}" for d in ("CPU", "CUDA") if backend.supports_device(d))
    out = {}
    for name, case in cases.items():
        tests = {t: getattr(case, t) for t in dir(case)
                 if t.startswith("test_") and re.search(PATTERN, t) and t.endswith(devices)}
        if tests:
            out[name] = tests
    return out


def _register():
    for spec in _wanted():
        if spec.endswith(("-nofp64", "-gpupaths")):   # test-only variants of opencl:0, run by the other suites
            continue
        found, _ = backends._discover(spec.split(":")[0])
        if not found:
            continue
        for name, tests in _mean_cases(onnx_backend.runner_for(spec)).items():
            cls = type(f"{name}_{spec.replace(':', '_')}", (unittest.TestCase,), tests)
            globals()[cls.__name__] = cls


_register()


def test_runner_selects_the_mean_cases():
    names = {t for tests in _mean_cases(onnx_backend.runner_for("cpu")).values() for t in tests}
    assert not any("relu" in t for t in names)
    for must in ("test_mean_example_cpu", "test_mean_one_input_cpu", "test_mean_two_inputs_cpu",
                 "test_reduce_mean_keepdims_random_cpu", "test_reduce_mean_negative_axes_keepdims_example_cpu",
                 "test_reduce_mean_default_axes_keepdims_random_cpu"):
        assert must in names


def _model(op_type, elem, inputs=("x",), **attrs):
    from onnx import helper
    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, elem, [2]) for n in inputs],
                          [helper.make_tensor_value_info("y", elem, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_unsupported_node_is_an_error_naming_it_and_a_skip_only_in_the_runner():
    from onnx import TensorProto

    import gpu_mean as gm
    m = _model("Relu", TensorProto.FLOAT)
    with pytest.raises(gm.UnsupportedError, match="node Relu cannot run.*Mean and ReduceMean") as e:
        onnx_backend.prepare(m, "CPU")
    assert not isinstance(e.value, unittest.SkipTest)
    with pytest.raises(unittest.SkipTest, match="Relu"):       # the runner's adapter: a skip, never a pass
        onnx_backend.runner_for("cpu").prepare(m, "CPU")


def test_unsupported_type_is_a_type_error_naming_node_and_type():
    from onnx import TensorProto

    import gpu_mean as gm
    rep = onnx_backend.prepare(_model("Mean", TensorProto.INT8, ("a", "b")), "cpu")
    x = np.ones(2, np.int8)
    with pytest.raises(gm.UnsupportedTypeError, match=r"node Mean on cpu: .*int8") as e:
        rep.run([x, x])
    assert isinstance(e.value, TypeError) and not isinstance(e.value, unittest.SkipTest)
    with pytest.raises(unittest.SkipTest, match="int8"):
        onnx_backend.runner_for("cpu").prepare(_model("Mean", TensorProto.INT8, ("a", "b")), "CPU").run([x, x])


def test_prepare_takes_every_device_gpu_mean_devices_lists():
    from onnx import TensorProto
    x = np.array([1.0, 4.0], np.float32)
    for spec in ["auto"] + [i.id for i in backends.list_devices()]:
        rep = onnx_backend.prepare(_model("Mean", TensorProto.FLOAT, ("a", "b")), spec)
        assert onnx_backend.supports_device(spec)
        np.testing.assert_array_equal(np.asarray(rep.run([x, x + 2])[0]), x + 1)


def test_unknown_or_unclaimed_device_is_an_error_naming_it():
    from onnx import TensorProto

    import gpu_mean as gm
    m = _model("Mean", TensorProto.FLOAT, ("a", "b"))
    with pytest.raises(gm.InvalidArgumentError, match=r"device 'gpu' is not present.*devices: auto, .*cpu"):
        onnx_backend.prepare(m, "gpu")
    with pytest.raises(gm.UnsupportedError, match="bound to cpu .* does not run ONNX device CUDA"):
        onnx_backend.backend_for("cpu").prepare(m, "CUDA")
    assert not onnx_backend.supports_device("gpu")


def test_cuda_claimed_only_by_a_cuda_bound_backend():
    assert onnx_backend.backend_for("cpu").supports_device("CPU")
    assert not onnx_backend.backend_for("cpu").supports_device("CUDA")
