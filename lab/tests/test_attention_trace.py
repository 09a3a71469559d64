"""lab.attention_trace: a launch on the trace shader (lab/shaders/flash_attention_trace.comp), its device-clock
timeline, the median run, the plot; the trace shader's variants through spirv-val, and the product's without a clock;
on a GPU, a traced decode launch whose events keep the kernel's order."""
from __future__ import annotations

import re
import types

import numpy as np
import pytest

import spirv_tools
from lab import attention_trace as trace
from support import coopmat2_reason, toolchain_or_skip
from vkcoop import attention as attn
from vkcoop import shaders


def arrays(b, hq, hkv, sq, skv, d, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s).clip(-3, 3)).astype(np.float16)
            for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d))]


def decode_kernel(**options):
    return attn.AttentionKernel("fp16", 128, attn.AttentionTile(64, 16, 64), kv_splits=6, gqa_rows=True, **options)


def test_a_traced_launch_runs_the_flash_pass_on_the_trace_shader_with_one_more_buffer():
    q, k, v = arrays(1, 8, 2, 1, 1000, 128)
    launch = decode_kernel(waiting_merge=True, sm_count=132).launch(q, k, v)
    traced = trace.traced_launch(launch)
    (flash,) = traced.dispatches
    x, y, z = flash.groups
    assert flash.shader == trace.trace_shader() and flash.defines == launch.dispatches[0].defines
    assert (shaders.shader_root() / flash.shader).resolve() == trace.TRACE_SHADER
    assert flash.buffers == launch.dispatches[0].buffers + ("trace",)
    assert traced.outputs["trace"] == ((x * y * z * 10,), np.uint32)
    assert launch.dispatches[0].shader == attn.ATTENTION_SHADER and "trace" not in launch.outputs   # the launch is kept
    two_pass = decode_kernel().launch(q, k, v)
    flash, combine = trace.traced_launch(two_pass).dispatches
    assert flash.buffers[-1] == "trace" and combine == two_pass.dispatches[1]


def _words(groups, clocks_ns, sms):
    """A trace buffer: clocks_ns[workgroup][event] (0: not written), split into (low, high) words as uvec2."""
    x, y, z = groups
    pairs = np.zeros((x * y * z, trace.EVENTS + 1, 2), np.uint32)
    for workgroup, events in enumerate(clocks_ns):
        for event, ns in enumerate(events):
            pairs[workgroup, event] = (ns & 0xFFFFFFFF, ns >> 32)
        pairs[workgroup, trace.EVENTS, 0] = sms[workgroup]
    return pairs.reshape(-1)


def test_a_timeline_counts_from_the_first_start_and_leaves_unreached_events_out():
    """Six workgroups of (1, 2, 3): z 0-1 are slices, z 2 mergers. The clock crosses 2**32 ns in the middle, so
    both words count; an empty slice never stamps its first block."""
    base = (1 << 32) - 1_500
    slices = [[0, 2_000, 5_000, 6_000], [500, 3_000, 7_000, 7_500], [1_000, None, 1_200, 4_000],
              [250, 2_250, 9_000, 9_250]]
    mergers = [[100, 9_500, 11_000, None], [300, 9_400, 10_000, None]]
    clocks = [[0 if t is None else base + t for t in events] for events in slices + mergers]
    timeline = trace.parse_trace(_words((1, 2, 3), clocks, [5, 6, 5, 7, 8, 9]), (1, 2, 3), 2, "case")
    assert timeline.merger.tolist() == [False] * 4 + [True] * 2
    assert timeline.sm.tolist() == [5, 6, 5, 7, 8, 9] and timeline.tile_xy.tolist() == [0, 1, 0, 1, 0, 1]
    np.testing.assert_allclose(timeline.times_us[1], [0.5, 3.0, 7.0, 7.5])
    assert np.isnan(timeline.times_us[2, 1]) and np.isnan(timeline.times_us[4, 3])
    assert timeline.span_us == 11.0   # the first merger's end
    rows = dict(timeline.rows())
    assert rows["slice start"] == pytest.approx([0.0, 0.075, 0.375, 0.85, 1.0])
    assert rows["slice first block (duration)"][0] == 2.0 and rows["slice first block (duration)"][-1] == 2.5
    assert rows["merger merge (duration)"] == pytest.approx([0.6, 0.69, 1.05, 1.41, 1.5])
    assert timeline.lines()[0] == ("case: 6 workgroups (2 mergers) on 5 SMs, 11.00 us from the first start to the "
                                   "last end")


class FakeRunner:
    """What trace_runner needs of a VulkanAttention: its kernel, bind_launch, result, time and the bound trace
    buffer, which holds the next of ``spans_ns`` per run (a launch of two key slices, 1 x 1 x 2 workgroups)."""

    def __init__(self, kernel, spans_ns):
        self.kernel, self.spans, self.runs, self.bound = kernel, list(spans_ns), 0, None
        self.streams = []

    def bind_launch(self, launch):
        self.bound = launch

    def result(self):
        self.runs += 1
        self.streams.append(1)

    def time(self, iterations, warmup, warmup_seconds):
        self.runs += 1
        self.streams.append(iterations + warmup)

    def bound_buffer(self, name):
        assert name == "trace" and self.bound.dispatches[0].shader == trace.trace_shader()
        span = self.spans[self.runs - 1]
        words = _words((1, 1, 2), [[10, 20, 30, 40], [15, 25, span, span + 10]], [0, 1])
        return types.SimpleNamespace(read=lambda: words)


def test_the_runner_keeps_the_run_whose_span_is_the_median():
    kernel = attn.AttentionKernel("fp16", 128, attn.AttentionTile(64, 16, 64), kv_splits=2)
    q, k, v = arrays(1, 1, 1, 1, 64, 128)
    runner = FakeRunner(kernel, [9_000, 1_000, 5_000, 7_000, 3_000])
    timeline = trace.trace_runner(runner, (q, k, v), runs=5)
    assert runner.runs == 5 and timeline.span_us == 5.0
    assert runner.streams == [trace.STREAM_LAUNCHES + 1] * 5   # each run: launches back to back, the last one kept


def test_the_runner_can_trace_launches_that_each_start_from_an_idle_device():
    kernel = attn.AttentionKernel("fp16", 128, attn.AttentionTile(64, 16, 64), kv_splits=2)
    q, k, v = arrays(1, 1, 1, 1, 64, 128)
    runner = FakeRunner(kernel, [4_000, 2_000, 6_000])
    timeline = trace.trace_runner(runner, (q, k, v), runs=3, stream=None)
    assert runner.streams == [1, 1, 1] and timeline.span_us == 4.0


def test_the_plot_is_a_png(tmp_path):
    clocks = [[1_000, 2_000, 3_000, 3_500], [1_100, 2_500, 4_000, 0]]
    timeline = trace.parse_trace(_words((1, 1, 2), clocks, [0, 1]), (1, 1, 2), 1, "decode")
    path = tmp_path / "timeline.png"
    trace.plot_timeline(timeline, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_explore_refuses_a_bad_job_before_it_opens_a_device_for_a_trace(tmp_path, capsys):
    from lab import attention_explore
    with pytest.raises(SystemExit) as stop:
        attention_explore.main(["--job", "decode/fp16/96/8192/64:16x64", "--trace", str(tmp_path / "t")])
    assert stop.value.code == 2 and "head_dim=96: the kernel is built for 64 or 128" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


def test_explore_asks_for_the_device_clock_and_says_in_one_line_when_the_device_lacks_it(tmp_path, monkeypatch,
                                                                                         capsys):
    from lab import attention_explore
    from vkcoop import vk
    asked = {}

    def no_clock(*args, extensions=(), features=()):
        asked.update(extensions=list(extensions), features=list(features))
        raise vk.MissingFeatureError("a GPU", missing_features=["shaderDeviceClock"])

    monkeypatch.setattr(vk, "Device", no_clock)
    with pytest.raises(SystemExit) as stop:
        attention_explore.main(["--job", "decode/fp16/128/8192/64:16x64", "--trace", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert stop.value.code == 3 and err.startswith("attention_explore: ") and err.count("\n") == 1
    assert "shaderDeviceClock" in err
    assert set(trace.TRACE_EXTENSIONS) <= set(asked["extensions"])
    assert set(trace.TRACE_FEATURES) <= set(asked["features"])


@pytest.mark.toolchain
@pytest.mark.parametrize("tile, head_dim, options, specialization", [
    ((64, 16, 64), 128, {"kv_splits": 66, "gqa_rows": True, "waiting_merge": True},
     {"keys_aligned": True, "merge_layers": 16}),
    ((64, 16, 64), 128, {"kv_splits": 66, "gqa_rows": True}, {}),
    ((128, 64, 64), 128, {"causal": True}, {"aligned": True}),
    ((128, 128, 64), 64, {"causal": True, "kv_staged": True, "subgroup_rows": True}, {})])
def test_the_traced_shader_validates(tile, head_dim, options, specialization):
    """The trace points in both merges and on the staged and subgroup-row loops, the spec constants folded in."""
    from test_attention_sample import _validate_specialised
    toolchain = toolchain_or_skip().find_toolchain()
    kernel = attn.AttentionKernel("fp16", head_dim, attn.AttentionTile(*tile), **options)
    launch = trace.traced_launch(kernel.template_launch())
    variant = shaders.ShaderVariant(launch.dispatches[0].shader, tuple(sorted(kernel.defines().items())))
    _validate_specialised(toolchain, variant, kernel.specialization(**specialization))


def _calls(listing: str, function: str) -> int:
    """How often the disassembled module calls ``function`` (0 where it has none)."""
    ids = re.findall(rf'OpName (%\w+) "{function}\(', listing)
    return len(re.findall(rf"OpFunctionCall %\w+ {ids[0]}\b", listing)) if ids else 0


@pytest.mark.toolchain
def test_the_clock_is_in_the_trace_shader_and_nowhere_in_the_product():
    """Every variant of the trace shader reaches each trace point (slices: start, key loop done, stored, and the
    first-block check after each of the five key loops; mergers: start, wait over, merged), reads the device clock
    there and binds the trace buffer after the kernel's own; no variant of the product's shader carries any of it."""
    toolchain_or_skip()
    for variant in shaders.declared_variants(attn.ATTENTION_SHADER):
        waiting = dict(variant.defines)["SPLIT_MERGE"] == "WAIT"
        product = spirv_tools.disassemble(shaders.compile_variant(variant))
        traced_spirv = shaders.compile_variant(shaders.ShaderVariant(trace.trace_shader(), variant.defines))
        traced = spirv_tools.disassemble(traced_spirv)
        assert product.count("OpReadClockKHR") == 0 and "Trace" not in product
        assert traced.count("OpReadClockKHR") == 1                          # in trace_point, called at each point
        assert _calls(traced, "trace_point") == 1 + 3 + (3 if waiting else 0)   # 1: in trace_block_done
        assert _calls(traced, "trace_block_done") == 5
        bindings = {b["name"]: b["binding"] for b in spirv_tools.reflect(traced_spirv).to_dict()["bindings"]}
        assert bindings["Trace"] == (8 if waiting else 5) == max(bindings.values())
        assert sorted(set(bindings.values())) == list(range(bindings["Trace"] + 1))


_NO_GPU = coopmat2_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
def test_a_traced_decode_launch_keeps_the_kernels_order_and_its_result():
    """Every slice's events come in order, every merger's wait ends after the key loops of all its tile's slices
    (the device clock is one clock for all SMs), and the traced launch still matches the reference."""
    from vkcoop import vk
    q, k, v = arrays(1, 32, 8, 1, 9000, 128, seed=3)
    extensions = [*attn.EXTENSIONS, *trace.TRACE_EXTENSIONS]
    features = [*attn.attention_features(("fp16",)), *trace.TRACE_FEATURES]
    try:
        device = vk.Device(extensions=extensions, features=features)
    except vk.VulkanError as error:
        pytest.skip(f"no device clock here: {str(error).splitlines()[0]}")
    with device, attn.VulkanAttention(device, "fp16", 128, attn.AttentionTile(64, 16, 64), kv_splits=24,
                                      gqa_rows=True, waiting_merge=True) as runner:
        timeline = trace.trace_runner(runner, (q, k, v), runs=3)
        out, lse = runner.outputs()
    t, slices = timeline.times_us, ~timeline.merger
    assert timeline.merger.sum() > 0 and (slices.sum() == 8 * 24)
    assert np.all(np.diff(t[slices][:, [0, 2, 3]], axis=1) >= 0)
    for tile in range(8):
        waits = t[timeline.merger & (timeline.tile_xy == tile), 1]
        assert waits.min() >= np.nanmax(t[slices & (timeline.tile_xy == tile), 2])
    ref, ref_lse = attn.reference_attention(q, k, v)
    assert attn.check_attention(out, ref, attn.tolerance_for(q, k, v))[0]


def test_explore_writes_each_traced_configuration_as_a_plot_and_json_named_without_colons(tmp_path):
    """What ``attention_explore --trace`` does after a configuration's timing, on the FakeRunner's launches."""
    import json

    from lab import attention_explore
    from vkcoop.bench.attention import make_cases
    (case,) = make_cases(["decode"], ["fp16"], [128], [8192], [8192], [False], decode_heads=[(32, 8)])
    kernel = attn.AttentionKernel("fp16", 128, attn.AttentionTile(64, 16, 64), kv_splits=2)
    config = attn.parse_attention_config("64:16x64s2")
    path = attention_explore._ConfigPath(None, None, config, None, trace_dir=str(tmp_path))
    path.runner, path.inputs, path.case = FakeRunner(kernel, [4_000] * 30), arrays(1, 1, 1, 1, 64, 128), case
    path._trace()
    png, document = sorted(tmp_path.glob("trace_*.png")), sorted(tmp_path.glob("trace_*.json"))
    assert len(png) == 1 and len(document) == 1 and png[0].name.endswith("_64_16x64s2.png")
    record = json.loads(document[0].read_text())
    assert record["span_us"] == 4.0 and record["label"] == f"{case.label} 64:16x64s2"
    assert record["rows"]["slice start"] == pytest.approx([0.0, 0.0005, 0.0025, 0.0045, 0.005])
    assert path.trace_lines[0].startswith(f"{case.label} 64:16x64s2: 2 workgroups (0 mergers)")
