"""The benchmarks of tools/bench.py, one module each.

A module gives ``add_arguments(parser)`` (its options), ``cases(args)`` (the strings naming what one
process measures: a device, a shape class, a size), ``run(args, case)`` (called inside a fresh process
whose ``gpu_mean`` is the tree under test; returns {row: {figure: value}}) and ``FIGURES`` ({figure:
"lower" or "higher"}: which way is faster, for the table's SLOWER mark; figures not named are shown
as they are). Optional: ``ROUNDS`` and ``OVER_ROUNDS`` (defaults), ``env(args, case, tree_label,
workdir)`` (environment variables for that process), ``WARMUP_RUN`` (one untimed process of each
tree and case before the rounds) and ``verdict(args, row, figure, figures)`` (a target, met or not).
Modules import gpu_mean inside their functions, never at the top: the harness imports them all to
build its parser.
"""

import importlib

# where issue 38's layout moved gpu_mean's modules: a --before tree from before it names them so
_BEFORE_LAYOUT = (("gpu_mean.checks.", "gpu_mean.tools."), ("gpu_mean.bridges.arrays", "gpu_mean.backends.arrays"),
                  ("gpu_mean.kernels.source", "gpu_mean.backends.kernels"), ("gpu_mean.kernels.", "gpu_mean.backends."))


def gm_module(name: str):
    """A gpu_mean module by its name in this tree, or, in a tree under test from before the layout of
    issue 38 (gpu_mean/checks was gpu_mean/tools; kernels/ and bridges/ lay in backends/), by its name
    there, so that a benchmark runs against either."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        for new, old in _BEFORE_LAYOUT:
            if name.startswith(new):
                return importlib.import_module(old + name[len(new):])
        raise
