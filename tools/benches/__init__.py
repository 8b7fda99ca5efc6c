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
