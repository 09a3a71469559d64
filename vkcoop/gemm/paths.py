"""The three Vulkan GEMM paths of the benchmark, as :class:`vkcoop.gemm.path.GemmPath` objects on one device.

Their launch configurations per shape class start from :data:`SEED_CONFIGS`: what was measured best on the H200
(docs/gemm-notes.md); the tile sizes are multiples of that device's flexible-dimension granularities. A
configuration's label parses back (:func:`parse_config`), which is how ``vkcoop.bench.explore`` names them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .path import GemmOperands, GemmProblem
from .tiles import WorkgroupTile, choose_subgroup_tile, parse_tile
from .types import GemmInputError, accumulating_types, features_for
from .vulkan import CoopMat2Gemm, KhrSharedMemoryGemm, L2Flush, Sparse24Gemm


@dataclass(frozen=True)
class VulkanConfig:
    """One launch configuration of a Vulkan coopmat2 path: the tile, B's layout and (2:4 path) A's layout."""
    tile: WorkgroupTile
    b_column_major: bool = False
    meta_words: int = 0   # 2:4 path: 0 = values + metadata bindings, > 0 = interleaved blocks (interleave_2to4)

    def label(self) -> str:
        return self.tile.label() + (f"i{self.meta_words}" if self.meta_words else "") + \
            ("c" if self.b_column_major else "")


def parse_config(text: str) -> VulkanConfig:
    """The inverse of :meth:`VulkanConfig.label`: a tile label, then ``iMETA_WORDS`` and ``c`` (column-major B)."""
    tile, rest = parse_tile(text)
    meta_words, column = 0, False
    if rest.startswith("i") and rest[1:2].isdigit():
        digits = len(rest) - len(rest[1:].lstrip("0123456789"))
        meta_words, rest = int(rest[1:digits]), rest[digits:]
    if rest == "c":
        column, rest = True, ""
    if rest:
        raise GemmInputError(f"configuration {text!r}: cannot read {rest!r} after the tile "
                             "(expected [iMETA_WORDS][c])")
    return VulkanConfig(tile, column, meta_words)


def _seeds(*labels: str) -> list[VulkanConfig]:
    return [parse_config(label) for label in labels]


#: Launch configurations per path and shape class, tried in order when tuning (the first is the default).
#: H200 measurements, 8192^3 fp16 / bf16 TFLOP/s: dense u8 277 / 273, u4 259 / 254, 128 invocations u4 260 / 254;
#: 2:4 u8 i1 199, u4 i1 192, u4 two bindings 173. 8192x32x8192 (ms): dense 32x32x128/64 split-K 2 0.054,
#: /32 0.054, 64x32x128/256 0.068; 2:4 i4 split-K 2 0.099, 64x32x128/256 i1 0.119, two bindings 0.123
#: (32 invocations, i1: 0.367, not listed).
SEED_CONFIGS = {
    "vk-coopmat2-dense": {
        "square": _seeds("256:128x256x32u8g8", "256:128x256x32u4g8", "128:128x128x32u4g8"),
        "llm": _seeds("64:32x32x128u2g1s2c", "32:32x32x128u2g1s2c", "256:64x32x128u2g1c"),
    },
    "vk-coopmat2-2:4": {
        "square": _seeds("256:128x256x32u8g8i1", "256:128x256x32u4g8i1", "256:128x256x32u4g8"),
        "llm": _seeds("64:32x32x128u2g1s2i4c", "256:64x32x128u2g1i1c", "256:64x32x128u2g1c"),
    },
}


class VulkanDevicePaths:
    """One Vulkan device with every feature the three Vulkan paths need (one dtype set), shared by them."""

    def __init__(self, dtypes, device=None, validate: bool = False):
        from .. import vk

        features = []
        for dtype in dtypes:
            for kernel in ("sparse24", "khr"):
                features += features_for(kernel, accumulating_types(dtype))
        # vkcoop.vk.Device enables each feature's own extension (VK_KHR_shader_bfloat16 for the bf16 ones).
        self.device = vk.Device(device, features=list(dict.fromkeys(features)), validate=validate)
        self.flexible = self.device.physical.flexible_shapes()
        self.khr = self.device.physical.khr_shapes()
        self._flush = None
        self.paths = [CoopMat2Path(self), Sparse24Path(self), KhrPath(self)]

    @property
    def name(self) -> str:
        return self.device.physical.name

    def flush(self) -> L2Flush:
        if self._flush is None:
            self._flush = L2Flush(self.device)
        return self._flush

    def close(self):
        for path in self.paths:
            path.close()
        if self._flush is not None:
            self._flush.close()
        self.device.close()


class _BoundVulkan:
    """A :class:`vkcoop.gemm.vulkan.VulkanGemm` with operands bound, as a :class:`BoundGemm`."""

    def __init__(self, gemm, group: VulkanDevicePaths, config: str):
        self.gemm, self.group, self.config = gemm, group, config

    def output_rows(self, rows: np.ndarray) -> np.ndarray:
        return self.gemm.result()[rows]

    def time(self, iterations: int, warmup: int, flush_l2: bool) -> list[float]:
        return self.gemm.time(iterations, warmup, self.group.flush() if flush_l2 else None)

    def release(self) -> None:
        self.gemm.release()


class _VulkanPath:
    name = ""

    def __init__(self, group: VulkanDevicePaths):
        self.group = group
        self._kernels: dict = {}

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        return True, self.group.name

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        options = SEED_CONFIGS[self.name].get(problem.shape_class) or SEED_CONFIGS[self.name]["square"]
        return list(options) if tune else list(options[:1])

    def kernel(self, dtype: str, config):
        key = (dtype, config)
        if key not in self._kernels:
            self._kernels[key] = self._make(dtype, config)
        return self._kernels[key]

    def bind(self, operands: GemmOperands, config) -> _BoundVulkan:
        gemm = self.kernel(operands.problem.dtype, config)
        self._bind(gemm, operands)
        return _BoundVulkan(gemm, self.group, config.label())

    def close(self):
        for gemm in self._kernels.values():
            gemm.close()
        self._kernels.clear()


class CoopMat2Path(_VulkanPath):
    name = "vk-coopmat2-dense"

    def _make(self, dtype, config):
        return CoopMat2Gemm(self.group.device, accumulating_types(dtype), config.tile,
                            b_column_major=config.b_column_major, flexible=self.group.flexible)

    def _bind(self, gemm, operands):
        gemm.bind(operands.pruned, gemm.kernel.store_b(operands.b))


class Sparse24Path(_VulkanPath):
    name = "vk-coopmat2-2:4"

    def _make(self, dtype, config):
        return Sparse24Gemm(self.group.device, dtype, config.tile, b_column_major=config.b_column_major,
                            flexible=self.group.flexible, meta_words=config.meta_words)

    def _bind(self, gemm, operands):
        gemm.bind(operands.compressed.values, operands.compressed.metadata, gemm.kernel.store_b(operands.b))


class KhrPath(_VulkanPath):
    name = "vk-khr-subgroup"

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        types = accumulating_types(problem.dtype)
        if problem.shape_class == "llm":  # few columns: a narrow tile wastes less
            return [choose_subgroup_tile(self.group.khr, types, tile=(128, 32, None), subgroups=(4, 1))]
        return [choose_subgroup_tile(self.group.khr, types)]

    def _make(self, dtype, config):
        return KhrSharedMemoryGemm(self.group.device, accumulating_types(dtype), config)

    def _bind(self, gemm, operands):
        gemm.bind(operands.pruned, operands.b)
