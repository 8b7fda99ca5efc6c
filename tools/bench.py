"""The benchmark harness: every benchmark of tools/benches/, this tree alone or against a commit.

    python tools/bench.py NAME [--before REV | --before none] [--rounds N] [--json FILE] [NAME's options]
    python tools/bench.py --list

One way to compare trees: ``--before REV`` checks the commit out as a git worktree under /tmp
(``/tmp/gpu_mean-bench-<commit>``, made once and reused by later runs; the harness says where it is
and how to remove it). Every measurement is a fresh process: for each round, for each of the
benchmark's cases, one process per tree, the trees alternating (the first tree of a round swaps every
round), so that the machine's drift falls on both trees within seconds of each other. Each process
runs the benchmark module of THIS tree (tools/benches/NAME.py) with the tree under test first on
PYTHONPATH, so ``import gpu_mean`` gets that tree's package (and its kernels, found beside it); the
process reports the ``gpu_mean`` it imported, and a run that imported another one is an error.

Inside a process a benchmark times its subject against its yardstick (numpy, CuPy, a bare pyopencl
round trip, a native loop, the descriptor path) with the one timing helper, benches/timing.py.

The result is one table: per row and figure, each tree's figure over the rounds (``--over-rounds``:
the median, or the best), their ratio after/before, and "SLOWER" where the figure is worse than before
by more than ``--tolerance``; ``--json FILE`` writes the same with every round's figure and every
process's tree, case and imported gpu_mean.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHES_DIR = Path(__file__).resolve().parent / "benches"
HELPERS = {"timing"}                    # modules of benches/ that are not benchmarks


def names() -> list:
    """The benchmarks: every module of tools/benches/ but the helpers."""
    return sorted(p.stem for p in BENCHES_DIR.glob("*.py") if not p.stem.startswith("_") and p.stem not in HELPERS)


class BenchError(Exception):
    """A usage or run error, reported as one line."""


def module(name: str):
    return importlib.import_module(f"benches.{name}")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tools/bench.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="bench", metavar="NAME", required=True)
    for name in names():
        mod = module(name)
        p = sub.add_parser(name, help=mod.__doc__.splitlines()[0], description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--before", default="none", help="a commit to compare with, checked out as a git worktree "
                       "under /tmp; 'none' (the default): this tree alone")
        p.add_argument("--rounds", type=int, default=getattr(mod, "ROUNDS", 3),
                       help="rounds: one fresh process per tree and case each (default %(default)s)")
        p.add_argument("--over-rounds", choices=("median", "best"), default=getattr(mod, "OVER_ROUNDS", "median"),
                       help="each figure over the rounds (default %(default)s)")
        p.add_argument("--tolerance", type=float, default=0.05,
                       help="a figure worse than before by more than this fraction is marked SLOWER (default 0.05)")
        p.add_argument("--json", type=Path, help="write the table, every round's figures and every run here")
        p.add_argument("--worker", nargs=2, metavar=("CASE", "OUT"), help=argparse.SUPPRESS)
        mod.add_arguments(p)
    return ap


# -- the trees -------------------------------------------------------------------------------------

def git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if r.returncode:
        raise BenchError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"git {' '.join(args)} failed")
    return r.stdout.strip()


def resolve(rev: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except BenchError:
        raise BenchError(f"--before {rev}: not a commit of this repository ({ROOT})") from None


def worktree(rev: str) -> tuple[str, Path]:
    """(commit, path): the commit checked out, detached, in /tmp/gpu_mean-bench-<commit>, made now or
    reused from an earlier run (checked to be that commit)."""
    commit = resolve(rev)
    path = Path(tempfile.gettempdir()) / f"gpu_mean-bench-{commit[:12]}"
    if path.exists():
        r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
        if r.returncode or r.stdout.strip() != commit:
            raise BenchError(f"{path} exists but is not a checkout of {commit[:12]}: remove it "
                             f"(git worktree remove --force {path}) and run again")
        return commit, path
    git("worktree", "add", "--detach", str(path), commit)
    return commit, path


# -- one run: a fresh process ------------------------------------------------------------------------

def run_one(name: str, argv: list, tree: Path, case: str, env_extra: dict) -> dict:
    """Runs ``case`` of benchmark ``name`` in a fresh process with ``tree`` first on PYTHONPATH; returns
    the worker's report ({"gpu_mean": file imported, "figures": {row: {figure: value}}}) and its wall
    time."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    try:
        env = {**os.environ, **env_extra, "PYTHONPATH": os.pathsep.join(
            [str(tree)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != tree]),
            "BENCH_TREE": str(tree)}
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), name, *argv, "--worker", case, str(out)],
                           env=env, cwd=tree, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode:
            tail = "\n".join(r.stderr.strip().splitlines()[-30:])
            raise BenchError(f"{name} case {case!r} in {tree} failed (exit {r.returncode}):\n{tail}")
        report = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    report["wall_s"] = wall
    if r.stdout.strip():
        report["stdout"] = r.stdout
    return report


def worker(mod, args) -> int:
    """Inside the fresh process: run one case and write the figures (and the gpu_mean imported)."""
    case, out = args.worker
    figures = mod.run(args, case)       # first: a benchmark may time the import of gpu_mean itself
    import gpu_mean
    Path(out).write_text(json.dumps({"gpu_mean": gpu_mean.__file__, "figures": figures}))
    return 0


def inside(path: str, tree: Path) -> bool:
    return Path(path).resolve().is_relative_to(tree.resolve())


# -- the driver ------------------------------------------------------------------------------------

def combine(values: list, direction: str | None, over: str) -> float:
    if over == "best" and direction:
        return min(values) if direction == "lower" else max(values)
    return statistics.median(values)


def worse(before: float, after: float, direction: str | None, tolerance: float) -> bool:
    if not direction or not before or before != before or after != after:
        return False
    return after > before * (1 + tolerance) if direction == "lower" else after < before * (1 - tolerance)


def drive(name: str, mod, args, argv: list) -> dict:
    trees = [("after", ROOT)]
    before = None
    if args.before != "none":
        commit, path = worktree(args.before)
        before = {"rev": args.before, "commit": commit, "worktree": str(path)}
        trees.insert(0, ("before", path))
    cases = list(mod.cases(args))
    env_of = getattr(mod, "env", lambda args, case, label, work: {})
    work = Path(tempfile.mkdtemp(prefix=f"gpu_mean-bench-{name}-"))
    runs, got = [], {}
    head = f"{name}: after = this tree ({ROOT})"
    if before:
        head += f", before = {args.before} ({before['commit'][:12]}) in {before['worktree']}"
    print(f"{head}; {args.rounds} round(s) x {len(cases)} case(s), one fresh process per tree, trees alternating",
          flush=True)
    try:
        if getattr(mod, "WARMUP_RUN", False):      # one untimed run of each tree and case: caches filled
            for case in cases:
                for label, tree in trees:
                    run_one(name, argv, tree, case, env_of(args, case, label, work))
        for r in range(args.rounds):
            for case in cases:
                for label, tree in (trees if r % 2 == 0 else trees[::-1]):
                    rep = run_one(name, argv, tree, case, env_of(args, case, label, work))
                    if not inside(rep["gpu_mean"], tree):
                        raise BenchError(f"the {label} run imported gpu_mean from {rep['gpu_mean']}, not from {tree}")
                    runs.append({"round": r, "case": case, "tree": label, "gpu_mean": rep["gpu_mean"],
                                 "wall_s": rep["wall_s"]})
                    for row, figs in rep["figures"].items():
                        for fig, v in figs.items():
                            got.setdefault((row, fig), {}).setdefault(label, []).append(v)
    finally:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return {"bench": name, "argv": argv, "before": before, "after": {"tree": str(ROOT)}, "rounds": args.rounds,
            "over_rounds": args.over_rounds, "runs": runs, "rows": table_rows(mod, args, got, bool(before))}


def direction(mod, fig: str) -> str | None:
    """Which way ``fig`` is faster: the module's FIGURES names it, or its last word ("BFLOAT16 GB/s": GB/s)."""
    figures = getattr(mod, "FIGURES", {})
    return figures.get(fig, figures.get(fig.split()[-1]) if fig.split() else None)


def table_rows(mod, args, got: dict, compared: bool) -> list:
    verdict = getattr(mod, "verdict", None)
    rows = []
    for (row, fig), per in got.items():
        d = direction(mod, fig)
        item = {"row": row, "figure": fig, "better": d or "-"}
        for label, values in per.items():
            item[label] = combine(values, d, args.over_rounds)
            item[f"{label}_rounds"] = values
        if compared and "before" in item:
            item["after/before"] = item["after"] / item["before"] if item["before"] else float("nan")
            item["slower"] = worse(item["before"], item["after"], d, args.tolerance)
        if verdict:
            figs = {f: combine(v["after"], direction(mod, f), args.over_rounds)
                    for (r2, f), v in got.items() if r2 == row and "after" in v}
            item["verdict"] = verdict(args, row, fig, figs)
        rows.append(item)
    return rows


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    return str(v)


def print_table(result: dict) -> None:
    compared = result["before"] is not None
    width = max([len(r["row"]) for r in result["rows"]] + [4])
    fw = max([len(r["figure"]) for r in result["rows"]] + [6])
    print(f"each figure: the {result['over_rounds']} of {result['rounds']} round(s); better: which way is faster")
    cols = f"{'row':<{width}}  {'figure':<{fw}}  {'better':>6}"
    cols += f"  {'before':>9}  {'after':>9}  {'after/before':>12}" if compared else f"  {'value':>9}"
    print(cols + "  rounds")
    last = None
    for r in result["rows"]:
        name = r["row"] if r["row"] != last else ""
        last = r["row"]
        line = f"{name:<{width}}  {r['figure']:<{fw}}  {r['better']:>6}"
        if compared:
            line += f"  {fmt(r.get('before')):>9}  {fmt(r.get('after')):>9}  {fmt(r.get('after/before')):>12}"
            rounds = " ".join(fmt(x) for x in r.get("before_rounds", [])) + " | " + \
                " ".join(fmt(x) for x in r.get("after_rounds", []))
        else:
            line += f"  {fmt(r.get('after')):>9}"
            rounds = " ".join(fmt(x) for x in r.get("after_rounds", []))
        line += f"  {rounds}"
        if r.get("slower"):
            line += "  SLOWER"
        if r.get("verdict"):
            line += f"  {r['verdict']}"
        print(line)
    if compared:
        slower = sorted({r["row"] for r in result["rows"] if r.get("slower")})
        print(f"slower than before (by more than the tolerance): {', '.join(slower) if slower else 'none'}")
        print(f"before tree left at {result['before']['worktree']} for later runs (remove: git worktree remove "
              f"--force {result['before']['worktree']})")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))     # the benches package
    if argv == ["--list"]:
        for name in names():
            print(f"{name:12s} {module(name).__doc__.splitlines()[0]}")
        return 0
    args = parser().parse_args(argv)
    mod = module(args.bench)
    if args.worker:
        return worker(mod, args)
    if args.rounds < 1:
        print("tools/bench.py: --rounds must be at least 1", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))                               # the driver's own gpu_mean: this tree's
    try:
        result = drive(args.bench, mod, args, argv[1:])
    except BenchError as e:
        print(f"tools/bench.py: {e}", file=sys.stderr)
        return 2
    print_table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
