"""The access model of the GPU-shaped kernels (docs/design.md, "The access model"): every global load
and store of one operator, as the checked build's accessor sees it, grouped into the warp
instructions a GPU would issue, and the 32-byte sectors each touches against the fewest that could
carry the bytes it asks for; and the work-groups each launch fits per SM of an H100/H200.

How: the operator runs on ``opencl:0-gpupaths`` (PoCL, the GPU shape, CUDA's launch geometry for 132
SMs) built checked in the trace mode (``GM_TRACE``, opencl_kernels/common.h): ``GM_AT`` appends a
record per access (site, argument, element index, width, element size, work-group, work-item) to the
status buffer, which the host reads after each launch (kernels/checked.py: ``Trace``). Here the
records of one site are grouped by (work-group, warp = local linear id // 32) and each work-item's
k-th access at the site is paired with the other lanes' k-th: one executed instruction of the warp.
Its addresses are element index x element size from the argument's start, each argument taken as
256-byte aligned; sectors touched = the distinct 32-byte sectors of its bytes, minimum = ceil(distinct
bytes / 32), efficiency = minimum / touched.

Limits: PoCL runs a group's work-items one after another, so which accesses share an instruction is
the model's assumption (the k-th at a site), not an observation; lanes that diverge at a site pair by
count; no cache, no DRAM page or partition effects, no timing. Loads are told from stores by the
pointer type (const: a load) or, for the rest, by the site's source line (an assignment through the
access or a store macro: a store).
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass

import numpy as np

from ..descriptors.types import DataType
from ..kernels import checked
from ..kernels.source import _INCLUDE, kernel_source, kernel_text
from ..runtime import planning
from .cases import Case, op_for

SECTOR = 32
WARP = 32
# an H100 / H200 multiprocessor (compute capability 9.0)
SM_THREADS = 2048
SM_BLOCKS = 32
SM_SMEM = 228 << 10
SMEM_PER_BLOCK_RESERVED = 1 << 10      # the system's share of every block's shared memory on sm_90
SM_REGISTERS = 65536
REG_UNIT = 256                          # registers are given to a warp in units of 256
H100_SMS = 132
MIN_EFFICIENCY = 0.9                    # issue 40's target for every main-kernel load
# (argument 4: the wide sum's low word, or the spread redo's arrival counts: reduce_meta.h)
REDUCE_ARGS = {0: "input", 1: "output", 2: "partials", 3: "flags", 4: "low word/counts"}

_STORE_CALL = re.compile(r"\b(?:vstore\w*|\w*STORE\w*)\s*\(")
# an access followed by an assignment (nested parentheses two deep)
_ASSIGN = re.compile(r"\bGM_\w+\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\s*[-+*/|&^]?=(?!=)")


def decode(records: np.ndarray) -> dict:
    """The fields of raw trace records ((N, 4) int64, common.h's layout) as arrays."""
    r = np.asarray(records, np.int64).reshape(-1, checked.TRACE_RECORD_WORDS)
    return {"index": r[:, 0], "line": r[:, 1] >> 32, "counter": (r[:, 1] >> 16) & 0xFFFF,
            "arg": r[:, 1] & 0xFFFF, "width": r[:, 2] >> 32, "esize": (r[:, 2] >> 16) & 0xFFFF,
            "const": r[:, 2] & 1, "group": r[:, 3] >> 16, "lid": r[:, 3] & 0xFFFF}


def records(index, lid, *, line=1, counter=0, arg=0, width=1, esize=4, const=1, group=0) -> np.ndarray:
    """Trace records made by hand (the model's tests): one per element of ``index`` / ``lid``, in
    that order (each work-item's accesses in its program order)."""
    index, lid = np.broadcast_arrays(np.asarray(index, np.int64), np.asarray(lid, np.int64))
    n = index.size
    out = np.empty((n, checked.TRACE_RECORD_WORDS), np.int64)
    out[:, 0] = index.reshape(-1)
    out[:, 1] = (np.int64(line) << 32) | (np.int64(counter) << 16) | arg
    out[:, 2] = (np.broadcast_to(np.asarray(width, np.int64), (n,)) << 32) | (np.int64(esize) << 16) | const
    out[:, 3] = (np.broadcast_to(np.asarray(group, np.int64), (n,)) << 16) | lid.reshape(-1)
    return out


def warp_instructions(recs: np.ndarray) -> dict:
    """Every warp instruction of a launch's records: the site key (line, counter, argument) of each,
    its lanes, sectors touched, distinct bytes requested, the minimum sectors and the efficiency."""
    f = decode(recs)
    n = f["index"].size
    if n == 0:
        return {"site": np.zeros((0, 3), np.int64), "lanes": np.zeros(0, np.int64), "touched": np.zeros(0, np.int64),
                "bytes": np.zeros(0, np.int64), "minimum": np.zeros(0, np.int64), "efficiency": np.zeros(0)}
    site = (f["line"] << 32) | (f["counter"] << 16) | f["arg"]
    slot = np.arange(n)
    # each work-item's accesses at a site in program order (the records' order), numbered k = 0, 1, ...
    order = np.lexsort((slot, f["lid"], f["group"], site))
    key = np.stack([site[order], f["group"][order], f["lid"][order]], axis=1)
    new = np.ones(n, bool)
    new[1:] = np.any(key[1:] != key[:-1], axis=1)
    start = np.maximum.accumulate(np.where(new, slot, 0))
    k = np.empty(n, np.int64)
    k[order] = slot - start
    inst_key = np.stack([site, f["group"], f["lid"] // WARP, k], axis=1)
    uniq, inst = np.unique(inst_key, axis=0, return_inverse=True)
    inst = inst.reshape(-1)
    m = len(uniq)
    addr = f["index"] * f["esize"]
    nbytes = f["width"] * f["esize"]
    # sectors: each access's [first, last] sector, exploded, distinct per instruction
    first, last = addr // SECTOR, (addr + nbytes - 1) // SECTOR
    span = last - first + 1
    rep = np.repeat(np.arange(n), span)
    sec = first[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(span) - span, span))
    touched = _distinct_per(inst[rep], sec, m)
    rep = np.repeat(np.arange(n), nbytes)
    byte = addr[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(nbytes) - nbytes, nbytes))
    requested = _distinct_per(inst[rep], byte, m)
    minimum = -(-requested // SECTOR)
    lanes = np.bincount(inst, minlength=m)
    return {"site": np.stack([uniq[:, 0] >> 32, (uniq[:, 0] >> 16) & 0xFFFF, uniq[:, 0] & 0xFFFF], axis=1),
            "lanes": lanes, "touched": touched, "bytes": requested, "minimum": minimum,
            "efficiency": minimum / np.maximum(touched, 1)}


def _distinct_per(group: np.ndarray, value: np.ndarray, m: int) -> np.ndarray:
    """How many distinct values each group (0..m-1) holds."""
    pairs = np.unique(np.stack([group, value], axis=1), axis=0)
    return np.bincount(pairs[:, 0], minlength=m)


def site_table(recs: np.ndarray) -> list[dict]:
    """Per site (line, counter, argument): its warp instructions' efficiency (worst, mean, and the
    sums' ratio), sectors, bytes and lanes per instruction, and the access's element size and widths."""
    w = warp_instructions(recs)
    f = decode(recs)
    out = []
    keys = np.unique(w["site"], axis=0)
    for line, counter, arg in keys:
        sel = np.all(w["site"] == (line, counter, arg), axis=1)
        rs = (f["line"] == line) & (f["counter"] == counter) & (f["arg"] == arg)
        out.append({"line": int(line), "counter": int(counter), "arg": int(arg),
                    "const": bool(f["const"][rs].all()), "esize": int(f["esize"][rs][0]),
                    "widths": sorted(int(x) for x in np.unique(f["width"][rs])),
                    "accesses": int(rs.sum()), "instructions": int(sel.sum()),
                    "worst": float(w["efficiency"][sel].min()), "mean": float(w["efficiency"][sel].mean()),
                    "overall": float(w["minimum"][sel].sum() / w["touched"][sel].sum()),
                    "sectors": float(w["touched"][sel].mean()), "min_sectors": float(w["minimum"][sel].mean()),
                    "bytes": float(w["bytes"][sel].mean()), "lanes": float(w["lanes"][sel].mean())})
    return out


# -- the source a record's line refers to ---------------------------------------------------------

def _origins(name: str) -> list[tuple[str, int]]:
    """(file, line) of every line of ``kernels.assembled(name)``."""
    out: list[tuple[str, int]] = []
    for i, line in enumerate(kernel_source("opencl_kernels", name).splitlines(keepends=True), 1):
        m = _INCLUDE.match(line)
        if m and m.end() == len(line):
            out += _origins(m.group(1))
        else:
            out.append((name, i))
    return out


def source_lines(filename: str, macros: dict) -> list[tuple[str, str]]:
    """("file:line", text) of every line of the text OpenCL's compiler received for a variant
    (``kernels.kernel_text``): what a record's ``__LINE__`` indexes (1-based)."""
    text = kernel_text("opencl", filename, macros).splitlines()
    n_macros = len(macros)
    dialect = len(kernel_source("opencl_kernels", "dialect.h").splitlines())
    where = [("(variant macros)", i + 1) for i in range(n_macros)]
    where += [("dialect.h", i + 1) for i in range(dialect)] + _origins(filename)
    if len(where) != len(text):     # a file without a final newline: fall back to bare line numbers
        where = [("(text)", i + 1) for i in range(len(text))]
    return [(f"{f}:{ln}", t.strip()) for (f, ln), t in zip(where, text)]


def access_kind(const: bool, text: str) -> str:
    """load, store or atomic: a const pointer type is a load; an atomic built-in on the site's line
    makes it an atomic; else an assignment through the access or a store macro makes it a store."""
    if const:
        return "load"
    if "atomic_" in text:
        return "atomic"
    return "store" if _STORE_CALL.search(text) or _ASSIGN.search(text) else "load"


# -- work-groups per SM ----------------------------------------------------------------------------

def groups_per_sm(threads: int, smem: int | None, regs: int | None) -> tuple[int, str]:
    """Resident work-groups per H100/H200 SM and what bounds them (threads, blocks, shared memory,
    registers; shared memory and registers left out when unknown)."""
    warps = -(-threads // WARP)
    limits = {"threads": SM_THREADS // (warps * WARP), "blocks": SM_BLOCKS}
    if smem is not None:
        limits["shared memory"] = SM_SMEM // (smem + SMEM_PER_BLOCK_RESERVED)
    if regs:
        per_warp = -(-regs * WARP // REG_UNIT) * REG_UNIT
        limits["registers"] = (SM_REGISTERS // per_warp) // warps
    why = min(limits, key=lambda k: limits[k])
    return limits[why], why


def cuda_resources(plan, op: str) -> tuple[dict, str]:
    """{kernel: (registers, static shared bytes)} of the production CUDA variant of ``plan`` for sm_90
    from NVRTC's cubin, and a note; ({}, why) when NVRTC is absent or fails."""
    from ..backends import cuda_compile
    from . import kernel_listing
    try:
        _, fname, v, _, _, _ = kernel_listing._variant("cuda", plan)
        built = cuda_compile.build(fname, v.macros, 90)
        regs = cuda_compile.cubin_resources(built.cubin)
        smem = cuda_compile.cubin_shared(built.cubin)
    except Exception as e:     # no NVRTC here, or a compile that fails: the figures are not counted
        return {}, f"registers not counted ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
    return ({k: (r, smem.get(k, 0)) for k, (r, _) in regs.items()},
            "registers and static shared memory from NVRTC's sm_90 cubin of the production variant")


# -- running one operator --------------------------------------------------------------------------

def case_for(op: str, dtype: DataType, shape: tuple, axes: tuple | None) -> Case:
    family = "reduce" if op == "reduce" else "mean"
    return Case(op_for(family, dtype), dtype, tuple(shape), tuple(axes) if axes is not None else None)


def traced_device(capacity: int, index: int = 0):
    """``opencl:N-gpupaths-checked`` in the trace mode, keeping up to ``capacity`` records a launch."""
    from ..backends import opencl
    from ..runtime.device import Device
    return Device(opencl.make_backend(index, gpu_paths=True, checked=True, trace=capacity))


def default_capacity(case: Case) -> int:
    desc = case.desc()
    elems = sum(t.total_size_in_bytes // t.numpy_dtype.itemsize for t in desc.input_tensors())
    outs = sum(t.total_size_in_bytes // t.numpy_dtype.itemsize for t in desc.output_tensors())
    return 2 * elems + 16 * outs + (1 << 16)


@dataclass
class LaunchModel:
    kernel: str
    role: str                   # main, finalize, exact pass, element-wise
    global_size: tuple
    local_size: tuple
    claimed: int                # records the launch claimed (more than kept: the trace overflowed)
    kept: int
    sites: list                 # site_table rows, with "where", "text", "kind"
    groups_per_sm: int | None
    bound_by: str
    registers: int | None
    smem: int | None

    def to_json(self) -> dict:
        return dict(self.__dict__, global_size=list(self.global_size), local_size=list(self.local_size))


def _role(kernel: str, family: str) -> str:
    if family != "reduce":
        return "element-wise"
    if "exact" in kernel or "limbs" in kernel or "spread" in kernel:
        return "exact pass"
    return "finalize" if "finalize" in kernel else "main"


def model_case(case: Case, data: str = "normal", capacity: int | None = None, dev=None,
               resources: bool = True) -> dict:
    """Run ``case`` once on the traced GPU-shaped device and model every launch of its execute."""
    from . import profiler
    capacity = capacity or default_capacity(case)
    dev = dev or traced_device(capacity)
    trace = dev.backend.trace
    go = profiler.prepare_device(dev, case, profiler.case_data(case, data))
    trace.clear()
    go()
    plan = planning.plan_operator(case.desc())
    family = "reduce" if isinstance(plan, planning.ReducePlan) else "mean"
    res, note = cuda_resources(plan, family) if resources else ({}, "registers not counted (not asked)")
    launches = []
    for la in trace.launches:
        name, launch, src = la["kernel"], la["launch"], la["source"]
        lines = source_lines(*src) if src else []
        rows = site_table(la["records"])
        for r in rows:
            where, text = lines[r["line"] - 1] if 0 < r["line"] <= len(lines) else (f"line {r['line']}", "")
            r["where"], r["text"] = where + (f"#{r['counter']}" if _shared_line(rows, r) else ""), text
            if family == "reduce":
                r["kind"] = access_kind(r["const"], text)
                r["arg_name"] = REDUCE_ARGS.get(r["arg"], str(r["arg"]))
            else:   # element-wise: inputs are only read, the output (argument NIN) only written
                n_in = len(case.desc().input_tensors())
                r["kind"] = "load" if r["arg"] < n_in else "store"
                r["arg_name"] = f"input {r['arg']}" if r["arg"] < n_in else "output"
        local = tuple(launch.local_size or (1,))
        threads = math.prod(local)
        regs, smem = res.get(name, (None, None))
        g, why = groups_per_sm(threads, smem, regs)
        launches.append(LaunchModel(name, _role(name, family), tuple(launch.global_size), local, la["claimed"],
                                    len(la["records"]), rows, g, why, regs, smem))
    return {"case": {"op": case.op, "dtype": case.dtype.name, "shape": list(case.shape),
                     "axes": list(case.axes) if case.axes is not None else None, "class": case.shape_class,
                     "data": data},
            "device": dev.info.id, "capacity": capacity, "resources": note, "launches": launches}


def _shared_line(rows: list, r: dict) -> bool:
    return sum(1 for x in rows if x["line"] == r["line"]) > 1


# the files of the exact tier's loads: inside the GPU shape's main and finalize kernels since issue 40
# (an open output is redone by the group that stored it), read only for open outputs
EXACT_FILES = ("reduce_exact.h", "reduce_gpu_redo.h")


def main_loads(model: dict) -> list[tuple[LaunchModel, dict]]:
    """(launch, site) of every load of the main and finalize passes (the exact tier's redo of open
    outputs left out, wherever it runs)."""
    return [(la, s) for la in model["launches"] if la.role in ("main", "finalize", "element-wise")
            for s in la.sites if s["kind"] == "load" and not s["where"].startswith(EXACT_FILES)]


def overflowed(model: dict) -> list[str]:
    return [f"{la.kernel}: {la.claimed} records, {la.kept} kept" for la in model["launches"] if la.claimed > la.kept]


# -- output ----------------------------------------------------------------------------------------

def format_model(model: dict) -> str:
    c = model["case"]
    axes = f" axes {tuple(c['axes'])}" if c["axes"] is not None else ""
    out = [f"{model['device']}: {c['op']} {c['dtype']} {tuple(c['shape'])}{axes} ({c['class']}, {c['data']} data); "
           f"{model['resources']}"]
    for la in model["launches"]:
        smem = "?" if la.smem is None else f"{la.smem} B"
        regs = "not counted" if la.registers is None else str(la.registers)
        over = f" of {la.claimed}: TRACE OVERFLOW" if la.claimed > la.kept else ""
        out.append(f"  {la.kernel} ({la.role}): global {la.global_size} local {la.local_size}; "
                   f"{la.groups_per_sm} groups/SM on an H100/H200 (bound by {la.bound_by}; static shared {smem}, "
                   f"registers {regs}); {la.kept} accesses{over}")
        if la.sites:
            out.append(f"    {'site':<26} {'kind':<5} {'arg':<8} {'B/elt':>5} {'instrs':>7} {'lanes':>5} "
                       f"{'B/instr':>7} {'sectors':>7} {'min':>5} {'worst':>6} {'avg':>6}  source")
        for s in la.sites:
            out.append(f"    {s['where']:<26} {s['kind']:<5} {s['arg_name']:<8} {s['esize'] * s['widths'][-1]:>5} "
                       f"{s['instructions']:>7} {s['lanes']:>5.1f} {s['bytes']:>7.1f} {s['sectors']:>7.2f} "
                       f"{s['min_sectors']:>5.2f} {s['worst']:>6.3f} {s['mean']:>6.3f}  {s['text'][:70]}")
    return "\n".join(out)


def to_json(model: dict) -> dict:
    return dict(model, launches=[la.to_json() for la in model["launches"]])


def main(op: str, dtype: str, shape: tuple, axes: tuple | None, data: str = "normal", json_path: str | None = None,
         capacity: int | None = None, out=None, index: int = 0) -> int:
    """``gpu-mean kernels --access``: the model of one operator on opencl:0-gpupaths; exit 1 when a
    main-pass load is below MIN_EFFICIENCY or the trace overflowed."""
    out = out or sys.stdout
    dt = DataType[dtype]
    case = case_for(op, dt, shape, axes)
    capacity = capacity or default_capacity(case)
    model = model_case(case, data, capacity, traced_device(capacity, index))
    print(format_model(model), file=out)
    low = [(la.kernel, s["where"], s["worst"]) for la, s in main_loads(model) if s["worst"] < MIN_EFFICIENCY]
    over = overflowed(model)
    for k, w, e in low:
        print(f"  below {MIN_EFFICIENCY}: {k} {w} worst {e:.3f}", file=out)
    for o in over:
        print(f"  trace overflow: {o} (give a larger --capacity)", file=out)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(to_json(model), fh, indent=1)
    return 1 if low or over else 0
