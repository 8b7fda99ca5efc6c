"""The per-user disk cache of built kernel programs (gpu_mean/backends/diskcache.py): a second
process (or a fresh backend) loads what the first compiled; entries are private, atomic, checked
against their key; a bad entry is rebuilt, never loaded; the folder can be moved or turned off.

Every test gets its own cache folder (the ``cache`` fixture); the suite as a whole runs with a
session folder (conftest), never the user's."""
from __future__ import annotations

import json
import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import cache_worker
import numpy as np
import pytest
from conftest import _wanted
from test_cuda_nvrtc import nvrtc_missing

import gpu_mean as gm
from gpu_mean.backends import cuda_compile, diskcache
from gpu_mean.checks import oracle
from gpu_mean.checks.progress import CompileNotice, compile_notice

ROOT = Path(__file__).resolve().parent.parent
KEY = diskcache.make_key("opencl", "__kernel void k() {}", ("-w",), device="d", driver="1")
PAYLOAD = bytes(range(256)) * 40


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder for this test (GPU_MEAN_CACHE_DIR points at it); not yet created."""
    root = tmp_path / "kcache"
    monkeypatch.setenv("GPU_MEAN_CACHE_DIR", str(root))
    monkeypatch.setattr(diskcache, "_warned", set())
    return root


@pytest.fixture
def compiles():
    """What was compiled (not loaded) while the test ran."""
    seen = []
    with diskcache.on_compile(seen.append):
        yield seen


def entries(root: Path) -> list[Path]:
    return sorted((root / f"v{diskcache.FORMAT}").glob("*.bin"))


# -- where the cache lives, and who may own it

def test_the_suite_never_uses_the_users_cache():
    here = diskcache.location()
    assert here is not None and here.name.startswith("gpu_mean-test-cache-") and here != diskcache.default_dir()


def test_default_folder_follows_xdg_and_home(monkeypatch, tmp_path):
    monkeypatch.delenv("GPU_MEAN_CACHE_DIR", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.location() == tmp_path / "xdg" / "gpu_mean"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")          # invalid per the XDG spec: ignored
    assert diskcache.location() == tmp_path / ".cache" / "gpu_mean"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert diskcache.location() == tmp_path / ".cache" / "gpu_mean"


@pytest.mark.parametrize("value", ["off", "OFF", " Off "])
def test_the_off_switch(monkeypatch, value):
    monkeypatch.setenv("GPU_MEAN_CACHE_DIR", value)
    assert diskcache.location() is None and diskcache.open_cache() is None
    assert "off" in diskcache.describe()


def test_the_folder_is_created_private_whatever_the_umask(cache):
    old = os.umask(0)
    try:
        c = diskcache.open_cache()
    finally:
        os.umask(old)
    assert c is not None and c.root == cache
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert c.store(KEY, PAYLOAD)
    (entry,) = entries(cache)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_folder_others_can_write_is_refused_with_a_clear_warning(cache, mode):
    cache.mkdir()
    cache.chmod(mode)
    with pytest.warns(RuntimeWarning, match=rf"{cache}.*writable by users other than its owner.*{mode:o}"):
        assert diskcache.open_cache() is None
    assert "refused" in diskcache.describe()


def test_a_folder_of_another_user_is_refused(cache, monkeypatch):
    cache.mkdir(mode=0o700)
    uid = cache.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    with pytest.warns(RuntimeWarning, match=rf"{cache}.*belongs to another user \(uid {uid}"):
        assert diskcache.open_cache() is None


def test_the_refusal_is_said_once_per_folder(cache):
    cache.mkdir()
    cache.chmod(0o777)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            assert diskcache.open_cache() is None
    assert len(w) == 1


def test_a_file_where_the_folder_should_be_is_refused(cache):
    cache.write_text("not a folder")
    with pytest.warns(RuntimeWarning, match="is not a folder"):
        assert diskcache.open_cache() is None


# -- entries: atomic, checked against their key

def test_round_trip_and_no_temporary_left(cache):
    c = diskcache.open_cache()
    assert c.load(KEY) is None
    assert c.store(KEY, PAYLOAD)
    assert c.load(KEY) == PAYLOAD
    assert [p.name for p in (cache / "v1").iterdir()] == [entries(cache)[0].name]
    assert entries(cache)[0].name.startswith("opencl-")


def _stored(cache) -> tuple:
    c = diskcache.open_cache()
    c.store(KEY, PAYLOAD)
    return c, c.path(KEY), c.path(KEY).read_bytes()


@pytest.mark.parametrize("cut", [0, 1, 8, 12, 40, -len(PAYLOAD) - 1, -1])
def test_a_truncated_entry_is_never_loaded(cache, cut):
    c, path, data = _stored(cache)
    path.write_bytes(data[:cut])
    assert c.load(KEY) is None


def test_a_corrupt_entry_is_never_loaded(cache):
    c, path, data = _stored(cache)
    for pos in (0, 9, 20, len(data) - len(PAYLOAD) - 5, len(data) - 1000, len(data) - 1):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        path.write_bytes(bytes(bad))
        assert c.load(KEY) is None, pos
    path.write_bytes(data + b"\0")                  # a longer payload than its header says
    assert c.load(KEY) is None


def test_a_foreign_entry_is_never_loaded(cache):
    """An entry written for another key, under this key's file name (copied, renamed, or a hash
    collision of names), fails the key comparison."""
    c = diskcache.open_cache()
    other = diskcache.make_key("opencl", "__kernel void k() {}", ("-w",), device="d", driver="2")
    c.store(other, b"the other driver's binary")
    c.path(other).rename(c.path(KEY))
    assert c.load(KEY) is None
    assert c.load(other) is None


def test_an_entry_owned_by_another_user_or_a_link_is_never_loaded(cache, monkeypatch, tmp_path):
    c, path, data = _stored(cache)
    uid = path.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    assert c.load(KEY) is None
    monkeypatch.undo()
    elsewhere = tmp_path / "planted.bin"
    elsewhere.write_bytes(data)
    path.unlink()
    path.symlink_to(elsewhere)
    assert c.load(KEY) is None


def test_a_bad_entry_is_replaced_by_the_next_store(cache):
    c, path, data = _stored(cache)
    path.write_bytes(data[:50])
    assert c.load(KEY) is None
    c.store(KEY, PAYLOAD)
    assert c.load(KEY) == PAYLOAD


def test_the_key_changes_with_every_input():
    base = dict(api="opencl", source="__kernel void k() {}", options=("-cl-std=CL1.2", "-w"))
    ident = dict(device="pthread-x", vendor="AMD", driver="3.1", platform_version="PoCL 3.1 LLVM 15")
    k0 = diskcache.make_key(**base, **ident)
    assert k0 == diskcache.make_key(**base, **ident)
    assert json.loads(k0)["gpu_mean"] == gm.__version__ and json.loads(k0)["format"] == diskcache.FORMAT
    changed = [
        dict(base, source="__kernel void k() { }"),
        dict(base, options=("-cl-std=CL1.2",)),
        dict(base, options=("-w", "-cl-std=CL1.2")),         # order matters to a compiler
        dict(base, api="cuda"),
    ]
    keys = {diskcache.make_key(**b, **ident) for b in changed}
    for name in ident:
        keys.add(diskcache.make_key(**base, **dict(ident, **{name: ident[name] + "+1"})))
    assert k0 not in keys and len(keys) == len(changed) + len(ident)


def test_least_recently_used_entries_go_first_past_the_size_limit(cache):
    c = diskcache.open_cache()
    keys = [diskcache.make_key("opencl", f"src {i}", ()) for i in range(4)]
    for i, k in enumerate(keys):
        c.store(k, PAYLOAD)
        os.utime(c.path(k), (1000 + i, 1000 + i))
    assert c.load(keys[0]) == PAYLOAD                # used now: the newest
    stale = c.folder / ".tmp-dead.bin"
    stale.write_bytes(b"x")
    os.utime(stale, (1, 1))
    c.prune(max_bytes=2 * c.path(keys[0]).stat().st_size)
    assert [k for k in keys if c.load(k) is not None] == [keys[0], keys[3]]
    assert not stale.exists()


def test_processes_filling_the_cache_at_once_all_succeed(cache):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=cache_worker.fill, args=(str(cache), 200, s, q)) for s in range(4)]
    for p in procs:
        p.start()
    results = sorted(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == [(s, 0) for s in range(4)]       # no process ever read a partial or mixed entry
    c = diskcache.open_cache()
    for i in range(5):
        assert c.load(diskcache.make_key("opencl", f"src {i}", ())) == bytes([i]) * (50_000 + 1000 * i)
    assert not list((cache / "v1").glob(".tmp-*"))


# -- OpenCL: program binaries, on every OpenCL test device

OPENCL_SPECS = [s for s in _wanted() if s.startswith("opencl:")]


def fresh_backend(spec: str):
    """A new backend for ``spec`` with an empty in-memory program cache, like a new process's."""
    from gpu_mean.backends import opencl
    found, reason = opencl.discover()
    index = int(spec.split(":")[1].split("-")[0])
    if index >= len(found):
        pytest.skip(f"{spec} absent: {reason or 'no such index'}")
    return opencl.make_backend(index, allow_fp64="-nofp64" not in spec, gpu_paths="-gpupaths" in spec)


@pytest.fixture(params=OPENCL_SPECS)
def spec(request):
    return request.param


def program_files(spec: str) -> list:
    """The kernel files of run_ops' two programs on ``spec``: the GPU shape's with -gpupaths, else the
    CPU shape's (PoCL is a CPU device)."""
    shape = "gpu" if "gpupaths" in spec else "cpu"
    return [f"reduce_{shape}.cl", f"elementwise_{shape}.cl"]


@pytest.fixture
def kept(monkeypatch):
    """Program binaries kept on every driver, PoCL included (where by default only a note is kept)."""
    from gpu_mean.backends import opencl
    monkeypatch.setattr(opencl, "keeps_binaries", lambda device: True)


@pytest.fixture
def builds(monkeypatch):
    """How each pyopencl Program was made: "source" or "binary"."""
    import pyopencl as cl
    seen, real = [], cl.Program

    def program(ctx, *args):
        seen.append("binary" if len(args) == 2 else "source")
        return real(ctx, *args)
    monkeypatch.setattr(cl, "Program", program)
    return seen


def run_ops(backend) -> tuple:
    """A reduction and an element-wise mean (two programs) on seeded data, checked against the exact
    oracle; returns both results."""
    dev = gm.Device(backend)
    rng = np.random.default_rng(2323)
    x = rng.uniform(1, 2, (24, 700)).astype(np.float32)
    xd, yd = gm.TensorDesc(gm.DataType.FLOAT32, x.shape), gm.TensorDesc(gm.DataType.FLOAT32, (24, 1))
    red = dev.compile_operator(dev.create_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, axes=(1,))))
    a, b = rng.uniform(-1, 1, (2, 1000)).astype(np.float32)
    ed = gm.TensorDesc(gm.DataType.FLOAT32, (1000,))
    ew = dev.compile_operator(dev.create_operator(gm.ElementWiseMeanDesc(ed, ed, ed)))
    X, Y = dev.create_buffer(xd.total_size_in_bytes), dev.create_buffer(yd.total_size_in_bytes)
    X.write(x)
    red.execute(inputs=[X], outputs=[Y])
    A, B, Out = (dev.create_buffer(ed.total_size_in_bytes) for _ in range(3))
    A.write(a)
    B.write(b)
    ew.execute(inputs=[A, B], outputs=[Out])
    y, o = Y.read_tensor(yd), Out.read_tensor(ed)
    want = oracle.reduce_mean(x, (1,), np.float32)
    assert max(oracle.ulp_distance(g, w, np.float32) for g, w in zip(y.ravel(), want.ravel())) <= 1
    assert oracle.equal_bits(o, oracle.mean2(a, b, np.float32))
    return y, o


def test_a_fresh_backend_loads_the_binaries_the_first_compiled(cache, compiles, builds, kept, spec):
    first = run_ops(fresh_backend(spec))
    assert compiles == program_files(spec)
    assert len(entries(cache)) == 2
    compiles.clear()
    be = fresh_backend(spec)
    builds.clear()                                          # discovery's probe kernel is always compiled
    again = run_ops(be)
    assert compiles == [] and builds == ["binary", "binary"]   # both programs from their binaries
    assert all(payload_of(f) for f in entries(cache))
    assert all(oracle.equal_bits(p, q) for p, q in zip(first, again))


def payload_of(path: Path) -> bytes | None:
    """An entry's payload, checked against the key stored in it."""
    data, m = path.read_bytes(), len(diskcache.MAGIC)
    n = int.from_bytes(data[m:m + 4], "little")
    return diskcache.decode(data[m + 4:m + 4 + n].decode(), data)


def test_on_pocl_a_note_is_kept_and_pocls_own_cache_does_the_rest(cache, compiles, builds, spec, monkeypatch):
    """PoCL caches builds from source itself, and asking it for a binary costs a compile of every
    kernel: the entry notes that the program was built, so the next process compiles from source
    (a hit in PoCL's cache) without announcing a compile."""
    from gpu_mean.backends import opencl
    be = fresh_backend(spec)
    if "portable computing language" not in be.cl_device.platform.name.lower():
        pytest.skip(f"{spec} is not PoCL")
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    assert not opencl.keeps_binaries(be.cl_device)
    run_ops(be)
    assert [payload_of(f) for f in entries(cache)] == [b"", b""]
    be = fresh_backend(spec)
    builds.clear()
    compiles.clear()
    run_ops(be)
    assert compiles == [] and builds == ["source", "source"]
    monkeypatch.setenv("POCL_KERNEL_CACHE", "0")            # PoCL's own cache off: binaries are kept
    assert opencl.keeps_binaries(be.cl_device)


@pytest.mark.parametrize("platform, kept_", [("Portable Computing Language", False), ("NVIDIA CUDA", True),
                                             ("Intel(R) OpenCL Graphics", True), ("AMD Accelerated Parallel "
                                                                                  "Processing", True)])
def test_which_drivers_binaries_are_kept(monkeypatch, platform, kept_):
    from types import SimpleNamespace

    from gpu_mean.backends import opencl
    monkeypatch.delenv("POCL_KERNEL_CACHE", raising=False)
    assert opencl.keeps_binaries(SimpleNamespace(platform=SimpleNamespace(name=platform))) == kept_


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "empty"])
def test_a_damaged_program_binary_is_rebuilt_never_loaded(cache, compiles, kept, spec, damage):
    run_ops(fresh_backend(spec))
    files = entries(cache)
    datas = [f.read_bytes() for f in files]
    for f, data in zip(files, datas):
        if damage == "truncate":
            f.write_bytes(data[:len(data) // 2])
        elif damage == "flip":
            bad = bytearray(data)
            bad[-100] ^= 0xFF                              # inside the binary itself
            f.write_bytes(bytes(bad))
        elif damage == "foreign":                          # each file holds the other program's entry
            f.write_bytes(datas[1 - files.index(f)])
        else:
            f.write_bytes(b"")
    compiles.clear()
    run_ops(fresh_backend(spec))                            # right results from rebuilt programs
    assert sorted(compiles) == sorted(program_files(spec))
    assert [f.read_bytes() for f in files] == datas         # each entry rewritten whole
    compiles.clear()
    run_ops(fresh_backend(spec))                            # and loaded again
    assert compiles == []


def test_a_binary_the_driver_refuses_is_compiled_anew(cache, compiles, kept, monkeypatch, spec):
    """An entry that passes every check but that the driver will not build (replaced in place
    without a version change) is compiled from its text instead."""
    import pyopencl as cl
    run_ops(fresh_backend(spec))
    real = cl.Program

    def program(ctx, *args):
        if len(args) == 2:       # (devices, binaries)
            raise cl.RuntimeError("clBuildProgram failed: INVALID_BINARY")
        return real(ctx, *args)
    monkeypatch.setattr(cl, "Program", program)
    compiles.clear()
    run_ops(fresh_backend(spec))
    assert sorted(compiles) == sorted(program_files(spec))


def test_other_build_options_are_other_entries(cache, compiles, spec):
    from gpu_mean.backends import opencl
    be = fresh_backend(spec)
    src = "__kernel void gm_t(__global float* a) { a[get_global_id(0)] = 2.0f; }"
    opencl.build_program(be.cl, be.ctx, be.cl_device, src, opencl.BUILD_OPTIONS, "t")
    opencl.build_program(be.cl, be.ctx, be.cl_device, src, ("-cl-std=CL1.2",), "t")
    opencl.build_program(be.cl, be.ctx, be.cl_device, src + "\n", opencl.BUILD_OPTIONS, "t")
    opencl.build_program(be.cl, be.ctx, be.cl_device, src, opencl.BUILD_OPTIONS, "t")
    assert compiles == ["t", "t", "t"] and len(entries(cache)) == 3


def test_off_writes_nothing_and_compiles_every_time(cache, compiles, monkeypatch, spec):
    monkeypatch.setenv("GPU_MEAN_CACHE_DIR", "off")
    run_ops(fresh_backend(spec))
    run_ops(fresh_backend(spec))
    assert compiles == program_files(spec) * 2
    assert not cache.exists()


def test_a_refused_folder_still_computes(cache, compiles, spec):
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="writable by users other than its owner"):
        run_ops(fresh_backend(spec))
    assert compiles == program_files(spec) and entries(cache) == []


# -- a second process starts warm; two processes filling it at once both work

CHILD = textwrap.dedent("""
    import os, sys, time, numpy as np, gpu_mean as gm
    from gpu_mean.backends import diskcache
    compiled = []
    if len(sys.argv) > 2:      # start together: say ready, wait for the go
        open(sys.argv[2] + ".ready." + str(os.getpid()), "w").close()
        while not os.path.exists(sys.argv[2] + ".go"):
            time.sleep(0.001)
    with diskcache.on_compile(compiled.append):
        x = np.arange(4096, dtype=np.float32).reshape(64, 64)
        y = gm.reduce_mean(x, axis=1, device=sys.argv[1])
    assert np.array_equal(y, x.mean(axis=1, keepdims=True)), y
    print("compiled", len(compiled))
""")


def child(spec: str, cache: Path, *sync: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPU_MEAN_CACHE_DIR": str(cache)}
    return subprocess.Popen([sys.executable, "-c", CHILD, spec, *sync], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_second_process_starts_warm_and_two_at_once_both_work(cache, tmp_path):
    if "opencl:0" not in OPENCL_SPECS:
        pytest.skip("opencl:0 is not among the test devices")
    fresh_backend("opencl:0")                                   # skips when absent
    sync = str(tmp_path / "sync")
    both = [child("opencl:0", cache, sync) for _ in range(2)]   # filling the empty cache at the same time
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("sync.ready.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    Path(sync + ".go").touch()
    outs = [p.communicate(timeout=300) for p in both]
    for p, (_, err) in zip(both, outs):
        assert p.returncode == 0, err
    # each compiled the program unless the other's entry was already there (usually both compile)
    assert sorted(out.split()[1] for out, _ in outs) in (["0", "1"], ["1", "1"])
    assert len(entries(cache)) == 1
    p = child("opencl:0", cache)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert out.split() == ["compiled", "0"]                  # the next process compiles nothing


# -- the compile notice

def test_the_compile_notice_is_said_once_and_only_when_something_compiles(cache, spec):
    lines = []
    with compile_notice(lines.append, "compiling kernels ..."):
        run_ops(fresh_backend(spec))
    assert lines == ["compiling kernels ..."]
    lines.clear()
    with compile_notice(lines.append, "compiling kernels ..."):
        run_ops(fresh_backend(spec))
    assert lines == []


def test_the_demos_notice_is_said_once_across_its_steps(cache, monkeypatch, spec):
    monkeypatch.setenv("GPU_MEAN_CACHE_DIR", "off")         # every step compiles
    lines = []
    notice = CompileNotice(lines.append, "compiling kernels ...")
    for _ in range(2):
        with notice.watch():
            run_ops(fresh_backend(spec))
    assert lines == ["compiling kernels ..."]


def test_conformance_says_compiling_only_on_the_run_that_compiles(cache):
    if "opencl:0" not in OPENCL_SPECS:
        pytest.skip("opencl:0 is not among the test devices")
    fresh_backend("opencl:0")
    cmd = [sys.executable, "-m", "gpu_mean", "conformance", "--device", "opencl:0", "--quick", "--op", "identity",
           "--dtype", "f32"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPU_MEAN_CACHE_DIR": str(cache)}
    runs = [subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert "compiling kernels" in runs[0].stdout and str(cache) in runs[0].stdout
    assert "compiling" not in runs[1].stdout + runs[1].stderr


# -- CUDA: NVRTC output, compiled here without a GPU; the load itself with fakes (test_cuda_backend)

needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=f"NVRTC is absent: {nvrtc_missing()}")


def _cuda_macros():
    from gpu_mean.kernels import reduce_kernels
    from gpu_mean.runtime import planning
    xd, yd = gm.TensorDesc(gm.DataType.FLOAT32, (64, 4096)), gm.TensorDesc(gm.DataType.FLOAT32, (64, 1))
    plan = planning.plan_operator(gm.ReduceDesc(gm.ReduceFunction.AVERAGE, xd, yd, axes=(1,)))
    return reduce_kernels.gpu_variant(plan, sms=132).macros


@needs_nvrtc
def test_nvrtc_output_is_cached_and_keyed_by_the_device(cache, compiles):
    macros = _cuda_macros()
    first = cuda_compile.image("reduce_gpu.cl", macros, 90, device="NVIDIA H200", driver=13000)
    assert compiles == ["reduce_gpu.cl"]
    assert first == cuda_compile.build("reduce_gpu.cl", macros, 90).image      # the cubin NVRTC makes
    compiles.clear()
    assert cuda_compile.image("reduce_gpu.cl", macros, 90, device="NVIDIA H200", driver=13000) == first
    assert compiles == []
    cuda_compile.image("reduce_gpu.cl", macros, 90, device="NVIDIA H200", driver=13010)   # another driver
    cuda_compile.image("reduce_gpu.cl", macros, 80, device="NVIDIA A100", driver=13000)   # another GPU
    cuda_compile.image("reduce_gpu.cl", {**macros, "GM_EXTRA": 1}, 90, device="NVIDIA H200", driver=13000)
    assert compiles == ["reduce_gpu.cl"] * 3 and len(entries(cache)) == 4
    assert all(p.name.startswith("cuda-") for p in entries(cache))


@needs_nvrtc
@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_nvrtc_entry_is_compiled_anew(cache, compiles, damage):
    macros = _cuda_macros()
    good = cuda_compile.image("reduce_gpu.cl", macros, 90, device="g", driver=1)
    (f,) = entries(cache)
    data = f.read_bytes()
    f.write_bytes(data[:-10] if damage == "truncate" else data[:-10] + bytes(10))
    compiles.clear()
    assert cuda_compile.image("reduce_gpu.cl", macros, 90, device="g", driver=1) == good
    assert compiles == ["reduce_gpu.cl"] and f.read_bytes() == data


@needs_nvrtc
def test_a_second_cuda_backend_loads_the_cached_image_into_cupy(cache, compiles):
    """The CUDA backend's glue (CuPy faked): a fresh backend hands CuPy the image the first one's
    NVRTC compile stored, compiling nothing."""
    from fake_cupy import fake_backend
    macros = _cuda_macros()
    logs = [[], []]
    for log in logs:
        assert fake_backend(log).function("reduce_gpu.cl", macros, "gm_reduce_row") == "gm_reduce_row"
    loads = [[e[1] for e in log if e[0] == "load"] for log in logs]
    assert compiles == ["reduce_gpu.cl"] and len(loads[0]) == 1 and loads[0] == loads[1]
    assert loads[0][0] == cuda_compile.build("reduce_gpu.cl", macros, 90, 13).image
