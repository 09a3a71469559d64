"""What the 2:4 and 1:2 formats share: their errors, the element types, and choosing the kept entries of a chunk.

Kept entries are chosen by magnitude (ties to the lower index), or taken as they are from an already sparse
matrix (every nonzero kept, the rest filled with zeros, a ``-0.0`` first so its sign survives).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, InputTypeError

try:  # bf16 and the 8-bit floats; ml_dtypes is a declared dependency
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
    E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
    E5M2 = np.dtype(ml_dtypes.float8_e5m2)
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    ml_dtypes = BF16 = E4M3 = E5M2 = None

#: The 8-bit operand types of ``wgmma.mma_async.sp`` m64nNk64: ``.e4m3``, ``.e5m2``, ``.s8``, ``.u8``.
EIGHT_BIT_DTYPES = tuple(d for d in (E4M3, E5M2, np.dtype(np.int8), np.dtype(np.uint8)) if d is not None)


class SparseFormatError(InputError):
    """A matrix or compressed operand does not follow its structured-sparse format (a ValueError)."""


class SparseTypeError(SparseFormatError, InputTypeError):
    """An operand of the wrong type or dtype (also a TypeError)."""


def flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise SparseTypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_matrix(name: str, dense, dtypes: tuple, pattern: str) -> np.ndarray:
    """``dense`` as a non-empty 2-D numpy array of one of ``dtypes``, else a one-line error."""
    if not isinstance(dense, np.ndarray):
        raise SparseTypeError(f"{name} must be a numpy array, got {type(dense).__name__}")
    if dense.ndim != 2:
        raise SparseFormatError(f"{name} must be 2-D [M][K], got shape {dense.shape}")
    if dense.dtype not in dtypes:
        names = ", ".join(str(d) for d in dtypes)
        raise SparseTypeError(f"{name} has dtype {dense.dtype}; the {pattern} format supports {names}")
    if 0 in dense.shape:
        raise SparseFormatError(f"{name} is empty (shape {dense.shape})")
    return dense


def _largest_non_nan_bits(dtype: np.dtype, unsigned: np.dtype):
    """The highest sign-less bit pattern that is not NaN: infinity's, or the largest finite value's in a type
    without infinities (float8_e4m3fn, whose only NaN is the all-ones pattern)."""
    with np.errstate(invalid="ignore", over="ignore"):
        infinity = np.array(np.inf, dtype=dtype)
    top = infinity if np.isinf(infinity) else np.array(ml_dtypes.finfo(dtype).max, dtype=dtype)
    return top.view(unsigned)


def magnitude_order(chunks: np.ndarray, pattern: str) -> np.ndarray:
    """A key per element that orders larger ``|x|`` first (smaller key = larger magnitude).

    Floats: the bits with the sign cleared, complemented. IEEE-style floats of one type order by magnitude as
    their sign-less bit patterns do (zeros, subnormals and infinities included), so this is ``-|x|`` in an
    unsigned integer of the element's width, without a float32 copy. NaN is refused, named where it first is.
    Integers: ``-|x|`` in int16 (``|-128|`` is the largest int8 magnitude)."""
    if chunks.dtype.kind in "iu":
        return -np.abs(chunks.astype(np.int16))
    unsigned = np.dtype(f"u{chunks.dtype.itemsize}")
    bits = chunks.view(unsigned) & unsigned.type((1 << (8 * unsigned.itemsize - 1)) - 1)
    if (bits > _largest_non_nan_bits(chunks.dtype, unsigned)).any():
        dense = chunks.reshape(chunks.shape[0], -1)
        row, col = (int(v) for v in np.argwhere(np.isnan(dense.astype(np.float32)))[0])
        raise SparseFormatError(f"dense holds NaN (first at row {row}, column {col}); "
                                f"{pattern} pruning by magnitude is undefined for NaN")
    return ~bits


def as_is_order(chunks: np.ndarray) -> np.ndarray:
    """A key per element for taking an already sparse matrix as it is: every nonzero first, then a ``-0.0``
    (so its sign survives the round trip), then the other zeros; a stable choice goes to the lower index."""
    nonzero = chunks != 0
    negative_zero = ~nonzero & np.signbit(chunks) if chunks.dtype.kind not in "iu" else np.zeros_like(nonzero)
    return np.where(nonzero, 0, np.where(negative_zero, 1, 2)).astype(np.uint8)


def first_two_code(priority: np.ndarray) -> np.ndarray:
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


def pruned(dense: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``dense`` with ``+0`` where ``mask`` is False."""
    return np.where(mask, dense, np.zeros((), dtype=dense.dtype)).astype(dense.dtype, copy=False)


def check_metadata_array(metadata, name: str, shape_text: str) -> None:
    if not isinstance(metadata, np.ndarray):
        raise SparseTypeError(f"{name} must be a numpy array, got {type(metadata).__name__}")
    if metadata.dtype != np.uint32:
        raise SparseTypeError(f"{name} must be uint32, got {metadata.dtype}")
    if metadata.ndim != 2:
        raise SparseFormatError(f"{name} must be 2-D {shape_text}, got shape {metadata.shape}")


def metadata_nibbles(metadata: np.ndarray) -> np.ndarray:
    """[M][W] uint32 -> [M][8W] uint8: the per-chunk nibbles in column order (nibble j of a word is bits
    4j..4j+3), for either format."""
    check_metadata_array(metadata, "metadata", "[M][words]")
    octets = np.ascontiguousarray(metadata, dtype="<u4").view(np.uint8)   # nibbles 2j, 2j + 1 in octet j
    return np.stack([octets & 0xF, octets >> 4], axis=-1).reshape(metadata.shape[0], -1)


def pack_nibbles(nibbles: np.ndarray) -> np.ndarray:
    """[M][8W] nibbles in column order -> [M][W] uint32 words (the inverse of :func:`metadata_nibbles`)."""
    m = nibbles.shape[0]
    shifts = 4 * np.arange(8, dtype=np.uint32)
    words = nibbles.astype(np.uint32, copy=False).reshape(m, -1, 8) << shifts
    return np.ascontiguousarray(np.bitwise_or.reduce(words, axis=-1).astype(np.uint32))


def check_pair_shapes(values: np.ndarray, metadata: np.ndarray, half_align: int, columns_per_word: int) -> None:
    """``values`` [M][K/2] with K/2 a multiple of ``half_align``, and ``metadata`` [M][K/columns_per_word]."""
    m, half_k = values.shape
    if half_k % half_align:
        raise SparseFormatError(f"values has {half_k} columns; K/2 must be a multiple of {half_align}")
    expected = (m, half_k * 2 // columns_per_word)
    if metadata.shape != expected:
        raise SparseFormatError(f"metadata has shape {metadata.shape}; values {values.shape} needs "
                                f"[M][K/{columns_per_word}] = {expected}")


class CompressedPair:
    """What every compressed format shares: ``values`` ``[M][K/2]`` (half of each row kept) and its ``metadata``,
    checked at construction by the format's ``check(values, metadata)``, since a malformed pair would otherwise fail
    later, deep inside a decompression."""

    values: np.ndarray
    metadata: np.ndarray

    @staticmethod
    def check(values: np.ndarray, metadata: np.ndarray) -> None:
        raise NotImplementedError

    def __post_init__(self):
        self.validate()

    @property
    def shape(self) -> tuple[int, int]:
        """The dense shape ``(M, K)``."""
        return int(self.values.shape[0]), int(self.values.shape[1]) * 2

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def validate(self) -> None:
        """Check shapes, dtypes and every metadata nibble; raise :class:`SparseFormatError`."""
        self.check(self.values, self.metadata)
