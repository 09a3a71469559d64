#version 450
// @variants GEMM_TYPES=F16_F16|F16_F32|BF16_F32|S8_S32
// @variants SPLIT_SUM=NONE|LAST
// The dense coopmat2 GEMM (sample coopmat2-gemm; the dense paths of bench sparse): C[M][N] = A[M][K] * B[K][N] with
// workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2), tensor layouts and flexible dimensions. Any M, N,
// K: tiles that cross an edge load through layouts with Constant clamp (value 0), so the missing rows/columns/K-steps
// contribute nothing, and the store discards out-of-bounds elements (GLSL_NV_cooperative_matrix2: "out of bounds
// stores are dropped"). Interior tiles take a fast path with Undefined clamp, 16-byte-aligned strides and a K loop
// unrolled K_UNROLL times, so the driver can keep several tile loads in flight.
//   defines:        GEMM_TYPES (gemm_types.glsl), SPLIT_SUM = NONE | LAST (split_sum.glsl: one K slice, or K slices
//                   that the tile's last slice adds up)
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 2 TILE_N, 3 TILE_K (multiples of a flexible-dimensions
//                   granularity row whose workgroupInvocations == WORKGROUP_SIZE), 4 B_COLUMN_MAJOR,
//                   5 K_UNROLL, 6 GROUP_M (tile rows per raster group, for L2 reuse), 7 SPLIT_K (K slices;
//                   > 1 writes partial sums [SPLIT_K][M][N] that split_sum.glsl adds up), 9 ALIGNED (the host's
//                   promise that M and N are multiples of the tile, K of TILE_K and the strides of 16 bytes: the
//                   clamped edge path and the clamped store are compiled out, as ggml builds aligned pipelines),
//                   10 TAIL_SPLIT (SPLIT_SUM=LAST, SPLIT_K 1: > 1 runs the last tiles of the raster as that many
//                   K slices each, after the whole tiles, so that a grid's partial last wave is shorter work; the
//                   grid's size says how many: tiles + tail x (TAIL_SPLIT - 1) workgroups)
//   push constants: M, N, K and the row strides (in elements) of A, B and C
//   bindings:       0 A (row-major M x K), 1 B (K x N row-major, or N x K if B_COLUMN_MAJOR), 2 C (M x N), or
//                   the partial sums when SPLIT_K > 1 ([TAIL_SPLIT][tail][TILE_M][TILE_N] for a tail split);
//                   SPLIT_SUM LAST: 3 C, 4 the tiles' arrival counts
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
layout(constant_id = 9) const bool ALIGNED = false;
layout(constant_id = 10) const uint TAIL_SPLIT = 1;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer MatrixA { A_TYPE a[]; };
layout(set = 0, binding = 1) readonly buffer MatrixB { A_TYPE b[]; };

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_a, stride_b, stride_c;
} shape;

#define SUM_PARTIALS 2
#define SUM_SLICES (TAIL_SPLIT > 1 ? TAIL_SPLIT : SPLIT_K)
#define C_QUALIFIERS
#include "split_sum.glsl"
#include "raster.glsl"

#define MAT_A coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define MAT_B coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define MAT_C coopmat<C_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>
#define CLAMPED gl_CooperativeMatrixClampModeConstantNV

void main() {
    const uint tiles_m = (shape.M + TILE_M - 1) / TILE_M;
    const uint tiles_n = (shape.N + TILE_N - 1) / TILE_N;
    // The workgroup's tile in raster order, its K slice and how many slices the tile has.
    uint tile_index = gl_WorkGroupID.x, split = gl_WorkGroupID.y, slices = SPLIT_K;
#if SPLIT_SUM == LAST
    // Tail split: the last `tail` tiles come after the whole ones as TAIL_SPLIT slices each.
    const uint tail = TAIL_SPLIT > 1 ? (gl_NumWorkGroups.x - tiles_m * tiles_n) / (TAIL_SPLIT - 1) : 0;
    const uint first_tail = tiles_m * tiles_n - tail;
    const bool in_tail = tile_index >= first_tail;
    if (in_tail) {
        split = (tile_index - first_tail) % TAIL_SPLIT;
        tile_index = first_tail + (tile_index - first_tail) / TAIL_SPLIT;
        slices = TAIL_SPLIT;
    }
#endif
    const uvec2 tile = grouped_tile(tile_index, tiles_m, tiles_n, GROUP_M);
    if (tile.x >= tiles_m) {
        return;
    }
    const uint row0 = tile.x * TILE_M;
    const uint col0 = tile.y * TILE_N;

    // B is [K][N] (row-major) or [N][K] (column-major B, read through a transposing view).
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    MAT_C sum = MAT_C(0);
    // K slice of this workgroup (the whole of K unless SPLIT_K > 1), in whole TILE_K steps. The loops count
    // steps and derive k = step * TILE_K, so the compiler can prove every k is a TILE_K (16-byte) multiple and
    // use aligned tensor loads; a k derived through min() with the unaligned K loses that (3x slower, measured).
    const uint steps_total = (shape.K + TILE_K - 1) / TILE_K;
    const uint steps_per_split = (steps_total + slices - 1) / slices;
    const uint step_begin = min(steps_total, split * steps_per_split);
    const uint step_end = min(steps_total, step_begin + steps_per_split);
    const uint k_end = min(shape.K, step_end * TILE_K);
    const uint full_steps_end = min(step_end, shape.K / TILE_K);   // steps that lie entirely inside K
    uint step = step_begin;

// One K step at k: A, then B plain or through the transposing view.
#define GEMM_STEP(LAYOUT_A, LAYOUT_B)                                                                         \
    {                                                                                                         \
        MAT_A tile_a;                                                                                         \
        MAT_B tile_b;                                                                                         \
        coopMatLoadTensorNV(tile_a, a, 0, sliceTensorLayoutNV(LAYOUT_A, row0, TILE_M, k, TILE_K));            \
        if (B_COLUMN_MAJOR) {                                                                                 \
            coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(LAYOUT_B, col0, TILE_N, k, TILE_K), transposed); \
        } else {                                                                                              \
            coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(LAYOUT_B, k, TILE_K, col0, TILE_N));        \
        }                                                                                                     \
        sum = coopMatMulAdd(tile_a, tile_b, sum);                                                             \
    }

    const bool interior = ALIGNED || (tile.x * TILE_M + TILE_M <= shape.M && tile.y * TILE_N + TILE_N <= shape.N &&
                          shape.stride_a % ELEMENTS_PER_16B == 0 && shape.stride_b % ELEMENTS_PER_16B == 0);
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

        for (; step + K_UNROLL <= full_steps_end; step += K_UNROLL) {
            [[unroll]] for (uint unrolled = 0; unrolled < K_UNROLL; ++unrolled) {
                const uint k = (step + unrolled) * TILE_K;
                GEMM_STEP(layout_a, layout_b)
            }
        }
        for (; step < full_steps_end; ++step) {
            const uint k = step * TILE_K;
            GEMM_STEP(layout_a, layout_b)
        }
    }

    // Edge tiles (all of K) and the K tail of interior tiles: Constant clamp with clampValue 0 (the default).
    // An ALIGNED pipeline has neither: the whole block folds away with the specialization constant.
    if (!ALIGNED) {
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
        for (; step < step_end; ++step) {
            const uint k = step * TILE_K;
            GEMM_STEP(clamped_a, clamped_b)
        }
    }

// C (or, with SPLIT_K > 1, this K slice's plane of the partial sums) into TARGET.
#define STORE_C(TARGET)                                                                                       \
    if (SPLIT_K == 1 && ALIGNED) {                                                                            \
        tensorLayoutNV<2> exact_c = createTensorLayoutNV(2);                                                  \
        exact_c = setTensorLayoutDimensionNV(exact_c, shape.M, shape.N);                                      \
        exact_c = setTensorLayoutStrideNV(exact_c, shape.stride_c & ~(C_ELEMENTS_PER_16B - 1), 1);           \
        coopMatStoreTensorNV(sum, TARGET, 0, sliceTensorLayoutNV(exact_c, row0, TILE_M, col0, TILE_N));       \
    } else if (SPLIT_K == 1) {                                                                                \
        tensorLayoutNV<2, CLAMPED> layout_c = createTensorLayoutNV(2, CLAMPED);                               \
        layout_c = setTensorLayoutDimensionNV(layout_c, shape.M, shape.N);                                    \
        layout_c = setTensorLayoutStrideNV(layout_c, shape.stride_c, 1);                                      \
        coopMatStoreTensorNV(sum, TARGET, 0, sliceTensorLayoutNV(layout_c, row0, TILE_M, col0, TILE_N));      \
    } else {                                                                                                  \
        /* partial sums of this K slice: plane `split` of [SPLIT_K][M][N] (span 1 in the outer dimension) */ \
        tensorLayoutNV<3, CLAMPED> partial = createTensorLayoutNV(3, CLAMPED);                                \
        partial = setTensorLayoutDimensionNV(partial, SPLIT_K, shape.M, shape.N);                             \
        partial = setTensorLayoutStrideNV(partial, shape.M * shape.stride_c, shape.stride_c, 1);              \
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(partial, split, 1, row0, TILE_M, col0, TILE_N));  \
    }
#if SPLIT_SUM == LAST
    if (TAIL_SPLIT > 1) {
        if (in_tail) {
            // A tail slice's partial sums: plane split * tail + (its tile's place in the tail), TILE_M x TILE_N.
            tensorLayoutNV<3> planes = createTensorLayoutNV(3);
            planes = setTensorLayoutDimensionNV(planes, TAIL_SPLIT * tail, TILE_M, TILE_N);
            planes = setTensorLayoutStrideNV(planes, TILE_M * TILE_N, TILE_N, 1);
            coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(planes, split * tail + tile_index - first_tail, 1,
                                                                0, TILE_M, 0, TILE_N));
            sum_planes_when_last(tile_index - first_tail, (tile_index - first_tail) * TILE_M * TILE_N,
                                 tail * TILE_M * TILE_N, TILE_N, row0, col0);
        } else {
            STORE_C(sum_c)
        }
        return;
    }
#endif
    STORE_C(c)
#if SPLIT_SUM == LAST
    if (SPLIT_K > 1) {
        sum_slices_when_last(row0, col0);
    }
#endif
}
