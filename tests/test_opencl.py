"""OpenCL-specific behaviour: discovery, program caching, kernels found from a wheel."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import backends

cl = pytest.importorskip("pyopencl")
ROOT = Path(__file__).resolve().parent.parent


def _have_opencl():
    found, reason = backends._discover("opencl")
    if not found:
        pytest.skip(f"opencl absent: {reason}")


def test_discovery_skips_a_platform_that_cannot_build(monkeypatch):
    from gpu_mean.backends import opencl

    class BrokenProgram:
        def __init__(self, ctx, src):
            pass

        def build(self, *a, **k):
            raise RuntimeError("error: unknown target CPU 'generic'")

    _have_opencl()
    monkeypatch.setattr(cl, "Program", BrokenProgram)
    with pytest.warns(RuntimeWarning, match="skipping OpenCL platform .*unknown target CPU 'generic'"):
        found, reason = opencl.discover()
    assert found == [] and "unknown target CPU" in reason


def test_no_pyopencl_reports_reason(monkeypatch):
    from gpu_mean.backends import opencl

    def no_cl():
        raise ImportError("No module named 'pyopencl'")

    monkeypatch.setattr(opencl, "_cl", no_cl)
    found, reason = opencl.discover()
    assert found == [] and "pyopencl is not installed" in reason


def test_device_info():
    _have_opencl()
    info = [i for i in gm.list_devices() if i.backend == "opencl"][0]
    assert info.name and info.vendor and info.global_memory > 0 and info.device_type in ("CPU", "GPU", "ACCELERATOR")
    assert info.max_feature_level == (gm.FeatureLevel.FL_6_4 if info.fp64 else gm.FeatureLevel.FL_4_0)


def test_programs_built_once_and_execute_never_rebuilds(monkeypatch):
    _have_opencl()
    dev = gm.create_device("opencl")
    t = gm.TensorDesc(gm.DataType.FLOAT32, (333,))
    ops = [dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(t, t, t))) for _ in range(2)]
    builds = []
    real = cl.Program.build
    monkeypatch.setattr(cl.Program, "build", lambda self, *a, **k: builds.append(1) or real(self, *a, **k))
    dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(t, t, t)))
    a = dev.create_buffer(t.total_size_in_bytes)
    a.write(np.ones(333, np.float32))
    for op in ops:
        for _ in range(3):
            op.execute(inputs=[a, a], outputs=[dev.create_buffer(t.total_size_in_bytes)])
    assert builds == []


def test_kernels_found_from_an_installed_wheel(tmp_path):
    _have_opencl()
    wheel_dir, site = tmp_path / "wheel", tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(ROOT)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{r.stdout}\n{r.stderr}")
    whl = next(wheel_dir.glob("gpu_mean-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(whl)],
                   check=True)
    code = textwrap.dedent("""
        import numpy as np, gpu_mean as gm
        from gpu_mean.kernels.source import kernel_dir
        print(kernel_dir("opencl_kernels"))
        print(kernel_dir("cuda_kernels"))
        dev = gm.create_device("opencl")
        t = gm.TensorDesc(gm.DataType.FLOAT32, (8,))
        x = dev.create_buffer(32); x.write(np.arange(8, dtype=np.float32)); y = dev.create_buffer(32)
        dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(t, t, t))).execute(inputs=[x, x], outputs=[y])
        print(y.read(np.float32).tolist())
    """)
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith(str(site)) and lines[1].startswith(str(site))
    assert lines[2] == str([float(i) for i in range(8)])


@pytest.mark.parametrize("spin_s", [0.0, 0.05])
def test_finish_polls_only_after_a_few_small_commands_and_waits_for_all(monkeypatch, spin_s):
    """synchronize() polls the newest event (up to SPIN_S) only when at most SPIN_MAX_COMMANDS commands
    moving at most SPIN_MAX_BYTES were enqueued since the queue was last empty, and otherwise blocks at
    once; either way every command is complete when it returns, and the results are right."""
    import types

    from gpu_mean.backends import opencl
    _have_opencl()
    clock = types.SimpleNamespace(calls=0)

    def perf_counter():
        clock.calls += 1
        return __import__("time").perf_counter()
    monkeypatch.setattr(opencl, "SPIN_S", spin_s)
    monkeypatch.setattr(opencl, "time", types.SimpleNamespace(perf_counter=perf_counter))
    dev = gm.create_device("opencl")
    events = []
    enqueue = cl.enqueue_nd_range_kernel

    def recording_enqueue(*a, **k):
        ev = enqueue(*a, **k)
        events.append(ev)
        return ev
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", recording_enqueue)
    limit = opencl.SPIN_MAX_BYTES
    # (elements, reduce axes or None for the element-wise mean, dispatches in the list, polled)
    cases = [(16, None, 1, True), (limit // 12, None, 1, True), (limit // 4, [0], 1, False),
             (16, None, opencl.SPIN_MAX_COMMANDS, True), (16, None, opencl.SPIN_MAX_COMMANDS + 1, False)]
    for n, axes, dispatches, polled in cases:
        t = gm.TensorDesc(gm.DataType.FLOAT32, (n,))
        o = t if axes is None else gm.TensorDesc(gm.DataType.FLOAT32, (1,))
        desc = gm.ElementWiseMeanDesc(t, t, o) if axes is None else gm.ReduceDesc(gm.ReduceFunction.AVERAGE, t, o, axes)
        cop = dev.compile_operator(dev.create_operator(desc))
        a, out = dev.create_buffer(t.total_size_in_bytes), dev.create_buffer(o.total_size_in_bytes)
        x = np.random.default_rng(n).random(n, dtype=np.float32)
        a.write(x)
        ins = [a] if axes else [a, a]
        cop.execute(inputs=ins, outputs=[out])     # initializes the operator
        table = dev.create_binding_table(cop)
        table.bind_inputs(ins)
        table.bind_outputs([out])
        temp = cop.binding_properties.temporary_resource_size
        if temp:
            table.bind_temporary_resource(dev.create_buffer(temp))
        cl_list, rec = dev.create_command_list(), dev.create_command_recorder()
        for _ in range(dispatches):
            rec.record_dispatch(cl_list, cop, table)
        out.write(np.zeros(o.sizes, np.float32))   # blocking: the queue is empty again
        events.clear()
        dev.execute_command_lists([cl_list])
        assert len(events) >= dispatches
        clock.calls = 0
        dev.synchronize()
        assert (clock.calls > 0) == polled, (n, axes, dispatches)
        assert all(ev.command_execution_status == cl.command_execution_status.COMPLETE for ev in events)
        clock.calls = 0
        dev.synchronize()                          # nothing enqueued since: nothing to poll
        assert clock.calls == 0
        want = np.array([x.astype(np.float64).mean()], np.float32) if axes else x
        np.testing.assert_allclose(out.read_tensor(o), want, rtol=2e-7)
