#version 450
// The tile-major 2:4 expansion of the staged 2:4 GEMM, without cooperative matrices, for any Vulkan device
// (tests/test_sparse24_tiles.py runs it on lavapipe): one workgroup per block (tile row gl_WorkGroupID.x, K step
// gl_WorkGroupID.y) runs the GEMM's own fetch_a and stash_a (shaders/gemm/sparse24_tiles.glsl) into a shared tile
// with the GEMM's row skew, then copies that tile's rows out to a dense [M][K] buffer of 16-bit elements.
//   defines:        A_FORMAT = TILES_PATTERNS | TILES_NIBBLES
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 3 TILE_K (the GEMM's ids)
//   push constants: M, N (unused), K
//   bindings:       0 the blocks (vkcoop.gemm.tile_major_2to4), 1 dense A (uvec4, [M][K/8])
#extension GL_EXT_control_flow_attributes : enable
#define TILES_PATTERNS 2
#define TILES_NIBBLES 3

layout(constant_id = 0) const uint WORKGROUP_SIZE = 128;
layout(constant_id = 1) const uint TILE_M = 64;
layout(constant_id = 3) const uint TILE_K = 64;
const uint PREFETCH = 1;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform Shape {
    uint M, N, K;
} shape;

layout(set = 0, binding = 0) restrict readonly buffer TileVectors { uvec4 tiles[]; };
layout(set = 0, binding = 0) restrict readonly buffer TileWords { uint tile_words[]; };
layout(set = 0, binding = 1) restrict writeonly buffer Dense { uvec4 dense[]; };

const uint A_ROW = TILE_K / 8 + 1;   // as staged_gemm.glsl: one 16-byte skew vector per row
shared uvec4 shared_a[TILE_M * A_ROW];
#include "sparse24_tiles.glsl"

void main() {
    const uint row0 = gl_WorkGroupID.x * TILE_M;
    const uint k = gl_WorkGroupID.y * TILE_K;
    fetch_a(0, row0, k);
    stash_a(0, 0);
    barrier();
    const uint vectors_per_row = TILE_K / 8;
    for (uint v = gl_LocalInvocationIndex; v < TILE_M * vectors_per_row; v += WORKGROUP_SIZE) {
        const uint row = v / vectors_per_row, column = v % vectors_per_row;
        dense[((row0 + row) * shape.K + k) / 8 + column] = shared_a[row * A_ROW + column];
    }
}
