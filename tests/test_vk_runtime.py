"""The Vulkan runtime on any Vulkan 1.3 device (lavapipe in CI): buffers, pipelines, specialization and push
constants, command buffers, timestamps, errors. Shaders are the plain compute shaders in shaders/test/."""
from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np
import pytest

from spirv_tools.cache import read_entry
from support import vulkan_probe
from vkcoop.paths import shader_path

vk = pytest.importorskip("vkcoop.vk")
pytestmark = pytest.mark.vulkan


HAVE_DEVICE, NO_DEVICE_REASON, VALIDATE = vulkan_probe()
if not HAVE_DEVICE:
    pytest.skip(NO_DEVICE_REASON, allow_module_level=True)

# Features every runtime test device enables (all are Vulkan 1.3 core or widely supported).
RUNTIME_FEATURES = ["maintenance4", "bufferDeviceAddress", "subgroupSizeControl", "computeFullSubgroups"]


@functools.lru_cache(maxsize=None)
def spirv(name: str) -> bytes:
    spirv_tools = pytest.importorskip("spirv_tools")
    return spirv_tools.compile(path=shader_path(f"test/{name}.comp"))


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("pipeline-cache")
    with vk.Device(features=RUNTIME_FEATURES, validate=VALIDATE, pipeline_cache=cache_dir) as dev:
        yield dev
    assert dev.validation_messages == [], "validation messages while closing the device"


@pytest.fixture(autouse=True)
def no_validation_messages(request):
    """Any validation message during a test fails that test."""
    yield
    if "device" in request.fixturenames:
        request.getfixturevalue("device").check_validation()


# -- buffers ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int8,
                                   np.uint16, np.int32, np.float64])
def test_buffer_round_trip_is_bit_exact(device, dtype):
    # An odd element count exercises the 4-byte rounding of the Vulkan buffer size.
    values = np.array([-0.5, 0.0, 0.5, 1.0, -1.0, 2.0, 0.25], dtype=np.float32).astype(dtype)
    array = np.stack([values, values[::-1]])
    with device.upload(array, name="round-trip") as buffer:
        assert buffer.shape == array.shape and buffer.dtype == np.dtype(dtype)
        back = buffer.read()
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == array.tobytes()


def test_bf16_named_dtype_and_zero_fill(device):
    with device.empty((3, 5), "bf16", name="zeros") as buffer:
        assert buffer.dtype == np.dtype(ml_dtypes.bfloat16)
        back = buffer.read()
    assert back.shape == (3, 5) and not np.any(back.view(np.uint16))


def test_buffer_write_overwrites(device):
    first = np.arange(10, dtype=np.int32)
    with device.upload(first) as buffer:
        buffer.write(first[::-1].copy())
        assert np.array_equal(buffer.read(), first[::-1])


def test_buffer_rejects_wrong_dtype(device):
    with device.empty((4,), np.float32, name="weights") as buffer:
        with pytest.raises(vk.BufferDTypeError, match=r"weights: array has dtype float64.*float32"):
            buffer.write(np.zeros(4, np.float64))
        with pytest.raises(vk.BufferDTypeError, match="numpy array"):
            buffer.write([0.0, 1.0, 2.0, 3.0])


def test_buffer_rejects_wrong_shape(device):
    with device.empty((2, 3), np.float32, name="tile") as buffer:
        with pytest.raises(vk.BufferShapeError, match=r"tile: array has shape \(3, 2\).*\(2, 3\)"):
            buffer.write(np.zeros((3, 2), np.float32))


def test_buffer_rejects_empty_and_oversized(device):
    with pytest.raises(vk.BufferShapeError, match="empty"):
        device.empty((0, 4), np.float32)
    limit = int(device.physical.limits.maxStorageBufferRange)
    with pytest.raises(vk.BufferShapeError, match="maxStorageBufferRange"):
        device.empty((limit + 1,), np.uint8)
    with pytest.raises(vk.BufferDTypeError):
        device.empty((4,), object)


def test_closed_buffer_refuses_use(device):
    buffer = device.empty((4,), np.float32)
    buffer.close()
    with pytest.raises(vk.VulkanError, match="closed"):
        buffer.read()


# -- pipelines and dispatch ------------------------------------------------------------------------------------
def test_axpy_with_push_constants_matches_numpy(device):
    count = 200  # not a multiple of the workgroup size: the shader's bounds check matters
    x = (np.arange(count, dtype=np.float32) - 100) * 0.5
    y = np.resize(np.array([-0.5, 0.0, 0.5, 1.0], np.float32), count)
    a = np.float32(0.25)
    with device.upload(x, name="x") as bx, device.upload(y, name="y") as by, \
            device.empty(count, np.float32, name="out") as out:
        pipeline = device.pipeline(spirv("axpy"), specialization={0: 64}, name="axpy")
        assert pipeline.local_size == (64, 1, 1)
        gpu_ns = device.run(pipeline, [bx, by, out], groups=math.ceil(count / 64), push=(a, count))
        assert gpu_ns > 0
        np.testing.assert_array_equal(out.read(), a * x + y)


def test_spec_constants_of_four_types_share_one_pipeline(device):
    with device.empty(4, np.uint32, name="words") as out:
        pipeline = device.pipeline(spirv("spec_types"), specialization={
            "UNSIGNED_VALUE": 4_000_000_000, 2: -7, 3: 0.375, 4: True})
        device.run(pipeline, [out], groups=1)
        words = out.read()
    assert words[0] == 4_000_000_000
    assert words[1] == np.array(-7, np.int32).view(np.uint32)
    assert words[2] == np.array(0.375, np.float32).view(np.uint32)
    assert words[3] == 1


def test_spec_constant_defaults_apply_when_not_given(device):
    with device.empty(4, np.uint32) as out:
        device.run(device.pipeline(spirv("spec_types"), specialization={4: False}), [out], groups=1)
        assert out.read().tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("specialization, message", [
    ({9: 1}, "no specialization constant with constant_id 9"),
    ({"NOT_A_NAME": 1}, "no specialization constant named 'NOT_A_NAME'"),
    ({1: -1}, "out of range for uint32"),
    ({2: 1.5}, "int32 in the shader; got the float"),
    ({3: 0.1}, "not exactly representable as float32"),
    ({4: 1}, "bool in the shader"),
    ({1: True}, "got the bool"),
])
def test_bad_spec_constants_are_rejected_before_creation(device, specialization, message):
    with pytest.raises(vk.PipelineInputError, match=message):
        device.pipeline(spirv("spec_types"), specialization=specialization)


def test_bad_push_constants_are_rejected(device):
    with device.empty(64, np.uint32) as counter:
        pipeline = device.pipeline(spirv("increment"), push_constant_size=12)
        with pytest.raises(vk.PipelineInputError, match="3 bytes of push constants for the shader's 8-byte"):
            device.run(pipeline, [counter], groups=1, push=b"\x01\x02\x03")
        with pytest.raises(vk.PipelineInputError, match="multiple of 4"):
            device.run(pipeline, [counter], groups=1, push=b"\x01" * 10)
        with pytest.raises(vk.PipelineInputError, match="exceed the pipeline's push_constant_size"):
            device.run(pipeline, [counter], groups=1, push=(1, 2, 3, 4))
        with pytest.raises(vk.LimitError, match="maxPushConstantsSize"):
            device.pipeline(spirv("increment"), push_constant_size=4 * int(device.physical.limits.maxPushConstantsSize))


def test_bad_bindings_are_rejected(device):
    with device.empty(64, np.float32) as a:
        pipeline = device.pipeline(spirv("chain"))
        with pytest.raises(vk.PipelineInputError, match="1 buffers given for bindings"):
            device.run(pipeline, [a], groups=1, push=(0.0, 64))
        with pytest.raises(vk.PipelineInputError, match="needs a vkcoop Buffer"):
            device.run(pipeline, [a, np.zeros(64, np.float32)], groups=1, push=(0.0, 64))


def test_workgroup_size_above_limit_is_rejected_before_creation(device):
    limits = device.physical.limits
    too_wide = int(limits.maxComputeWorkGroupSize[0]) + 1
    with pytest.raises(vk.LimitError, match=rf"x = {too_wide}.*maxComputeWorkGroupSize\[0\]"):
        device.pipeline(spirv("axpy"), specialization={0: too_wide})
    invocations = int(limits.maxComputeWorkGroupInvocations)
    side = 1 << math.ceil(math.log2(math.isqrt(invocations) + 1))  # side*side > invocations
    with pytest.raises(vk.LimitError, match="maxComputeWorkGroupInvocations"):
        device.pipeline(spirv("axpy"), local_size=(side, side, 1))


def test_dispatch_count_above_limit_is_rejected(device):
    with device.empty(64, np.uint32) as counter:
        pipeline = device.pipeline(spirv("increment"))
        too_many = int(device.physical.limits.maxComputeWorkGroupCount[0]) + 1
        with pytest.raises(vk.LimitError, match="maxComputeWorkGroupCount"):
            device.run(pipeline, [counter], groups=(too_many, 1, 1), push=(64, 1))


def test_local_size_id_needs_maintenance4():
    with vk.Device(validate=VALIDATE, pipeline_cache=False) as plain:
        with pytest.raises(vk.MissingFeatureError, match="maintenance4"):
            plain.pipeline(spirv("axpy"), specialization={0: 64})
        assert plain.validation_messages == []


def test_required_subgroup_size_and_full_subgroups(device):
    subgroup = device.physical.subgroup_properties()
    size = subgroup["maxSubgroupSize"]
    with device.empty(2, np.uint32) as out:
        pipeline = device.pipeline(spirv("subgroup_size"), required_subgroup_size=size, full_subgroups=True)
        device.run(pipeline, [out], groups=1)
        assert out.read().tolist() == [size, 64 // size]
    with pytest.raises(vk.LimitError, match="power of two"):
        device.pipeline(spirv("subgroup_size"), required_subgroup_size=size * 2 + 1)


def test_subgroup_size_control_needs_its_feature():
    with vk.Device(validate=VALIDATE, pipeline_cache=False) as plain:
        with pytest.raises(vk.MissingFeatureError, match="subgroupSizeControl, computeFullSubgroups"):
            plain.pipeline(spirv("subgroup_size"), required_subgroup_size=8, full_subgroups=True)


def test_buffer_device_address_reaches_buffer_reference_shader(device):
    values = np.resize(np.array([-0.5, 0.0, 0.5, 1.0, 3.0], np.float32), 100)
    with device.upload(values, name="source") as source, device.empty(100, np.float32) as out:
        address = source.device_address
        assert address != 0 and address % 4 == 0
        pipeline = device.pipeline(spirv("buffer_reference"), push_constant_size=16)
        device.run(pipeline, [out], groups=2, push=(np.uint64(address), 100))
        np.testing.assert_array_equal(out.read(), 2 * values)


def test_device_address_needs_the_feature():
    with vk.Device(validate=VALIDATE, pipeline_cache=False) as plain, plain.empty(4, np.float32) as buffer:
        with pytest.raises(vk.MissingFeatureError, match="bufferDeviceAddress"):
            buffer.device_address


def test_pack_push_constants_aligns_naturally():
    packed = vk.pack_push_constants(np.uint32(1), np.uint64(2), np.float16(0.5), -3)
    assert len(packed) == 24  # 4 + 4 padding + 8 + 2 + 2 padding + 4 (int32 aligned to 4)
    assert packed[:4] == np.uint32(1).tobytes() and packed[4:8] == b"\0" * 4
    assert packed[8:16] == np.uint64(2).tobytes()
    assert packed[16:18] == np.float16(0.5).tobytes() and packed[20:] == np.int32(-3).tobytes()


# -- command buffers -------------------------------------------------------------------------------------------
def test_command_buffer_recorded_once_submitted_many_times(device):
    count, submits = 300, 5
    with device.empty(count, np.uint32, name="counter") as counter, \
            device.command_buffer(timestamps=True) as commands:
        pipeline = device.pipeline(spirv("increment"))
        with commands.recording():
            commands.dispatch(pipeline, [counter], groups=math.ceil(count / 64), push=(count, 3))
        for _ in range(submits):
            commands.submit()
            times = commands.dispatch_times_ns()
            assert len(times) == 1 and times[0] > 0
        assert np.array_equal(counter.read(), np.full(count, 3 * submits, np.uint32))


def test_dispatches_in_one_command_buffer_see_each_other(device):
    count = 128
    start = np.resize(np.array([-0.5, 0.0, 0.5, 1.0], np.float32), count)
    with device.upload(start) as a, device.empty(count, np.float32) as b, device.empty(count, np.float32) as c, \
            device.command_buffer(timestamps=True) as commands:
        pipeline = device.pipeline(spirv("chain"))
        with commands.recording():
            commands.dispatch(pipeline, [a, b], groups=2, push=(1.0, count), label="a->b")
            commands.dispatch(pipeline, {0: b, 1: c}, groups=2, push=(0.5, count), label="b->c")
        commands.submit()
        assert commands.labels == ["a->b", "b->c"]
        times = commands.dispatch_times_ns()
        assert len(times) == 2 and all(t > 0 for t in times)
        assert commands.total_time_ns() == pytest.approx(sum(times))
        (span,) = commands.span_times_ns([(0, 1)])   # first start to last end: both dispatches and the barrier
        assert span >= max(times)
        np.testing.assert_array_equal(c.read(), start + 1.5)


def test_submit_refuses_commands_using_closed_buffers(device):
    with device.command_buffer() as commands:
        counter = device.empty(64, np.uint32, name="gone")
        with commands.recording():
            commands.dispatch(device.pipeline(spirv("increment")), [counter], groups=1, push=(64, 1))
        counter.close()
        with pytest.raises(vk.VulkanError, match="closed objects: gone"):
            commands.submit()


def test_consecutive_dispatches_are_ordered_by_a_shader_access_barrier(monkeypatch):
    """The barrier between two dispatches: compute to compute, shader writes made visible to shader reads and
    writes, and none of the MEMORY_* bits (they cost time on the H100 and add nothing for storage buffers)."""
    import types

    import vulkan

    recorded = []

    def pipeline_barrier(command_buffer, src_stage, dst_stage, flags, count, barriers, *rest):
        recorded.append((src_stage, dst_stage, count, barriers[0].srcAccessMask, barriers[0].dstAccessMask))

    fake = types.SimpleNamespace(ffi=vulkan.ffi, lib=types.SimpleNamespace(vkCmdPipelineBarrier=pipeline_barrier),
                                 **{name: getattr(vulkan, name) for name in dir(vulkan) if name.startswith("VK_")})
    monkeypatch.setattr(vk.commands, "vk", fake)
    vk.commands.dispatch_barrier(None)
    compute = vulkan.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    assert recorded == [(compute, compute, 1, vulkan.VK_ACCESS_SHADER_WRITE_BIT,
                         vulkan.VK_ACCESS_SHADER_READ_BIT | vulkan.VK_ACCESS_SHADER_WRITE_BIT)]


def test_timestamps_are_masked_to_valid_bits_and_wrap():
    # 36 valid bits: garbage above them is ignored, and a counter that wrapped between start and end still
    # gives the forward distance; timestampPeriod scales ticks to ns.
    bits = 36
    top = 1 << bits
    assert vk.commands.elapsed_ns(top - 10, 5, bits, 1.0) == 15
    assert vk.commands.elapsed_ns((0xABC << bits) | 100, (0x123 << bits) | 400, bits, 2.5) == 750.0
    assert vk.commands.elapsed_ns(7, 7 + (1 << 40), 64, 1.0) == 1 << 40
    with pytest.raises(vk.VulkanError, match="timestampValidBits"):
        vk.commands.elapsed_ns(0, 1, 0, 1.0)


def _lcg_power(steps: int, multiplier: int = 1664525, increment: int = 1013904223):
    """(a, c) with x -> a*x + c (mod 2**32) equal to the LCG step applied ``steps`` times (squaring)."""
    modulus = 1 << 32
    total_a, total_c, power_a, power_c = 1, 0, multiplier, increment
    while steps:
        if steps & 1:
            total_a, total_c = total_a * power_a % modulus, (total_c * power_a + power_c) % modulus
        power_a, power_c = power_a * power_a % modulus, (power_c * power_a + power_c) % modulus
        steps >>= 1
    return total_a, total_c


def test_lcg_power_matches_stepping():
    a, c = _lcg_power(1000)
    x = 7
    for _ in range(1000):
        x = (x * 1664525 + 1013904223) % (1 << 32)
    assert (a * 7 + c) % (1 << 32) == x


def test_fence_timeout_on_a_long_shader_is_a_clear_error(device):
    # A zero timeout polls the fence: the long dispatch cannot be done yet. More threads on real GPUs.
    groups = 64 if device.physical.device_type == "cpu" else 16384
    threads, iterations = 64 * groups, 60_000
    with device.empty(threads, np.uint32, name="spin-out") as out, device.command_buffer(name="spin") as commands:
        pipeline = device.pipeline(spirv("spin"), name="spin")
        with commands.recording():
            commands.dispatch(pipeline, [out], groups=groups, push=(iterations,))
        with pytest.raises(vk.FenceTimeoutError, match=r"spin: GPU work \(spin\) did not finish within 0 s"):
            commands.submit(timeout_s=0)
        assert commands.pending
        commands.wait(timeout_s=120)  # the work does finish; the command buffer is usable again
        assert not commands.pending
        # Every element equals the recurrence applied `iterations` times: the loop really ran on the device.
        a, c = _lcg_power(iterations)
        expected = (a * np.arange(1, threads + 1, dtype=np.uint64) + c) % (1 << 32)
        np.testing.assert_array_equal(out.read(), expected.astype(np.uint32))


@pytest.mark.parametrize("result, error", [(-4, "DeviceLostError"), (2, "FenceTimeoutError")])
def test_simulated_fence_results_become_clear_errors(device, monkeypatch, result, error):
    with device.empty(64, np.uint32) as counter, device.command_buffer(name="simulated") as commands:
        with commands.recording():
            commands.dispatch(device.pipeline(spirv("increment")), [counter], groups=1, push=(64, 1))
        commands.submit(wait=False)
        real_wait = vk.commands._wait_for_fences
        monkeypatch.setattr(vk.commands, "_wait_for_fences", lambda *args: result)
        with pytest.raises(getattr(vk, error), match="simulated"):
            commands.wait()
        monkeypatch.setattr(vk.commands, "_wait_for_fences", real_wait)
        if result == -4:
            device._lost = False  # the device is fine: only the wait was simulated
            commands._state = "pending"
        commands.wait()
        assert counter.read().tolist() == [1] * 64


# -- pipeline cache and lifetime -------------------------------------------------------------------------------
def test_pipeline_cache_is_written_and_reloaded(tmp_path):
    with vk.Device(features=["maintenance4"], validate=VALIDATE, pipeline_cache=tmp_path) as first:
        first.pipeline(spirv("axpy"), specialization={0: 32})
        path = first.pipeline_cache_path
        assert bytes(first.physical.properties.pipelineCacheUUID).hex() in path.name
    assert path.is_file() and path.stat().st_size > 0
    saved = read_entry(path)  # the driver's data inside vkcoop's checked entry
    with vk.Device(features=["maintenance4"], validate=VALIDATE, pipeline_cache=tmp_path) as second:
        assert second.pipeline_cache_path == path
        second.pipeline(spirv("axpy"), specialization={0: 32})
        assert second.validation_messages == []
    # Vulkan's cache header (spec: "Pipeline Cache Header") starts with its own length and the vendor id.
    assert int.from_bytes(saved[4:8], "little") == 1  # VK_PIPELINE_CACHE_HEADER_VERSION_ONE
    assert int.from_bytes(saved[8:12], "little") == int(second.physical.properties.vendorID)


def test_corrupt_pipeline_cache_file_is_survived(tmp_path):
    with vk.Device(validate=VALIDATE, pipeline_cache=tmp_path) as first:
        path = first.pipeline_cache_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a pipeline cache at all" * 4)
    with vk.Device(validate=VALIDATE, pipeline_cache=tmp_path) as second, second.empty(4, np.uint32) as out:
        second.run(second.pipeline(spirv("spec_types"), specialization={1: 5}), [out], groups=1)
        assert out.read()[0] == 5


def test_closing_the_device_closes_its_objects():
    with vk.Device(validate=VALIDATE, pipeline_cache=False) as dev:
        buffer = dev.empty(16, np.float32)
        pipeline = dev.pipeline(spirv("spec_types"))
        commands = dev.command_buffer()
    assert buffer.closed and pipeline.closed and commands.closed
    assert dev.handle is None
    with pytest.raises(vk.VulkanError, match="closed"):
        dev.empty(4, np.float32)


# -- validation ------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not VALIDATE, reason="VK_LAYER_KHRONOS_validation is not installed")
def test_validation_messages_are_collected_and_raise():
    import vulkan

    with vk.Device(validate=True, pipeline_cache=False) as dev:
        # A zero-sized buffer violates VUID-VkBufferCreateInfo-size-00912; the layer must report it.
        info = vulkan.ffi.new("VkBufferCreateInfo*", {"sType": vulkan.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                                       "size": 0, "usage": vulkan.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT})
        handle = vulkan.ffi.new("VkBuffer*")
        if vulkan.lib.vkCreateBuffer(dev.handle, info, vulkan.ffi.NULL, handle) == 0:
            vulkan.lib.vkDestroyBuffer(dev.handle, handle[0], vulkan.ffi.NULL)
        assert any("00912" in m.message_id or "00912" in m.message for m in dev.validation_messages)
        with pytest.raises(vk.ValidationError, match="validation message"):
            dev.check_validation()
        assert dev.validation_messages == []  # check_validation consumed them
