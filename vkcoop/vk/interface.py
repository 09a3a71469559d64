"""A SPIR-V module checked before the driver sees it, and a pipeline's options checked against its interface.

The driver trusts the module and the layout completely: a truncated module, an entry point it does not have or
a descriptor set layout with fewer bindings than the shader uses can crash it (lavapipe and the validation layer
segfaulted on all three). So every module is parsed by :func:`spirv_tools.reflect` (which rejects malformed
binaries), validated by spirv-val wherever a toolchain exists, and the pipeline's entry point, bindings and
push-constant range are compared with what reflection found (Vulkan spec 10.1 "Shader Modules", 14.2.3
"Pipeline Layouts", VUID-VkComputePipelineCreateInfo-layout-07987/07988/07990).
"""
from __future__ import annotations

import functools
import hashlib

import spirv_tools
import vulkan as vk

from .errors import LimitError, MissingFeatureError, PipelineInputError, VulkanTypeError

DESCRIPTOR_KINDS = {"storage-buffer": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    "uniform-buffer": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER}
_OPTION_KINDS = {"storage": "storage-buffer", "uniform": "uniform-buffer"}
# Device features that make spirv-val accept the layouts they allow.
_VALIDATOR_FLAGS = {"scalarBlockLayout": "--scalar-block-layout",
                    "uniformBufferStandardLayout": "--uniform-buffer-standard-layout",
                    "workgroupMemoryExplicitLayoutScalarBlockLayout": "--workgroup-scalar-block-layout"}
_validated: set[tuple[bytes, tuple[str, ...]]] = set()


def reflect_module(spirv, name: str):
    """The module's reflection; a PipelineInputError for anything that is not a well-formed SPIR-V module."""
    if not isinstance(spirv, (bytes, bytearray, memoryview)):
        raise VulkanTypeError(f"{name}: spirv must be SPIR-V bytes, got {type(spirv).__name__}")
    try:
        return spirv_tools.reflect(bytes(spirv))
    except spirv_tools.SpirvFormatError as error:
        raise PipelineInputError(f"{name}: not a valid SPIR-V module: {error}") from None


def check_entry_point(reflection, entry_point, name: str) -> None:
    if not isinstance(entry_point, str):
        raise VulkanTypeError(f"{name}: entry_point must be a str, got {type(entry_point).__name__}")
    # "ExecutionModel5" is GLCompute as reflection names it without a grammar.
    compute = [e.name for e in reflection.entry_points if e.execution_model in ("GLCompute", "ExecutionModel5")]
    if entry_point not in compute:
        raise PipelineInputError(f"{name}: entry_point {entry_point!r} is not a compute entry point of the module "
                                 f"(it has {compute or 'none'})")


@functools.lru_cache(maxsize=1)
def _toolchain():
    try:
        return spirv_tools.find_toolchain()
    except spirv_tools.ToolchainError:
        return None


def validate_module(spirv: bytes, setting, features: dict, name: str) -> bool:
    """spirv-val the module (once per module and flag set per process). ``setting``: None runs it where a
    toolchain exists, True requires one, False skips it. Returns whether it ran."""
    if setting is False:
        return False
    if _toolchain() is None:
        if setting:
            raise MissingFeatureError("this host", missing_features=["spirv-val"],
                                      reason=f"{name}: validate_spirv=True needs a shader toolchain")
        return False
    options = tuple(flag for feature, flag in _VALIDATOR_FLAGS.items() if features.get(feature))
    key = (hashlib.sha256(spirv).digest(), options)
    if key not in _validated:
        try:
            spirv_tools.validate(spirv, "vulkan1.3", options)
        except spirv_tools.SpirvValidationError as error:
            raise PipelineInputError(f"{name}: spirv-val rejects the module: {error}") from None
        _validated.add(key)
    return True


def resolve_bindings(reflection, option, name: str) -> dict[int, int]:
    """binding number -> VkDescriptorType of descriptor set 0, from reflection; ``option`` (a count, a list of
    binding numbers or {binding: "storage" | "uniform"}) must describe the same bindings."""
    reflected = {}
    for binding in reflection.bindings:
        if binding.set != 0:
            raise PipelineInputError(f"{name}: binding {binding.name} uses descriptor set {binding.set}; "
                                     "vkcoop pipelines use set 0 only")
        if binding.kind not in DESCRIPTOR_KINDS or binding.count != 1:
            raise PipelineInputError(f"{name}: binding {binding.binding} ({binding.name}) is a {binding.kind} "
                                     f"with {binding.count or 'a runtime array of'} descriptors; only single "
                                     "buffers are supported")
        reflected[binding.binding] = binding.kind
    if option is not None:
        _check_binding_option(option, reflected, name)
    return {b: DESCRIPTOR_KINDS[kind] for b, kind in sorted(reflected.items())}


def _check_binding_option(option, reflected: dict, name: str) -> None:
    if isinstance(option, bool) or not isinstance(option, (int, list, tuple, range, dict)):
        raise VulkanTypeError(f"{name}: bindings must be a count, a list of binding numbers or a dict, got "
                              f"{type(option).__name__}")
    given = dict(option) if isinstance(option, dict) else {b: None for b in (
        range(option) if isinstance(option, int) else option)}
    if set(given) != set(reflected):
        raise PipelineInputError(f"{name}: bindings={option!r} describes bindings {sorted(given)}, but the shader "
                                 f"uses {sorted(reflected)}")
    for binding, kind in given.items():
        if kind is not None and _OPTION_KINDS.get(kind) != reflected[binding]:
            raise PipelineInputError(f"{name}: binding {binding} is a {reflected[binding]} in the shader; "
                                     f"bindings= says {kind!r}")


def resolve_push_constant_size(reflection, size, limit: int, name: str) -> int:
    """The push-constant range to create: ``size`` if given (it must cover the shader's block), else the block's
    size rounded up to 4 bytes (the device maximum where the block's size is unknown), else 0."""
    block = reflection.push_constant_size
    if size is None:
        if not reflection.push_constant_blocks:
            return 0
        size = limit if block is None else -(-block // 4) * 4
    elif isinstance(size, bool) or not isinstance(size, int):
        raise VulkanTypeError(f"{name}: push_constant_size must be an int, got {type(size).__name__}")
    elif size < 0 or size % 4:
        raise PipelineInputError(f"{name}: push_constant_size {size} must be a non-negative multiple of 4")
    elif block is not None and size < block:
        raise PipelineInputError(f"{name}: push_constant_size {size} is smaller than the shader's push-constant "
                                 f"block ({block} bytes)")
    if size > limit:
        raise LimitError(f"{name}: push_constant_size {size} exceeds maxPushConstantsSize ({limit})")
    return size
