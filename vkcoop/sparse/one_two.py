"""The 1:2 structured-sparse format of tf32 (fp32 storage; numpy only).

``wgmma.mma_async.sp`` with ``.tf32`` A (m64nNk16) takes A 1:2 sparse: every 2-wide chunk along K keeps one
entry (PTX ISA "Sparse matrix storage", section 9.7.15.6.1). Format, for a dense float32 ``A`` ``[M][K]`` with
``K % 16 == 0`` (one m64nNk16 step, one metadata word):

* ``values``   ``[M][K/2]`` float32: the kept entry of every chunk, bits as given (the tensor core reads
  their tf32 bits: sign, exponent and the top ten mantissa bits);
* ``metadata`` ``[M][K/16]`` ``uint32``: nibble ``j`` (bits ``4j..4j+3``) of word ``c`` describes columns
  ``16c+2j`` and ``16c+2j+1``: ``0b0100`` where the first is kept, ``0b1110`` where the second is.

PTX names 0b0100 and 0b1110 the only meaningful 4-bit values; they are the 2:4 nibbles ``idx0 | idx1 << 2``
of a chunk read as four 16-bit halves, halves 0,1 (element 0) or 2,3 (element 1). Which lane's register holds
which nibbles is ``vkcoop.cuda.layout.reorder_metadata_tf32_for_wgmma``.

As in the 2:4 format, the metadata comes from the prune mask, so a chunk of two zeros still gets a valid
nibble, and ``decompress_1to2(compress_1to2(a))`` equals ``prune_1to2(a)`` bit for bit (``+0.0`` where dropped).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import (CompressedPair, SparseFormatError, SparseTypeError, as_is_order, check_matrix,
                     check_metadata_array, check_pair_shapes, flag, magnitude_order, metadata_nibbles, pack_nibbles,
                     pruned)

#: K must be a multiple of this: one uint32 metadata word (8 chunks of 2) and one m64nNk16 step cover 16 columns.
K_ALIGNMENT_1TO2 = 16
#: The metadata nibble of a chunk that keeps its first element, and of one that keeps its second.
KEEP_FIRST, KEEP_SECOND = 0b0100, 0b1110

_DTYPES = (np.dtype(np.float32),)


def _check_dense(name: str, dense) -> np.ndarray:
    dense = check_matrix(name, dense, _DTYPES, "1:2 (tf32 in fp32 storage)")
    k = dense.shape[1]
    if k % K_ALIGNMENT_1TO2:
        raise SparseFormatError(f"{name} has K={k} columns; K must be a multiple of {K_ALIGNMENT_1TO2} "
                                "(one wgmma.mma_async.sp m64nNk16 step, one uint32 metadata word)")
    return dense


def _pairs(dense: np.ndarray) -> np.ndarray:
    m, k = dense.shape
    return dense.reshape(m, k // 2, 2)


def check_1to2(dense: np.ndarray, *, name: str = "dense") -> None:
    """Raise :class:`SparseFormatError` unless every 2-chunk along K has at most one nonzero (``-0.0`` is zero)."""
    dense = _check_dense(name, dense)
    both = (_pairs(dense) != 0).all(axis=-1)
    if both.any():
        bad = np.argwhere(both)
        row, chunk = (int(v) for v in bad[0])
        raise SparseFormatError(
            f"{name} is not 1:2 sparse: {len(bad)} chunk(s) of 2 along K have two nonzeros; "
            f"first at row {row}, columns {2 * chunk}..{2 * chunk + 1}")


def _kept_second(dense: np.ndarray, accept_sparse: bool) -> np.ndarray:
    """[M][K/2] bool: True where a chunk keeps its second element. Ties (equal magnitudes, or two zeros of one
    sign) keep the first, as the 2:4 choice does."""
    pairs = _pairs(dense)
    if accept_sparse:
        check_1to2(dense)
        priority = as_is_order(pairs)
    else:
        priority = magnitude_order(pairs, "1:2")
    return priority[..., 1] < priority[..., 0]


def _mask(second: np.ndarray) -> np.ndarray:
    m = second.shape[0]
    return np.stack([~second, second], axis=-1).reshape(m, -1)


@dataclass(frozen=True)
class Compressed1to2(CompressedPair):
    """A 1:2 tf32 matrix (see the module docstring): ``values`` ``[M][K/2]`` float32, ``metadata`` ``[M][K/16]``
    uint32."""

    values: np.ndarray
    metadata: np.ndarray

    @staticmethod
    def check(values: np.ndarray, metadata: np.ndarray) -> None:
        validate_compressed_1to2(values, metadata)


def prune_1to2(dense: np.ndarray, *, accept_sparse: bool = False, return_mask: bool = False):
    """Prune float32 ``dense`` [M][K] to 1:2 along K.

    ``accept_sparse=False``: keep the larger ``|x|`` of every 2 (ties: the first); NaN is refused.
    ``accept_sparse=True``: take an already-1:2 matrix as it is; raise :class:`SparseFormatError` where a chunk
    has two nonzeros.

    Returns the pruned matrix (dropped positions ``+0.0``), and with ``return_mask=True`` also the boolean keep
    mask (exactly one per chunk).
    """
    dense = _check_dense("dense", dense)
    accept_sparse, return_mask = flag(accept_sparse, "accept_sparse"), flag(return_mask, "return_mask")
    mask = _mask(_kept_second(dense, accept_sparse))
    result = pruned(dense, mask)
    return (result, mask) if return_mask else result


def compress_1to2(dense: np.ndarray, *, accept_sparse: bool = False, return_pruned: bool = False):
    """Prune (see :func:`prune_1to2`) and compress float32 ``dense`` into the 1:2 tf32 format of PTX ISA
    "Sparse matrix storage" (``wgmma.mma_async.sp`` ``.tf32``): a :class:`Compressed1to2`, and with
    ``return_pruned=True`` also the pruned matrix (what decompressing gives)."""
    dense = _check_dense("dense", dense)
    accept_sparse, return_pruned = flag(accept_sparse, "accept_sparse"), flag(return_pruned, "return_pruned")
    m, k = dense.shape
    second = _kept_second(dense, accept_sparse)                    # [M][K/2]
    mask = _mask(second)
    values = dense[mask].reshape(m, k // 2)
    nibbles = np.where(second, KEEP_SECOND, KEEP_FIRST)
    compressed = Compressed1to2(values=values, metadata=pack_nibbles(nibbles))
    return (compressed, pruned(dense, mask)) if return_pruned else compressed


def validate_metadata_1to2(metadata: np.ndarray, *, name: str = "metadata") -> None:
    """Raise :class:`SparseFormatError` unless every nibble is 0b0100 or 0b1110 (PTX: any other value of a
    tf32 chunk's index is undefined behaviour)."""
    check_metadata_array(metadata, name, "[M][K/16]")
    nibbles = metadata_nibbles(metadata)
    meaningful = (nibbles == KEEP_FIRST) | (nibbles == KEEP_SECOND)
    if not meaningful.all():
        bad = np.argwhere(~meaningful)
        row, chunk = (int(v) for v in bad[0])
        raise SparseFormatError(
            f"{name} has {len(bad)} invalid 1:2 nibble(s); first at row {row}, word {chunk // 8}, "
            f"nibble {chunk % 8} (columns {2 * chunk}..{2 * chunk + 1}): 0b{int(nibbles[row, chunk]):04b} is "
            "neither 0b0100 (first kept) nor 0b1110 (second kept)")


def validate_compressed_1to2(values: np.ndarray, metadata: np.ndarray) -> None:
    """Check a 1:2 (values, metadata) pair for shape, dtype and metadata validity."""
    if not isinstance(values, np.ndarray):
        raise SparseTypeError(f"values must be a numpy array, got {type(values).__name__}")
    if values.dtype not in _DTYPES:
        raise SparseTypeError(f"values has dtype {values.dtype}; the 1:2 format (tf32) stores float32")
    if values.ndim != 2:
        raise SparseFormatError(f"values must be 2-D [M][K/2], got shape {values.shape}")
    validate_metadata_1to2(metadata)
    check_pair_shapes(values, metadata, K_ALIGNMENT_1TO2 // 2, K_ALIGNMENT_1TO2)


def decompress_1to2(compressed: Compressed1to2) -> np.ndarray:
    """Rebuild the pruned dense float32 [M][K] matrix (dropped positions ``+0.0``), bit exact."""
    if not isinstance(compressed, Compressed1to2):
        raise SparseTypeError(f"compressed must be a Compressed1to2, got {type(compressed).__name__}")
    validate_compressed_1to2(compressed.values, compressed.metadata)
    m, k = compressed.shape
    second = metadata_nibbles(compressed.metadata) == KEEP_SECOND    # validated: the other value is KEEP_FIRST
    dense = np.zeros((m, k), dtype=compressed.values.dtype)
    dense[_mask(second)] = compressed.values.reshape(-1)
    return dense
