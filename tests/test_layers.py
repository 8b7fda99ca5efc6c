"""The layering rules of docs/design.md ("Layers"), read from the source: every import goes down the
layers' order, none sideways between bridges and kernels, no import circles in gpu_mean/ (imports
inside functions count: a lazy import is still a dependency), and the runtime and the frontends never
import or look up CuPy, pyopencl or PyTorch (each backend's ArrayBridge does)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "gpu_mean"
GPU_LIBRARIES = ("cupy", "pyopencl", "torch")


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports_of(name: str, path: Path, known) -> set:
    """The gpu_mean modules ``name`` imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "gpu_mean")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "gpu_mean":
                continue
            for a in node.names:     # ``from pkg import submodule`` imports the submodule
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    out.discard(name)
    return out


def cycles(graph: dict) -> list:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict:
    mods = modules()
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_relative_lazy_and_submodule_imports():
    g = import_graph()
    assert "gpu_mean.frontends.pool" in g["gpu_mean.frontends.arrays"]            # from . import pool
    assert "gpu_mean.kernels.programs" in g["gpu_mean.backends.cuda"]             # inside a function
    assert "gpu_mean.runtime.interop" in g["gpu_mean.bridges.arrays"]             # from ..runtime.interop
    assert "gpu_mean.frontends.arrays" in g["gpu_mean.dask.partials"]


# docs/design.md's layers, lowest first: a module imports only from layers below its own (or its own
# package). bridges and kernels share a rank and know nothing of each other.
RANK = {"errors": 0, "_version": 0, "descriptors": 1, "runtime": 2, "bridges": 3, "kernels": 3,
        "backends": 4, "frontends": 5, "ext": 5, "dask": 6, "onnx_backend": 6, "openvino": 6,
        "gpu_mean": 6, "checks": 7, "cli": 8, "__main__": 9}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "gpu_mean"


def upward_imports(graph: dict) -> list:
    bad = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            la, lb = layer(a), layer(b)
            if la != lb and RANK[lb] >= RANK[la]:
                bad.append(f"{a} -> {b}")
    return bad


def test_every_module_has_a_layer():
    assert sorted({layer(m) for m in modules()} - set(RANK)) == []


def test_imports_go_down_the_layers():
    assert upward_imports(import_graph()) == []


def test_the_layer_check_sees_an_upward_import():
    assert upward_imports({"gpu_mean.runtime.backend": {"gpu_mean.bridges.arrays"},
                           "gpu_mean.kernels.programs": {"gpu_mean.bridges.arrays"},
                           "gpu_mean.backends.cpu": {"gpu_mean.bridges.arrays"}}) == [
        "gpu_mean.kernels.programs -> gpu_mean.bridges.arrays",
        "gpu_mean.runtime.backend -> gpu_mean.bridges.arrays"]


def test_no_import_circles_in_gpu_mean():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("layer", ["runtime", "frontends"])
def test_runtime_and_frontends_name_no_gpu_library(layer):
    """No import of CuPy, pyopencl or PyTorch, and no lookup of one by name (``sys.modules["cupy"]``,
    ``importlib.import_module("torch")``); docstrings and error messages may name them."""
    found = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value]
            found += [f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] in GPU_LIBRARIES]
    assert found == []
