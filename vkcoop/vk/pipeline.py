"""Compute pipelines from SPIR-V: descriptor set 0 of buffers, typed specialization constants, push constants,
required subgroup size, and workgroup-size checks against device limits before anything is created."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
import vulkan as vk

from .errors import LimitError, MissingFeatureError, PipelineInputError, check
from .resource import Resource

REQUIRED_SUBGROUP_SIZE_STYPE = 1000225001
STAGE_ALLOW_VARYING_SUBGROUP_SIZE = 0x1
STAGE_REQUIRE_FULL_SUBGROUPS = 0x2
SHADER_STAGE_COMPUTE = 0x20

# Specialization constant types the reflector reports -> numpy dtype of the bytes Vulkan reads.
# A bool constant is read as a VkBool32 (Vulkan spec, VkSpecializationMapEntry: "size ... sizeof(VkBool32)").
_SPEC_DTYPES = {
    "bool": np.dtype(np.uint32), "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16), "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32), "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
}
_STORAGE_CLASS_DESCRIPTORS = {
    "StorageBuffer": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "StorageClass12": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
    "Uniform": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, "StorageClass2": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
}


def reflect_spirv(spirv: bytes):
    """``spirv_tools.reflect`` when it is importable and works, else None (callers then need explicit inputs)."""
    try:
        import spirv_tools
        return spirv_tools.reflect(spirv)
    except ImportError:
        return None
    except Exception as error:  # a malformed module is the caller's bug: report it
        if type(error).__name__ == "SpirvFormatError":
            raise PipelineInputError(f"not a SPIR-V module: {error}") from None
        return None


@dataclass(frozen=True)
class SpecValue:
    """One packed specialization constant."""
    constant_id: int
    data: bytes


def _pack_spec_value(key, value, reflected_type: str | None) -> bytes:
    where = f"specialization constant {key!r}"
    if reflected_type is not None:
        if reflected_type not in _SPEC_DTYPES:
            raise PipelineInputError(f"{where} has SPIR-V type {reflected_type}, which cannot be specialized")
        if reflected_type == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise PipelineInputError(f"{where} is a bool in the shader; pass True or False, got {value!r}")
            return struct.pack("<I", int(bool(value)))
        dtype = _SPEC_DTYPES[reflected_type]
        if isinstance(value, (bool, np.bool_)):
            raise PipelineInputError(f"{where} is {reflected_type} in the shader; got the bool {value!r}")
        if dtype.kind in "iu":
            if isinstance(value, (float, np.floating)):
                raise PipelineInputError(f"{where} is {reflected_type} in the shader; got the float {value!r}")
            info = np.iinfo(dtype)
            if not info.min <= int(value) <= info.max:
                raise PipelineInputError(f"{where} = {value} is out of range for {reflected_type}")
            return np.array(int(value), dtype=dtype).tobytes()
        converted = np.array(value, dtype=dtype)
        if np.isfinite(value) and float(converted) != float(value):
            raise PipelineInputError(f"{where} = {value!r} is not exactly representable as {reflected_type}")
        return converted.tobytes()
    # No reflection: the value's own type decides.
    if isinstance(value, (bool, np.bool_)):
        return struct.pack("<I", int(bool(value)))
    if isinstance(value, np.generic):
        return value.tobytes()
    if isinstance(value, int):
        if -(1 << 31) <= value < 0:
            return struct.pack("<i", value)
        if 0 <= value < (1 << 32):
            return struct.pack("<I", value)  # same bits as int32 for values < 2**31
        raise PipelineInputError(f"{where} = {value} does not fit 32 bits; pass a np.int64/np.uint64")
    if isinstance(value, float):
        return struct.pack("<f", value)
    raise PipelineInputError(f"{where}: unsupported value {value!r} (use bool, int, float or a numpy scalar)")


def pack_push_constants(*values) -> bytes:
    """Pack scalars with natural alignment (each at a multiple of its size, as std430/scalar layout place
    scalars). Python ints become uint32 (int32 if negative), floats float32, bools uint32; numpy scalars keep
    their type (np.uint64 for device addresses)."""
    out = bytearray()
    for value in values:
        if isinstance(value, (bool, np.bool_)):
            data = struct.pack("<I", int(bool(value)))
        elif isinstance(value, np.generic):
            data = value.tobytes()
        elif isinstance(value, int):
            data = struct.pack("<i" if value < 0 else "<I", value)
        elif isinstance(value, float):
            data = struct.pack("<f", value)
        else:
            raise PipelineInputError(f"push constant {value!r}: use bool, int, float or a numpy scalar")
        padding = (-len(out)) % len(data)
        out += b"\0" * padding + data
    return bytes(out)


def push_constant_bytes(push) -> bytes:
    """bytes/bytearray/memoryview/numpy array/structured scalar/tuple of scalars -> bytes."""
    if push is None:
        return b""
    if isinstance(push, (bytes, bytearray, memoryview)):
        return bytes(push)
    if isinstance(push, np.ndarray):
        return np.ascontiguousarray(push).tobytes()
    if isinstance(push, np.void):
        return push.tobytes()
    if isinstance(push, (tuple, list)):
        return pack_push_constants(*push)
    raise PipelineInputError(f"push constants must be bytes, a numpy array or a tuple of scalars, got {push!r}")


class ComputePipeline(Resource):
    """A compute pipeline with one descriptor set (set 0) of buffer bindings and an optional push constant range.

    Reflection (``spirv_tools.reflect``) supplies the bindings, the specialization constants' ids, names and types,
    and the workgroup size; ``bindings=`` / ``local_size=`` override or replace it where it is unavailable.
    """

    def __init__(self, device, spirv: bytes, *, specialization: dict | None = None, bindings=None,
                 push_constant_size: int | None = None, local_size=None, required_subgroup_size: int | None = None,
                 full_subgroups: bool = False, entry_point: str = "main", name: str = "shader"):
        device.require_open()
        self.device, self.name = device, name
        self.handle = self.layout = self.set_layout = None
        if not isinstance(spirv, (bytes, bytearray, memoryview)) or len(spirv) % 4 or len(spirv) < 20:
            raise PipelineInputError(f"{name}: spirv must be SPIR-V bytes (a multiple of 4, at least 20 bytes)")
        spirv = bytes(spirv)
        self.reflection = reflect_spirv(spirv)
        self.bindings = self._resolve_bindings(bindings)
        self.specialization = self._pack_specialization(specialization or {})
        self.local_size = self._resolve_local_size(local_size)
        self.push_constant_size = self._resolve_push_constant_size(push_constant_size)
        self.required_subgroup_size = required_subgroup_size
        self.full_subgroups = full_subgroups
        self._check_limits()
        device._track(self)
        self._create(spirv, entry_point)

    # -- inputs ----------------------------------------------------------------------------------------------
    def _resolve_bindings(self, bindings) -> dict[int, int]:
        """binding number -> VkDescriptorType (set 0 only)."""
        if bindings is not None:
            if isinstance(bindings, int):
                bindings = range(bindings)
            if isinstance(bindings, dict):
                kinds = {"storage": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "uniform": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER}
                try:
                    return {int(b): kinds[k] for b, k in sorted(bindings.items())}
                except KeyError as error:
                    raise PipelineInputError(f"{self.name}: binding kind {error} is not 'storage' or 'uniform'") from None
            return {int(b): vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER for b in sorted(bindings)}
        if self.reflection is None:
            raise PipelineInputError(f"{self.name}: SPIR-V reflection is unavailable; pass bindings=[0, 1, ...]")
        result = {}
        for binding in self.reflection.bindings:
            if binding.set != 0:
                raise PipelineInputError(f"{self.name}: binding {binding.name} uses descriptor set {binding.set}; "
                                         "vkcoop pipelines use set 0 only")
            kind = _STORAGE_CLASS_DESCRIPTORS.get(binding.storage_class)
            if kind is None:
                raise PipelineInputError(f"{self.name}: binding {binding.name} has storage class "
                                         f"{binding.storage_class}; only buffers are supported")
            result[binding.binding] = kind
        return result

    def _pack_specialization(self, values: dict) -> list[SpecValue]:
        reflected = {s.spec_id: s for s in self.reflection.spec_constants} if self.reflection else None
        by_name = {s.name: s for s in self.reflection.spec_constants} if self.reflection else {}
        packed = []
        for key, value in values.items():
            if isinstance(key, str):
                if key not in by_name:
                    known = ", ".join(f"{s.name} (id {s.spec_id})" for s in by_name.values()) or "none"
                    raise PipelineInputError(f"{self.name}: no specialization constant named {key!r} "
                                             f"(known: {known})" if self.reflection else
                                             f"{self.name}: naming specialization constants needs reflection")
                constant_id = by_name[key].spec_id
            elif isinstance(key, (int, np.integer)) and not isinstance(key, bool) and key >= 0:
                constant_id = int(key)
            else:
                raise PipelineInputError(f"{self.name}: specialization key {key!r} is not a constant_id or name")
            reflected_type = None
            if reflected is not None:
                if constant_id not in reflected:
                    known = ", ".join(f"{s.spec_id} ({s.name}: {s.type})" for s in reflected.values()) or "none"
                    raise PipelineInputError(f"{self.name}: the shader has no specialization constant with "
                                             f"constant_id {constant_id} (known: {known})")
                reflected_type = reflected[constant_id].type
            if any(p.constant_id == constant_id for p in packed):
                raise PipelineInputError(f"{self.name}: constant_id {constant_id} is given twice")
            packed.append(SpecValue(constant_id, _pack_spec_value(key, value, reflected_type)))
        return packed

    def _spec_value(self, constant_id: int):
        for packed in self.specialization:
            if packed.constant_id == constant_id:
                return int.from_bytes(packed.data[:4], "little")
        return None

    def _resolve_local_size(self, local_size) -> tuple[int, int, int] | None:
        if local_size is not None:
            size = tuple(int(s) for s in local_size) + (1,) * (3 - len(tuple(local_size)))
            return size
        if self.reflection is None or self.reflection.local_size is None:
            return None
        size = list(self.reflection.local_size)
        for axis, spec_id in enumerate(self.reflection.local_size_spec_ids or ()):
            if spec_id is not None and self._spec_value(spec_id) is not None:
                size[axis] = self._spec_value(spec_id)
        if any(s is None for s in size):
            return None
        return tuple(int(s) for s in size)

    def _resolve_push_constant_size(self, size) -> int:
        limit = int(self.device.physical.limits.maxPushConstantsSize)
        if size is None:
            uses_push = bool(self.reflection and self.reflection.push_constant_blocks)
            # Without an explicit size, cover everything the device allows; dispatches may send less.
            return limit if uses_push else 0
        if size < 0 or size % 4:
            raise PipelineInputError(f"{self.name}: push_constant_size {size} must be a non-negative multiple of 4")
        if size > limit:
            raise LimitError(f"{self.name}: push_constant_size {size} exceeds maxPushConstantsSize ({limit})")
        return size

    def _check_limits(self):
        physical, limits = self.device.physical, self.device.physical.limits
        subgroup = physical.subgroup_properties()
        needed = []
        if (self.reflection is not None and getattr(self.reflection, "uses_local_size_id", False)
                and not self.device.enabled_features.get("maintenance4")):
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
                "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "pNext": stage_next,
                          "flags": flags, "stage": SHADER_STAGE_COMPUTE, "module": module[0], "pName": entry_name,
                          "pSpecializationInfo": spec_info},
                "layout": self.layout, "basePipelineIndex": -1})
            pipeline = vk.ffi.new("VkPipeline*")
            check(vk.lib.vkCreateComputePipelines(device, self.device.pipeline_cache_handle, 1, pipeline_info,
                                                  vk.ffi.NULL, pipeline), f"vkCreateComputePipelines ({self.name})")
            self.handle = pipeline[0]
            self.device._pipeline_cache_dirty = True
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
