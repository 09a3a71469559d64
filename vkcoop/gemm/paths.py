"""The Vulkan GEMM paths of the benchmark, as :class:`vkcoop.gemm.path.GemmPath` objects on one device.

Launch configurations are kept per *tuning class* (:func:`tuning_class`: compute-bound, or memory-bound by N
bucket). Candidates are derived from what the driver reports (:mod:`.configs`: the flexible-dimension table,
shared memory, the SM count); :data:`SEEDS` holds what was measured best on the H200 and the H100 (docs/gemm.md),
shipped as seeds for those devices. ``vkcoop.bench.tuning`` measures the candidates and caches the winners per
device. A configuration's label parses back (:func:`parse_config`), which is how the tuning cache (and the lab's
explore tool) name them.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import sparse as sparse24

from .configs import (DeviceLimits, VulkanConfig, derive_khr_configs, derive_workgroup_configs, is_narrow,
                      parse_config, path_kernel, seed_family, tuning_class)
from .path import GemmOperands, GemmProblem
from .tiles import SUBGROUP_CODE, parse_subgroup_tile
from .types import DENSE_TYPES, SPARSE24_TYPES, GemmInputError, accumulating_types, features_for
from .vulkan import KhrSharedMemoryGemm, L2Flush, coopmat2_gemm

__all__ = ["VulkanConfig", "parse_config", "SEED_DEVICE", "SEED_CONFIGS", "SEEDS", "seed_configs", "tuning_class",
           "VulkanDevicePaths", "CoopMat2Path", "CoopMat2Fp16AccumulatingPath", "Sparse24Path", "ExpandedSparse24Path",
           "KhrPath"]


def _seeds(*labels: str) -> list[VulkanConfig]:
    return [parse_config(label) for label in labels]


#: The one device :data:`SEED_CONFIGS` was measured on (``PhysicalDevice.name``).
SEED_DEVICE = "NVIDIA H200"
#: H200 launch configurations per path and seed family ("square": compute-bound, "llm": N <= 256; a table may
#: also name a tuning class, which then wins over its family), tried first when tuning there (the first is that
#: device's default). Measured on the H200 (docs/gemm.md), 8192^3 fp16 / bf16 TFLOP/s: dense u8 277 / 273, u4
#: 259 / 254, 128 invocations u4 260 / 254; 2:4 u8 i1 199, u4 i1 192, u4 two bindings 173. 8192x32x8192 (ms):
#: dense 32x32x128/64 split-K 2 0.054, /32 0.054, 64x32x128/256 0.068; 2:4 i4 split-K 2 0.099, 64x32x128/256 i1
#: 0.119, two bindings 0.123 (32 invocations, i1: 0.367, not listed). The llm defaults carry w4: on the H200's 132
#: SMs that resolves to the measured split 2 at 8192x32x8192 (and to 4 at 4096 rows, as on the H100). fp16
#: accumulation (fp16->fp16): 256:256x256x32 u4 344.9, 128x256x32 u4 249.2 (u8, first here, won on the H100 and
#: was not timed on the H200). Its llm seed splits K as the dense one does (the last slice adds the fp16 planes;
#: measured on the H100 only).
SEED_CONFIGS = {
    "vk-coopmat2-dense": {
        "square": _seeds("256:128x256x32u8g8", "256:128x256x32u4g8", "128:128x128x32u4g8"),
        "llm": _seeds("64:32x32x128u2g1s2w4c", "32:32x32x128u2g1s2c", "256:64x32x128u2g1c"),
    },
    "vk-coopmat2-dense-fp16acc": {
        "square": _seeds("256:256x256x32u8g8", "256:256x256x32u4g8", "256:128x256x32u4g8"),
        "llm": _seeds("64:32x32x128u2g1s2w4c", "64:32x32x128u2g1c", "256:64x32x128u2g1c"),
    },
    "vk-coopmat2-2:4": {
        "square": _seeds("256:128x256x32u8g8i1", "256:128x256x32u4g8i1", "256:128x256x32u4g8"),
        "llm": _seeds("64:32x32x128u2g1s2w4i4c", "256:64x32x128u2g1i1c", "256:64x32x128u2g1c"),
    },
}
#: H100 80GB HBM3 (driver 580.159.04), with the ALIGNED pipelines (docs/gemm.md), 8192^3 fp16 TFLOP/s unless noted:
#: - Dense, square: 128:128x128x64u8g4 with column-major B (128 invocations: two workgroups an SM) 345.3 (4096^3
#:   334.9, bf16 335.2); with the tail split (x5: the partial last wave's tiles run as 5 K slices, behind at least 8
#:   whole waves) 346-350 against 342-343 (bf16 346-347 against 339-343); 256:128x256x32u32g8 327.1 (4096^3 294.2);
#:   staged 128:128x128x32 u1 288.
#: - 2:4, square: staged 128:128x128x32 u1 (t: A expanded in the copy to shared memory) 222.1 (bf16 222.0, 4096^3
#:   212.9, 8191x8200x8192 202.7); the direct decode-function kernel u8 i1 210.0. The staged 128:64x256x32 u1 was 3 %
#:   faster (229.6) but its 44,032 bytes of shared memory exceed the 40,960 a shader with workgroup-scope matrices
#:   may use (VUID-RuntimeSpirv-maxComputeSharedMemorySize-10168, reported by GPU-assisted validation; the driver
#:   runs it).
#: - Narrow classes (ms at M = K = 8192 / 4096), split-K filling w workgroups per SM: N = 16 dense 64:64x16x128 w4
#:   0.058, 2:4 staged 64x16x64 prefetch 3 w4 0.057 / 0.021; N = 32 dense 32x32x128 w4 0.063 / 0.022 (K unroll 4:
#:   0.058 against 0.060, 4096 rows 0.018 against 0.019), 2:4 staged 64x32x64 w3 0.065 / 0.024; N = 64 dense the
#:   direct 128:64x64x128 u4 w2 0.066 against the staged 64x64x64 w2's 0.071-0.072 (4096 rows 0.0226 against
#:   0.0232), 2:4 the staged 64x64x64 w2 0.083 / 0.029.
#: - fp16 accumulation, 8192^3: 256:256x256x32 u16 397.0, u32 379.1, u8 375.8 in one process (4096^3 u16 348.1
#:   against u8 334.3), u4 342.4, 128x256x32 u16 313.5. Its narrow seeds split K too (the last slice adds the fp16
#:   planes; ms at M = K = 8192 / 4096, against one K slice in the same process): N = 16 64:32x16x128 w4 0.056 /
#:   0.015, 64:64x16x128 w4 0.054 / 0.017 (one slice 0.071 / 0.026); N = 32 32x32x128 w4 0.058 / 0.018 (0.069 /
#:   0.026); N = 64 staged 64x64x64 w2 0.070 / 0.024 (0.088 / 0.031).
#: - The small class (at most 64 tiles of 128x128): 128:64x64x128u4g1w2c 98 / 64 / 124 / 167 TFLOP/s at
#:   512x512x4096 / 768^3 / 1024^3 / 1000x1000x4096 against the square seed's 33 / 43 / 89 / 125 (bf16
#:   1000x1000x1024 117 against 85); splitting K of the square tile to fill the SMs lost there (52-65 against 85).
#:   fp16 accumulation: the same tile 91 / 115 / 169 at 512x512x4096 / 1000x1000x1024 / 1000x1000x4096 against its
#:   square seed's 12 / 34 / 46. 2:4: the staged 128:64x64x64 u4 w2 86 / 57 / 99 / 131 at 512x512x4096 / 768^3 /
#:   1000x1000x1024 / 1000x1000x4096 against 21 / 34 / 58 / 77 (bf16 1000^3 99 against 60; 1280^3, 100 tiles: a
#:   tie).
#: - The medium class (65 to 256 tiles) changes only fp16 accumulation: 128:128x128x64u8g4c 138 / 262 at 1280^3 /
#:   2048^3 against its square seed's 54 / 161 (4096^3: 328 against 346, 3000x5000x2016 a tie).
#: Staged (t) configurations run any problem: the bench's kernels pad it to whole tiles.
H100_SEED_CONFIGS = {
    "vk-coopmat2-dense": {
        "square": _seeds("128:128x128x64u8g4w2x5c", "128:128x128x64u8g4c", "256:128x256x32u32g8",
                         "128:128x128x32u1g8t"),
        "small": _seeds("128:64x64x128u4g1w2c", "128:128x128x64u8g4w2x5c"),
        "narrow16": _seeds("64:64x16x128u2g1w4c", "64:32x16x128u2g1w4c", "128:64x16x64u4g1w3t"),
        "llm": _seeds("64:32x32x128u4g1s2w4c", "64:32x32x128u2g1s2w4c", "128:64x32x64u4g1s2w3t"),
        "narrow64": _seeds("128:64x64x128u4g1w2c", "128:64x64x64u4g1w2t", "64:32x64x128u2g1w3c"),
    },
    "vk-coopmat2-dense-fp16acc": {
        "square": _seeds("256:256x256x32u16g8", "256:256x256x32u8g8", "256:128x256x32u16g8"),
        "small": _seeds("128:64x64x128u4g1w2c", "256:256x256x32u16g8"),
        "medium": _seeds("128:128x128x64u8g4c", "256:256x256x32u16g8"),
        "narrow16": _seeds("64:32x16x128u2g1w4c", "64:64x16x128u2g1w4c"),
        "llm": _seeds("64:32x32x128u2g1s2w4c", "128:64x32x64u4g1w3t"),
        "narrow64": _seeds("128:64x64x64u4g1w2t", "64:32x64x128u2g1w4c"),
    },
    "vk-coopmat2-2:4": {
        "square": _seeds("128:128x128x32u1g8t", "256:128x256x32u8g8i1"),
        "small": _seeds("128:64x64x64u4g1w2t", "128:128x128x32u1g8t"),
        "narrow16": _seeds("128:64x16x64u4g1w4tp", "128:64x16x64u4g1w4tn", "128:64x16x64u3g1w4t"),
        "narrow32": _seeds("128:64x32x64u4g1w3tp", "128:64x32x64u8g1w3tp", "128:64x32x64u4g1s2w3t"),
        "llm": _seeds("128:64x32x64u4g1s2w3t", "64:32x32x128u2g1s2w4i4c", "64:32x32x128u2g1s4i4c"),
        "narrow64": _seeds("128:64x64x64u4g1w2tp", "128:64x64x64u4g1w2tn", "128:64x64x64u4g1w2t"),
    },
}
#: The narrow 2:4 seeds run the staged kernel on the tile-major layout (tp, tn). H100, fp16, µs after an L2 flush
#: (lab/sweep_sparse24_narrow.py; docs/gemm.md G54), fastest tile-major against the row-layout seed and dense:
#: 8192xNx8192 N = 16 / 32 / 64 37.0 / 43.9 / 62.0 against 47.0 / 55.1 / 73.3 and 52.1 / 55.5 / 62.0; 14336xNx4096
#: 37.8 / 44.4 / 56.5 against 59.3 / 59.4 / 68.3; 4096xNx4096 16.3 / 18.5 / 25.2 against 17.7 / 20.7 / 27.3. The
#: H200's narrow 2:4 classes take the same seeds (not measured there).
for _cls in ("narrow16", "narrow32", "narrow64"):
    SEED_CONFIGS["vk-coopmat2-2:4"][_cls] = H100_SEED_CONFIGS["vk-coopmat2-2:4"][_cls]
# The expand path runs the dense kernel after its expansion pass: the dense compute-bound seeds, less the staged ones.
for _table in (SEED_CONFIGS, H100_SEED_CONFIGS):
    _table["vk-coopmat2-2:4-expand"] = {family: [c for c in configs if not c.staged]
                                        for family, configs in _table["vk-coopmat2-dense"].items()
                                        if not is_narrow(family)}
#: Shipped seeds by device name.
SEEDS = {SEED_DEVICE: SEED_CONFIGS, "NVIDIA H100 80GB HBM3": H100_SEED_CONFIGS}
#: The dense path's int8 seeds (s8 x s8 -> s32), compute-bound shapes only: first guesses from the fp16 seeds, not yet
#: tuned; the first ran at 635.1 TOP/s at 8192^3 on the H100 (about half the s8 ceiling). The fp16 square seed's tile
#: reads 64 K columns of 2 bytes a step; int8 reads the same bytes in 128 columns (128x128x128, K unroll 4), then the
#: fp16 tile itself and the 256-invocation tile. The staged kernel copies 16-bit elements only, so no ``t`` label is
#: here; narrow int8 problems run the first candidate derived from the driver's S8 rows (K granularity 32).
INT8_SEED_CONFIGS = {"vk-coopmat2-dense": {"square": _seeds("128:128x128x128u4g4c", "128:128x128x64u8g4c",
                                                            "256:128x256x64u8g8")}}
#: Seeds of the dtypes whose tables are their own (the others share the fp16 and bf16 table of their device).
DTYPE_SEEDS = {"int8": {SEED_DEVICE: INT8_SEED_CONFIGS, "NVIDIA H100 80GB HBM3": INT8_SEED_CONFIGS}}


def seed_configs(device_name: str, path_name: str, problem: GemmProblem) -> list:
    """The shipped seed configurations of ``path_name`` for ``problem`` on ``device_name`` ([] if none): those of
    its tuning class where the table has them (``narrow16``...), else those of the class's family (``square`` or
    ``llm``); a dtype with a table of its own (:data:`DTYPE_SEEDS`) reads only that one."""
    tables = DTYPE_SEEDS.get(problem.dtype, SEEDS)
    table = tables.get(device_name, {}).get(path_name)
    if not table:
        return []
    cls = tuning_class(problem)
    family = seed_family(cls)
    if problem.dtype in DTYPE_SEEDS and family not in table:
        return []
    return list(table.get(cls) or table.get(family) or table["square"])


class VulkanDevicePaths:
    """One Vulkan device with every feature the Vulkan paths need (one dtype set), shared by them."""

    def __init__(self, dtypes, device=None, validate: bool = False):
        from .. import vk

        features = []
        for dtype in dtypes:
            kernels = ("sparse24", "khr") if dtype in SPARSE24_TYPES else ("coopmat2",) if dtype in DENSE_TYPES else ()
            for kernel in kernels:
                features += features_for(kernel, accumulating_types(dtype))
        # vkcoop.vk.Device enables each feature's own extension (VK_KHR_shader_bfloat16 for the bf16 ones).
        self.device = vk.Device(device, features=list(dict.fromkeys(features)), validate=validate)
        self.flexible = self.device.physical.flexible_shapes()
        self.khr = self.device.physical.khr_shapes()
        self.limits = DeviceLimits.of(self.device.physical)
        self._flush = None
        self.paths = [path_type(self) for path_type in VULKAN_PATH_TYPES]

    @property
    def name(self) -> str:
        return self.device.physical.name

    def set_sm_count(self, sm_count: int | None) -> None:
        """Replace the SM count (the driver's where VK_NV_shader_sm_builtins is listed; the caller may know it
        from CUDA where not)."""
        self.limits = replace(self.limits, sm_count=sm_count)

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
    dtypes = tuple(SPARSE24_TYPES)      # the bench dtypes the path's kernels take

    def __init__(self, group: VulkanDevicePaths):
        self.group = group
        self._kernels: dict = {}

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        if problem.dtype not in self.dtypes:
            return False, f"{self.name} takes {', '.join(self.dtypes)}, not {problem.dtype}"
        return True, self.group.name

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        """Not tuning: the device's seed default, else the first derived candidate. Tuning: the seeds, then the
        candidates derived from the driver's tables (:func:`vkcoop.gemm.configs.derive_workgroup_configs`)."""
        seeds = seed_configs(self.group.name, self.name, problem)
        if seeds and not tune:
            return seeds[:1]
        derived = derive_workgroup_configs(self.name, problem, self.group.flexible, self.group.limits)
        options = list(dict.fromkeys(seeds + derived))
        return options if tune else options[:1]

    def config_from_label(self, label: str, problem: GemmProblem):
        """The configuration a tuning cache names, or None when the label does not parse (the padded kernels run
        any configuration on any problem)."""
        try:
            return parse_config(label)
        except GemmInputError:
            return None

    def _for_problem(self, config, problem: GemmProblem):
        return config.for_problem(problem, self.group.limits.sm_count)

    def kernel(self, dtype: str, config):
        key = (dtype, config)
        if key not in self._kernels:
            self._kernels[key] = self._make(dtype, config)
        return self._kernels[key]

    def _make(self, dtype, config):
        kernel = path_kernel(self.name, config, dtype)
        return coopmat2_gemm(self.group.device, kernel, flexible=self.group.flexible)

    def bind(self, operands: GemmOperands, config) -> _BoundVulkan:
        """The label of what runs names the split-K a ``w`` configuration resolved to for this problem."""
        config = self._for_problem(config, operands.problem)
        gemm = self.kernel(operands.problem.dtype, config)
        self._bind(gemm, operands)
        return _BoundVulkan(gemm, self.group, config.label())

    def close(self):
        for gemm in self._kernels.values():
            gemm.close()
        self._kernels.clear()


class CoopMat2Path(_VulkanPath):
    """The dense coopmat2 kernel on the pruned A; int8 too (s8 x s8 -> s32, checked exactly)."""
    name = "vk-coopmat2-dense"
    dtypes = tuple(DENSE_TYPES)

    def _bind(self, gemm, operands):
        gemm.bind(operands.pruned, gemm.kernel.store_b(operands.b))


class CoopMat2Fp16AccumulatingPath(CoopMat2Path):
    """The dense kernel accumulating in fp16 (fp16->fp16, ggml's default). Its sums round, so it is checked on
    :attr:`GemmOperands.short_sums` (exact in fp16 in any order, compared bit for bit) and timed on the case's
    operands."""
    name = "vk-coopmat2-dense-fp16acc"
    dtypes = ("fp16",)

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        if problem.dtype != "fp16":
            return False, f"accumulates in fp16: fp16 inputs only (not {problem.dtype})"
        return True, self.group.name

    def check_operands(self, operands: GemmOperands) -> GemmOperands:
        return operands.short_sums


class Sparse24Path(_VulkanPath):
    name = "vk-coopmat2-2:4"

    def _bind(self, gemm, operands):
        gemm.bind(operands.compressed.values, operands.compressed.metadata, gemm.kernel.store_b(operands.b))


class ExpandedSparse24Path(Sparse24Path):
    """A expanded from the 2:4 format into a dense workspace by one pass, then the dense coopmat2 kernel
    (:mod:`vkcoop.gemm.expanded`); its configurations are the dense kernel's (no staged ones). Compute-bound
    classes only: at the memory-bound ones the pass writes and reads back more bytes than the 2:4 format saves."""
    name = "vk-coopmat2-2:4-expand"

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        if problem.dtype not in self.dtypes:
            return super().supports(problem)
        if problem.k % sparse24.K_ALIGNMENT:   # its expansion pass reads whole metadata words
            return False, f"the 2:4 format needs K ({problem.k}) a multiple of {sparse24.K_ALIGNMENT}"
        if is_narrow(tuning_class(problem)):
            return False, (f"N={problem.n} is memory-bound: expanding A writes and reads back 2x its dense bytes; "
                           "the 2:4 kernels that expand per tile run there")
        return True, self.group.name


class KhrPath(_VulkanPath):
    """The KHR shared-memory GEMM; its kernels pad a problem to whole tiles (any M, N, K)."""
    name = "vk-khr-subgroup"

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        derived = derive_khr_configs(problem, self.group.khr, self.group.limits)
        if not derived:
            raise GemmInputError(f"no KHR shared-memory tile of {self.name} fits {problem.dtype} on this device")
        return derived if tune else derived[:1]

    def config_from_label(self, label: str, problem: GemmProblem):
        """A tile by its label (the tuning cache's) or by its code (``MxNxK:SMxSN[dSTAGES][gGROUP_M]``, explore's)."""
        if SUBGROUP_CODE.fullmatch(label):
            return parse_subgroup_tile(label, self.group.khr, accumulating_types(problem.dtype))
        return next((c for c in self.configs(problem, True) if c.label() == label), None)

    def _for_problem(self, config, problem: GemmProblem):
        return config   # a KHR tile has no split-K

    def _make(self, dtype, config):
        return KhrSharedMemoryGemm(self.group.device, accumulating_types(dtype), config, pad_to_tiles=True)

    def _bind(self, gemm, operands):
        gemm.bind(operands.pruned, operands.b)


#: The Vulkan GEMM paths, in the order the bench lists them.
VULKAN_PATH_TYPES = (CoopMat2Path, CoopMat2Fp16AccumulatingPath, Sparse24Path, ExpandedSparse24Path, KhrPath)
VULKAN_PATH_NAMES = tuple(path_type.name for path_type in VULKAN_PATH_TYPES)
