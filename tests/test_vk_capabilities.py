"""Device selection, feature declaration and the capabilities report; coopmat2 parts run where a device has it."""
from __future__ import annotations

import json

import pytest

vk = pytest.importorskip("vkcoop.vk")
from support import vulkan_probe  # noqa: E402
from vkcoop.vk import coopmat2_ffi as side  # noqa: E402

HAVE_DEVICE, NO_DEVICE_REASON, LAYER = vulkan_probe()
needs_vulkan = pytest.mark.skipif(not HAVE_DEVICE, reason=NO_DEVICE_REASON)


def _coopmat2_device():
    if not HAVE_DEVICE:
        return None
    with vk.Instance() as instance:
        for physical in instance.physical_devices():
            if side.NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME in physical.extensions:
                return physical.index
    return None


COOPMAT2_INDEX = _coopmat2_device()
needs_coopmat2 = pytest.mark.skipif(COOPMAT2_INDEX is None, reason="no device lists VK_NV_cooperative_matrix2")


# -- pure checks (no device) -----------------------------------------------------------------------------------
def test_the_sm_count_is_read_from_the_properties_chain_where_the_extension_is_listed():
    from types import SimpleNamespace

    from vkcoop.vk.chain import StructChain
    struct = "VkPhysicalDeviceShaderSMBuiltinsPropertiesNV"
    chain = StructChain("VkPhysicalDeviceProperties2", "VkPhysicalDeviceVulkan11Properties", struct)
    assert chain[struct].sType == 1000154001   # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV
    # linked behind the other members, so vkGetPhysicalDeviceProperties2 fills it
    linked = chain["VkPhysicalDeviceVulkan11Properties"].pNext
    assert side.address_of(linked) == side.address_of(chain[struct])
    chain[struct].shaderSMCount = 132
    listed = {"VK_NV_shader_sm_builtins": 2}
    assert vk.sm_count(SimpleNamespace(extensions=listed, extended_properties=chain)) == 132
    assert vk.sm_count(SimpleNamespace(extensions={}, extended_properties=chain)) is None
    without = StructChain("VkPhysicalDeviceProperties2", "VkPhysicalDeviceVulkan11Properties")
    assert vk.sm_count(SimpleNamespace(extensions=listed, extended_properties=without)) is None
    chain[struct].shaderSMCount = 0   # a driver that lists the extension but reports nothing
    assert vk.sm_count(SimpleNamespace(extensions=listed, extended_properties=chain)) is None


def test_side_ffi_layouts_follow_vk_xml():
    # Sizes follow from vk.xml member lists on LP64: sType (4) + pad (4) + pNext (8) + members.
    assert side.ffi.sizeof("VkPhysicalDeviceCooperativeMatrix2FeaturesNV") == 16 + 7 * 4 + 4  # padded to 8
    assert side.ffi.sizeof("VkPhysicalDeviceCooperativeMatrix2PropertiesNV") == 16 + 3 * 4 + 4
    assert side.ffi.sizeof("VkCooperativeMatrixFlexibleDimensionsPropertiesNV") == 16 + 10 * 4
    assert side.ffi.offsetof("VkCooperativeMatrixFlexibleDimensionsPropertiesNV", "workgroupInvocations") == 52
    assert side.ffi.sizeof("VkPhysicalDeviceShaderBfloat16FeaturesKHR") == 16 + 3 * 4 + 4
    # sType = 1000000000 + (extension number - 1) * 1000 + offset; VK_NV_cooperative_matrix2 is number 594.
    assert side.STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV == 1_000_000_000 + 593 * 1000
    assert side.STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV == 1_000_593_001
    assert side.STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV == 1_000_593_002
    assert side.STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR == 1_000_000_000 + 141 * 1000


def test_struct_chain_links_by_address_across_ffis():
    from vkcoop.vk.chain import StructChain

    chain = StructChain("VkPhysicalDeviceFeatures2", "VkPhysicalDeviceVulkan13Features",
                        "VkPhysicalDeviceCooperativeMatrix2FeaturesNV", "VkPhysicalDeviceShaderBfloat16FeaturesKHR")
    names = chain.names
    for current, following in zip(names, names[1:]):
        assert side.address_of(chain[current].pNext) == side.address_of(chain[following])
    assert side.address_of(chain[names[-1]].pNext) == 0
    assert chain["VkPhysicalDeviceCooperativeMatrix2FeaturesNV"].sType == 1_000_593_000
    assert chain["VkPhysicalDeviceVulkan13Features"].sType == 53


def test_feature_names_map_to_structs_and_extensions():
    from vkcoop.vk import features

    assert features.struct_of("cooperativeMatrixWorkgroupScope") == "VkPhysicalDeviceCooperativeMatrix2FeaturesNV"
    assert features.extension_of("cooperativeMatrixBlockLoads") == "VK_NV_cooperative_matrix2"
    assert features.extension_of("shaderBFloat16CooperativeMatrix") == "VK_KHR_shader_bfloat16"
    assert features.extension_of("cooperativeMatrix") == "VK_KHR_cooperative_matrix"
    assert features.extension_of("computeFullSubgroups") is None
    assert features.with_dependencies(["VK_NV_cooperative_matrix2"]) == ["VK_KHR_cooperative_matrix",
                                                                          "VK_NV_cooperative_matrix2"]
    assert len(vk.COOPMAT2_FEATURES) == 7
    with pytest.raises(ValueError, match="did you mean 'shaderFloat16'"):
        features.struct_of("shaderfloat16")


# -- device selection ------------------------------------------------------------------------------------------
@pytest.mark.vulkan
@needs_vulkan
def test_select_by_index_name_and_environment(monkeypatch):
    monkeypatch.delenv("VKCOOP_DEVICE", raising=False)
    with vk.Instance() as instance:
        devices = instance.physical_devices()
        first = devices[0]
        assert instance.select(0) is first
        assert instance.select("0") is first
        prefix = first.name[:6].upper()
        if sum(d.name.upper().find(prefix) >= 0 for d in devices) == 1:
            assert instance.select(prefix) is first
        else:   # two GPUs of one model: a name cannot choose between them
            with pytest.raises(vk.NoDeviceError, match="matches several devices.*use an index"):
                instance.select(prefix)
        monkeypatch.setenv("VKCOOP_DEVICE", str(len(devices) - 1))
        assert instance.select() is devices[-1]
        assert instance.select(0) is first  # an explicit argument wins over the environment
        with pytest.raises(vk.NoDeviceError, match=r"\$VKCOOP_DEVICE.*no Vulkan device with index 99"):
            monkeypatch.setenv("VKCOOP_DEVICE", "99")
            instance.select()
        with pytest.raises(vk.NoDeviceError, match=r"no Vulkan device named like 'no such gpu'.*0: "):
            instance.select("no such gpu")


# -- feature declaration ---------------------------------------------------------------------------------------
@pytest.mark.vulkan
@needs_vulkan
def test_missing_feature_error_names_every_missing_item():
    with vk.Instance() as instance:
        physical = instance.select()
        supported = [name for name, ok in physical.features.items() if ok]
        unsupported = [name for name in vk.COOPMAT2_FEATURES if not physical.features[name]]
        extensions_absent = [e for e in ("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2")
                             if e not in physical.extensions]
    if not unsupported:
        pytest.skip(f"{physical.name} supports every coopmat2 feature; nothing is missing")
    wanted = [supported[0], *unsupported]
    with pytest.raises(vk.MissingFeatureError) as caught:
        vk.Device(features=wanted, pipeline_cache=False)
    error = caught.value
    assert error.missing_features == unsupported
    assert error.missing_extensions == extensions_absent
    for name in [*unsupported, *extensions_absent]:
        assert name in str(error)
    assert supported[0] not in error.missing_features


@pytest.mark.vulkan
@needs_vulkan
def test_device_enables_exactly_the_declared_features():
    # buffer_robustness "default": the device adds nothing of its own (its "disabled" adds pipelineRobustness)
    with vk.Device(features=["shaderInt16", "vulkanMemoryModel", "storageBuffer16BitAccess"],
                   pipeline_cache=False, buffer_robustness="default") as device:
        assert device.enabled_features == {"shaderInt16": True, "vulkanMemoryModel": True,
                                           "storageBuffer16BitAccess": True}
        assert device.enabled_extensions == []


@pytest.mark.vulkan
@needs_vulkan
def test_unknown_feature_name_is_rejected():
    with pytest.raises(ValueError, match="unknown Vulkan feature name 'cooperativeMatrixWorkgroupScop'"):
        vk.Device(features=["cooperativeMatrixWorkgroupScop"], pipeline_cache=False)


# -- capabilities report ---------------------------------------------------------------------------------------
@pytest.mark.vulkan
@needs_vulkan
def test_capabilities_report_is_json_and_consistent():
    validate = LAYER
    report = vk.capabilities(validate=validate)
    assert json.loads(json.dumps(report)) == report
    with vk.Instance() as instance:
        physical = instance.select()
        assert report["name"] == physical.name
        assert report["limits"]["maxComputeSharedMemorySize"] == int(physical.limits.maxComputeSharedMemorySize)
        assert report["limits"]["timestampPeriod"] == pytest.approx(float(physical.limits.timestampPeriod))
        has_khr = "VK_KHR_cooperative_matrix" in physical.extensions
        has_nv2 = "VK_NV_cooperative_matrix2" in physical.extensions
        has_sm_builtins = "VK_NV_shader_sm_builtins" in physical.extensions
    assert report["cooperative_matrix_khr"]["supported"] is has_khr
    assert bool(report["cooperative_matrix_khr"]["properties"]) == has_khr
    assert report["cooperative_matrix2"]["supported"] is has_nv2
    if not has_nv2:
        assert report["cooperative_matrix2"]["properties"] is None
        assert report["cooperative_matrix2"]["flexible_dimensions"] == []
    assert 0 < report["timestamp_valid_bits"] <= 64
    # the SM count where VK_NV_shader_sm_builtins is listed, and only there (lavapipe has none)
    assert report["sm_count"] > 0 if has_sm_builtins else report["sm_count"] is None
    assert report["subgroup"]["minSubgroupSize"] <= report["subgroup"]["maxSubgroupSize"]
    if validate:
        assert report["validation_messages"] == []


@pytest.mark.vulkan
@needs_vulkan
def test_capabilities_of_all_devices():
    report = vk.capabilities(all_devices=True)
    assert [d["index"] for d in report["devices"]] == list(range(len(report["devices"])))


# -- coopmat2 devices ------------------------------------------------------------------------------------------
@pytest.mark.gpu
@needs_coopmat2
def test_coopmat2_report_on_a_capable_device():
    validate = LAYER
    report = vk.capabilities(COOPMAT2_INDEX, validate=validate)
    nv2 = report["cooperative_matrix2"]
    assert nv2["supported"] and any(nv2["features"].values())
    properties = nv2["properties"]
    assert properties["cooperativeMatrixWorkgroupScopeMaxWorkgroupSize"] >= 32
    assert properties["cooperativeMatrixFlexibleDimensionsMaxDimension"] > 0
    flexible = nv2["flexible_dimensions"]
    assert flexible, "VK_NV_cooperative_matrix2 is listed but the flexible-dimensions table is empty"
    for entry in flexible:
        assert entry["MGranularity"] > 0 and entry["NGranularity"] > 0 and entry["KGranularity"] > 0
        assert entry["scope"] in ("workgroup", "subgroup")
        assert not entry["AType"].startswith("component_type_")
    # Subgroup-scope KHR shapes exist too (VK_NV_cooperative_matrix2 depends on VK_KHR_cooperative_matrix).
    assert report["cooperative_matrix_khr"]["properties"]
    if validate:
        assert report["validation_messages"] == []


@pytest.mark.gpu
@needs_coopmat2
def test_device_with_every_coopmat2_feature():
    validate = LAYER
    with vk.Instance() as instance:
        supported = [n for n in vk.COOPMAT2_FEATURES if instance.physical_devices()[COOPMAT2_INDEX].features[n]]
    with vk.Device(COOPMAT2_INDEX, features=supported + ["cooperativeMatrix"], validate=validate,
                   pipeline_cache=False) as device:
        robust = ["VK_EXT_pipeline_robustness"] if device.buffer_robustness == "disabled" else []
        assert device.enabled_extensions == ["VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"] + robust
    assert device.validation_messages == []


def test_only_the_known_loader_message_is_suppressed():
    from vkcoop.vk.instance import is_known_environment_message

    loader_text = ("vkGetDeviceProcAddr(): pName is trying to grab vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR "
                   "which is an instance level function")
    assert is_known_environment_message("WARNING-vkGetDeviceProcAddr-device", loader_text)
    assert not is_known_environment_message("WARNING-vkGetDeviceProcAddr-device",
                                            "pName is trying to grab vkGetPhysicalDeviceFeatures2")
    assert not is_known_environment_message("VUID-VkBufferCreateInfo-size-00912", loader_text)
