"""VK_EXT_pipeline_robustness (vkcoop.vk.robustness): which behaviour a device asks for, what it falls back to, and
what every pipeline of it chains; on the CPU through lavapipe (which lacks the extension) and fakes, on the GPU
through the H100's driver."""
from __future__ import annotations

import math

import numpy as np
import pytest
import spirv_tools
import vulkan

from vkcoop import vk
from vkcoop.inspect.executables import PipelineRecipe
from vkcoop.paths import shader_path
from vkcoop.vk import robustness

SUPPORTED = {robustness.FEATURE: True}


def test_the_argument_then_the_environment_then_the_default_decide(monkeypatch):
    monkeypatch.delenv(robustness.ENV, raising=False)
    assert robustness.requested(None) == robustness.DEFAULT == "disabled"
    monkeypatch.setenv(robustness.ENV, " Default ")
    assert robustness.requested(None) == "default"
    assert robustness.requested("disabled") == "disabled"          # the caller's word wins over the environment


@pytest.mark.parametrize("value, source", [("off", "buffer_robustness"), ("robust", "buffer_robustness")])
def test_a_bad_value_is_one_line_naming_the_choices(value, source):
    with pytest.raises(ValueError, match=f"^{source} must be one of default, disabled, got '{value}'$"):
        robustness.requested(value)


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(robustness.ENV, "sometimes")
    with pytest.raises(ValueError, match=r"\$VKCOOP_BUFFER_ROBUSTNESS must be one of"):
        robustness.requested(None)


def test_disabled_enables_the_feature_where_the_device_has_it_and_falls_back_where_not():
    assert robustness.resolve("disabled", SUPPORTED) == ("disabled", "", [robustness.FEATURE])
    effective, note, extra = robustness.resolve("disabled", {robustness.FEATURE: False})
    assert (effective, extra) == ("default", []) and "VK_EXT_pipeline_robustness" in note
    assert robustness.resolve("default", SUPPORTED) == ("default", "", [])


def test_only_disabled_chains_a_struct_and_it_disables_buffers_only():
    keep = []
    assert robustness.pipeline_info("default", keep) == vulkan.ffi.NULL and keep == []
    info = robustness.pipeline_info("disabled", keep)
    assert keep == [info] and info.sType == vulkan.VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT
    assert info.storageBuffers == info.uniformBuffers == vulkan.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT
    assert info.vertexInputs == vulkan.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT
    assert info.images == vulkan.VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT


def test_a_bad_device_argument_fails_before_any_vulkan_object():
    with pytest.raises(ValueError, match="buffer_robustness must be one of"):
        vk.Device(buffer_robustness="never")


def test_the_inspect_recipe_carries_the_behaviour_through_json():
    recipe = PipelineRecipe("k", b"\x03\x02\x23\x07", {0: 7}, 16, [], None, False, "disabled")
    assert PipelineRecipe.from_dict(recipe.to_dict()).buffer_robustness == "disabled"
    older = recipe.to_dict()
    del older["buffer_robustness"]                                 # a request written before the field existed
    assert PipelineRecipe.from_dict(older).buffer_robustness == "default"


def _device_or_skip(**kwargs):
    try:
        return vk.Device(**kwargs)
    except vk.VulkanError as error:
        pytest.skip(f"no Vulkan device: {error}")


def test_a_device_without_the_extension_falls_back_and_says_why(monkeypatch):
    monkeypatch.delenv(robustness.ENV, raising=False)
    with _device_or_skip() as device:
        if device.physical.features.get(robustness.FEATURE):
            pytest.skip(f"{device.physical.name} has {robustness.FEATURE}: see the GPU test below")
        assert device.buffer_robustness == "default" and robustness.FEATURE in device.buffer_robustness_note
        assert robustness.FEATURE not in device.enabled_features


@pytest.mark.gpu
@pytest.mark.vulkan
def test_the_driver_takes_disabled_buffer_robustness_and_a_dispatch_stays_exact(monkeypatch):
    monkeypatch.delenv(robustness.ENV, raising=False)
    with _device_or_skip(features=["maintenance4"]) as device:   # axpy's runtime array needs it
        if not device.physical.features.get(robustness.FEATURE):
            pytest.skip(f"{device.physical.name} lacks {robustness.FEATURE}")
        assert device.buffer_robustness == "disabled" and device.enabled_features.get(robustness.FEATURE)
        pipeline = device.pipeline(spirv_tools.compile(path=shader_path("test/axpy.comp")), specialization={0: 64},
                                   name="axpy")
        assert pipeline.buffer_robustness == "disabled"
        count = 200   # not a multiple of the workgroup size: the shader's own bounds test keeps it inside
        x = np.arange(count, dtype=np.float32) - 100
        y = np.full(count, 0.5, np.float32)
        with device.upload(x, name="x") as bx, device.upload(y, name="y") as by, \
                device.empty(count, np.float32, name="out") as out:
            device.run(pipeline, [bx, by, out], groups=math.ceil(count / 64), push=(np.float32(0.25), count))
            np.testing.assert_array_equal(out.read(), np.float32(0.25) * x + y)
