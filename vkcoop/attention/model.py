"""flash_attention.comp's loop structure in float64 numpy, so its index arithmetic is tested without a GPU.

:func:`block_ranges` is the shader's choice of key blocks for one query tile and key slice (written the same way,
line for line); :func:`blocked_attention` runs the online softmax over those blocks tile by tile, with the same
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
    unmasked: int     # blocks [begin, unmasked) need no mask
    end: int          # one past the last block


def block_ranges(row0: int, seq_kv: int, br: int, bc: int, causal: bool, kv_splits: int, split: int) -> BlockRange:
    """Key blocks of the query tile starting at ``row0`` in key slice ``split`` (flash_attention.comp, main)."""
    kv_end = min(seq_kv, row0 + br) if causal else seq_kv
    blocks_total = (kv_end + bc - 1) // bc
    per_split = (blocks_total + kv_splits - 1) // kv_splits
    begin = min(blocks_total, split * per_split)
    end = min(blocks_total, begin + per_split)
    inside = seq_kv // bc
    unmasked = min(end, min(inside, (row0 + 1) // bc) if causal else inside)
    return BlockRange(begin, unmasked, end)


def _tile(q_tile, k_plane, v_plane, scale_log2, row0, ranges: BlockRange, causal, bc, p_dtype=None):
    """(O, lse) of one query tile over its key blocks; padded query rows are zero, as Constant clamp reads them.
    ``p_dtype``: P is rounded to it before P·V (the shader's conversion to an A matrix)."""
    br, d = q_tile.shape
    work = q_tile.dtype
    m = np.full(br, MASKED, work)
    l = np.zeros(br, work)
    acc = np.zeros((br, d), work)
    seq_kv = k_plane.shape[0]
    for block in range(ranges.begin, ranges.end):
        col0 = block * bc
        keys = np.zeros((bc, d), work)
        values = np.zeros((bc, d), work)
        real = k_plane[col0:col0 + bc]
        keys[:len(real)], values[:len(real)] = real, v_plane[col0:col0 + bc]
        s = (q_tile @ keys.T) * scale_log2
        if block >= ranges.unmasked:
            key = col0 + np.arange(bc)[None, :]
            hidden = (key >= seq_kv) | (causal & (key > row0 + np.arange(br)[:, None]))
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
                      emulate: bool = False, combine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(O, lse) computed the shader's way: query tiles of BR rows, key blocks of BC, optional key slices merged
    as attention_combine.comp merges them (``combine=False``: the [kv_splits] partials, unmerged).
    ``emulate``: fp32 arithmetic and P rounded to the input type."""
    _, shape = check_inputs(q, k, v)
    work = np.dtype(np.float32) if emulate else np.dtype(np.float64)
    p_dtype = q.dtype if emulate else None
    scale_log2 = work.type(resolve_scale(scale, shape.head_dim) / np.log(2.0))
    br, bc, d = tile.br, tile.bc, shape.head_dim
    tiles = -(-shape.seq_q // br)
    out = np.zeros((kv_splits, shape.batch, shape.q_heads, tiles * br, d))
    lse = np.zeros((kv_splits, shape.batch, shape.q_heads, tiles * br))
    for b in range(shape.batch):
        for h in range(shape.q_heads):
            k_plane = k[b, h // shape.group].astype(work)
            v_plane = v[b, h // shape.group].astype(work)
            for t in range(tiles):
                row0 = t * br
                q_tile = np.zeros((br, d), work)
                real = q[b, h, row0:row0 + br].astype(work)
                q_tile[:len(real)] = real
                for split in range(kv_splits):
                    ranges = block_ranges(row0, shape.seq_kv, br, bc, causal, kv_splits, split)
                    o_t, lse_t = _tile(q_tile, k_plane, v_plane, scale_log2, row0, ranges, causal, bc, p_dtype)
                    out[split, b, h, row0:row0 + br], lse[split, b, h, row0:row0 + br] = o_t, lse_t
    out, lse = out[..., :shape.seq_q, :], lse[..., :shape.seq_q]
    if not combine:
        return out, lse
    return combine_splits(out, lse) if kv_splits > 1 else (out[0], lse[0])


def combine_splits(partial_o: np.ndarray, partial_lse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """attention_combine.comp: O = sum_s exp(lse_s - lse) O_s, lse = log sum_s exp(lse_s)."""
    largest = partial_lse.max(axis=0)
    weights = np.exp(partial_lse - largest)
    total = weights.sum(axis=0)
    return (weights[..., None] * partial_o).sum(axis=0) / total[..., None], largest + np.log(total)
