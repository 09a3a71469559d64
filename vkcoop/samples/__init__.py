"""The cooperative_matrix2 sample suite: small declarative samples, each checked bit for bit against
:mod:`vkcoop.tensor` on a real device.

Registry (what the CLI calls)
-----------------------------
``all_samples() -> list[Sample]``      every registered sample, in suite order (``order``, then name)
``get_sample(name) -> Sample``         KeyError naming the known samples otherwise
``Sample.name``, ``.description``, ``.requires`` (:class:`Requirements`: ``extensions``, ``features``,
``to_dict()``), ``.run(device=None, *, validate=False, instance=None) -> SampleResult``.
``SampleResult``: ``status`` ("pass" | "fail" | "skip"), ``reason``, ``cases`` (dispatched),
``failed_cases``, ``gpu_time_ms`` (GPU timestamps, summed), ``mismatches`` (first few
:class:`Mismatch`: case, binding, index, got, expected), ``mismatch_count``, ``validation_messages``,
``device``, ``wall_time_s``, ``known_issues``; ``to_dict()`` is JSON-able. A sample whose device lacks a requirement
returns "skip" with the missing names; nothing is reported as passed unless it was dispatched.
``vkcoop run [names...|--all] [--validate] [--json [FILE]] [--device D]`` (``python -m vkcoop.cli run`` where the
console script is not installed) runs samples and prints a summary.

Writing a sample (see ``tensor_load_store.py`` for a full one)
--------------------------------------------------------------
::

    from .caps import COOPMAT2_BASE, DeviceCaps
    from .case import Binding, Case
    from .runner import Sample, register

    @register
    class MySample(Sample):
        name = "my-sample"
        description = "what it shows"
        requires = COOPMAT2_BASE + Requirements(features=("cooperativeMatrixReductions",))
        order = 40

        def cases(self, caps: DeviceCaps) -> list[Case]:
            rows, cols = caps.pick_shape("F16", "Accumulator")      # from the driver's KHR table
            data = index_pattern(rows * cols, np.float16)
            expected = ...                                         # from vkcoop.tensor
            return [Case("name", "samples/x/y.comp", {"ELEMENT": "F16"},
                         [Binding("in", data), Binding("out", np.zeros_like(expected), expected=expected)],
                         specialization={"ROWS": rows, "COLS": cols})]

* ``Case(name, shader, defines, bindings, specialization={}, groups=(1,1,1), push=None)``: ``shader`` is
  relative to ``shaders/``; ``defines`` must be one combination declared by the shader's ``// @variants``
  lines (so ``vkcoop shaders check`` has compiled and validated exactly what runs); ``bindings`` are set 0,
  in binding order; a :class:`Binding` with ``expected`` is an output, compared bit for bit after the
  dispatch (``nan_equal=True`` lets any NaN match any NaN). ``specialization`` keys are constant ids or
  names, typed by reflection (vkcoop.vk.ComputePipeline). ``known_issue="why"`` marks a case where the
  device is known to disagree with the reference: its mismatches go to ``SampleResult.known_issues``
  (``case, issue, reproduced, mismatches, examples``) instead of failing the sample; keep a passing twin.
* ``cases(caps)`` must be pure (no GPU): tests call it with a fixture :class:`DeviceCaps`.
  ``caps.pick_shape(element, use=None, scope="subgroup")``, ``caps.khr_shapes(...)``,
  ``caps.supports(element, use, rows, cols, scope)`` (KHR entries, or flexible-dimension granularities
  when the device has cooperativeMatrixFlexibleDimensions); ``caps.flexible`` / ``caps.khr`` hold
  :class:`ShapeEntry` rows (``M, N, K, A, B, C, result, scope, flexible, workgroup_invocations``).
* Element types: ``ELEMENT_TYPES`` / ``element_type(code)`` for ``F16 F32 BF16 S8 U8 S32`` (glsl name, numpy
  dtype -- bf16 is ml_dtypes.bfloat16 --, VkComponentTypeKHR, canonical use); the shaders take the same code
  as ``ELEMENT`` (``shaders/include/vkcoop/common.glsl``).
* Tensor layouts/views for shaders: :class:`LayoutRecipe` / :class:`ViewRecipe` give ``.layout()`` /
  ``.view()`` (vkcoop.tensor objects for the reference) and ``.words()`` (the 32-word record
  ``shaders/include/vkcoop/records.glsl`` reads with ``TENSOR_LAYOUT_FROM_RECORD``); ``records(*recipes)``.
* Inputs: ``index_pattern(n, dtype)`` (element i derived from i, exactly representable),
  ``small_values(n, dtype, seed)`` (values in {-0.5, 0, 0.5, 1}).
* Requirements: ``COOPMAT2_BASE``, ``INT8``, ``BFLOAT16`` combine with ``+``. :meth:`Sample.run` checks the
  compiled SPIR-V's capabilities against ``requires`` (``CAPABILITY_FEATURES``) before creating a pipeline.
* Bad input: raise :class:`SampleInputError` (``require_array(value, name, dtype=, shape=, ndim=)`` helps)
  before anything is dispatched; ``Case.check()`` catches undeclared variants and output dtype/shape clashes.
* Framework modules: ``caps`` (DeviceCaps, element types, Requirements), ``recipes`` (layout/view recipes,
  value patterns, ``split_extent``), ``case`` (Case, Binding, comparison, SampleResult), ``runner`` (Sample,
  registry). Every other module in this package is a sample, imported automatically; decorate the class with
  :func:`register`.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..vk.tables import ShapeEntry
from .caps import (BFLOAT16, CAPABILITY_FEATURES, COOPMAT2_BASE, ELEMENT_TYPES, INT8, DeviceCaps, ElementType,
                   Requirements, SampleInputError, element_type)
from .case import Binding, Case, Mismatch, SampleResult
from .recipes import (LayoutRecipe, ViewRecipe, index_pattern, records, require_array, small_values,
                      split_extent)
from .runner import Sample, register, registered

#: Modules of this package that hold the framework, not samples.
_NOT_SAMPLES = {"caps", "case", "recipes", "runner", "fixtures", "__main__"}
_loaded = False


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    for module in pkgutil.iter_modules(__path__):
        if module.name not in _NOT_SAMPLES and not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    _loaded = True


def all_samples() -> list[Sample]:
    """Every registered sample (instances), in suite order."""
    _load_all()
    return [cls() for cls in sorted(registered().values(), key=lambda c: (c.order, c.name))]


def get_sample(name: str) -> Sample:
    _load_all()
    classes = registered()
    if name not in classes:
        raise KeyError(f"no sample named {name!r}; known samples: {', '.join(sorted(classes))}")
    return classes[name]()


__all__ = [
    "all_samples", "get_sample", "Sample", "SampleResult", "Mismatch", "Case", "Binding", "Requirements",
    "DeviceCaps", "ShapeEntry", "ElementType", "ELEMENT_TYPES", "element_type", "LayoutRecipe", "ViewRecipe",
    "records", "register", "registered", "index_pattern", "small_values", "require_array", "SampleInputError",
    "COOPMAT2_BASE", "INT8", "BFLOAT16", "CAPABILITY_FEATURES", "split_extent",
]
