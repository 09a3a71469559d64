"""The path from ``attention()`` through :class:`VulkanAttention` and :class:`vkcoop.gemm.vulkan.VulkanGemm` to the
buffers, on a stand-in device whose "dispatch" runs the numpy model of the shader (fp32, P rounded) on the bound
buffers. It checks the plumbing (pipelines per distinct dispatch, buffers in binding order, outputs read back, the
split pass feeding the combine pass, the push constants' scale), not the shader: that is the gpu tests' job."""
from __future__ import annotations

import contextlib
import math
import types

import numpy as np
import pytest

import spirv_tools
from vkcoop import attention as attn
from vkcoop.attention.kernel import LOG2_E
from vkcoop.gemm import BF16
from vkcoop.samples.fixtures import H200_CAPS

from support import toolchain_or_skip

pytestmark = pytest.mark.toolchain


@pytest.fixture(autouse=True)
def _toolchain():
    """The stand-in device still compiles the real shaders (VulkanGemm creates pipelines from SPIR-V)."""
    toolchain_or_skip()


class Buffer:
    def __init__(self, array):
        self.array = array

    def read(self):
        return self.array.copy()

    def close(self):
        pass


class Pipeline:
    def __init__(self, specialization):
        self.specialization, self.name = specialization, "fake"

    def close(self):
        pass


def run_flash(pipeline, buffers, push):
    s = pipeline.specialization
    q, k, v = (b.array for b in buffers[:3])
    tile = attn.AttentionTile(s["WORKGROUP_SIZE"], s["BR"], s["BC"])
    scale = float(push[6]) / LOG2_E
    out, lse = attn.blocked_attention(q, k, v, tile, causal=s["CAUSAL"], scale=scale, kv_splits=s["KV_SPLITS"],
                                      gqa_rows=s["GQA_ROWS"], emulate=True, combine=False)
    if s["KV_SPLITS"] == 1:
        out, lse = out[0], lse[0]
    buffers[3].array[...] = out.astype(buffers[3].array.dtype)
    buffers[4].array[...] = lse
    if len(buffers) == 8:   # the merge in the same dispatch (SPLIT_MERGE=WAIT): partials, then O and lse
        run_combine([buffers[3], buffers[4], buffers[5], buffers[6]])


def run_combine(buffers):
    out, lse = attn.combine_splits(buffers[0].array.astype(np.float64), buffers[1].array.astype(np.float64))
    buffers[2].array[...] = out.astype(buffers[2].array.dtype)
    buffers[3].array[...] = lse


class Commands:
    def __init__(self):
        self.recorded = []

    @contextlib.contextmanager
    def recording(self):
        yield

    def dispatch(self, pipeline, buffers, groups, push=None, label=None):
        self.recorded.append((pipeline, buffers, push))

    def submit(self, **kwargs):
        for pipeline, buffers, push in self.recorded:   # in order: the split pass before the combine pass
            run_flash(pipeline, buffers, push) if "BR" in pipeline.specialization else run_combine(buffers)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class Physical:
    """The H100's and H200's limits: 48 KB of shared memory per workgroup, 8 KB of it reserved."""
    name = "stand-in"
    limits = types.SimpleNamespace(maxComputeSharedMemorySize=49152)

    def flexible_shapes(self):
        return H200_CAPS.flexible

    def cooperative_matrix2_properties(self):
        return {"cooperativeMatrixFlexibleDimensionsMaxDimension": 256,
                "cooperativeMatrixWorkgroupScopeReservedSharedMemory": 8192}


class Device:
    def __init__(self, *args, **kwargs):
        self.physical, self.pipelines, self.closed = Physical(), [], False

    def pipeline(self, spirv, *, name, specialization, **options):
        assert spirv_tools.reflect(spirv).entry_point == "main"
        self.pipelines.append(Pipeline(specialization))
        return self.pipelines[-1]

    def upload(self, array, name=""):
        return Buffer(np.array(array))

    def empty(self, shape, dtype, name=""):
        return Buffer(np.zeros(shape, dtype))

    def command_buffer(self, **kwargs):
        return Commands()

    def close(self):
        self.closed = True


def inputs(b, hq, hkv, sq, skv, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple((rng.integers(-32, 33, size=s) / 16).astype(np.float32).astype(dtype)
                 for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)))


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal, splits", [(False, None), (True, 1), (False, 3)])
def test_attention_reaches_the_buffers_and_reads_o_and_lse_back(monkeypatch, dtype, causal, splits):
    from vkcoop import vk
    monkeypatch.setattr(vk, "Device", Device)
    q, k, v = inputs(1, 4, 2, 70, 150, 64, dtype)
    device = Device()
    out, lse = attn.attention(q, k, v, causal=causal, scale=0.2, device=device, kv_splits=splits, return_lse=True)
    ref, ref_lse = attn.reference_attention(q, k, v, causal=causal, scale=0.2)
    tolerance = attn.tolerance_for(q, k, v, scale=0.2)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == q.shape[:3]
    assert attn.check_attention(out, ref, tolerance)[0] and attn.check_attention(lse, ref_lse, tolerance, lse=True)[0]
    if splits is None:   # chosen to fill the GPU: 1 query tile x 4 heads are far fewer than 528 workgroups, and
        # head_dim 64 prefill takes FlashAttention-2's split, 64 keys per block, so 150 keys allow 3 slices
        splits = attn.choose_kv_splits(attn.AttentionShape(1, 4, 2, 70, 150, 64), attn.AttentionTile(128, 128, 64))
        assert splits == 3
    flash = device.pipelines[0].specialization
    assert flash["KV_SPLITS"] == splits
    assert (flash["BR"], flash["BC"], flash["KV_STAGED"]) == (128, 64, True)
    # the template launch names every pipeline: the combine pass's too when split; a given device stays open
    assert len(device.pipelines) == (2 if splits > 1 else 1) and not device.closed


def test_attention_opens_and_closes_its_own_device(monkeypatch):
    from vkcoop import vk
    opened = []

    class Recording(Device):
        def __init__(self, *args, **kwargs):
            super().__init__()
            self.features = kwargs["features"]
            opened.append(self)

    monkeypatch.setattr(vk, "Device", Recording)
    q, k, v = inputs(2, 2, 2, 1, 300, 128, BF16)
    out = attn.attention(q, k, v)   # decode: the key splits are chosen to fill the GPU, merged in the same dispatch
    assert len(opened) == 1 and opened[0].closed
    ref, _ = attn.reference_attention(q, k, v)
    assert attn.check_attention(out, ref, attn.tolerance_for(q, k, v))[0]
    assert len(opened[0].pipelines) == 1 and opened[0].pipelines[0].specialization["MERGE_LAYERS"] >= 1
    assert "shaderBFloat16CooperativeMatrix" in opened[0].features
    assert opened[0].pipelines[0].specialization["KV_SPLITS"] == attn.choose_kv_splits(
        attn.AttentionShape(2, 2, 2, 1, 300, 128), attn.AttentionTile(128, 64, 64))
    assert math.isfinite(float(out.astype(np.float32).sum()))


@pytest.mark.parametrize("sms, waiting", [(132, True), (4, False)])
def test_the_configuration_reports_the_merge_the_bound_launch_takes(sms, waiting):
    """8 (x, y) tiles: on 132 SMs the waiting merge spreads its mergers and the launch is one dispatch; on 4 it takes
    the combine pass, and the configuration (what bench attention prints) says so once bound."""
    q, k, v = inputs(1, 8, 8, 1, 1000, 64, np.float16)
    config = attn.AttentionConfig(attn.AttentionTile(64, 16, 64), kv_splits=5, waiting_merge=True)
    with attn.VulkanAttention.from_config(Device(), "fp16", attn.AttentionShape(1, 8, 8, 1, 1000, 64), config,
                                          sm_count=sms) as runner:
        assert runner.config().waiting_merge   # asked for
        runner.bind(q, k, v)
        label = runner.config().label()
        assert runner.config().waiting_merge is waiting and attn.parse_attention_config(label).waiting_merge is waiting
        out, _ = runner.outputs()
    ref, _ = attn.reference_attention(q, k, v)
    assert attn.check_attention(out, ref, attn.tolerance_for(q, k, v))[0]


def test_the_configuration_reports_the_causal_order_the_bound_launch_takes():
    """A causal prefill launch reorders its query tiles in chunks of (head, batch) pairs: the configuration leaves the
    order open until bound, then names the one the launch runs, in a label that takes it back."""
    shape = attn.AttentionShape(2, 8, 8, 256, 256, 64)   # 4 query tiles x 16 pairs, all in one tail chunk
    q, k, v = inputs(2, 8, 8, 256, 256, 64, np.float16)
    config = attn.AttentionConfig(attn.AttentionTile(128, 64, 32), kv_splits=1)
    with attn.VulkanAttention.from_config(Device(), "fp16", shape, config, causal=True, sm_count=4) as runner:
        assert (runner.config().order_chunk, runner.config().order_tail) == (None, None)
        runner.bind(q, k, v)
        assert runner.config().label() == "128:64x32s1nw16c1t16k"
    with attn.VulkanAttention.from_config(Device(), "fp16", shape, attn.parse_attention_config("128:64x32s1c3t4"),
                                          causal=True) as runner:
        runner.bind(q, k, v)
        assert [int(x) for x in runner._bound[0].dispatches[0].push[7:]] == [4, 4]
        assert (runner.config().order_chunk, runner.config().order_tail) == (3, 4)
