"""The shared 2:4 structured-sparse format (numpy only).

Every 2:4 path in vkcoop (the Vulkan decode function, the CUDA ``mma.sp`` and
``wgmma.mma_async.sp`` kernels, the cuSPARSELt baseline) starts from the one
compressed form built here.

Format, for a dense ``A`` of shape ``[M][K]``:

* ``values``   ``[M][K/2]``, same dtype as ``A``: in every 4-wide chunk along K
  the two kept entries, in ascending K order;
* ``metadata`` ``[M][K/32]`` ``uint32``: nibble ``j`` (bits ``4j..4j+3``) of
  word ``c`` describes columns ``32c+4j .. 32c+4j+3`` and equals
  ``idx0 | idx1 << 2`` with ``idx0 < idx1`` the positions of the kept entries
  inside the chunk.

The element types: fp16, bf16 and fp32, with ``K % 32 == 0`` (one metadata word); and the 8-bit types of
``wgmma.mma_async.sp`` m64nNk64 (float8_e4m3fn, float8_e5m2, int8, uint8) with ``K % 64 == 0`` (one instruction
step, two words a row). The format is the same for every type: the chunk is 4 elements whatever their width.

This nibble is exactly the PTX ISA's per-chunk metadata for sparse MMA (PTX ISA
"Sparse matrix storage": section 9.7.14.6.1 for ``mma.sp``, 9.7.15.6.1 for
``wgmma.mma_async.sp``, where ``.f16``/``.bf16`` and ``.e4m3``/``.e5m2``/``.s8``/``.u8``
are all 2:4 with two 2-bit indices per 4-wide chunk); ``idx0 < idx1``
is what ``mma.sp::ordered_metadata`` requires, and it rules out the patterns
PTX calls invalid (0b0000, 0b0101, 0b1010, 0b1111). How a lane's metadata register
takes these words differs by type (``vkcoop.cuda.layout``).

The metadata is built from the *prune mask* (which positions were kept), never
from "which entries are nonzero": a chunk with fewer than two nonzeros still
gets two distinct indices, and a kept ``-0.0`` keeps its sign bit.

Round trip: ``decompress_2to4(compress_2to4(a))`` equals ``prune_2to4(a)`` bit
for bit, where pruning writes ``+0`` into the dropped positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import (BF16, EIGHT_BIT_DTYPES, CompressedPair, SparseFormatError, SparseTypeError, as_is_order,
                     check_matrix, check_metadata_array, check_pair_shapes, first_two_code, flag, magnitude_order,
                     metadata_nibbles, pack_nibbles, pruned)

#: K of the 16- and 32-bit types must be a multiple of this: one uint32 metadata word covers 32 columns.
K_ALIGNMENT = 32
#: K of the 8-bit types must be a multiple of this: one ``wgmma.mma_async.sp`` m64nNk64 step.
K_ALIGNMENT_8BIT = 64
#: PTX metadata nibbles that select the same position twice (undefined behaviour on the GPU).
INVALID_NIBBLES = (0b0000, 0b0101, 0b1010, 0b1111)

_CHUNK = 4


def supported_dtypes() -> tuple[np.dtype, ...]:
    """The element types the format accepts: fp16, bf16 (ml_dtypes), fp32, and the 8-bit float8_e4m3fn,
    float8_e5m2 (ml_dtypes), int8 and uint8."""
    dtypes = [np.dtype(np.float16), np.dtype(np.float32)]
    if BF16 is not None:
        dtypes.insert(1, BF16)
    return (*dtypes, *EIGHT_BIT_DTYPES)


def k_alignment(dtype) -> int:
    """The multiple K must be of for ``dtype``: 64 for the 8-bit types (their wgmma.sp step), else 32."""
    return K_ALIGNMENT_8BIT if np.dtype(dtype).itemsize == 1 else K_ALIGNMENT


def _k_reason(dtype) -> str:
    if np.dtype(dtype).itemsize == 1:
        return "one wgmma.mma_async.sp m64nNk64 step of an 8-bit type"
    return "one uint32 metadata word covers 32 columns"


def _check_dense(name: str, dense) -> np.ndarray:
    dense = check_matrix(name, dense, supported_dtypes(), "2:4")
    k, align = dense.shape[1], k_alignment(dense.dtype)
    if k % align:
        raise SparseFormatError(f"{name} has K={k} columns; K must be a multiple of {align} "
                                f"({_k_reason(dense.dtype)})")
    return dense


def _chunks(dense: np.ndarray) -> np.ndarray:
    m, k = dense.shape
    return dense.reshape(m, k // _CHUNK, _CHUNK)


def check_2to4(dense: np.ndarray, *, name: str = "dense") -> None:
    """Raise :class:`SparseFormatError` unless every 4-chunk along K has at most 2 nonzeros.

    ``-0.0`` counts as zero (it compares equal to zero).
    """
    dense = _check_dense(name, dense)
    nonzero_per_chunk = np.count_nonzero(_chunks(dense) != 0, axis=-1)
    bad = np.argwhere(nonzero_per_chunk > 2)
    if bad.size:
        row, chunk = (int(v) for v in bad[0])
        raise SparseFormatError(
            f"{name} is not 2:4 sparse: {len(bad)} chunk(s) of 4 along K have more than 2 "
            f"nonzeros; first at row {row}, columns {4 * chunk}..{4 * chunk + 3} "
            f"({int(nonzero_per_chunk[row, chunk])} nonzeros)")


def _kept_code(dense: np.ndarray, accept_sparse: bool) -> np.ndarray:
    """[M][K/4] uint8: bit i set where position i of the chunk is kept (exactly two bits)."""
    chunks = _chunks(dense)
    if accept_sparse:
        check_2to4(dense)
        priority = as_is_order(chunks)
    else:
        priority = magnitude_order(chunks, "2:4")   # largest |x| first; ties go to the lower index
    return first_two_code(priority)


#: The PTX metadata nibble ``lowest | highest << 2`` of each 4-bit mask of kept positions (its two set bits).
_NIBBLE = np.array([((c & -c).bit_length() - 1) | (c.bit_length() - 1) << 2 if c else 0 for c in range(16)],
                   dtype=np.uint32)


@dataclass(frozen=True)
class Compressed2to4(CompressedPair):
    """A 2:4 matrix in the shared format (see the module docstring).

    ``values``: ``[M][K/2]`` in the dense dtype; ``metadata``: ``[M][K/32]`` uint32.
    """

    values: np.ndarray
    metadata: np.ndarray

    @staticmethod
    def check(values: np.ndarray, metadata: np.ndarray) -> None:
        validate_compressed(values, metadata)


def _mask_from_code(code: np.ndarray, m: int, k: int) -> np.ndarray:
    return ((code[..., None] >> np.arange(_CHUNK, dtype=np.uint8)) & 1).astype(bool).reshape(m, k)


def prune_2to4(dense: np.ndarray, *, accept_sparse: bool = False,
               return_mask: bool = False):
    """Prune ``dense`` [M][K] to 2:4 along K.

    ``accept_sparse=False``: keep the two largest ``|x|`` of every 4 (ties: lower index).
    ``accept_sparse=True``: take an already-2:4 matrix as it is; raise
    :class:`SparseFormatError` if some chunk has more than two nonzeros.

    Returns the pruned matrix (dropped positions hold ``+0``), and with
    ``return_mask=True`` also the boolean keep mask (exactly 2 per chunk).
    """
    dense = _check_dense("dense", dense)
    accept_sparse, return_mask = flag(accept_sparse, "accept_sparse"), flag(return_mask, "return_mask")
    m, k = dense.shape
    mask = _mask_from_code(_kept_code(dense, accept_sparse), m, k)
    result = pruned(dense, mask)
    return (result, mask) if return_mask else result


def compress_2to4(dense: np.ndarray, *, accept_sparse: bool = False, return_pruned: bool = False):
    """Prune (see :func:`prune_2to4`) and compress ``dense`` into the shared format: a :class:`Compressed2to4`,
    and with ``return_pruned=True`` also the pruned matrix of the same prune (what decompressing gives).

    Follows the PTX ISA's "Sparse matrix storage" for ``wgmma.mma_async.sp`` (2:4, two 2-bit indices a chunk)
    for every accepted type; 8-bit types need ``K % 64 == 0``."""
    dense = _check_dense("dense", dense)
    accept_sparse, return_pruned = flag(accept_sparse, "accept_sparse"), flag(return_pruned, "return_pruned")
    m, k = dense.shape
    code = _kept_code(dense, accept_sparse)                         # [M][K/4]
    mask = _mask_from_code(code, m, k)
    values = dense[mask].reshape(m, k // 2)                         # row-major: each chunk's pair in K order
    compressed = Compressed2to4(values=values, metadata=pack_nibbles(_NIBBLE[code]))
    return (compressed, pruned(dense, mask)) if return_pruned else compressed


def validate_metadata(metadata: np.ndarray, *, name: str = "metadata") -> None:
    """Raise :class:`SparseFormatError` unless every nibble is ``idx0 | idx1<<2`` with idx0 < idx1.

    That rejects the PTX-invalid patterns 0b0000/0b0101/0b1010/0b1111 and the
    unordered ones that ``mma.sp::ordered_metadata`` forbids.
    """
    check_metadata_array(metadata, name, "[M][K/32]")
    nibbles = metadata_nibbles(metadata)
    ordered = (nibbles & 3) < (nibbles >> 2)
    if not ordered.all():
        bad = np.argwhere(~ordered)
        row, chunk = (int(v) for v in bad[0])
        code = int(nibbles[row, chunk])
        kind = "a PTX-invalid pattern" if code in INVALID_NIBBLES else "unordered (idx0 >= idx1)"
        raise SparseFormatError(
            f"{name} has {len(bad)} invalid nibble(s); first at row {row}, word {chunk // 8}, "
            f"nibble {chunk % 8} (columns {4 * chunk}..{4 * chunk + 3}): 0b{code:04b} is {kind}")


def validate_compressed(values: np.ndarray, metadata: np.ndarray) -> None:
    """Check a (values, metadata) pair for shape, dtype and metadata validity."""
    if not isinstance(values, np.ndarray):
        raise SparseTypeError(f"values must be a numpy array, got {type(values).__name__}")
    if values.dtype not in supported_dtypes():
        raise SparseTypeError(f"values has dtype {values.dtype}; expected one of "
                              + ", ".join(str(d) for d in supported_dtypes()))
    if values.ndim != 2:
        raise SparseFormatError(f"values must be 2-D [M][K/2], got shape {values.shape}")
    validate_metadata(metadata)
    check_pair_shapes(values, metadata, k_alignment(values.dtype) // 2, K_ALIGNMENT)


def decompress_2to4(compressed: Compressed2to4) -> np.ndarray:
    """Rebuild the pruned dense [M][K] matrix (dropped positions ``+0``), bit exact."""
    if not isinstance(compressed, Compressed2to4):
        raise SparseTypeError(f"compressed must be a Compressed2to4, got {type(compressed).__name__}")
    values, metadata = compressed.values, compressed.metadata
    validate_compressed(values, metadata)
    m, k = compressed.shape
    nibbles = metadata_nibbles(metadata)                            # [M][K/4], validated: idx0 < idx1
    code = (np.uint8(1) << (nibbles & 3)) | (np.uint8(1) << (nibbles >> 2))
    dense = np.zeros((m, k), dtype=values.dtype)
    dense[_mask_from_code(code, m, k)] = values.reshape(-1)          # row-major: each chunk's pair in K order
    return dense
