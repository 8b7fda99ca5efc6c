"""Every Python block of the README runs as written; every gpu-mean command in it parses."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), re.S)


PY = blocks("python")


def test_the_readme_has_python_blocks():
    assert len(PY) >= 3


def _skip_unless_present(first_line: str) -> None:
    """A block whose first line is ``# needs: cupy, torch, cuda`` runs where those are present
    (the GPU machine); elsewhere it is skipped with that reason, never passed unrun."""
    for need in (n.strip() for n in first_line.split(":", 1)[1].split(",")):
        if need == "cuda":
            from gpu_mean import backends
            found, reason = backends._discover("cuda")
            if not found:
                pytest.skip(f"README block needs a CUDA device: {reason}")
        else:
            pytest.importorskip(need)


@pytest.mark.parametrize("i", range(len(PY)))
def test_python_block_runs(i, tmp_path):
    code = PY[i]
    first = code.splitlines()[0]
    if first.startswith("# needs:"):
        _skip_unless_present(first)
    if first.startswith("# test_") and first.endswith(".py"):   # a pytest file, run as the README says
        pytest.importorskip("onnx")
        path = tmp_path / first[2:]
        path.write_text(code)
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "mean",
                            str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
        return
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_gpu_mean_commands_parse():
    from gpu_mean import cli
    lines = [ln.split("#")[0].strip() for b in blocks("bash") for ln in b.splitlines()]
    cmds = [shlex.split(ln)[1:] for ln in lines if ln.startswith("gpu-mean ")]
    assert len(cmds) >= 5
    for argv in cmds:
        # --device is checked against the devices present: parse the rest where there is no GPU or OpenCL
        argv = ["cpu" if i and argv[i - 1] == "--device" else a for i, a in enumerate(argv)]
        cli.parser().parse_args(argv)


def test_scripts_named_in_the_readme_exist():
    for name in re.findall(r"bash (tools/\w+\.sh)", README.read_text()):
        assert (README.parent / name).exists(), name
