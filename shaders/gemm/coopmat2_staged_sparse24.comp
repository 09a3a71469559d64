#version 450
// @variants GEMM_TYPES=F16_F32|BF16_F32
// @variants SPLIT_SUM=NONE|LAST
// @variants A_FORMAT=ROWS|TILES_PATTERNS|TILES_NIBBLES
// The staged 2:4 GEMM, the H100's default 2:4 kernel (docs/gemm.md; `t` in a vk-coopmat2-2:4 configuration): the
// staged coopmat2 GEMM (staged_gemm.glsl) with A read in a 2:4 format, 16-byte vectors of values plus their
// metadata, and expanded to dense rows on the way into shared memory. Why: the decode-function kernel
// (coopmat2_sparse24.comp) calls the decode once per element; here a 16-column group costs one 128-bit load, part of
// a metadata word and some bit operations, and A moves 0.5625x the bytes of the dense kernel.
//   defines:        GEMM_TYPES (F16_F32 | BF16_F32), SPLIT_SUM = NONE | LAST (split_sum.glsl), A_FORMAT:
//                   ROWS           vkcoop's format as it is (vkcoop/sparse/two_four.py; `t`): values [M][K/2] and
//                                  metadata [M][K/32], 64-bit shifts place the values (sparse24_expand.glsl);
//                   TILES_PATTERNS the tile-major layout (vkcoop/gemm/tile_major.py, `tp`): each K step of a tile one
//                                  block read in invocation order, pattern codes expanded by masks and a select;
//                   TILES_NIBBLES  the same blocks with the PTX nibbles and the 64-bit shifts (`tn`)
//   spec constants: as coopmat2_staged_gemm.comp (SPLIT_K, ALIGNED, PREFETCH too); TILE_K a multiple of 32 (one metadata word)
//   push constants: M, N, K, the row strides of B and C (in elements); K a multiple of 32, N of 8; TILES_*: M and K
//                   whole tiles
//   bindings:       ROWS: 0 values ([M][K/2]), 1 metadata (uint [M][K/32]); TILES_*: 0 the blocks. Then B (row-major
//                   K x N), C (M x N) or the partial sums; SPLIT_SUM LAST (split_sum.glsl): C, the tiles' arrival
//                   counts
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#include "gemm_types.glsl"
#define ROWS 1
#define TILES_PATTERNS 2
#define TILES_NIBBLES 3
#ifndef A_FORMAT
#define A_FORMAT ROWS
#endif
#if A_BYTES != 2
#error "the 2:4 format here holds 16-bit values"
#endif

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_b, stride_c;
} shape;

#if A_FORMAT == TILES_PATTERNS || A_FORMAT == TILES_NIBBLES
// Two views of the blocks: value vectors, and metadata words.
#define A_BINDINGS 1
layout(set = 0, binding = 0) restrict readonly buffer TileVectors { uvec4 tiles[]; };
layout(set = 0, binding = 0) restrict readonly buffer TileWords { uint tile_words[]; };
#include "staged_gemm.glsl"
#include "sparse24_tiles.glsl"
#elif A_FORMAT == ROWS
#include "sparse24_expand.glsl"
#define A_BINDINGS 2
layout(set = 0, binding = 0) restrict readonly buffer Values { uvec4 values[]; };
layout(set = 0, binding = 1) restrict readonly buffer Metadata { uint metadata[]; };
#include "staged_gemm.glsl"

const uint A_GROUPS_PER_ROW = TILE_K / 16;      // 16-column groups: one vector of values each
const uint A_PER_INVOCATION = TILE_M * A_GROUPS_PER_ROW / WORKGROUP_SIZE;   // the host makes this divide evenly
uvec4 fetched_values[PREFETCH * A_PER_INVOCATION];
uint fetched_nibbles[PREFETCH * A_PER_INVOCATION];

void fetch_a(uint slot, uint row0, uint k) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint row = row0 + v / A_GROUPS_PER_ROW;
        uint group = k / 16 + v % A_GROUPS_PER_ROW;
        const bool inside = ALIGNED || (row < shape.M && group * 16 < shape.K);
        // Outside: nibble 0 puts both (zero) values at position 0, an all-zero chunk.
        fetched_values[slot * A_PER_INVOCATION + i] = inside ? values[row * (shape.K / 16) + group] : uvec4(0);
        uint word = inside ? metadata[row * (shape.K / 32) + group / 2] : 0u;
        fetched_nibbles[slot * A_PER_INVOCATION + i] = (word >> (16u * (group & 1u))) & 0xFFFFu;
    }
}

void stash_a(uint slot, uint base) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uvec4 first, second;
        expand16(fetched_values[slot * A_PER_INVOCATION + i], fetched_nibbles[slot * A_PER_INVOCATION + i], first, second);
        uint at = base + (v / A_GROUPS_PER_ROW) * A_ROW + 2 * (v % A_GROUPS_PER_ROW);
        shared_a[at] = first;
        shared_a[at + 1] = second;
    }
}
#else
#error "A_FORMAT must be ROWS, TILES_PATTERNS or TILES_NIBBLES"
#endif
