"""Mutation check: break one feature at a time in a copy of the tree and confirm that the tests
named for it fail (issue 39: a test must be able to fail).

Each mutant is one small edit (an exact text replaced in one file). For each, the working tree
(tracked and untracked files that git does not ignore) is copied to a temporary folder, the edit is
applied there, and pytest runs the mutant's tests on its devices with that copy first on the path.
A mutant is caught when pytest reports failing tests (exit code 1; for a broken set-up, the usage
error that stops the run, 4; for a mutant whose point is a crash, the signal that kills pytest, as
``expect`` says); a clean pass, or any other error, is a miss. The whole check passes
when every mutant is caught.

    python tools/mutants.py              # every mutant (about 6 minutes on the 2-core CI machine)
    python tools/mutants.py --list
    python tools/mutants.py int32-mean-floors lock-removed
    python tools/mutants.py --baseline   # also run each mutant's tests on the unmutated copy
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str           # relative to the repository root
    old: str            # must occur exactly once in the file
    new: str
    tests: tuple        # pytest node ids or files
    devices: str = "cpu"
    why: str = ""
    env: tuple = ()                 # (name, value) pairs set for the run
    expect: tuple = (1,)            # pytest exit codes that mean caught (1: tests failed; 4: a usage error)


MUTANTS = (
    Mutant("dask-fan-in-dasks-own", "gpu_mean/dask/__init__.py",
           "        split_every = fan_in(x, axes)",
           "        split_every = None",
           ("tests/test_dask.py::test_the_default_fan_in_adds_a_row_of_chunks_in_one_task",), "cpu",
           "gpu_mean.dask takes Dask's default fan-in of 4 (2 a axis): a level of combines more than it needs"),
    Mutant("dask-scalar-through-chunks", "gpu_mean/dask/__init__.py",
           "    if x.ndim == 0 and not axes:",
           "    if False:",
           ("tests/test_dask.py::test_a_scalars_mean_is_its_value_zero_dimensional",), "cpu",
           "a 0-d Dask array goes through the chunk step, which crashes on the CPU device"),
    Mutant("fold-settles-flagged-outputs", "opencl_kernels/reduce_cpu_ddp.h",
           "(fabs(q) > 0x1p-1000) & (bad == (long8)(0));",
           "(fabs(q) > 0x1p-1000);",
           ("tests/test_dask_partials.py::test_the_device_adds_pairs_and_settles_means_as_numpy_does",), "opencl:0",
           "the device rounds the mean of an output whose pair sum erred, from that wrong pair"),
    Mutant("fold-margin-thin", "opencl_kernels/reduce_cpu_ddp.h",
           "settled = (fabs(d) + fabs(q) * 0x1p-50 < hw)",
           "settled = (fabs(d) + fabs(q) * 0x1p-60 < hw)",
           ("tests/test_dask_partials.py::test_the_device_adds_pairs_and_settles_means_as_numpy_does",), "opencl:0",
           "the device settles quotients closer to a midpoint than two roundings' error can vouch for"),
    Mutant("sum-drops-sparse-outputs", "gpu_mean/dask/partials.py",
           "    for x in parts:\n        if x.sparse is not None:",
           "    for x in ():\n        if x.sparse is not None:",
           ("tests/test_dask_partials.py::test_dask_chunks_on_the_device_give_the_oracles_bits",), "opencl:0",
           "the partials' adds (the device's fold and numpy's) leave out the outputs a partial holds as digits"),
    Mutant("fast-plans-held-strongly", "gpu_mean/frontends/repeat.py",
           "_fast: weakref.WeakValueDictionary = weakref.WeakValueDictionary()",
           "_fast: dict = {}",
           ("tests/test_front_door.py::test_the_signature_table_keeps_no_device_alive",), "cpu",
           "the table of repeated calls' plans keeps every device it saw alive, with its launches and buffers"),
    Mutant("fast-plan-any-device", "gpu_mean/frontends/repeat.py",
           "or _named(device, dev, arrays[0] if self.native else None) is not dev):",
           "or False):",
           ("tests/test_front_door.py::test_a_repeated_call_takes_the_device_the_full_path_would",), "cpu",
           "a repeated call by device name runs on the plan's device after the name was given to another"),
    Mutant("fast-plan-float-axes", "gpu_mean/frontends/functional.py",
           "if all(type(a) is int for a in axes):",
           "if True:",
           ("tests/test_front_door.py::test_axes_equal_to_integers_are_refused_after_a_plan",), "cpu",
           "axes=[1.0] after axes=[1] finds the integer plan and runs instead of being refused"),
    Mutant("prepared-reducer-span-loose", "gpu_mean/runtime/exact.py",
           "reach = n.bit_length() - 1 + 1 + mbits - 53",
           "reach = n.bit_length() - 1 + 1 + mbits - 83",
           ("tests/test_exact_span.py::test_a_reducer_prepared_for_a_shape_gives_reduce_narrows_bits",
            "tests/test_exact_span.py::test_a_prepared_reducer_refuses_a_sum_float64_would_round"), "cpu",
           "the prepared reducer trusts a FLOAT64 sum over 30 binades too many: rounded sums, wrong means"),
    Mutant("cl-host-address-ignored", "gpu_mean/backends/opencl.py",
           "        return self.memory(native)[1]\n",
           "        return 0\n",
           ("tests/test_interop.py::test_host_arrays_at_any_address_are_bound_in_place_safely",), "opencl:0-gpupaths",
           "a numpy array off a 16-byte boundary bound in place takes the vector kernel: the process crashes "
           "(SIGSEGV or SIGBUS, which the suite's xdist reports as a failed test)", expect=(1, -11, -7)),
    Mutant("cl-scalar-args-never-reset", "gpu_mean/backends/opencl.py",
           "if type(v) is type(a) and isinstance(a, np.generic) and v == a:",
           "if type(v) is type(a) and isinstance(a, np.generic):",
           ("tests/test_split.py", "tests/test_interop.py"), "opencl:0",
           "a kernel argument that is a number keeps its first value: pieces and offsets read the wrong elements"),
    Mutant("kernel-flags-all-on", "gpu_mean/kernels/reduce_kernels.py",
           "return {f: int(f in on) for f in KERNEL_FLAGS}",
           "return {f: 1 for f in KERNEL_FLAGS}",
           ("tests/test_cuda_nvrtc.py::test_every_variant_compiles_for_sm90_without_ftz",), "cpu",
           "every reduction variant compiles every kernel of the file again, launched or not (NVRTC's time doubles)"),
    Mutant("spread-last-group-misjudged", "opencl_kernels/reduce_gpu.cl",
           "(long)cnt_off + k, 1)) == n_runs - 1;",
           "(long)cnt_off + k, 1)) == 0;",
           ("tests/test_gpu_shape.py::test_open_outputs_of_few_long_sums_are_redone_across_the_device",),
           "opencl:0-gpupaths", "the spread redo's first group to arrive rounds the output, from runs not yet "
           "written"),
    Mutant("spread-limbs-of-the-settled", "opencl_kernels/reduce_gpu.cl",
           "if (*GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + k, 1) == 0) continue;",
           "if (*GM_AT(GM_A_FLAG, const uchar, flag, (long)flag_off + k, 1) != 0) continue;",
           ("tests/test_gpu_shape.py::test_open_outputs_of_few_long_sums_are_redone_across_the_device",),
           "opencl:0-gpupaths", "the spread redo takes the settled outputs and leaves the open ones as the "
           "finalize pass stored them"),
    Mutant("spread-counts-never-reset", "opencl_kernels/reduce_gpu.cl",
           "#define GM_STORE_CNT0(k) (*GM_AT(GM_A_CNT, int, cnt, (long)cnt_off + (k), 1) = 0)",
           "#define GM_STORE_CNT0(k)",
           ("tests/test_gpu_shape.py::test_open_outputs_of_few_long_sums_are_redone_across_the_device",),
           "opencl:0-gpupaths", "the arrival counts keep the last execute's: no group of the next is ever last"),
    Mutant("spread-limbs-contiguous-shares", "opencl_kernels/reduce_gpu.cl",
           "m, c * clen + lid, end, EX_WG GM_CHK_A);",
           "m, min(end, c * clen + lid * ((clen + EX_WG - 1) / EX_WG)), "
           "min(end, c * clen + (lid + 1) * ((clen + EX_WG - 1) / EX_WG)), 1 GM_CHK_A);",
           ("tests/test_access_model.py::test_the_spread_redo_reads_its_input_coalesced",),
           "opencl:0-gpupaths", "each work-item of the spread redo reads a contiguous share of the run (session "
           "23's form): a warp's load touches 32 sectors"),
    Mutant("spread-without-device-fences", "gpu_mean/kernels/reduce_kernels.py",
           "spread_runs(plan, g.n_chunks, sms) if spread and exact_mean(plan, fp64)",
           "spread_runs(plan, g.n_chunks, sms) if exact_mean(plan, fp64)",
           ("tests/test_gpu_shape.py::test_a_device_without_device_wide_fences_redoes_in_the_finalize_pass",),
           "opencl:0-gpupaths", "an OpenCL GPU, whose mem_fence has work-group scope, takes the spread redo: "
           "its last group may read stale limbs"),
    Mutant("limit-spreads-ignored", "gpu_mean/checks/profiler.py",
           "    return fraction > 1.0 + spread + limit_spread",
           "    return fraction > 1.0",
           ("tests/test_profile_figures.py::test_a_row_is_above_its_limit_only_beyond_both_spreads",), "cpu",
           "a row within its and the limit's spreads of 1.0 is counted and printed above the limit"),
    Mutant("traffic-limit-one-stream", "gpu_mean/checks/cases.py",
           "        return max(1, sum(1 for b in sizes if b == max(sizes)))",
           "        return 1",
           ("tests/test_profile_figures.py::test_the_traffic_limit_reads_a_stream_per_full_size_input",), "cpu",
           "the limit reads every case's inputs as one stream"),
    Mutant("limbs-program-per-shape", "gpu_mean/kernels/reduce_kernels.py",
           "    if not cpu_shaped:      # the main kernels' geometry fixed",
           "    if False:      # the main kernels' geometry fixed",
           ("tests/test_cuda_static.py::test_the_exact_partials_are_one_program_per_type_and_rank",), "cpu",
           "the exact partials keep their plan's geometry macros: one more program to compile per shape"),
    Mutant("span-field-flushes-subnormals", "opencl_kernels/common.h",
           "#define GM_E64(x) (((uint)(as_ulong((double)(x)) >> 32)) & 0x7ff00000u)",
           "#define GM_E64(x) ((((uint)(as_ulong((double)(x)) >> 32)) & 0x7ff00000u) < 0x38100000u ? 0u : "
           "(((uint)(as_ulong((double)(x)) >> 32)) & 0x7ff00000u))",
           ("tests/test_gpu_shape.py::test_a_subnormal_that_breaks_a_tie_is_no_zero_to_the_span_proofs",),
           "opencl:0-gpupaths",
           "the span proofs see a float subnormal as a zero, as through a conversion on a device that flushes "
           "them: a sum that lost the subnormal is 'proven' exact"),
    Mutant("gpu-row-span-off", "gpu_mean/kernels/reduce_kernels.py",
           'if g.kernel in ("col", "row") and gpu_col_span(plan, fp64):',
           'if g.kernel in ("col",) and gpu_col_span(plan, fp64):',
           ("tests/test_gpu_shape.py::test_rows_at_the_span_limit",), "opencl:0-gpupaths",
           "the row kernel without the span proof: its exact ties stay open (redone), as before issue 40's rows"),
    Mutant("gpu-row-tree-field-max", "opencl_kernels/reduce_gpu.cl",
           "const uint te_ = min(gm_e_unpack(a), gm_e_unpack(b));",
           "const uint te_ = max(gm_e_unpack(a), gm_e_unpack(b));",
           ("tests/test_gpu_shape.py::test_rows_at_the_span_limit",), "opencl:0-gpupaths",
           "the row trees keep the larger exponent field: a row whose double sum lost its tie-breaker is 'proven'"),
    Mutant("gpu-running-bound-too-tight", "opencl_kernels/acc_double_exact.h",
           "#define GM_ERR(a, n, depth) (GM_U53 * GM_ABS_SUM(a, n))",
           "#define GM_ERR(a, n, depth) (GM_U53 * GM_ABS_SUM(a, n) * 0x1p-40)",
           ("tests/test_correct_rounding.py::test_small_values_a_double_sum_drops_are_not_lost",), "opencl:0-gpupaths",
           "the GPU shape's running error bound 2^40 too small: outputs whose double sum erred are stored settled"),
    Mutant("gpu-running-bound-skips-merges", "opencl_kernels/acc_double_exact.h",
           "#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m += (b).m + fabs((a).s); }",
           "#define GM_ACC_MERGE(a, b) { (a).s += (b).s; (a).m = fmax((a).m, (b).m); }",
           ("tests/test_correct_rounding.py::test_small_values_a_double_sum_drops_are_not_lost",), "opencl:0-gpupaths",
           "the running bound leaves out the merges' rounding errors (and the other operand's): too small a bound"),
    Mutant("plan-over-packed-views", "gpu_mean/frontends/repeat.py",
           "    if seen_ is None and any(s < 0 or s % dt.itemsize for dt, _, strides in k[1] for s in strides):",
           "    if False:",
           ("tests/test_front_door.py::test_repeated_calls_on_packed_views_read_each_new_array",), "cpu",
           "a plan kept for a numpy view the call packed: later calls read their arrays with the copy's strides"),
    Mutant("cpu-direct-off", "gpu_mean/frontends/arrays.py", "CPU_DIRECT = True", "CPU_DIRECT = False",
           ("tests/test_front_door.py::test_a_repeated_cpu_call_computes_where_the_arrays_lie",), "cpu",
           "the cpu device copies small arrays through pooled buffers again instead of computing where they lie"),
    Mutant("proven-sum-in-float32", "gpu_mean/runtime/exact.py",
           "return lambda x: np.dot(x.reshape(rows).astype(F64), ones).reshape(keep)",
           "return lambda x: np.dot(x.reshape(rows), ones.astype(np.float32)).reshape(keep)",
           ("tests/test_front_door.py::test_a_repeated_cpu_call_computes_where_the_arrays_lie",), "cpu",
           "the BLAS row sums of a proven-exact sum accumulate in FLOAT32: rounded sums, wrong means"),
    Mutant("kernels-import-a-bridge", "gpu_mean/kernels/programs.py",
           "from . import checked, elementwise_kernels, reduce_kernels, support\n",
           "from . import checked, elementwise_kernels, reduce_kernels, support\n"
           "from ..bridges import arrays as _bridge  # noqa: F401\n",
           ("tests/test_layers.py",), "cpu",
           "the kernels' host code imports a bridge: a sideways import between layers of one rank"),
    Mutant("ddp-span-proof-loose", "opencl_kernels/reduce_cpu_ddp.h",
           "return all(emx + 7 <= emn + (53 - GM_DD_PM1));", "return all(emx + 7 <= emn + (80 - GM_DD_PM1));",
           ("tests/test_dask_partials.py::test_pairs_are_the_exact_totals_or_flagged",), "opencl:0",
           "the Dask partials' block proof 27 binades too loose: a block's inexact plain sum taken as exact"),
    Mutant("ddp-gpu-span-proof-loose", "opencl_kernels/reduce_gpu_ddp.h",
           "return emx + 7 <= emn + (53 - GM_DDP_PM1);", "return emx + 7 <= emn + (80 - GM_DDP_PM1);",
           ("tests/test_dask_partials.py::test_pairs_are_the_exact_totals_or_flagged",), "opencl:0-gpupaths",
           "the GPU shape's block proof 27 binades too loose: a block's inexact plain sum taken as exact"),
    Mutant("ddp-gpu-lanes-unmasked", "opencl_kernels/reduce_gpu_ddp.h",
           "                if (e < lim) {\n", "                if (1) {\n",
           ("tests/test_dask_partials.py::test_pairs_are_the_exact_totals_or_flagged",), "opencl:0-gpupaths",
           "a row's last lanes read past its end: the next output's first values join its total"),
    Mutant("ddp-odd-segment-dropped", "gpu_mean/runtime/wide.py",
           "            nh, nc, nb = (np.concatenate([s, a[2 * k:]], 0)", "            nh, nc, nb = ((s) ",
           ("tests/test_dask_partials.py::test_pairs_add_along_an_axis_exactly",), "cpu",
           "an odd count of segments or lanes loses the last one's pair"),
    Mutant("ddp-cupy-chunks-wide", "gpu_mean/dask/partials.py",
           "    dd = dev.dd_partials(block, axes, data_type_of(block.dtype, \"ReduceMean\"))\n",
           "    dd = None\n",
           ("tests/test_cuda_arrays.py::test_a_fake_cupy_dask_float_chunk_takes_exact_pairs_on_its_gpu",), "cpu",
           "float CuPy chunks keep the FLOAT64 partials (within 1 ulp on same-signed data, not correctly rounded)"),
    Mutant("compile-ahead-serial", "gpu_mean/backends/cuda.py",
           "ThreadPoolExecutor(max(1, min(workers or os.cpu_count() or 1, len(todo))))", "ThreadPoolExecutor(1)",
           ("tests/test_cuda_arrays.py::test_kernels_compile_ahead_side_by_side",), "cpu",
           "the programs built ahead one after another: a cold conformance pass pays every compile in turn"),
    Mutant("ddp-other-gpus-array-launched", "gpu_mean/runtime/device.py",
           "        elif be.cpu_shaped or not be.arrays.owns(x):", "        elif be.cpu_shaped:",
           ("tests/test_cuda_arrays.py::test_a_fake_cupy_dask_chunk_on_another_gpu_is_refused_before_a_launch",),
           "cpu", "a CuPy chunk on another GPU is read by this GPU's kernel through a pointer it does not own"),
    Mutant("ddp-single-values-dropped", "gpu_mean/runtime/device.py",
           "            return self._single_values(x, dt, kept)", "            return None",
           ("tests/test_dask_partials.py::test_a_reduced_axis_of_one_gives_the_values",), "opencl:0",
           "a chunk one row deep takes the digits (CuPy chunks: FLOAT64 partials, not correctly rounded)"),
    Mutant("ddp-last-lane-dropped", "gpu_mean/runtime/wide.py",
           "        for i in range(1, n):\n            th, tc, b = dd_add_exact",
           "        for i in range(1, n - 1):\n            th, tc, b = dd_add_exact",
           ("tests/test_dask_partials.py::test_pairs_add_along_an_axis_exactly",), "cpu",
           "the last of a few lanes or segments is not added: a row's total loses its last lane"),
    Mutant("gpu-pass-extra-step-by-default", "tools/gpu_pass.sh",
           'EXTRA_STEPS="ddp opencl opencl-profile"     # run only when named',
           'EXTRA_STEPS=""     # run only when named',
           ("tests/test_gpu_pass.py::test_the_dry_run_passes_end_to_end",), "cpu",
           "the extra steps (ddp's cold NVRTC build of about 45 s, the OpenCL suite and profile) run in every "
           "pass: past the 10 minutes"),
    Mutant("ddp-combine-error-ignored", "gpu_mean/runtime/wide.py",
           "return s, u, (f1 != 0) | (f2 != 0)", "return s, u, (f2 != 0) | (f2 != 0)",
           ("tests/test_dask_partials.py::test_pairs_whose_sum_could_err_combine_in_digits",), "cpu",
           "two pairs whose error-free sum rounds are kept as a pair: the total loses 2^-80"),
    Mutant("ddp-near-tie-settled", "gpu_mean/runtime/exact.py",
           "ok = (np.abs(d) + np.abs(q) * 2.0 ** -50 < half)", "ok = (np.abs(d) <= half)",
           ("tests/test_dask_partials.py::test_an_exact_tie_and_a_zero_total_round_from_pairs",), "cpu",
           "settle_near trusts a double quotient on a midpoint: a mean 2^-40 / n above it rounds down"),
    Mutant("ddp-zero-sign-lost", "gpu_mean/dask/partials.py",
           "flags = np.stack([z, z, z, (h == 0) & np.signbit(h)])", "flags = np.stack([z, z, z, h == 0])",
           ("tests/test_dask_partials.py::test_an_exact_tie_and_a_zero_total_round_from_pairs",), "cpu",
           "a pair's zero total is taken for -0.0s alone: +0.0 + -0.0 gives -0.0"),
    Mutant("ddp-digits-mixed-as-floats", "gpu_mean/dask/partials.py",
           "p, q = (_dd_as_digits(x) if x.exact_dd else x for x in (p, q))", "p, q = (x for x in (p, q))",
           ("tests/test_dask_partials.py::test_a_cpu_devices_digits_and_pairs_add",), "opencl:0",
           "a CPU device's digits and a device's pairs are added as rounded double-doubles"),
    Mutant("ddp-one-buffer-ignored", "gpu_mean/runtime/device.py",
           "if self.max_alloc_bytes is not None and x.nbytes > self.max_alloc_bytes:", "if False:",
           ("tests/test_dask_partials.py::test_a_chunk_past_one_buffer_takes_the_digits",), "opencl:0",
           "a chunk past one buffer of the Device goes to the pairs' kernel whole"),
    Mutant("ddp-any-inner", "gpu_mean/runtime/device.py",
           "        elif inner % 8 == 0 or not be.cpu_shaped:", "        elif inner > 1 or not be.cpu_shaped:",
           ("tests/test_dask_partials.py::test_unsupported_layouts_give_none",), "opencl:0",
           "an inner size that is not a multiple of 8 goes to the CPU shape's kernel, which sums only whole vectors"),
    Mutant("f64-limbs-top-bit", "gpu_mean/runtime/exact.py",
           "for off, width in ((0, 26), (26, 27)):", "for off, width in ((0, 26), (26, 26)):",
           ("tests/test_dask_partials.py::test_f64_limbs_are_exact",), "cpu",
           "a double's digits lose the significand's top bit"),
    Mutant("by-blocks-tail-dropped", "gpu_mean/runtime/wide.py",
           "    for i in range(0, n, BLOCK):", "    for i in range(0, n - BLOCK, BLOCK):",
           ("tests/test_dask_partials.py::test_many_outputs_go_by_blocks",), "cpu",
           "the pair sums and roundings over many outputs skip the last block: its outputs uninitialized"),
    Mutant("ddp-pairs-never-taken", "gpu_mean/dask/partials.py",
           "dd = dev.dd_partials(block, axes, dt)      # None", "dd = None      # None",
           ("tests/test_dask_partials.py::test_a_pair_partial_sends_16_bytes_an_output",), "opencl:0",
           "float chunks on PoCL keep the superaccumulator's digits (156 bytes an output)"),
    Mutant("dask-float-chunks-wide", "gpu_mean/dask/partials.py",
           '    return dt.is_float and (get_device(device).info.backend == "cpu" or dt in split.DEVICE_EXACT)',
           "    return False",
           ("tests/test_exact_partials.py::test_dask_chunkings_on_the_device_give_one_launch_bits",), "opencl:0",
           "float numpy chunks give inexact FLOAT64 totals, neither digits nor exact pairs"),
    Mutant("ddp-flagged-outputs-kept", "gpu_mean/dask/partials.py",
           "    idx = np.flatnonzero(inexact)\n    sparse = None\n    if idx.size:\n        stats",
           "    idx = np.flatnonzero(inexact)[:0]\n    sparse = None\n    if idx.size:\n        stats",
           ("tests/test_dask_partials.py::test_dask_chunks_on_the_device_give_the_oracles_bits",), "opencl:0",
           "a chunk's flagged outputs keep their inexact pairs instead of their values' digits"),
    Mutant("int32-mean-floors", "gpu_mean/runtime/numerics.py",
           "return ((s + (s < 0)) >> 1).astype(np.int32)", "return (s >> 1).astype(np.int32)",
           ("tests/test_fuzz.py",), "cpu",
           "the CPU device's INT32 mean floors instead of truncating: the fuzzer checks it against the oracle"),
    Mutant("broadcast-inputs-refused", "gpu_mean/descriptors/operators.py",
           "    if output and t.has_overlap():", "    if t.has_overlap():",
           ("tests/test_fuzz.py",), "cpu",
           "validation refuses every broadcast or overlapping input: the fuzzer checks refusals against its rules"),
    Mutant("lock-removed", "gpu_mean/runtime/execution.py",
           "        with self.lock:\n            self.guard(f\"executing {cop.desc.name}\", cop.program.run, *args)",
           "        if True:\n            self.guard(f\"executing {cop.desc.name}\", cop.program.run, *args)",
           ("tests/test_threads.py",), "opencl:0",
           "execute launches without the device's lock: threads sharing an operator overwrite its arguments"),
    Mutant("bound-launch-unlocked", "gpu_mean/runtime/execution.py",
           "        with self.lock:\n            self.guard(f\"executing {cop.desc.name}\", cop.program.run_bound,",
           "        if True:\n            self.guard(f\"executing {cop.desc.name}\", cop.program.run_bound,",
           ("tests/test_front_door.py",), "opencl:0",
           "the functional calls' repeated launches run without the device's lock: threads overwrite the "
           "argument tuples the program keeps"),
    Mutant("opencl-copies-host-arrays", "gpu_mean/bridges/opencl.py",
           "        if not self.host_memory or span.ctypes.data % self.host_ptr_alignment:",
           "        if True:",
           ("tests/test_interop.py",), "opencl:0",
           "OpenCL copies a host array instead of binding it in place: the interop test checks the address"),
    Mutant("int64-not-on-opencl", "gpu_mean/kernels/support.py",
           '    "opencl": dict(_GPU),',
           '    "opencl": {**_GPU, KernelOp.REDUCE_MEAN: _ALL - {DataType.INT64, DataType.UINT64}},',
           ("tests/test_ext_types.py",), "opencl:0",
           "OpenCL refuses INT64/UINT64 reductions: the tests' own table says it computes them"),
    Mutant("exact-partials-low-bit", "gpu_mean/runtime/exact.py",
           "        return normalize(_digits_block(x, f, axes)).reshape((f.digits,) + kept)",
           "        return normalize(_digits_block(x, f, axes) & ~1).reshape((f.digits,) + kept)",
           ("tests/test_exact_partials.py::test_device_partials_are_the_exact_digits",), "cpu",
           "the CPU device's exact partials lose the lowest bit of each digit: checked against the oracle's sums"),
    Mutant("gpu-span-two-binades-loose", "gpu_mean/kernels/reduce_kernels.py",
           "        return 0\n    return span_limit(plan)\n\n\ndef gpu_col_span",
           "        return 0\n    return span_limit(plan) + 2\n\n\ndef gpu_col_span",
           ("tests/test_gpu_shape.py::test_short_rows_at_the_span_limit",), "opencl:0-gpupaths",
           "the GPU short rows' exponent-span proof two binades too loose: a row whose double sum loses a tie-breaker"),
    Mutant("gpu-open-outputs-not-redone", "opencl_kernels/reduce_gpu_redo.h",
           "    const int c = *count;", "    const int c = 0 * *count;",
           ("tests/test_gpu_shape.py::test_centered_data_redone_in_place_give_the_oracles_bits",), "opencl:0-gpupaths",
           "the GPU shape stores the bound's guess for an open output instead of redoing it"),
    Mutant("gpu-tile-column-dropped", "opencl_kernels/reduce_gpu_short.h",
           "(e / SHORT_TILE) * (SHORT_TILE + 1) + (e & (SHORT_TILE - 1))", "(e / SHORT_TILE) * (SHORT_TILE + 1)",
           ("tests/test_gpu_shape.py::test_short_rows_leave_nothing_open",), "opencl:0-gpupaths",
           "gm_reduce_tile stages every value of a row in its first slot: the rows' means are wrong"),
    Mutant("gpu-col-phase-dropped", "opencl_kernels/reduce_gpu.cl",
           "long r = chunk * clen + ly * (32 / COL_W) + phase;", "long r = chunk * clen + ly * (32 / COL_W);",
           ("tests/test_gpu_shape.py::test_centered_data_redone_in_place_give_the_oracles_bits",), "opencl:0-gpupaths",
           "a narrow tensor's column lanes all read the same rows (R5's 16 columns add every other row twice)"),
    Mutant("gpu-finalize-phases-halved", "opencl_kernels/reduce_gpu.cl",
           "for (int o = FIN_WG / FIN_W / 2; o > 0; o >>= 1)", "for (int o = FIN_WG / FIN_W / 4; o > 0; o >>= 1)",
           ("tests/test_gpu_shape.py::test_centered_data_redone_in_place_give_the_oracles_bits",), "opencl:0-gpupaths",
           "the FIN_W finalize's tree skips half of each output's chunk phases"),
    Mutant("gpu-finalize-lanes-first-chunk", "opencl_kernels/reduce_gpu.cl",
           "for (long c = 0; c < n_chunks; ++c) {", "for (long c = 1; c < n_chunks; ++c) {",
           ("tests/test_gpu_shape.py::test_centered_data_redone_in_place_give_the_oracles_bits",), "opencl:0-gpupaths",
           "the FIN_LANES finalize leaves out each output's first chunk"),
    Mutant("gpu-redo-walk-no-carry", "opencl_kernels/reduce_exact.h",
           "carry = t < sh ? 0 : gm_div(t, sh);", "carry = 0;",
           ("tests/test_gpu_shape.py::test_centered_data_redone_in_place_give_the_oracles_bits",), "opencl:0-gpupaths",
           "the strided redo's multi-index never carries into an outer reduced dimension (R6 redone wrong)"),
    Mutant("gpu-row-vector-tail-skipped", "opencl_kernels/reduce_gpu.cl",
           "        i = i0 + nv * V16 + lane;", "        i = i1;",
           ("tests/test_reduce.py",), "opencl:0-gpupaths",
           "the row kernel's 16-byte loads drop a run's last (run length mod V16) values"),
    Mutant("claim-with-a-no", "README.md", "# gpu_mean\n", "# gpu_mean\n\nVerified on the A100: no spills.\n",
           ("tests/test_claims.py",), "cpu",
           "a GPU claim with a negative word in it: the claims check has no word exemptions"),
    Mutant("nvrtc-not-installed", "README.md", "# gpu_mean\n", "# gpu_mean\n",
           ("tests/test_cuda_nvrtc.py",), "cpu",
           "the set-up did not install NVRTC 12 (its path is absent) while tools/test.sh requires it: the run stops",
           env=(("GPU_MEAN_REQUIRE", "nvrtc12"), ("GPU_MEAN_NVRTC12", "/nonexistent/libnvrtc.so.12")), expect=(4,)),
)


def copy_tree(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)


def apply(m: Mutant, tree: Path) -> None:
    p = tree / m.path
    text = p.read_text()
    count = text.count(m.old)
    if count != 1:
        raise SystemExit(f"mutant {m.name}: the text to replace occurs {count} times in {m.path}, not once")
    p.write_text(text.replace(m.old, m.new))


def run_tests(m: Mutant, tree: Path) -> tuple[int, float, str]:
    env = dict(os.environ, PYTHONPATH=str(tree), GPU_MEAN_TEST_DEVICES=m.devices, **dict(m.env))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
                       cwd=tree, env=env, capture_output=True, text=True)
    lines = (r.stdout + r.stderr).strip().splitlines()
    return r.returncode, time.perf_counter() - t0, lines[-1] if lines else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="mutants to run (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--baseline", action="store_true", help="also run each mutant's tests unmutated")
    args = ap.parse_args(argv)
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:28} {m.path}: {m.why}")
        return 0
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutants: {sorted(unknown)}; --list shows them")
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    missed = 0
    print(f"{'mutant':28} {'tests':34} {'devices':10} result")
    for m in chosen:
        with tempfile.TemporaryDirectory(prefix="gm-mutant-") as tmp:
            tree = Path(tmp)
            copy_tree(tree)
            if args.baseline:
                rc, secs, last = run_tests(m, tree)
                if rc != 0:
                    print(f"{m.name:28} baseline fails ({rc}, {secs:.0f} s): {last}")
                    missed += 1
                    continue
            apply(m, tree)
            rc, secs, last = run_tests(m, tree)
        caught = rc in m.expect
        missed += not caught
        print(f"{m.name:28} {' '.join(m.tests):34} {m.devices:10} "
              f"{'caught' if caught else 'MISSED'} (exit {rc}, {secs:.0f} s): {last}", flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} mutants caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
