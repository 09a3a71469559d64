"""vkcoop.fuzz: differential conformance fuzzing of cooperative_matrix2 tensor addressing.

Random layouts and views (:mod:`vkcoop.fuzz.cases`) run on a target and are compared element by
element with the reference, :func:`vkcoop.tensor.index_map` (SPV_NV_cooperative_matrix2 3.X); a
mismatch is shrunk (:mod:`vkcoop.fuzz.shrinking`: fewer dimensions, smaller sizes, simpler views) and
printed as a GLSL snippet plus the reference's view of it (:mod:`vkcoop.fuzz.repro`).

Targets
-------
``portable``  shaders/portable/tensor_addressing.comp on any Vulkan device (lavapipe in CI), see
              :mod:`vkcoop.portable`. Compares index, status, blockCoord and coordInBlock of every element.
``hw``        coopMatLoadTensorNV / coopMatStoreTensorNV on a VK_NV_cooperative_matrix2 device
              (shaders/fuzz/tensor_hw.comp, :mod:`vkcoop.fuzz.hw`). Clamp modes, dimension counts and view
              permutations are compile-time, so a run draws a pool of ``variants`` pipelines
              (:func:`variant_pool`, every kind, component, LDim and clamp mode dealt round-robin) and case i
              uses variant i mod pool size; a workgroup per case, one dispatch per variant and chunk.
``both``      the same cases on both.

Entry points (the CLI ``vkcoop fuzz`` calls :func:`run` then :func:`print_report`)
----------------------------------------------------------------------------------
``run(cases=1000, seed=0, target="portable", json_path=None, progress=True, *, device=None, variants=24,
shrink=True, max_shrinks=6, workers=None, chunk_size=4096, console=None) -> Report``
    ``device``: a :class:`vkcoop.vk.Device` (for hw it must have :data:`HW_FEATURES`), an index/name, or None.
    ``workers``: generator processes, started fresh ("spawn", so no driver state is inherited) (None: up to 16
    when there are >= 512 cases; 0: in-process).
    A target without a capable device is reported as skipped (``Report.targets[name].skipped`` holds the
    reason) rather than failing. ``json_path`` writes ``Report.to_json()``.
``Report``: ``seed, cases, target, targets`` ({name: TargetStats(cases, mismatches, seconds, compile_seconds,
    gpu_seconds, variants, skipped, device)}), ``mismatches`` (the shrunk :class:`Mismatch` records: ``glsl``,
    ``python``, ``reference_view``, ``minimal``, ``case``), ``mismatch_counts``, ``mismatch_count``, ``ok``,
    ``run_seconds`` (the loop without pipeline compiles), ``cases_per_s``, ``total_seconds``, ``to_json()``.
``print_report(report, console=None)``: rich table + every repro.
The command line is ``vkcoop fuzz`` (``python -m vkcoop fuzz``; :mod:`vkcoop.cli.bench`): exit status 0 when
no mismatch, 4 when every mismatch is a known driver deviation, 1 otherwise, 3 when every target was skipped.

Building blocks: ``generate_case(seed, case_id, variant=None, hw=False)``, ``variant_pool(seed, size)``,
``FuzzCase``, ``Variant``, ``shrink(case, fails_many, hw=False, fixed_shape=False)``, ``candidates``,
``glsl_snippet``, ``reference_view``. Design notes and results: ``docs/fuzz.md``.
"""
from __future__ import annotations

from .cases import (COMPONENTS, KINDS, FuzzCase, Variant, generate_case, hw_violation, random_variant,
                    variant_pool)
from .hw import HW_FEATURES
from .repro import glsl_snippet, python_snippet, reference_view
from .report import Mismatch, Report, TargetStats, print_report
from .runner import FuzzInputError, run
from .shrinking import ShrinkResult, candidates, shrink

__all__ = ["run", "print_report", "Report", "Mismatch", "TargetStats", "FuzzInputError", "FuzzCase",
           "Variant", "generate_case", "variant_pool", "random_variant", "hw_violation", "shrink", "candidates",
           "ShrinkResult", "glsl_snippet", "python_snippet", "reference_view", "HW_FEATURES", "COMPONENTS",
           "KINDS"]
