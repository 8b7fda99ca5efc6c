"""The suite's parallel grouping (tests/conftest.py): under ``--dist loadgroup`` the tests of one
device, of one NVRTC's compile checks and the near-limit arrays each run in one pytest-xdist worker,
read from the node id by the suite's own scheduler (xdist's marks-in-node-ids do not reach the
controller with pytest 9.2). A run where this breaks still passes, only slower, so it is checked here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pytest_xdist_make_scheduler, xdist_group_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("nodeid, group", [
    ("tests/test_reduce.py::test_reduce_average[cpu]", "cpu"),
    ("tests/test_reduce.py::test_reduce_average[opencl:0-gpupaths-nofp64-float16]", "opencl:0-gpupaths-nofp64"),
    ("tests/test_fuzz.py::test_fuzz_descriptors[opencl:0-gpupaths-checked]", "opencl:0-gpupaths-checked"),
    ("tests/test_x.py::test_y[64-opencl:0-nofp64]", "opencl:0-nofp64"),
    ("tests/test_x.py::test_y[cuda:1-checked-mean]", "cuda:1-checked"),
    ("tests/test_large_arrays.py::test_just_past[cpu]", "large-arrays"),
    ("tests/test_cuda_nvrtc.py::test_vector_loads_are_16_bytes[nvrtc12.0]", "nvrtc12.0"),
    ("tests/test_cuda_nvrtc.py::test_many_input_mean_does_not_spill[nvrtc-env-ew_nary_FLOAT16_64_rows]", "nvrtc-env"),
    ("tests/test_cuda_nvrtc.py::test_runtime_options_leave_subnormals_alone", None),
    ("tests/test_tools.py::test_demo_on_the_cpu", None),
    ("tests/test_x.py::test_y[opencl:0x]", None),
    ("tests/test_x.py::test_y[gpupaths]", None),
])
def test_groups_from_node_ids(nodeid, group):
    assert xdist_group_of(nodeid) == group


def test_the_scheduler_takes_whole_groups():
    pytest.importorskip("xdist")

    class Config:
        @staticmethod
        def getvalue(name):
            return {"dist": "loadgroup", "tx": ["2*popen"]}.get(name)

        option = None

    assert pytest_xdist_make_scheduler(type("C", (), {"getvalue": staticmethod(lambda n: "load")})(), None) is None
    sched = pytest_xdist_make_scheduler(Config(), None)
    split = sched._split_scope
    nofp64 = split("tests/a.py::t[opencl:0-nofp64-x]")
    assert nofp64 == split("tests/b.py::u[opencl:0-nofp64]") != split("tests/a.py::t[opencl:0-x]")
    assert split("tests/a.py::t") != split("tests/a.py::u")     # no group: dealt out alone


def test_two_workers_keep_a_device_together(tmp_path):
    """A real two-worker run of two modules: every test of a device ran in one worker."""
    pytest.importorskip("xdist")
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(
            "import os, pytest\n"
            "@pytest.mark.parametrize('dev', ['cpu', 'opencl:0', 'opencl:0-nofp64'])\n"
            "@pytest.mark.parametrize('k', range(3))\n"
            "def test_t(k, dev):\n"
            "    print('RAN', dev, os.environ['PYTEST_XDIST_WORKER'])\n")
    (tmp_path / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(ROOT / 'tests' / 'conftest.py')!r})\n"
        "suite = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(suite)\n"
        "pytest_xdist_make_scheduler = suite.pytest_xdist_make_scheduler\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                        "--dist", "loadgroup", "-rA", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path,
                       env={"GPU_MEAN_TEST_DEVICES": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    ran = {}
    for line in r.stdout.splitlines():
        if "RAN " in line:
            _, dev, worker = line[line.index("RAN "):].split()[:3]
            ran.setdefault(dev, set()).add(worker)
    assert set(ran) == {"cpu", "opencl:0", "opencl:0-nofp64"}, r.stdout
    assert all(len(w) == 1 for w in ran.values()), ran
