"""flash_attention.comp's loop structure in float64 numpy, so its index arithmetic is tested without a GPU.

:func:`query_span` and :func:`key_block_ranges` are the shader's choice of key blocks for one query tile and key
slice (written the same way, line for line); :func:`blocked_attention` runs the online softmax over those blocks tile by tile, with the same
mask value and the same split-and-combine, and must agree with :func:`vkcoop.attention.reference_attention` to
float64 rounding. With ``emulate`` it computes in fp32 and rounds P to the input type before P·V, as the
shader does: the tests hold that emulation to the documented tolerance, and the uniform-score inputs to bit-exact
results.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .shapes import check_inputs, resolve_scale
from .tiles import AttentionTile

MASKED = -1.0e30   # the shader's finite mask value


@dataclass(frozen=True)
class BlockRange:
    begin: int        # first key block of this slice
    unmasked: int     # blocks below this need no mask
    end: int          # no block of this slice reaches it
    step: int = 1     # the slice holds begin, begin + step, ... below end

    @property
    def blocks(self) -> range:
        return range(self.begin, self.end, self.step)


def query_span(row0: int, br: int, rows: int, seq_q: int, gqa_rows: bool) -> tuple[int, int]:
    """(first, last) query index that the tile starting at ``row0`` holds (flash_attention.comp, main). Its
    rows are one head's ``seq_q`` queries, or with ``gqa_rows`` the group's heads stacked (``rows`` of them), so
    a tile that crosses a head boundary holds every query."""
    last_row = min(row0 + br, rows) - 1
    wraps = gqa_rows and row0 // seq_q != last_row // seq_q
    first = 0 if wraps else row0 % seq_q
    last = seq_q - 1 if wraps else (last_row % seq_q if gqa_rows else row0 + br - 1)
    return first, last


def key_block_ranges(first_query: int, last_query: int, seq_kv: int, bc: int, causal: bool, kv_splits: int,
                     split: int) -> BlockRange:
    """Key blocks of a query tile holding queries ``first_query..last_query`` in key slice ``split``
    (flash_attention.comp, main): ``split``, ``split + kv_splits``, ... up to the tile's last block."""
    kv_end = min(seq_kv, last_query + 1) if causal else seq_kv
    blocks_total = (kv_end + bc - 1) // bc
    step = kv_splits
    begin = min(blocks_total, split)
    end = blocks_total
    inside = seq_kv // bc
    unmasked = min(end, min(inside, (first_query + 1) // bc) if causal else inside)
    return BlockRange(begin, unmasked, end, step)


def slice_keys(ranges: BlockRange, bc: int, seq_kv: int) -> np.ndarray:
    """The key indices that the blocks of ``ranges`` hold, in the order the slice reads them."""
    starts = np.asarray(ranges.blocks, dtype=np.int64) * bc
    keys = (starts[:, None] + np.arange(bc)[None, :]).ravel()
    return keys[keys < seq_kv]


def block_ranges(row0: int, seq_kv: int, br: int, bc: int, causal: bool, kv_splits: int, split: int) -> BlockRange:
    """Key blocks of the one-head query tile starting at ``row0`` in key slice ``split``."""
    return key_block_ranges(row0, row0 + br - 1, seq_kv, bc, causal, kv_splits, split)


def _tile(q_tile, k_plane, v_plane, scale_log2, queries, ranges: BlockRange, causal, bc, p_dtype=None):
    """(O, lse) of one query tile over its key blocks; padded query rows are zero, as Constant clamp reads them.
    ``queries``: each row's query index (the causal mask). ``p_dtype``: P is rounded to it before P·V (the
    shader's conversion to an A matrix)."""
    br, d = q_tile.shape
    work = q_tile.dtype
    m = np.full(br, MASKED, work)
    l = np.zeros(br, work)
    acc = np.zeros((br, d), work)
    seq_kv = k_plane.shape[0]
    for block in ranges.blocks:
        col0 = block * bc
        keys = np.zeros((bc, d), work)
        values = np.zeros((bc, d), work)
        real = k_plane[col0:col0 + bc]
        keys[:len(real)], values[:len(real)] = real, v_plane[col0:col0 + bc]
        s = (q_tile @ keys.T) * scale_log2
        if block >= ranges.unmasked:
            key = col0 + np.arange(bc)[None, :]
            hidden = (key >= seq_kv) | (causal & (key > queries[:, None]))
            s = np.where(hidden, work.type(MASKED), s)
        m_new = np.maximum(m, s.max(axis=1))
        p = np.exp2(s - m_new[:, None])
        rescale = np.exp2(m - m_new)
        m = m_new
        l = l * rescale + p.sum(axis=1)
        p_used = p if p_dtype is None else p.astype(p_dtype).astype(work)
        acc = acc * rescale[:, None] + p_used @ values
    if ranges.begin >= ranges.end:
        return acc, m * np.log(2.0)
    return acc / l[:, None], (m + np.log2(l)) * np.log(2.0)


def blocked_attention(q, k, v, tile: AttentionTile, *, causal: bool = False, scale=None, kv_splits: int = 1,
                      gqa_rows: bool = False, emulate: bool = False,
                      combine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(O, lse) computed the shader's way: query tiles of BR rows (``gqa_rows``: over the group's q heads
    stacked), key blocks of BC, optional key slices merged as attention_combine.comp merges them
    (``combine=False``: the [kv_splits] partials, unmerged). ``emulate``: fp32 arithmetic and P rounded to the
    input type."""
    _, shape = check_inputs(q, k, v)
    work = np.dtype(np.float32) if emulate else np.dtype(np.float64)
    p_dtype = q.dtype if emulate else None
    scale_log2 = work.type(resolve_scale(scale, shape.head_dim) / np.log(2.0))
    br, bc, d, sq = tile.br, tile.bc, shape.head_dim, shape.seq_q
    heads = shape.group if gqa_rows else 1          # q heads stacked in one tile's rows
    rows = heads * sq
    tiles = -(-rows // br)
    out = np.zeros((kv_splits, shape.batch, shape.q_heads // heads, tiles * br, d))
    lse = np.zeros((kv_splits, shape.batch, shape.q_heads // heads, tiles * br))
    for b in range(shape.batch):
        for y in range(shape.q_heads // heads):
            kv_head = y * heads // shape.group
            k_plane, v_plane = k[b, kv_head].astype(work), v[b, kv_head].astype(work)
            stacked = q[b, y * heads:(y + 1) * heads].reshape(rows, d).astype(work)
            for t in range(tiles):
                row0 = t * br
                q_tile = np.zeros((br, d), work)
                real = stacked[row0:row0 + br]
                q_tile[:len(real)] = real
                queries = (row0 + np.arange(br)) % sq if gqa_rows else row0 + np.arange(br)
                first, last = query_span(row0, br, rows, sq, gqa_rows)
                for split in range(kv_splits):
                    ranges = key_block_ranges(first, last, shape.seq_kv, bc, causal, kv_splits, split)
                    o_t, lse_t = _tile(q_tile, k_plane, v_plane, scale_log2, queries, ranges, causal, bc, p_dtype)
                    out[split, b, y, row0:row0 + br], lse[split, b, y, row0:row0 + br] = o_t, lse_t
    out = out[..., :rows, :].reshape(kv_splits, shape.batch, shape.q_heads, sq, d)
    lse = lse[..., :rows].reshape(kv_splits, shape.batch, shape.q_heads, sq)
    if not combine:
        return out, lse
    return combine_splits(out, lse) if kv_splits > 1 else (out[0], lse[0])


def combine_splits(partial_o: np.ndarray, partial_lse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """attention_combine.comp: O = sum_s exp(lse_s - lse) O_s, lse = log sum_s exp(lse_s)."""
    largest = partial_lse.max(axis=0)
    weights = np.exp(partial_lse - largest)
    total = weights.sum(axis=0)
    return (weights[..., None] * partial_o).sum(axis=0) / total[..., None], largest + np.log(total)
