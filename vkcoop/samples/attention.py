"""Sample ``attention``: flash attention (``shaders/attention/flash_attention.comp``), every coopmat2 feature in one
kernel, checked against the float64 reference of :mod:`vkcoop.attention`.

Per input type (fp16, bf16) and head dim (64, 128), with the tile the flexible-dimensions table gives:

* ragged: seq_q and seq_kv not multiples of BR / BC (Constant clamp plus the padded-key mask);
* causal: seq_q = seq_kv, and a GQA case with seq_q < seq_kv (torch's top-left causal mask);
* rescale: the largest scores sit in the last key block, so the running max moves and O is rescaled;
* split: a decode step (seq_q = 1) cut into 3 key slices: the partial outputs of the first pass, and the
  combine pass on exact partials, each its own case;
* exact: uniform scores (every key of a head the same vector), so softmax is exactly 1/n with n a power of two,
  and V built so that every partial sum of P·V is exact: O must match bit for bit.

exp is not exact, so every case but the exact ones is compared within the documented tolerance
(:mod:`vkcoop.attention.reference`), widened by the rounding of the expected values to the output type.
Inputs are multiples of 1/16 (exact in fp16 and bf16).
"""
from __future__ import annotations

import math

import numpy as np

from .. import attention as attn
from ..gemm import DTYPES, Dispatch, Launch
from .caps import BFLOAT16, DeviceCaps, Requirements, SampleInputError
from .case import Case
from .gemm import launch_case
from .runner import Sample, register

UNIT_ROUNDOFF = attn.reference.UNIT_ROUNDOFF
FP32_ROUNDOFF = 2.0 ** -24
#: The combine pass: a few fp32 exp and sums per element (bound relative to max|V| and to |lse|).
COMBINE_ERROR = 2.0 ** -18
KV_SPLITS = 3


def grid_values(rng, shape, dtype, limit: float = 2.0, step: float = 1 / 16) -> np.ndarray:
    """Multiples of ``step`` in [-limit, limit]: exact in fp16 and bf16 for the defaults."""
    steps = int(round(limit / step))
    return (rng.integers(-steps, steps + 1, size=shape) * step).astype(np.float32).astype(dtype)


def _set_tolerances(case: Case, dtype: str, tolerance: attn.AttentionTolerance, o_name="O", lse_name="LSE",
                    exact_o: bool = False) -> Case:
    """The documented bound, plus the rounding of the expected values (O to the input type, lse to fp32)."""
    for binding in case.bindings:
        if binding.name == o_name and not exact_o:
            rounding = UNIT_ROUNDOFF[dtype] if binding.expected.dtype == DTYPES[dtype] else FP32_ROUNDOFF
            binding.tolerance = (tolerance.atol, tolerance.rtol + rounding)
        elif binding.name == lse_name:
            binding.tolerance = (tolerance.lse_atol, tolerance.lse_rtol + FP32_ROUNDOFF)
    return case


def attention_case(name: str, kernel: attn.AttentionKernel, q, k, v) -> Case:
    """One dispatch of flash_attention.comp (no key split), O and the log-sum-exp within the tolerance."""
    try:
        launch = kernel.launch(q, k, v)
    except attn.AttentionInputError as error:
        raise SampleInputError(f"case {name}: {error}") from None
    out, lse = attn.reference_attention(q, k, v, causal=kernel.causal)
    expected = {"O": out.astype(q.dtype), "LSE": lse.astype(np.float32)}
    return _set_tolerances(launch_case(name, launch, expected), kernel.dtype, attn.tolerance_for(q, k, v))


def split_references(kernel: attn.AttentionKernel, q, k, v) -> tuple[np.ndarray, np.ndarray]:
    """The float64 O and lse of each key slice, for one query tile (seq_q <= BR, no mask)."""
    seq_kv = k.shape[2]
    outs, lses = [], []
    for split in range(kernel.kv_splits):
        ranges = attn.block_ranges(0, seq_kv, kernel.tile.br, kernel.tile.bc, False, kernel.kv_splits, split)
        keys = attn.slice_keys(ranges, kernel.tile.bc, seq_kv)
        if not keys.size:   # an empty slice: O = 0, lse = the shader's mask value
            outs.append(np.zeros(q.shape))
            lses.append(np.full(q.shape[:3], np.float32(attn.model.MASKED)))
            continue
        out, lse = attn.reference_attention(q, k[:, :, keys], v[:, :, keys])
        outs.append(out)
        lses.append(lse)
    return np.stack(outs), np.stack(lses)


def split_cases(label: str, kernel: attn.AttentionKernel, q, k, v) -> list[Case]:
    """The first pass's partials against each slice's reference; the combine pass on exact fp32 partials."""
    if kernel.causal or q.shape[2] > kernel.tile.br or kernel.kv_splits < 2:
        raise SampleInputError(f"case {label}: a split case needs one query tile, no mask and kv_splits >= 2")
    launch = kernel.launch(q, k, v)
    partial_o, partial_lse = split_references(kernel, q, k, v)
    tolerance = attn.tolerance_for(q, k, v)
    first = launch_case(f"{label} partials", launch, {"O partial": partial_o.astype(np.float32),
                                                      "LSE partial": partial_lse.astype(np.float32)})
    _set_tolerances(first, kernel.dtype, tolerance, "O partial", "LSE partial")
    inputs = {"O partial": partial_o.astype(np.float32), "LSE partial": partial_lse.astype(np.float32)}
    combined_o, combined_lse = attn.combine_splits(inputs["O partial"].astype(np.float64),
                                                   inputs["LSE partial"].astype(np.float64))
    combine: Dispatch = launch.dispatches[1]
    outputs = {name: launch.outputs[name] for name in ("O", "LSE")}
    second = launch_case(f"{label} combine", Launch([combine], inputs, outputs, "O", launch.shape),
                         {"O": combined_o.astype(q.dtype), "LSE": combined_lse.astype(np.float32)})
    v_max = float(np.abs(v.astype(np.float32)).max())
    bound = attn.AttentionTolerance(atol=COMBINE_ERROR * v_max, rtol=2 * UNIT_ROUNDOFF[kernel.dtype],
                                    lse_atol=COMBINE_ERROR, lse_rtol=COMBINE_ERROR)
    return [first, _set_tolerances(second, kernel.dtype, bound)]


def uniform_score_inputs(rng, dtype, batch: int, q_heads: int, kv_heads: int, seq_q: int, seq_kv: int,
                         head_dim: int):
    """(q, k, v, O) with every key of a kv head the same vector, so each query row's scores are all equal and
    softmax is exactly 1/seq_kv; V rows are base ± r in pairs, so the rows of a head sum to seq_kv·base exactly
    and O = base exactly (seq_kv even; a power of two keeps the division exact)."""
    if seq_kv % 2 or seq_kv & (seq_kv - 1):
        raise SampleInputError(f"uniform-score inputs need seq_kv a power of two, got {seq_kv}")
    q = grid_values(rng, (batch, q_heads, seq_q, head_dim), dtype, 1.0, 1 / 8)
    key = grid_values(rng, (batch, kv_heads, 1, head_dim), dtype, 1.0, 1 / 8)
    k = np.ascontiguousarray(np.broadcast_to(key, (batch, kv_heads, seq_kv, head_dim)))
    base = grid_values(rng, (batch, kv_heads, 1, head_dim), np.float32, 1.0, 1 / 8)
    r = grid_values(rng, (batch, kv_heads, seq_kv // 2, head_dim), np.float32, 1.0, 1 / 8)
    v = np.concatenate([base + r, base - r], axis=2).astype(dtype)
    out = np.repeat(np.broadcast_to(base, (batch, kv_heads, seq_q, head_dim)), q_heads // kv_heads, axis=1)
    return q, k, v, out.astype(dtype)


def exact_case(name: str, kernel: attn.AttentionKernel, rng, seq_q: int, seq_kv: int) -> Case:
    q, k, v, out = uniform_score_inputs(rng, DTYPES[kernel.dtype], 1, 4, 2, seq_q, seq_kv, kernel.head_dim)
    _, lse = attn.reference_attention(q, k, v)
    case = launch_case(name, kernel.launch(q, k, v), {"O": out, "LSE": lse.astype(np.float32)})
    return _set_tolerances(case, kernel.dtype, attn.tolerance_for(q, k, v), exact_o=True)


def _power_of_two_at_most(value: int) -> int:
    return 1 << (value.bit_length() - 1)


@register
class AttentionSample(Sample):
    name = "attention"
    description = ("flash attention with workgroup-scope coopmat2 matrices: online softmax by row reductions and "
                   "per-element exp2/masks, P converted to an A matrix for P·V, ragged seq_q/seq_kv by Constant "
                   "clamp, causal and GQA, key splits and their combine pass; fp16/bf16, head_dim 64/128, and at "
                   "head_dim 64 FlashAttention-2's split (subgroup-scope rows, Q in shared memory); within the "
                   "documented tolerance, uniform-score cases bit-exact")
    requires = Requirements(extensions=attn.EXTENSIONS, features=tuple(attn.attention_features(("fp16", "bf16")))) \
        + BFLOAT16
    order = 80

    def tile_for(self, caps: DeviceCaps, dtype: str, head_dim: int) -> attn.AttentionTile:
        try:
            return attn.choose_attention_tile(caps.flexible, dtype, head_dim,
                                              max_dimension=caps.max_flexible_dimension or None)
        except attn.AttentionInputError as error:
            raise SampleInputError(f"{self.name}: {error}") from None

    def cases(self, caps: DeviceCaps) -> list[Case]:
        cases, split_cases = [], []
        for dtype in ("fp16", "bf16"):
            for head_dim in attn.HEAD_DIMS:
                tile = self.tile_for(caps, dtype, head_dim)
                stats = attn.stats_columns(caps.flexible, dtype, tile)
                cases += self.shape_cases(dtype, head_dim, tile, np.random.default_rng(head_dim + len(cases)), stats)
                split = self.split_for(caps, dtype, head_dim)
                if split is not None:   # what prefill runs where FlashAttention-2's split fits (bench attention)
                    stats = attn.stats_columns(caps.flexible, dtype, split.tile, subgroup_rows=True)
                    rng = np.random.default_rng(1000 + head_dim + len(split_cases))
                    split_cases += self.shape_cases(dtype, head_dim, split.tile, rng, stats, kv_staged=True,
                                                    subgroup_rows=True)
        return cases + split_cases

    @staticmethod
    def split_for(caps: DeviceCaps, dtype: str, head_dim: int) -> attn.AttentionConfig | None:
        if not caps.staging_bytes:
            return None
        return attn.choose_split_config(caps.flexible, dtype, head_dim, caps.staging_bytes,
                                        caps.max_flexible_dimension or None)

    @staticmethod
    def shape_cases(dtype: str, d: int, tile: attn.AttentionTile, rng, stats_cols: int | None = None,
                    **split) -> list[Case]:
        """The cases of one tile; ``split`` are AttentionKernel's kv_staged and subgroup_rows."""
        br, bc, element = tile.br, tile.bc, DTYPES[dtype]

        def kernel(**options):
            return attn.AttentionKernel(dtype, d, tile, stats_cols=stats_cols, **split, **options)

        plain, causal, split_keys = kernel(), kernel(causal=True), kernel(kv_splits=KV_SPLITS)
        stacked, stacked_causal = kernel(gqa_rows=True), kernel(causal=True, gqa_rows=True)
        stacked_split = kernel(kv_splits=KV_SPLITS, gqa_rows=True)
        whole = 2 * math.lcm(br, bc)   # whole tiles and blocks: the ALIGNED pipeline
        label = f"{dtype} d{d} {attn.AttentionConfig(tile, **split).label()}"

        def inputs(batch, q_heads, kv_heads, seq_q, seq_kv):
            return (grid_values(rng, (batch, q_heads, seq_q, d), element),
                    grid_values(rng, (batch, kv_heads, seq_kv, d), element),
                    grid_values(rng, (batch, kv_heads, seq_kv, d), element))

        rescale = 3 * math.lcm(br, bc)   # whole tiles and blocks: the ALIGNED pipeline
        q, k, v = inputs(1, 2, 2, rescale, rescale)
        k[:, :, :rescale - bc] = grid_values(rng, k[:, :, :rescale - bc].shape, element, 0.25)   # the peak comes last
        small = _power_of_two_at_most(bc // 2)   # fewer keys than one block: the padded ones are masked
        return [
            attention_case(f"{label} ragged q{br + 5} kv{2 * bc + 7}", plain, *inputs(1, 2, 2, br + 5, 2 * bc + 7)),
            attention_case(f"{label} causal q=kv={2 * br + 3}", causal, *inputs(1, 2, 1, 2 * br + 3, 2 * br + 3)),
            attention_case(f"{label} causal GQA 4/2 q{br - 3} kv{bc + 9}", causal,
                           *inputs(2, 4, 2, br - 3, bc + 9)),
            attention_case(f"{label} rescale kv{rescale}", plain, q, k, v),
            attention_case(f"{label} causal aligned q=kv={whole}", causal, *inputs(1, 2, 1, whole, whole)),
            # the heaviest-first order across 7 (head, batch) pairs: chunks of 2, 2 and 1 pairs, then a tail of 2
            attention_case(f"{label} causal order 7 heads by 2 tail 2 q=kv={2 * br + 3}",
                           kernel(causal=True, order_chunk=2, order_tail=2), *inputs(1, 7, 1, 2 * br + 3, 2 * br + 3)),
            *split_cases(f"{label} decode split {KV_SPLITS} kv{5 * bc + 3}", split_keys,
                         *inputs(1, 8, 2, 1, 5 * bc + 3)),
            # GQA rows: the 4 q heads of a kv head stacked in one tile; seq_q = BR/2 + 3 puts a head boundary
            # inside the first tile, so the causal mask there sees every query of the head
            attention_case(f"{label} GQA rows causal 8/2 q{br // 2 + 3} kv{bc + 9}", stacked_causal,
                           *inputs(2, 8, 2, br // 2 + 3, bc + 9)),
            attention_case(f"{label} GQA rows 8/2 q3 kv{2 * bc + 7}", stacked, *inputs(1, 8, 2, 3, 2 * bc + 7)),
            *split_cases(f"{label} decode GQA rows split {KV_SPLITS} kv{5 * bc + 3}", stacked_split,
                         *inputs(1, 8, 2, 1, 5 * bc + 3)),
            exact_case(f"{label} exact uniform q{br + 1} kv{small}", plain, rng, br + 1, small),
            exact_case(f"{label} exact uniform q{br - 1} kv{4 * small}", plain, rng, br - 1, 4 * small),
        ]
