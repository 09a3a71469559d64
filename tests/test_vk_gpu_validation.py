"""GPU-assisted validation (``validate="gpu"``): the mode's parsing, how an instance turns it on, and the planted
out-of-bounds read of shaders/test/planted_oob_read.comp, which it must report every time. On lavapipe (CI) the
layer instruments the shader and catches the read on the CPU; with the toolchain's 1.4.363 layer too, run through
the toolchain's own dynamic loader (its glibc is newer than Debian 12's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from support import child_env, toolchain_or_skip, vulkan_probe
from vkcoop.paths import shader_path
from vkcoop.vk import validation

vk = pytest.importorskip("vkcoop.vk")
HAVE_DEVICE, NO_DEVICE_REASON, _ = vulkan_probe()
SOURCE = "test/planted_oob_read.comp"
COUNT = 64   # src and dst hold COUNT uint32; offset 1 makes invocation COUNT - 1 read src[COUNT]


# --- the mode, without a device ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value, mode", [(False, "off"), (True, "api"), ("api", "api"), ("gpu", "gpu"),
                                         ("off", "off"), (np.bool_(True), "api")])
def test_validate_values_name_a_mode(value, mode):
    assert validation.mode_of(value) == mode


@pytest.mark.parametrize("value", ["no", "GPU", 1, 0.0, "gpu-av"])
def test_other_validate_values_are_type_errors(value):
    with pytest.raises(vk.VulkanTypeError, match=f"validate must be .*got {type(value).__name__}"):
        validation.mode_of(value)


@pytest.mark.parametrize("text, mode", [("1", "api"), ("yes", "api"), ("api", "api"), (" GPU ", "gpu"),
                                        ("gpu", "gpu"), ("0", "off"), ("", "off"), ("whatever", "off")])
def test_the_environment_names_a_mode(monkeypatch, text, mode):
    monkeypatch.setenv("VKCOOP_VALIDATE", text)
    assert validation.env_mode() == mode


def test_gpu_mode_tries_layer_settings_before_validation_features():
    both = {"VK_EXT_layer_settings", "VK_EXT_validation_features", "VK_EXT_debug_utils"}
    assert validation.instance_extension_choices("gpu", both) == [
        ["VK_EXT_debug_utils", "VK_EXT_layer_settings"], ["VK_EXT_debug_utils", "VK_EXT_validation_features"]]
    assert validation.instance_extension_choices("gpu", {"VK_EXT_validation_features"}) == [
        ["VK_EXT_debug_utils", "VK_EXT_validation_features"]]
    assert validation.instance_extension_choices("api", both) == [["VK_EXT_debug_utils"]]
    with pytest.raises(vk.LayerNotFoundError, match="GPU-assisted validation cannot be turned on"):
        validation.instance_extension_choices("gpu", {"VK_EXT_debug_report"})


def test_layer_settings_name_the_bounds_checks():
    keep = []
    info = validation.settings_chain("gpu", ["VK_EXT_debug_utils", "VK_EXT_layer_settings"], vk_ffi().NULL, keep)
    settings = {vk_ffi().string(info.pSettings[i].pSettingName).decode(): info.pSettings[i].pValues
                for i in range(info.settingCount)}
    assert {name for name, on in validation.GPU_AV_SETTINGS if on} == set(settings)
    assert {"gpuav_enable", "gpuav_descriptor_checks", "gpuav_buffer_address_oob"} <= set(settings)
    for values in settings.values():
        assert vk_ffi().cast("uint32_t*", values)[0] == 1
    fallback = validation.settings_chain("gpu", ["VK_EXT_debug_utils", "VK_EXT_validation_features"],
                                         vk_ffi().NULL, keep)
    assert fallback.enabledValidationFeatureCount == 1 and fallback.pEnabledValidationFeatures[0] == 0
    assert validation.settings_chain("api", ["VK_EXT_debug_utils"], vk_ffi().NULL, keep) == vk_ffi().NULL


def test_gpu_av_messages_are_sorted_into_findings_and_gaps():
    found = validation.ValidationMessage(
        "error", "validation", "VUID-vkCmdDispatch-storageBuffers-06936",
        "vkCmdDispatch(): (set = 0, binding = 0, index 0)  access out of bounds.")
    gap = validation.ValidationMessage(
        "warning", "validation", "WARNING-GPU-Assisted-Validation",
        "Unable to instrument shader: OpCooperativeMatrixLoadTensorNV is not supported")
    real = validation.ValidationMessage("error", "validation", "VUID-vkCmdDispatch-storageBuffers-06936", (
        "vkCmdDispatch(): (set = 0, binding = 0, index 0)  access out of bounds. The descriptor buffer (VkBuffer "
        "0xf000000000f) size is 256 bytes, 256 bytes were bound, and the highest out of bounds access was at [259] "
        "bytes\nStage = Compute.  Global invocation ID (x, y, z) = (63, 0, 0)\nShader Module (0xc000000000c) "
        "(internal ID 1)\nSPIR-V Instruction: %45 = OpLoad %6 %44\n(Unable to find shader source, build shader "
        "with debug info to get source information)"))
    old_layer = validation.ValidationMessage(
        "error", "validation", "UNASSIGNED-GPU-Assisted Validation Error. ",
        "Failure to instrument shader.  Proceeding with non-instrumented shader.")
    api = validation.ValidationMessage("error", "validation", "VUID-VkDeviceCreateInfo-pNext-pNext",
                                       "the device does not support this structure; it is not supported")
    assert [validation.classify(m) for m in (found, real, api)] == ["error"] * 3
    assert validation.classify(gap) == validation.classify(old_layer) == "not-instrumented"
    adjusted = ("vkCreateDevice(): Warning that validation is adjusting settings:\n"
                "\tForcing fragmentStoresAndAtomics to VK_TRUE")
    assert validation.is_known_environment_message("WARNING-Setting-Limit-Adjusted", adjusted)
    assert not validation.is_known_environment_message("WARNING-Setting-Limit-Adjusted", "something else")


def vk_ffi():
    import vulkan
    return vulkan.ffi


# --- the planted fault, in this process (whatever layer the loader finds) --------------------------------------
def _planted_run(device, offset: int) -> np.ndarray:
    spirv = toolchain_or_skip().compile(path=shader_path(SOURCE))
    pipeline = device.pipeline(spirv, name="planted-oob-read")
    with device.upload(np.arange(COUNT, dtype=np.uint32), name="src") as src, \
            device.empty(COUNT, np.uint32, name="dst") as dst:
        device.run(pipeline, [src, dst], (1,), vk.pack_push_constants(np.uint32(COUNT), np.uint32(offset)))
        return dst.read()


@pytest.fixture(scope="module")
def gpu_validated_device():
    if not HAVE_DEVICE:
        pytest.skip(NO_DEVICE_REASON)
    try:
        device = vk.Device(validate="gpu", pipeline_cache=False)
    except vk.LayerNotFoundError as error:
        pytest.skip(f"no validation layer with GPU-assisted validation: {error}")
    with device:
        yield device


@pytest.mark.vulkan
@pytest.mark.sanitizer
def test_gpu_mode_enables_gpu_assisted_validation(gpu_validated_device):
    instance = gpu_validated_device.instance
    assert instance.validation == "gpu" and instance.validate
    assert instance.extensions[0] == "VK_EXT_debug_utils"
    assert instance.extensions[1] in ("VK_EXT_layer_settings", "VK_EXT_validation_features")


@pytest.mark.vulkan
@pytest.mark.sanitizer
def test_planted_out_of_bounds_read_is_reported(gpu_validated_device):
    device = gpu_validated_device
    device.instance.take_messages()
    assert list(_planted_run(device, 0)) == list(range(COUNT))
    assert device.instance.take_messages() == [], "the in-bounds run must be clean"
    for _ in range(2):   # every time, not once
        got = _planted_run(device, 1)
        assert list(got[:COUNT - 1]) == list(range(1, COUNT))
        messages = device.instance.take_messages()
        findings = [m for m in messages if validation.classify(m) == "error"]
        assert findings, f"GPU-AV did not report the planted read: {messages}"
        assert any("out of bounds" in m.message for m in findings), findings


# --- the toolchain's 1.4.363 layer, through the toolchain's dynamic loader -------------------------------------
_CHILD = """
import json, sys
import numpy as np, spirv_tools, vulkan
from vkcoop import vk
from vkcoop.paths import shader_path
from vkcoop.vk import validation
# read while the generator lives: it alone keeps the property array alive, so a kept element would dangle
version = [p.specVersion for p in vulkan.vkEnumerateInstanceLayerProperties()
           if p.layerName == validation.VALIDATION_LAYER][0]
spirv = spirv_tools.compile(path=shader_path(sys.argv[1]))
with vk.Device(validate="gpu", pipeline_cache=False) as device:
    pipeline = device.pipeline(spirv)
    src = device.upload(np.arange(64, dtype=np.uint32))
    dst = device.empty(64, np.uint32)
    found = {}
    for offset in (0, 1):
        device.run(pipeline, [src, dst], (1,), vk.pack_push_constants(np.uint32(64), np.uint32(offset)))
        found[offset] = [[validation.classify(m), m.message_id, m.message[:300]]
                         for m in device.instance.take_messages()]
print(json.dumps({"layer": vulkan.VK_VERSION_MAJOR(version) * 1000 + vulkan.VK_VERSION_MINOR(version),
    "patch": version & 0xFFF, "extensions": device.instance.extensions,
    "found": found}))
"""


def _toolchain_layer(tmp_path: Path) -> tuple[list[str], dict]:
    """(argv prefix running Python through the toolchain's loader, environment finding only its layer)."""
    toolchain = toolchain_or_skip().find_toolchain()
    if toolchain.loader is None:
        pytest.skip("the toolchain runs natively here; its layer is the one the loader finds")
    prefix = toolchain.library_path.parents[2]
    manifest = prefix / "usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
    library = toolchain.library_path / "libVkLayer_khronos_validation.so"
    if not manifest.is_file() or not library.is_file():
        pytest.skip(f"the toolchain prefix {prefix} has no validation layer")
    data = json.loads(manifest.read_text())
    data["layer"]["library_path"] = str(library)
    (tmp_path / manifest.name).write_text(json.dumps(data))
    search = f"{toolchain.library_path}:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu"
    return [str(toolchain.loader), "--library-path", search, sys.executable], child_env(VK_LAYER_PATH=str(tmp_path))


@pytest.mark.vulkan
@pytest.mark.toolchain
@pytest.mark.sanitizer
def test_toolchain_layer_reports_the_planted_read(tmp_path):
    if not HAVE_DEVICE:
        pytest.skip(NO_DEVICE_REASON)
    argv, env = _toolchain_layer(tmp_path)
    proc = subprocess.run(argv + ["-c", _CHILD, SOURCE], env=env, capture_output=True, text=True, timeout=300,
                          cwd=os.getcwd())
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (report["layer"], report["patch"]) >= (1004, 0), report
    assert report["found"]["0"] == [], report["found"]["0"]
    findings = [f for f in report["found"]["1"] if f[0] == "error"]
    assert findings and "out of bounds" in findings[0][2], report["found"]["1"]


# --- a probe of what GPU-AV checks: a coopmat2 tensor load past the end of its buffer ----------------------------
TENSOR_FEATURES = ["cooperativeMatrix", "cooperativeMatrixTensorAddressing", "vulkanMemoryModel", "shaderFloat16",
                   "storageBuffer16BitAccess"]


def _tensor_load(device, source_rows: int) -> list:
    """tensor/load_store.comp loading a 16 x 16 fp16 tensor from a buffer of ``source_rows`` rows of 16: the layout
    says 16 rows, so with fewer the load reads past the buffer. The layer's messages, classified."""
    spirv = toolchain_or_skip().compile(path=shader_path("tensor/load_store.comp"))
    pipeline = device.pipeline(spirv, specialization={0: 16, 1: 16, 2: 0}, name="tensor-load-probe")
    push = vk.pack_push_constants(*(np.uint32(v) for v in (16, 16, 0, 16, 0, 16, 0)))
    with device.upload(np.ones((source_rows, 16), np.float16), name="source") as source, \
            device.empty((16, 16), np.float16, name="destination") as destination:
        device.run(pipeline, [source, destination], (1,), push)
    return [(validation.classify(m), m.message_id, m.message[:300]) for m in device.instance.take_messages()]


@pytest.mark.gpu
@pytest.mark.sanitizer
def test_gpu_av_on_a_tensor_load_past_its_buffer_is_recorded():
    """A probe, not a planted fault: whether GPU-AV checks a coopmat2 tensor load (OpCooperativeMatrixLoadTensorNV)
    is the layer's coverage, written down in docs/sanitizers.md from this test's warning. The in-bounds load must
    be clean: a message there would be a false report."""
    from support import coopmat2_reason
    reason = coopmat2_reason()
    if reason:
        pytest.skip(reason)
    try:
        device = vk.Device(features=TENSOR_FEATURES, validate="gpu", pipeline_cache=False)
    except vk.LayerNotFoundError as error:
        pytest.skip(f"no validation layer with GPU-assisted validation: {error}")
    with device:
        device.instance.take_messages()
        inside = _tensor_load(device, 16)
        past = _tensor_load(device, 8)
    assert [m for m in inside if m[0] == "error"] == [], inside
    warnings.warn(f"GPU-AV on a coopmat2 tensor load 8 rows past its buffer: {past or 'no message'}")
