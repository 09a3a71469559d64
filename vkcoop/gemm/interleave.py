"""The 2:4 format regrouped for one-pointer decoding by coopmat2_sparse24.comp (``META_WORDS`` > 0)."""
from __future__ import annotations

import numpy as np

from .. import sparse as sparse24
from .types import GemmInputError

#: Interleaved-layout block sizes the 2:4 shader has variants for (metadata words per block; 0 = split layout): the
#: seeds use 1 (compute-bound) and 4 (narrow).
META_WORDS_CHOICES = (0, 1, 4)


def interleave_2to4(values: np.ndarray, metadata: np.ndarray, meta_words: int) -> np.ndarray:
    """The 2:4 format regrouped for one-pointer decoding: ``uint32 [M][blocks][9 * meta_words]``.

    Block ``c`` of row ``r`` covers columns ``32*meta_words*c ..``: first metadata words
    ``metadata[r, meta_words*c : meta_words*(c+1)]``, then the value pairs of those columns
    (``values[r, 16*meta_words*c : ...]`` as uint32, two 16-bit values each, lower K first). A last partial
    block is padded with zero words. Pure numpy; done once before any dispatch. Inverse:
    :func:`deinterleave_2to4`.
    """
    if meta_words not in META_WORDS_CHOICES[1:]:
        raise GemmInputError(f"meta_words={meta_words}: choose from {META_WORDS_CHOICES[1:]}")
    values = np.ascontiguousarray(values)
    metadata = np.ascontiguousarray(metadata)
    if values.dtype.itemsize != 2 or values.ndim != 2:
        raise GemmInputError(f"values must be a 2-D array of 16-bit elements, got {values.dtype} {values.shape}")
    m, words = metadata.shape
    if metadata.dtype != np.uint32 or values.shape != (m, 16 * words):
        raise GemmInputError(f"metadata {metadata.dtype} {metadata.shape} does not match values {values.shape} "
                             "(want uint32 [M][K/32] with values [M][K/2])")
    blocks = -(-words // meta_words)
    padded_words = blocks * meta_words
    meta = np.zeros((m, padded_words), np.uint32)
    meta[:, :words] = metadata
    pairs = np.zeros((m, padded_words * 8), np.uint32)
    pairs[:, :words * 8] = _pairs_as_words(values, m, words)
    return np.ascontiguousarray(np.concatenate(
        [meta.reshape(m, blocks, meta_words), pairs.reshape(m, blocks, 8 * meta_words)], axis=2))


def _pairs_as_words(values: np.ndarray, m: int, words: int) -> np.ndarray:
    """Two consecutive 16-bit values as one little-endian uint32 (the first in the low half)."""
    halves = values.view(np.uint16).reshape(m, words * 8, 2).astype(np.uint32)
    return halves[..., 0] | (halves[..., 1] << 16)


def deinterleave_2to4(blocks: np.ndarray, k: int, meta_words: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(values [M][K/2], metadata [M][K/32]) back from :func:`interleave_2to4`'s blocks."""
    m = blocks.shape[0]
    words = k // sparse24.K_ALIGNMENT
    meta = blocks[:, :, :meta_words].reshape(m, -1)[:, :words]
    pairs = blocks[:, :, meta_words:].reshape(m, -1)[:, :words * 8]
    return words_as_values(pairs, m, k, dtype), np.ascontiguousarray(meta)


def words_as_values(pairs: np.ndarray, m: int, k: int, dtype) -> np.ndarray:
    """values [M][K/2] of ``dtype`` from uint32 words each holding two consecutive 16-bit values (the first in the
    low half): the inverse of :func:`_pairs_as_words`."""
    halves = np.stack([pairs & 0xFFFF, pairs >> 16], axis=-1).astype(np.uint16).reshape(m, k // 2)
    return halves.view(np.dtype(dtype))
