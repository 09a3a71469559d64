"""Sample 3: decode functions (block loads: coopMatLoadTensorNV with a decodeFunc).

With a block size the layout's strides and indices count blocks; the index is multiplied by the size of
the decode function's buffer_reference struct, and the function gets the block, ``blockCoord`` and
``coordInBlock`` (GL_NV_cooperative_matrix2 8.X, and the extension's resolution of the question of block coordinates). Every case's expected matrix comes from
:func:`vkcoop.tensor.load` with a numpy decode callback over the same bytes:

* Q8_0-like (fp16 scale + 32 int8) and Q4_0-like (fp16 scale + 32 nibbles, ggml's nibble order) blocks of
  32 values, decoded to fp16 (power-of-two scales keep every product exact);
* int4: eight signed nibbles per 32-bit word, decoded to an int8 matrix;
* fp8 E4M3 (fn) and E5M2 decoded to fp16, every one of the 256 codes (the reference converts with
  ml_dtypes; NaN matches NaN). The H200 has no fp8 cooperative matrix, so decoding is how fp8 runs there;
  E4M3 comes in 2x2-tile blocks, so both blockCoord components matter;
* blockCoord and coordInBlock themselves: decode functions that return them (packed) and the block's tag,
  for 2-D and 3-D layouts with blocks like (4, 8) and (2, 1, 4), sliced with negative offsets;
* Constant clamp: out-of-bounds elements get the clamp value without calling the decode function.

Known issue (reported, not failed): with a block size that does not divide a layout dimension, the H200
(driver 580.159) derives setTensorLayoutDimensionNV's packed strides with floor instead of the spec's
ceiling (CEIL_STRIDE_ISSUE); the same layouts with explicit strides pass.

Shader: ``shaders/samples/decode/decode.comp``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import tensor
from .caps import COOPMAT2_BASE, INT8, DeviceCaps, Requirements, SampleInputError
from .case import Binding, Case
from .recipes import LayoutRecipe, records, require_array, split_extent
from .runner import Sample, register

SHADER = "samples/decode/decode.comp"

Q8_0 = np.dtype([("d", "<f2"), ("qs", "i1", (32,))])      # 34 bytes, std430 {float16_t d; int8_t qs[32];}
Q4_0 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])      # 18 bytes
WORD = np.dtype("<u4")
BYTE = np.dtype("u1")

SCALES = np.array([0.25, 0.5, 1.0, 2.0], dtype=np.float16)


# --------------------------------------------------------------------------- reference decoders (numpy)


def decode_q8_0(blocks, indices, block_coord, coord_in_block):
    return blocks["d"][indices] * blocks["qs"][indices, coord_in_block[:, 1]].astype(np.float16)


def decode_q4_0(blocks, indices, block_coord, coord_in_block):
    j = coord_in_block[:, 1]
    byte = blocks["qs"][indices, j & 15]
    nibble = np.where(j < 16, byte & 15, byte >> 4).astype(np.float16)
    return (nibble - np.float16(8)) * blocks["d"][indices]


def decode_int4(blocks, indices, block_coord, coord_in_block):
    nibble = (blocks[indices] >> (4 * coord_in_block[:, 1]).astype(np.uint32)) & 0xF
    return np.where(nibble >= 8, nibble.astype(np.int64) - 16, nibble).astype(np.int8)


def decode_e4m3_tile(blocks, indices, block_coord, coord_in_block):
    shift = (8 * (2 * coord_in_block[:, 0] + coord_in_block[:, 1])).astype(np.uint32)
    codes = ((blocks[indices] >> shift) & 0xFF).astype(np.uint8)
    return codes.view(ml_dtypes.float8_e4m3fn).astype(np.float16)


def decode_e5m2(blocks, indices, block_coord, coord_in_block):
    return blocks[indices].view(ml_dtypes.float8_e5m2).astype(np.float16)


def pack_coords(coords: np.ndarray) -> np.ndarray:
    """decode.comp's pack_coords: (c0 << 16 | c1) in 2-D, (c0 << 20 | c1 << 10 | c2) in 3-D, as int32."""
    c = coords.astype(np.int64)
    if c.shape[1] == 2:
        packed = (c[:, 0] << 16) | c[:, 1]
    else:
        packed = (c[:, 0] << 20) | (c[:, 1] << 10) | c[:, 2]
    return packed.astype(np.uint32).view(np.int32)


def decode_tag(blocks, indices, block_coord, coord_in_block):
    return blocks[indices].view(np.int32)


def decode_block_coord(blocks, indices, block_coord, coord_in_block):
    return pack_coords(block_coord)


def decode_coord_in_block(blocks, indices, block_coord, coord_in_block):
    return pack_coords(coord_in_block)


#: FORMAT define -> (block struct dtype, decoded matrix dtype, reference decoders (one per load)).
FORMATS = {
    "FORMAT_Q8_0": (Q8_0, np.dtype(np.float16), (decode_q8_0,)),
    "FORMAT_Q4_0": (Q4_0, np.dtype(np.float16), (decode_q4_0,)),
    "FORMAT_INT4": (WORD, np.dtype(np.int8), (decode_int4,)),
    "FORMAT_E4M3": (WORD, np.dtype(np.float16), (decode_e4m3_tile,)),
    "FORMAT_E5M2": (BYTE, np.dtype(np.float16), (decode_e5m2,)),
    "FORMAT_COORDS2": (WORD, np.dtype(np.int32), (decode_tag, decode_block_coord, decode_coord_in_block)),
    "FORMAT_COORDS3": (WORD, np.dtype(np.int32), (decode_tag, decode_block_coord, decode_coord_in_block)),
}
#: The element code (vkcoop.samples.base.ELEMENT_TYPES) and use of each format's matrix.
MATRIX_ELEMENT = {"FORMAT_Q8_0": ("F16", "A"), "FORMAT_Q4_0": ("F16", "A"), "FORMAT_INT4": ("S8", "A"),
                  "FORMAT_E4M3": ("F16", "A"), "FORMAT_E5M2": ("F16", "A"),
                  "FORMAT_COORDS2": ("S32", "Accumulator"), "FORMAT_COORDS3": ("S32", "Accumulator")}
FIXED_BLOCK_SIZES = {"FORMAT_Q8_0": (1, 32), "FORMAT_Q4_0": (1, 32), "FORMAT_INT4": (1, 8),
                     "FORMAT_E4M3": (2, 2), "FORMAT_E5M2": (1, 1)}


# --------------------------------------------------------------------------- encoded tensors


def block_count(layout: LayoutRecipe) -> int:
    return layout.element_count()  # with a block size, strides and indices count blocks


def encode_blocks(fmt: str, count: int, seed: int = 0) -> np.ndarray:
    """``count`` blocks of ``fmt`` whose contents derive from the block index (exact decodes)."""
    i = np.arange(count, dtype=np.int64)
    if fmt == "FORMAT_Q8_0":
        blocks = np.zeros(count, Q8_0)
        blocks["d"] = SCALES[i % 4]
        blocks["qs"] = ((i[:, None] * 37 + np.arange(32)[None, :] * 5 + seed) & 0xFF).astype(np.uint8).view(np.int8)
        return blocks
    if fmt == "FORMAT_Q4_0":
        blocks = np.zeros(count, Q4_0)
        blocks["d"] = SCALES[(i + 1) % 4]
        blocks["qs"] = ((i[:, None] * 29 + np.arange(16)[None, :] * 11 + seed) & 0xFF).astype(np.uint8)
        return blocks
    if fmt in ("FORMAT_INT4", "FORMAT_E4M3"):
        # Every byte value appears: word i holds bytes 4i .. 4i+3 (mod 256), scrambled a little by the seed.
        bytes_ = ((np.arange(4 * count) * 1 + seed * 4) & 0xFF).astype(np.uint8)
        return bytes_.view(WORD).copy()
    if fmt == "FORMAT_E5M2":
        return ((i + seed) & 0xFF).astype(np.uint8)
    if fmt in ("FORMAT_COORDS2", "FORMAT_COORDS3"):
        return (i + 1000).astype(np.uint32)
    raise SampleInputError(f"format must be one of {sorted(FORMATS)}, got {fmt!r}")


def as_upload_bytes(blocks: np.ndarray) -> np.ndarray:
    """The blocks' bytes as a uint8 array padded to a multiple of 16 bytes (the shader reads them as uint[])."""
    raw = np.ascontiguousarray(blocks).view(np.uint8).reshape(-1)
    padded = np.zeros(-(-raw.size // 16) * 16, dtype=np.uint8)
    padded[:raw.size] = raw
    return padded


def decode_case(name: str, fmt: str, layout: LayoutRecipe, rows: int, cols: int,
                blocks: np.ndarray | None = None, known_issue: str | None = None) -> Case:
    """Load a rows x cols matrix through ``layout`` (which must carry the format's block size) with the
    format's decode function(s); expected from :func:`vkcoop.tensor.load` with the numpy decoders."""
    if fmt not in FORMATS:
        raise SampleInputError(f"format must be one of {sorted(FORMATS)}, got {fmt!r}")
    block_dtype, matrix_dtype, decoders = FORMATS[fmt]
    if layout.block_size is None:
        raise SampleInputError("a decode layout needs a block size (LayoutRecipe.block_size)")
    if fmt in FIXED_BLOCK_SIZES and layout.block_size != FIXED_BLOCK_SIZES[fmt]:
        raise SampleInputError(f"{fmt} decodes blocks of {FIXED_BLOCK_SIZES[fmt]}, the layout has "
                               f"{layout.block_size}")
    want_dim = 3 if fmt == "FORMAT_COORDS3" else 2
    if layout.dim != want_dim:
        raise SampleInputError(f"{fmt} uses a {want_dim}-D layout, got {layout.dim}-D")
    if blocks is None:
        blocks = encode_blocks(fmt, block_count(layout))
    require_array(blocks, "blocks", dtype=block_dtype, ndim=1)
    expected = np.concatenate([
        tensor.load(blocks, layout.layout(), rows, cols, dtype=matrix_dtype, decode=decoder).reshape(-1)
        for decoder in decoders])
    return Case(name, SHADER, {"FORMAT": fmt},
                [Binding("records", records(layout)), Binding("blocks", as_upload_bytes(blocks)),
                 Binding("decoded", np.zeros_like(expected), expected=expected,
                         nan_equal=matrix_dtype.kind == "f")],
                specialization={"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride},
                known_issue=known_issue)


def packed_block_strides(layout: LayoutRecipe) -> tuple[int, ...]:
    """The strides setTensorLayoutDimensionNV computes: stride[i] = prod ceil(dim[j] / blockSize[j]), j > i."""
    return layout.layout().stride


def decode_layouts(caps: DeviceCaps) -> list[tuple[str, str, LayoutRecipe, tuple[int, int]]]:
    """(label, format, layout, matrix shape) for every decode case."""
    found = []
    f16 = caps.pick_shape("F16", "A")
    s8 = caps.pick_shape("S8", "A")
    s32 = caps.pick_shape("S32", "Accumulator")
    clamp16 = tensor.clamp_value_bits(-0.5, np.float16)
    r, c = f16
    for fmt in ("FORMAT_Q8_0", "FORMAT_Q4_0"):
        k = 64  # two 32-value blocks per row
        found.append(("aligned", fmt, LayoutRecipe((r + 2, k), block_size=(1, 32), offsets=(1, 0), spans=(r, c),
                                                   clamp_value=clamp16), f16))
        # Columns 40.. cross into the second block; row -1 and columns past k are out of bounds.
        found.append(("offset-clamped", fmt, LayoutRecipe((r, k), block_size=(1, 32), offsets=(-1, k - c // 2),
                                                          spans=(r, c), clamp_value=clamp16), f16))
        # Rows padded to three blocks (strides count blocks).
        found.append(("strided", fmt, LayoutRecipe((r, k), block_size=(1, 32), stride=(3, 1), offsets=(0, 8),
                                                   spans=(r, c), clamp_value=clamp16), f16))
    r8, c8 = s8
    found.append(("in-bounds", "FORMAT_INT4", LayoutRecipe((r8 + 1, c8 + 16), block_size=(1, 8), offsets=(1, 4),
                                                      spans=(r8, c8), clamp_value=0x7F), s8))
    found.append(("clamped", "FORMAT_INT4", LayoutRecipe((r8 - 3, c8), block_size=(1, 8), offsets=(-2, 3),
                                                              spans=(r8, c8), clamp_value=0x80), s8))
    # fp8: the 256 codes of a (rows, cols) = 16 x 16 region each appear once when rows * cols == 256.
    found.append(("all-codes", "FORMAT_E5M2", LayoutRecipe((r, c), block_size=(1, 1), clamp_value=clamp16),
                  f16))
    found.append(("clamped", "FORMAT_E5M2", LayoutRecipe((r, c), block_size=(1, 1), offsets=(-3, 2),
                                                              spans=(r, c), clamp_value=clamp16), f16))
    found.append(("all-codes", "FORMAT_E4M3", LayoutRecipe((r, c), block_size=(2, 2), clamp_value=clamp16),
                  f16))
    found.append(("odd-offset", "FORMAT_E4M3", LayoutRecipe((r + 2, c + 2), block_size=(2, 2), offsets=(1, -1),
                                                                 spans=(r, c), clamp_value=clamp16), f16))
    r32, c32 = s32
    clamp32 = 0xDEADBEEF
    found.append(("blocks-4x8", "FORMAT_COORDS2",
                  LayoutRecipe((2 * r32 + 3, 2 * c32 + 5), block_size=(4, 8), offsets=(-3, 5), spans=(r32, c32),
                               clamp_value=clamp32), s32))
    found.append(("blocks-3x5-strided", "FORMAT_COORDS2",
                  LayoutRecipe((r32 + 4, c32 + 7), block_size=(3, 5), stride=(9, 1), offsets=(2, -4),
                               spans=(r32, c32), clamp_value=clamp32), s32))
    spans3 = split_extent(r32 * c32, 3)
    found.append(("blocks-2x1x4", "FORMAT_COORDS3",
                  LayoutRecipe((spans3[0] + 1, spans3[1] + 2, spans3[2] + 6), block_size=(2, 1, 4),
                               offsets=(-1, 1, 3), spans=spans3, clamp_value=clamp32), s32))
    # The same two layouts with the packed strides set explicitly (setTensorLayoutStrideNV).
    for label, fmt, layout, shape in list(found[-3:]):
        if layout.stride is None:
            explicit = LayoutRecipe(layout.dimension, layout.clamp_mode, stride=packed_block_strides(layout),
                                    offsets=layout.offsets, spans=layout.spans, clamp_value=layout.clamp_value,
                                    block_size=layout.block_size)
            found.append((label + "-explicit-stride", fmt, explicit, shape))
    return found


#: Block sizes that do not divide the layout dimension, strides left to setTensorLayoutDimensionNV.
CEIL_STRIDE_ISSUE = (
    "setTensorLayoutDimensionNV with a block size that does not divide a dimension: the spec's packed "
    "stride is stride[i] = stride[i+1] * ceil(dim[i+1] / blockSize[i+1]); the H200 (driver 580.159) "
    "addressed every element as if it used floor(dim / blockSize) (checked for all elements of both cases). "
    "The -explicit-stride cases set the ceil strides with setTensorLayoutStrideNV and pass.")


def ceil_stride_issue(layout: LayoutRecipe) -> str | None:
    if layout.stride is None and layout.block_size is not None and any(
            d % b for d, b in zip(layout.dimension[1:], layout.block_size[1:])):
        return CEIL_STRIDE_ISSUE
    return None


@register
class DecodeFunctions(Sample):
    name = "decode"
    description = ("decode functions: Q8_0- and Q4_0-like blocks, int4 nibbles, fp8 E4M3/E5M2 to fp16, "
                   "blockCoord/coordInBlock for 2-D and 3-D blocks, Constant clamp around block loads")
    requires = COOPMAT2_BASE + INT8 + Requirements(features=("cooperativeMatrixBlockLoads", "bufferDeviceAddress",
                                                             "shaderInt16"))
    order = 30

    def cases(self, caps: DeviceCaps) -> list[Case]:
        return [decode_case(f"{fmt.removeprefix('FORMAT_').lower()}/{label}", fmt, layout, *shape,
                            known_issue=ceil_stride_issue(layout))
                for label, fmt, layout, shape in decode_layouts(caps)]
