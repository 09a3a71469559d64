"""Sample ``attention``: its cases from the H200 table (pure), the shader specialised to every tile the sample uses
(spirv-val on the frozen module), the requirements against the SPIR-V's capabilities, and (marked gpu) the
dispatches: the sample itself and ``vkcoop.attention.attention`` against the reference."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import spirv_tools
from vkcoop import attention as attn
from vkcoop import shaders
from vkcoop.gemm import BF16
from vkcoop.samples import CAPABILITY_FEATURES, Binding, Case, Requirements, Sample, case, get_sample
from vkcoop.samples.fixtures import H200_CAPS
from support import coopmat2_reason, toolchain_or_skip



@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in get_sample("attention").prepared_cases(H200_CAPS)}


def test_cases_cover_types_head_dims_masks_splits_and_exact_ones(cases):
    assert len(cases) == 56 + 28   # 14 per type and head dim, and FlashAttention-2's split at head_dim 64
    labels = [f"{dtype} d{d} 128:64x{ {64: 128, 128: 64}[d]}"   # 8192-element blocks of K
              for dtype in ("fp16", "bf16") for d in (64, 128)]
    for label in labels + ["fp16 d64 128:128x64rk", "bf16 d64 128:128x64rk"]:
        names = [n for n in cases if n.startswith(label)]
        assert {"ragged", "causal", "GQA", "rows", "rescale", "partials", "combine", "exact"} <= \
            {word for n in names for word in n.split()}
    for c in cases.values():
        outputs = [b for b in c.bindings if b.is_output]
        assert {b.name for b in outputs} in ({"O", "LSE"}, {"O partial", "LSE partial"}), c.name
        for b in outputs:
            exact = b.name == "O" and "exact" in c.name
            assert (b.tolerance is None) == exact, (c.name, b.name)
            assert not np.array_equal(b.expected.view(np.uint8), np.zeros_like(b.data).view(np.uint8))
    assert cases["fp16 d64 128:64x128 causal GQA 4/2 q61 kv137"].groups == (1, 4, 2)
    ordered = cases["fp16 d64 128:64x128 causal order 7 heads by 2 tail 2 q=kv=131"]
    assert ordered.groups == (3, 7, 1) and [int(v) for v in ordered.push[7:]] == [3, 2]   # 2, 2, 1 pairs; tail 2
    split = cases["bf16 d64 128:128x64rk rescale kv384"]
    assert dict(split.variant().defines)["SCOPE"] == "SUBGROUP"
    assert all(split.specialization[name] for name in ("KV_STAGED", "ALIGNED"))
    aligned = {n: c.specialization["ALIGNED"] for n, c in cases.items() if c.shader == attn.ATTENTION_SHADER}
    assert aligned["fp16 d64 128:64x128 causal aligned q=kv=256"] and aligned["fp16 d64 128:64x128 rescale kv384"]
    assert not aligned["fp16 d64 128:64x128 ragged q69 kv263"]
    assert {c.specialization["STATS_COLS"] for c in cases.values() if c.shader == attn.ATTENTION_SHADER} == {16}
    # 4 stacked heads x 35 queries = 140 rows: 3 tiles, one row of workgroups per kv head
    assert cases["fp16 d64 128:64x128 GQA rows causal 8/2 q35 kv137"].groups == (3, 2, 2)


def test_the_gqa_rows_cases_expect_what_the_stacked_loop_computes(cases):
    """The shader's loop over stacked rows (a tile crossing a head boundary, causal) lands within the documented
    tolerance of the independent reference that the case expects."""
    for name, tile in (("fp16 d64 128:64x128 GQA rows causal 8/2 q35 kv137", attn.AttentionTile(128, 64, 128)),
                       ("bf16 d128 128:64x64 GQA rows 8/2 q3 kv135", attn.AttentionTile(128, 64, 64))):
        c = cases[name]
        q, k, v = (b.data for b in c.bindings[:3])
        o = next(b for b in c.bindings if b.name == "O")
        got, _ = attn.blocked_attention(q, k, v, tile, causal="causal" in name,
                                        gqa_rows=True, emulate=True)
        assert not case.compare_within(got.astype(o.expected.dtype), o.expected, *o.tolerance).any(), name


def test_the_split_cases_expect_what_the_shaders_loop_computes(cases):
    first = cases["bf16 d128 128:64x64 decode split 3 kv323 partials"]
    q, k, v = (b.data for b in first.bindings[:3])
    o_partial, lse_partial = first.bindings[3], first.bindings[4]
    for split in range(3):
        ranges = attn.block_ranges(0, 323, 64, 64, False, 3, split)
        assert list(ranges.blocks) == [split, split + 3]    # the shader's strided slices of the 6 blocks
        keys = attn.slice_keys(ranges, 64, 323)
        got, got_lse = attn.blocked_attention(q, k[:, :, keys], v[:, :, keys], attn.AttentionTile(128, 64, 64),
                                              emulate=True)
        assert not case.compare_within(got.astype(np.float32), o_partial.expected[split],
                                       *o_partial.tolerance).any()
        assert not case.compare_within(got_lse.astype(np.float32), lse_partial.expected[split],
                                       *lse_partial.tolerance).any()
    combine = cases["bf16 d128 128:64x64 decode split 3 kv323 combine"]
    expected = next(b for b in combine.bindings if b.name == "O").expected
    # merging exact slices gives the whole, to one bf16 step: the merge's fp32 value and the float64 one may round to
    # either side of a midpoint between two bf16 values
    whole = attn.reference_attention(q, k, v)[0].astype(BF16)
    assert not case.compare_within(expected, whole, 0.0, 2.0 ** -7).any()


def test_within_tolerance_comparison_counts_nan_and_far_values():
    expected = np.array([1.0, 2.0, 3.0], np.float32)
    got = np.array([1.0005, np.nan, 3.1], np.float32)
    assert case.compare_within(got, expected, 1e-3, 0.0).tolist() == [False, True, True]
    assert case.compare_within(got, expected, 0.0, 0.04).tolist() == [False, True, False]


class ToleranceSelfTest(Sample):
    """Not registered: samples/selftest/scale.comp (no cooperative matrices) with a tolerance on its output."""
    name = "selftest-tolerance"
    requires = Requirements()

    def __init__(self, offset: float):
        self.offset = offset

    def cases(self, caps):
        x = np.arange(100, dtype=np.float32) / 4   # small values: the offsets stay visible in fp32
        expected = (x * 2 + 3 + self.offset).astype(np.float32)
        return [Case("within", "samples/selftest/scale.comp", {"OFFSET": "3"},
                     [Binding("source", x), Binding("destination", np.zeros_like(x), expected=expected,
                                                    tolerance=(0.01, 0.0))],
                     specialization={"SCALE": 2.0}, groups=(2, 1, 1))]


@pytest.mark.vulkan
def test_the_runner_compares_within_a_tolerance_and_says_so():
    from test_samples import _vulkan_or_skip   # any Vulkan device and the toolchain, or skip
    _vulkan_or_skip()
    close = ToleranceSelfTest(0.005).run()
    assert close.status == "pass", close.to_dict()
    assert close.reason == "1 cases: 0 outputs bit-exact, 1 within their documented tolerance"
    far = ToleranceSelfTest(0.02).run()
    assert far.status == "fail" and far.mismatch_count == 100


@pytest.mark.toolchain
def test_the_requirements_cover_every_capability_of_both_shaders():
    toolchain_or_skip()
    declared = set(get_sample("attention").requires.features)
    for variant in shaders.all_variants("attention/"):
        for capability in spirv_tools.reflect(shaders.compile_variant(variant)).capabilities:
            feature = CAPABILITY_FEATURES.get(capability)
            assert feature is None or feature in declared, (variant.label, capability)


def _specialised(toolchain, variant, specialization: dict, *passes: str) -> bytes:
    """The compiled ``variant`` with ``specialization`` frozen in by spirv-opt (then ``passes``)."""
    spirv = shaders.compile_variant(variant)
    ids = {constant.name: constant.spec_id for constant in spirv_tools.reflect(spirv).spec_constants}
    values = " ".join(f"{ids[name]}:{str(value).lower()}" for name, value in specialization.items())
    with tempfile.TemporaryDirectory() as folder:
        source, frozen = os.path.join(folder, "a.spv"), os.path.join(folder, "b.spv")
        with open(source, "wb") as f:
            f.write(spirv)
        run = toolchain.run("spirv-opt", ["--set-spec-const-default-value", values, "--freeze-spec-const", *passes,
                                          source, "-o", frozen])
        assert run.returncode == 0, run.stderr
        with open(frozen, "rb") as f:
            return f.read()


def _validate_specialised(toolchain, variant, specialization: dict) -> None:
    """spirv-opt freezes ``specialization`` into the compiled ``variant``; spirv-val checks the result."""
    spirv_tools.validate(_specialised(toolchain, variant, specialization))


def _workgroup_bytes(spirv: bytes) -> int:
    """Bytes of the module's Workgroup-storage variables, read from the binary (every array length a constant):
    OpTypeInt/Float 21/22, Vector 23, Array 28, Struct 30, Pointer 32, OpConstant 43, OpVariable 59."""
    words = np.frombuffer(spirv, dtype="<u4")
    sizes, constants, pointees, total, at = {}, {}, {}, 0, 5
    while at < len(words):
        count, opcode = int(words[at]) >> 16, int(words[at]) & 0xFFFF
        ops = [int(w) for w in words[at + 1:at + count]]
        if opcode in (21, 22):
            sizes[ops[0]] = ops[1] // 8
        elif opcode == 23:
            sizes[ops[0]] = sizes[ops[1]] * ops[2]
        elif opcode == 28:
            sizes[ops[0]] = sizes.get(ops[1], 0) * constants[ops[2]]
        elif opcode == 30:
            sizes[ops[0]] = sum(sizes.get(member, 0) for member in ops[1:])
        elif opcode == 32:
            pointees[ops[0]] = ops[2]
        elif opcode == 43:
            constants[ops[1]] = ops[2]
        elif opcode == 59 and ops[2] == 4:   # StorageClass Workgroup
            total += sizes[pointees[ops[0]]]
        at += count
    return total


@pytest.mark.toolchain
@pytest.mark.parametrize("tile, head_dim, subgroup_rows, placeholders", [
    ((128, 128, 64), 64, True, 0), ((128, 64, 64), 128, False, 1), ((64, 64, 32), 128, True, 0)])
def test_the_rule_counts_the_shared_memory_the_shader_declares(tile, head_dim, subgroup_rows, placeholders):
    """``staged_shared_bytes`` (what the prefill rule fits into the workgroup's shared memory) against the
    Workgroup arrays of the shader frozen to that kernel: subgroup rows keep Q there; a workgroup-scope kernel
    keeps a 16-byte placeholder for it."""
    toolchain = toolchain_or_skip().find_toolchain()
    kernel = attn.AttentionKernel("fp16", head_dim, attn.AttentionTile(*tile), kv_staged=True,
                                  subgroup_rows=subgroup_rows)
    variant = shaders.ShaderVariant(attn.ATTENTION_SHADER, tuple(sorted(kernel.defines().items())))
    spirv = _specialised(toolchain, variant, kernel.specialization(True, True), "--fold-spec-const-op-composite")
    expected = attn.tiles.staged_shared_bytes(kernel.tile, head_dim, subgroup_rows, True) + 16 * placeholders
    assert _workgroup_bytes(spirv) == expected


@pytest.mark.toolchain
def test_the_shader_specialised_to_each_sample_tile_validates(cases):
    """spirv-opt freezes the specialization constants the cases use; spirv-val checks the result."""
    toolchain = toolchain_or_skip().find_toolchain()
    seen = set()
    for c in cases.values():
        if c.shader != attn.ATTENTION_SHADER:
            continue
        key = (c.variant(), tuple(c.specialization.items()))
        if key in seen:
            continue
        seen.add(key)
        _validate_specialised(toolchain, c.variant(), c.specialization)
    # 2 types x 2 head dims x (plain, causal, split) x (one head, GQA rows), plain and causal ALIGNED, and
    # KEYS_ALIGNED alone (the exact cases: 63 query rows, whole key blocks); the same 9 for FlashAttention-2's
    # split at head_dim 64
    assert len(seen) == 36 + 18


# --------------------------------------------------------------------------- on the GPU
_NO_GPU = coopmat2_reason()
on_gpu = pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))


@pytest.mark.gpu
@on_gpu
def test_the_attention_sample_passes_on_the_gpu():
    result = get_sample("attention").run(validate=os.environ.get("VKCOOP_VALIDATE", "") == "1")
    assert result.status == "pass", (result.reason, [m.to_dict() for m in result.mismatches],
                                     result.validation_messages[:5])
    # 6 tile sets (2 types x 2 head dims, and FlashAttention-2's split at head_dim 64 for both types) of 14 cases;
    # 2 exact cases each, whose O is bit-exact; every case has 2 outputs
    assert result.cases == 6 * 14 and result.reason == (f"{6 * 14} cases: {6 * 2} outputs bit-exact, "
                                                        f"{6 * 14 * 2 - 6 * 2} within their documented tolerance")


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape, causal, splits", [
    ((2, 8, 2, 300, 300, 128), True, None), ((1, 4, 4, 77, 1000, 64), False, None),
    ((3, 16, 4, 1, 4099, 128), False, None), ((1, 2, 1, 130, 517, 64), True, 4),
    ((40, 32, 8, 1, 2048, 128), False, None)])   # 320 query tiles: on 132 SMs 3 slices each, two waves
def test_attention_matches_the_reference_on_the_gpu(dtype, shape, causal, splits):
    b, hq, hkv, sq, skv, d = shape
    rng = np.random.default_rng(sq + skv)
    q, k, v = ((rng.standard_normal(s).clip(-3, 3)).astype(np.float32).astype(dtype)
               for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)))
    out, lse = attn.attention(q, k, v, causal=causal, kv_splits=splits, return_lse=True)
    ref, ref_lse = attn.reference_attention(q, k, v, causal=causal)
    tolerance = attn.tolerance_for(q, k, v)
    assert out.dtype == dtype and lse.dtype == np.float32
    ok, worst, why = attn.check_attention(out, ref, tolerance)
    assert ok, why
    assert attn.check_attention(lse, ref_lse, tolerance, lse=True)[0]


@pytest.mark.toolchain
@pytest.mark.parametrize("head_dim, bc, causal, layers", [(128, 64, False, 16), (64, 128, True, 1)])
def test_the_waiting_merge_specialised_validates(head_dim, bc, causal, layers):
    """SPLIT_MERGE=WAIT frozen to decode tiles: the slices' arrival, the mergers' poll and their rounds pass
    spirv-val with the spec constants folded in."""
    toolchain = toolchain_or_skip().find_toolchain()
    kernel = attn.AttentionKernel("fp16", head_dim, attn.AttentionTile(64, 16, bc), causal=causal, kv_splits=66,
                                  gqa_rows=True, waiting_merge=True)
    variant = shaders.ShaderVariant(attn.ATTENTION_SHADER, tuple(sorted(kernel.defines().items())))
    assert dict(variant.defines)["SPLIT_MERGE"] == "WAIT"
    _validate_specialised(toolchain, variant, kernel.specialization(keys_aligned=True, merge_layers=layers))


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("merge", [{"waiting_merge": True, "sm_count": 132}, {"waiting_merge": True, "sm_count": 8}],
                         ids=["waiting", "waiting-few-layers"])
@pytest.mark.parametrize("shape, tile, splits", [
    ((1, 32, 8, 1, 4099, 128), (64, 16, 64), 20), ((2, 4, 4, 3, 777, 64), (64, 16, 128), 9),
    ((1, 8, 2, 1, 9000, 128), (64, 16, 64), 70)])
def test_a_merge_in_the_same_dispatch_matches_the_reference_and_repeats_bit_for_bit(shape, tile, splits, merge):
    """One dispatch merges the key slices, by workgroups that wait for them (SPLIT_MERGE=WAIT; with 8 SMs one to
    four mergers per tile walk its output quads in rounds): within the tolerance of the reference, and every launch
    leaves its counters at zero, so repeated launches give the same bits."""
    from vkcoop import vk
    b, hq, hkv, sq, skv, d = shape
    rng = np.random.default_rng(skv)
    q, k, v = ((rng.standard_normal(s).clip(-3, 3)).astype(np.float32).astype(np.float16)
               for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)))
    with vk.Device(extensions=attn.EXTENSIONS, features=attn.attention_features(("fp16",))) as device:
        with attn.VulkanAttention(device, "fp16", d, attn.AttentionTile(*tile), kv_splits=splits,
                                  gqa_rows=hq > hkv, **merge) as runner:
            runner.bind(q, k, v)
            assert len(runner.kernel.launch(q, k, v).dispatches) == 1
            out, lse = runner.outputs()
            again = [runner.outputs() for _ in range(20)]
    ref, ref_lse = attn.reference_attention(q, k, v)
    tolerance = attn.tolerance_for(q, k, v)
    ok, _, why = attn.check_attention(out, ref, tolerance)
    assert ok, why
    assert attn.check_attention(lse, ref_lse, tolerance, lse=True)[0]
    assert all(np.array_equal(o, out) and np.array_equal(l, lse) for o, l in again)


@pytest.mark.toolchain
@pytest.mark.parametrize("tile, head_dim, causal, splits, aligned", [
    ((128, 64, 64), 128, False, 1, True), ((128, 64, 128), 64, True, 1, True), ((256, 128, 64), 128, True, 3, True),
    ((64, 16, 64), 128, False, 4, False), ((128, 64, 64), 128, True, 1, False)])
def test_the_staged_loop_specialised_validates(tile, head_dim, causal, splits, aligned):
    """KV_STAGED (K and V through the shader's own shared memory) frozen with prefill, causal, split and decode
    tiles, with and without ALIGNED (without it the staged loop stops where the clamped one begins)."""
    toolchain = toolchain_or_skip().find_toolchain()
    kernel = attn.AttentionKernel("fp16", head_dim, attn.AttentionTile(*tile), causal=causal, kv_splits=splits,
                                  kv_staged=True)
    specialization = kernel.specialization(aligned=aligned)
    assert specialization["KV_STAGED"] is True and specialization["ALIGNED"] is aligned
    variant = shaders.ShaderVariant(attn.ATTENTION_SHADER, tuple(sorted(kernel.defines().items())))
    _validate_specialised(toolchain, variant, specialization)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape, tile, causal, splits", [
    ((2, 4, 2, 256, 512, 128), (128, 64, 64), False, 1), ((1, 4, 4, 384, 384, 64), (128, 64, 128), True, 1),
    ((1, 2, 1, 128, 1024, 128), (128, 64, 64), True, 3), ((1, 2, 2, 256, 640, 128), (256, 128, 64), False, 1),
    ((1, 32, 8, 1, 4099, 128), (64, 16, 64), False, 9), ((2, 4, 2, 300, 517, 64), (128, 64, 128), True, 1)])
def test_staging_k_and_v_in_shared_memory_changes_no_bit(dtype, shape, causal, splits, tile):
    """KV_STAGED loads the same K and V blocks from this shader's shared memory instead of the driver's staging:
    the multiplies see the same matrices, so O and the log-sum-exp must equal the unstaged kernel's bit for bit
    (and both stay within the tolerance of the reference). Aligned shapes stage every block; the decode and ragged
    ones stage those before the clamped blocks."""
    from vkcoop import vk
    b, hq, hkv, sq, skv, d = shape
    rng = np.random.default_rng(sq * skv)
    q, k, v = ((rng.standard_normal(s).clip(-3, 3)).astype(np.float32).astype(dtype)
               for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)))
    name = "fp16" if dtype == np.float16 else "bf16"
    results = []
    with vk.Device(extensions=attn.EXTENSIONS, features=attn.attention_features((name,))) as device:
        for staged in (False, True):
            with attn.VulkanAttention(device, name, d, attn.AttentionTile(*tile), causal=causal, kv_splits=splits,
                                      gqa_rows=sq == 1, kv_staged=staged) as runner:
                results.append(runner.run(q, k, v))
    (out, lse), (staged_out, staged_lse) = results
    assert np.array_equal(staged_out.view(np.uint16), out.view(np.uint16)) and np.array_equal(staged_lse, lse)
    ref, _ = attn.reference_attention(q, k, v, causal=causal)
    ok, _, why = attn.check_attention(staged_out, ref, attn.tolerance_for(q, k, v))
    assert ok, why


@pytest.mark.toolchain
@pytest.mark.parametrize("tile, head_dim, causal, splits, merge, aligned, keys_aligned", [
    ((128, 64, 64), 128, False, 1, False, True, True), ((128, 128, 64), 64, True, 1, False, False, False),
    ((64, 32, 64), 128, False, 9, True, False, True), ((256, 128, 64), 128, True, 1, False, False, True),
    ((128, 128, 64), 64, False, 1, False, True, True), ((128, 128, 64), 64, True, 3, False, False, False)])
def test_subgroup_rows_specialised_validate(tile, head_dim, causal, splits, merge, aligned, keys_aligned):
    """SCOPE=SUBGROUP (each subgroup owns its rows as subgroup-scope matrices, Q in shared memory) frozen with a
    staged prefill tile, 32 rows per subgroup with the clamped path, a decode split merged by waiting workgroups, 8
    subgroups with KEYS_ALIGNED, and FlashAttention-2's split (32 rows each) aligned and clamped."""
    toolchain = toolchain_or_skip().find_toolchain()
    kernel = attn.AttentionKernel("fp16", head_dim, attn.AttentionTile(*tile), causal=causal, kv_splits=splits,
                                  waiting_merge=merge, subgroup_rows=True, kv_staged=tile[0] != 64)
    variant = shaders.ShaderVariant(attn.ATTENTION_SHADER, tuple(sorted(kernel.defines().items())))
    assert dict(variant.defines)["SCOPE"] == "SUBGROUP"
    _validate_specialised(toolchain, variant, kernel.specialization(aligned, keys_aligned,
                                                                    merge_layers=2 if merge else 1))


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("dtype, shape, tile, causal, splits, options", [
    (np.float16, (2, 4, 2, 256, 512, 128), (128, 64, 32), False, 1, {}),
    (BF16, (2, 4, 2, 256, 512, 128), (128, 64, 64), True, 1, {"kv_staged": False}),
    (np.float16, (2, 4, 2, 300, 517, 64), (128, 128, 64), True, 1, {}),
    (np.float16, (1, 2, 1, 128, 1024, 128), (128, 64, 32), True, 3, {}),
    (np.float16, (1, 2, 2, 256, 640, 64), (128, 64, 64), False, 1, {"kv_staged": False}),
    (np.float16, (1, 32, 8, 1, 4099, 128), (64, 32, 64), False, 9, {"gqa_rows": True}),
    (np.float16, (1, 8, 2, 1, 9000, 128), (64, 32, 64), False, 9, {"gqa_rows": True, "waiting_merge": True}),
    (np.float16, (1, 2, 2, 400, 512, 64), (256, 128, 64), True, 1, {"kv_staged": True}),
    (np.float16, (2, 4, 2, 512, 512, 64), (128, 128, 64), False, 1, {"kv_staged": True}),
    (BF16, (1, 4, 4, 300, 517, 64), (128, 128, 64), True, 1, {"kv_staged": True}),
    (np.float16, (1, 2, 1, 256, 1000, 64), (128, 128, 64), True, 3, {"kv_staged": True})],
    ids=["prefill staged", "bf16 causal", "32 rows each, ragged causal", "causal split", "K and V by the driver",
         "decode GQA split", "decode waiting merge", "8 subgroups, staged", "FA2 split, aligned",
         "FA2 split, bf16 ragged causal", "FA2 split, causal key split"])
def test_subgroup_rows_match_the_reference(dtype, shape, tile, causal, splits, options):
    """SCOPE=SUBGROUP (Q in shared memory): each subgroup computes its own rows (a decode tile's second subgroup
    holds only padding rows), O and the log-sum-exp within the tolerance of the float64 reference, and a second
    launch repeats them bit for bit. Every case's shared memory fits the 40,960 bytes a workgroup may fill on the
    H100."""
    staged = attn.kernel.stages_kv(attn.AttentionTile(*tile), shape[-1]) if "kv_staged" not in options \
        else options["kv_staged"]
    assert attn.tiles.staged_shared_bytes(attn.AttentionTile(*tile), shape[-1], True, staged) <= 40960
    from vkcoop import vk
    b, hq, hkv, sq, skv, d = shape
    rng = np.random.default_rng(sq * skv + d)
    q, k, v = ((rng.standard_normal(s).clip(-3, 3)).astype(np.float32).astype(dtype)
               for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d)))
    name = "fp16" if dtype == np.float16 else "bf16"
    with vk.Device(extensions=attn.EXTENSIONS, features=attn.attention_features((name,))) as device:
        with attn.VulkanAttention(device, name, d, attn.AttentionTile(*tile), causal=causal, kv_splits=splits,
                                  subgroup_rows=True, **options) as runner:
            assert runner.kernel.defines()["SCOPE"] == "SUBGROUP"
            runner.bind(q, k, v)
            (out, lse), (again, lse_again) = runner.outputs(), runner.outputs()
    ref, ref_lse = attn.reference_attention(q, k, v, causal=causal)
    tolerance = attn.tolerance_for(q, k, v)
    ok, _, why = attn.check_attention(out, ref, tolerance)
    assert ok, why
    assert attn.check_attention(lse, ref_lse, tolerance, lse=True)[0]
    assert np.array_equal(again.view(np.uint16), out.view(np.uint16)) and np.array_equal(lse_again, lse)
