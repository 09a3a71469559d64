#version 450
// @variants KIND=KIND_LOAD|KIND_STORE|KIND_DECODE
// @variants ELEMENT=F16|S8|S32
// Differential fuzzing of cooperative_matrix2 tensor addressing on the hardware (vkcoop.fuzz, target "hw").
//
// One workgroup (one subgroup of 32) per case; the case's layout and view state come from the same
// 64-word records as shaders/portable/tensor_addressing.comp (vkcoop.portable.encode_records). What is
// compile-time in GLSL is a define here: one pipeline per (KIND, ELEMENT, LDIM, CLAMP_MODE, view type).
//
//   KIND_LOAD    DIGITS + 1 coopMatLoadTensorNV per case from one source whose region k (SRC_LEN elements
//                each) holds digit k of every element's own index (the last region holds MARK everywhere);
//                the matrix starts as PREV each time, so clipped elements show PREV, Constant-clamped ones
//                the clamp value and the marker load tells which elements were in bounds.
//   KIND_STORE   DIGITS + 1 coopMatStoreTensorNV per case of matrices whose element (r, c) holds digit k of
//                its id r * COLS + c (the last one holds MARK), each into its own zeroed REGION-element region.
//   KIND_DECODE  block loads (block type ELEMENT, int32 matrix) through decode functions that return the
//                block's index (pointer arithmetic on the buffer_reference), MARK, and blockCoord[d] /
//                coordInBlock[d] for each d < LDIM: 2 + 2 * LDIM loads per case.
//
//   defines   KIND, ELEMENT (F16 F32 S8 U8 S32), LDIM, CLAMP_MODE, HAS_VIEW (0/1), VDIM, VIEW_HAS_DIMENSIONS
//             (0/1), VIEW_PERM (comma-separated permutation), DIGITS, ROWS, COLS, SRC_LEN, REGION
//   binding 0 records, binding 1 source, binding 2 destination; push constant: the source's device address
//             (decode only) and the case count.
#include "vkcoop/common.glsl"
#extension GL_EXT_buffer_reference : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : enable

#define KIND_LOAD 1
#define KIND_STORE 2
#define KIND_DECODE 3

// Defaults: a representative variant, so the catalog's `vkcoop shaders check` compiles every KIND/ELEMENT.
#ifndef KIND
#  define KIND KIND_LOAD
#endif
#ifndef ELEMENT
#  define ELEMENT F16
#endif
#ifndef LDIM
#  define LDIM 3
#endif
#ifndef CLAMP_MODE
#  define CLAMP_MODE gl_CooperativeMatrixClampModeRepeatNV
#endif
#ifndef HAS_VIEW
#  define HAS_VIEW 1
#  define VDIM 3
#  define VIEW_HAS_DIMENSIONS 1
#  define VIEW_PERM 2, 0, 1
#endif
#ifndef DIGITS
#  define DIGITS 2
#endif
#ifndef ROWS
#  define ROWS 16
#endif
#ifndef COLS
#  if (ELEMENT == S8 || ELEMENT == U8) && KIND != KIND_DECODE
#    define COLS 32
#  else
#    define COLS 16
#  endif
#endif
#ifndef SRC_LEN
#  define SRC_LEN 65536
#endif
#ifndef REGION
#  define REGION 2048
#endif

#define RECORD_WORDS 64
#define R_CLAMP_VALUE 5
#define R_FLAGS 6
#define R_BLOCK 8
#define R_DIM 13
#define R_STRIDE 18
#define R_OFFSET 23
#define R_SPAN 28
#define R_VIEW_DIM 38
#define R_VIEW_STRIDE 43
#define R_CLIP 48
#define FLAG_EXPLICIT_STRIDE 4u
#define FLAG_EXPLICIT_VIEW_STRIDE 8u

#if VIEW_HAS_DIMENSIONS
#  define VIEW_HAS_DIMENSIONS_BOOL true
#else
#  define VIEW_HAS_DIMENSIONS_BOOL false
#endif

layout(local_size_x = 32) in;
layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { ELEMENT_TYPE source[]; };
#if KIND == KIND_DECODE
layout(set = 0, binding = 2) writeonly buffer Destination { int32_t destination[]; };
#else
layout(set = 0, binding = 2) buffer Destination { ELEMENT_TYPE destination[]; };
#endif
layout(push_constant) uniform Push {
    uint64_t source_address;   // decode: the block index is (block address - source address) / block size
    uint case_count;
} push;

#define MARK 1
#define PREV 2

#if KIND == KIND_DECODE
#  if ELEMENT == F16
#    define BLOCK_BYTES 2
#  elif ELEMENT == S8 || ELEMENT == U8
#    define BLOCK_BYTES 1
#  else
#    define BLOCK_BYTES 4
#  endif
layout(buffer_reference, std430, buffer_reference_align = BLOCK_BYTES) buffer Block { ELEMENT_TYPE value; };
int32_t decode_index(const in Block b, const in uint32_t bc[LDIM], const in uint32_t cib[LDIM]) {
    return int32_t(uint32_t((uint64_t(b) - push.source_address) / uint64_t(BLOCK_BYTES)));
}
int32_t decode_mark(const in Block b, const in uint32_t bc[LDIM], const in uint32_t cib[LDIM]) { return MARK; }
#  define DECODE_COORD(d)                                                                                      \
    int32_t decode_block_coord##d(const in Block b, const in uint32_t bc[LDIM], const in uint32_t cib[LDIM]) { \
        return int32_t(bc[d]);                                                                                 \
    }                                                                                                          \
    int32_t decode_coord_in_block##d(const in Block b, const in uint32_t bc[LDIM], const in uint32_t cib[LDIM]) { \
        return int32_t(cib[d]);                                                                                \
    }
DECODE_COORD(0)
#  if LDIM > 1
DECODE_COORD(1)
#  endif
#  if LDIM > 2
DECODE_COORD(2)
#  endif
#  if LDIM > 3
DECODE_COORD(3)
#  endif
#  if LDIM > 4
DECODE_COORD(4)
#  endif
#  define MATRIX coopmat<int32_t, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator>
#  define LOADS (2 + 2 * LDIM)
#else
#  define MATRIX coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, ELEMENT_USE>
#endif

void main() {
    uint case_index = gl_WorkGroupID.x;
    uint rb = case_index * RECORD_WORDS;
    uint flags = records[rb + R_FLAGS];

    // The layout, built in the spec's order: block size, dimensions (packed strides), strides, slice.
    tensorLayoutNV<LDIM, CLAMP_MODE> t = createTensorLayoutNV(LDIM, CLAMP_MODE);
#if KIND == KIND_DECODE
    t = setTensorLayoutBlockSizeNV(t, VK_ARGS(LDIM, records, rb + R_BLOCK));
#endif
    t = setTensorLayoutDimensionNV(t, VK_ARGS(LDIM, records, rb + R_DIM));
    if ((flags & FLAG_EXPLICIT_STRIDE) != 0u) {
        t = setTensorLayoutStrideNV(t, VK_ARGS(LDIM, records, rb + R_STRIDE));
    }
    t = sliceTensorLayoutNV(t, VK_SLICE(LDIM, records, rb + R_OFFSET, rb + R_SPAN));
    t = setTensorLayoutClampValueNV(t, records[rb + R_CLAMP_VALUE]);

#if HAS_VIEW
    tensorViewNV<VDIM, VIEW_HAS_DIMENSIONS_BOOL, VIEW_PERM> v = createTensorViewNV(VDIM, VIEW_HAS_DIMENSIONS_BOOL,
                                                                                   VIEW_PERM);
#  if VIEW_HAS_DIMENSIONS
    v = setTensorViewDimensionsNV(v, VK_ARGS(VDIM, records, rb + R_VIEW_DIM));
    if ((flags & FLAG_EXPLICIT_VIEW_STRIDE) != 0u) {
        v = setTensorViewStrideNV(v, VK_ARGS(VDIM, records, rb + R_VIEW_STRIDE));
    }
#  endif
    v = setTensorViewClipNV(v, records[rb + R_CLIP], records[rb + R_CLIP + 1], records[rb + R_CLIP + 2],
                            records[rb + R_CLIP + 3]);
#  define TENSOR t, v
#else
#  define TENSOR t
#endif

#if KIND == KIND_LOAD
    for (uint k = 0u; k <= DIGITS; ++k) {
        MATRIX m = MATRIX(ELEMENT_TYPE(PREV));
        coopMatLoadTensorNV(m, source, k * SRC_LEN, TENSOR);
        coopMatStore(m, destination, (case_index * (DIGITS + 1) + k) * (ROWS * COLS), COLS,
                     gl_CooperativeMatrixLayoutRowMajor);
    }
#elif KIND == KIND_STORE
    for (uint k = 0u; k <= DIGITS; ++k) {
        MATRIX m;
        coopMatLoad(m, source, k * (ROWS * COLS), COLS, gl_CooperativeMatrixLayoutRowMajor);
        coopMatStoreTensorNV(m, destination, (case_index * (DIGITS + 1) + k) * REGION, TENSOR);
    }
#else
#  define DECODE_LOAD(slot, function)                                                                       \
    {                                                                                                     \
        MATRIX m = MATRIX(PREV);                                                                          \
        coopMatLoadTensorNV(m, source, 0, TENSOR, function);                                              \
        coopMatStore(m, destination, (case_index * LOADS + (slot)) * (ROWS * COLS), COLS,                 \
                     gl_CooperativeMatrixLayoutRowMajor);                                                 \
    }
    DECODE_LOAD(0, decode_index)
    DECODE_LOAD(1, decode_mark)
    DECODE_LOAD(2, decode_block_coord0)
    DECODE_LOAD(3, decode_coord_in_block0)
#  if LDIM > 1
    DECODE_LOAD(4, decode_block_coord1)
    DECODE_LOAD(5, decode_coord_in_block1)
#  endif
#  if LDIM > 2
    DECODE_LOAD(6, decode_block_coord2)
    DECODE_LOAD(7, decode_coord_in_block2)
#  endif
#  if LDIM > 3
    DECODE_LOAD(8, decode_block_coord3)
    DECODE_LOAD(9, decode_coord_in_block3)
#  endif
#  if LDIM > 4
    DECODE_LOAD(10, decode_block_coord4)
    DECODE_LOAD(11, decode_coord_in_block4)
#  endif
#endif
}
