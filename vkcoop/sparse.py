"""The shared 2:4 structured-sparse format (numpy only).

Every 2:4 path in vkcoop (the Vulkan decode function, the CUDA ``mma.sp`` and
``wgmma.mma_async.sp`` kernels, the cuSPARSELt baseline) starts from the one
compressed form built here.

Format, for a dense ``A`` of shape ``[M][K]`` with ``K % 32 == 0``:

* ``values``   ``[M][K/2]``, same dtype as ``A``: in every 4-wide chunk along K
  the two kept entries, in ascending K order;
* ``metadata`` ``[M][K/32]`` ``uint32``: nibble ``j`` (bits ``4j..4j+3``) of
  word ``c`` describes columns ``32c+4j .. 32c+4j+3`` and equals
  ``idx0 | idx1 << 2`` with ``idx0 < idx1`` the positions of the kept entries
  inside the chunk.

This nibble is exactly the PTX ISA's per-chunk metadata for half-precision
sparse MMA (PTX ISA "Sparse matrix storage", section 9.7.14.6.1); ``idx0 < idx1``
is what ``mma.sp::ordered_metadata`` requires, and it rules out the patterns
PTX calls invalid (0b0000, 0b0101, 0b1010, 0b1111).

The metadata is built from the *prune mask* (which positions were kept), never
from "which entries are nonzero": a chunk with fewer than two nonzeros still
gets two distinct indices, and a kept ``-0.0`` keeps its sign bit.

Round trip: ``decompress_2to4(compress_2to4(a))`` equals ``prune_2to4(a)`` bit
for bit, where pruning writes ``+0.0`` into the dropped positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError, InputTypeError

try:  # bf16 support; ml_dtypes is a declared dependency
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    _BF16 = None

#: K must be a multiple of this: one uint32 metadata word covers 32 columns.
K_ALIGNMENT = 32
#: PTX metadata nibbles that select the same position twice (undefined behaviour on the GPU).
INVALID_NIBBLES = (0b0000, 0b0101, 0b1010, 0b1111)

_NIBBLES_PER_WORD = 8
_CHUNK = 4


class SparseFormatError(InputError):
    """A matrix or compressed operand does not follow the 2:4 format (a ValueError)."""


class SparseTypeError(SparseFormatError, InputTypeError):
    """An operand of the wrong type or dtype (also a TypeError)."""


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise SparseTypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def supported_dtypes() -> tuple[np.dtype, ...]:
    """The element types the format accepts: fp16, bf16 (ml_dtypes) and fp32."""
    dtypes = [np.dtype(np.float16), np.dtype(np.float32)]
    if _BF16 is not None:
        dtypes.insert(1, _BF16)
    return tuple(dtypes)


def _check_dense(name: str, dense) -> np.ndarray:
    if not isinstance(dense, np.ndarray):
        raise SparseTypeError(f"{name} must be a numpy array, got {type(dense).__name__}")
    if dense.ndim != 2:
        raise SparseFormatError(f"{name} must be 2-D [M][K], got shape {dense.shape}")
    if dense.dtype not in supported_dtypes():
        names = ", ".join(str(d) for d in supported_dtypes())
        raise SparseTypeError(f"{name} has dtype {dense.dtype}; the 2:4 format supports {names}")
    m, k = dense.shape
    if m == 0 or k == 0:
        raise SparseFormatError(f"{name} is empty (shape {dense.shape})")
    if k % K_ALIGNMENT:
        raise SparseFormatError(
            f"{name} has K={k} columns; K must be a multiple of {K_ALIGNMENT} "
            "(one uint32 metadata word covers 32 columns)")
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


def _magnitude_order(chunks: np.ndarray) -> np.ndarray:
    """A key per element that orders larger ``|x|`` first: the bits with the sign cleared, complemented. IEEE
    floats of one type order by magnitude as their sign-less bit patterns do (zeros, subnormals and infinities
    included), so this is ``-|x|`` in an unsigned integer of the element's width, without a float32 copy."""
    unsigned = np.dtype(f"u{chunks.dtype.itemsize}")
    bits = chunks.view(unsigned) & unsigned.type((1 << (8 * unsigned.itemsize - 1)) - 1)
    if (bits > np.array(np.inf, dtype=chunks.dtype).view(unsigned)).any():
        dense = chunks.reshape(chunks.shape[0], -1)
        row, col = (int(v) for v in np.argwhere(np.isnan(dense.astype(np.float32)))[0])
        raise SparseFormatError(f"dense holds NaN (first at row {row}, column {col}); "
                                "2:4 pruning by magnitude is undefined for NaN")
    return ~bits


def _kept_code(dense: np.ndarray, accept_sparse: bool) -> np.ndarray:
    """[M][K/4] uint8: bit i set where position i of the chunk is kept (exactly two bits)."""
    chunks = _chunks(dense)
    if accept_sparse:
        check_2to4(dense)
        # Keep every nonzero; fill up to two with zeros, preferring a -0.0 so its
        # sign survives the round trip, then the lowest index (stable sort).
        nonzero = chunks != 0
        negative_zero = ~nonzero & np.signbit(chunks)
        priority = np.where(nonzero, 0, np.where(negative_zero, 1, 2)).astype(np.uint8)
    else:
        priority = _magnitude_order(chunks)  # largest |x| first; ties go to the lower index
    return _first_two_code(priority)


#: The PTX metadata nibble ``lowest | highest << 2`` of each 4-bit mask of kept positions (its two set bits).
_NIBBLE = np.array([((c & -c).bit_length() - 1) | (c.bit_length() - 1) << 2 if c else 0 for c in range(16)],
                   dtype=np.uint32)


def _first_two_code(priority: np.ndarray) -> np.ndarray:
    """[...] uint8 masks of the two positions of each group of four (the last axis) that a stable ascending sort
    would put first: position i ranks as the count of lower priorities plus the count of equal ones before it.
    Twelve comparisons of contiguous planes instead of a sort per group (eight times faster on an 8192 x 8192 A)."""
    planes = [np.ascontiguousarray(priority[..., i]) for i in range(4)]
    code = np.zeros(priority.shape[:-1], dtype=np.uint8)
    rank = np.empty(priority.shape[:-1], dtype=np.uint8)
    for i in range(4):
        rank[...] = 0
        for j in range(4):
            if i != j:
                rank += (planes[j] <= planes[i]) if j < i else (planes[j] < planes[i])
        code |= (rank < 2).astype(np.uint8) << i
    return code


@dataclass(frozen=True)
class Compressed2to4:
    """A 2:4 matrix in the shared format (see the module docstring).

    ``values``: ``[M][K/2]`` in the dense dtype; ``metadata``: ``[M][K/32]`` uint32.
    """

    values: np.ndarray
    metadata: np.ndarray

    def __post_init__(self):
        # Checked at construction: a malformed pair used to fail later, deep inside decompress (IndexError).
        validate_compressed(self.values, self.metadata)

    @property
    def shape(self) -> tuple[int, int]:
        """The dense shape ``(M, K)``."""
        return int(self.values.shape[0]), int(self.values.shape[1]) * 2

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def validate(self) -> None:
        """Check shapes, dtypes and every metadata nibble; raise :class:`SparseFormatError`."""
        validate_compressed(self.values, self.metadata)


def _mask_from_code(code: np.ndarray, m: int, k: int) -> np.ndarray:
    return ((code[..., None] >> np.arange(_CHUNK, dtype=np.uint8)) & 1).astype(bool).reshape(m, k)


def prune_2to4(dense: np.ndarray, *, accept_sparse: bool = False,
               return_mask: bool = False):
    """Prune ``dense`` [M][K] to 2:4 along K.

    ``accept_sparse=False``: keep the two largest ``|x|`` of every 4 (ties: lower index).
    ``accept_sparse=True``: take an already-2:4 matrix as it is; raise
    :class:`SparseFormatError` if some chunk has more than two nonzeros.

    Returns the pruned matrix (dropped positions hold ``+0.0``), and with
    ``return_mask=True`` also the boolean keep mask (exactly 2 per chunk).
    """
    dense = _check_dense("dense", dense)
    accept_sparse, return_mask = _flag(accept_sparse, "accept_sparse"), _flag(return_mask, "return_mask")
    m, k = dense.shape
    mask = _mask_from_code(_kept_code(dense, accept_sparse), m, k)
    pruned = _pruned(dense, mask)
    return (pruned, mask) if return_mask else pruned


def _pruned(dense: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, dense, np.zeros((), dtype=dense.dtype)).astype(dense.dtype, copy=False)


def compress_2to4(dense: np.ndarray, *, accept_sparse: bool = False, return_pruned: bool = False):
    """Prune (see :func:`prune_2to4`) and compress ``dense`` into the shared format: a :class:`Compressed2to4`,
    and with ``return_pruned=True`` also the pruned matrix of the same prune (what decompressing gives)."""
    dense = _check_dense("dense", dense)
    accept_sparse, return_pruned = _flag(accept_sparse, "accept_sparse"), _flag(return_pruned, "return_pruned")
    m, k = dense.shape
    code = _kept_code(dense, accept_sparse)                         # [M][K/4]
    mask = _mask_from_code(code, m, k)
    values = dense[mask].reshape(m, k // 2)                         # row-major: each chunk's pair in K order
    nibbles = _NIBBLE[code]                                         # [M][K/4]
    shifts = (4 * np.arange(_NIBBLES_PER_WORD, dtype=np.uint32))
    words = nibbles.reshape(m, k // K_ALIGNMENT, _NIBBLES_PER_WORD) << shifts
    metadata = np.bitwise_or.reduce(words, axis=-1).astype(np.uint32)
    compressed = Compressed2to4(values=values, metadata=np.ascontiguousarray(metadata))
    return (compressed, _pruned(dense, mask)) if return_pruned else compressed


def metadata_nibbles(metadata: np.ndarray) -> np.ndarray:
    """[M][K/32] uint32 -> [M][K/4] uint8: the per-chunk nibbles in column order."""
    _check_metadata_array(metadata, "metadata")
    octets = np.ascontiguousarray(metadata, dtype="<u4").view(np.uint8)   # nibbles 2j, 2j + 1 in octet j
    return np.stack([octets & 0xF, octets >> 4], axis=-1).reshape(metadata.shape[0], -1)


def _check_metadata_array(metadata, name: str) -> None:
    if not isinstance(metadata, np.ndarray):
        raise SparseTypeError(f"{name} must be a numpy array, got {type(metadata).__name__}")
    if metadata.dtype != np.uint32:
        raise SparseTypeError(f"{name} must be uint32, got {metadata.dtype}")
    if metadata.ndim != 2:
        raise SparseFormatError(f"{name} must be 2-D [M][K/32], got shape {metadata.shape}")


def validate_metadata(metadata: np.ndarray, *, name: str = "metadata") -> None:
    """Raise :class:`SparseFormatError` unless every nibble is ``idx0 | idx1<<2`` with idx0 < idx1.

    That rejects the PTX-invalid patterns 0b0000/0b0101/0b1010/0b1111 and the
    unordered ones that ``mma.sp::ordered_metadata`` forbids.
    """
    _check_metadata_array(metadata, name)
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
    m, half_k = values.shape
    if half_k % (K_ALIGNMENT // 2):
        raise SparseFormatError(f"values has {half_k} columns; K/2 must be a multiple of 16")
    expected = (m, half_k * 2 // K_ALIGNMENT)
    if metadata.shape != expected:
        raise SparseFormatError(
            f"metadata has shape {metadata.shape}; values {values.shape} needs [M][K/32] = {expected}")


def decompress_2to4(compressed: Compressed2to4) -> np.ndarray:
    """Rebuild the pruned dense [M][K] matrix (dropped positions ``+0.0``), bit exact."""
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
