"""What ``VK_KHR_pipeline_executable_properties`` reports for a pipeline: its executables, their statistics and
internal representations, where the driver exposes the extension.

The query needs the ``pipelineExecutableInfo`` feature on the device and a pipeline created with
``VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR`` (and ``..._CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR``). vkcoop's
own :class:`vkcoop.vk.Device` has neither switch, so :class:`CaptureDevice` is a private VkDevice on the same
physical device with exactly the extensions and features the vkcoop device enabled, plus that one. It re-creates
a pipeline from a :class:`PipelineRecipe` (the SPIR-V, bindings, push-constant size, specialization data and
subgroup options of a vkcoop pipeline, JSON-able so that another process can do it) with the capture flags, and
reads the reports.

``vkcoop inspect`` runs this in a process of its own (:mod:`vkcoop.inspect.query`), after the pipelines were
built and the disk cache written: a crash inside the driver then costs only this report. ``progress`` (a callable
``progress(call, context)``) is told the name of every Vulkan call just before it is made, so the last name
written says where a crash happened.

Lifetimes: cffi does not keep a cdata alive because a struct field points at it (``ffi.new("S*", {"p":
ffi.new(...)})`` frees the inner object at once), so every array or struct a create-info points at is held in a
local name or a ``keep`` list until the call that reads it has returned.
"""
from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass, field
from typing import NamedTuple

import vulkan as vk

from ..vk import coopmat2_ffi as side
from ..vk import features as feature_registry
from ..vk import robustness
from ..vk.chain import StructChain, ffi_for  # the runtime's own pNext chain builder, reused as is

EXTENSION = "VK_KHR_pipeline_executable_properties"
CAPTURE_STATISTICS = 0x40                  # VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
CAPTURE_INTERNAL_REPRESENTATIONS = 0x80    # VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
_FEATURES_STYPE = vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR
_FEATURES2_STYPE = 1000059000              # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2
_REQUIRED_SUBGROUP_SIZE_STYPE = 1000225001
_STAGE_REQUIRE_FULL_SUBGROUPS = 0x2
_COMPUTE = 0x20
#: VkPipelineExecutableStatisticFormatKHR -> member of VkPipelineExecutableStatisticValueKHR
_VALUE_MEMBER = {0: "b32", 1: "i64", 2: "u64", 3: "f64"}


class ExecutablePropertiesUnavailable(RuntimeError):
    """The device lacks the extension or its feature."""


class SpecEntry(NamedTuple):
    """One specialization constant's bytes (the fields of :class:`vkcoop.vk.packing.SpecValue`)."""
    constant_id: int
    data: bytes


@dataclass
class PipelineRecipe:
    """What re-creating a vkcoop compute pipeline on another device needs."""
    label: str
    spirv: bytes
    bindings: dict = field(default_factory=dict)          # binding -> VkDescriptorType
    push_constant_size: int = 0
    specialization: list = field(default_factory=list)    # [SpecEntry]
    required_subgroup_size: int | None = None
    full_subgroups: bool = False
    buffer_robustness: str = robustness.DRIVER_DEFAULT   # vkcoop.vk.robustness

    @classmethod
    def from_pipeline(cls, label: str, spirv: bytes, pipeline) -> PipelineRecipe:
        """From a :class:`vkcoop.vk.ComputePipeline` (or anything with its attributes)."""
        return cls(label, bytes(spirv), {int(b): int(k) for b, k in pipeline.bindings.items()},
                   int(pipeline.push_constant_size or 0),
                   [SpecEntry(int(s.constant_id), bytes(s.data)) for s in pipeline.specialization],
                   pipeline.required_subgroup_size, bool(pipeline.full_subgroups),
                   getattr(pipeline, "buffer_robustness", robustness.DRIVER_DEFAULT))

    def to_dict(self) -> dict:
        return {"label": self.label, "spirv": base64.b64encode(self.spirv).decode("ascii"),
                "bindings": [[b, k] for b, k in self.bindings.items()], "push_constant_size": self.push_constant_size,
                "specialization": [[s.constant_id, s.data.hex()] for s in self.specialization],
                "required_subgroup_size": self.required_subgroup_size, "full_subgroups": self.full_subgroups,
                "buffer_robustness": self.buffer_robustness}

    @classmethod
    def from_dict(cls, data: dict) -> PipelineRecipe:
        return cls(data["label"], base64.b64decode(data["spirv"]), {int(b): int(k) for b, k in data["bindings"]},
                   int(data["push_constant_size"]),
                   [SpecEntry(int(i), bytes.fromhex(h)) for i, h in data["specialization"]],
                   data["required_subgroup_size"], bool(data["full_subgroups"]),
                   data.get("buffer_robustness", robustness.DRIVER_DEFAULT))


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


def _quiet(call: str, context: str = "") -> None:
    """The default progress: none."""


class CaptureDevice:
    """A VkDevice with ``pipelineExecutableInfo`` and the given vkcoop feature names enabled."""

    def __init__(self, physical, *, extensions=(), features=(), capture: bool = True, progress=None):
        self.physical, self.handle, self.capture = physical, None, capture
        self.progress = progress or _quiet
        if capture:
            if EXTENSION not in physical.extensions:
                raise ExecutablePropertiesUnavailable(f"{physical.name} does not expose {EXTENSION}")
            probe = vk.ffi.new("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*", {"sType": _FEATURES_STYPE})
            features2 = vk.ffi.new("VkPhysicalDeviceFeatures2*", {"sType": _FEATURES2_STYPE, "pNext": probe})
            self.progress("vkGetPhysicalDeviceFeatures2")
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
        name_array = vk.ffi.new("char*[]", name_buffers)   # held here: the create-info does not keep it alive
        priorities = vk.ffi.new("float[]", [1.0])
        queue = vk.ffi.new("VkDeviceQueueCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            "queueFamilyIndex": self.physical.compute_queue_family(), "queueCount": 1, "pQueuePriorities": priorities})
        info = vk.ffi.new("VkDeviceCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": chain.head, "queueCreateInfoCount": 1,
            "pQueueCreateInfos": queue, "enabledExtensionCount": len(names), "ppEnabledExtensionNames": name_array})
        handle = vk.ffi.new("VkDevice*")
        self.progress("vkCreateDevice")
        _check(vk.lib.vkCreateDevice(self.physical.handle, info, vk.ffi.NULL, handle), "vkCreateDevice (capture)")
        self.handle = handle[0]

    def _function(self, name: str):
        self.progress("vkGetDeviceProcAddr", name)
        address = vk.lib.vkGetDeviceProcAddr(self.handle, name.encode())
        if address == vk.ffi.NULL:
            raise ExecutablePropertiesUnavailable(f"{self.physical.name}: vkGetDeviceProcAddr({name}) is NULL")
        return vk.ffi.cast(f"PFN_{name}", address)

    def _layouts(self, pipeline, context: str):
        """(VkDescriptorSetLayout, VkPipelineLayout) for the pipeline's bindings and push-constant range."""
        bindings = vk.ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": b, "descriptorType": kind, "descriptorCount": 1, "stageFlags": _COMPUTE}
            for b, kind in pipeline.bindings.items()]) if pipeline.bindings else vk.ffi.NULL
        set_info = vk.ffi.new("VkDescriptorSetLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, "bindingCount": len(pipeline.bindings),
            "pBindings": bindings})
        set_layout = vk.ffi.new("VkDescriptorSetLayout*")
        self.progress("vkCreateDescriptorSetLayout", context)
        _check(vk.lib.vkCreateDescriptorSetLayout(self.handle, set_info, vk.ffi.NULL, set_layout),
               "vkCreateDescriptorSetLayout")
        push = vk.ffi.new("VkPushConstantRange*", {"stageFlags": _COMPUTE, "size": pipeline.push_constant_size})
        layout_info = vk.ffi.new("VkPipelineLayoutCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1, "pSetLayouts": set_layout,
            "pushConstantRangeCount": 1 if pipeline.push_constant_size else 0, "pPushConstantRanges": push})
        layout = vk.ffi.new("VkPipelineLayout*")
        self.progress("vkCreatePipelineLayout", context)
        result = vk.lib.vkCreatePipelineLayout(self.handle, layout_info, vk.ffi.NULL, layout)
        if result:
            self.progress("vkDestroyDescriptorSetLayout", context)
            vk.lib.vkDestroyDescriptorSetLayout(self.handle, set_layout[0], vk.ffi.NULL)
        _check(result, "vkCreatePipelineLayout")
        return set_layout[0], layout[0]

    def _module(self, spirv: bytes, context: str):
        code = vk.ffi.new("uint32_t[]", len(spirv) // 4)
        vk.ffi.memmove(code, spirv, len(spirv))
        info = vk.ffi.new("VkShaderModuleCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, "codeSize": len(spirv), "pCode": code})
        module = vk.ffi.new("VkShaderModule*")
        self.progress("vkCreateShaderModule", context)
        _check(vk.lib.vkCreateShaderModule(self.handle, info, vk.ffi.NULL, module), "vkCreateShaderModule")
        return module[0]

    @staticmethod
    def _specialization(pipeline, keep: list):
        entries, offset = [], 0
        for s in pipeline.specialization:
            entries.append({"constantID": s.constant_id, "offset": offset, "size": len(s.data)})
            offset += len(s.data)
        if not entries:
            return vk.ffi.NULL
        data = b"".join(s.data for s in pipeline.specialization)
        keep += [vk.ffi.new("VkSpecializationMapEntry[]", entries), vk.ffi.new("char[]", data)]
        spec = vk.ffi.new("VkSpecializationInfo*", {"mapEntryCount": len(entries), "pMapEntries": keep[-2],
                                                     "dataSize": len(data), "pData": keep[-1]})
        keep.append(spec)
        return spec

    def _pipeline(self, spirv: bytes, pipeline, layout, keep: list, context: str):
        """vkCreateComputePipelines (with the capture flags when ``capture``); returns the VkPipeline."""
        spec = self._specialization(pipeline, keep)
        subgroup = vk.ffi.NULL
        if pipeline.required_subgroup_size is not None:
            subgroup = vk.ffi.new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo*", {
                "sType": _REQUIRED_SUBGROUP_SIZE_STYPE, "requiredSubgroupSize": pipeline.required_subgroup_size})
            keep.append(subgroup)
        entry = vk.ffi.new("char[]", b"main")
        module = self._module(spirv, context)
        flags = (CAPTURE_STATISTICS | CAPTURE_INTERNAL_REPRESENTATIONS) if self.capture else 0
        robust = robustness.pipeline_info(pipeline.buffer_robustness, keep)
        create_info = vk.ffi.new("VkComputePipelineCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, "pNext": robust, "flags": flags,
            "layout": layout,
            "basePipelineIndex": -1,
            "stage": {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "pNext": subgroup,
                      "flags": _STAGE_REQUIRE_FULL_SUBGROUPS if pipeline.full_subgroups else 0, "stage": _COMPUTE,
                      "module": module, "pName": entry, "pSpecializationInfo": spec}})
        handle = vk.ffi.new("VkPipeline*")
        self.progress("vkCreateComputePipelines", context)
        result = vk.lib.vkCreateComputePipelines(self.handle, vk.ffi.NULL, 1, create_info, vk.ffi.NULL, handle)
        self.progress("vkDestroyShaderModule", context)
        vk.lib.vkDestroyShaderModule(self.handle, module, vk.ffi.NULL)
        _check(result, "vkCreateComputePipelines (capture)")
        return handle[0]

    @contextlib.contextmanager
    def replay(self, spirv: bytes, pipeline, label: str = ""):
        """Re-create ``pipeline`` (a :class:`PipelineRecipe` or a :class:`vkcoop.vk.ComputePipeline`) from
        ``spirv`` on this device (with the capture flags when ``capture``); yields the VkPipeline handle and
        destroys it afterwards."""
        context = f"pipeline {label}" if label else ""
        keep: list = []
        set_layout, layout = self._layouts(pipeline, context)
        handle = None
        try:
            handle = self._pipeline(bytes(spirv), pipeline, layout, keep, context)
            yield handle
        finally:
            if handle is not None:
                self.progress("vkDestroyPipeline", context)
                vk.lib.vkDestroyPipeline(self.handle, handle, vk.ffi.NULL)
            self.progress("vkDestroyPipelineLayout", context)
            vk.lib.vkDestroyPipelineLayout(self.handle, layout, vk.ffi.NULL)
            self.progress("vkDestroyDescriptorSetLayout", context)
            vk.lib.vkDestroyDescriptorSetLayout(self.handle, set_layout, vk.ffi.NULL)

    def executables(self, spirv: bytes, pipeline, label: str = "") -> list[dict]:
        """One dict per executable of the re-created pipeline: name, description, stages, subgroup_size,
        statistics, internal_representations."""
        with self.replay(spirv, pipeline, label) as handle:
            return self._read(handle, f"pipeline {label}" if label else "")

    def _enumerate(self, name: str, argument, struct: str, stype: int, context: str):
        """Vulkan's two calls for an array: its count (the array NULL), then the array of `struct`s (sType
        `stype`) filled. Returns (the function, the count, the array, at least one struct long)."""
        get = self._function(name)
        count = vk.ffi.new("uint32_t*")
        self.progress(name, context)
        _check(get(self.handle, argument, count, vk.ffi.NULL), name)
        items = vk.ffi.new(f"{struct}[]", [{"sType": stype}] * max(1, count[0]))
        self.progress(name, context)
        _check(get(self.handle, argument, count, items), name)
        return get, count, items

    def _read(self, pipeline, context: str = "") -> list[dict]:
        info = vk.ffi.new("VkPipelineInfoKHR*", {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, "pipeline": pipeline})
        _, count, properties = self._enumerate(
            "vkGetPipelineExecutablePropertiesKHR", info, "VkPipelineExecutablePropertiesKHR",
            vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR, context)
        result = []
        for index in range(count[0]):
            executable = vk.ffi.new("VkPipelineExecutableInfoKHR*", {
                "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, "pipeline": pipeline,
                "executableIndex": index})
            where = f"{context}, executable {index}".lstrip(", ")
            result.append({"name": _text(properties[index].name), "description": _text(properties[index].description),
                           "stages": int(properties[index].stages),
                           "subgroup_size": int(properties[index].subgroupSize),
                           "statistics": self._statistics(executable, where),
                           "internal_representations": self._representations(executable, where)})
        return result

    def _statistics(self, executable, context: str = "") -> list[dict]:
        _, count, items = self._enumerate(
            "vkGetPipelineExecutableStatisticsKHR", executable, "VkPipelineExecutableStatisticKHR",
            vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR, context)
        return [{"name": _text(s.name), "description": _text(s.description), "value": statistic_value(s)}
                for s in items[0:count[0]]]

    def _representations(self, executable, context: str = "") -> list[dict]:
        """The three-call pattern: the count, then each representation's dataSize (pData NULL), then the data
        into buffers of exactly that size."""
        name = "vkGetPipelineExecutableInternalRepresentationsKHR"
        get, count, items = self._enumerate(
            name, executable, "VkPipelineExecutableInternalRepresentationKHR",
            vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR, context)
        buffers = [vk.ffi.new("char[]", max(1, int(items[i].dataSize))) for i in range(count[0])]
        for i, buffer in enumerate(buffers):
            items[i].pData = buffer
        self.progress(name, context)
        _check(get(self.handle, executable, count, items), name)
        out = []
        for i in range(count[0]):
            raw = bytes(vk.ffi.buffer(buffers[i], int(items[i].dataSize)))
            text = raw.rstrip(b"\0").decode("utf-8", "replace") if items[i].isText else None
            out.append({"name": _text(items[i].name), "description": _text(items[i].description),
                        "is_text": bool(items[i].isText), "bytes": len(raw), "text": text})
        return out

    def close(self) -> None:
        if self.handle is not None:
            self.progress("vkDestroyDevice")
            vk.lib.vkDestroyDevice(self.handle, vk.ffi.NULL)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pipeline_executables(physical, spirv: bytes, pipeline, *, extensions=(), features=(), progress=None,
                         label: str = "") -> dict:
    """``{"available": True, "executables": [...]}`` or ``{"available": False, "reason": "..."}``."""
    try:
        with CaptureDevice(physical, extensions=extensions, features=features, progress=progress) as capture:
            return {"available": True, "executables": capture.executables(spirv, pipeline, label)}
    except ExecutablePropertiesUnavailable as error:
        return {"available": False, "reason": str(error)}
