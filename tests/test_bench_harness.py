"""tools/bench.py, the one benchmark harness: the before tree is a git worktree of the commit named,
each (tree, round) is a fresh process importing that tree's gpu_mean, the trees alternate round by
round, and the result is one table and one JSON file. Then a smoke run of each benchmark at its
smallest size (no figure is checked: timings are noisy)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tools" / "bench.py"


def bench(*argv, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, cwd=ROOT, timeout=300)
    if check:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


def git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def head_worktree():
    """HEAD's commit, and the worktree the harness makes for it, removed afterwards if this test made it."""
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                                     capture_output=True).returncode:
        pytest.skip("not a git checkout")
    commit = git("rev-parse", "HEAD")
    path = Path("/tmp") / f"gpu_mean-bench-{commit[:12]}"
    existed = path.exists()
    yield commit, path
    if not existed and path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], capture_output=True)


def test_before_is_a_worktree_and_rounds_alternate(tmp_path, head_worktree):
    commit, path = head_worktree
    out = tmp_path / "r.json"
    r = bench("front_door", "--devices", "cpu", "--calls", "2", "--rounds", "2", "--before", "HEAD",
              "--json", str(out))
    assert "after/before" in r.stdout and "cpu reduce_mean 16x16" in r.stdout
    assert f"before = HEAD ({commit[:12]}) in {path}" in r.stdout
    res = json.loads(out.read_text())
    assert res["before"]["commit"] == commit and Path(res["before"]["worktree"]) == path
    # one process per tree and round, the first tree swapping every round
    assert [(x["round"], x["tree"]) for x in res["runs"]] == [(0, "before"), (0, "after"), (1, "after"),
                                                               (1, "before")]
    for x in res["runs"]:          # each process imported its own tree's gpu_mean
        tree = path if x["tree"] == "before" else ROOT
        assert Path(x["gpu_mean"]).resolve().is_relative_to(tree.resolve()), x
    row = next(x for x in res["rows"] if x["row"] == "cpu reduce_mean 16x16" and x["figure"] == "us")
    assert len(row["before_rounds"]) == len(row["after_rounds"]) == 2 and row["after/before"] > 0


def test_before_none_runs_this_tree_alone(tmp_path):
    out = tmp_path / "r.json"
    r = bench("front_door", "--devices", "cpu", "--calls", "2", "--rounds", "1", "--before", "none",
              "--json", str(out))
    assert "target" in r.stdout and "after/before" not in r.stdout
    res = json.loads(out.read_text())
    assert res["before"] is None and [x["tree"] for x in res["runs"]] == ["after"]
    assert Path(res["runs"][0]["gpu_mean"]).resolve().is_relative_to(ROOT.resolve())
    assert all("after" in x and "before" not in x for x in res["rows"])


def test_a_before_that_is_no_commit_is_one_line_naming_it():
    r = bench("front_door", "--before", "no-such-rev-38", check=False)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"tools/bench.py: --before no-such-rev-38: not a commit of this repository ({ROOT})"]


def test_every_benchmark_is_listed():
    names = [ln.split()[0] for ln in bench("--list").stdout.splitlines()]
    assert names == ["compile", "dask", "ddp", "ext_cpu", "front_door", "kernels", "large", "machine", "startup"]


# -- smoke runs: each benchmark at its smallest size, one round, this tree ---------------------------

SMOKE = {
    "front_door": ["--devices", "cpu,fake", "--calls", "2"],
    "kernels": ["--device", "cpu", "--mb", "0.0625", "--repeat", "1", "--only", "R2"],
    "kernels-pair": ["--device", "cpu", "--mb", "0.0625", "--repeat", "1", "--only", "E1", "--pair",
                     "BFLOAT16,FLOAT16"],
    "ddp": ["--device", "cpu", "--mb", "1", "--repeat", "1"],
    "ext_cpu": ["--mib", "0.0625", "--repeat", "1"],
    "large": ["--device", "cpu", "--sizes", "0.001", "--repeat", "1"],
    "startup": ["--device", "cpu"],
}


@pytest.mark.parametrize("name", list(SMOKE))
def test_smoke(name, tmp_path):
    out = tmp_path / "r.json"
    bench(name.split("-")[0], *SMOKE[name], "--rounds", "1", "--json", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(isinstance(x["after"], float) for x in rows)


def test_compile_smoke(tmp_path):
    """NVRTC's time for conformance's kernels: three descriptors' programs compiled through the real
    NVRTC (no GPU), variants counted."""
    from conftest import nvrtc_missing
    if nvrtc_missing() is not None:
        pytest.skip(f"NVRTC or the CUDA headers are absent: {nvrtc_missing()}")
    out = tmp_path / "r.json"
    bench("compile", "--limit", "3", "--workers", "1", "--rounds", "1", "--json", str(out))
    rows = {(x["row"], x["figure"]): x["after"] for x in json.loads(out.read_text())["rows"]}
    assert rows[("quick conformance, 1 thread(s)", "variants")] >= 1
    assert rows[("quick conformance, 1 thread(s)", "seconds")] > 0


@pytest.mark.parametrize("name", ["front_door-opencl", "kernels-opencl", "ddp-opencl"])
def test_smoke_opencl(name, tmp_path):
    from gpu_mean.backends import opencl
    if not opencl.discover()[0]:
        pytest.skip("no OpenCL device")
    args = {"front_door": ["--devices", "opencl", "--calls", "2"],
            "kernels": ["--device", "opencl:0", "--mb", "0.0625", "--repeat", "1", "--only", "R3 inner, short FLOAT32"],
            "ddp": ["--device", "opencl", "--mb", "1", "--repeat", "1"]}[name.split("-")[0]]
    out = tmp_path / "r.json"
    bench(name.split("-")[0], *args, "--rounds", "1", "--json", str(out))
    assert json.loads(out.read_text())["rows"]


DASK_SMOKE = {
    "dask": ["--stream-mb", "2", "--compare-mb", "2", "--chunk-mb", "1", "--repeat", "1"],    # scaling, compare
    "dask-wide": ["--wide", "--wide-shape", "64", "256", "--wide-chunk-rows", "32", "--kinds", "centered",
                  "--only", "axis 1", "--repeat", "1"],
}


@pytest.mark.parametrize("name", list(DASK_SMOKE))
def test_dask_smoke(name, tmp_path):
    """gpu_mean.dask against dask.array.mean on a LocalCluster per process, cpu device, smallest sizes
    (about 9 s and 4 s on 2 cores); each process checks its workers imported the tree's gpu_mean."""
    pytest.importorskip("dask.array")
    pytest.importorskip("distributed")
    out = tmp_path / "r.json"
    bench("dask", *DASK_SMOKE[name], "--device", "cpu", "--rounds", "1", "--json", str(out))
    res = json.loads(out.read_text())
    rows = {x["row"].split()[0]: x for x in res["rows"] if x["figure"] == ("scaling" if "scaling" in x["row"]
                                                                            else "vs_dask")}
    assert set(rows) == ({"scaling", "reduce_mean", "mean(a,"} if name == "dask" else {"centered"}), rows
    assert all(x["after"] > 0 for x in rows.values())
    assert all(Path(x["gpu_mean"]).resolve().is_relative_to(ROOT.resolve()) for x in res["runs"])


def test_dask_workers_importing_another_tree_are_an_error(monkeypatch, tmp_path):
    """A worker whose gpu_mean is not the tree under test's fails the run, naming both."""
    sys.path.insert(0, str(ROOT / "tools"))
    from benches import dask as bench_dask

    import gpu_mean

    class Client:                   # runs the function here: this process's gpu_mean
        def run(self, fn):
            return {"tcp://worker": fn()}
    monkeypatch.setenv("BENCH_TREE", str(Path(gpu_mean.__file__).resolve().parent.parent))
    bench_dask.check_workers(Client())
    monkeypatch.setenv("BENCH_TREE", str(tmp_path))
    with pytest.raises(RuntimeError, match=f"gpu_mean from .* not from the tree under test {tmp_path}"):
        bench_dask.check_workers(Client())


def test_machine_smoke(tmp_path):
    """The native loops need gcc and AVX-512 (as before the harness); elsewhere skipped."""
    if shutil.which("gcc") is None or "avx512f" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("the machine benchmark's native loops need gcc and AVX-512")
    bench("machine", "--device", "cpu", "--mb", "1", "--repeat", "1", "--only", "R1 full FLOAT32", "--rounds", "1")


def test_every_readme_command_parses():
    """Each `python tools/bench.py ...` the README shows names a benchmark and options it has (optional
    parts in brackets included)."""
    import re
    import shlex
    sys.path.insert(0, str(ROOT / "tools"))
    import bench as harness
    text = (ROOT / "README.md").read_text()
    found = re.findall(r"`(python tools/bench\.py [^`]*)`", text)                # inline, maybe over two lines
    found += re.findall(r"^(python tools/bench\.py .*)$", text, re.M)            # the lines of a bash block
    cmds = [shlex.split(c.split("#")[0].replace("[", "").replace("]", ""))[2:] for c in found if "--list" not in c]
    assert len(cmds) >= 8
    for argv in cmds:
        harness.parser().parse_args(argv)


@pytest.mark.parametrize("name, before", [("gpu_mean.checks.profiler", "gpu_mean.tools.profiler"),
                                          ("gpu_mean.kernels.source", "gpu_mean.backends.kernels"),
                                          ("gpu_mean.kernels.reduce_kernels", "gpu_mean.backends.reduce_kernels"),
                                          ("gpu_mean.bridges.arrays", "gpu_mean.backends.arrays")])
def test_a_benchmark_finds_a_module_by_its_name_before_the_layout(monkeypatch, name, before):
    """A --before tree from before issue 38's layout names the modules a benchmark imports as they
    were (gpu_mean/tools, backends/): benches.gm_module falls back to that name."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import benches
    finally:
        sys.path.remove(str(ROOT / "tools"))
    tried, found = [], object()

    def old_tree(module):
        tried.append(module)
        if module == name:
            raise ModuleNotFoundError(module)
        return found
    monkeypatch.setattr(benches.importlib, "import_module", old_tree)
    assert benches.gm_module(name) is found and tried == [name, before]
