#version 450
// @variants GEMM_TYPES=F16_F16|F16_F32|BF16_F32
// @variants SPLIT_SUM=NONE|LAST
// The staged coopmat2 GEMM (docs/gemm.md; `t` in a configuration label; the H100's fp16-accumulating N = 64 default
// and later seeds of its narrow classes): A and B copied to shared memory in 16-byte vectors, double-buffered, and
// the workgroup-scope matrices loaded from there (staged_gemm.glsl). Each invocation issues one 128-bit load per 8
// elements, and the matrix loads come from shared memory, where ldmatrix can serve them. Any M and N: rows and
// columns past the edge are fetched as zeros and the store drops what falls outside (Constant clamp).
//   defines:        GEMM_TYPES (gemm_types.glsl; 16-bit inputs only), SPLIT_SUM = NONE | LAST (split_sum.glsl)
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 2 TILE_N, 3 TILE_K (multiples of a flexible-dimensions row with
//                   workgroupInvocations == WORKGROUP_SIZE), 6 GROUP_M (tile rows per raster group), 7 SPLIT_K
//                   (K slices writing partial sums [SPLIT_K][M][N], added up as split_sum.glsl says), 9 ALIGNED
//                   (M, N whole tiles and K whole TILE_K steps: no bounds tests in the copies, an unclamped store),
//                   10 PREFETCH (K steps in flight in registers while one multiplies)
//   push constants: M, N, K and the row strides (in elements) of A, B and C; K, N and the A/B strides must be
//                   multiples of 8 (whole 16-byte vectors), which the host checks
//   bindings:       0 A (row-major M x K), 1 B (row-major K x N), 2 C (M x N) or the partial sums; SPLIT_SUM LAST:
//                   3 C, 4 the tiles' arrival counts
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#include "gemm_types.glsl"
#if A_BYTES != 2
#error "the staged kernel copies 16-bit elements"
#endif

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_a, stride_b, stride_c;
} shape;

#define A_BINDINGS 1
layout(set = 0, binding = 0) restrict readonly buffer MatrixA { uvec4 a[]; };
#include "staged_gemm.glsl"

const uint A_VECS_PER_ROW = TILE_K / E;
const uint A_PER_INVOCATION = TILE_M * A_VECS_PER_ROW / WORKGROUP_SIZE;   // the host makes this divide evenly
uvec4 fetched_a[PREFETCH * A_PER_INVOCATION];

void fetch_a(uint slot, uint row0, uint k) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint row = row0 + v / A_VECS_PER_ROW;
        uint kk = k + (v % A_VECS_PER_ROW) * E;
        const bool inside = ALIGNED || (row < shape.M && kk < shape.K);
        fetched_a[slot * A_PER_INVOCATION + i] = inside ? a[(row * shape.stride_a + kk) / E] : uvec4(0);
    }
}

void stash_a(uint slot, uint base) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_a[base + (v / A_VECS_PER_ROW) * A_ROW + v % A_VECS_PER_ROW] = fetched_a[slot * A_PER_INVOCATION + i];
    }
}
