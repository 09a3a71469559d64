"""vkcoop.attention: flash attention with workgroup-scope coopmat2 matrices (docs/attention.md).

* :func:`attention` ``(q, k, v, causal=False, scale=None, device=None, *, tile=None, kv_splits=None,
  return_lse=False)`` -- numpy in, numpy out; every shape and dtype error before a device is opened.
* :mod:`.shapes` -- dtypes, head dims, ``check_inputs``, ``AttentionShape`` (FLOPs, K/V bytes), ``AttentionInputError``.
* :mod:`.tiles` -- ``AttentionTile`` (BR x BC) chosen from and checked against the flexible-dimensions table;
  ``AttentionConfig`` (a tile with its key splits and GQA row stacking).
* :mod:`.seeds` -- the configurations measured best per device and class, which ``attention`` runs where the
  device's table takes them.
* :mod:`.cases` -- the cases ``vkcoop bench attention`` times (``AttentionCase``), and ``parse_job``: a case with
  configurations, as ``vkcoop inspect --attention`` and the lab's explore tool name them.
* :mod:`.kernel` -- ``AttentionKernel``: a :class:`vkcoop.gemm.Launch` (one dispatch, or two with key splits).
* :mod:`.reference` -- the float64 reference, the documented tolerance (``attention_tolerance``,
  ``tolerance_for``) and ``check_attention``.
* :mod:`.model` -- the shader's block loop in numpy, for CPU tests of its index arithmetic.
* :mod:`.vulkan` -- ``VulkanAttention`` (a :class:`vkcoop.gemm.vulkan.VulkanGemm`; ``from_config`` builds an
  ``AttentionConfig`` label), ``device_kernel`` and ``config_options`` (the kernel for a device and a label), the
  device features.
"""
from .cases import JOB_GRAMMAR, AttentionCase, parse_job
from .kernel import (ATTENTION_SHADER, COMBINE_SHADER, AttentionKernel, CausalOrder, causal_order, causal_schedule,
                     check_kv_splits, choose_kv_splits, use_gqa_rows)
from .model import blocked_attention, block_ranges, combine_splits, key_block_ranges, query_span, slice_keys
from .reference import (AttentionTolerance, attention_tolerance, check_attention, reference_attention,
                        tolerance_for)
from .shapes import HEAD_DIMS, AttentionInputError, AttentionShape, check_inputs, dtype_name, resolve_scale
from .tiles import (AttentionConfig, AttentionTile, check_attention_tile, choose_attention_tile, choose_config_for,
                    choose_split_config, parse_attention_config, parse_attention_tile, stats_columns)
from .vulkan import ATTENTION_FEATURES, EXTENSIONS, VulkanAttention, attention, attention_features, choose_config

__all__ = [
    "attention", "VulkanAttention", "ATTENTION_FEATURES", "EXTENSIONS", "attention_features", "choose_config",
    "ATTENTION_SHADER", "COMBINE_SHADER", "AttentionKernel", "check_kv_splits", "choose_kv_splits", "use_gqa_rows",
    "CausalOrder", "causal_order", "causal_schedule",
    "blocked_attention", "block_ranges", "combine_splits", "key_block_ranges", "query_span", "slice_keys",
    "AttentionTolerance", "attention_tolerance", "check_attention", "reference_attention", "tolerance_for",
    "HEAD_DIMS", "AttentionInputError", "AttentionShape", "check_inputs", "dtype_name", "resolve_scale",
    "AttentionConfig", "AttentionTile", "check_attention_tile", "choose_attention_tile", "choose_config_for",
    "choose_split_config", "parse_attention_config", "AttentionCase", "JOB_GRAMMAR", "parse_job",
    "parse_attention_tile", "stats_columns",
]
