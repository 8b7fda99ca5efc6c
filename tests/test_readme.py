"""Every Python block of the README runs as written; every gpu-mean command in it parses."""
from __future__ import annotations

import ast
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


# what `pip install .` brings (pyproject's dependencies) and gpu_mean itself: every other module a
# block imports is an optional package, and the block is skipped with its name where it is absent
CORE = {"gpu_mean", "numpy", "tqdm", "ml_dtypes"}


def optional_imports(code: str) -> list[str]:
    """The packages outside the standard library and the core install that a block imports (any
    nesting: an import inside a function counts too), in order of first import."""
    found = []
    for node in ast.walk(ast.parse(code)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            top = name.split(".")[0]
            if top not in CORE and top not in sys.stdlib_module_names and name not in found:
                found.append(name)
    return found


def _skip_unless_importable(code: str) -> None:
    for name in optional_imports(code):
        pytest.importorskip(name, reason=f"README block imports {name}, which is not installed")
        if name.split(".")[0] == "pyopencl":
            from gpu_mean import backends
            found, reason = backends._discover("opencl")
            if not found:
                pytest.skip(f"README block needs an OpenCL device: {reason}")


def test_optional_imports_are_found():
    code = "import numpy as np\nimport dask.array as da\nfrom distributed import Client\nimport os\n" \
           "def f():\n    import array_api_strict as xp\nfrom . import x\nimport gpu_mean.ext\n"
    assert optional_imports(code) == ["dask.array", "distributed", "array_api_strict"]


@pytest.mark.parametrize("i", range(len(PY)))
def test_python_block_runs(i, tmp_path):
    code = PY[i]
    first = code.splitlines()[0]
    if first.startswith("# needs:"):
        _skip_unless_present(first)
    _skip_unless_importable(code)
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
