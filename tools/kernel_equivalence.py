"""Whether the kernel text of this tree is, after the C preprocessor, the text of another revision,
variant by variant: a check for refactors of opencl_kernels/ that must not change what any compiler
receives (issue 38: reduce.cl split into files by shape and concern).

    PYTHONPATH=<tree> python tools/kernel_equivalence.py [--rev c6e7e0c] [--variants captured.jsonl]

For each variant (an API, a kernel file and its macros) both texts are preprocessed by ``cpp -P``
with the variant's #define lines (the CUDA dialect's system includes left out), cut into top-level
items (a declaration or a definition, by braces and semicolons) and compared token for token:
"identical" (the same items in the same order), "reordered" (the same items, another order: C needs
only that each name is declared before its use, which the compile checks see) or a difference.
The old text is what the old tree's kernel_text assembled: macros, dialect, common.h, exact.h and
the old file (reduce.cl for both reduction shapes). Kernel names the refactor renamed are mapped
back (RENAMED). Variants come from the plans of tests/test_cuda_static.py in both shapes, with and
without fp64 and the checked build, or from a file of JSON lines {"api", "file", "macros"} that
``--capture`` writes while pytest runs (``-p tools.kernel_equivalence`` with $GM_KERNEL_CAPTURE)."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RENAMED = {"gm_reduce_short_f64_serial": "gm_reduce_short_serial"}
TOKEN = re.compile(r"0[xX][0-9a-fA-F.pP+\-]+[uUlLfF]*|\d+\.?\d*(?:[eEpP][+\-]?\d+)?[uUlLfF]*|\.\d+[fF]?"
                   r"|\w+|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!=<>]=|##|\S")


def old_text(rev: str, api: str, filename: str, macros: dict) -> str:
    from gpu_mean.kernels.typespell import header

    def show(path):
        return subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    old_file = "reduce.cl" if filename.startswith("reduce_") else "elementwise.cl"
    dialect = "cuda_kernels/dialect.h" if api == "cuda" else "opencl_kernels/dialect.h"
    return (header(macros) + show(dialect) + show("opencl_kernels/common.h") + show("opencl_kernels/exact.h")
            + show(f"opencl_kernels/{old_file}"))


def preprocess(text: str) -> list[str]:
    text = re.sub(r"^#include <[^>]*>\s*$", "", text, flags=re.M)
    r = subprocess.run(["cpp", "-P", "-undef", "-nostdinc", "-x", "c"], input=text, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    return [RENAMED.get(t, t) for t in TOKEN.findall(r.stdout)]


def items(tokens: list[str]) -> list[tuple]:
    """Top-level items: tokens up to a ';' at depth 0, or through the '}' closing depth 0."""
    out, cur, depth = [], [], 0
    for t in tokens:
        cur.append(t)
        if t in "({[":
            depth += 1
        elif t in ")}]":
            depth -= 1
            if depth == 0 and t == "}":
                out.append(tuple(cur))
                cur = []
        elif t == ";" and depth == 0:
            out.append(tuple(cur))
            cur = []
    if cur:
        out.append(tuple(cur))
    return out


def compare(rev: str, api: str, filename: str, macros: dict) -> str:
    from gpu_mean.kernels.source import kernel_text
    a = items(preprocess(old_text(rev, api, filename, macros)))
    b = items(preprocess(kernel_text(api, filename, macros)))
    if a == b:
        return "identical"
    if sorted(a) == sorted(b):
        return "reordered"
    extra, missing = set(b) - set(a), set(a) - set(b)
    return (f"DIFFERENT: {len(missing)} old items missing, {len(extra)} new; first missing: "
            f"{' '.join(sorted(missing)[0][:40]) if missing else '-'}")


def planned_variants() -> list[tuple]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_cuda_static import all_plans

    from gpu_mean.descriptors.types import DataType as D
    from gpu_mean.kernels import elementwise_kernels as ewk
    from gpu_mean.kernels import reduce_kernels as rk
    from gpu_mean.runtime import planning
    out = []
    for _name, plan in all_plans():
        for fp64 in (True, False):
            if plan.dtype == D.FLOAT64 and not fp64:
                continue        # refused before a kernel is planned (kernels/support.py)
            for checked in (False, True):
                if isinstance(plan, planning.ReducePlan):
                    vs = [rk.gpu_variant(plan, sms=132, fp64=fp64, checked=checked),
                          rk.cpu_variant(plan, compute_units=2, fp64=fp64, checked=checked)]
                    out += [("cuda" if v.file == rk.GPU_FILE else "opencl", v.file, v.macros) for v in vs]
                    out += [("opencl", v.file, v.macros) for v in vs if v.file == rk.GPU_FILE]
                else:
                    v = ewk.cpu_variant(plan, fp64=fp64, max_param_bytes=1024, checked=checked)
                    out.append(("opencl", v.file, v.macros))
                    g = ewk.gpu_variant(plan, api="cuda", sms=132, fp64=fp64, checked=checked)
                    out.append(("cuda", g.file, g.macros))
    return out


# --- capture: a pytest plugin recording every kernel_text call ($GM_KERNEL_CAPTURE names the file) ---

def pytest_configure(config):
    path = os.environ.get("GM_KERNEL_CAPTURE")
    if not path:
        return
    from gpu_mean.backends import cuda_compile, opencl
    from gpu_mean.kernels import source as kernels
    real = kernels.kernel_text

    def kernel_text(api, filename, macros):
        with open(path, "a") as f:
            f.write(json.dumps({"api": api, "file": filename, "macros": macros}) + "\n")
        return real(api, filename, macros)

    kernels.kernel_text = opencl.kernel_text = cuda_compile.kernel_text = kernel_text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="c6e7e0c", help="the revision to compare with (default: before issue 38)")
    ap.add_argument("--variants", help="JSON lines of captured variants (default: the planned ones)")
    args = ap.parse_args(argv)
    if args.variants:
        rows = [json.loads(line) for line in open(args.variants)]
        vs = [(r["api"], r["file"], r["macros"]) for r in rows]
    else:
        vs = planned_variants()
    seen, counts, bad = set(), {}, 0
    for api, filename, macros in vs:
        key = (api, filename, json.dumps(macros, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        verdict = compare(args.rev, api, filename, macros)
        counts[verdict.split(":")[0]] = counts.get(verdict.split(":")[0], 0) + 1
        if verdict.startswith("DIFF"):
            bad += 1
            print(api, filename, verdict, json.dumps(macros)[:300])
    print(f"{len(seen)} variants:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
