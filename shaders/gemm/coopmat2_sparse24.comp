#version 450
// @variants ELEMENT=F16|BF16
// @variants META_WORDS=0|1|4
// @variants SPLIT_SUM=NONE|LAST
// The Vulkan 2:4 path: C[M][N] (fp32) = decompress(A) * B, where A arrives in vkcoop's shared 2:4 format
// (vkcoop/sparse/two_four.py): values [M][K/2] (the two kept entries of every 4 along K, ascending) and metadata
// [M][K/32] uint32 (nibble j of word c covers columns 32c+4j..32c+4j+3 and equals idx0 | idx1 << 2).
// Vulkan has no sparse tensor cores, so A is expanded while it is loaded: coopMatLoadTensorNV with a decode
// function (GLSL_NV_cooperative_matrix2, "decodeFunc") on a layout whose block is 1 x 32 along K. One block
// is the 16 kept values of 32 columns, 32 bytes, so block (r, c) sits at byte 32 * (r * K/32 + c) of the
// values buffer, exactly where the format puts it; the decode function reads the matching metadata word.
// A's memory traffic is K/2 values + K/32 words per row instead of K values. The math is dense.
// K must be a multiple of 32 (the host checks); M and N are free (Constant clamp on edge tiles).
// META_WORDS > 0 selects the interleaved layout (vkcoop.gemm.interleave_2to4, made once on the host): per row,
// blocks of 32*META_WORDS columns, each META_WORDS metadata words followed by their 8*META_WORDS value pairs
// (36*META_WORDS bytes), so one buffer_reference block feeds both reads of the decode function and the
// metadata sits next to its values (same cache lines) instead of in a second binding. Same 0.5625x traffic.
// The seeds use 1 (compute-bound) and 4 (narrow).
//   defines:        ELEMENT = F16 | BF16 (A and B), accumulation and result fp32
//                   META_WORDS = 0 (values and metadata in separate bindings) | 1 | 4 (interleaved)
//                   SPLIT_SUM = NONE | LAST (split_sum.glsl; LAST adds two bindings after C: C, arrival counts)
//   spec constants: 0 WORKGROUP_SIZE, 1 TILE_M, 2 TILE_N, 3 TILE_K (a multiple of 32), 4 B_COLUMN_MAJOR,
//                   5 K_UNROLL, 6 GROUP_M, 7 SPLIT_K (> 1: partial sums [SPLIT_K][M][N], see coopmat2_gemm.comp),
//                   9 ALIGNED (whole tiles, K a multiple of TILE_K, B rows of 16 bytes: no clamped code, as in
//                   coopmat2_gemm.comp)
//   push constants: M, N, K, row stride of B and of C (elements)
//   bindings:       META_WORDS 0: 0 values, 1 metadata, 2 B (K x N, or N x K if B_COLUMN_MAJOR), 3 C (M x N fp32)
//                   META_WORDS > 0: 0 interleaved blocks [M][ceil(K / (32*META_WORDS))], 1 B, 2 C
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_buffer_reference : enable

#ifndef ELEMENT
#define ELEMENT F16
#endif
#ifndef META_WORDS
#define META_WORDS 0
#endif
#define F16 1
#define BF16 2
#if ELEMENT == F16
#define A_TYPE float16_t
#elif ELEMENT == BF16
#extension GL_EXT_bfloat16 : require
#define A_TYPE bfloat16_t
#else
#error "ELEMENT must be F16 or BF16"
#endif

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint TILE_M = 128;
layout(constant_id = 2) const uint TILE_N = 128;
layout(constant_id = 3) const uint TILE_K = 32;
layout(constant_id = 4) const bool B_COLUMN_MAJOR = false;
layout(constant_id = 5) const uint K_UNROLL = 2;
layout(constant_id = 6) const uint GROUP_M = 8;
layout(constant_id = 7) const uint SPLIT_K = 1;
layout(constant_id = 9) const bool ALIGNED = false;
layout(local_size_x_id = 0) in;

#if META_WORDS == 0
const uint SPARSE_BLOCK_K = 32;  // columns per metadata word = the layout's block size along K

layout(set = 0, binding = 0) readonly buffer Values { uvec4 values[]; };
layout(set = 0, binding = 1) readonly buffer Metadata { uint metadata[]; };
layout(set = 0, binding = 2) readonly buffer MatrixB { A_TYPE b[]; };
#define SUM_PARTIALS 3
#else
const uint SPARSE_BLOCK_K = 32 * META_WORDS;  // columns per interleaved block

layout(set = 0, binding = 0) readonly buffer Values { uvec4 values[]; };
layout(set = 0, binding = 1) readonly buffer MatrixB { A_TYPE b[]; };
#define SUM_PARTIALS 2
#endif

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_b, stride_c;
} shape;

#define C_TYPE float
#define C_VEC4 vec4
#define C_QUALIFIERS
#include "split_sum.glsl"
#include "raster.glsl"

// Blocks of a row along K (the layouts' stride in blocks).
uint blocks_per_row() {
    return (shape.K + SPARSE_BLOCK_K - 1) / SPARSE_BLOCK_K;
}

#if META_WORDS == 0
// The 16 kept values of one 32-column block: word w holds the pair of 4-chunk w (low half first).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer SparseBlock { uint pairs[8]; };
#elif META_WORDS == 4
// Interleaved: 4 metadata words, then the 32 value pairs of 128 columns (144 bytes).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer SparseBlock { uint meta[4]; uint pairs[32]; };
#elif META_WORDS == 1
layout(buffer_reference, std430, buffer_reference_align = 4) buffer SparseBlock { uint meta[1]; uint pairs[8]; };
#else
#error "META_WORDS must be 0, 1 or 4"
#endif

A_TYPE decode_2to4(const in SparseBlock block, const in uint block_coord[2], const in uint coord_in_block[2]) {
    const uint chunk = coord_in_block[1] >> 2;   // 4-column chunk inside the block
    const uint position = coord_in_block[1] & 3u;
#if META_WORDS == 0
    const uint word = metadata[block_coord[0] * (shape.K / 32) + block_coord[1]];
#else
    const uint word = block.meta[chunk >> 3];
#endif
    const uint nibble = (word >> (4u * (chunk & 7u))) & 0xFu;
    const uint pair = block.pairs[chunk];
    uint bits = 0u;  // +0.0: a pruned position
    if (position == (nibble & 3u)) {
        bits = pair & 0xFFFFu;
    } else if (position == (nibble >> 2)) {
        bits = pair >> 16;
    }
#if ELEMENT == F16
    return uint16BitsToHalf(uint16_t(bits));
#else
    return uintBitsToBFloat16EXT(uint16_t(bits));
#endif
}

#define MAT_A coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define MAT_B coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>
#define CLAMPED gl_CooperativeMatrixClampModeConstantNV

// One K step at k: A through the decode function, B plain or through the transposing view.
#define SPARSE_STEP(LAYOUT_A, LAYOUT_B)                                                                       \
    {                                                                                                         \
        MAT_A tile_a;                                                                                         \
        MAT_B tile_b;                                                                                         \
        coopMatLoadTensorNV(tile_a, values, 0, sliceTensorLayoutNV(LAYOUT_A, row0, TILE_M, k, TILE_K),        \
                            decode_2to4);                                                                     \
        if (B_COLUMN_MAJOR) {                                                                                 \
            coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(LAYOUT_B, col0, TILE_N, k, TILE_K), transposed); \
        } else {                                                                                              \
            coopMatLoadTensorNV(tile_b, b, 0, sliceTensorLayoutNV(LAYOUT_B, k, TILE_K, col0, TILE_N));        \
        }                                                                                                     \
        sum = coopMatMulAdd(tile_a, tile_b, sum);                                                             \
    }

void main() {
    const uint tiles_m = (shape.M + TILE_M - 1) / TILE_M;
    const uint tiles_n = (shape.N + TILE_N - 1) / TILE_N;
    const uvec2 tile = grouped_tile(gl_WorkGroupID.x, tiles_m, tiles_n, GROUP_M);
    if (tile.x >= tiles_m) {
        return;
    }
    const uint row0 = tile.x * TILE_M;
    const uint col0 = tile.y * TILE_N;
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
    MAT_C sum = MAT_C(0.0);
    // K slice in whole TILE_K steps; k = step * TILE_K keeps k provably aligned (see coopmat2_gemm.comp).
    const uint split = gl_WorkGroupID.y;
    const uint steps_total = (shape.K + TILE_K - 1) / TILE_K;
    const uint steps_per_split = (steps_total + SPLIT_K - 1) / SPLIT_K;
    const uint step_begin = min(steps_total, split * steps_per_split);
    const uint step_end = min(steps_total, step_begin + steps_per_split);
    const uint k_end = min(shape.K, step_end * TILE_K);
    const uint full_steps_end = min(step_end, shape.K / TILE_K);
    uint step = step_begin;

    if (ALIGNED || (row0 + TILE_M <= shape.M && col0 + TILE_N <= shape.N && shape.stride_b % 8 == 0)) {
        const uint stride_b = shape.stride_b & ~7u;
        tensorLayoutNV<2> layout_a = createTensorLayoutNV(2);
        layout_a = setTensorLayoutBlockSizeNV(layout_a, 1, SPARSE_BLOCK_K);
        layout_a = setTensorLayoutDimensionNV(layout_a, shape.M, shape.K);
        layout_a = setTensorLayoutStrideNV(layout_a, blocks_per_row(), 1);
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
                SPARSE_STEP(layout_a, layout_b)
            }
        }
        for (; step < full_steps_end; ++step) {
            const uint k = step * TILE_K;
            SPARSE_STEP(layout_a, layout_b)
        }
    }

    // Edge tiles, and what the unrolled loop left: clamp everything to 0 outside the matrices.
    // An ALIGNED pipeline has neither.
    if (!ALIGNED) {
        tensorLayoutNV<2, CLAMPED> clamped_a = createTensorLayoutNV(2, CLAMPED);
        clamped_a = setTensorLayoutBlockSizeNV(clamped_a, 1, SPARSE_BLOCK_K);
        clamped_a = setTensorLayoutDimensionNV(clamped_a, shape.M, k_end);  // K clamps at the slice end
        clamped_a = setTensorLayoutStrideNV(clamped_a, blocks_per_row(), 1);  // in blocks, of the full K
        tensorLayoutNV<2, CLAMPED> clamped_b = createTensorLayoutNV(2, CLAMPED);
        if (B_COLUMN_MAJOR) {
            clamped_b = setTensorLayoutDimensionNV(clamped_b, shape.N, k_end);
        } else {
            clamped_b = setTensorLayoutDimensionNV(clamped_b, k_end, shape.N);
        }
        clamped_b = setTensorLayoutStrideNV(clamped_b, shape.stride_b, 1);
        for (; step < step_end; ++step) {
            const uint k = step * TILE_K;
            SPARSE_STEP(clamped_a, clamped_b)
        }
    }

    if (SPLIT_K == 1 && ALIGNED) {
        tensorLayoutNV<2> exact_c = createTensorLayoutNV(2);
        exact_c = setTensorLayoutDimensionNV(exact_c, shape.M, shape.N);
        exact_c = setTensorLayoutStrideNV(exact_c, shape.stride_c & ~3u, 1);   // fp32 C: 16-byte rows (gemm_types.glsl)
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(exact_c, row0, TILE_M, col0, TILE_N));
    } else if (SPLIT_K == 1) {
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
#if SPLIT_SUM == LAST
        sum_slices_when_last(row0, col0);
#endif
    }
}
