"""tools/gpu_pass.sh, the one-call GPU verification, in its dry run on the CPU device
(GPU_PASS_DEVICE=cpu), reduced: one small test file for the suite step, one operation's conformance,
1 MiB profiles with 2 samples. Every step runs and exits 0, the CUDA-only steps (compute-sanitizer,
Nsight Compute) are skipped with the reason, absent peers are left out saying so (never exit 2), and
SUMMARY.md lists each step's command, exit status and seconds."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STEPS = ["tests", "conf-quick", "conf-full", "sanitizer", "profile", "centered", "sweep", "ncu", "front-door", "ddp",
         "opencl", "opencl-profile"]


def dry_run(env: dict, out: Path) -> tuple:
    """Run the script into ``out`` (no test device set for it), assert it exits 0, and return its
    SUMMARY.md and the summary's rows {step: the rest of the row}."""
    env = {k: v for k, v in env.items() if k != "GPU_MEAN_TEST_DEVICES"}
    r = subprocess.run(["bash", str(ROOT / "tools" / "gpu_pass.sh"), str(out)], env=env, capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    summary = (out / "SUMMARY.md").read_text()
    assert r.returncode == 0, summary + r.stderr[-2000:]
    return summary, {m.group(1): m.group(2) for m in re.finditer(r"^\| ([a-z-]+) \| (.*) \|$", summary, re.M)
                     if m.group(1) != "step"}


@pytest.mark.skipif(shutil.which("timeout") is None, reason="coreutils' timeout is not installed")
def test_the_dry_run_passes_end_to_end(tmp_path):
    out = tmp_path / "pass"
    env = {**os.environ, "GPU_PASS_DEVICE": "cpu", "PYTHON": sys.executable, "GPU_PASS_WORKERS": "0",
           "GPU_PASS_TESTS": "tests/test_planning.py -x", "GPU_PASS_CONF_ARGS": "--op mean",
           "GPU_PASS_MB": "1", "GPU_PASS_SWEEP_MB": "0.0625", "GPU_PASS_REPEAT": "2",
           "GPU_PASS_PEERS": "cupy,torch", "GPU_MEAN_CACHE_DIR": str(tmp_path / "cache")}
    summary, rows = dry_run(env, out)
    assert list(rows) == STEPS, summary
    for name in ("tests", "conf-quick", "conf-full", "profile", "centered", "sweep", "front-door"):
        assert re.search(r"\| 0 \| \d+$", rows[name]), (name, rows[name])
        assert (out / f"{name}.log").exists()
    assert rows["sanitizer"].startswith("skipped: device cpu") and rows["ncu"].startswith("skipped: device cpu")
    for extra in ("ddp", "opencl", "opencl-profile"):     # the extra steps: run when named
        assert rows[extra].startswith("skipped: not in GPU_PASS_STEPS"), (extra, rows[extra])
    assert "GPU_MEAN_TEST_DEVICES=cpu " in rows["tests"]
    assert re.search(r"^Overall: PASS in \d+ s$", summary, re.M)
    # the profiles say their data; peers not installed are left out, not refused
    assert "data: normal" in (out / "profile.log").read_text()
    assert "data: centered" in (out / "centered.log").read_text()
    steps = (out / "steps.log").read_text()
    for peer in ("cupy", "torch"):
        try:
            __import__(peer)
        except Exception:
            assert f"peer {peer}: not installed" in steps
    for name in ("profile.json", "centered.json", "sweep.json", "conformance.json", "conformance-quick.json",
                 "front-door.json"):
        assert (out / name).stat().st_size > 0, name
    # the plot where the Python the script runs has matplotlib (not necessarily this one's), else a line
    assert (out / "sweep.png").exists() != ("no plot: matplotlib is not installed" in steps)
    assert not (out / ".rows").exists()


@pytest.mark.skipif(shutil.which("timeout") is None or shutil.which("tar") is None,
                    reason="coreutils' timeout or tar is not installed")
def test_with_out_set_the_outputs_come_back_as_one_archive(tmp_path):
    """The device tool brings back at most 8 files from $OUT: with OUT set and no OUTDIR, the script
    leaves gpu-pass.tgz (every output) and SUMMARY.md there and nothing else."""
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "GPU_PASS_DEVICE": "cpu", "PYTHON": sys.executable, "GPU_PASS_STEPS": "front-door,ddp",
           "OUT": str(out), "GPU_MEAN_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("GPU_MEAN_TEST_DEVICES", None)
    r = subprocess.run(["bash", str(ROOT / "tools" / "gpu_pass.sh")], env=env, capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["SUMMARY.md", "gpu-pass.tgz"]
    names = subprocess.run(["tar", "tzf", str(out / "gpu-pass.tgz")], capture_output=True, text=True,
                           check=True).stdout.split()
    assert "gpu-pass/SUMMARY.md" in names and "gpu-pass/front-door.log" in names, names
    assert "gpu-pass/ddp.json" in names, names          # an extra step, named: it runs
    assert re.search(r"^\| tests \| skipped: not in GPU_PASS_STEPS", (out / "SUMMARY.md").read_text(), re.M)


@pytest.mark.skipif(shutil.which("timeout") is None, reason="coreutils' timeout is not installed")
def test_the_opencl_steps_run_the_suite_and_the_profile_on_an_opencl_device(tmp_path):
    """Named, the extra steps find an OpenCL device (on a GPU machine an OpenCL GPU beside CUDA; the
    dry run takes PoCL) and run tests and a profile there, or say why not (no pyopencl, no device)."""
    out = tmp_path / "pass"
    env = {**os.environ, "GPU_PASS_DEVICE": "cpu", "PYTHON": sys.executable, "GPU_PASS_WORKERS": "0",
           "GPU_PASS_STEPS": "opencl,opencl-profile", "GPU_PASS_CL_TESTS": "tests/test_reduce.py -x -k float32",
           "GPU_PASS_MB": "1", "GPU_PASS_REPEAT": "2", "GPU_PASS_DTYPES": "f32", "GPU_PASS_PROFILE_ARGS": "--op reduce",
           "GPU_MEAN_CACHE_DIR": str(tmp_path / "cache")}
    summary, rows = dry_run(env, out)
    # the script runs the checkout's .venv where it has one (else $PYTHON): what does that Python see?
    py = ROOT / ".venv" / "bin" / "python"
    probe = ("import gpu_mean as gm; print(any(d.backend == 'opencl' and not d.unavailable "
             "for d in gm.list_devices()))")
    seen = subprocess.run([str(py) if py.exists() else sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, cwd=ROOT).stdout.strip()
    if seen != "True":
        assert rows["opencl"].startswith("skipped: no OpenCL device"), rows["opencl"]
        assert rows["opencl-profile"].startswith("skipped: no OpenCL device"), rows["opencl-profile"]
        return
    assert "GPU_MEAN_TEST_DEVICES=opencl:" in rows["opencl"] and re.search(r"\| 0 \| \d+$", rows["opencl"])
    assert re.search(r"\| 0 \| \d+$", rows["opencl-profile"]), rows["opencl-profile"]
    assert " passed" in (out / "opencl.log").read_text()
    assert "profile: opencl:" in (out / "opencl-profile.log").read_text()
    assert (out / "opencl-profile.json").stat().st_size > 0
