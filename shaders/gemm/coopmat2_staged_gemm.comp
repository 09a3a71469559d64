#version 450
// @variants GEMM_TYPES=F16_F16|F16_F32|BF16_F32
// Experiment for docs/gemm-notes.md ("Staged through shared memory"): the coopmat2 GEMM with A and B copied
// to shared memory in 16-byte vectors, double-buffered, and the workgroup-scope matrices loaded from there.
// Why: on Hopper the driver turns coopMatLoadTensorNV from a storage buffer into 16-bit global loads
// (LDG.E.U16, GPU_HOST.md), so the direct kernel spends its issue slots on loads; here each invocation issues
// one 128-bit load per 8 elements, and the matrix loads come from shared memory (where ldmatrix can serve them).
// It is written for interior tiles of the benchmark's shapes but handles any M and N: rows and columns past
// the edge are fetched as zeros and the store drops what falls outside (Constant clamp).
//   defines:        GEMM_TYPES (gemm_types.glsl; 16-bit inputs only)
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 2 TILE_N, 3 TILE_K (multiples of a flexible-dimensions row with
//                   workgroupInvocations == WORKGROUP_SIZE), 6 GROUP_M (tile rows per raster group)
//   push constants: M, N, K and the row strides (in elements) of A, B and C; K, N and the A/B strides must be
//                   multiples of 8 (whole 16-byte vectors), which the host checks
//   bindings:       0 A (row-major M x K), 1 B (row-major K x N), 2 C (M x N)
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable
#include "gemm_types.glsl"

#if A_BYTES != 2
#error "the staged kernel copies 16-bit elements"
#endif

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint TILE_M = 128;
layout(constant_id = 2) const uint TILE_N = 128;
layout(constant_id = 3) const uint TILE_K = 32;
layout(constant_id = 6) const uint GROUP_M = 8;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer MatrixA { uvec4 a[]; };
layout(set = 0, binding = 1) readonly buffer MatrixB { uvec4 b[]; };
layout(set = 0, binding = 2) writeonly buffer MatrixC { C_TYPE c[]; };

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_a, stride_b, stride_c;
} shape;

const uint E = ELEMENTS_PER_16B;
// One 16-byte skew per shared row keeps consecutive rows of a matrix load on different banks.
const uint A_ROW = TILE_K / E + 1;          // 16-byte vectors per shared row of A
const uint B_ROW = TILE_N / E + 1;
const uint A_STAGE = TILE_M * A_ROW;
const uint B_STAGE = TILE_K * B_ROW;
shared uvec4 shared_a[2 * A_STAGE];         // two stages: the next tile is stored while this one multiplies
shared uvec4 shared_b[2 * B_STAGE];

const uint A_VECS_PER_ROW = TILE_K / E;
const uint B_VECS_PER_ROW = TILE_N / E;
const uint A_PER_INVOCATION = TILE_M * A_VECS_PER_ROW / WORKGROUP_SIZE;   // the host makes these divide evenly
const uint B_PER_INVOCATION = TILE_K * B_VECS_PER_ROW / WORKGROUP_SIZE;
uvec4 fetched_a[A_PER_INVOCATION];
uvec4 fetched_b[B_PER_INVOCATION];

#define MAT_A coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define MAT_B coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define MAT_C coopmat<C_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>

// Grouped rasterization, as in coopmat2_gemm.comp: workgroups walk GROUP_M tile rows down a tile column.
uvec2 tile_of_workgroup(uint linear, uint tiles_m, uint tiles_n) {
    uint per_group = GROUP_M * tiles_n;
    uint first_row = (linear / per_group) * GROUP_M;
    uint rows_here = min(tiles_m - first_row, GROUP_M);
    uint in_group = linear % per_group;
    return uvec2(first_row + in_group % rows_here, in_group / rows_here);
}

// Global -> registers: 16-byte vectors of the A and B tiles at k, zeros past the edges.
void fetch(uint row0, uint col0, uint k) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint row = row0 + v / A_VECS_PER_ROW;
        uint kk = k + (v % A_VECS_PER_ROW) * E;
        fetched_a[i] = (row < shape.M && kk < shape.K) ? a[(row * shape.stride_a + kk) / E] : uvec4(0);
    }
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint kk = k + v / B_VECS_PER_ROW;
        uint col = col0 + (v % B_VECS_PER_ROW) * E;
        fetched_b[i] = (kk < shape.K && col < shape.N) ? b[(kk * shape.stride_b + col) / E] : uvec4(0);
    }
}

// Registers -> shared stage `stage`.
void stash(uint stage) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_a[stage * A_STAGE + (v / A_VECS_PER_ROW) * A_ROW + v % A_VECS_PER_ROW] = fetched_a[i];
    }
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_b[stage * B_STAGE + (v / B_VECS_PER_ROW) * B_ROW + v % B_VECS_PER_ROW] = fetched_b[i];
    }
}

void main() {
    const uint tiles_m = (shape.M + TILE_M - 1) / TILE_M;
    const uint tiles_n = (shape.N + TILE_N - 1) / TILE_N;
    const uvec2 tile = tile_of_workgroup(gl_WorkGroupID.x, tiles_m, tiles_n);
    if (tile.x >= tiles_m) {
        return;
    }
    const uint row0 = tile.x * TILE_M;
    const uint col0 = tile.y * TILE_N;
    const uint steps = (shape.K + TILE_K - 1) / TILE_K;

    MAT_C sum = MAT_C(0);
    fetch(row0, col0, 0);
    stash(0);
    barrier();
    for (uint step = 0; step < steps; ++step) {
        const uint stage = step & 1;
        const bool more = step + 1 < steps;
        if (more) {
            fetch(row0, col0, (step + 1) * TILE_K);   // in flight while this stage multiplies
        }
        MAT_A tile_a;
        MAT_B tile_b;
        coopMatLoad(tile_a, shared_a, stage * A_STAGE, A_ROW, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(tile_b, shared_b, stage * B_STAGE, B_ROW, gl_CooperativeMatrixLayoutRowMajor);
        sum = coopMatMulAdd(tile_a, tile_b, sum);
        if (more) {
            // The other stage was last read in the previous step, which ended with a barrier.
            stash(stage ^ 1);
        }
        barrier();
    }

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> layout_c =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    layout_c = setTensorLayoutDimensionNV(layout_c, shape.M, shape.N);
    layout_c = setTensorLayoutStrideNV(layout_c, shape.stride_c, 1);
    coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(layout_c, row0, TILE_M, col0, TILE_N));
}
