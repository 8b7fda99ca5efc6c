"""The device conformance suite: for a device at a feature level, what each operator supports and
whether every result matches the exact oracle (``gpu_mean.checks.oracle``, independent of the CPU
device) within its tolerance, plus the descriptors the level must reject.

Tolerances (docs/design.md, "Numerics"): element-wise MEAN, ADD and IDENTITY bit-exact (0 ulp); REDUCE AVERAGE and the
n-ary mean within 1 ulp of the exact mean; every integer result exact. gm.ext's operators (the n-ary mean, the
integer and extension-type means) are reported after DirectML's, as gpu_mean's own rows; a data type whose kernel
the device's backend does not have yet is listed as not built, not run and not failed.
"""
from __future__ import annotations

import json
import sys
import time
import zlib

import numpy as np

from ..backends import diskcache
from ..descriptors import tables
from ..descriptors.tensor import TensorDesc
from ..descriptors.types import DataType, Feature
from ..errors import DeviceRemovedError, DmlError, InvalidArgumentError
from . import oracle
from .cases import EXTENSIONS, OPERATORS, TABLES, Case
from .negative import negative_cases
from .progress import Progress, compile_notice, progress_bar

REFERENCE = "exact oracle (gpu_mean.checks.oracle: rational arithmetic rounded once; not the CPU device)"


def case_list(op: str, dt: DataType, ndim: int, quick: bool) -> list[Case]:
    """Packed, broadcast, permuted and padded layouts; for reductions the inner, outer, all and
    (from 3-D) non-adjacent axes."""
    shape = (3, 5, 7, 4, 2, 3, 2, 2)[:ndim] if quick else (5, 9, 17, 6, 3, 4, 2, 3)[:ndim]
    if ndim == 4 and not quick:
        shape = (2, 3, 33, 65)
    if op in ("mean", "add", "ext_mean"):
        return [Case(op, dt, shape, layout=lay) for lay in ("packed", "broadcast", "permuted+padded")]
    if op == "identity":
        out = [Case(op, dt, shape, layout="permuted")]
        if dt.is_float:
            out.append(Case(op, dt, shape, layout="scale_bias"))
        return out
    if op == "nary":
        return [Case(op, dt, shape, layout="mixed", inputs=3)]
    axes_sets = [(ndim - 1,), (0,), tuple(range(ndim))] + ([(0, ndim - 1)] if ndim >= 3 else [])
    return [Case(op, dt, shape, axes, "permuted" if axes == (0,) else "packed") for axes in axes_sets]


def tolerance(case: Case) -> int:
    return 1 if case.dtype.is_float and case.op in ("reduce", "nary", "ext_reduce") else 0


def random_data(dt: DataType, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt.is_float:
        return (rng.random(n) * 8 + 0.25).astype(dt.numpy_dtype)
    info = np.iinfo(dt.numpy_dtype)
    return rng.integers(info.min, info.max, n, dtype=dt.numpy_dtype, endpoint=True)


def logical_view(raw: np.ndarray, t: TensorDesc) -> np.ndarray:
    it = t.numpy_dtype.itemsize
    return np.ndarray(t.sizes, t.numpy_dtype, buffer=raw, strides=tuple(s * it for s in t.effective_strides))


def expected(case: Case, desc, xs: list) -> np.ndarray:
    dt = case.dtype.numpy_dtype
    if case.family == "mean":
        return oracle.fast_mean2(xs[0], xs[1], dt)
    if case.op == "add":
        return oracle.fast_add2(xs[0], xs[1], dt)
    if case.op == "identity":
        return oracle.identity(xs[0], dt, desc.scale_bias)
    if case.op == "nary":
        return oracle.nary_mean(xs, dt)
    return oracle.reduce_mean(xs[0], case.axes, dt)


def ulp_error(got: np.ndarray, want: np.ndarray) -> int:
    """Largest distance in ulp (floats, across signs, +0 == -0) or absolute difference (integers);
    -1 when NaN positions differ."""
    if not oracle.is_float(got.dtype):
        return int(np.max(np.abs(got.astype(object) - want.astype(object)), initial=0))
    gn, wn = np.isnan(got), np.isnan(want)
    if np.any(gn != wn):
        return -1
    it = np.dtype(f"i{got.dtype.itemsize}")

    def key(a):
        b = a[~np.isnan(a)].view(it).astype(np.int64)
        return np.where(b < 0, -(b & np.iinfo(it).max), b)
    return int(np.max(np.abs(key(got) - key(want)), initial=0))


def run_case(dev, case: Case, bar=None) -> tuple[bool, int | None, str]:
    """(passed, worst error or None, message) for one case on ``dev``."""
    what = f"{case.operator} {case.dtype.name} {len(case.shape)}D"
    seed = zlib.crc32(case.name.encode() + str(case.shape).encode())
    try:
        desc = case.desc()
        # labelled only while a kernel is really compiled (not loaded from the disk cache)
        with diskcache.on_compile(lambda _: bar.label(f"compiling kernels: {what}") if bar else None):
            cop = dev.compile_operator(dev.create_operator(desc))
        if bar:
            bar.label(f"running: {what}")
        bufs, xs = [], []
        for i, t in enumerate(desc.input_tensors()):
            raw = random_data(t.data_type, t.total_size_in_bytes // t.numpy_dtype.itemsize, seed + i)
            b = dev.create_buffer(t.total_size_in_bytes)
            b.write(raw)
            bufs.append(b)
            xs.append(logical_view(raw, t))
        o = desc.output_tensors()[0]
        ob = dev.create_buffer(o.total_size_in_bytes)
        cop.execute(inputs=bufs, outputs=[ob])
        got = ob.read_tensor(o)
    except DeviceRemovedError:
        raise       # the device failed: not a result of this case, and nothing after it can run
    except DmlError as e:
        return False, None, f"{type(e).__name__}: {e}"
    finally:
        if bar:
            bar.step()
    err = ulp_error(got, expected(case, desc, xs))
    tol = tolerance(case)
    if err < 0:
        return False, None, "NaN positions differ from the oracle"
    return err <= tol, err, ""


def plan(dev, quick: bool, ops=None, dtypes=None, ranks=None) -> tuple[list, list]:
    """(operator sections, notes) for ``dev``'s level: each section lists its (dtype, ndim, cases).
    ``ranks`` limits the dimension counts (default: all, or the smallest, 4 and the largest if quick)."""
    sections, notes = [], []
    for op, table in TABLES.items():
        if ops and op not in ops:
            continue
        row = tables.support_row(table, dev.feature_level)
        sec = {"op": op, "operator": OPERATORS[op], "cells": [], "extension": op in EXTENSIONS,
               "support": tables.describe_row(row) if row else f"not available at FL {dev.feature_level.label}"}
        sections.append(sec)
        if row is None:
            continue
        dims = sorted(row[1])
        ndims = sorted({dims[0], 4, dims[-1]} & set(dims)) if quick else dims
        if ranks:
            ndims = [n for n in ndims if n in ranks] or [n for n in dims if n in ranks]
        for dt in sorted(row[2], key=lambda d: d.name):
            if dtypes and dt.name not in dtypes:
                continue
            if not dev.check_feature_support(Feature.TENSOR_DATA_TYPE_SUPPORT, dt):
                notes.append(f"{OPERATORS[op]} {dt.name}: skipped, {dev.name} does not support the type")
                continue
            cases = {nd: case_list(op, dt, nd, quick) for nd in ndims}
            why = dev.type_refusal(cases[ndims[0]][0].desc().kernel_op, dt) if ndims else None
            if why:
                notes.append(f"{OPERATORS[op]} {dt.name}: not run, {why}")
            for nd in ndims:
                cell = {"dtype": dt.name, "ndim": nd, "cases": [] if why else cases[nd]}
                if why:
                    cell["not_built"] = why
                sec["cells"].append(cell)
    return sections, notes


def count(dev, quick: bool, ops=None, dtypes=None, ranks=None) -> int:
    """How many cases and negative cases run_suite will run (for the progress bar)."""
    sections, _ = plan(dev, quick, ops, dtypes, ranks)
    negs = [n for n in negative_cases(dev.feature_level) if not ops or n[0] in ops]
    return sum(len(c["cases"]) for s in sections for c in s["cells"]) + len(negs)


def run_suite(dev, quick=False, ops=None, dtypes=None, progress=None, ranks=None, say=None) -> dict:
    """Runs every (operator, data type, rank) the device's level supports and the negative cases;
    returns the report as a JSON-ready dict. ``say``: called with one line as each operator's cases
    are done (what main prints when its output is no terminal, where the bar draws nothing)."""
    t0 = time.perf_counter()
    sections, notes = plan(dev, quick, ops, dtypes, ranks)
    negs = [n for n in negative_cases(dev.feature_level) if not ops or n[0] in ops]
    total = sum(len(c["cases"]) for s in sections for c in s["cells"]) + len(negs)
    bar = progress or Progress(total, enabled=False)
    # every case's kernels built first, side by side where the backend can (CUDA: NVRTC in threads;
    # a cold quick pass on the H200 was mostly one compile after another)
    descs = []
    for sec in sections:
        for cell in sec["cells"]:
            for case in cell["cases"]:
                try:
                    descs.append(case.desc())
                except DmlError:
                    pass            # its own run reports it
    bar.label(f"compiling the kernels of {len(descs)} cases")
    built = dev.compile_ahead(descs)
    if say is not None and built:
        say(f"conformance: {built} programs built ahead, side by side, {time.perf_counter() - t0:.1f} s")
    passed = failed = done = 0
    for sec in sections:
        t_sec = time.perf_counter()
        results = []
        for cell in sec["cells"]:
            cases = cell.pop("cases")
            rows = []
            for case in cases:
                ok, err, msg = run_case(dev, case, bar)
                rows.append({**case.to_json(), "passed": ok, "error": err, "tolerance": tolerance(case),
                             "message": msg})
            n_fail = sum(not r["passed"] for r in rows)
            cell.update(cases=len(rows), failed=n_fail, worst=max((r["error"] or 0 for r in rows), default=0),
                        unit="ulp" if DataType[cell["dtype"]].is_float else "exact",
                        tolerance=max((r["tolerance"] for r in rows), default=0))
            passed += len(rows) - n_fail
            failed += n_fail
            results.extend(rows)
        sec["results"] = results
        done += len(results)
        if say is not None:
            n_fail = sum(not r["passed"] for r in results)
            say(f"conformance: {sec['operator']}: {len(results)} cases, {n_fail} failed, "
                f"{time.perf_counter() - t_sec:.1f} s ({done}/{total} done, {time.perf_counter() - t0:.0f} s in all)")
    neg_results = []
    for op, what, build in negs:
        bar.label(f"negative: {OPERATORS[op]}")
        bar.step()
        try:
            dev.create_operator(build())
            ok, msg = False, "accepted, but the level must reject it"
        except InvalidArgumentError as e:
            ok, msg = True, str(e)
        except Exception as e:   # a different error type is a conformance failure, reported, not raised
            ok, msg = False, f"{type(e).__name__} instead of InvalidArgumentError: {e}"
        neg_results.append({"operator": OPERATORS[op], "what": what, "passed": ok, "message": msg})
    bar.done()
    neg_fail = sum(not r["passed"] for r in neg_results)
    if say is not None and neg_results:
        say(f"conformance: negative cases: {len(neg_results)}, {neg_fail} accepted that must not be")
    return {"device": dev.name, "backend": dev.info.backend,
            "feature_level": dev.feature_level.label, "quick": quick, "reference": REFERENCE,
            "seconds": round(time.perf_counter() - t0, 2), "operators": sections, "negative": neg_results,
            "notes": notes, "summary": {"passed": passed, "failed": failed, "negative_passed": len(neg_results) -
                                        neg_fail, "negative_failed": neg_fail, "ok": failed == 0 and neg_fail == 0,
                                        "not_built": sorted({f"{s['operator']} {c['dtype']}" for s in sections
                                                             for c in s["cells"] if c.get("not_built")})}}


def format_report(rep: dict) -> list[str]:
    """The report as text: one support table per operator (rows: data types, columns: dimension
    counts), then the negative cases and the failures."""
    lines = [f"reference: {rep['reference']}",
             "cell: pass/FAIL, cases run, worst error/tolerance (ulp for floats; integers must be exact)"]
    heading = False
    for sec in rep["operators"]:
        if sec.get("extension") and not heading:
            heading = True
            lines.append("gm.ext operators: gpu_mean's extensions, not DirectML's; their rows are gpu_mean's own "
                         "(FL 3.0 shape rules), not DirectML feature-level tables")
        lines.append(f"{sec['operator']}  [{sec['support']}]")
        cells = sec["cells"]
        if not cells:
            continue
        ndims = sorted({c["ndim"] for c in cells})
        lines.append("  " + f"{'':9s}" + "".join(f"{str(n) + 'D':17s}" for n in ndims))
        for dt in sorted({c["dtype"] for c in cells}):
            row = f"  {dt:9s}"
            for n in ndims:
                c = next((c for c in cells if c["dtype"] == dt and c["ndim"] == n), None)
                if c is None:
                    row += f"{'-':17s}"
                    continue
                if c.get("not_built"):
                    row += f"{'no kernel yet':17s}"
                    continue
                word = "pass" if not c["failed"] else f"FAIL{c['failed']}"
                err = "exact" if c["unit"] == "exact" and not c["failed"] else f"{c['worst']}/{c['tolerance']}ulp"
                if c["unit"] == "exact" and c["failed"]:
                    err = f"off by {c['worst']}"
                row += f"{word + ' ' + str(c['cases']) + ' ' + err:17s}"
            lines.append(row)
    neg = rep["negative"]
    lines.append(f"negative cases (must raise InvalidArgumentError at create_operator): "
                 f"{sum(r['passed'] for r in neg)}/{len(neg)} rejected")
    for r in neg:
        if not r["passed"]:
            lines.append(f"  FAIL {r['operator']}: {r['what']}: {r['message']}")
    for sec in rep["operators"]:
        for r in sec.get("results", []):
            if not r["passed"]:
                lines.append(f"  FAIL {r['operator']} {r['dtype']} {r['shape']} {r['name']}: "
                             f"{r['message'] or 'error ' + str(r['error']) + ' > tolerance ' + str(r['tolerance'])}")
    lines.extend(f"note: {n}" for n in rep["notes"])
    return lines


def main(device=None, feature_level=None, quick=False, json_path=None, ops=None, dtypes=None) -> int:
    from .. import backends
    dev = backends.create_device(device, feature_level)
    print(f"conformance: {dev.name}, feature level {dev.feature_level.label}{' (quick)' if quick else ''}; "
          f"reference: the exact oracle")
    with progress_bar(count(dev, quick, ops, dtypes)) as bar, \
            compile_notice(print, "conformance: compiling kernels as cases first need them (seconds on a first "
                                  f"run; {diskcache.describe()})", bar):
        # a line per operator where the output is a file or a pipe (tqdm's bar draws nothing there),
        # flushed, so that a long cold run shows how far it got
        say = None if sys.stdout.isatty() else (lambda line: print(line, flush=True))
        rep = run_suite(dev, quick, ops, dtypes, bar, say=say)
    for line in format_report(rep):
        print(line)
    s = rep["summary"]
    print(f"conformance: {'PASS' if s['ok'] else 'FAIL'}: {s['passed']} cases passed, {s['failed']} failed; "
          f"{s['negative_passed']} invalid descriptors rejected, {s['negative_failed']} not; "
          + (f"{len(s['not_built'])} operator/type rows not run (no kernel yet on this backend); "
             if s["not_built"] else "") +
          f"{rep['seconds']:.1f} s on {dev.name} at FL {dev.feature_level.label}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rep, f, indent=1)
        print(f"conformance: JSON written to {json_path}")
    return 0 if s["ok"] else 1
