"""The flash attention kernel as data: a :class:`vkcoop.gemm.Launch` that the sample checks and the bench times.

One dispatch of ``attention/flash_attention.comp`` writes O and the log-sum-exp; with ``kv_splits`` > 1 it writes
fp32 partial results per key slice and a second dispatch (``attention/attention_combine.comp``) merges them
(flash decoding: a decode step has one query row per head, too few workgroups to fill the GPU otherwise), or the
same dispatch does: workgroups after the slices that wait for them (``waiting_merge``).
"""
from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ..gemm import SUBGROUP_SIZE, Dispatch, Launch
from .shapes import (AttentionInputError, AttentionShape, check_dtype, check_head_dim, check_inputs,
                     resolve_scale)
from .tiles import AttentionTile

ATTENTION_SHADER = "attention/flash_attention.comp"
COMBINE_SHADER = "attention/attention_combine.comp"
COMBINE_COLUMNS = 32   # head_dim columns per workgroup of attention_combine.comp
ELEMENT_DEFINES = {"fp16": "F16", "bf16": "BF16"}
#: maxComputeWorkGroupCount[1] and [2] that every Vulkan device offers (x goes to 2**31 - 1 on NVIDIA).
MAX_GROUPS_YZ = 65535
LOG2_E = 1.0 / math.log(2.0)


#: Workgroups per SM a key-split launch aims at. On the H100 (docs/attention.md, decode with 64:16x64 tiles) 4 per
#: SM was best or within 1% of best at kv 8k-64k: kv 32768 0.066 ms at 33-66 splits per kv head, kv 65536 0.111 ms
#: at 66 against 0.126 at 132.
WORKGROUPS_PER_SM = 4
#: Workgroups aimed at when the SM count is unknown (4 per SM on a 132-SM GPU).
DEFAULT_TARGET_WORKGROUPS = 528
#: The share of the target's slots whose workgroups draw the full read bandwidth. On the H100 a decode launch of
#: 320 workgroups (0.61 of 528) read at 0.91-0.92 of the rate of the same bytes split over 960 (docs/attention.md,
#: experiments 50-51): a wave of fewer workgroups takes as long as one of this many.
SATURATING_SHARE = Fraction(2, 3)
#: The most waves a key split may make of a launch that one wave cannot saturate.
MAX_SPLIT_WAVES = 4


#: The waiting merge (SPLIT_MERGE=WAIT) launches at most one merger per SM, so that the slices they wait for always
#: find a slot whatever order the workgroups start in; where the driver does not give the SM count, this many.
MIN_SM_COUNT = 16
#: Invocations of a merger that share one output quad's slices (MERGE_LANES in merge_waiting.glsl).
MERGE_LANES = 8
#: The bindings of a launch that merges its key slices in the same dispatch (SPLIT_MERGE=WAIT).
MERGED_BUFFERS = ("Q", "K", "V", "O partial", "LSE partial", "O", "LSE", "arrivals")


def target_workgroups(sm_count: int | None) -> int:
    return WORKGROUPS_PER_SM * sm_count if sm_count else DEFAULT_TARGET_WORKGROUPS


def use_gqa_rows(shape: AttentionShape, tile: AttentionTile) -> bool:
    """Stack a kv head's q heads into one tile when a head alone leaves most of it empty (decode, short queries):
    one pass over K and V then serves the group (GQA_ROWS in flash_attention.comp)."""
    return shape.group > 1 and shape.seq_q < tile.br


def is_aligned(shape: AttentionShape, tile: AttentionTile, gqa_rows: bool) -> bool:
    """Whether the tile's rows are whole BR tiles and seq_kv whole BC blocks (ALIGNED: no clamped code)."""
    rows = (shape.group if gqa_rows else 1) * shape.seq_q
    return rows % tile.br == 0 and keys_aligned(shape, tile)


def keys_aligned(shape: AttentionShape, tile: AttentionTile) -> bool:
    """Whether seq_kv is whole BC blocks, whatever the rows (KEYS_ALIGNED: K and V without the clamped loop)."""
    return shape.seq_kv % tile.bc == 0


#: KV_STAGED: at most this many 16-byte vectors of a K or V block per invocation (32 registers held across a
#: multiply). On the H100 (docs/attention.md, experiments 16 and 18) staging gained 1-14 % on the prefill tiles, which
#: hold 8 or 4, and lost 6-13 % on decode's 64-invocation tiles, which hold 16.
MAX_STAGED_VECTORS = 8


def staged_vectors(tile: AttentionTile, head_dim: int) -> int | None:
    """16-byte vectors of one K or V block (BC x head_dim) per invocation, or None where they do not share evenly
    (KV_STAGED cannot copy the block there)."""
    vectors, rest = divmod(tile.bc * head_dim // 8, tile.workgroup_size)
    return None if rest else vectors


def stages_kv(tile: AttentionTile, head_dim: int) -> bool:
    """The kernel's rule for KV_STAGED: whole vectors per invocation, and few enough of them."""
    vectors = staged_vectors(tile, head_dim)
    return vectors is not None and vectors <= MAX_STAGED_VECTORS


def query_workgroups(shape: AttentionShape, tile: AttentionTile, gqa_rows: bool) -> tuple[int, int]:
    """The grid's (x, y) before key slices: query tiles, and q heads (``gqa_rows``: kv heads)."""
    if gqa_rows:
        return -(-shape.group * shape.seq_q // tile.br), shape.kv_heads
    return -(-shape.seq_q // tile.br), shape.q_heads


def choose_kv_splits(shape: AttentionShape, tile: AttentionTile, target_workgroups: int | None = None,
                     gqa_rows: bool | None = None) -> int:
    """Key slices for a launch of at most ``target_workgroups`` workgroups at once: 1 when the query tiles alone
    fill that (prefill), at most one slice per BC keys; else as many as fit one wave, where that wave holds at
    least :data:`SATURATING_SHARE` of the slots; else the split of least :func:`wave_cost`.

    The floor keeps every slice in the first wave: a slice left for a second wave starts when others end and runs
    nearly alone, and its whole key loop is added to the launch (docs/attention.md, experiment 46). Where one wave
    cannot reach the bandwidth (265-351 query tiles on the H100), whole waves of more slices are faster (experiments
    50 and 51).
    """
    target = target_workgroups or DEFAULT_TARGET_WORKGROUPS
    x, y = query_workgroups(shape, tile, use_gqa_rows(shape, tile) if gqa_rows is None else gqa_rows)
    workgroups = x * y * shape.batch
    if workgroups >= target:
        return 1
    most = max(1, min(-(-shape.seq_kv // tile.bc), MAX_GROUPS_YZ // shape.batch))
    one_wave = max(1, min(most, target // workgroups))
    saturating = math.ceil(SATURATING_SHARE * target)
    if one_wave * workgroups >= saturating or one_wave == most:
        return one_wave
    candidates = range(1, min(most, -(-MAX_SPLIT_WAVES * target // workgroups)) + 1)
    return min(candidates, key=lambda splits: (wave_cost(splits * workgroups, target, saturating), splits))


def wave_cost(workgroups: int, slots: int, saturating: int) -> Fraction:
    """Slot time per workgroup of a launch of equal workgroups run ``slots`` at a time, when a wave of fewer than
    ``saturating`` workgroups takes as long as one of ``saturating`` (memory-bound: the bandwidth, not the slots,
    sets its pace). 1 for whole waves, more for a short last wave."""
    full, last = divmod(workgroups, slots)
    return Fraction(full * slots + (max(last, saturating) if last else 0), workgroups)


def launch_choices(shape: AttentionShape, tile: AttentionTile, *, gqa_rows: bool | None = None,
                   kv_splits: int | None = None, target_workgroups: int | None = None) -> tuple[bool, int]:
    """(GQA rows, key splits) for ``shape`` on ``tile``: each given one kept, the others chosen by
    :func:`use_gqa_rows` and :func:`choose_kv_splits`."""
    gqa = use_gqa_rows(shape, tile) if gqa_rows is None else bool(gqa_rows)
    return gqa, kv_splits or choose_kv_splits(shape, tile, target_workgroups, gqa)


def waiting_mergers(tiles_xy: int, tile_rows: int, head_dim: int, workgroup_size: int,
                    sm_count: int | None) -> int:
    """Merger layers per (x, y) tile of the waiting merge: enough for one round of MERGE_LANES loads per output quad
    of a tile's ``tile_rows`` rows, at most one merger per SM in all; 0 where even one layer would pass that (the
    launch then merges in a second pass)."""
    limit = sm_count or MIN_SM_COUNT
    if tiles_xy > limit:
        return 0
    wanted = -(-tile_rows * head_dim // 4 // (workgroup_size // MERGE_LANES))
    return max(1, min(wanted, limit // tiles_xy))


#: K and V bytes of the (head, batch) pairs whose causal query tiles start together. On the H100 (docs/attention.md,
#: experiments 41-43) chunks of 8 MB were at or near the fastest at both head dims; from 16 MB on, reads that left L2
#: took back what the order won.
ORDER_KV_BYTES = 8 << 20


@dataclasses.dataclass(frozen=True)
class CausalOrder:
    """``chunk``: at most this many (head, batch) pairs per chunk; ``tail``: the pairs of the last chunk."""
    chunk: int
    tail: int

    def push(self, pairs: int) -> tuple[int, int]:
        """flash_attention.comp's (order_chunks, order_tail): the pairs before the tail in chunks, sizes within one."""
        tail = min(self.tail, pairs)
        return max(1, -(-(pairs - tail) // self.chunk)), tail


def causal_order(query_tiles: int, pairs: int, pair_bytes: int, target_workgroups: int | None = None) -> CausalOrder:
    """How a causal launch without key slices orders its query tiles (flash_attention.comp's ``scheduled_tile``):
    chunks of (head, batch) pairs whose K and V (``pair_bytes`` each) fit :data:`ORDER_KV_BYTES`, and a last chunk
    with at least ``target_workgroups`` tiles, so that its longest tiles start a wave before the end."""
    target = target_workgroups or DEFAULT_TARGET_WORKGROUPS
    chunk = max(1, min(pairs, ORDER_KV_BYTES // max(pair_bytes, 1)))
    return CausalOrder(chunk, min(pairs, max(chunk, -(-target // query_tiles))))


def causal_schedule(query_tiles: int, y: int, z: int, chunks: int, tail: int) -> np.ndarray:
    """The (query tile, y, z) each workgroup of a causal launch without key slices computes, in the order the grid
    numbers them (x fastest): the model of flash_attention.comp's ``scheduled_tile`` for its push constants."""
    pairs = y * z
    tail = min(tail, pairs)
    body = pairs - tail
    linear = np.arange(query_tiles * pairs)
    chunks = min(max(chunks, 1), max(body, 1))
    small, large = divmod(body, chunks)
    large_workgroups = large * (small + 1) * query_tiles
    chunk = np.where(linear < large_workgroups, linear // ((small + 1) * query_tiles),
                     large + (linear - large_workgroups) // max(small * query_tiles, 1))
    in_body = linear < body * query_tiles
    first_pair = np.where(in_body, chunk * small + np.minimum(chunk, large), body)
    in_chunk = np.where(in_body, small + (chunk < large), tail)
    rank = linear - first_pair * query_tiles
    pair = first_pair + rank % in_chunk
    return np.stack([query_tiles - 1 - rank // in_chunk, pair % y, pair // y], axis=1)


def check_kv_splits(kv_splits) -> int:
    return _check_whole("kv_splits", kv_splits)


def _check_whole(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise AttentionInputError(f"{name}={value!r} must be a whole number >= 1")
    return int(value)


class AttentionKernel:
    """flash_attention.comp for one dtype, head dim, tile, mask and key split: ``launch(q, k, v)``."""

    def __init__(self, dtype: str, head_dim: int, tile: AttentionTile, *, causal: bool = False,
                 kv_splits: int = 1, gqa_rows: bool = False, stats_cols: int | None = None,
                 kv_staged: bool | None = None, subgroup_rows: bool = False, waiting_merge: bool = False,
                 sm_count: int | None = None, order_chunk: int | None = None, order_tail: int | None = None):
        check_dtype(dtype)
        check_head_dim(head_dim)
        self.dtype, self.head_dim, self.tile = dtype, head_dim, tile
        self.causal, self.kv_splits, self.gqa_rows = bool(causal), check_kv_splits(kv_splits), bool(gqa_rows)
        self.stats_cols = int(stats_cols or tile.bc)
        self.kv_staged = stages_kv(tile, head_dim) if kv_staged is None else bool(kv_staged)
        if self.kv_staged and staged_vectors(tile, head_dim) is None:
            raise AttentionInputError(f"tile {tile.label()} with head_dim {head_dim}: K and V staged (KV_STAGED) need "
                                      f"the {tile.bc * head_dim // 8} 16-byte vectors of a block shared evenly by "
                                      f"the {tile.workgroup_size} invocations")
        self.waiting_merge = bool(waiting_merge) and self.kv_splits > 1
        self.sm_count = sm_count
        self.order_chunk = None if order_chunk is None else _check_whole("order_chunk", order_chunk)
        self.order_tail = None if order_tail is None else _check_whole("order_tail", order_tail)
        self.subgroup_rows = bool(subgroup_rows)
        if self.subgroup_rows and tile.subgroup_rows() is None:
            raise AttentionInputError(f"tile {tile.label()}: subgroup rows need whole {SUBGROUP_SIZE}-wide subgroups "
                                      "that share BR evenly")
        merge = " waiting" if self.waiting_merge else ""
        split = f" split{self.kv_splits}{merge}" if self.kv_splits > 1 else ""
        rows = (" gqa-rows" if self.gqa_rows else "") + (" subgroup-rows" if self.subgroup_rows else "")
        self.name = f"attention {dtype} d{head_dim} {tile.label()}{' causal' if causal else ''}{split}{rows}"

    def defines(self, merge: str | None = None) -> dict:
        """flash_attention.comp's defines (attention_combine.comp takes ELEMENT only); ``merge`` overrides
        SPLIT_MERGE (a waiting merge that cannot spread its mergers falls back to PASS)."""
        merge = merge or ("WAIT" if self.waiting_merge else "PASS")
        return {"ELEMENT": ELEMENT_DEFINES[self.dtype], "SPLIT_MERGE": merge,
                "SCOPE": "SUBGROUP" if self.subgroup_rows else "WORKGROUP"}

    def merges_waiting(self, launch: Launch) -> bool:
        """Whether ``launch`` (one of this kernel's) merges its key slices by waiting workgroups: False where the
        waiting merge was asked for but could not spread its mergers, and the launch took the combine pass."""
        return self.waiting_merge and launch.dispatches[0].defines["SPLIT_MERGE"] == "WAIT"

    def bound_order(self, launch: Launch) -> CausalOrder | None:
        """The order ``launch`` (one of this kernel's) runs its query tiles in: the most pairs a chunk holds before
        the tail, and the tail; None where it keeps the grid's order."""
        if not self.causal or self.kv_splits > 1:
            return None
        flash = launch.dispatches[0]
        chunks, tail = (int(v) for v in flash.push[7:9])
        body = flash.groups[1] * flash.groups[2] - tail
        return CausalOrder(max(1, -(-body // chunks)), tail)

    def pipeline_options(self) -> dict:
        """Subgroup rows split BR by gl_SubgroupID assuming 32-wide subgroups: ask for exactly that."""
        return {"required_subgroup_size": SUBGROUP_SIZE, "full_subgroups": True} if self.subgroup_rows else {}

    def specialization(self, aligned: bool = False, keys_aligned: bool = False, merge_layers: int = 1) -> dict:
        return {"WORKGROUP_SIZE": self.tile.workgroup_size, "BR": self.tile.br, "BC": self.tile.bc,
                "HEAD_DIM": self.head_dim, "CAUSAL": self.causal, "KV_SPLITS": self.kv_splits,
                "GQA_ROWS": self.gqa_rows, "ALIGNED": bool(aligned), "STATS_COLS": self.stats_cols,
                "KV_STAGED": self.kv_staged, "KEYS_ALIGNED": bool(aligned or keys_aligned),
                "MERGE_LAYERS": merge_layers}

    def tile_order(self, groups: tuple[int, int, int], shape: AttentionShape) -> CausalOrder | None:
        """The launch's order of its query tiles (the chunk and tail given, the others by :func:`causal_order`); None
        where the shader does not reorder (no mask, or key slices, whose merges find a tile by its place)."""
        if not self.causal or self.kv_splits > 1:
            return None
        x, y, z = groups
        pair_bytes = 2 * shape.seq_kv * self.head_dim * check_dtype(self.dtype).itemsize
        rule = causal_order(x, y * z, pair_bytes, target_workgroups(self.sm_count))
        return CausalOrder(self.order_chunk or rule.chunk, self.order_tail or rule.tail)

    def order_push(self, groups: tuple[int, int, int], shape: AttentionShape) -> tuple[int, int]:
        """The push constants order_chunks and order_tail of a launch on ``groups`` (unused where not reordered)."""
        order = self.tile_order(groups, shape)
        return order.push(groups[1] * groups[2]) if order else (1, 0)

    def template_launch(self) -> Launch:
        """The smallest launch: its dispatches name every pipeline this kernel needs."""
        one = np.zeros((1, 1, 1, self.head_dim), check_dtype(self.dtype))
        return self.launch(one, one, one)

    def check(self, q, k, v) -> AttentionShape:
        dtype, shape = check_inputs(q, k, v)
        if dtype != self.dtype or shape.head_dim != self.head_dim:
            raise AttentionInputError(f"q is {dtype} with head_dim {shape.head_dim}; this kernel is built for "
                                      f"{self.dtype} with head_dim {self.head_dim}")
        if shape.q_heads > MAX_GROUPS_YZ or shape.batch * self.kv_splits > MAX_GROUPS_YZ:
            raise AttentionInputError(f"q heads ({shape.q_heads}) and batch x kv_splits "
                                      f"({shape.batch} x {self.kv_splits}) must each be <= {MAX_GROUPS_YZ} "
                                      "(workgroup count limits)")
        if self.kv_splits > 1 and self.kv_splits * q.size >= 1 << 32:
            raise AttentionInputError(f"kv_splits={self.kv_splits}: the partial outputs would pass 2**32 elements")
        return shape

    def launch(self, q, k, v, scale=None) -> Launch:
        """O = softmax(q kᵀ · scale [+ causal mask]) v for q [b][hq][sq][d], k and v [b][hkv][skv][d]."""
        shape = self.check(q, k, v)
        scale = resolve_scale(scale, shape.head_dim)
        b, hq, sq, d = shape.batch, shape.q_heads, shape.seq_q, shape.head_dim
        groups = (*query_workgroups(shape, self.tile, self.gqa_rows), b * self.kv_splits)
        push = (np.uint32(b), np.uint32(sq), np.uint32(shape.seq_kv), np.uint32(hq), np.uint32(shape.kv_heads),
                np.uint32(shape.group), np.float32(scale * LOG2_E), *map(np.uint32, self.order_push(groups, shape)))
        specialization = self.specialization(is_aligned(shape, self.tile, self.gqa_rows),
                                             keys_aligned(shape, self.tile))
        inputs = {"Q": np.ascontiguousarray(q), "K": np.ascontiguousarray(k), "V": np.ascontiguousarray(v)}
        outputs = {"O": ((b, hq, sq, d), check_dtype(self.dtype)), "LSE": ((b, hq, sq), np.dtype(np.float32))}
        dims = (b, hq, shape.kv_heads, sq, shape.seq_kv, d)
        if self.kv_splits == 1:
            flash = Dispatch(ATTENTION_SHADER, self.defines(), specialization, ("Q", "K", "V", "O", "LSE"),
                             groups, push, self.pipeline_options())
            return Launch([flash], inputs, outputs, "O", dims)
        s = self.kv_splits   # fp32 partials per key slice
        outputs["O partial"] = ((s, b, hq, sq, d), np.dtype(np.float32))
        outputs["LSE partial"] = ((s, b, hq, sq), np.dtype(np.float32))
        x, y = groups[0], groups[1]
        tile_rows = min(self.tile.br, (shape.group if self.gqa_rows else 1) * sq)
        layers = waiting_mergers(x * y, tile_rows, d, self.tile.workgroup_size, self.sm_count) \
            if self.waiting_merge else 0
        if layers and b * s + layers <= MAX_GROUPS_YZ:
            # one dispatch: the slices, then `layers` mergers per (x, y); a counter per merger, left zero
            outputs["arrivals"] = ((x * y * b * layers,), np.dtype(np.uint32))
            specialization["MERGE_LAYERS"] = layers
            flash = Dispatch(ATTENTION_SHADER, self.defines(), specialization, MERGED_BUFFERS,
                             (x, y, b * s + layers), push, self.pipeline_options())
            return Launch([flash], inputs, outputs, "O", dims)
        flash = Dispatch(ATTENTION_SHADER, self.defines("PASS"), specialization,
                         ("Q", "K", "V", "O partial", "LSE partial"), groups, push, self.pipeline_options())
        rows = b * hq * sq
        combine = Dispatch(COMBINE_SHADER, {"ELEMENT": ELEMENT_DEFINES[self.dtype]}, {},
                           ("O partial", "LSE partial", "O", "LSE"),
                           (min(rows * (d // COMBINE_COLUMNS), MAX_GROUPS_YZ), 1, 1),
                           (np.uint32(rows), np.uint32(d), np.uint32(s)))
        return Launch([flash, combine], inputs, outputs, "O", dims)
