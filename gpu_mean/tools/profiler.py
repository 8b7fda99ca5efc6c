"""Kernel profiler: time, effective bandwidth and fraction of the device's copy bandwidth measured
in the same run, side by side with the peers present (numpy, onnxruntime, CuPy, PyTorch).

Effective bandwidth = (unique input bytes read + output bytes written) / time. The copy baseline is
the device's own IDENTITY kernel on a contiguous float32 tensor of the same size (a vectorized copy),
timed side by side with every case like a peer. Times are medians over ``repeat`` runs after a
warm-up; compare ratios within one run only.

Ours and the peers are timed side by side: in rounds, each round a block of runs of ours and then of
every peer, with a pause after each block. The pause matters on a small CPU machine: onnxruntime's
worker threads spin for tens of milliseconds after a run and halve the bandwidth of whatever runs
next on two cores (measured: 9.8 GB/s right after an onnxruntime run, 18.7 GB/s after a 0.1 s pause).
Rounds spread the VM's bandwidth drift over every contender instead of charging it to one.
"""
from __future__ import annotations

import time

import numpy as np

from .. import backends
from ..descriptors.ext import NaryMeanDesc
from ..descriptors.operators import ElementWiseIdentityDesc, ElementWiseMeanDesc, ReduceDesc
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType, ReduceFunction
from ..runtime.objects import BufferBinding

F32, F16 = DataType.FLOAT32, DataType.FLOAT16


def _median_time(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


class Case:
    def __init__(self, name, desc, traffic):
        self.name, self.desc, self.traffic = name, desc, traffic


def cases(shape):
    n = int(np.prod(shape))
    t32, t16 = TensorDesc(F32, shape), TensorDesc(F16, shape)
    bc = TensorDesc(F32, shape, (0,) + t32.effective_strides[1:])
    out = []
    out.append(Case("copy f32 (IDENTITY)", ElementWiseIdentityDesc(t32, t32), 8 * n))
    out.append(Case("mean f32 a+b", ElementWiseMeanDesc(t32, t32, t32), 12 * n))
    out.append(Case("mean f32 broadcast b", ElementWiseMeanDesc(t32, bc, t32), 8 * n + 4 * n // shape[0]))
    out.append(Case("mean f16 a+b", ElementWiseMeanDesc(t16, t16, t16), 6 * n))
    out.append(Case("mean f32 3 inputs (ext)", NaryMeanDesc((t32, t32, t32), t32), 16 * n))
    if len(shape) == 3:
        for axes in ((2,), (1,), (0,), (0, 1, 2), (0, 2)):
            o = TensorDesc(F32, tuple(1 if i in axes else s for i, s in enumerate(shape)))
            out.append(Case(f"reduce f32 axes {list(axes)}", ReduceDesc(ReduceFunction.AVERAGE, t32, o, axes),
                            4 * n + o.total_size_in_bytes))
        o = TensorDesc(F16, (shape[0], shape[1], 1))
        out.append(Case("reduce f16 axes [2]", ReduceDesc(ReduceFunction.AVERAGE, t16, o, (2,)),
                        2 * n + o.total_size_in_bytes))
    return out


def prepare_device(dev, case):
    """A callable that runs ``case`` once on ``dev`` and waits: descriptors, buffers, list recorded once."""
    desc = case.desc
    cop = dev.compile_operator(dev.create_operator(desc))
    init = dev.create_operator_initializer([cop])
    rec = dev.create_command_recorder()
    cl0 = dev.create_command_list()
    rec.record_dispatch(cl0, init, dev.create_binding_table(init))
    dev.execute_command_lists([cl0])
    ins = []
    for t in desc.input_tensors():
        b = dev.create_buffer(t.total_size_in_bytes)
        b.write(np.ones(t.total_size_in_bytes // t.numpy_dtype.itemsize, t.numpy_dtype))
        ins.append(BufferBinding(b, 0, t.total_size_in_bytes))
    o = desc.output_tensors()[0]
    ob = dev.create_buffer(o.total_size_in_bytes)
    table = dev.create_binding_table(cop)
    table.bind_inputs(ins)
    table.bind_outputs([BufferBinding(ob, 0, o.total_size_in_bytes)])
    if cop.binding_properties.temporary_resource_size:
        table.bind_temporary_resource(BufferBinding(dev.create_buffer(cop.binding_properties.temporary_resource_size)))
    cl = dev.create_command_list()
    rec.record_dispatch(cl, cop, table)

    def go():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return go


PAUSE_S = 0.15   # after each block: lets a peer's spinning worker threads go to sleep


def side_by_side(fns: dict, repeat: int, rounds: int | None = None) -> dict:
    """{name: median seconds}: every callable warmed up, then timed in ``rounds`` alternating blocks
    (by default blocks of two calls: this VM's bandwidth drifts over seconds, and one slow period
    inside a block of four once cost a case 40 % against the copy kernel measured before it)."""
    times: dict = {name: [] for name in fns}
    rounds = rounds or max(1, -(-repeat // 2))
    per_round = max(1, -(-repeat // rounds))
    for fn in fns.values():
        fn()
        time.sleep(PAUSE_S)
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            time.sleep(PAUSE_S)
    return {name: float(np.median(ts)) for name, ts in times.items()}


def host_overhead(dev, repeat=200) -> float:
    """Seconds per execute()+synchronize of a 16-element mean: the per-call host cost."""
    t = TensorDesc(F32, (16,))
    cop = dev.compile_operator(dev.create_operator(ElementWiseMeanDesc(t, t, t)))
    a, b = dev.create_buffer(64), dev.create_buffer(64)
    cop.execute(inputs=[a, a], outputs=[b])
    rec, cl = dev.create_command_recorder(), dev.create_command_list()
    table = dev.create_binding_table(cop)
    table.bind_inputs([a, a])
    table.bind_outputs([b])
    rec.record_dispatch(cl, cop, table)

    def go():
        dev.execute_command_lists([cl])
        dev.synchronize()
    return _median_time(go, repeat)


def list_vs_single(dev, n: int = 100, repeat: int = 20) -> tuple[float, float]:
    """Seconds for ``n`` tiny dispatches recorded in one command list (replayed: a CUDA graph where
    the backend has them) and for the same dispatches as ``n`` separate command lists."""
    t = TensorDesc(F32, (256,))
    cop = dev.compile_operator(dev.create_operator(ElementWiseMeanDesc(t, t, t)))
    a, b = dev.create_buffer(1024), dev.create_buffer(1024)
    cop.execute(inputs=[a, a], outputs=[b])
    table = dev.create_binding_table(cop)
    table.bind_inputs([a, a])
    table.bind_outputs([b])
    rec = dev.create_command_recorder()
    one = dev.create_command_list()
    singles = []
    for _ in range(n):
        rec.record_dispatch(one, cop, table)
        single = dev.create_command_list()
        rec.record_dispatch(single, cop, table)
        singles.append(single)

    def run_list():
        dev.execute_command_lists([one])
        dev.synchronize()

    def run_singles():
        for single in singles:
            dev.execute_command_lists([single])
        dev.synchronize()
    run_list()
    return _median_time(run_list, repeat), _median_time(run_singles, repeat)


def numpy_peer(case, shape):
    """numpy doing the same work, as a callable (None when the case has no numpy equivalent)."""
    x = np.ones(shape, np.float32)
    name = case.name
    if name.startswith("copy"):
        y = np.empty_like(x)
        return lambda: np.copyto(y, x)
    if name == "mean f32 a+b":
        y = np.empty_like(x)
        return lambda: np.multiply(np.add(x, x, out=y), np.float32(0.5), out=y)
    if name == "mean f16 a+b":
        h = x.astype(np.float16)
        return lambda: (h + h) * np.float16(0.5)
    if name.startswith("reduce f32"):
        axes = tuple(int(a) for a in name.split("[")[1].rstrip("]").split(","))
        return lambda: np.mean(x, axis=axes)
    return None


def ort_peer(case, shape):
    """onnxruntime's CPU provider doing the same work, as a callable (None when absent or no equivalent)."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    name = case.name
    x = np.ones(shape, np.float32)
    vi = helper.make_tensor_value_info
    if name.startswith("reduce f32"):
        axes = [int(a) for a in name.split("[")[1].rstrip("]").split(",")]
        node = helper.make_node("ReduceMean", ["x", "axes"], ["y"])
        g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, list(shape))],
                              [vi("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(axes, np.int64), "axes")])
        feeds = {"x": x}
    elif name == "mean f32 a+b":
        node = helper.make_node("Mean", ["x", "z"], ["y"])
        g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, list(shape)), vi("z", TensorProto.FLOAT,
                                                                                        list(shape))],
                              [vi("y", TensorProto.FLOAT, None)])
        feeds = {"x": x, "z": x}
    else:
        return None
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def _gpu_ops(lib: str, shape, axes):
    """(operations by case name, synchronize) for CuPy or PyTorch, or None when absent."""
    try:
        mod = __import__(lib)
        if lib == "torch" and not mod.cuda.is_available():
            return None
    except Exception:
        return None
    if lib == "cupy":
        x = mod.ones(shape, mod.float32)
        ops = {"mean f32 a+b": lambda: (x + x) / 2, "copy f32 (IDENTITY)": lambda: x.copy()}
        if axes:
            ops[f"reduce f32 axes {list(axes)}"] = lambda: x.mean(axis=axes)
        return ops, mod.cuda.Device().synchronize
    x = mod.ones(shape, dtype=mod.float32, device="cuda")
    ops = {"mean f32 a+b": lambda: (x + x) / 2, "copy f32 (IDENTITY)": lambda: x.clone()}
    if axes:
        ops[f"reduce f32 axes {list(axes)}"] = lambda: x.mean(dim=axes)
    return ops, mod.cuda.synchronize


def gpu_peers(case, shape):
    """CuPy and PyTorch on the same GPU, where present: {name: callable that runs and synchronizes}."""
    out = {}
    axes = None
    if case.name.startswith("reduce f32"):
        axes = tuple(int(a) for a in case.name.split("[")[1].rstrip("]").split(","))
    for lib in ("cupy", "torch"):
        found = _gpu_ops(lib, shape, axes)
        if found and case.name in found[0]:
            fn, sync = found[0][case.name], found[1]

            def call(fn=fn, sync=sync):
                fn()
                sync()
            out[lib] = call
    return out


def main(device=None, size_mb=256, repeat=10, peers=False) -> int:
    dev = backends.create_device(device)
    n = size_mb * 2**20 // 4
    shape = (64, 1024, n // (64 * 1024)) if n >= 64 * 1024 * 8 else (n,)
    print(f"profile: {dev.name}; float32 input {shape} = {n * 4 / 2**20:.0f} MiB; median of {repeat}")
    rows = []
    # host time before and after the big cases: on the CI-class VM the OpenCL runtime's own
    # enqueue+finish round trip moves with the VM's state during a run (measured after the big cases:
    # 18.6-38.9 us in one session, 16 us again in a fresh process), so one number alone would depend
    # on where it was taken
    ho_start = host_overhead(dev)
    all_cases = cases(shape)
    copy_case = all_cases[0]
    # the copy kernel runs side by side with every case: its ratio is then free of the drift between cases
    copy_go = prepare_device(dev, copy_case)
    for case in all_cases:
        fns = {"ours": copy_go if case is copy_case else prepare_device(dev, case)}
        if case is not copy_case:
            fns["copy"] = copy_go
        if peers:
            fns["numpy"] = numpy_peer(case, shape)
            fns["onnxruntime"] = ort_peer(case, shape)
            fns.update(gpu_peers(case, shape))
        times = side_by_side({k: f for k, f in fns.items() if f is not None}, repeat)
        t = times.pop("ours")
        bw = case.traffic / t / 1e9
        copy_bw = copy_case.traffic / times.pop("copy", t) / 1e9
        line = f"  {case.name:26s} {t * 1e3:9.3f} ms {bw:8.1f} GB/s {bw / copy_bw:6.2f}x copy"
        for peer, tp in times.items():
            line += f" | {peer} {case.traffic / tp / 1e9:6.1f} GB/s ({tp / t:4.2f}x faster)"
        print(line, flush=True)
        rows.append((case.name, t, bw))
    ho = host_overhead(dev)
    print(f"  host time per execute+synchronize of a 16-element mean: {ho_start * 1e6:.1f} us at the start, "
          f"{ho * 1e6:.1f} us after the big cases")
    t_list, t_single = list_vs_single(dev)
    graphs = "replayed as a CUDA graph" if dev.backend.supports_graphs else "no graph replay"
    print(f"  100 tiny dispatches: one command list {t_list * 1e6:.0f} us ({graphs}), one by one "
          f"{t_single * 1e6:.0f} us ({t_single / t_list:.1f}x)")
    return 0
