"""Issue 23, point 3: every bad argument is refused at once, as a subprocess sees it -- exit code 2,
one line naming the argument and the values allowed, nothing timed and nothing written."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = str(pathlib.Path(__file__).resolve().parents[1])


def run(tmp_path, *argv, env=None, block=()):
    """``python -m gpu_mean argv`` in an empty folder; ``block`` names modules made unimportable."""
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in block)
            + "from gpu_mean.cli import main\nsys.exit(main(sys.argv[1:]))")
    full_env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    for k, v in list(full_env.items()):
        if v is None:
            del full_env[k]
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=120)


def refused(r, tmp_path, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == "", r.stdout     # nothing timed, nothing printed
    last = r.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), last
    assert list(tmp_path.iterdir()) == []                               # nothing written


@pytest.mark.parametrize("argv, words", [
    (["--op", "add"], ["--op", "'add'", "mean", "nary", "reduce"]),
    (["--op", "int_reduce"], ["--op", "'int_reduce'", "reduce"]),
    (["--op", "identity"], ["--op", "'identity'", "mean"]),
    (["--shape", "4,x"], ["--shape", "'4,x'", "integers"]),
    (["--shape", "0,3"], ["--shape", "'0,3'", "at least 1"]),
    (["--shape", "4,"], ["--shape", "'4,'"]),
    (["--shape", "4,3", "--axes", "0,0"], ["--axes", "'0,0'", "at most once"]),
    (["--shape", "4,3", "--axes", "2"], ["--axes", "out of range", "0 to 1"]),
    (["--dtype", "int8"], ["--dtype", "'int8'", "f32, f16, bf16, f64, int32, uint32, int64, uint64"]),
    (["--json", "no/such/folder/p.json"], ["--json", "does not exist"]),
    (["--plot", "no/such/folder/p.png"], ["--plot", "does not exist"]),
])
def test_profile_refuses_bad_arguments_before_any_work(tmp_path, argv, words):
    refused(run(tmp_path, "profile", "--device", "cpu", *argv), tmp_path, "gpu-mean profile: error:", *words)


def test_plot_without_matplotlib_is_refused_before_timing(tmp_path):
    r = run(tmp_path, "profile", "--device", "cpu", "--plot", "p.png", block=("matplotlib",))
    refused(r, tmp_path, "--plot", "matplotlib", "not installed")


def test_a_peer_that_is_not_installed_is_refused_before_timing(tmp_path):
    r = run(tmp_path, "profile", "--device", "cpu", "--peers", "numpy,onnxruntime", block=("onnxruntime",))
    refused(r, tmp_path, "--peers onnxruntime", "not installed", "installed peers: numpy")


def test_conformance_json_into_a_missing_folder_is_refused_before_work(tmp_path):
    refused(run(tmp_path, "conformance", "--device", "cpu", "--json", "nowhere/c.json"), tmp_path,
            "--json", "does not exist")


@pytest.mark.parametrize("cmd", [["demo"], ["profile"], ["conformance", "--quick"]])
def test_unknown_gpu_mean_device_names_the_variable_and_the_devices(tmp_path, cmd):
    r = run(tmp_path, *cmd, env={"GPU_MEAN_DEVICE": "gpu"})
    refused(r, tmp_path, "GPU_MEAN_DEVICE='gpu'", "unknown device", "present: auto", "cpu")


def test_unknown_name_in_gpu_mean_test_devices_is_one_usage_error(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        os.path.join(ROOT, "tests", "test_cli_usage.py"), "-k", "not gpu_mean_test_devices"],
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT, "GPU_MEAN_TEST_DEVICES": "cpu,gpu"},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stdout + r.stderr          # pytest's usage-error exit code
    out = r.stdout + r.stderr
    assert "GPU_MEAN_TEST_DEVICES" in out and "'gpu'" in out and "cpu, opencl:0" in out and "cuda:0" in out
    assert "passed" not in out and out.count("ERROR") == 1 and len(out.strip().splitlines()) <= 2
