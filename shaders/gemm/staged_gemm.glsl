// The staged coopmat2 GEMM around its A operand (coopmat2_staged_gemm.comp: dense A; coopmat2_staged_sparse24.comp:
// 2:4 A expanded on the way): B is copied to shared memory in 16-byte vectors, double-buffered with A, and the
// workgroup-scope matrices are loaded from there. The including shader declares binding 0.. for A, then
//   A_BINDINGS (how many bindings A takes), A_PER_INVOCATION, register arrays for PREFETCH A tiles, and
//   void fetch_a(uint slot, uint row0, uint k);   // global -> register set `slot`, zeros past the edges
//   void stash_a(uint slot, uint base);           // register set `slot` -> shared_a[base ...], rows of A_ROW vectors
// Why this shape: the driver lowers the direct kernel's clamped tensor loads to 16-bit global loads (LDG.E.U16);
// here every global load is 128 bits (docs/gemm.md).
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint TILE_M = 128;
layout(constant_id = 2) const uint TILE_N = 128;
layout(constant_id = 3) const uint TILE_K = 32;
layout(constant_id = 6) const uint GROUP_M = 8;
layout(constant_id = 7) const uint SPLIT_K = 1;     // > 1: K slices write partial sums (split_sum.glsl)
layout(constant_id = 9) const bool ALIGNED = false; // the host's promise: M, N whole tiles, K whole TILE_K steps
layout(constant_id = 10) const uint PREFETCH = 1;   // K steps whose loads are in flight (register sets) while one multiplies
layout(local_size_x_id = 0) in;

// restrict: A, B and C never alias, so the driver may use its non-coherent load path for A and B.
layout(set = 0, binding = A_BINDINGS) restrict readonly buffer MatrixB { uvec4 b[]; };
#define SUM_PARTIALS (A_BINDINGS + 1)
#define C_QUALIFIERS restrict
#include "split_sum.glsl"
#include "raster.glsl"

const uint E = ELEMENTS_PER_16B;
// One 16-byte skew per shared row keeps consecutive rows of a matrix load on different banks.
const uint A_ROW = TILE_K / E + 1;          // 16-byte vectors per shared row of A
const uint B_ROW = TILE_N / E + 1;
const uint A_STAGE = TILE_M * A_ROW;
const uint B_STAGE = TILE_K * B_ROW;
shared uvec4 shared_a[2 * A_STAGE];         // two stages: the next tile is stored while this one multiplies
shared uvec4 shared_b[2 * B_STAGE];

const uint B_VECS_PER_ROW = TILE_N / E;
const uint B_PER_INVOCATION = TILE_K * B_VECS_PER_ROW / WORKGROUP_SIZE;   // the host makes this divide evenly
uvec4 fetched_b[PREFETCH * B_PER_INVOCATION];   // PREFETCH register sets

#define MAT_A coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_K, gl_MatrixUseA>
#define MAT_B coopmat<A_TYPE, gl_ScopeWorkgroup, TILE_K, TILE_N, gl_MatrixUseB>
#define MAT_C coopmat<C_TYPE, gl_ScopeWorkgroup, TILE_M, TILE_N, gl_MatrixUseAccumulator>

void fetch_b(uint slot, uint col0, uint k) {
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint kk = k + v / B_VECS_PER_ROW;
        uint col = col0 + (v % B_VECS_PER_ROW) * E;
        const bool inside = ALIGNED || (kk < shape.K && col < shape.N);
        fetched_b[slot * B_PER_INVOCATION + i] = inside ? b[(kk * shape.stride_b + col) / E] : uvec4(0);
    }
}

void stash_b(uint slot, uint base) {
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_b[base + (v / B_VECS_PER_ROW) * B_ROW + v % B_VECS_PER_ROW] = fetched_b[slot * B_PER_INVOCATION + i];
    }
}

// One K step from shared memory stage `stage`.
MAT_C multiply_stage(uint stage, MAT_C sum) {
    MAT_A tile_a;
    MAT_B tile_b;
    coopMatLoad(tile_a, shared_a, stage * A_STAGE, A_ROW, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(tile_b, shared_b, stage * B_STAGE, B_ROW, gl_CooperativeMatrixLayoutRowMajor);
    return coopMatMulAdd(tile_a, tile_b, sum);
}

void fetch_a(uint slot, uint row0, uint k);
void stash_a(uint slot, uint base);

void main() {
    const uint tiles_m = (shape.M + TILE_M - 1) / TILE_M;
    const uint tiles_n = (shape.N + TILE_N - 1) / TILE_N;
    const uvec2 tile = grouped_tile(gl_WorkGroupID.x, tiles_m, tiles_n, GROUP_M);
    if (tile.x >= tiles_m) {
        return;
    }
    const uint row0 = tile.x * TILE_M;
    const uint col0 = tile.y * TILE_N;
    // This workgroup's K slice in whole TILE_K steps (all of K unless SPLIT_K > 1); a slice may be empty.
    const uint split = gl_WorkGroupID.y;
    const uint steps_total = (shape.K + TILE_K - 1) / TILE_K;
    const uint steps_per_split = (steps_total + SPLIT_K - 1) / SPLIT_K;
    const uint step_begin = min(steps_total, split * steps_per_split);
    const uint step_end = min(steps_total, step_begin + steps_per_split);

    // Register set (step - step_begin) % PREFETCH holds a step's tiles from its fetch to its stash. Step s first
    // refills its own set (stashed in the step before) with step s + PREFETCH, so while s multiplies from shared
    // memory, steps s+1 .. s+PREFETCH are in flight. The K loop is unrolled PREFETCH times so every set index is a
    // constant; at PREFETCH 1 this is the plain register-prefetch loop.
    MAT_C sum = MAT_C(0);
    if (step_begin < step_end) {
        fetch_a(0, row0, step_begin * TILE_K);
        fetch_b(0, col0, step_begin * TILE_K);
        stash_a(0, 0);
        stash_b(0, 0);
    }
    [[unroll]] for (uint ahead = 1; ahead < PREFETCH; ++ahead) {
        if (step_begin + ahead < step_end) {
            fetch_a(ahead, row0, (step_begin + ahead) * TILE_K);
            fetch_b(ahead, col0, (step_begin + ahead) * TILE_K);
        }
    }
    barrier();
    for (uint first = step_begin; first < step_end; first += PREFETCH) {
        [[unroll]] for (uint j = 0; j < PREFETCH; ++j) {
            const uint step = first + j;
            if (step >= step_end) {
                break;
            }
            if (step + PREFETCH < step_end) {   // in flight while this stage multiplies
                fetch_a(j, row0, (step + PREFETCH) * TILE_K);
                fetch_b(j, col0, (step + PREFETCH) * TILE_K);
            }
            const uint stage = (step - step_begin) & 1;
            sum = multiply_stage(stage, sum);
            if (step + 1 < step_end) {   // the other stage was last read in the previous step, before its barrier
                stash_a((j + 1) % PREFETCH, (stage ^ 1) * A_STAGE);
                stash_b((j + 1) % PREFETCH, (stage ^ 1) * B_STAGE);
            }
            barrier();
        }
    }

    if (SPLIT_K > 1) {   // plane `split` of [SPLIT_K][M][N] (span 1 in the outer dimension); C_TYPE is float
        tensorLayoutNV<3, gl_CooperativeMatrixClampModeConstantNV> partial =
            createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV);
        partial = setTensorLayoutDimensionNV(partial, SPLIT_K, shape.M, shape.N);
        partial = setTensorLayoutStrideNV(partial, shape.M * shape.stride_c, shape.stride_c, 1);
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(partial, split, 1, row0, TILE_M, col0, TILE_N));
#if SPLIT_SUM == LAST
        sum_slices_when_last(row0, col0);
#endif
    } else if (ALIGNED) {
        tensorLayoutNV<2> exact_c = createTensorLayoutNV(2);
        exact_c = setTensorLayoutDimensionNV(exact_c, shape.M, shape.N);
        exact_c = setTensorLayoutStrideNV(exact_c, shape.stride_c & ~(C_ELEMENTS_PER_16B - 1), 1);
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(exact_c, row0, TILE_M, col0, TILE_N));
    } else {
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> layout_c =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        layout_c = setTensorLayoutDimensionNV(layout_c, shape.M, shape.N);
        layout_c = setTensorLayoutStrideNV(layout_c, shape.stride_c, 1);
        coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(layout_c, row0, TILE_M, col0, TILE_N));
    }
}
