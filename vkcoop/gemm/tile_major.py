"""The tile-major 2:4 layout of the narrow staged 2:4 kernel (coopmat2_staged_sparse24.comp with A_FORMAT
TILES_PATTERNS or TILES_NIBBLES; ``tp`` / ``tn`` after ``t`` in a configuration label), made once on the host from
vkcoop's 2:4 format (numpy only).

Why: at N <= 64 the staged 2:4 kernel's loop is issue-bound on the expansion and the index arithmetic around it
(docs/gemm.md, "Where the time goes"). Here each K step of a tile is one contiguous block, read by the workgroup's
invocations in their order: invocation t loads the block's value vectors t, t + W, t + 2W, ... (W invocations; each
load 16 bytes, a warp's 32 loads one 512-byte span) and one metadata word per two of them, also in invocation order.
Where each word sits is fixed by the tile, so the shader's addresses are a block base plus constants.

Block (r, s) holds rows r * TILE_M .. and columns s * TILE_K .. of A; blocks are in row-major order. A block is
* V = TILE_M * TILE_K / 16 value vectors (4 words each), each 16 columns of a tile row, word c of it chunk c's two
  kept values (its *pair*). The G = TILE_K / 16 groups of a row come in runs of R (4 where G is a multiple of 4,
  else G): vector p covers row (p % (TILE_M * R)) // R and group (p // (TILE_M * R)) * R + p % R, so the eight
  invocations of a 16-byte-store phase write two rows of four groups, on eight different bank quads of the skewed
  shared tile (eight groups of one row would meet on four);
* then V / 2 metadata words: word j * W + t describes invocation t's vectors 2j * W + t (chunks 0-3) and
  (2j + 1) * W + t (chunks 4-7).
That is 4.5 V words: A moves 0.5625x its dense bytes, as in the row layout.

The chunk's code in its metadata word (chunk c = 0..7):
* ``nibbles``: bits 4c..4c+3 hold the PTX nibble idx0 | idx1 << 2 of vkcoop.sparse and the pair is as stored there
  (the lower K in the low half); the shader places each value with a 64-bit shift (sparse24_expand.glsl).
* ``patterns``: bit c: the chunk's low word (elements 0-1) keeps the pair's high half; bit 16 + c: it keeps the
  pair's low half; bit 8 + c: the pattern is diagonal ((0,2) or (1,3)). The pairs of (1,2) and (1,3) are stored
  swapped (the first kept value in the high half). With keep the halves those two bits select and rotated the pair
  with its halves swapped, the chunk's low word is pair & keep and its high word is rotated & keep (diagonal) or
  pair & ~keep: a mask, a rotation and a select, no variable shift (:data:`PATTERN_CODES`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sparse import metadata_nibbles, validate_compressed
from ..sparse.common import pack_nibbles
from .interleave import words_as_values
from .types import GemmInputError

CODES = ("patterns", "nibbles")
#: Chunk code of each valid PTX nibble (idx0 | idx1 << 2) under ``patterns``: bit 0 keeps the pair's high half in
#: the low word, bit 1 marks a diagonal pattern, bit 2 keeps the pair's low half; and whether the pair is swapped.
PATTERN_CODES = {0b0100: (0b101, False),   # (0,1): low word = pair
                 0b1000: (0b110, False),   # (0,2): low word = v0, high word = v1 (rotated)
                 0b1100: (0b100, False),   # (0,3): low word = v0, high word = v1 << 16
                 0b1001: (0b001, True),    # (1,2): low word = v0 << 16, high word = v1
                 0b1101: (0b011, True),    # (1,3): low word = v0 << 16, high word = v1 << 16 (rotated)
                 0b1110: (0b000, False)}   # (2,3): high word = pair
_CODE_OF = np.zeros(16, np.uint8)
_SWAPPED = np.zeros(16, bool)
_NIBBLE_OF = np.zeros(8, np.uint8)             # 0: the two codes no nibble has
for _nibble, (_code, _swap) in PATTERN_CODES.items():
    _CODE_OF[_nibble], _SWAPPED[_nibble], _NIBBLE_OF[_code] = _code, _swap, _nibble
CHUNKS_PER_WORD = 8
#: What chunk c's code adds to its metadata word, [c][code] (patterns) and [c][nibble] (nibbles).
_PATTERN_BITS = np.array([[(code & 1) << c | ((code >> 1) & 1) << (8 + c) | (code >> 2) << (16 + c)
                           for code in range(8)] for c in range(CHUNKS_PER_WORD)], np.uint32)
_NIBBLE_BITS = np.array([[nibble << (4 * c) for nibble in range(16)] for c in range(CHUNKS_PER_WORD)], np.uint32)


@dataclass(frozen=True)
class TileMajorLayout:
    """Where a tile's K step sits in the tile-major layout: the tile (TILE_M x TILE_K) and the invocations that read
    it. Raises GemmInputError, in one line, for a tile the layout cannot take."""
    tile_m: int
    tile_k: int
    workgroup_size: int

    def __post_init__(self):
        if self.tile_m < 1 or self.tile_k < 1 or self.tile_k % 32 or self.workgroup_size < 1:
            raise GemmInputError(f"tile-major 2:4 layout: tile {self.tile_m}x{self.tile_k} on {self.workgroup_size} "
                                 "invocations: TILE_K must be a multiple of 32 (one metadata word)")
        if self.vectors % self.workgroup_size or self.per_invocation % 2:
            raise GemmInputError(f"tile-major 2:4 layout: the {self.vectors} 16-column groups of a {self.tile_m}x"
                                 f"{self.tile_k} tile must give each of {self.workgroup_size} invocations an even "
                                 "number (one metadata word per two)")

    @property
    def groups_per_row(self) -> int:
        return self.tile_k // 16

    @property
    def run(self) -> int:
        """Groups of a tile row in consecutive vectors."""
        return 4 if self.groups_per_row % 4 == 0 else self.groups_per_row

    @property
    def vectors(self) -> int:
        """Value vectors (16 columns, 4 words) per block."""
        return self.tile_m * self.groups_per_row

    @property
    def per_invocation(self) -> int:
        return self.vectors // self.workgroup_size

    @property
    def block_words(self) -> int:
        return 4 * self.vectors + self.vectors // 2

    def blocks(self, m: int, k: int) -> tuple[int, int]:
        """(tile rows, K steps) of an M x K operand, which must be whole tiles."""
        if m % self.tile_m or k % self.tile_k:
            raise GemmInputError(f"tile-major 2:4 layout: A is {m}x{k}; M and K must be whole {self.tile_m}x"
                                 f"{self.tile_k} tiles (the kernel pads a ragged problem first)")
        return m // self.tile_m, k // self.tile_k

    def to_blocks(self, chunks: np.ndarray) -> np.ndarray:
        """[M][K/4] per-chunk array -> [blocks][V][4] in the blocks' vector order."""
        rows, steps = self.blocks(chunks.shape[0], 4 * chunks.shape[1])
        runs = self.groups_per_row // self.run
        return chunks.reshape(rows, self.tile_m, steps, runs, self.run, 4).transpose(0, 2, 3, 1, 4, 5) \
            .reshape(rows * steps, self.vectors, 4)

    def from_blocks(self, blocks: np.ndarray, m: int, k: int) -> np.ndarray:
        """The inverse of :meth:`to_blocks`: [blocks][V][4] -> [M][K/4]."""
        rows, steps = self.blocks(m, k)
        runs = self.groups_per_row // self.run
        return blocks.reshape(rows, steps, runs, self.tile_m, self.run, 4).transpose(0, 3, 1, 2, 4, 5) \
            .reshape(m, k // 4)

    def by_word(self, fields: np.ndarray) -> np.ndarray:
        """[blocks][V][4] -> [blocks][V/2][8]: the chunks of metadata word j * W + t (vectors 2j * W + t, then
        (2j + 1) * W + t)."""
        count, w = fields.shape[0], self.workgroup_size
        return fields.reshape(count, self.per_invocation // 2, 2, w, 4).transpose(0, 1, 3, 2, 4) \
            .reshape(count, self.vectors // 2, CHUNKS_PER_WORD)

    def from_words(self, fields: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`by_word`."""
        count, w = fields.shape[0], self.workgroup_size
        return fields.reshape(count, self.per_invocation // 2, w, 2, 4).transpose(0, 1, 3, 2, 4) \
            .reshape(count, self.vectors, 4)


def _check_code(code: str) -> None:
    if code not in CODES:
        raise GemmInputError(f"tile-major 2:4 code {code!r}: choose from {', '.join(CODES)}")


def _rotated(pairs: np.ndarray) -> np.ndarray:
    return (pairs << 16) | (pairs >> 16)


def _pack_fields(fields: np.ndarray, code: str) -> np.ndarray:
    """[..][8] chunk fields (uint8) -> [..] metadata words."""
    bits = _NIBBLE_BITS if code == "nibbles" else _PATTERN_BITS
    words = bits[0][fields[..., 0]]
    for c in range(1, CHUNKS_PER_WORD):
        words |= bits[c][fields[..., c]]
    return words


def tile_major_2to4(values: np.ndarray, metadata: np.ndarray, layout: TileMajorLayout,
                    code: str = "patterns") -> np.ndarray:
    """vkcoop's 2:4 format (values [M][K/2] of a 16-bit type, metadata [M][K/32]) in the tile-major layout:
    uint32 [blocks][block_words]. M and K must be whole tiles. Inverse: :func:`untile_2to4`."""
    _check_code(code)
    validate_compressed(values, metadata)   # refuses invalid or unordered nibbles, in one line
    if values.dtype.itemsize != 2:
        raise GemmInputError(f"the tile-major 2:4 layout holds 16-bit values, not {values.dtype}")
    fields = metadata_nibbles(metadata)                               # [M][K/4] uint8, chunk order
    pairs = layout.to_blocks(np.ascontiguousarray(values).view(np.uint32)).copy()   # chunk pairs, lower K low
    if code == "patterns":
        np.copyto(pairs, _rotated(pairs), where=layout.to_blocks(_SWAPPED[fields]))
        fields = _CODE_OF[fields]
    words = _pack_fields(layout.by_word(layout.to_blocks(fields)), code)
    return np.ascontiguousarray(np.concatenate([pairs.reshape(-1, 4 * layout.vectors), words], axis=1),
                                dtype=np.uint32)


def chunk_fields(blocks: np.ndarray, layout: TileMajorLayout, code: str) -> np.ndarray:
    """The per-chunk codes of a tile-major operand, [blocks][V][4] (nibbles, or the 3-bit pattern codes)."""
    _check_code(code)
    words = blocks[:, 4 * layout.vectors:, None]
    c = np.arange(CHUNKS_PER_WORD, dtype=np.uint32)
    if code == "nibbles":
        fields = (words >> (4 * c)) & 0xF
    else:
        fields = ((words >> c) & 1) | (((words >> (8 + c)) & 1) << 1) | (((words >> (16 + c)) & 1) << 2)
        _check_pattern_words(words[..., 0], fields, layout)
    return layout.from_words(fields)


def _check_pattern_words(words: np.ndarray, fields: np.ndarray, layout: TileMajorLayout) -> None:
    """One line for the first word that is no valid pattern code: a diagonal flag with both or neither half kept,
    or a bit outside the three fields."""
    bad = (_NIBBLE_OF[fields] == 0) | ((words & 0xFF000000) != 0)[..., None]
    if bad.any():
        block, word, chunk = (int(v) for v in np.argwhere(bad)[0])
        raise GemmInputError(f"tile-major 2:4 operand: block {block}, metadata word {word} "
                             f"(invocation {word % layout.workgroup_size}) = 0x{int(words[block, word]):08x}: chunk "
                             f"{chunk} is no pattern (a diagonal flag needs exactly one kept half; bits 24-31 are 0)")


def untile_2to4(blocks: np.ndarray, m: int, k: int, layout: TileMajorLayout, dtype,
                code: str = "patterns") -> tuple[np.ndarray, np.ndarray]:
    """(values [M][K/2], metadata [M][K/32]) back from :func:`tile_major_2to4`'s blocks; refuses, in one line, a
    word that holds no valid code."""
    rows, steps = layout.blocks(m, k)
    if blocks.shape != (rows * steps, layout.block_words) or blocks.dtype != np.uint32:
        raise GemmInputError(f"tile-major 2:4 operand has {blocks.dtype} {blocks.shape}; a {m}x{k} A in "
                             f"{layout.tile_m}x{layout.tile_k} tiles is uint32 {(rows * steps, layout.block_words)}")
    fields = layout.from_blocks(chunk_fields(blocks, layout, code), m, k)
    pairs = layout.from_blocks(blocks[:, :4 * layout.vectors].reshape(-1, layout.vectors, 4), m, k)
    nibbles = fields if code == "nibbles" else _NIBBLE_OF[fields]
    if code == "patterns":
        pairs = np.where(_SWAPPED[nibbles], _rotated(pairs), pairs)
    values, metadata = words_as_values(pairs, m, k, dtype), pack_nibbles(nibbles)
    validate_compressed(values, metadata)
    return values, metadata


def expand_tile_major(blocks: np.ndarray, m: int, k: int, layout: TileMajorLayout, code: str = "patterns") -> np.ndarray:
    """A dense (uint16 [M][K], the elements' bits) as the shader expands it, in numpy: for ``patterns`` the chunk's
    low word pair & keep and high word rotated & keep or pair & ~keep; for ``nibbles`` each value shifted to
    16 * its index in a 64-bit word. The reference the shader's expansion is tested against besides decompress."""
    fields = chunk_fields(blocks, layout, code)
    pairs = blocks[:, :4 * layout.vectors].reshape(-1, layout.vectors, 4)
    if code == "patterns":
        keep = np.where(fields & 4, np.uint32(0xFFFF), np.uint32(0)) | np.where(fields & 1, np.uint32(0xFFFF0000),
                                                                                 np.uint32(0))
        low = pairs & keep
        high = np.where(fields & 2, _rotated(pairs) & keep, pairs & ~keep)
        placed = low.astype(np.uint64) | (high.astype(np.uint64) << np.uint64(32))
    else:
        shift0, shift1 = (16 * (fields & 3)).astype(np.uint64), (16 * (fields >> 2)).astype(np.uint64)
        placed = ((pairs & 0xFFFF).astype(np.uint64) << shift0) | ((pairs >> 16).astype(np.uint64) << shift1)
    return layout.from_blocks(placed, m, k).view(np.uint16).reshape(m, k)
