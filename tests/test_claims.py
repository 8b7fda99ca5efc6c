"""No comment, document or README line claims a GPU run that did not happen: a line that names a GPU
model (or "a GPU") together with verified / measured / tested / timed / benchmarked / profiled / ran
needs a result from that GPU under docs/results/ (where every run is committed with its date, device
and command). No word exempts a line ("verified on the H100: no spills" is a claim); the true
exceptions are listed in EXCEPTIONS by file and line text, each with why."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = re.compile(r"\b(H100|H200|GH200|B200|A100|A10G?|V100|T4|L4|L40S?|RTX ?\d{4})\b")
VERB = re.compile(r"\b(verified|measured|tested|timed|benchmarked|profiled|ran)\b", re.I)
ON_A_GPU = re.compile(r"\b(verified|measured|tested|timed|benchmarked|profiled|ran)\s+on\s+(an?\s+|the\s+)?"
                      r"(NVIDIA\s+|CUDA\s+)?GPUs?\b", re.I)
# (file relative to the repository root, the line's text stripped) -> why it claims no GPU run
EXCEPTIONS: dict = {}


def _files():
    for pattern in ("README.md", "docs/*.md", "tests/**/*.py", "gpu_mean/**/*.py", "tools/*", "pyproject.toml"):
        for f in sorted(ROOT.glob(pattern)):
            if f.is_file() and f.resolve() != Path(__file__).resolve():
                yield f


def _rel(f: Path) -> str:
    try:
        return str(f.resolve().relative_to(ROOT))
    except ValueError:
        return f.name


def _results() -> str:
    folder = ROOT / "docs" / "results"
    return "\n".join(f.read_text(errors="replace") for f in folder.rglob("*") if f.is_file()
                     and f.suffix in (".md", ".txt", ".json", ".log"))


def claims(results: str, files=None) -> list[str]:
    found = []
    for f in files if files is not None else _files():
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if (_rel(f), line.strip()) in EXCEPTIONS:
                continue
            models = [m.group(1) for m in MODEL.finditer(line)]
            if (models and VERB.search(line) and not all(m in results for m in models)) or \
                    (ON_A_GPU.search(line) and "nvidia" not in results.lower()):
                found.append(f"{f}:{n}: {line.strip()}")
    return found


def test_no_line_claims_a_gpu_run_that_is_not_in_docs_results():
    assert claims(_results()) == []


def test_the_check_sees_a_claim(tmp_path):
    f = tmp_path / "claims.py"
    f.write_text("CC = 90     # the H200 the CUDA path is verified on\nx = 1  # measured on the GPU\n"
                 "y = 2  # not yet run on a GPU\nz = 3  # H200: 132 SMs\nw = 4  # verified on the H100: no spills\n"
                 "v = 5  # never measured on a GPU\n")
    assert [c.split(":")[1] for c in claims("", [f])] == ["1", "2", "5", "6"]
    assert [c.split(":")[1] for c in claims("an NVIDIA H200 run", [f])] == ["5"]   # H100 is not H200


STAGING = re.compile(r"\b(staging plan|stage \d+, built|the plan for the rest)\b", re.I)


def design_problems(text: str) -> list[str]:
    """What keeps docs/design.md from being a half-hour read of the design as it is (issue 38): 700
    lines or more, or a line of a change's history (a staging plan, a stage's status)."""
    lines = text.splitlines()
    found = [f"{len(lines)} lines (at most 699)"] if len(lines) >= 700 else []
    return found + [f"line {n}: {line.strip()}" for n, line in enumerate(lines, 1) if STAGING.search(line)]


def test_the_design_is_short_and_says_what_is():
    assert design_problems((ROOT / "docs" / "design.md").read_text()) == []


def test_the_design_check_sees_length_and_history():
    assert design_problems("x\n" * 700) == ["700 lines (at most 699)"]
    assert design_problems("a\n## Staging plan\nb") == ["line 2: ## Staging plan"]
