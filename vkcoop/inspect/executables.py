"""What ``VK_KHR_pipeline_executable_properties`` reports for a pipeline: its executables, their statistics and
internal representations, where the driver exposes the extension.

The query needs the ``pipelineExecutableInfo`` feature on the device and a pipeline created with
``VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR`` (and ``..._CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR``). vkcoop's
own :class:`vkcoop.vk.Device` has neither switch, so :class:`CaptureDevice` is a second, private VkDevice on the
same physical device with exactly the features the vkcoop device enabled, plus that one. It re-creates a
vkcoop pipeline from the same SPIR-V, bindings, push-constant size, specialization data and subgroup options
(:meth:`CaptureDevice.executables`), with the capture flags, and reads the reports.
"""
from __future__ import annotations

import contextlib

import vulkan as vk

from ..vk import coopmat2_ffi as side
from ..vk import features as feature_registry
from ..vk.chain import StructChain, ffi_for  # the runtime's own pNext chain builder, reused as is

EXTENSION = "VK_KHR_pipeline_executable_properties"
CAPTURE_STATISTICS = 0x40                  # VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
CAPTURE_INTERNAL_REPRESENTATIONS = 0x80    # VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
_FEATURES_STYPE = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR
_REQUIRED_SUBGROUP_SIZE_STYPE = 1000225001
_STAGE_REQUIRE_FULL_SUBGROUPS = 0x2
_COMPUTE = 0x20
#: VkPipelineExecutableStatisticFormatKHR -> member of VkPipelineExecutableStatisticValueKHR
_VALUE_MEMBER = {0: "b32", 1: "i64", 2: "u64", 3: "f64"}


class ExecutablePropertiesUnavailable(RuntimeError):
    """The device lacks the extension or its feature."""


def _check(result: int, what: str) -> None:
    if result not in (0, 5):  # VK_SUCCESS, VK_INCOMPLETE
        raise RuntimeError(f"{what} failed with VkResult {result}")


def statistic_value(statistic):
    """The value of one VkPipelineExecutableStatisticKHR as a Python bool, int or float."""
    member = _VALUE_MEMBER.get(int(statistic.format))
    if member is None:
        return None
    value = getattr(statistic.value, member)
    return bool(value) if member == "b32" else (float(value) if member == "f64" else int(value))


def _text(char_array) -> str:
    return vk.ffi.string(char_array).decode("utf-8", "replace")


class CaptureDevice:
    """A VkDevice with ``pipelineExecutableInfo`` and the given vkcoop feature names enabled."""

    def __init__(self, physical, *, extensions=(), features=(), capture: bool = True):
        self.physical, self.handle, self.capture = physical, None, capture
        if capture:
            if EXTENSION not in physical.extensions:
                raise ExecutablePropertiesUnavailable(f"{physical.name} does not expose {EXTENSION}")
            probe = vk.ffi.new("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*", {"sType": _FEATURES_STYPE})
            features2 = vk.ffi.new("VkPhysicalDeviceFeatures2*", {"sType": 1000059000, "pNext": probe})
            vk.lib.vkGetPhysicalDeviceFeatures2(physical.handle, features2)
            if not probe.pipelineExecutableInfo:
                raise ExecutablePropertiesUnavailable(f"{physical.name} lists {EXTENSION} without "
                                                      "pipelineExecutableInfo")
        self._create(list(extensions), list(features))

    def _create(self, extensions: list[str], features: list[str]) -> None:
        structs = list(dict.fromkeys(feature_registry.struct_of(f) for f in features
                                     if feature_registry.struct_of(f) != "VkPhysicalDeviceFeatures"))
        chain = StructChain("VkPhysicalDeviceFeatures2", *structs)
        for name in features:
            struct = feature_registry.struct_of(name)
            setattr(chain.head.features if struct == "VkPhysicalDeviceFeatures" else chain[struct], name, 1)
        wanted = vk.ffi.new("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*",
                            {"sType": _FEATURES_STYPE, "pipelineExecutableInfo": 1})
        if self.capture:
            last = chain.names[-1]
            chain[last].pNext = ffi_for(last).cast("void*", side.address_of(wanted))
        implied = [feature_registry.extension_of(f) for f in features]
        names = feature_registry.with_dependencies(extensions + [e for e in implied if e]
                                                   + ([EXTENSION] if self.capture else []))
        name_buffers = [vk.ffi.new("char[]", n.encode()) for n in names]
        priorities = vk.ffi.new("float[]", [1.0])
        queue = vk.ffi.new("VkDeviceQueueCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            "queueFamilyIndex": self.physical.compute_queue_family(), "queueCount": 1, "pQueuePriorities": priorities})
        info = vk.ffi.new("VkDeviceCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": chain.head, "queueCreateInfoCount": 1,
            "pQueueCreateInfos": queue, "enabledExtensionCount": len(names),
            "ppEnabledExtensionNames": vk.ffi.new("char*[]", name_buffers)})
        handle = vk.ffi.new("VkDevice*")
        _check(vk.lib.vkCreateDevice(self.physical.handle, info, vk.ffi.NULL, handle), "vkCreateDevice (capture)")
        self.handle = handle[0]

    def _function(self, name: str):
        address = vk.lib.vkGetDeviceProcAddr(self.handle, name.encode())
        if address == vk.ffi.NULL:
            raise ExecutablePropertiesUnavailable(f"{self.physical.name}: vkGetDeviceProcAddr({name}) is NULL")
        return vk.ffi.cast(f"PFN_{name}", address)

    def _pipeline(self, spirv: bytes, pipeline, keep: list):
        """vkCreateComputePipelines (with the capture flags when ``capture``); returns (pipeline, layout, set
        layout)."""
        bindings = vk.ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": b, "descriptorType": kind, "descriptorCount": 1, "stageFlags": _COMPUTE}
            for b, kind in pipeline.bindings.items()]) if pipeline.bindings else vk.ffi.NULL
        set_layout = vk.ffi.new("VkDescriptorSetLayout*")
        _check(vk.lib.vkCreateDescriptorSetLayout(self.handle, vk.ffi.new("VkDescriptorSetLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": len(pipeline.bindings),
            "pBindings": bindings}), vk.ffi.NULL, set_layout), "vkCreateDescriptorSetLayout")
        push = vk.ffi.new("VkPushConstantRange*", {"stageFlags": _COMPUTE, "size": pipeline.push_constant_size})
        layout = vk.ffi.new("VkPipelineLayout*")
        _check(vk.lib.vkCreatePipelineLayout(self.handle, vk.ffi.new("VkPipelineLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1, "pSetLayouts": set_layout,
            "pushConstantRangeCount": 1 if pipeline.push_constant_size else 0, "pPushConstantRanges": push}),
            vk.ffi.NULL, layout), "vkCreatePipelineLayout")
        code = vk.ffi.new("uint32_t[]", len(spirv) // 4)
        vk.ffi.memmove(code, spirv, len(spirv))
        module = vk.ffi.new("VkShaderModule*")
        _check(vk.lib.vkCreateShaderModule(self.handle, vk.ffi.new("VkShaderModuleCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, "codeSize": len(spirv), "pCode": code}),
            vk.ffi.NULL, module), "vkCreateShaderModule")
        entries = [{"constantID": s.constant_id, "offset": sum(len(p.data) for p in pipeline.specialization[:i]),
                    "size": len(s.data)} for i, s in enumerate(pipeline.specialization)]
        data = b"".join(s.data for s in pipeline.specialization)
        keep += [vk.ffi.new("VkSpecializationMapEntry[]", entries or 1), vk.ffi.new("char[]", data or b"\0")]
        spec = vk.ffi.new("VkSpecializationInfo*", {"mapEntryCount": len(entries), "pMapEntries": keep[-2],
                                                     "dataSize": len(data), "pData": keep[-1]})
        subgroup = vk.ffi.NULL
        if pipeline.required_subgroup_size is not None:
            subgroup = vk.ffi.new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo*", {
                "sType": _REQUIRED_SUBGROUP_SIZE_STYPE, "requiredSubgroupSize": pipeline.required_subgroup_size})
            keep.append(subgroup)
        handle = vk.ffi.new("VkPipeline*")
        flags = CAPTURE_STATISTICS | CAPTURE_INTERNAL_REPRESENTATIONS if self.capture else 0
        create_info = vk.ffi.new("VkComputePipelineCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, "flags": flags, "layout": layout[0],
            "basePipelineIndex": -1,
            "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "pNext": subgroup,
                      "flags": _STAGE_REQUIRE_FULL_SUBGROUPS if pipeline.full_subgroups else 0, "stage": _COMPUTE,
                      "module": module[0], "pName": keep[0], "pSpecializationInfo": spec}})
        result = vk.lib.vkCreateComputePipelines(self.handle, vk.ffi.NULL, 1, create_info, vk.ffi.NULL, handle)
        vk.lib.vkDestroyShaderModule(self.handle, module[0], vk.ffi.NULL)
        _check(result, "vkCreateComputePipelines (capture)")
        return handle[0], layout[0], set_layout[0]

    @contextlib.contextmanager
    def replay(self, spirv: bytes, pipeline):
        """Re-create ``pipeline`` (a :class:`vkcoop.vk.ComputePipeline`) from ``spirv`` on this device (with the
        capture flags when ``capture``); yields the VkPipeline handle and destroys it afterwards."""
        keep = [vk.ffi.new("char[]", b"main")]
        handle, layout, set_layout = self._pipeline(bytes(spirv), pipeline, keep)
        try:
            yield handle
        finally:
            vk.lib.vkDestroyPipeline(self.handle, handle, vk.ffi.NULL)
            vk.lib.vkDestroyPipelineLayout(self.handle, layout, vk.ffi.NULL)
            vk.lib.vkDestroyDescriptorSetLayout(self.handle, set_layout, vk.ffi.NULL)

    def executables(self, spirv: bytes, pipeline) -> list[dict]:
        """One dict per executable of the re-created pipeline: name, description, stages, subgroup_size,
        statistics, internal_representations."""
        with self.replay(spirv, pipeline) as handle:
            return self._read(handle)

    def _read(self, pipeline) -> list[dict]:
        get_properties = self._function("vkGetPipelineExecutablePropertiesKHR")
        info = vk.ffi.new("VkPipelineInfoKHR*", {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, "pipeline": pipeline})
        count = vk.ffi.new("uint32_t*")
        _check(get_properties(self.handle, info, count, vk.ffi.NULL), "vkGetPipelineExecutablePropertiesKHR")
        properties = vk.ffi.new("VkPipelineExecutablePropertiesKHR[]", [
            {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR}] * count[0])
        _check(get_properties(self.handle, info, count, properties), "vkGetPipelineExecutablePropertiesKHR")
        result = []
        for index in range(count[0]):
            executable = vk.ffi.new("VkPipelineExecutableInfoKHR*", {
                "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, "pipeline": pipeline,
                "executableIndex": index})
            result.append({"name": _text(properties[index].name), "description": _text(properties[index].description),
                           "stages": int(properties[index].stages),
                           "subgroup_size": int(properties[index].subgroupSize),
                           "statistics": self._statistics(executable),
                           "internal_representations": self._representations(executable)})
        return result

    def _statistics(self, executable) -> list[dict]:
        get = self._function("vkGetPipelineExecutableStatisticsKHR")
        count = vk.ffi.new("uint32_t*")
        _check(get(self.handle, executable, count, vk.ffi.NULL), "vkGetPipelineExecutableStatisticsKHR")
        items = vk.ffi.new("VkPipelineExecutableStatisticKHR[]", [
            {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR}] * max(1, count[0]))
        _check(get(self.handle, executable, count, items), "vkGetPipelineExecutableStatisticsKHR")
        return [{"name": _text(s.name), "description": _text(s.description), "value": statistic_value(s)}
                for s in items[0:count[0]]]

    def _representations(self, executable) -> list[dict]:
        get = self._function("vkGetPipelineExecutableInternalRepresentationsKHR")
        count = vk.ffi.new("uint32_t*")
        _check(get(self.handle, executable, count, vk.ffi.NULL), "vkGetPipelineExecutableInternalRepresentationsKHR")
        stype = vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR
        items = vk.ffi.new("VkPipelineExecutableInternalRepresentationKHR[]", [{"sType": stype}] * max(1, count[0]))
        _check(get(self.handle, executable, count, items), "vkGetPipelineExecutableInternalRepresentationsKHR")
        buffers = [vk.ffi.new("char[]", max(1, int(items[i].dataSize))) for i in range(count[0])]
        for i, buffer in enumerate(buffers):
            items[i].pData = buffer
        _check(get(self.handle, executable, count, items), "vkGetPipelineExecutableInternalRepresentationsKHR")
        out = []
        for i in range(count[0]):
            raw = bytes(vk.ffi.buffer(buffers[i], int(items[i].dataSize)))
            text = raw.rstrip(b"\0").decode("utf-8", "replace") if items[i].isText else None
            out.append({"name": _text(items[i].name), "description": _text(items[i].description),
                        "is_text": bool(items[i].isText), "bytes": len(raw), "text": text})
        return out

    def close(self) -> None:
        if self.handle is not None:
            vk.lib.vkDestroyDevice(self.handle, vk.ffi.NULL)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pipeline_executables(physical, spirv: bytes, pipeline, *, extensions=(), features=()) -> dict:
    """``{"available": True, "executables": [...]}`` or ``{"available": False, "reason": "..."}``."""
    try:
        with CaptureDevice(physical, extensions=extensions, features=features) as capture:
            return {"available": True, "executables": capture.executables(spirv, pipeline)}
    except ExecutablePropertiesUnavailable as error:
        return {"available": False, "reason": str(error)}
