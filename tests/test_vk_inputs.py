"""The Vulkan runtime on bad input (lavapipe in CI). The inputs that used to crash the driver or the validation
layer run in a subprocess, so a regression fails its test instead of killing pytest; the rest check that
every argument error is a vkcoop.Error naming the parameter, raised before anything is submitted."""
from __future__ import annotations

import logging
import math
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vkcoop
from support import child_env, corrupt, toolchain_or_skip, vulkan_probe
from vkcoop.paths import shader_path

vk = pytest.importorskip("vkcoop.vk")
pytestmark = pytest.mark.vulkan
REPO = Path(__file__).resolve().parent.parent


HAVE_DEVICE, NO_DEVICE_REASON, VALIDATE = vulkan_probe()
if not HAVE_DEVICE:
    pytest.skip(NO_DEVICE_REASON, allow_module_level=True)


def spirv(name: str) -> bytes:
    return toolchain_or_skip().compile(path=shader_path(f"test/{name}.comp"))


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    with vk.Device(validate=VALIDATE, features=["maintenance4"],
                   pipeline_cache=tmp_path_factory.mktemp("pipelines")) as dev:
        yield dev


# --- the crash cases, each in its own process ---------------------------------------------------------------
CRASH_CASE = """
import sys, numpy as np, spirv_tools, vkcoop
from vkcoop import vk
from vkcoop.paths import shader_path
def spirv(name):
    return spirv_tools.compile(path=shader_path(f"test/{name}.comp"))
with vk.Device(validate=sys.argv[2] == "1", pipeline_cache=False) as device:
    case = sys.argv[1]
    try:
        if case == "entry-point":
            device.pipeline(spirv("axpy"), entry_point="nomain")
        elif case == "binding-count":
            device.pipeline(spirv("chain"), bindings=1)
        elif case == "truncated":
            module, rejected, i = spirv("axpy"), 0, 5
            while i < len(module) // 4:  # every instruction boundary (74 of 366 cuts used to segfault)
                try:
                    device.pipeline(module[:4 * i])
                except vk.PipelineInputError:
                    rejected += 1
                i += int.from_bytes(module[4 * i:4 * i + 4], "little") >> 16
            print("rejected", rejected, "cuts")
            raise vk.PipelineInputError("every cut rejected")
        elif case == "missing-push":
            with device.empty(64, np.uint32) as counter:
                device.run(device.pipeline(spirv("increment")), [counter], groups=1)
    except vkcoop.Error as error:
        print(type(error).__name__, error)
    assert device.validation_messages == [], device.validation_messages
"""


@pytest.mark.parametrize("case, expected", [
    ("entry-point", "PipelineInputError shader: entry_point 'nomain' is not a compute entry point of the module "
                    "(it has ['main'])"),
    ("binding-count", "PipelineInputError shader: bindings=1 describes bindings [0], but the shader uses [0, 1]"),
    ("truncated", "PipelineInputError every cut rejected"),
    ("missing-push", "PipelineInputError shader: no push constants for the shader's 8-byte push-constant block"),
])
def test_inputs_that_crashed_the_driver_are_clean_errors(case, expected):
    toolchain_or_skip()
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", CRASH_CASE, case, "1" if VALIDATE else "0"], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=300)
    if proc.returncode < 0:
        pytest.fail(f"{case}: the process died of {signal.Signals(-proc.returncode).name}\n{proc.stderr[-2000:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert expected in proc.stdout, proc.stdout
    if case == "truncated":
        assert int(proc.stdout.split("rejected ")[1].split()[0]) > 20


# --- device and run arguments -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    ({"device": 1.5}, vk.VulkanTypeError, "device must be an index, a name or None, got float 1.5"),
    ({"validate": "no"}, vk.VulkanTypeError,
     "validate must be True, False, None or one of 'off', 'api', 'gpu', got str 'no'"),
    ({"validate": "GPU"}, vk.VulkanTypeError, "validate must be .* got str 'GPU'"),
    ({"fence_timeout_s": math.nan}, vk.VulkanInputError, "fence_timeout_s must be finite, positive"),
    ({"fence_timeout_s": -5}, vk.VulkanInputError, "fence_timeout_s must be finite, positive"),
    ({"fence_timeout_s": 0}, vk.VulkanInputError, "fence_timeout_s must be finite, positive"),
    ({"fence_timeout_s": "10"}, vk.VulkanTypeError, "fence_timeout_s must be a number of seconds, got str"),
    ({"features": "shaderFloat16"}, vk.VulkanTypeError, "features must be a list of names"),
    ({"pipeline_cache": 3}, vk.VulkanTypeError, "pipeline_cache must be True, False or a directory"),
])
def test_device_arguments_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        vk.Device(**kwargs)
    assert issubclass(error, vkcoop.Error)


def test_instance_validate_must_be_a_bool_or_a_mode():
    with pytest.raises(vk.VulkanTypeError, match="validate must be True, False or one of 'off', 'api', 'gpu', "
                                                 "got str 'no'"):
        vk.Instance(validate="no")
    with pytest.raises(vk.VulkanTypeError, match="got NoneType None"):
        vk.Instance(validate=None)


def test_run_arguments_are_checked_before_submission(device):
    with device.empty(64, np.uint32, name="counter") as counter:
        pipeline = device.pipeline(spirv("increment"))
        bad_calls = [
            (dict(groups=(2.7,)), vk.VulkanTypeError, r"groups must be an integer, got float 2.7"),
            (dict(groups=(1, 1, 1, 1)), vk.VulkanTypeError, "groups must be 1 to 3 integers"),
            (dict(timeout_s=math.inf), vk.VulkanInputError, "timeout_s must be finite"),
            (dict(timeout_s=1e12), vk.VulkanInputError, "timeout_s must be finite, non-negative and at most"),
            (dict(timeout_s="1"), vk.VulkanTypeError, "timeout_s must be a number of seconds"),
            (dict(push=(64,)), vk.PipelineInputError, "4 bytes of push constants for the shader's 8-byte"),
            (dict(push=(2**40, 1)), vk.PipelineInputError, "does not fit 32 bits; pass a np.int64"),
            (dict(push=(1e39, 1)), vk.PipelineInputError, "outside the float32 range"),
            (dict(buffers=counter), vk.VulkanTypeError, "buffers must be a list in binding order"),
        ]
        for overrides, error, message in bad_calls:
            call = dict(buffers=[counter], groups=1, push=(64, 1))
            call.update(overrides)
            with pytest.raises(error, match=message):
                device.run(pipeline, call["buffers"], call["groups"], call["push"], timeout_s=call.get("timeout_s"))
        assert counter.read().tolist() == [0] * 64  # nothing ran
        device.run(pipeline, [counter], groups=(np.int64(1),), push=(np.uint32(64), 1))
        assert counter.read().tolist() == [1] * 64


def test_buffer_shapes_are_integers(device):
    with pytest.raises(vk.BufferShapeError, match=r"non-integer extent 2.7"):
        device.empty((2.7,), np.float32)
    with pytest.raises(vk.BufferShapeError, match="shape must be an int or a tuple of ints"):
        device.empty("12", np.float32)
    with device.empty((np.int64(3),), np.float32) as buffer:
        assert buffer.shape == (3,)


def test_pipeline_options_are_checked_against_reflection(device):
    with pytest.raises(vk.PipelineInputError, match="push_constant_size 4 is smaller than the shader's "
                                                    "push-constant block .8 bytes."):
        device.pipeline(spirv("increment"), push_constant_size=4)
    with pytest.raises(vk.PipelineInputError, match=r"binding 0 is a storage-buffer in the shader; bindings= says "
                                                    "'uniform'"):
        device.pipeline(spirv("increment"), bindings={0: "uniform"})
    with pytest.raises(vk.PipelineInputError, match=r"describes bindings \[0, 1, 2\], but the shader uses \[0\]"):
        device.pipeline(spirv("increment"), bindings=[0, 1, 2])
    with pytest.raises(vk.PipelineInputError, match="uint32 in the shader; got str '5'"):
        device.pipeline(spirv("spec_types"), specialization={1: "5"})
    with pytest.raises(vk.PipelineInputError, match="not a valid SPIR-V module"):
        device.pipeline(b"\x03\x02\x23\x07" + b"\0" * 16)
    with pytest.raises(vk.VulkanTypeError, match="spirv must be SPIR-V bytes, got str"):
        device.pipeline("main.comp")
    assert device.pipeline(spirv("increment")).push_constant_size == 8  # the block's size, not the device maximum


def _without_block_decoration(module: bytes) -> bytes:
    """The module minus its OpDecorate ... Block: still well formed, no longer valid for Vulkan."""
    words = list(np.frombuffer(module, np.uint32))
    i = 5
    while i < len(words):
        count, opcode = int(words[i]) >> 16, int(words[i]) & 0xFFFF
        if opcode == 71 and count == 3 and words[i + 2] == 2:  # OpDecorate %struct Block
            return np.array(words[:i] + words[i + count:], np.uint32).tobytes()
        i += count
    raise AssertionError("no Block decoration")


def test_spirv_val_runs_before_the_driver(device):
    broken = _without_block_decoration(spirv("increment"))
    vkcoop_spirv_tools = toolchain_or_skip()
    vkcoop_spirv_tools.reflect(broken)  # reflection alone cannot tell
    with pytest.raises(vk.PipelineInputError, match="spirv-val rejects the module"):
        device.pipeline(broken)


# --- the pipeline cache checks itself ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["empty", "truncated", "bit-flipped"])
def test_a_corrupt_pipeline_cache_is_logged_dropped_and_rebuilt(tmp_path, caplog, kind):
    module = spirv("axpy")
    with vk.Device(validate=VALIDATE, features=["maintenance4"], pipeline_cache=tmp_path) as first:
        first.pipeline(module, specialization={0: 32})
        path = first.pipeline_cache_path
    path.write_bytes(corrupt(kind, path.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="spirv_tools.cache"):
        with vk.Device(validate=VALIDATE, features=["maintenance4"], pipeline_cache=tmp_path) as second, \
                second.empty(4, np.float32) as x, second.empty(4, np.float32) as out:
            second.run(second.pipeline(module, specialization={0: 32}), [x, x, out], groups=1, push=(1.0, 4))
            assert second.validation_messages == []
    assert "dropping corrupt cache entry" in caplog.text
    from spirv_tools.cache import read_entry
    assert read_entry(path) is not None  # rebuilt and written back as a good entry


def test_a_pipeline_cache_of_another_device_is_refused(tmp_path, caplog):
    from spirv_tools.cache import read_entry, write_entry
    with vk.Device(validate=VALIDATE, features=["maintenance4"], pipeline_cache=tmp_path) as first:
        first.pipeline(spirv("axpy"), specialization={0: 32})
        path = first.pipeline_cache_path
    data = bytearray(read_entry(path))
    own = int.from_bytes(data[8:12], "little")
    other = 0x1002 if own == 0x10DE else 0x10DE   # AMD's id on NVIDIA's GPU, NVIDIA's anywhere else
    data[8:12] = other.to_bytes(4, "little")      # another vendor's header, intact checksum
    write_entry(path, bytes(data))
    with caplog.at_level(logging.WARNING, logger="spirv_tools.cache"):
        with vk.Device(validate=VALIDATE, features=["maintenance4"], pipeline_cache=tmp_path) as second:
            second.pipeline(spirv("axpy"), specialization={0: 32})
    assert f"vendor 0x{other:x}" in caplog.text and "is not this device's" in caplog.text


# --- junk arguments: only the package's errors ----------------------------------------------------------------
_JUNK = st.one_of(st.none(), st.booleans(), st.floats(), st.integers(-2**70, 2**70), st.text(max_size=3),
                  st.lists(st.integers(-2, 70), max_size=4).map(tuple), st.just(np.float32(2.5)),
                  st.just(np.uint64(1 << 40)), st.binary(max_size=12))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=_JUNK, push=_JUNK, timeout=_JUNK)
def test_junk_run_arguments_raise_package_errors_only(device, groups, push, timeout):
    pipeline = _increment_pipeline(device)
    with device.empty(64, np.uint32) as counter:
        try:
            device.run(pipeline, [counter], groups, push, timeout_s=timeout)
        except vkcoop.Error:
            pass


@settings(max_examples=60, deadline=None)
@given(selector=_JUNK, validate=_JUNK, fence=_JUNK, features=_JUNK)
def test_junk_device_arguments_raise_package_errors_only(selector, validate, fence, features):
    try:
        vk.Device(selector, validate=validate, fence_timeout_s=fence, features=features, pipeline_cache=False).close()
    except vkcoop.Error:
        pass


_PIPELINES: dict = {}


def _increment_pipeline(device):
    if id(device) not in _PIPELINES:
        _PIPELINES.clear()
        _PIPELINES[id(device)] = device.pipeline(spirv("increment"))
    return _PIPELINES[id(device)]
