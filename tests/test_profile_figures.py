"""Issue 23, points 1, 5 and 7: profile figures that cannot contradict themselves, plots read at a
glance, and the small things. Nothing here asserts a speed: timings are noisy (benchmarks are in
tools/); the tests check what is reported and how."""
from __future__ import annotations

import importlib.util
import json
import types

import numpy as np
import pytest

import gpu_mean as gm
from gpu_mean import cli
from gpu_mean.checks import profile_report, profiler, readbw
from gpu_mean.checks.cases import Case

F32 = gm.DataType.FLOAT32


# --- point 1: the limit, the spread, the fault

def test_every_row_carries_the_traffic_limit_the_read_bandwidth_and_the_spread(device):
    lines = []
    rows, _ = profiler.profile(device, profiler.class_cases(4096, (F32,)), repeat=3, peers=False, log=lines.append)
    assert rows
    for r in rows:
        assert r["limit"] == profiler.LIMIT and r["limit_gbps"] > 0 and r["read_gbps"] > 0 and r["data"] == "normal"
        assert 0 <= r["spread"] and 0 <= r["limit_spread"] and len(r["samples_s"]) == 3
        assert r["fraction_of_limit"] == pytest.approx(r["gbps"] / r["limit_gbps"])
        assert r["fraction_of_read_bandwidth"] == pytest.approx(r["gbps"] / r["read_gbps"])
        assert r["limit_best_gbps"] >= r["read_gbps"] and r["input_gbps"] <= r["gbps"]
        assert r["measurement_fault"] == (r["input_gbps"] > r["limit_best_gbps"])
        assert r["noisy"] == (max(r["spread"], r["limit_spread"]) > profiler.NOISY_SPREAD)
        assert r["above_limit"] == (r["fraction_of_limit"] > 1 + r["spread"] + r["limit_spread"])
        assert "of copy" not in json.dumps(r)


@pytest.mark.parametrize("fraction, spread, limit_spread, above", [
    (1.05, 0.05, 0.10, False), (1.01, 0.05, 0.04, False), (0.99, 0.0, 0.0, False), (1.04, 0.01, 0.02, True),
    (1.18, 0.03, 0.03, True)])
def test_a_row_is_above_its_limit_only_beyond_both_spreads(fraction, spread, limit_spread, above):
    """Within its own and the limit's spread a row is at its limit, not above it (PoCL's three profiles
    of session 24: E1 FLOAT16 at 1.00-1.05 of its limit, spreads 2-10 %); beyond them it is printed
    ABOVE LIMIT and counted (before the streams: the n-ary mean at 1.18, spreads 3-5 %)."""
    assert profiler.above_limit(fraction, spread, limit_spread) is above
    row = {"time_s": 1e-3, "spread": spread, "gbps": 10.0, "measurement_fault": False, "fraction_of_limit": fraction,
           "limit_gbps": 10.0 / fraction, "limit_spread": limit_spread, "fraction_of_read_bandwidth": fraction,
           "above_limit": above, "noisy": False, "peers": {}}
    line = profiler.format_row(Case("mean", F32, (64, 256)), row)
    assert ("ABOVE LIMIT" in line) is above


def test_a_row_above_its_limit_is_a_fault_never_a_speed_up(monkeypatch, cpu):
    """Ours made to look faster than the device can read: the row says measurement fault, and no
    fraction above 1 is printed."""
    real = profiler.measure

    def rigged(fns, repeat, pause=0.0, min_sample_s=profiler.MIN_SAMPLE_S):
        out = real(fns, repeat, pause, min_sample_s)
        out["ours"].samples = [t / 10 for t in out["read"].samples]
        return out
    monkeypatch.setattr(profiler, "measure", rigged)
    lines = []
    rows, _ = profiler.profile(cpu, [Case("reduce", F32, (64, 256), (1,))], repeat=3, peers=False, log=lines.append)
    assert rows[0]["measurement_fault"]
    assert "measurement fault" in lines[0] and "of read bw" not in lines[0]
    demo_line = profiler.format_fraction(rows[0])
    assert "ABOVE" in demo_line and "fault" in demo_line


def _rigged_times(monkeypatch, ours_s: float, read_s: list):
    """profiler.measure made to return these per-call times: ours fixed, the read kernel's samples."""
    real = profiler.measure

    def rigged(fns, repeat, pause=0.0, min_sample_s=profiler.MIN_SAMPLE_S):
        out = real(fns, repeat, pause, min_sample_s)
        out["ours"].samples = [ours_s] * repeat
        out["read"].samples = list(read_s)
        return out
    monkeypatch.setattr(profiler, "measure", rigged)


@pytest.mark.parametrize("case, ours_over_read, fault", [
    # a reduction reads as many bytes as the read kernel (its output is a few bytes): 5 % faster than
    # the read kernel's median but slower than its fastest sample is drift, not a fault; faster than
    # the fastest sample is
    (Case("reduce", F32, (64, 256), (1,)), 1 / 1.05, False),
    (Case("reduce", F32, (64, 256), (1,)), 1 / 1.25, True),
    # an element-wise mean reads 2 of its 3 arrays' bytes: its whole traffic 1.3x the read median
    # (the written third streams beside the reads) reads its inputs at 0.87x: no fault; 1.7x is
    (Case("mean", F32, (64, 256)), 1 / 1.3, False),
    (Case("mean", F32, (64, 256)), 1 / 1.7, True),
], ids=["reduce-drift", "reduce-fault", "elementwise-streamed-write", "elementwise-fault"])
def test_a_fault_is_inputs_read_faster_than_the_fastest_read(monkeypatch, cpu, case, ours_over_read, fault):
    """Read samples 1.0, 1.1, 1.2 (median 1.1 ms, fastest 1.0 ms); ours at a fixed ratio of the median."""
    read_s = [1.1e-3, 1.0e-3, 1.2e-3]
    _rigged_times(monkeypatch, 1.1e-3 * ours_over_read, read_s)
    lines = []
    rows, _ = profiler.profile(cpu, [case], repeat=3, peers=False, log=lines.append)
    r = rows[0]
    assert r["fraction_of_read_bandwidth"] == pytest.approx(1 / ours_over_read)
    assert r["measurement_fault"] is fault
    assert ("measurement fault" in lines[0]) is fault
    if not fault:
        assert f"{1 / ours_over_read:4.2f} of read bw" in lines[0]


def test_spread_is_the_interquartile_range_over_the_median_and_noisy_past_20_percent():
    t = profiler.Timing(samples=[1.0, 1.0, 1.0, 1.0, 1.0])
    assert t.spread == 0
    t = profiler.Timing(samples=[1.0, 1.5, 2.0, 2.5, 3.0])
    assert t.median == 2.0 and t.spread == pytest.approx((2.5 - 1.5) / 2.0)
    assert t.spread > profiler.NOISY_SPREAD


def test_measure_warms_up_calibrates_and_interleaves():
    calls = []

    def fn(name):
        return lambda: calls.append(name)
    out = profiler.measure({"a": fn("a"), "b": fn("b")}, repeat=3, min_sample_s=0.0)
    assert all(len(t.samples) == 3 and t.loops == 1 for t in out.values())
    assert calls[:4] == ["a", "a", "b", "b"]        # warm-up and calibration call of each
    assert calls[4:] == ["a", "b"] * 3              # one sample each per round, interleaved


def test_read_kernel_reads_the_bytes_asked(device):
    go, nbytes = readbw.read_kernel(device, 1 << 20)
    go()
    assert (1 << 20) - 64 <= nbytes <= 1 << 20


@pytest.mark.parametrize("case, streams", [
    (Case("mean", F32, (64, 256)), 2), (Case("mean", F32, (64, 256), layout="broadcast"), 1),
    (Case("nary", F32, (64, 256), inputs=3), 3), (Case("nary", F32, (64, 256), inputs=3, layout="mixed"), 2),
    (Case("reduce", F32, (64, 256), (1,)), 1)], ids=["a+b", "broadcast b", "3 inputs", "3 mixed", "reduce"])
def test_the_traffic_limit_reads_a_stream_per_full_size_input(device, case, streams):
    """A mean of k full-size inputs reads k streams side by side, which a CPU core reads faster than
    one stream of the same bytes: the limit reads at least as many, and at least readbw.CPU_MIN_STREAMS
    on a CPU (on PoCL, one stream was a limit the 3-input n-ary mean beat by 1.15-1.18x in three
    profiles of three, and the FLOAT16 reductions by 1.01-1.13x). A broadcast input's few bytes are
    no stream of their own."""
    assert case.read_streams == streams
    go, nbytes = readbw.traffic_kernel(device, case.read_traffic, case.traffic - case.read_traffic, streams)
    go()
    assert case.traffic - 64 * max(streams, readbw.CPU_MIN_STREAMS) - 64 <= nbytes <= case.traffic


def test_cuda_peak_from_memory_clock_and_bus_width(monkeypatch):
    """H100 SXM: 2619 MHz x 5120 bits x 2 (DDR) = 3352 GB/s; CuPy faked (no GPU here)."""
    attrs = {"MemoryClockRate": 2_619_000, "GlobalMemoryBusWidth": 5120}
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=lambda i: types.SimpleNamespace(attributes=attrs)))
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake)
    dev = types.SimpleNamespace(info=types.SimpleNamespace(backend="cuda", index=0))
    assert readbw.cuda_peak_gbps(dev) == pytest.approx(3352.32)
    assert readbw.cuda_peak_gbps(types.SimpleNamespace(info=types.SimpleNamespace(backend="opencl"))) is None
    attrs.pop("MemoryClockRate")
    assert readbw.cuda_peak_gbps(dev) is None


# --- point 5: the figures, rendered with Agg, by their artists

def _report(sizes, peers=("numpy", "onnxruntime")):
    rows = []
    for i, case in enumerate(profiler.class_cases(4096, (F32,))):
        for size in sizes:
            g = 10.0 + i + np.log2(size)
            rows.append({**case.to_json(), "input_bytes": size, "gbps": g, "limit_gbps": g * 1.2, "noisy": i == 2,
                         "peers": {p: {"gbps": g * (0.5 + k)} for k, p in enumerate(peers)}})
    return {"device": "opencl:0 (pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.50GHz) with a long name",
            "sizes": list(sizes), "results": rows}


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("sizes", [[2**20], [2**14, 2**16, 2**18, 2**20]], ids=["single size", "sweep"])
def test_plot_legend_title_and_labels(sizes):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = profile_report.figure(_report(sizes))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    fig_box = fig.bbox
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert len(legends) == 1
    leg = legends[0]
    labels = [t.get_text() for t in leg.get_texts()]
    assert labels[:3] == ["gpu_mean (ours)", "numpy", "onnxruntime"] and "traffic bandwidth" in labels[-1]
    colours = {tuple(np.round(matplotlib.colors.to_rgba(
        h.get_color() if hasattr(h, "get_marker") else h.get_facecolor()), 3)) for h in leg.legend_handles[:3]}
    assert len(colours) == 3                                    # one colour per contender
    lb = leg.get_window_extent(r)
    for ax in fig.axes:
        if ax.get_visible():
            assert not _overlap(lb, ax.get_window_extent(r)), "the legend covers data"
            assert "GB/s" in ax.get_xlabel() + ax.get_ylabel()
            assert ("bytes" in ax.get_xlabel()) if len(sizes) > 1 else ("case" in ax.get_ylabel())
            t = ax.title.get_window_extent(r)
            assert fig_box.x0 <= t.x0 and t.x1 <= fig_box.x1
    title = fig._suptitle
    tb = title.get_window_extent(r)
    assert fig_box.x0 <= tb.x0 and tb.x1 <= fig_box.x1 and tb.y1 <= fig_box.y1, "title cut"
    assert lb.x0 >= fig_box.x0 and lb.x1 <= fig_box.x1 and lb.y0 >= fig_box.y0
    # the limit is drawn: a dashed black line in every panel
    for ax in fig.axes:
        if ax.get_visible():
            assert any(line.get_linestyle() == "--" and line.get_color() == "black" for line in ax.get_lines())
    if len(sizes) > 1:   # peers: their own colour and marker, not grey
        markers = {line.get_marker() for line in fig.axes[0].get_lines() if line.get_linestyle() != "--"}
        assert len(markers) == 3


# --- point 7: the small things

def test_feature_level_prints_as_directml_names_it():
    assert str(gm.FeatureLevel.FL_2_1) == "DML_FEATURE_LEVEL_2_1" and f"{gm.FeatureLevel.FL_6_4}" == \
        "DML_FEATURE_LEVEL_6_4"
    assert int(gm.FeatureLevel.FL_2_1) == 0x2100 and f"{gm.FeatureLevel.FL_2_1:x}" == "2100"


def test_profile_json_carries_the_spread(tmp_path):
    js = tmp_path / "p.json"
    assert cli.main(["profile", "--device", "cpu", "--shape", "64,256", "--axes", "1", "--op", "reduce",
                     "--dtype", "f32", "--repeat", "3", "--json", str(js)]) == 0
    rep = json.loads(js.read_text())
    assert rep["limit"] == profiler.LIMIT and rep["noisy_spread"] == 0.2 and rep["data"] == "normal"
    r = rep["results"][0]
    assert {"spread", "limit_spread", "noisy", "measurement_fault", "samples_s"} <= set(r)


def test_one_case_timed_is_singular():
    assert profile_report.plural(1, "case") == "1 case" and profile_report.plural(2, "case") == "2 cases"
    lines = []
    profile_report.main("cpu", repeat=1, ops=["reduce"], dtypes=["FLOAT32"], shape=(4, 8), axes=(1,),
                        log=lines.append)
    assert "1 case timed" in lines[-1] and "1 cases" not in lines[-1]


def test_cli_help_states_the_defaults_it_uses():
    p = cli.parser()
    sub = next(a for a in p._actions if a.dest == "cmd").choices["profile"]
    text = sub.format_help().replace("\n", " ")
    text = " ".join(text.split())
    assert "default 256" in text and "default 10" in text and "$GPU_MEAN_DEVICE" in text
    assert sub.get_default("size_mb") == 256.0 and sub.get_default("repeat") == 10


def test_progress_is_tqdm():
    from tqdm import tqdm

    from gpu_mean.checks import progress
    with progress.progress_bar(3, enabled=False) as bar:
        bar.label("x")
        bar.step()
    assert isinstance(bar.bar, tqdm)


def test_results_cite_nothing_outside_the_repository():
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    for md in (root / "docs" / "results").rglob("*.md"):
        assert "reference/performance.md" not in md.read_text(), md


def test_test_summary_prints_one_line_per_device(tmp_path):
    import subprocess
    import sys
    xml = tmp_path / "r.xml"
    xml.write_text("""<testsuites><testsuite>
<testcase classname="tests.test_a" name="test_x[cpu]"/>
<testcase classname="tests.test_a" name="test_x[opencl:0-nofp64]"/>
<testcase classname="tests.test_a" name="test_y[FLOAT32-cuda:0]"><skipped message="cuda:0 absent: no CuPy"/></testcase>
<testcase classname="tests.test_onnx_backend.OnnxBackendNodeModelTest_opencl_0" name="test_mean_example_cpu"/>
<testcase classname="tests.test_a" name="test_z"><failure message="boom"/></testcase>
</testsuite></testsuites>""")
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "tools" / "test_summary.py"), str(xml)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    by_dev = {line.split()[0]: line for line in out[1:]}
    assert set(by_dev) == {"cpu", "opencl:0-nofp64", "cuda:0", "opencl:0", "no"}
    assert "1 passed" in by_dev["cpu"] and "1 skipped; why: 1 x cuda:0 absent: no CuPy" in by_dev["cuda:0"]
    assert "1 failed" in by_dev["no"]


@pytest.mark.parametrize("dtype", [gm.DataType.FLOAT32, gm.DataType.FLOAT16], ids=["f32", "f16"])
def test_cpu_peers_compute_the_case_they_are_timed_against(dtype):
    """Every CPU peer (numpy, onnxruntime, OpenVINO) computes the class's own result (all-ones inputs:
    a mean of ones, in the output's shape), and the n-ary peers get distinct arrays: one array passed k
    times is read once by a fused loop, which would time less memory traffic than ours moves."""
    from gpu_mean.checks import peers
    ran = set()
    for case in profiler.class_cases(4096, (dtype,)):
        want = np.ones(case.shape, np.float32).mean(axis=case.axes) if case.family == "reduce" else \
            np.ones(case.shape, np.float32)
        for name in ("numpy_peer", "ort_peer", "openvino_peer"):
            fn = getattr(peers, name)(case)
            if fn is None:
                continue
            out = fn()
            if isinstance(out, list) or hasattr(out, "values"):   # onnxruntime's list, OpenVINO's dict
                out = out[0] if isinstance(out, list) else next(iter(out.values()))
            got = np.asarray(out, np.float32)   # onnxruntime keeps the reduced axes (keepdims=1): same work
            assert got.size == want.size and np.array_equal(got.reshape(want.shape), want), (name, case.name)
            ran.add(name)
        if case.op == "nary":
            xs = peers._operands(np, case, lambda s: np.ones(s, dtype.numpy_dtype))
            assert len({id(x) for x in xs}) == case.inputs
    # each CPU peer whose library is installed ran (numpy always; an absent one is no failure, but the
    # test says so: a run where onnxruntime and OpenVINO are both absent checks numpy alone)
    needs = {"ort_peer": ("onnxruntime", "onnx"), "openvino_peer": ("openvino",)}
    present = {"numpy_peer"} | {p for p, mods in needs.items() if all(importlib.util.find_spec(m) for m in mods)}
    assert present <= ran, (present, ran)
    if present != {"numpy_peer", "ort_peer", "openvino_peer"}:
        pytest.skip(f"checked {', '.join(sorted(ran))} only: "
                    f"{', '.join(sorted({'ort_peer', 'openvino_peer'} - present))} not installed")


# --- issue 41, point 3: the data the profile times, the exact pass's part, the traffic limit

def test_the_default_data_is_normal():
    args = cli.parser().parse_args(["profile"])
    assert args.data == "normal" and cli.DATA_KINDS == profiler.DATA_KINDS
    assert profile_report.main.__defaults__[-1] == "normal"


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_each_data_kind_builds_what_it_says(dt):
    shape, axes = (64, 512), (1,)
    normal = profiler.fill("normal", shape, dt, axes, 7).astype(np.float64)
    assert abs(normal.mean()) < 0.02 and 0.97 < normal.std() < 1.03
    uniform = profiler.fill("uniform", shape, dt, axes, 7).astype(np.float64)
    assert uniform.min() >= 0 and uniform.max() <= 1 and abs(uniform.mean() - 0.5) < 0.02
    assert (profiler.fill("ones", shape, dt, axes, 7) == 1).all()
    centered = profiler.fill("centered", shape, dt, axes, 7)
    assert centered.dtype == dt and 0.9 < centered.astype(np.float64).std() < 1.1
    # every row's mean is a rounding residue: below the spacing of its values, far below their spread
    means = np.abs(centered.astype(np.float64).mean(axis=axes))
    assert means.max() < float(np.finfo(dt).eps) and means.max() > 0 or dt == np.float16
    # seeded: the same case and kind give the same data, another seed other data
    assert np.array_equal(profiler.fill("normal", shape, dt, axes, 7), profiler.fill("normal", shape, dt, axes, 7))
    assert not np.array_equal(profiler.fill("normal", shape, dt, axes, 7), profiler.fill("normal", shape, dt, axes, 8))
    with pytest.raises(ValueError, match="centered"):
        profiler.fill("zeros", shape, dt)


def test_case_data_gives_each_input_its_buffer_and_centers_over_the_reduced_axes():
    red = Case("reduce", F32, (256, 64), (0,))
    (x,) = profiler.case_data(red, "centered")
    assert x.shape == (256, 64) and np.abs(x.astype(np.float64).mean(axis=0)).max() < 1e-6
    a, b = profiler.case_data(Case("mean", F32, (8, 32), layout="broadcast"), "normal")
    assert a.size == 32 and b.shape == (8, 32)          # the broadcast input's buffer holds one row


def _profile_rows(device, case, kind, monkeypatch=None):
    rows, _ = profiler.profile(device, [case], repeat=1, peers=False, log=lambda *a: None, data=kind)
    return rows[0]


def test_open_outputs_and_launches_on_a_gpu_shaped_device():
    """FLOAT32 on opencl:0-gpupaths (the GPU shape): ones leave no output open; centered data (each mean
    a rounding residue) leave few rows and columns open (4 rows of 64, no column, with the profiler's
    seed): the span proof finds most of their FLOAT64 sums exact (reduce_gpu_span.h: the smallest of
    4096 normal values is about 2^-13, so every value is a multiple of 2^-36, and the sum of the partial
    sums' magnitudes stays below 2^16). Launches are the plan's."""
    from conftest import make_device

    from gpu_mean import backends
    if not backends._discover("opencl")[0]:
        pytest.skip("no OpenCL device")
    dev = make_device("opencl:0-gpupaths")
    for case in (Case("reduce", F32, (64, 4096), (1,)), Case("reduce", F32, (4096, 64), (0,))):
        ones, centered = (_profile_rows(dev, case, k) for k in ("ones", "centered"))
        assert ones["open_outputs"] == 0
        rows = case.axes == (1,)
        opened = centered["open_outputs"]
        assert centered["outputs"] == 64 and opened <= 8, (rows, opened)
        v = profiler.prepare_device(dev, case).cop.program.variant
        assert ones["launches"] == centered["launches"] == 1 + (v.finalize is not None) <= 2
        assert f"{opened}/64 open" in profiler.format_row(case, centered)
        assert "launch" in profiler.format_row(case, centered)


def test_launches_is_what_an_execute_launches():
    from conftest import make_device

    from gpu_mean import backends
    if not backends._discover("opencl")[0]:
        pytest.skip("no OpenCL device")
    for spec in ("opencl:0", "opencl:0-gpupaths"):
        dev = make_device(spec)
        for case in (Case("reduce", F32, (1 << 16,), (0,)), Case("reduce", F32, (64, 4096), (1,)),
                     Case("mean", F32, (64, 256))):
            go = profiler.prepare_device(dev, case)
            go()
            real, seen = dev.backend.launch, []
            dev.backend.launch = lambda *a, real=real, seen=seen: (seen.append(a[0]), real(*a))[1]
            try:
                go.cop.execute(*go.bindings, go.temporary)
            finally:
                del dev.backend.launch
            assert len(seen) == go.cop.launches, (spec, case.name)


def test_the_cpu_device_reports_no_kernels_and_no_flags(cpu):
    r = _profile_rows(cpu, Case("reduce", F32, (64, 256), (1,)), "centered")
    assert r["launches"] is None and r["open_outputs"] is None


def test_the_traffic_limit_moves_the_cases_bytes(cpu):
    """The limit's kernel reads the case's input bytes and writes its output bytes (not only reads)."""
    calls = []
    real = readbw.traffic_kernel

    def spy(dev, read_bytes, write_bytes, streams):
        calls.append((read_bytes, write_bytes, streams))
        return real(dev, read_bytes, write_bytes, streams)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(readbw, "traffic_kernel", spy)
        case = Case("mean", F32, (64, 256))
        r = _profile_rows(cpu, case, "ones")
    assert calls == [(2 * 64 * 256 * 4, 64 * 256 * 4, 2)]      # a and b: two streams
    assert r["fraction_of_limit"] == pytest.approx(r["gbps"] / r["limit_gbps"])
