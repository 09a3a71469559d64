#version 450
// @variants GEMM_TYPES=F16_F16|F16_F32|BF16_F32|S8_S32
// @variants SCOPE=WORKGROUP|SUBGROUP
// @variants N_PARTS=1|2
// @variants SPLIT_SUM=PASS|LAST
// Sample 6: C[M][N] = A[M][K] * B[K][N] with workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2),
// tensor layouts and flexible dimensions. Any M, N, K: tiles that cross an edge load through layouts with
// Constant clamp (value 0), so the missing rows/columns/K-steps contribute nothing, and the store discards
// out-of-bounds elements (GLSL_NV_cooperative_matrix2: "out of bounds stores are dropped").
// Interior tiles take a fast path with Undefined clamp, 16-byte-aligned strides and a K loop unrolled
// K_UNROLL times, so the driver can keep several tile loads in flight.
// SCOPE=SUBGROUP cuts the workgroup tile among its subgroups (SUBGROUPS_M x the rest): each subgroup owns a
// (TILE_M/SUBGROUPS_M) x (TILE_N/SUBGROUPS_N) block of subgroup-scope flexible-dimension matrices loaded straight
// from memory through the same tensor layouts (A and B rows shared between subgroups come from L1).
// N_PARTS > 1 splits each matrix's N into that many accumulators that share one A load per K step.
//   defines:        GEMM_TYPES (gemm_types.glsl), SCOPE = WORKGROUP | SUBGROUP, N_PARTS = 1 | 2,
//                   SPLIT_SUM = PASS | LAST (split_sum.glsl: a reduce pass, or the tile's last slice adds up)
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 2 TILE_N, 3 TILE_K (multiples of a flexible-dimensions
//                   granularity row whose workgroupInvocations == WORKGROUP_SIZE), 4 B_COLUMN_MAJOR,
//                   5 K_UNROLL, 6 GROUP_M (tile rows per raster group, for L2 reuse), 7 SPLIT_K (K slices;
//                   > 1 writes partial sums [SPLIT_K][M][N] that split_sum.glsl adds up),
//                   8 SUBGROUPS_M (SCOPE=SUBGROUP: subgroups along M), 9 ALIGNED (the host's promise that
//                   M and N are multiples of the tile, K of TILE_K and the strides of 16 bytes: the clamped edge
//                   path and the clamped store are compiled out, as ggml builds aligned pipelines),
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
#extension GL_KHR_shader_subgroup_basic : enable
#include "gemm_types.glsl"

#define WORKGROUP 1
#define SUBGROUP 2
#ifndef SCOPE
#define SCOPE WORKGROUP
#endif

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint TILE_M = 128;
layout(constant_id = 2) const uint TILE_N = 128;
layout(constant_id = 3) const uint TILE_K = 32;
layout(constant_id = 4) const bool B_COLUMN_MAJOR = false;
layout(constant_id = 5) const uint K_UNROLL = 2;
layout(constant_id = 6) const uint GROUP_M = 8;
layout(constant_id = 7) const uint SPLIT_K = 1;
layout(constant_id = 8) const uint SUBGROUPS_M = 1;
layout(constant_id = 9) const bool ALIGNED = false;
layout(constant_id = 10) const uint TAIL_SPLIT = 1;
#ifndef N_PARTS
#define N_PARTS 1
#endif
#if N_PARTS != 1 && N_PARTS != 2
#error "N_PARTS must be 1 or 2"
#endif
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

#if SCOPE == WORKGROUP
#define MATRIX_SCOPE gl_ScopeWorkgroup
const uint SUBGROUPS_N = 1;
const uint OWN_M = TILE_M;          // rows of the tile this scope instance owns
#elif SCOPE == SUBGROUP
#define MATRIX_SCOPE gl_ScopeSubgroup
const uint SUBGROUPS_N = WORKGROUP_SIZE / 32 / SUBGROUPS_M;   // the host requires subgroup size 32
const uint OWN_M = TILE_M / SUBGROUPS_M;
#else
#error "SCOPE must be WORKGROUP or SUBGROUP"
#endif
const uint OWN_N = TILE_N / SUBGROUPS_N;
const uint PART_N = OWN_N / N_PARTS;   // columns of one accumulator
#define MAT_A coopmat<A_TYPE, MATRIX_SCOPE, OWN_M, TILE_K, gl_MatrixUseA>
#define MAT_B coopmat<A_TYPE, MATRIX_SCOPE, TILE_K, PART_N, gl_MatrixUseB>
#define MAT_C coopmat<C_TYPE, MATRIX_SCOPE, OWN_M, PART_N, gl_MatrixUseAccumulator>
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
#if SCOPE == WORKGROUP
    const uint row0 = tile.x * TILE_M;
    const uint col0 = tile.y * TILE_N;
#else
    const uint row0 = tile.x * TILE_M + (gl_SubgroupID % SUBGROUPS_M) * OWN_M;
    const uint col0 = tile.y * TILE_N + (gl_SubgroupID / SUBGROUPS_M) * OWN_N;
#endif

    // B is [K][N] (row-major) or [N][K] (column-major B, read through a transposing view).
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    MAT_C sum0 = MAT_C(0);
#if N_PARTS == 2
    MAT_C sum1 = MAT_C(0);
#endif
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

// One K step: A once, then each accumulator's B slice.
#define LOAD_B(TILE_B, LAYOUT_B, COL)                                                                         \
    if (B_COLUMN_MAJOR) {                                                                                     \
        coopMatLoadTensorNV(TILE_B, b, 0, sliceTensorLayoutNV(LAYOUT_B, COL, PART_N, k, TILE_K), transposed); \
    } else {                                                                                                  \
        coopMatLoadTensorNV(TILE_B, b, 0, sliceTensorLayoutNV(LAYOUT_B, k, TILE_K, COL, PART_N));             \
    }
#if N_PARTS == 1
#define GEMM_STEP(LAYOUT_A, LAYOUT_B)                                                                         \
    {                                                                                                         \
        MAT_A tile_a;                                                                                         \
        MAT_B tile_b0;                                                                                        \
        coopMatLoadTensorNV(tile_a, a, 0, sliceTensorLayoutNV(LAYOUT_A, row0, OWN_M, k, TILE_K));             \
        LOAD_B(tile_b0, LAYOUT_B, col0)                                                                       \
        sum0 = coopMatMulAdd(tile_a, tile_b0, sum0);                                                          \
    }
#else
#define GEMM_STEP(LAYOUT_A, LAYOUT_B)                                                                         \
    {                                                                                                         \
        MAT_A tile_a;                                                                                         \
        MAT_B tile_b0;                                                                                        \
        MAT_B tile_b1;                                                                                        \
        coopMatLoadTensorNV(tile_a, a, 0, sliceTensorLayoutNV(LAYOUT_A, row0, OWN_M, k, TILE_K));             \
        LOAD_B(tile_b0, LAYOUT_B, col0)                                                                       \
        LOAD_B(tile_b1, LAYOUT_B, col0 + PART_N)                                                              \
        sum0 = coopMatMulAdd(tile_a, tile_b0, sum0);                                                          \
        sum1 = coopMatMulAdd(tile_a, tile_b1, sum1);                                                          \
    }
#endif

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

#define STORE_C(SUM, COL, TARGET)                                                                             \
    if (SPLIT_K == 1 && ALIGNED) {                                                                            \
        tensorLayoutNV<2> exact_c = createTensorLayoutNV(2);                                                  \
        exact_c = setTensorLayoutDimensionNV(exact_c, shape.M, shape.N);                                      \
        exact_c = setTensorLayoutStrideNV(exact_c, shape.stride_c & ~(C_ELEMENTS_PER_16B - 1), 1);           \
        coopMatStoreTensorNV(SUM, TARGET, 0, sliceTensorLayoutNV(exact_c, row0, OWN_M, COL, PART_N));         \
    } else if (SPLIT_K == 1) {                                                                                \
        tensorLayoutNV<2, CLAMPED> layout_c = createTensorLayoutNV(2, CLAMPED);                               \
        layout_c = setTensorLayoutDimensionNV(layout_c, shape.M, shape.N);                                    \
        layout_c = setTensorLayoutStrideNV(layout_c, shape.stride_c, 1);                                      \
        coopMatStoreTensorNV(SUM, TARGET, 0, sliceTensorLayoutNV(layout_c, row0, OWN_M, COL, PART_N));        \
    } else {                                                                                                  \
        /* partial sums of this K slice: plane `split` of [SPLIT_K][M][N] (span 1 in the outer dimension) */ \
        tensorLayoutNV<3, CLAMPED> partial = createTensorLayoutNV(3, CLAMPED);                                \
        partial = setTensorLayoutDimensionNV(partial, SPLIT_K, shape.M, shape.N);                             \
        partial = setTensorLayoutStrideNV(partial, shape.M * shape.stride_c, shape.stride_c, 1);              \
        coopMatStoreTensorNV(SUM, c, 0, sliceTensorLayoutNV(partial, split, 1, row0, OWN_M, COL, PART_N));    \
    }
// A tail slice's partial sums: plane split * tail + (its tile's place in the tail), TILE_M x TILE_N.
#define STORE_TAIL(SUM, COL)                                                                                  \
    {                                                                                                         \
        tensorLayoutNV<3> planes = createTensorLayoutNV(3);                                                   \
        planes = setTensorLayoutDimensionNV(planes, TAIL_SPLIT * tail, TILE_M, TILE_N);                       \
        planes = setTensorLayoutStrideNV(planes, TILE_M * TILE_N, TILE_N, 1);                                 \
        coopMatStoreTensorNV(SUM, c, 0, sliceTensorLayoutNV(planes, split * tail + tile_index - first_tail, 1, \
                                                            row0 - tile.x * TILE_M, OWN_M,                    \
                                                            COL - tile.y * TILE_N, PART_N));                  \
    }
#if SPLIT_SUM == LAST
    if (TAIL_SPLIT > 1) {
        if (in_tail) {
            STORE_TAIL(sum0, col0)
#if N_PARTS == 2
            STORE_TAIL(sum1, col0 + PART_N)
#endif
            sum_planes_when_last(tile_index - first_tail, (tile_index - first_tail) * TILE_M * TILE_N,
                                 tail * TILE_M * TILE_N, TILE_N, tile.x * TILE_M, tile.y * TILE_N);
        } else {
            STORE_C(sum0, col0, sum_c)
#if N_PARTS == 2
            STORE_C(sum1, col0 + PART_N, sum_c)
#endif
        }
        return;
    }
#endif
    STORE_C(sum0, col0, c)
#if N_PARTS == 2
    STORE_C(sum1, col0 + PART_N, c)
#endif
#if SPLIT_SUM == LAST
    if (SPLIT_K > 1) {
        sum_slices_when_last(tile.x * TILE_M, tile.y * TILE_N);
    }
#endif
}
