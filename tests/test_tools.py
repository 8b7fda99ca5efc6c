"""The command line: devices, conformance and profile run end to end on every device present."""
from __future__ import annotations

import subprocess
import sys

from gpu_mean import cli
from gpu_mean.tools import conformance, profiler


def test_devices_lists_present_and_absent(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "numpy reference" in out and "max feature level 6.4" in out
    assert "absent:" in out or "cuda:0" in out


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "gpu_mean", "devices"], capture_output=True, text=True)
    assert r.returncode == 0 and "cpu" in r.stdout


def test_conformance_quick(device):
    passed, failed = conformance.run_suite(device, quick=True, log=lambda *a: None)
    assert failed == 0 and passed > 50


def test_conformance_at_a_lower_level(capsys):
    assert conformance.main("cpu", "2.1", True) == 0
    out = capsys.readouterr().out
    assert "feature level 2.1" in out and "not available at FL 2.1" in out and " 0 failed" in out


def test_conformance_detects_a_wrong_result(monkeypatch, cpu):
    from gpu_mean.runtime import numerics
    real = numerics.mean2
    calls = {"n": 0}

    def off_by_one_ulp(a, b, dt):
        r = real(a, b, dt)
        calls["n"] += 1
        if calls["n"] % 2 == 1 and r.dtype.kind == "f":   # the device under test, not the reference
            r = r.copy()
            r.reshape(-1).view(f"u{r.dtype.itemsize}")[0] += 1
        return r
    monkeypatch.setattr(numerics, "mean2", off_by_one_ulp)
    passed, failed = conformance.run_suite(cpu, quick=True, log=lambda *a: None)
    assert failed > 0


def test_profile_runs(capsys):
    assert profiler.main("cpu", size_mb=1, repeat=1, peers=True) == 0
    out = capsys.readouterr().out
    assert "copy f32" in out and "GB/s" in out and "host time per execute" in out and "100 tiny dispatches" in out
