#version 450
// @variants GEMM_TYPES=F16_F16|F16_F32|BF16_F32|S8_S32
// Sample 6: C[M][N] = A[M][K] * B[K][N] with workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2),
// tensor layouts and flexible dimensions. Any M, N, K: tiles that cross an edge load through layouts with
// Constant clamp (value 0), so the missing rows/columns/K-steps contribute nothing, and the store discards
// out-of-bounds elements (GLSL_NV_cooperative_matrix2: "out of bounds stores are dropped").
// Interior tiles take a fast path with Undefined clamp, 16-byte-aligned strides and a K loop unrolled
// K_UNROLL times, so the driver can keep several tile loads in flight.
//   defines:        GEMM_TYPES (gemm_types.glsl)
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 2 TILE_N, 3 TILE_K (multiples of a flexible-dimensions
//                   granularity row whose workgroupInvocations == WORKGROUP_SIZE), 4 B_COLUMN_MAJOR,
//                   5 K_UNROLL, 6 GROUP_M (tile rows per raster group, for L2 reuse), 7 SPLIT_K (K slices;
//                   > 1 writes fp32 partial sums [SPLIT_K][M][N] that splitk_reduce.comp adds up)
//   push constants: M, N, K and the row strides (in elements) of A, B and C
//   bindings:       0 A (row-major M x K), 1 B (K x N row-major, or N x K if B_COLUMN_MAJOR), 2 C (M x N)
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable
#include "gemm_types.glsl"

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint TILE_M = 128;
layout(constant_id = 2) const uint TILE_N = 128;
layout(constant_id = 3) const uint TILE_K = 32;
layout(constant_id = 4) const bool B_COLUMN_MAJOR = false;
layout(constant_id = 5) const uint K_UNROLL = 2;
layout(constant_id = 6) const uint GROUP_M = 8;
layout(constant_id = 7) const uint SPLIT_K = 1;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer MatrixA { A_TYPE a[]; };
layout(set = 0, binding = 1) readonly buffer MatrixB { A_TYPE b[]; };
layout(set = 0, binding = 2) writeonly buffer MatrixC { C_TYPE c[]; };

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_a, stride_b, stride_c;
} shape;

#define MAT_A coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define MAT_B coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define MAT_C coopmat<C_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>
#define CLAMPED gl_CooperativeMatrixClampModeConstantNV

// Grouped rasterization: consecutive workgroups walk GROUP_M tile rows down one tile column before moving
// right, so the B tiles they share are still in L2.
uvec2 tile_of_workgroup(uint linear, uint tiles_m, uint tiles_n) {
    uint per_group = GROUP_M * tiles_n;
    uint first_row = (linear / per_group) * GROUP_M;
    uint rows_here = min(tiles_m - first_row, GROUP_M);
    uint in_group = linear % per_group;
    return uvec2(first_row + in_group % rows_here, in_group / rows_here);
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

    // B is [K][N] (row-major) or [N][K] (column-major B, read through a transposing view).
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    MAT_C sum = MAT_C(0);
    // K slice of this workgroup (the whole of K unless SPLIT_K > 1), in whole TILE_K steps.
    const uint split = gl_WorkGroupID.y;
    const uint k_chunk = ((shape.K + SPLIT_K - 1) / SPLIT_K + TILE_K - 1) / TILE_K * TILE_K;
    const uint k_begin = min(shape.K, split * k_chunk);
    const uint k_end = min(shape.K, k_begin + k_chunk);
    uint k = k_begin;
    const uint k_full = k_end - (k_end - k_begin) % TILE_K;

    const bool interior = row0 + TILE_M <= shape.M && col0 + TILE_N <= shape.N &&
                          shape.stride_a % ELEMENTS_PER_16B == 0 && shape.stride_b % ELEMENTS_PER_16B == 0;
    if (interior) {
        // Masking the strides tells the compiler they are 16-byte multiples (rows stay aligned).
        const uint stride_a = shape.stride_a & ~(ELEMENTS_PER_16B - 1);
        const uint stride_b = shape.stride_b & ~(ELEMENTS_PER_16B - 1);
        tensorLayoutNV<2> layout_a = createTensorLayoutNV(2);
        layout_a = setTensorLayoutDimensionNV(layout_a, shape.M, shape.K);
        layout_a = setTensorLayoutStrideNV(layout_a, stride_a, 1);
        tensorLayoutNV<2> layout_b = createTensorLayoutNV(2);
        if (B_COLUMN_MAJOR) {
            layout_b = setTensorLayoutDimensionNV(layout_b, shape.N, shape.K);
        } else {
            layout_b = setTensorLayoutDimensionNV(layout_b, shape.K, shape.N);
        }
        layout_b = setTensorLayoutStrideNV(layout_b, stride_b, 1);

        for (; k + K_UNROLL * TILE_K <= k_full; ) {
            [[unroll]] for (uint step = 0; step < K_UNROLL; ++step, k += TILE_K) {
                MAT_A tile_a;
                MAT_B tile_b;
                coopMatLoadTensorNV(tile_a, a, 0, sliceTensorLayoutNV(layout_a, row0, TILE_M, k, TILE_K));
                if (B_COLUMN_MAJOR) {
                    coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(layout_b, col0, TILE_N, k, TILE_K), transposed);
                } else {
                    coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(layout_b, k, TILE_K, col0, TILE_N));
                }
                sum = coopMatMulAdd(tile_a, tile_b, sum);
            }
        }
        for (; k < k_full; k += TILE_K) {
            MAT_A tile_a;
            MAT_B tile_b;
            coopMatLoadTensorNV(tile_a, a, 0, sliceTensorLayoutNV(layout_a, row0, TILE_M, k, TILE_K));
            if (B_COLUMN_MAJOR) {
                coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(layout_b, col0, TILE_N, k, TILE_K), transposed);
            } else {
                coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(layout_b, k, TILE_K, col0, TILE_N));
            }
            sum = coopMatMulAdd(tile_a, tile_b, sum);
        }
    }

    // Edge tiles (all of K) and the K tail of interior tiles: Constant clamp with clampValue 0 (the default).
    tensorLayoutNV<2, CLAMPED> clamped_a = createTensorLayoutNV(2, CLAMPED);
    clamped_a = setTensorLayoutDimensionNV(clamped_a, shape.M, k_end);  // K clamps at the slice end
    clamped_a = setTensorLayoutStrideNV(clamped_a, shape.stride_a, 1);
    tensorLayoutNV<2, CLAMPED> clamped_b = createTensorLayoutNV(2, CLAMPED);
    if (B_COLUMN_MAJOR) {
        clamped_b = setTensorLayoutDimensionNV(clamped_b, shape.N, k_end);
    } else {
        clamped_b = setTensorLayoutDimensionNV(clamped_b, k_end, shape.N);
    }
    clamped_b = setTensorLayoutStrideNV(clamped_b, shape.stride_b, 1);
    for (; k < k_end; k += TILE_K) {
        MAT_A tile_a;
        MAT_B tile_b;
        coopMatLoadTensorNV(tile_a, a, 0, sliceTensorLayoutNV(clamped_a, row0, TILE_M, k, TILE_K));
        if (B_COLUMN_MAJOR) {
            coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(clamped_b, col0, TILE_N, k, TILE_K), transposed);
        } else {
            coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(clamped_b, k, TILE_K, col0, TILE_N));
        }
        sum = coopMatMulAdd(tile_a, tile_b, sum);
    }

    if (SPLIT_K == 1) {
        tensorLayoutNV<2, CLAMPED> layout_c = createTensorLayoutNV(2, CLAMPED);
        layout_c = setTensorLayoutDimensionNV(layout_c, shape.M, shape.N);
        layout_c = setTensorLayoutStrideNV(layout_c, shape.stride_c, 1);
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(layout_c, row0, TILE_M, col0, TILE_N));
    } else {
        // Partial sums of this K slice: plane `split` of [SPLIT_K][M][N] (a span of 1 in the outer dimension).
        tensorLayoutNV<3, CLAMPED> partial = createTensorLayoutNV(3, CLAMPED);
        partial = setTensorLayoutDimensionNV(partial, SPLIT_K, shape.M, shape.N);
        partial = setTensorLayoutStrideNV(partial, shape.M * shape.stride_c, shape.stride_c, 1);
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(partial, split, 1, row0, TILE_M, col0, TILE_N));
    }
}
