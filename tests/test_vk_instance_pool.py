"""Instances come from a per-process pool: the NVIDIA driver (580.159, H200) fails the 31st vkCreateInstance of a
process even when every earlier instance was destroyed, so vkcoop reuses VkInstances instead of destroying them."""
from __future__ import annotations

import pytest

from vkcoop import vk
from vkcoop.vk import instance as instance_module


def _vulkan_or_skip():
    try:
        with vk.Instance() as instance:
            instance.physical_devices()
    except vk.VulkanError as exc:
        pytest.skip(f"no Vulkan device: {exc}")


pytestmark = pytest.mark.vulkan


def test_more_instances_than_the_driver_allows_per_process():
    _vulkan_or_skip()
    for _ in range(40):  # the H200 driver refused the 31st creation before pooling
        with vk.Instance() as instance:
            assert instance.physical_devices()


def test_closed_instances_hand_their_vkinstance_back_for_reuse():
    _vulkan_or_skip()
    first = vk.Instance()
    handle = first.handle
    first.close()
    with pytest.raises(vk.VulkanError, match="closed"):
        first.handle
    with vk.Instance() as second:
        assert second.handle == handle
    # Two open at once need two VkInstances.
    with vk.Instance() as a, vk.Instance() as b:
        assert a.handle != b.handle


def test_validation_messages_go_to_the_instance_that_is_open():
    _vulkan_or_skip()
    try:
        first = vk.Instance(validate=True)
    except vk.LayerNotFoundError as exc:
        pytest.skip(str(exc))
    first.messages.append("stale")  # what an earlier user left must not reach the next one
    first.close()
    with vk.Instance(validate=True) as second:
        assert second.messages == []


def test_release_destroys_the_idle_pool():
    _vulkan_or_skip()
    vk.Instance().close()
    assert instance_module.release_pooled_instances() >= 1
    assert instance_module.release_pooled_instances() == 0
    with vk.Instance() as again:  # a fresh VkInstance is created on demand
        assert again.physical_devices()
