"""The command line and the tools: demo, devices, conformance and profile, end to end in quick modes."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import cli
from gpu_mean.checks import conformance, oracle, profile_report, profiler
from gpu_mean.checks.cases import Case


def test_devices_lists_present_and_absent(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "numpy reference" in out and "max feature level 6.4" in out
    assert "absent:" in out or "cuda:0" in out


def test_python_dash_m_and_version():
    r = subprocess.run([sys.executable, "-m", "gpu_mean", "devices"], capture_output=True, text=True)
    assert r.returncode == 0 and "cpu" in r.stdout
    r = subprocess.run([sys.executable, "-m", "gpu_mean", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and gm.__version__ in r.stdout


@pytest.mark.parametrize("argv, words", [
    (["conformance", "--device", "gpu"], ["'gpu'", "present: auto"]),
    (["conformance", "--feature-level", "9.9"], ["'9.9'", "1.0", "6.4"]),
    (["profile", "--size-mb", "0"], ["--size-mb", "greater than 0"]),
    (["profile", "--size-mb", "-5"], ["greater than 0"]),
    (["profile", "--repeat", "0"], ["--repeat"]),
    (["profile", "--dtype", "f8"], ["'f8'", "FLOAT32"]),
    (["conformance", "--op", "median"], ["'median'", "reduce"]),
    (["profile", "--axes", "0"], ["--axes needs --shape"]),
    (["profile", "--shape", "4,5", "--axes", "2"], ["out of range"]),
])
def test_user_mistakes_are_one_line_errors(argv, words):
    r = subprocess.run([sys.executable, "-m", "gpu_mean", *argv], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert all(w in last for w in words), last


def test_case_is_a_value():
    c = Case("reduce", gm.DataType.FLOAT32, (64, 1024, 8), (0, 2))
    assert c == Case("reduce", gm.DataType.FLOAT32, [64, 1024, 8], [0, 2])
    assert c.name == "reduce f32 axes [0, 2]" and c.shape_class.startswith("R6")
    assert c.traffic == 4 * 64 * 1024 * 8 + 4 * 1024
    assert c.desc().axes == (0, 2)
    bc = Case("mean", gm.DataType.FLOAT32, (4, 8), layout="broadcast")
    assert bc.traffic == 4 * (8 + 32 + 32)


def test_fast_oracle_matches_the_rational_one():
    rng = np.random.default_rng(3)
    for dt, spread in ((np.float32, 60), (np.float16, 8)):
        x = (rng.standard_normal((300, 3)) * np.exp2(rng.integers(-spread, spread, (300, 3)))).astype(dt)
        x[0] = [np.finfo(dt).max, np.finfo(dt).max, -0.0]
        assert oracle.equal_bits(oracle.fast_mean2(x[:, 0], x[:, 1], dt), oracle.mean2(x[:, 0], x[:, 1], dt))
        want = [oracle.round_fraction(sum(oracle.exact(v) for v in r) / 3, dt) for r in x]
        assert np.array_equal(oracle.mean_rows(x, dt).astype(np.float64), np.array(want))


def test_oracle_memo_returns_the_same_bits_and_never_its_own_array(monkeypatch):
    """mean_rows remembers results by the input's content: a hit gives equal bits as a fresh array, a
    changed input (one bit) or another output type is computed anew, an input above the limit is not kept."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((300, 9)) * np.exp2(rng.integers(-40, 40, (300, 9)))).astype(np.float32)
    calls = []
    real = oracle._mean_rows
    monkeypatch.setattr(oracle, "_mean_rows", lambda rows, dt: calls.append(dt) or real(rows, dt))
    monkeypatch.setattr(oracle, "_memo", type(oracle._memo)())
    first = oracle.mean_rows(x, np.float32)
    first[0] = np.nan                                   # the caller's array, not the memo's
    again = oracle.mean_rows(x.copy(), np.float32)
    assert len(calls) == 1 and not np.isnan(again[0])
    assert oracle.equal_bits(again, real(x, np.dtype(np.float32)))
    again[1] = np.nan                                   # nor is a hit the memo's own array
    assert not np.isnan(oracle.mean_rows(x, np.float32)[1]) and len(calls) == 1
    y = x.copy()
    y.view(np.uint32)[5, 3] ^= 1
    assert oracle.equal_bits(oracle.mean_rows(y, np.float32), real(y, np.dtype(np.float32))) and len(calls) == 2
    oracle.mean_rows(x, np.float64)
    assert len(calls) == 3
    monkeypatch.setattr(oracle, "MEMO_INPUT_BYTES", x.nbytes - 1)
    small = x[:, :5].copy()
    oracle.mean_rows(small, np.float32)
    oracle.mean_rows(small, np.float32)
    assert len(calls) == 4              # below the limit: kept
    oracle.mean_rows(x, np.float32)
    oracle.mean_rows(x, np.float32)
    assert len(calls) == 6              # above it: computed each time


def test_conformance_quick(device_or_checked):
    rep = conformance.run_suite(device_or_checked, quick=True)
    assert rep["summary"]["ok"] and rep["summary"]["passed"] > 50 and rep["summary"]["negative_passed"] >= 20


def test_conformance_at_a_lower_level_writes_json(tmp_path, capsys):
    path = tmp_path / "c.json"
    assert cli.main(["conformance", "--device", "cpu", "--feature-level", "2.1", "--quick", "--json",
                     str(path)]) == 0
    out = capsys.readouterr().out
    assert "feature level 2.1" in out and "not available at FL 2.1" in out and "PASS" in out
    rep = json.loads(path.read_text())
    assert rep["feature_level"] == "2.1" and rep["summary"]["failed"] == 0
    mean = next(s for s in rep["operators"] if s["operator"] == "ELEMENT_WISE_MEAN")
    assert {c["ndim"] for c in mean["cells"]} == {4}   # 4-D only below FL 3.0
    assert any(n["what"].startswith("3 dimensions") for n in rep["negative"])


def test_conformance_prints_a_line_per_operator_into_a_file(capsys):
    """Output to a file or a pipe (no terminal: tqdm's bar draws nothing) gets one line per operator
    as its cases finish, so that a long cold run on a GPU shows how far it got."""
    assert cli.main(["conformance", "--device", "cpu", "--quick", "--op", "mean", "--op", "reduce"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [ln for ln in out if re.match(r"conformance: \S.*: \d+ cases, 0 failed, [\d.]+ s \(\d+/\d+ done", ln)]
    assert [ln.split(":")[1].strip() for ln in lines] == ["ELEMENT_WISE_MEAN", "REDUCE(AVERAGE)"], out[:6]
    assert any(ln.startswith("conformance: negative cases:") for ln in out)
    assert out.index(lines[-1]) < next(i for i, ln in enumerate(out) if ln.startswith("conformance: PASS"))


def test_conformance_detects_a_wrong_cpu_result(monkeypatch, cpu):
    """The CPU device is checked against the oracle, not itself: a 1-ulp slip in its formula fails."""
    from gpu_mean.runtime import numerics
    real = numerics.mean2

    def off_by_one_ulp(a, b, dt):
        r = real(a, b, dt).copy()
        if r.dtype.kind == "f":
            r.reshape(-1).view(f"u{r.dtype.itemsize}")[0] += 1
        return r
    monkeypatch.setattr(numerics, "mean2", off_by_one_ulp)
    rep = conformance.run_suite(cpu, quick=True, ops=["mean"])
    assert rep["summary"]["failed"] > 0
    assert cli.main(["conformance", "--device", "cpu", "--quick", "--op", "mean"]) == 1


def test_a_device_fault_during_conformance_exits_3(monkeypatch, capsys):
    """A native fault removes the device: conformance stops with exit code 3 and one line, instead of
    counting the rest as failed cases."""
    from gpu_mean.backends.cpu import CpuBackend

    class NativeFault(Exception):
        pass

    def faulty(self, plan, flags):
        raise NativeFault("simulated fault while building a kernel")
    monkeypatch.setattr(CpuBackend, "native_errors", (NativeFault,))
    monkeypatch.setattr(CpuBackend, "compile", faulty)
    assert cli.main(["conformance", "--device", "cpu", "--quick", "--op", "mean"]) == 3
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "DeviceRemovedError" in last and "simulated fault" in last


def test_conformance_detects_an_accepted_invalid_descriptor(monkeypatch, cpu):
    from gpu_mean.descriptors import operators
    monkeypatch.setattr(operators.ReduceDesc, "validate", lambda self, level: None)
    rep = conformance.run_suite(cpu, quick=True, ops=["reduce"], dtypes=["FLOAT32"])
    assert rep["summary"]["negative_failed"] > 0 and not rep["summary"]["ok"]


def test_profile_json_plot_and_skip_note(tmp_path):
    lines = []
    js, png = tmp_path / "p.json", tmp_path / "p.png"
    assert profile_report.main("cpu", size_mb=0.0625, repeat=1, peers={"numpy"}, ops=["mean", "reduce"],
                               dtypes=["FLOAT32"], sweep=True, json_path=str(js), plot_path=str(png),
                               log=lines.append) == 0
    text = "\n".join(lines)
    assert "effective bandwidth = bytes each input read once" in text and "of read bw" in text
    rep = json.loads(js.read_text())
    assert {r["input_bytes"] for r in rep["results"]} == {16384, 65536}
    assert all(r["gbps"] > 0 and r["fraction_of_read_bandwidth"] > 0 for r in rep["results"])
    assert any("numpy" in r["peers"] for r in rep["results"])
    assert not any("onnxruntime" in r["peers"] for r in rep["results"])   # only the peers asked for
    try:
        import matplotlib  # noqa: F401   (the optional plot extra)
        assert png.read_bytes()[:4] == b"\x89PNG"
    except ImportError:
        assert "matplotlib is not installed" in text and not png.exists()
    lines.clear()
    profile_report.main("cpu", repeat=1, ops=["reduce"], dtypes=["FLOAT32", "FLOAT64"], shape=(2,) * 9, axes=(8,),
                        log=lines.append)
    assert any("skipped reduce f32" in line and "DimensionCount 9" in line for line in lines)
    assert any("skipped reduce f64 axes [8] (ext)" in line for line in lines)


def test_profile_quick(device):
    """Every shape class runs on every device in CI, at a tiny size."""
    results, skipped = profiler.profile(device, profiler.class_cases(4096), repeat=1, peers=False,
                                        log=lambda *a: None)
    assert len(results) == 18 and not skipped
    assert {r["class"] for r in results} >= {"R1 full", "R4 outer, many outputs", "R6 non-adjacent axes"}


def test_sweep_reaches_several_times_the_cache():
    assert profiler.sweep_sizes(32 * 2**20, 2**40) == [16384 * 4**k for k in range(7)] + [128 * 2**20]
    assert profiler.sweep_sizes(32 * 2**20, 100_000) == [16384, 65536, 100_000]


def test_profile_cases_by_name():
    names = [c.name for c in profiler.cases((64, 1024, 4))]
    assert "copy f32" in names and "reduce f32 axes [0, 2]" in names and "mean f16 a+b" in names


def test_demo_on_the_cpu(capsys):
    assert cli.main(["demo", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "matches the exact oracle" in out and "cases passed" in out
    assert "of copy" not in out and ("of read bw" in out or "measurement fault" in out)


def test_every_mutant_still_names_its_text_once_and_tests_that_exist():
    """tools/mutants.py breaks one feature at a time by replacing a text that must occur exactly once in
    its file; a change that moves the text makes the whole check stop there (session 24: the GPU pass's
    extra steps changed the line gpu-pass-extra-step-by-default replaces). Checked here on every
    commit, without running the mutants: each text occurs once, and each named test file exists."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("mutants_tool", root / "tools" / "mutants.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod        # its dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    bad = []
    for m in mod.MUTANTS:
        n = (root / m.path).read_text().count(m.old)
        if n != 1:
            bad.append(f"{m.name}: {n} occurrences in {m.path}")
        bad += [f"{m.name}: no {t}" for t in m.tests if not (root / t.split("::")[0]).exists()]
    assert not bad, "; ".join(bad)
    assert len({m.name for m in mod.MUTANTS}) == len(mod.MUTANTS)
