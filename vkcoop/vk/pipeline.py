"""Compute pipelines from SPIR-V: descriptor set 0 of buffers, typed specialization constants, push constants,
required subgroup size, and workgroup-size checks against device limits before anything is created."""
from __future__ import annotations

import math

import numpy as np
import vulkan as vk

from . import checks, robustness
from .errors import LimitError, MissingFeatureError, PipelineInputError, VulkanTypeError, check
from .interface import (check_entry_point, reflect_module, resolve_bindings, resolve_push_constant_size,
                        validate_module)
from .packing import SpecValue, pack_spec_value
from .resource import Resource

REQUIRED_SUBGROUP_SIZE_STYPE = 1000225001
STAGE_ALLOW_VARYING_SUBGROUP_SIZE = 0x1
STAGE_REQUIRE_FULL_SUBGROUPS = 0x2
SHADER_STAGE_COMPUTE = 0x20


class ComputePipeline(Resource):
    """A compute pipeline with one descriptor set (set 0) of buffer bindings and an optional push constant range.

    The module is checked first (see :mod:`vkcoop.vk.interface`): reflection must parse it, spirv-val must accept
    it where a toolchain exists (``validate_spirv``: None = where available, True = required, False = skip),
    ``entry_point`` must be one of its compute entry points. Reflection supplies the bindings, the
    specialization constants' ids, names and types, the push-constant block's size and the workgroup size;
    ``bindings=`` must agree with it, ``push_constant_size=`` must cover the block, ``local_size=`` overrides it
    for the limit check.
    """

    def __init__(self, device, spirv: bytes, *, specialization: dict | None = None, bindings=None,
                 push_constant_size: int | None = None, local_size=None, required_subgroup_size: int | None = None,
                 full_subgroups: bool = False, entry_point: str = "main", name: str = "shader",
                 validate_spirv: bool | None = None):
        device.require_open()
        self.device, self.name = device, checks.text(name, "name")
        self.handle = self.layout = self.set_layout = None
        self.reflection = reflect_module(spirv, name)
        spirv = bytes(spirv)
        check_entry_point(self.reflection, entry_point, name)
        self.bindings = resolve_bindings(self.reflection, bindings, name)
        if specialization is not None and not isinstance(specialization, dict):
            raise VulkanTypeError(f"{name}: specialization must be a dict, got {type(specialization).__name__}")
        self.specialization = self._pack_specialization(specialization or {})
        self.local_size = self._resolve_local_size(local_size)
        self.push_constant_size = resolve_push_constant_size(
            self.reflection, push_constant_size, int(device.physical.limits.maxPushConstantsSize), name)
        #: bytes every dispatch must push: the shader's push-constant block (0: none, or its size is unknown)
        self.push_block_size = self.reflection.push_constant_size or 0
        self.required_subgroup_size = None if required_subgroup_size is None else checks.integer(
            required_subgroup_size, "required_subgroup_size")
        self.full_subgroups = checks.flag(full_subgroups, "full_subgroups")
        #: the device's VK_EXT_pipeline_robustness choice for buffers (vkcoop.vk.robustness), chained at creation
        self.buffer_robustness = getattr(device, "buffer_robustness", robustness.DRIVER_DEFAULT)
        self._check_limits()
        validate_module(spirv, checks.flag(validate_spirv, "validate_spirv", allow_none=True),
                        device.enabled_features, name)
        device._track(self)
        self._create(spirv, entry_point)

    # -- inputs ----------------------------------------------------------------------------------------------
    def _pack_specialization(self, values: dict) -> list[SpecValue]:
        reflected = {s.spec_id: s for s in self.reflection.spec_constants}
        by_name = {s.name: s for s in self.reflection.spec_constants}
        packed = []
        for key, value in values.items():
            if isinstance(key, str):
                if key not in by_name:
                    known = ", ".join(f"{s.name} (id {s.spec_id})" for s in by_name.values()) or "none"
                    raise PipelineInputError(f"{self.name}: no specialization constant named {key!r} "
                                             f"(known: {known})")
                constant_id = by_name[key].spec_id
            elif isinstance(key, (int, np.integer)) and not isinstance(key, bool) and key >= 0:
                constant_id = int(key)
            else:
                raise PipelineInputError(f"{self.name}: specialization key {key!r} is not a constant_id or name")
            if constant_id not in reflected:
                known = ", ".join(f"{s.spec_id} ({s.name}: {s.type})" for s in reflected.values()) or "none"
                raise PipelineInputError(f"{self.name}: the shader has no specialization constant with "
                                         f"constant_id {constant_id} (known: {known})")
            if any(p.constant_id == constant_id for p in packed):
                raise PipelineInputError(f"{self.name}: constant_id {constant_id} is given twice")
            packed.append(SpecValue(constant_id, pack_spec_value(key, value, reflected[constant_id].type)))
        return packed

    def _spec_value(self, constant_id: int):
        for packed in self.specialization:
            if packed.constant_id == constant_id:
                return int.from_bytes(packed.data[:4], "little")
        return None

    def _resolve_local_size(self, local_size) -> tuple[int, int, int] | None:
        if local_size is not None:
            if isinstance(local_size, (int, np.integer)):
                local_size = (local_size,)
            if not isinstance(local_size, (tuple, list)) or not 1 <= len(local_size) <= 3:
                raise VulkanTypeError(f"{self.name}: local_size must be 1 to 3 integers, got {local_size!r}")
            return tuple(checks.integer(s, "local_size") for s in local_size) + (1,) * (3 - len(local_size))
        if self.reflection.local_size is None:
            # VUID-RuntimeSpirv-LocalSize: a compute entry point must declare its workgroup size.
            raise PipelineInputError(f"{self.name}: the module declares no workgroup size (LocalSize, LocalSizeId "
                                     "or a WorkgroupSize constant)")
        size = list(self.reflection.local_size)
        for axis, spec_id in enumerate(self.reflection.local_size_spec_ids or ()):
            if spec_id is not None and self._spec_value(spec_id) is not None:
                size[axis] = self._spec_value(spec_id)
        if len(size) != 3 or any(isinstance(s, bool) or not isinstance(s, int) for s in size):
            return None  # a size reflection could not resolve to three integers: no limit check
        return tuple(size)

    def _check_limits(self):
        physical, limits = self.device.physical, self.device.physical.limits
        subgroup = physical.subgroup_properties()
        needed = []
        if self.reflection.uses_local_size_id and not self.device.enabled_features.get("maintenance4"):
            # VUID-RuntimeSpirv-LocalSizeId-06434: local_size_*_id compiles to LocalSizeId for SPIR-V 1.6.
            needed.append("maintenance4")
        if self.required_subgroup_size is not None or self.full_subgroups:
            if self.required_subgroup_size is not None and not self.device.enabled_features.get("subgroupSizeControl"):
                needed.append("subgroupSizeControl")
            if self.full_subgroups and not self.device.enabled_features.get("computeFullSubgroups"):
                needed.append("computeFullSubgroups")
        if needed:
            raise MissingFeatureError(physical.name, missing_features=needed,
                                      reason=f"{self.name}: enable them when creating the Device")
        if self.required_subgroup_size is not None:
            size = self.required_subgroup_size
            low, high = subgroup.get("minSubgroupSize", 0), subgroup.get("maxSubgroupSize", 0)
            if size <= 0 or size & (size - 1) or not low <= size <= high:
                raise LimitError(f"{self.name}: required_subgroup_size {size} is not a power of two in "
                                 f"[minSubgroupSize {low}, maxSubgroupSize {high}]")
            if not subgroup.get("requiredSubgroupSizeStages", 0) & SHADER_STAGE_COMPUTE:
                raise LimitError(f"{self.name}: {physical.name} cannot require a subgroup size for compute shaders")
        if self.local_size is None:
            return
        max_size = [int(v) for v in limits.maxComputeWorkGroupSize]
        invocations = math.prod(self.local_size)
        for axis, (size, limit) in enumerate(zip(self.local_size, max_size)):
            if size < 1 or size > limit:
                raise LimitError(f"{self.name}: workgroup size {self.local_size} has {'xyz'[axis]} = {size}, outside "
                                 f"[1, maxComputeWorkGroupSize[{axis}] = {limit}]")
        if invocations > int(limits.maxComputeWorkGroupInvocations):
            raise LimitError(f"{self.name}: workgroup size {self.local_size} has {invocations} invocations, above "
                             f"maxComputeWorkGroupInvocations ({int(limits.maxComputeWorkGroupInvocations)})")
        if self.required_subgroup_size is not None:
            subgroups = math.ceil(invocations / self.required_subgroup_size)
            if subgroups > subgroup.get("maxComputeWorkgroupSubgroups", subgroups):
                raise LimitError(f"{self.name}: {subgroups} subgroups of {self.required_subgroup_size} exceed "
                                 f"maxComputeWorkgroupSubgroups ({subgroup['maxComputeWorkgroupSubgroups']})")
        if self.full_subgroups:
            size = self.required_subgroup_size or subgroup.get("maxSubgroupSize", subgroup["subgroupSize"])
            if self.local_size[0] % size:
                raise LimitError(f"{self.name}: full_subgroups needs local_size_x ({self.local_size[0]}) to be a "
                                 f"multiple of the subgroup size {size}")

    # -- creation --------------------------------------------------------------------------------------------
    def _create(self, spirv: bytes, entry_point: str):
        device = self.device.handle
        keep = []
        binding_structs = vk.ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": b, "descriptorType": kind, "descriptorCount": 1, "stageFlags": SHADER_STAGE_COMPUTE}
            for b, kind in self.bindings.items()]) if self.bindings else vk.ffi.NULL
        set_layout_info = vk.ffi.new("VkDescriptorSetLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            "bindingCount": len(self.bindings), "pBindings": binding_structs})
        set_layout = vk.ffi.new("VkDescriptorSetLayout*")
        check(vk.lib.vkCreateDescriptorSetLayout(device, set_layout_info, vk.ffi.NULL, set_layout),
              "vkCreateDescriptorSetLayout")
        self.set_layout = set_layout[0]
        push_range = vk.ffi.new("VkPushConstantRange*", {
            "stageFlags": SHADER_STAGE_COMPUTE, "offset": 0, "size": self.push_constant_size})
        layout_info = vk.ffi.new("VkPipelineLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1,
            "pSetLayouts": set_layout, "pushConstantRangeCount": 1 if self.push_constant_size else 0,
            "pPushConstantRanges": push_range})
        layout = vk.ffi.new("VkPipelineLayout*")
        check(vk.lib.vkCreatePipelineLayout(device, layout_info, vk.ffi.NULL, layout), "vkCreatePipelineLayout")
        self.layout = layout[0]

        code = vk.ffi.new("uint32_t[]", len(spirv) // 4)
        vk.ffi.memmove(code, spirv, len(spirv))
        module_info = vk.ffi.new("VkShaderModuleCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, "codeSize": len(spirv), "pCode": code})
        module = vk.ffi.new("VkShaderModule*")
        check(vk.lib.vkCreateShaderModule(device, module_info, vk.ffi.NULL, module), f"vkCreateShaderModule ({self.name})")
        try:
            spec_info = vk.ffi.NULL
            if self.specialization:
                entries, data, offset = [], b"", 0
                for packed in self.specialization:
                    entries.append({"constantID": packed.constant_id, "offset": offset, "size": len(packed.data)})
                    data += packed.data
                    offset += len(packed.data)
                entry_array = vk.ffi.new("VkSpecializationMapEntry[]", entries)
                data_buffer = vk.ffi.new("char[]", data)
                spec_info = vk.ffi.new("VkSpecializationInfo*", {
                    "mapEntryCount": len(entries), "pMapEntries": entry_array, "dataSize": len(data),
                    "pData": data_buffer})
                keep += [entry_array, data_buffer]
            stage_next = vk.ffi.NULL
            flags = 0
            if self.required_subgroup_size is not None:
                stage_next = vk.ffi.new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo*", {
                    "sType": REQUIRED_SUBGROUP_SIZE_STYPE, "requiredSubgroupSize": self.required_subgroup_size})
            if self.full_subgroups:
                flags |= STAGE_REQUIRE_FULL_SUBGROUPS
            entry_name = vk.ffi.new("char[]", entry_point.encode())
            pipeline_info = vk.ffi.new("VkComputePipelineCreateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                "pNext": robustness.pipeline_info(self.buffer_robustness, keep),
                "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "pNext": stage_next,
                          "flags": flags, "stage": SHADER_STAGE_COMPUTE, "module": module[0], "pName": entry_name,
                          "pSpecializationInfo": spec_info},
                "layout": self.layout, "basePipelineIndex": -1})
            pipeline = vk.ffi.new("VkPipeline*")
            check(vk.lib.vkCreateComputePipelines(device, self.device.pipeline_cache_handle, 1, pipeline_info,
                                                  vk.ffi.NULL, pipeline), f"vkCreateComputePipelines ({self.name})")
            self.handle = pipeline[0]
            self.device.mark_pipeline_cache_dirty()
            del keep
        finally:
            vk.lib.vkDestroyShaderModule(device, module[0], vk.ffi.NULL)

    def close(self):
        device = self.device.handle
        if device is not None:
            if self.handle is not None:
                vk.lib.vkDestroyPipeline(device, self.handle, vk.ffi.NULL)
            if self.layout is not None:
                vk.lib.vkDestroyPipelineLayout(device, self.layout, vk.ffi.NULL)
            if self.set_layout is not None:
                vk.lib.vkDestroyDescriptorSetLayout(device, self.set_layout, vk.ffi.NULL)
        self.handle = self.layout = self.set_layout = None
        self.device._untrack(self)

    @property
    def closed(self) -> bool:
        return self.handle is None

    def __repr__(self):
        return f"<ComputePipeline {self.name} local_size={self.local_size} bindings={list(self.bindings)}>"


#: The most pipelines created at once: the NVIDIA driver compiles them concurrently (H100, driver 580.159.04:
#: 12 coopmat2 GEMM pipelines took 8.7 s one after another, 1.0 s on 4 threads, 0.7 s on 16).
MAX_CONCURRENT_PIPELINES = 16


def create_concurrently(makers, workers: int | None = None) -> list:
    """Call each of ``makers`` (callables that create pipelines through a device) on a pool of threads and
    return, in order, each one's result or the exception it raised. The ``vulkan`` package's calls release the
    GIL, so the driver's compiles overlap; a pipeline cache is internally synchronized (Vulkan 10.7 "Pipeline
    Cache"), and every Python-side structure a maker touches is created per call or guarded by the GIL."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    makers = list(makers)
    workers = workers or min(MAX_CONCURRENT_PIPELINES, os.cpu_count() or 1)

    def call(maker):
        try:
            return maker()
        except Exception as error:  # noqa: BLE001 - handed back: the caller reports it where it matters
            return error

    if workers <= 1 or len(makers) <= 1:
        return [call(m) for m in makers]
    with ThreadPoolExecutor(max_workers=min(workers, len(makers)), thread_name_prefix="vkcoop-pipeline") as pool:
        return list(pool.map(call, makers))
