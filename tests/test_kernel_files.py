"""The kernel files as a reader meets them (issue 38): each file says what it includes with real
``#include "file"`` lines, and the text the host assembles for it (kernels.assembled, what
kernel_text hands both compilers after the dialect) is exactly those files, each once, in that order;
no file is over 700 lines; one body per name in each file, and a name defined in two files of one
assembled text only where the files are alternatives of one #if chain (the accumulators, acc_*.h);
the #if nesting stays where it is now. Needs no device."""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

from gpu_mean.kernels import elementwise_kernels, reduce_kernels
from gpu_mean.kernels import source as kernels
from gpu_mean.kernels.source import assembled, includes, kernel_dir, kernel_source, kernel_text
from gpu_mean.kernels.typespell import header

KERNELS = kernel_dir("opencl_kernels")
PROGRAM_FILES = sorted(p.name for p in KERNELS.glob("*.cl"))
ALL_FILES = sorted(p.name for p in KERNELS.iterdir()) + ["cuda:dialect.h"]
MAX_LINES = 700
# the deepest #if nesting per file (outside the dialect headers at most 2, where the code allows it);
# a file not listed may not pass 2. exact.h is issue 22's superaccumulator, untouched by the split.
MAX_DEPTH = {"reduce_cpu_cols.h": 3, "elementwise_cpu.cl": 3, "exact.h": 3}
# a definition of a function or kernel, a typedef's name, at the start of a line
DEFINITION = re.compile(r"^(?:GM_INLINE|__kernel)\s[^;{=]*?\b(\w+)\s*\([^;]*?\)\s*\{"
                        r"|^typedef\s+(?:struct\s*(?:__attribute__\(\(\w+\(\d+\)\)\)\s*)?\{[^}]*\}|[\w\s]+?)\s*(\w+)\s*;"
                        r"|^\}\s*(\w+)\s*;", re.M | re.S)
INCLUDE = re.compile(r'^#include "([\w.]+)"', re.M)
IF = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b")


def _text(name: str) -> str:
    if name == "cuda:dialect.h":
        return kernel_source("cuda_kernels", "dialect.h")
    return kernel_source("opencl_kernels", name)


def _definitions(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in DEFINITION.finditer(text)]


def test_the_programs_are_the_shape_files():
    # the host picks one file per family and shape: nothing else in opencl_kernels/ is a program
    assert PROGRAM_FILES == sorted({reduce_kernels.GPU_FILE, reduce_kernels.CPU_FILE, "elementwise_gpu.cl",
                                    "elementwise_cpu.cl"})
    assert reduce_kernels.kernel_file({"GM_CPU_SHAPE": 1}) == "reduce_cpu.cl"
    assert reduce_kernels.kernel_file({}) == "reduce_gpu.cl"
    v = elementwise_kernels.ElementwiseVariant({"GM_CPU_SHAPE": 1}, None, None, 0, None)
    assert v.file == "elementwise_cpu.cl"


@pytest.mark.parametrize("name", PROGRAM_FILES)
def test_includes_are_what_the_host_assembles(name):
    inc = includes(name)
    text = assembled(name)
    assert INCLUDE.search(text) is None             # the compilers receive no include of ours
    assert len(inc) == len(set(inc)) and name not in inc
    assert inc[:2] == ["common.h", "exact.h"]       # what every kernel file shares, first
    # every file it states, whole, once, in the stated order; nothing but them and the file itself
    pos = 0
    for f in inc:       # each file starts with its own comment line
        first_line = kernel_source("opencl_kernels", f).splitlines()[0]
        assert text.count(first_line + "\n") == 1, f"{name}: {f} is not there once"
        at = text.find(first_line + "\n", pos)
        assert at >= pos, f"{name}: {f} is not where its include says"
        pos = at
    own = [ln for ln in kernel_source("opencl_kernels", name).splitlines() if not INCLUDE.match(ln)]
    assert all(ln in text for ln in own)
    assert len(text.splitlines()) == sum(len(kernel_source("opencl_kernels", f).splitlines()) for f in inc + [name]) \
        - len(inc)          # each include line replaced by its file
    for api in ("opencl", "cuda"):
        dialect = kernels.kernel_source(*kernels.DIALECT[api])
        assert kernel_text(api, name, {"A": 1}) == header({"A": 1}) + dialect + text


def test_every_header_is_included():
    used = {f for name in PROGRAM_FILES for f in includes(name)}
    headers = {p.name for p in KERNELS.glob("*.h")} - {"dialect.h"}
    assert headers == used, headers ^ used


@pytest.mark.parametrize("name", ALL_FILES)
def test_files_are_short(name):
    assert len(_text(name).splitlines()) <= MAX_LINES


@pytest.mark.parametrize("name", [f for f in ALL_FILES if not f.endswith("dialect.h")])
def test_one_body_per_name_in_a_file(name):
    # (the dialect headers are spellings, CUDA's with C++ overloads: vstore_half_rte of float and double)
    defs = _definitions(_text(name))
    twice = sorted({d for d in defs if defs.count(d) > 1})
    assert not twice, f"{name} defines {twice} more than once"


def _alternatives(parent: str) -> dict:
    """{included file: (chain, branch)} for the includes of ``parent`` inside an #if chain."""
    out, stack, chains = {}, [], 0
    for line in kernel_source("opencl_kernels", parent).splitlines():
        m = IF.match(line)
        if m and m.group(1).startswith("if"):
            chains += 1
            stack.append([chains, 0])
        elif m and m.group(1) in ("elif", "else"):
            stack[-1][1] += 1
        elif m and m.group(1) == "endif":
            stack.pop()
        elif (inc := INCLUDE.match(line)) and stack:
            out[inc.group(1)] = (parent, stack[-1][0], stack[-1][1])
    return out


@pytest.mark.parametrize("name", PROGRAM_FILES)
def test_a_name_in_two_files_is_an_alternative(name):
    """One assembled text defines a name once, unless the files that define it are branches of one
    #if chain (only one of them is compiled): the accumulators' gm_acc and gm_settle."""
    where = defaultdict(set)
    for f in includes(name) + [name]:
        for d in _definitions(kernel_source("opencl_kernels", f)):
            where[d].add(f)
    alt = {}
    for f in includes(name) + [name]:
        alt.update(_alternatives(f))
    for d, files in where.items():
        if len(files) > 1:
            keys = [alt.get(f) for f in files]
            assert None not in keys and len({k[:2] for k in keys}) == 1 and len({k[2] for k in keys}) == len(keys), \
                f"{name}: {d} is defined in {sorted(files)}, which are not alternatives of one #if chain"


@pytest.mark.parametrize("name", [f for f in ALL_FILES if not f.endswith("dialect.h")])
def test_if_nesting(name):
    """At most MAX_DEPTH levels of #if. A kernel's selection flag (``#if K_ROW`` ... ``#endif  // K_ROW``:
    reduce_kernels.KERNEL_FLAGS, elementwise_kernels.KERNEL_FLAGS) wraps whole kernels, adds no level,
    and sits at most one level deep itself (inside GM_EXACT, say)."""
    depth = deepest = 0
    stack = []      # whether each open #if is a kernel's selection flag
    for line in _text(name).splitlines():
        m = IF.match(line)
        if m and m.group(1).startswith("if"):
            flag = bool(re.match(r"#if K_[A-Z_]+$", line))
            assert not flag or depth <= 1, f"{name}: {line} nested {depth} deep"
            stack.append(flag)
            depth += not flag
            deepest = max(deepest, depth)
        elif m and m.group(1) == "endif":
            flag = stack.pop()
            assert flag == bool(re.match(r"#endif  // K_[A-Z_]+$", line)), f"{name}: {line} closes the wrong #if"
            depth -= not flag
    assert depth == 0 and not stack
    assert deepest <= MAX_DEPTH.get(name, 2), f"{name}: #if nested {deepest} deep"
