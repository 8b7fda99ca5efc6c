"""tools/setup.sh on a machine with an NVIDIA driver installs the CUDA extra that fits the CUDA
version nvidia-smi reports, and says which and why in one line. A fake ``nvidia-smi`` on PATH
stands for the driver; a fake ``python3`` (its venv's ``python`` logs every pip call) and ``dpkg``
keep the run to a second: what pip would install is read from its command line."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_cuda_backend import fake_nvidia_smi

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("bash", "sh", "sed", "head", "mkdir", "cp", "dirname", "cat", "id")


def _system(tmp_path) -> str:
    """A PATH folder with only the commands the scripts use: no real nvidia-smi (a GPU machine's
    own driver must not decide these tests), python, pip or apt-get."""
    folder = tmp_path / "system"
    if not folder.exists():
        folder.mkdir()
        for tool in TOOLS:
            (folder / tool).symlink_to(shutil.which(tool))
    return str(folder)


def _extra(tmp_path, version=None, rc=0, env=None):
    path = _system(tmp_path)
    if version is not None or rc:
        path = f"{fake_nvidia_smi(tmp_path / 'bin', version or '', rc=rc)}:{path}"
    res = subprocess.run(["bash", str(ROOT / "tools" / "cuda_extra.sh")], capture_output=True, text=True,
                         env={"PATH": path, **(env or {})}, check=True)
    return res.stdout.strip(), res.stderr.strip()


@pytest.mark.parametrize("version, extra", [("13.0", "cuda13"), ("13.1", "cuda13"), ("12.4", "cuda12"),
                                            ("12.0", "cuda12"), ("11.8", "")])
def test_the_extra_follows_the_cuda_version_the_driver_reports(tmp_path, version, extra):
    out, why = _extra(tmp_path, version)
    assert out == extra
    assert len(why.splitlines()) == 1 and f"CUDA {version}" in why and "580.65.06" in why
    assert (f"installing the {extra} extra" in why) if extra else ("without the CUDA backend" in why)


def test_no_driver_no_cuda_extra(tmp_path):
    assert _extra(tmp_path) == ("", "setup: no nvidia-smi (no NVIDIA driver): installing without the CUDA backend "
                                    "(no CuPy)")
    out, why = _extra(tmp_path, rc=9)            # nvidia-smi installed, driver not loaded
    assert out == "" and "nvidia-smi failed" in why
    assert _extra(tmp_path, "13.0", env={"GPU_MEAN_CUDA_EXTRA": "none"})[0] == ""
    assert _extra(tmp_path, env={"GPU_MEAN_CUDA_EXTRA": "cuda12"})[0] == "cuda12"


def _setup(tmp_path, version):
    """tools/setup.sh run in a copy of the repository's tools; returns (pip command lines, stderr)."""
    repo = tmp_path / "clone"
    (repo / "tools").mkdir(parents=True)
    for f in ("setup.sh", "cuda_extra.sh"):
        shutil.copy(ROOT / "tools" / f, repo / "tools" / f)
    bin_dir = tmp_path / "bin"
    if version:
        fake_nvidia_smi(bin_dir, version)
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "pip.log"
    fake_py = bin_dir / "python3"
    # "python3 -m venv .venv" makes .venv/bin/python: a copy of this script, which logs its arguments
    fake_py.write_text('#!/bin/sh\nif [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; '
                       f'exit 0; fi\necho "$*" >> "{log}"\n')
    fake_py.chmod(0o755)
    (bin_dir / "dpkg").write_text("#!/bin/sh\nexit 0\n")       # PoCL counts as installed: no apt-get
    (bin_dir / "dpkg").chmod(0o755)
    res = subprocess.run(["bash", "tools/setup.sh"], cwd=repo, capture_output=True, text=True, check=True,
                         env={"PATH": f"{bin_dir}:{_system(tmp_path)}", "HOME": str(tmp_path)})
    return log.read_text().splitlines(), res.stderr


@pytest.mark.parametrize("version, extras", [("13.0", "opencl,test,plot,cuda13"), ("12.4", "opencl,test,plot,cuda12"),
                                             (None, "opencl,test,plot,cuda-compile")])
def test_setup_installs_the_extra_for_the_driver(tmp_path, version, extras):
    pip, err = _setup(tmp_path, version)
    assert f"-m pip install -q -e .[{extras}]" in pip, pip
    assert [line for line in err.splitlines() if line.startswith("setup: ")] == [line for line in err.splitlines()]
    # the compile checks' second NVRTC, outside the venv
    assert any("--target .nvrtc12" in line and "nvidia-cuda-nvrtc-cu12==12.0.*" in line for line in pip), pip
    if version:
        assert f"CUDA {version}" in err and extras.rsplit(",", 1)[1] in err
