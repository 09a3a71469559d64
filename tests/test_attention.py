"""vkcoop.attention without a GPU: input errors, tiles from the H200 table, the Launch, the float64 reference and
its properties, the shader's block loop in numpy, and the tolerance (held by an fp32 emulation, and tight enough to
catch an off-by-one mask). The dispatches themselves are in test_attention_sample.py (marked gpu)."""
from __future__ import annotations

import heapq
import math
import re

import numpy as np
import pytest

from vkcoop import attention as attn
from vkcoop import vk
from vkcoop.attention import kernel as kernel_module
from vkcoop.gemm import BF16, GemmInputError
from vkcoop.paths import shader_root
from vkcoop.samples.fixtures import H200_CAPS

FLEX = H200_CAPS.flexible


def arrays(b=1, hq=2, hkv=2, sq=5, skv=7, d=64, dtype=np.float16, seed=0, limit=1.0):
    rng = np.random.default_rng(seed)

    def make(shape):
        return (rng.integers(-16, 17, size=shape) * (limit / 16)).astype(np.float32).astype(dtype)

    return make((b, hq, sq, d)), make((b, hkv, skv, d)), make((b, hkv, skv, d))


# --------------------------------------------------------------------------- input errors
def _bad_inputs():
    q, k, v = arrays()
    return [
        ((q.tolist(), k, v), r"^q must be a numpy array"),
        ((q[0], k, v), r"^q must be a non-empty 4-D array"),
        ((q[:, :, :0], k, v), r"^q must be a non-empty 4-D array"),
        ((q.astype(np.float32), k, v), r"^dtype float32: attention takes float16 or bfloat16"),
        ((q, k.astype(BF16), v), r"^k has dtype bfloat16; q has float16"),
        ((q, k, v[:, :, :3]), r"^v has shape \(1, 2, 3, 64\); it must equal k's"),
        ((q, np.concatenate([k, k]), np.concatenate([v, v])), r"^k has batch 2; q has 1"),
        ((q, k[..., :32], v[..., :32]), r"^k has head_dim 32; q has 64"),
        ((q[..., :48], k[..., :48], v[..., :48]), r"^head_dim=48: the kernel is built for 64 or 128"),
        ((np.concatenate([q, q[:, :1]], axis=1), k, v), r"^k has 2 heads; q's 3 heads must be a multiple"),
    ]


@pytest.mark.parametrize("args, message", _bad_inputs())
def test_bad_inputs_are_one_line_errors_naming_the_parameter(args, message):
    with pytest.raises(attn.AttentionInputError, match=message) as info:
        attn.check_inputs(*args)
    assert "\n" not in str(info.value) and isinstance(info.value, GemmInputError)


@pytest.mark.parametrize("scale, message", [(float("nan"), "scale=nan must be finite"),
                                            ("0.1", "scale must be a number"), (True, "scale must be a number")])
def test_bad_scales_are_refused(scale, message):
    with pytest.raises(attn.AttentionInputError, match=message):
        attn.resolve_scale(scale, 64)
    assert attn.resolve_scale(None, 64) == 0.125 and attn.resolve_scale(2, 128) == 2.0


def test_attention_refuses_bad_input_before_opening_a_device(monkeypatch):
    from vkcoop import vk

    def no_device(*args, **kwargs):
        raise AssertionError("a device was opened")

    monkeypatch.setattr(vk, "Device", no_device)
    q, k, v = arrays()
    with pytest.raises(attn.AttentionInputError, match="^v has shape"):
        attn.attention(q, k, v[:, :1])
    with pytest.raises(attn.AttentionInputError, match="^scale=inf"):
        attn.attention(q, k, v, scale=float("inf"))
    with pytest.raises(attn.AttentionInputError, match="^kv_splits=0"):
        attn.attention(q, k, v, kv_splits=0)


# --------------------------------------------------------------------------- tiles
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("head_dim", attn.HEAD_DIMS)
def test_tiles_come_from_the_h200_table(dtype, head_dim):
    # a block of K holds 8192 elements: 64 keys of 128, 128 keys of 64
    keys = {64: 128, 128: 64}[head_dim]
    assert attn.choose_attention_tile(FLEX, dtype, head_dim).label() == f"128:64x{keys}"
    assert attn.choose_attention_tile(FLEX, dtype, head_dim, invocations=256).label() == f"256:64x{keys}"
    # 128 invocations: M 32, N and K 16; 256: M 32, N 32 (BC rounds to the lcm of N and K).
    assert attn.choose_attention_tile(FLEX, dtype, head_dim, target=(40, 40)).label() == "128:64x48"
    assert attn.choose_attention_tile(FLEX, dtype, head_dim, invocations=256, target=(40, 40)).label() == "256:64x64"
    assert attn.choose_attention_tile(FLEX, dtype, head_dim, invocations=64, target=(16, 16)).label() == "64:16x16"


@pytest.mark.parametrize("label, message", [
    ("128:48x64", "matches no workgroup-scope"), ("256:64x48", "matches no workgroup-scope"),
    ("512:64x64", "matches no workgroup-scope"), ("128:64x512", "exceeds"), ("128:0x64", "must be positive")])
def test_tiles_that_fit_no_row_are_refused(label, message):
    with pytest.raises(attn.AttentionInputError, match=message):
        attn.check_attention_tile(FLEX, "fp16", 64, attn.parse_attention_tile(label), max_dimension=256)


@pytest.mark.parametrize("label, head_dim, rows", [("128:64x64", 128, 16), ("128:128x64", 64, 32),
                                                   ("64:32x128", 64, 16), ("256:128x64", 128, 16)])
def test_subgroup_rows_are_checked_against_the_subgroup_scope_row(label, head_dim, rows):
    """SCOPE=SUBGROUP: each 32-wide subgroup owns BR / subgroups rows, which the subgroup-scope row's M (16 on the
    H200 table) must divide, whatever the workgroup-scope rows say (128:128x64's BR is fine for both)."""
    tile = attn.parse_attention_tile(label)
    assert tile.subgroup_rows() == rows
    attn.check_attention_tile(FLEX, "fp16", head_dim, tile, subgroup_rows=True)
    assert attn.stats_columns(FLEX, "fp16", tile, subgroup_rows=True) == 16


@pytest.mark.parametrize("label", ["128:32x64", "100:50x64", "128:66x64", "128:64x24"],
                         ids=["8 rows each", "not whole subgroups", "BR not shared evenly", "BC not a multiple"])
def test_subgroup_rows_that_fit_no_row_are_refused(label):
    tile = attn.parse_attention_tile(label)
    with pytest.raises(attn.AttentionInputError, match="subgroup rows need whole 32-wide subgroups") as info:
        attn.check_attention_tile(FLEX, "fp16", 64, tile, subgroup_rows=True)
    assert "\n" not in str(info.value) and "16/16/16" in str(info.value)


def test_a_subgroup_rows_kernel_asks_for_32_wide_subgroups_on_its_flash_pass_only():
    q, k, v = arrays(hq=4, hkv=1, sq=1, skv=300, d=128)
    kernel = attn.AttentionKernel("fp16", 128, attn.AttentionTile(64, 32, 64), kv_splits=3, gqa_rows=True,
                                  subgroup_rows=True)
    flash, combine = kernel.launch(q, k, v).dispatches
    assert flash.defines["SCOPE"] == "SUBGROUP" and "subgroup-rows" in kernel.name
    assert flash.pipeline_options == {"required_subgroup_size": 32, "full_subgroups": True}
    assert combine.pipeline_options == {}
    assert {"subgroupSizeControl", "computeFullSubgroups"} <= set(attn.attention_features(("fp16",)))
    with pytest.raises(attn.AttentionInputError, match="whole 32-wide subgroups"):
        attn.AttentionKernel("fp16", 128, attn.AttentionTile(96, 64, 64), subgroup_rows=True)


@pytest.mark.parametrize("shape, tile, gqa, aligned, keys", [
    ((1, 2, 2, 128, 256, 64), (128, 64, 128), False, True, True),
    ((1, 2, 2, 63, 256, 64), (128, 64, 128), False, False, True),
    ((1, 32, 8, 1, 4096, 128), (64, 16, 64), True, False, True),
    ((1, 32, 8, 1, 4099, 128), (64, 16, 64), True, False, False),
    ((1, 2, 2, 128, 200, 64), (128, 64, 128), False, False, False)],
    ids=["aligned", "ragged rows", "decode", "decode ragged keys", "ragged keys"])
def test_keys_aligned_leaves_out_the_clamped_key_loop_whatever_the_rows(shape, tile, gqa, aligned, keys):
    b, hq, hkv, sq, skv, d = shape
    q, k, v = arrays(b, hq, hkv, sq, skv, d)
    kernel = attn.AttentionKernel("fp16", d, attn.AttentionTile(*tile), gqa_rows=gqa)
    spec = kernel.launch(q, k, v).dispatches[0].specialization
    assert (spec["ALIGNED"], spec["KEYS_ALIGNED"]) == (aligned, keys)


def test_tile_labels_parse_back_and_bad_ones_are_refused():
    tile = attn.AttentionTile(256, 64, 32)
    assert attn.parse_attention_tile(tile.label()) == tile
    with pytest.raises(attn.AttentionInputError, match="INVOCATIONS:BRxBC"):
        attn.parse_attention_tile("64x64")
    with pytest.raises(attn.AttentionInputError, match="lists no workgroup-scope"):
        attn.choose_attention_tile((), "fp16", 64)
    with pytest.raises(attn.AttentionInputError, match="workgroupInvocations=96"):
        attn.choose_attention_tile(FLEX, "fp16", 64, invocations=96)


# --------------------------------------------------------------------------- the launch
def _shader_text() -> str:
    """flash_attention.comp and the kernel it includes (flash_attention.glsl)."""
    comp = shader_root() / attn.ATTENTION_SHADER
    return comp.read_text() + comp.with_suffix(".glsl").read_text()


def test_the_launch_matches_the_shaders_constants_push_block_and_grid():
    q, k, v = arrays(b=2, hq=6, hkv=2, sq=70, skv=90)
    kernel = attn.AttentionKernel("fp16", 64, attn.AttentionTile(128, 64, 32), causal=True)
    (flash,) = kernel.launch(q, k, v, scale=0.5).dispatches
    declared = re.findall(r"constant_id = (\d+)\) const \w+ (\w+)", _shader_text())
    assert list(flash.specialization) == [name for _, name in declared]
    assert flash.specialization["CAUSAL"] is True and flash.pipeline_options == {}
    assert flash.defines == {"ELEMENT": "F16", "SPLIT_MERGE": "PASS", "SCOPE": "WORKGROUP"}
    members = re.search(r"uniform Shape \{(.*?)\}", _shader_text(), re.S).group(1)
    assert len(flash.push) == len(re.findall(r"\w+(?=[,;])", members)) == 9
    assert [int(x) for x in flash.push[:6]] == [2, 70, 90, 6, 2, 3]
    assert flash.push[6].dtype == np.float32 and math.isclose(flash.push[6], 0.5 / math.log(2), rel_tol=1e-7)
    assert [int(x) for x in flash.push[7:]] == [1, 12]   # all 6 x 2 (head, batch) pairs in the tail: 2 tiles each
    assert flash.groups == (2, 6, 2) and flash.buffers == ("Q", "K", "V", "O", "LSE")


def test_the_causal_order_keeps_chunks_in_l2_and_a_wave_in_the_tail():
    mb = 1 << 20
    assert kernel_module.ORDER_KV_BYTES == 8 * mb
    assert attn.causal_order(32, 128, 1 * mb, 528) == attn.CausalOrder(8, 17)    # d64 prefill: 17 x 32 >= 528
    assert attn.causal_order(64, 64, 2 * mb, 528) == attn.CausalOrder(4, 9)      # d128
    assert attn.causal_order(64, 4, 1 * mb, 528) == attn.CausalOrder(4, 4)       # no more pairs than there are
    assert attn.causal_order(2048, 16, 64 * mb, 528) == attn.CausalOrder(1, 1)   # one head alone passes a wave
    assert attn.causal_order(32, 128, 1 * mb) == attn.CausalOrder(8, 17)         # the default: 4 per SM of 132
    assert attn.CausalOrder(8, 17).push(128) == (14, 17)                         # 111 pairs in chunks of 7-8
    assert attn.CausalOrder(8, 17).push(10) == (1, 10)

    def push(shape_args, **options):
        q, k, v = arrays(**shape_args)
        kernel = attn.AttentionKernel("fp16", 64, attn.AttentionTile(128, 64, 32), **options)
        return [int(x) for x in kernel.launch(q, k, v).dispatches[0].push[7:]]

    causal_prefill = dict(b=2, hq=8, hkv=2, sq=256, skv=256)   # 4 query tiles x 16 pairs of 64 KB
    assert push(causal_prefill, causal=True) == [1, 16]
    assert push(causal_prefill, causal=True, sm_count=4) == [1, 16]    # chunks of 16 fit L2: the tail is the chunk
    assert push(causal_prefill, causal=True, order_chunk=3, order_tail=4) == [4, 4]
    assert push(causal_prefill) == [1, 0] and push(causal_prefill, causal=True, kv_splits=2) == [1, 0]
    for name in ("order_chunk", "order_tail"):
        with pytest.raises(attn.AttentionInputError, match=f"{name}=0 must be a whole number >= 1"):
            attn.AttentionKernel("fp16", 64, attn.AttentionTile(128, 64, 32), causal=True, **{name: 0})


@pytest.mark.parametrize("tiles, y, z, chunks, tail", [(3, 5, 1, 3, 0), (4, 3, 2, 4, 2), (7, 2, 3, 6, 1),
                                                       (5, 4, 3, 1, 5), (2, 1, 1, 1, 1), (6, 5, 2, 3, 10),
                                                       (3, 7, 1, 9, 0), (4, 8, 1, 3, 3)])
def test_the_causal_schedule_runs_every_tile_once_heaviest_first_in_each_chunk(tiles, y, z, chunks, tail):
    schedule = attn.causal_schedule(tiles, y, z, chunks, tail)
    grid = {(x, j, i) for x in range(tiles) for j in range(y) for i in range(z)}
    assert len(schedule) == len(grid) and {tuple(map(int, row)) for row in schedule} == grid
    pairs = schedule[:, 1] + y * schedule[:, 2]
    # chunk boundaries: where a pair's heaviest tile follows a lighter one
    starts = [0] + [i for i in range(1, len(schedule)) if schedule[i, 0] > schedule[i - 1, 0]] + [len(schedule)]
    sizes = [len(set(pairs[a:b].tolist())) for a, b in zip(starts, starts[1:])]
    body = sizes[:-1] if 0 < tail < y * z else sizes
    assert sum(sizes) == y * z and max(body) - min(body) <= 1
    assert len(body) == (min(chunks, y * z - tail) if tail < y * z else 1)
    if 0 < tail < y * z:
        assert sizes[-1] == tail and set(pairs[starts[-2]:].tolist()) == set(range(y * z - tail, y * z))
    for a, b in zip(starts, starts[1:]):
        assert np.all(np.diff(schedule[a:b, 0]) <= 0)                              # heaviest tile first
    if chunks >= y * z and tail <= 1:   # one pair per chunk: each head's tiles together (the order with key slices)
        old = [(tiles - 1 - x, j, i) for i in range(z) for j in range(y) for x in range(tiles)]
        assert [tuple(map(int, row)) for row in schedule] == old


def _greedy_makespan(costs, slots: int) -> float:
    """The time a GPU that starts each workgroup on the first free slot, in grid order, needs for ``costs``."""
    free = [0.0] * slots
    for cost in costs:
        heapq.heapreplace(free, free[0] + cost)
    return max(free)


@pytest.mark.parametrize("tiles, pairs, pair_mb", [(32, 128, 1), (64, 64, 2), (64, 128, 1), (48, 100, 1)])
def test_the_causal_tail_chunk_leaves_no_long_tile_for_the_end(tiles, pairs, pair_mb):
    """Why the order exists: causal query tiles costing their key blocks, started in grid order on 264 workgroup
    slots (2 per SM, as the prefill tiles run). Each head's tiles heaviest first start the last heads' longest tiles
    near the end (3-11 % over the bound); the chosen order ends at least 2 % sooner."""
    slots = 264
    def makespan(chunks, tail):
        return _greedy_makespan([x + 1 for x, _, _ in attn.causal_schedule(tiles, pairs, 1, chunks, tail)], slots)
    bound = pairs * tiles * (tiles + 1) / 2 / slots
    order = attn.causal_order(tiles, pairs, pair_mb << 20, 528)
    per_head = makespan(pairs, 0)
    assert per_head > 1.03 * bound
    assert makespan(*order.push(pairs)) < per_head / 1.02


def test_staging_k_and_v_follows_the_vectors_each_invocation_holds():
    """KV_STAGED copies a block of BC x head_dim / 8 16-byte vectors, the same count per invocation: by default only
    where that count is whole and at most MAX_STAGED_VECTORS (the prefill tiles, not decode's 64-invocation ones)."""
    def staged(d, tile, **options):
        return attn.AttentionKernel("fp16", d, attn.AttentionTile(*tile), **options).specialization()["KV_STAGED"]

    assert kernel_module.MAX_STAGED_VECTORS == 8
    assert staged(128, (128, 64, 64)) is True and staged(64, (128, 64, 128)) is True      # 8 vectors each
    assert staged(128, (256, 128, 64)) is True                                          # 4
    assert staged(128, (64, 16, 64)) is False and staged(64, (64, 16, 128)) is False      # decode: 16
    assert staged(128, (64, 16, 64), kv_staged=True) is True
    assert staged(128, (128, 64, 64), kv_staged=False) is False
    assert staged(64, (512, 64, 32)) is False                                           # half a vector each
    for uneven in ((64, (512, 64, 32)), (128, (384, 192, 64))):                         # 1/2 and 2 2/3 each
        with pytest.raises(attn.AttentionInputError, match="shared evenly") as info:
            staged(*uneven, kv_staged=True)
        assert "\n" not in str(info.value)


def test_a_split_launch_adds_the_combine_pass():
    q, k, v = arrays(b=1, hq=8, hkv=2, sq=1, skv=300, d=128)
    launch = attn.AttentionKernel("bf16", 128, attn.AttentionTile(128, 64, 64), kv_splits=3).launch(
        q.astype(BF16), k.astype(BF16), v.astype(BF16))
    flash, combine = launch.dispatches
    assert flash.groups == (1, 8, 3) and flash.buffers[3:] == ("O partial", "LSE partial")
    assert combine.shader == attn.COMBINE_SHADER and combine.buffers == ("O partial", "LSE partial", "O", "LSE")
    # one combine workgroup per row and 32 columns of head_dim
    assert [int(x) for x in combine.push] == [8, 128, 3] and combine.groups == (8 * 128 // 32, 1, 1)
    assert launch.outputs["O partial"] == ((3, 1, 8, 1, 128), np.float32)
    assert launch.outputs["O"] == ((1, 8, 1, 128), BF16) and launch.result == "O"


def test_a_waiting_merge_launch_puts_its_mergers_after_the_slices():
    q, k, v = arrays(b=2, hq=32, hkv=8, sq=1, skv=8192, d=128)
    kernel = attn.AttentionKernel("fp16", 128, attn.AttentionTile(64, 16, 64), kv_splits=66, gqa_rows=True,
                                  waiting_merge=True, sm_count=132)
    launch = kernel.launch(q, k, v)
    (flash,) = launch.dispatches
    assert flash.defines == {"ELEMENT": "F16", "SPLIT_MERGE": "WAIT", "SCOPE": "WORKGROUP"} and "waiting" in kernel.name
    assert flash.buffers == ("Q", "K", "V", "O partial", "LSE partial", "O", "LSE", "arrivals")
    # no group slots; 4 stacked rows x 32 quads per tile, 8 quads per 64-invocation merger round: 16 layers,
    # 8 kv heads x 16 = 128 mergers, not more than the 132 SMs
    assert launch.outputs["O partial"] == ((66, 2, 32, 1, 128), np.float32)
    assert flash.specialization["MERGE_LAYERS"] == 16 and flash.groups == (1, 8, 2 * 66 + 16)
    assert launch.outputs["arrivals"] == ((8 * 2 * 16,), np.uint32)   # a counter per merger
    lanes = re.search(r"const uint MERGE_LANES = (\d+);", (shader_root() / "attention/merge_waiting.glsl").read_text())
    assert int(lanes.group(1)) == kernel_module.MERGE_LANES


def test_the_waiting_merge_sizes_its_layers_by_the_rows_a_tile_really_holds():
    """Without GQA rows a decode tile of 16 rows holds seq_q of them: 3 rows x 16 quads at head_dim 64, 8 quads per
    round of a 64-invocation merger, 6 layers per (x, y) tile, after the batch's slices in z."""
    q, k, v = arrays(b=2, hq=4, hkv=4, sq=3, skv=777, d=64)
    kernel = attn.AttentionKernel("fp16", 64, attn.AttentionTile(64, 16, 128), kv_splits=9, waiting_merge=True,
                                  sm_count=132)
    (flash,) = kernel.launch(q, k, v).dispatches
    assert flash.specialization["MERGE_LAYERS"] == 6 and flash.groups == (1, 4, 2 * 9 + 6)
    assert kernel.launch(q, k, v).outputs["arrivals"] == ((1 * 4 * 2 * 6,), np.uint32)


@pytest.mark.parametrize("tiles_xy, rows, sm_count, layers", [
    (8, 4, 132, 16), (8, 4, 64, 8), (8, 16, 132, 16), (1, 16, 132, 64), (8, 4, None, 2), (20, 4, None, 0),
    (133, 1, 132, 0), (132, 1, 132, 1)])
def test_the_waiting_merge_spreads_at_most_one_merger_per_sm(tiles_xy, rows, sm_count, layers):
    """Layers enough for one round per output quad, capped so that all mergers together take at most one slot per
    SM (MIN_SM_COUNT where the driver does not say); 0 where one layer per tile would already pass that."""
    got = kernel_module.waiting_mergers(tiles_xy, rows, 128, 64, sm_count)
    assert got == layers and tiles_xy * got <= (sm_count or kernel_module.MIN_SM_COUNT)


def test_a_waiting_merge_that_cannot_spread_falls_back_to_the_combine_pass():
    q, k, v = arrays(b=1, hq=8, hkv=8, sq=1, skv=1000, d=64)
    kernel = attn.AttentionKernel("fp16", 64, attn.AttentionTile(64, 16, 64), kv_splits=5, waiting_merge=True,
                                  sm_count=4)
    launch = kernel.launch(q, k, v)
    flash, combine = launch.dispatches   # 8 (x, y) tiles on 4 SMs
    assert flash.defines["SPLIT_MERGE"] == "PASS" and combine.shader == attn.COMBINE_SHADER
    assert not kernel.merges_waiting(launch)   # what VulkanAttention.config() reports of a bound launch
    spread = attn.AttentionKernel("fp16", 64, attn.AttentionTile(64, 16, 64), kv_splits=5, waiting_merge=True,
                                  sm_count=8)
    assert spread.merges_waiting(spread.launch(q, k, v))
    assert not attn.AttentionKernel("fp16", 64, attn.AttentionTile(64, 16, 64), waiting_merge=True).waiting_merge


def test_a_gqa_rows_launch_has_one_workgroup_row_per_kv_head():
    q, k, v = arrays(b=2, hq=8, hkv=2, sq=5, skv=300, d=64)
    kernel = attn.AttentionKernel("fp16", 64, attn.AttentionTile(64, 16, 64), kv_splits=3, gqa_rows=True)
    flash, _ = kernel.launch(q, k, v).dispatches
    assert flash.specialization["GQA_ROWS"] is True and "gqa-rows" in kernel.name
    assert flash.groups == (2, 2, 6)   # 4 heads x 5 queries = 20 rows in tiles of 16; kv heads; batch x splits


def test_kernel_refuses_other_dtypes_splits_and_grid_limits():
    q, k, v = arrays()
    kernel = attn.AttentionKernel("bf16", 64, attn.AttentionTile(128, 64, 64))
    with pytest.raises(attn.AttentionInputError, match="this kernel is built for bf16"):
        kernel.launch(q, k, v)
    with pytest.raises(attn.AttentionInputError, match="kv_splits=1.5"):
        attn.AttentionKernel("fp16", 64, attn.AttentionTile(128, 64, 64), kv_splits=1.5)
    many = np.zeros((1, 65536, 1, 64), np.float16)
    with pytest.raises(attn.AttentionInputError, match="workgroup count limits"):
        attn.AttentionKernel("fp16", 64, attn.AttentionTile(128, 64, 64)).launch(many, many[:, :1], many[:, :1])
    assert len(kernel.template_launch().dispatches) == 1


def test_flash_attention_2_split_takes_the_most_keys_whose_staged_rows_fit():
    """Q (128 rows) and one K and one V block, rows of head_dim + 8 elements of 2 bytes: at head_dim 64,
    (128 + 2 * 64) * 72 * 2 = 36,864 bytes fit the 40,960 a workgroup may fill; 128 keys would take 55,296."""
    split = attn.choose_split_config(FLEX, "fp16", 64, 40960)
    assert split.label() == "128:128x64rk" and split.kv_staged and split.subgroup_rows
    assert attn.tiles.staged_shared_bytes(split.tile, 64, True, True) == 36864
    assert attn.choose_split_config(FLEX, "bf16", 64, 55296).label() == "128:128x128rk"
    assert attn.choose_split_config(FLEX, "fp16", 64, 36863) is None   # 32 keys per step would lose (docs)
    assert attn.choose_split_config(FLEX, "fp16", 128, 1 << 20) is None   # a subgroup's O: 128 registers
    workgroup_only = [row for row in FLEX if row.scope != vk.SCOPE_SUBGROUP]
    assert attn.choose_split_config(workgroup_only, "fp16", 64, 40960) is None


def test_prefill_takes_the_split_where_it_fits_and_decode_keeps_its_tile():
    prefill_d64 = attn.AttentionShape(4, 32, 32, 4096, 4096, 64)
    assert attn.choose_config_for(FLEX, prefill_d64, "fp16", staging_bytes=40960).label() == "128:128x64rk"
    assert attn.choose_config_for(FLEX, prefill_d64, "fp16").label() == "128:64x128"   # shared memory unknown
    prefill_d128 = attn.AttentionShape(4, 16, 16, 4096, 4096, 128)
    assert attn.choose_config_for(FLEX, prefill_d128, "fp16", staging_bytes=40960).label() == "128:64x64"
    decode = attn.AttentionShape(1, 32, 8, 1, 32768, 64)
    assert attn.choose_config_for(FLEX, decode, "fp16", staging_bytes=40960).label() == "64:16x128m"
    assert attn.choose_config_for(FLEX, decode, "fp16").waiting_merge   # the merge does not need shared memory


def test_decode_steps_get_the_small_tile_and_prefill_the_default_one():
    decode = attn.AttentionShape(1, 32, 8, 1, 32768, 128)
    assert attn.tiles.is_decode(decode) and attn.tiles.is_decode(attn.AttentionShape(1, 8, 8, 1, 64, 64))
    assert not attn.tiles.is_decode(attn.AttentionShape(1, 32, 8, 5, 64, 64))   # 20 stacked rows
    assert attn.tiles.choose_tile_for(FLEX, decode, "fp16") == attn.AttentionTile(64, 16, 64)
    decode_d64 = attn.AttentionShape(1, 32, 8, 1, 32768, 64)
    assert attn.tiles.choose_tile_for(FLEX, decode_d64, "fp16") == attn.AttentionTile(64, 16, 128)
    prefill = attn.AttentionShape(4, 16, 16, 4096, 4096, 128)
    assert attn.tiles.choose_tile_for(FLEX, prefill, "bf16") == attn.AttentionTile(128, 64, 64)
    # m and l are as narrow as the table's N granularity allows: 16 at 64 and 128 invocations, 32 at 256
    assert attn.stats_columns(FLEX, "fp16", attn.AttentionTile(128, 64, 64)) == 16
    assert attn.stats_columns(FLEX, "fp16", attn.AttentionTile(256, 128, 64)) == 32
    without_64 = [row for row in FLEX if row.workgroup_invocations != 64]
    assert attn.tiles.choose_tile_for(without_64, decode, "fp16") == attn.AttentionTile(128, 64, 64)
    assert decode.flops(False) == 4 * 32 * 32768 * 128 and prefill.flops(True) == prefill.flops(False) / 2
    assert decode.kv_bytes() == 2 * 8 * 32768 * 128 * 2 and decode.label() == "b1 h32/8 q1 kv32768 d128"
