#version 450
// @variants FORMAT=FORMAT_Q8_0|FORMAT_Q4_0|FORMAT_INT4|FORMAT_E4M3|FORMAT_E5M2|FORMAT_COORDS2|FORMAT_COORDS3
// Block loads: coopMatLoadTensorNV with a decode function (GL_NV_cooperative_matrix2, "decodeFunc").
// The layout's block size makes its indices count blocks; the decode function receives a
// buffer_reference to the block and the element's blockCoord and coordInBlock.
//
//   FORMAT          block struct (bytes)                     layout block   matrix
//   FORMAT_Q8_0     fp16 scale, 32 x int8        (34)        (1, 32)        fp16 A:  d * q
//   FORMAT_Q4_0     fp16 scale, 16 bytes nibbles (18)        (1, 32)        fp16 A:  d * (nibble - 8), element j < 16 in
//                                                                           the low nibble of byte j, j >= 16 in the high
//                                                                           nibble of byte j - 16
//   FORMAT_INT4     uint32, 8 signed nibbles     (4)         (1, 8)         int8 A: nibble k = bits 4k..4k+3
//   FORMAT_E4M3     uint32, a 2x2 tile of fp8    (4)         (2, 2)         fp16 A: E4M3 (fn) byte 2*row+col of the tile
//   FORMAT_E5M2     one fp8 byte                 (1)         (1, 1)         fp16 A: E5M2
//   FORMAT_COORDS2  uint32 tag                   (4)         from record    int32 accumulator, three loads: the tag,
//   FORMAT_COORDS3  (3-D layout)                                            blockCoord and coordInBlock packed
//
//   spec constants  0 ROWS, 1 COLS; 2 EXPLICIT_STRIDE (strides in blocks)
//   binding 0       uint records[]: one layout record (block size included); Constant clamp
//   binding 1       the encoded tensor; binding 2 the decoded matrix (three for COORDS*), row-major
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"
#extension GL_EXT_buffer_reference : enable

#define FORMAT_Q8_0 1
#define FORMAT_Q4_0 2
#define FORMAT_INT4 3
#define FORMAT_E4M3 4
#define FORMAT_E5M2 5
#define FORMAT_COORDS2 6
#define FORMAT_COORDS3 7

#if FORMAT == FORMAT_COORDS3
#  define LDIM 3
#else
#  define LDIM 2
#endif

#if FORMAT == FORMAT_Q8_0
#  define MATRIX_TYPE float16_t
#  define MATRIX_USE gl_MatrixUseA
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { float16_t d; int8_t qs[32]; };
MATRIX_TYPE decode(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    return block.d * float16_t(block.qs[coordInBlock[1]]);
}
#elif FORMAT == FORMAT_Q4_0
#  define MATRIX_TYPE float16_t
#  define MATRIX_USE gl_MatrixUseA
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { float16_t d; uint8_t qs[16]; };
MATRIX_TYPE decode(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    uint j = coordInBlock[1];
    uint byte_ = uint(block.qs[j & 15u]);
    uint nibble = (j < 16u) ? (byte_ & 15u) : (byte_ >> 4);
    return (float16_t(nibble) - float16_t(8.0)) * block.d;
}
#elif FORMAT == FORMAT_INT4
#  define MATRIX_TYPE int8_t
#  define MATRIX_USE gl_MatrixUseA
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Block { uint32_t bits; };
MATRIX_TYPE decode(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    // Move nibble k to the top, then an arithmetic shift sign-extends it.
    return int8_t(int32_t(block.bits << (28u - 4u * coordInBlock[1])) >> 28);
}
#elif FORMAT == FORMAT_E4M3
#  define MATRIX_TYPE float16_t
#  define MATRIX_USE gl_MatrixUseA
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Block { uint32_t tile; };
MATRIX_TYPE decode(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    uint code = (block.tile >> (8u * (2u * coordInBlock[0] + coordInBlock[1]))) & 0xFFu;
    uint exponent = (code >> 3) & 15u, mantissa = code & 7u;
    uint16_t magnitude;
    if (exponent == 15u && mantissa == 7u) {
        magnitude = uint16_t(0x7E00u);                                  // E4M3fn has one NaN per sign, no infinity
    } else if (exponent == 0u) {
        magnitude = float16BitsToUint16(float16_t(mantissa) * float16_t(0.001953125));  // subnormal: m * 2^-9
    } else {
        magnitude = uint16_t(((exponent + 8u) << 10) | (mantissa << 7));  // rebias 7 -> 15
    }
    return uint16BitsToFloat16(magnitude | uint16_t((code & 0x80u) << 8));
}
#elif FORMAT == FORMAT_E5M2
#  define MATRIX_TYPE float16_t
#  define MATRIX_USE gl_MatrixUseA
layout(buffer_reference, std430, buffer_reference_align = 1) buffer Block { uint8_t code; };
MATRIX_TYPE decode(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    return uint16BitsToFloat16(uint16_t(uint(block.code) << 8));     // E5M2 is the top byte of an fp16
}
#else  // COORDS2, COORDS3
#  define MATRIX_TYPE int32_t
#  define MATRIX_USE gl_MatrixUseAccumulator
#  define COORDS
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Block { uint32_t tag; };
int32_t pack_coords(const in uint32_t c[LDIM]) {
#  if LDIM == 2
    return int32_t((c[0] << 16) | c[1]);
#  else
    return int32_t((c[0] << 20) | (c[1] << 10) | c[2]);
#  endif
}
int32_t decode_tag(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    return int32_t(block.tag);
}
int32_t decode_block_coord(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    return pack_coords(blockCoord);
}
int32_t decode_coord_in_block(const in Block block, const in uint32_t blockCoord[LDIM], const in uint32_t coordInBlock[LDIM]) {
    return pack_coords(coordInBlock);
}
#endif

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const bool EXPLICIT_STRIDE = false;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { uint source[]; };
layout(set = 0, binding = 2) writeonly buffer Destination { MATRIX_TYPE destination[]; };

void main() {
    TENSOR_LAYOUT_FROM_RECORD(layout_, LDIM, gl_CooperativeMatrixClampModeConstantNV, records, 0, EXPLICIT_STRIDE);
    coopmat<MATRIX_TYPE, gl_ScopeSubgroup, ROWS, COLS, MATRIX_USE> matrix;
#ifdef COORDS
    coopMatLoadTensorNV(matrix, source, 0, layout_, decode_tag);
    coopMatStore(matrix, destination, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoadTensorNV(matrix, source, 0, layout_, decode_block_coord);
    coopMatStore(matrix, destination, ROWS * COLS, COLS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoadTensorNV(matrix, source, 0, layout_, decode_coord_in_block);
    coopMatStore(matrix, destination, 2 * ROWS * COLS, COLS, gl_CooperativeMatrixLayoutRowMajor);
#else
    coopMatLoadTensorNV(matrix, source, 0, layout_, decode);
    coopMatStore(matrix, destination, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
#endif
}
