"""Flash attention on a Vulkan device: :class:`VulkanAttention` (the GEMM runner, reused) and the numpy API.

``attention(q, k, v, causal=False, scale=None, device=None)`` checks everything before it touches a device, creates
one with exactly the features the kernel needs (or uses the :class:`vkcoop.vk.Device` it is given), runs the
device's seed for the shape's class where the driver's flexible-dimensions table takes it (:mod:`.seeds`), else the
table's own choice, dispatches, and returns O (and the log-sum-exp on request).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..gemm import accumulating_types
from ..gemm.types import SUBGROUP_SIZE_FEATURES
from ..gemm.vulkan import VulkanGemm
from .candidates import tuning_candidates
from .kernel import AttentionKernel, check_kv_splits, launch_choices, target_workgroups
from .seeds import seeded_config_for
from .shapes import AttentionInputError, AttentionShape, check_dtype, check_inputs, resolve_scale
from .tiles import (AttentionConfig, AttentionTile, check_attention_tile, choose_attention_tile, choose_config_for,
                    stats_columns)

EXTENSIONS = ("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2")
#: What flash_attention.comp uses besides its element types. maintenance4: local_size_x_id (LocalSizeId);
#: vulkanMemoryModelDeviceScope: the waiting merge's device-scope arrivals (SPLIT_MERGE=WAIT); the subgroup-size
#: control (core in Vulkan 1.3, which vkcoop.vk.Device requires): SCOPE=SUBGROUP pipelines ask for 32-wide subgroups.
ATTENTION_FEATURES = ("cooperativeMatrix", "cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
                      "cooperativeMatrixTensorAddressing", "cooperativeMatrixReductions",
                      "cooperativeMatrixConversions", "cooperativeMatrixPerElementOperations",
                      "vulkanMemoryModel", "vulkanMemoryModelDeviceScope", "maintenance4") + SUBGROUP_SIZE_FEATURES


def attention_features(dtypes=("fp16",)) -> list[str]:
    """Device features the kernel needs for these dtypes (fp16 storage is needed by both)."""
    features = list(ATTENTION_FEATURES)
    for dtype in dtypes:
        check_dtype(dtype)
        features += accumulating_types(dtype).features
    return list(dict.fromkeys(features + ["shaderFloat16", "storageBuffer16BitAccess"]))


def _max_dimension(physical) -> int | None:
    """cooperativeMatrixFlexibleDimensionsMaxDimension, or None where the driver does not report one."""
    props = physical.cooperative_matrix2_properties() or {}
    return int(props.get("cooperativeMatrixFlexibleDimensionsMaxDimension", 0)) or None


def device_kernel(physical, dtype: str, head_dim: int, tile: AttentionTile | None = None, *, flexible=None,
                  stats_cols: int | None = None, subgroup_rows: bool = False, sm_count: int | None = None,
                  **options) -> AttentionKernel:
    """The :class:`AttentionKernel` for a physical device: the tile chosen from (or checked against) the driver's
    flexible-dimensions table, m and l as narrow as the table allows unless ``stats_cols`` is given, the SM count
    (which bounds the waiting merge's mergers) the driver's unless given; ``options`` are AttentionKernel's
    (causal, kv_splits, gqa_rows, ...)."""
    from .. import vk
    sm_count = sm_count or vk.sm_count(physical)
    flexible = physical.flexible_shapes() if flexible is None else flexible
    limit = _max_dimension(physical)
    if tile is None:
        tile = choose_attention_tile(flexible, dtype, head_dim, max_dimension=limit)
    else:
        check_attention_tile(flexible, dtype, head_dim, tile, limit, subgroup_rows)
    stats_cols = stats_cols or stats_columns(flexible, dtype, tile, subgroup_rows)
    return AttentionKernel(dtype, head_dim, tile, stats_cols=stats_cols, subgroup_rows=subgroup_rows,
                           sm_count=sm_count, **options)


def _table(physical, flexible=None) -> tuple:
    """(flexible-dimensions table, dimension limit, shared memory a workgroup may stage): what the table's rules
    take from ``physical`` (``flexible``: the table already read, if given)."""
    from .. import vk
    flexible = physical.flexible_shapes() if flexible is None else flexible
    return flexible, _max_dimension(physical), vk.staging_bytes(physical)


def choose_config(physical, shape: AttentionShape, dtype: str, flexible=None) -> AttentionConfig:
    """The table's configuration on ``physical`` for ``shape`` (``vkcoop bench attention`` runs it where it has
    neither a cached entry nor a seed): :func:`vkcoop.attention.tiles.choose_config_for` with the device's table,
    dimension limit and shared memory."""
    flexible, limit, staging = _table(physical, flexible)
    return choose_config_for(flexible, shape, dtype, limit, staging)


def device_config(physical, shape: AttentionShape, dtype: str, causal: bool = False,
                  flexible=None) -> AttentionConfig:
    """What :func:`attention` runs on ``physical`` for ``shape``: the device's seed where its table takes it, else
    :func:`choose_config` (:func:`.seeds.seeded_config_for`)."""
    flexible, limit, staging = _table(physical, flexible)
    return seeded_config_for(physical.name, flexible, shape, dtype, causal, limit, staging)[0]


def candidate_configs(physical, shape: AttentionShape, dtype: str, flexible=None) -> list[AttentionConfig]:
    """What tuning measures on ``physical`` for ``shape``, :func:`choose_config`'s choice first
    (:func:`vkcoop.attention.candidates.tuning_candidates` with the device's table, dimension limit and shared
    memory)."""
    flexible, limit, staging = _table(physical, flexible)
    return tuning_candidates(flexible, shape, dtype, limit, staging)


def config_options(shape: AttentionShape, config: AttentionConfig, *, causal: bool = False,
                   target_workgroups: int | None = None) -> dict:
    """:func:`device_kernel`'s arguments for an :class:`AttentionConfig` on ``shape``: the key splits and GQA
    row stacking it leaves open chosen by :func:`launch_choices` (what ``vkcoop inspect --attention`` builds and the
    lab's explore tool times)."""
    gqa_rows, splits = launch_choices(shape, config.tile, gqa_rows=config.gqa_rows, kv_splits=config.kv_splits,
                                      target_workgroups=target_workgroups)
    return {"tile": config.tile, "causal": causal, "kv_splits": splits, "gqa_rows": gqa_rows,
            "stats_cols": config.stats_cols, "kv_staged": config.kv_staged, "subgroup_rows": config.subgroup_rows,
            "waiting_merge": config.waiting_merge, "order_chunk": config.order_chunk,
            "order_tail": config.order_tail}


class VulkanAttention(VulkanGemm):
    """An :class:`AttentionKernel` on a device: ``bind(q, k, v, scale)``, ``outputs()`` -> (O, lse), ``time()``."""

    def __init__(self, device, dtype: str, head_dim: int, tile: AttentionTile | None = None, *,
                 causal: bool = False, kv_splits: int = 1, gqa_rows: bool = False, stats_cols: int | None = None,
                 flexible=None, kv_staged: bool | None = None, subgroup_rows: bool = False,
                 waiting_merge: bool = False, sm_count: int | None = None, order_chunk: int | None = None,
                 order_tail: int | None = None):
        super().__init__(device, device_kernel(device.physical, dtype, head_dim, tile, flexible=flexible,
                                               stats_cols=stats_cols, causal=causal, kv_splits=kv_splits,
                                               gqa_rows=gqa_rows, kv_staged=kv_staged, subgroup_rows=subgroup_rows,
                                               waiting_merge=waiting_merge, sm_count=sm_count,
                                               order_chunk=order_chunk, order_tail=order_tail))

    @classmethod
    def from_config(cls, device, dtype: str, shape: AttentionShape, config: AttentionConfig, *,
                    causal: bool = False, target_workgroups: int | None = None, flexible=None,
                    sm_count: int | None = None) -> "VulkanAttention":
        """The kernel an :class:`AttentionConfig` describes for ``shape`` (see :func:`config_options`); ``sm_count``
        stands in for the driver's (the waiting merge's bound on its mergers)."""
        options = config_options(shape, config, causal=causal, target_workgroups=target_workgroups)
        return cls(device, dtype, shape.head_dim, flexible=flexible, sm_count=sm_count, **options)

    def config(self) -> AttentionConfig:
        """The configuration as launched: every choice resolved (a waiting merge that the bound launch could not
        spread, and so merged in a second pass, is reported as not taken)."""
        k = self.kernel
        waiting = k.waiting_merge if self._bound is None else k.merges_waiting(self._bound[0])
        order = k.bound_order(self._bound[0]) if self._bound is not None else None
        chunk, tail = (order.chunk, order.tail) if order else (k.order_chunk, k.order_tail)
        return AttentionConfig(k.tile, k.kv_splits, k.gqa_rows, k.stats_cols, k.kv_staged, k.subgroup_rows, waiting,
                               chunk, tail)

    def bind(self, q, k, v, scale=None):
        return self.bind_launch(self.kernel.launch(q, k, v, scale))

    def outputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Run the bound attention once; (O, log-sum-exp)."""
        out = self.result()
        _, _, buffers = self._require_bound()
        return out, buffers["LSE"].read()

    def run(self, q, k, v, scale=None) -> tuple[np.ndarray, np.ndarray]:
        self.bind(q, k, v, scale)
        try:
            return self.outputs()
        finally:
            self.release()


def _open_device(device, dtype: str):
    """(device, whether we own it): a vkcoop.vk.Device passes through; anything else selects one."""
    from .. import vk
    if isinstance(device, vk.Device):
        return device, False
    return vk.Device(device, extensions=EXTENSIONS, features=attention_features((dtype,))), True


def attention(q, k, v, causal: bool = False, scale=None, device=None, *, tile: AttentionTile | None = None,
              kv_splits: int | None = None, return_lse: bool = False):
    """softmax(q kᵀ · scale [+ causal mask]) v on the GPU, O in q's dtype.

    q [batch][q_heads][seq_q][head_dim], k and v [batch][kv_heads][seq_kv][head_dim] (q_heads a multiple of
    kv_heads: grouped-query attention), fp16 or bfloat16 (ml_dtypes), head_dim 64 or 128. ``scale`` defaults to
    1/sqrt(head_dim); ``causal`` is torch's ``is_causal`` (query i sees keys 0..i). ``device``: a
    :class:`vkcoop.vk.Device`, an index, a name substring or None. ``kv_splits``: key slices (None: enough to
    fill the GPU). With ``return_lse`` also the fp32 log-sum-exp [batch][q_heads][seq_q] (natural log).
    Bad input raises :class:`AttentionInputError` before any device is opened."""
    dtype, shape = check_inputs(q, k, v)
    resolve_scale(scale, shape.head_dim)
    if kv_splits is not None:
        check_kv_splits(kv_splits)
    gpu, owned = _open_device(device, dtype)
    try:
        flexible = gpu.physical.flexible_shapes()
        config = (AttentionConfig(tile) if tile is not None
                  else device_config(gpu.physical, shape, dtype, causal, flexible))
        config = dataclasses.replace(config, kv_splits=kv_splits)
        with VulkanAttention.from_config(gpu, dtype, shape, config, causal=causal, flexible=flexible,
                                         target_workgroups=device_target_workgroups(gpu.physical)) as runner:
            out, lse = runner.run(q, k, v, scale)
    finally:
        if owned:
            gpu.close()
    return (out, lse) if return_lse else out


def device_target_workgroups(physical) -> int:
    """The workgroups a key split aims at on ``physical``: :data:`vkcoop.attention.kernel.WORKGROUPS_PER_SM` per SM
    of the driver's count (VK_NV_shader_sm_builtins), or the default where the driver does not say. ``bench
    attention``, ``inspect --attention``, :func:`attention` and the lab's explore tool all aim here."""
    from .. import vk
    return target_workgroups(vk.sm_count(physical))


__all__ = ["ATTENTION_FEATURES", "EXTENSIONS", "VulkanAttention", "attention", "attention_features",
           "candidate_configs", "choose_config", "config_options", "device_config", "device_kernel",
           "device_target_workgroups",
           "AttentionInputError"]
