"""Vulkan's limits on a workgroup, as a cap on the CUDA kernels: the same instruction at the same limits tells what
the limits cost, apart from what the driver's compiler and the API cost.

A coopmat2 workgroup on the H100 may use ``maxComputeSharedMemorySize`` = 49,152 bytes of shared memory (CUDA lets a
block opt in to 227 KB), of which the driver keeps ``cooperativeMatrixWorkgroupScopeReservedSharedMemory`` = 8,192 for
staging workgroup-scope matrices, so the shader's own arrays get 40,960; at most
``cooperativeMatrixWorkgroupScopeMaxWorkgroupSize`` = 256 invocations; and matrix sides that are multiples of the
flexible-dimensions table's granularity for that workgroup size (32/32/16 at 256 invocations, 32/16/16 at 128). A CUDA
tile within these limits (:meth:`VulkanCap.admits`) is one the driver could have been given.

The limits are read from the Vulkan driver (:func:`read_cap`); where it cannot be asked, from a recorded ``vkcoop
info --json`` report (``docs/h100-capabilities.json``), and :attr:`VulkanCap.source` says which.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import InputError
from ..gemm.configs import DeviceLimits, recorded_device
from ..gemm.tiles import granularity_rows
from ..gemm.types import accumulating_types

#: The recorded report :func:`read_cap` falls back on (a source checkout's docs/).
RECORDED_REPORT = Path(__file__).resolve().parents[2] / "docs" / "h100-capabilities.json"
DTYPES = ("fp16", "bf16")


class CapUnavailable(InputError):
    """Neither the Vulkan driver nor the recorded report can say what Vulkan's limits are."""


@dataclass(frozen=True)
class VulkanCap:
    device: str
    source: str                 # "vulkan driver" or the recorded report's path
    shared_memory: int          # maxComputeSharedMemorySize
    reserved: int               # cooperativeMatrixWorkgroupScopeReservedSharedMemory
    max_workgroup: int          # cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
    #: dtype -> {workgroup invocations: (M, N, K) granularity} of the workgroup-scope rows with fp32 accumulation
    granularity: dict = field(default_factory=dict)

    @property
    def shader_share(self) -> int:
        """What a shader's own shared arrays may fill: the limit less the driver's reserve."""
        return self.shared_memory - self.reserved

    def admits(self, config, dtype: str) -> tuple[bool, str]:
        """Whether a CUDA tile (``threads``, ``bm``, ``bn``, ``bk``, shared memory) is within these limits for
        ``dtype`` inputs, and why not."""
        smem = getattr(config, "total_smem_bytes", config.smem_bytes)
        if smem > self.shared_memory:
            return False, f"{smem} bytes of shared memory, above Vulkan's {self.shared_memory}"
        if config.threads > self.max_workgroup:
            return False, f"{config.threads} threads, above Vulkan's {self.max_workgroup} invocations"
        rows = self.granularity.get(dtype, {})
        step = rows.get(config.threads)
        if step is None:
            return False, f"the flexible-dimensions table has no {dtype} row of {config.threads} invocations"
        if config.bm % step[0] or config.bn % step[1] or config.bk % step[2]:
            return False, (f"tile {config.bm}x{config.bn}x{config.bk} is not a multiple of the table's "
                           f"{step[0]}/{step[1]}/{step[2]} at {config.threads} invocations")
        return True, f"within {self.shared_memory} bytes and {self.max_workgroup} invocations"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["shader_share"] = self.shader_share
        out["granularity"] = {dtype: {str(k): list(v) for k, v in rows.items()} for dtype, rows in
                              self.granularity.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "VulkanCap":
        granularity = {dtype: {int(k): tuple(v) for k, v in rows.items()}
                       for dtype, rows in data.get("granularity", {}).items()}
        return cls(data["device"], data["source"], int(data["shared_memory"]), int(data["reserved"]),
                   int(data["max_workgroup"]), granularity)


def cap_from(device: str, source: str, limits: DeviceLimits, flexible) -> VulkanCap:
    """The cap of a device's limits and flexible-dimensions rows."""
    granularity = {}
    for dtype in DTYPES:
        rows = granularity_rows(flexible, accumulating_types(dtype))
        granularity[dtype] = {row.workgroup_invocations: (row.M, row.N, row.K) for row in rows}
    return VulkanCap(device, source, limits.shared_memory, limits.reserved_shared_memory, limits.max_workgroup,
                     granularity)


def recorded_cap(path: Path = RECORDED_REPORT) -> VulkanCap:
    """The cap of a recorded ``vkcoop info --json`` report."""
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise CapUnavailable(f"cannot read Vulkan's limits from {path}: {error}") from None
    name, flexible, _khr, limits = recorded_device(report)
    return cap_from(name, str(path), limits, flexible)


def driver_cap(device=None) -> VulkanCap:
    """The cap the Vulkan driver reports for ``device`` (index, name or None: vkcoop.vk's choice)."""
    from .. import vk

    with vk.Instance() as instance:
        physical = instance.select(device)
        cap = cap_from(physical.name, "vulkan driver", DeviceLimits.of(physical), physical.flexible_shapes())
    if not any(cap.granularity.values()):
        raise CapUnavailable(f"{cap.device} lists no workgroup-scope cooperative matrix (VK_NV_cooperative_matrix2)")
    return cap


def read_cap(device=None, recorded: Path = RECORDED_REPORT) -> VulkanCap:
    """Vulkan's limits from the driver, else from the recorded report (CapUnavailable when neither answers)."""
    try:
        return driver_cap(device)
    except Exception:  # noqa: BLE001 - no Vulkan, no device, no coopmat2: fall back on the recorded report
        return recorded_cap(recorded)
