// The KHR shared-memory GEMM (the coopmat1 baseline) around its A operand, which khr_shmem_gemm.comp reads: C = A * B
// with subgroup-scope VK_KHR_cooperative_matrix matrices and explicit shared memory, the classic structure of
// NVIDIA's vk_cooperative_matrix_perf shmem test (written here from the idea, not the code). Each workgroup owns a
// TILE_M x TILE_N block of C and walks K in TILE_K steps: the whole workgroup copies the A and B tiles global ->
// registers -> shared memory (prefetching the next step while the current one is multiplied), then each subgroup multiplies its own (TILE_M/SUBGROUPS_M) x (TILE_N/SUBGROUPS_N) block out of
// LM x LN x LK matrices from the KHR table. B moves 16 bytes at a time: K and N must be multiples of 16/sizeof(A)
// (the host checks); M is free. Tiles that cross the M/N/K edges copy zeros; C blocks that cross an edge go
// through shared scratch. STAGES 1 keeps one shared copy of the tiles (two barriers per K step: all must finish
// reading before it is overwritten). STAGES 2 double-buffers it: step i multiplies from one copy while the other
// is filled for step i + 1, so one barrier per step suffices.
// The including shader declares the push constants ``shape`` (M, N, K, stride_a, stride_b, stride_c), binding
// 0.. for A, A_BINDINGS (how many bindings A takes), and defines fetch_a / stash_a (declared below).
//   spec constants: 0 WORKGROUP_SIZE (= SUBGROUP_SIZE * SUBGROUPS_M * SUBGROUPS_N), 1 LM, 2 LN, 3 LK,
//                   4 TILE_M, 5 TILE_N, 6 TILE_K, 7 SUBGROUPS_M, 8 SUBGROUPS_N, 9 SUBGROUP_SIZE, 10 STAGES (1, 2),
//                   11 ALIGNED (M, N, K whole tiles: no bounds tests, no edge stores), 12 GROUP_M (raster.glsl)
//   bindings:       A_BINDINGS B (K x N row-major), A_BINDINGS + 1 C (M x N row-major)
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable
#include "raster.glsl"

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint TILE_M = 128;
layout(constant_id = 5) const uint TILE_N = 128;
layout(constant_id = 6) const uint TILE_K = 32;
layout(constant_id = 7) const uint SUBGROUPS_M = 2;
layout(constant_id = 8) const uint SUBGROUPS_N = 4;
layout(constant_id = 9) const uint SUBGROUP_SIZE = 32;
layout(constant_id = 10) const uint STAGES = 1;
layout(constant_id = 11) const bool ALIGNED = false;
layout(constant_id = 12) const uint GROUP_M = 1;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = A_BINDINGS) readonly buffer MatrixB { uvec4 b[]; };
layout(set = 0, binding = A_BINDINGS + 1) writeonly buffer MatrixC { C_TYPE c[]; };

const uint E = ELEMENTS_PER_16B;
// One 16-byte skew per shared row keeps the rows of a matrix load on different banks.
const uint A_ROW = TILE_K + E;
const uint B_ROW = TILE_N + E;
const uint A_STAGE = TILE_M * A_ROW / E;   // 16-byte vectors per stage
const uint B_STAGE = TILE_K * B_ROW / E;
shared uvec4 shared_a[STAGES * A_STAGE];
shared uvec4 shared_b[STAGES * B_STAGE];

const uint SUB_M = TILE_M / SUBGROUPS_M;
const uint SUB_N = TILE_N / SUBGROUPS_N;
const uint C_ROWS = SUB_M / LM;
const uint C_COLS = SUB_N / LN;
const uint NUM_SUBGROUPS = SUBGROUPS_M * SUBGROUPS_N;
// Edge blocks of C are stored here first, then copied element by element with bounds checks.
shared C_TYPE edge_scratch[NUM_SUBGROUPS * LM * LN];

// 16-byte vectors of B per tile and per invocation (the host makes these divide evenly).
const uint B_VECS_PER_ROW = TILE_N / E;
const uint B_PER_INVOCATION = TILE_K * B_VECS_PER_ROW / WORKGROUP_SIZE;

#define ACC coopmat<C_TYPE, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
ACC accumulators[C_ROWS][C_COLS];
uvec4 staged_b[B_PER_INVOCATION];

void fetch_a(uint row0, uint k);    // the including shader's A: global -> registers, zeros past the edges
void stash_a(uint base);            // registers -> shared_a[base ...], rows of A_ROW / E vectors

void fetch(uint row0, uint col0, uint k) {
    fetch_a(row0, k);
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint kk = k + v / B_VECS_PER_ROW;
        uint col = col0 + (v % B_VECS_PER_ROW) * E;
        staged_b[i] = (ALIGNED || (kk < shape.K && col < shape.N)) ? b[(kk * shape.stride_b + col) / E] : uvec4(0);
    }
}

void stash(uint stage) {
    stash_a(stage * A_STAGE);
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_b[stage * B_STAGE + (v / B_VECS_PER_ROW) * (B_ROW / E) + v % B_VECS_PER_ROW] = staged_b[i];
    }
}

// One K step's multiplies from the shared copy ``stage``: subgroup (subgroup_m, subgroup_n) owns
// C_ROWS x C_COLS matrices; each A matrix is loaded once and reused C_COLS times.
void multiply(uint stage, uint subgroup_m, uint subgroup_n) {
    [[unroll]] for (uint kk = 0; kk < TILE_K; kk += LK) {
        coopmat<A_TYPE, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA> tile_a[C_ROWS];
        [[unroll]] for (uint i = 0; i < C_ROWS; ++i) {
            uint row = subgroup_m * SUB_M + i * LM;
            coopMatLoad(tile_a[i], shared_a, stage * A_STAGE + (row * A_ROW + kk) / E, A_ROW / E,
                        gl_CooperativeMatrixLayoutRowMajor);
        }
        [[unroll]] for (uint j = 0; j < C_COLS; ++j) {
            coopmat<A_TYPE, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB> tile_b;
            uint col = subgroup_n * SUB_N + j * LN;
            coopMatLoad(tile_b, shared_b, stage * B_STAGE + (kk * B_ROW + col) / E, B_ROW / E,
                        gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint i = 0; i < C_ROWS; ++i) {
                accumulators[i][j] = coopMatMulAdd(tile_a[i], tile_b, accumulators[i][j]);
            }
        }
    }
}

void main() {
    const uvec2 tile = grouped_tile(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x,
                                    gl_NumWorkGroups.y, gl_NumWorkGroups.x, GROUP_M);
    const uint row0 = tile.x * TILE_M;
    const uint col0 = tile.y * TILE_N;
    const uint subgroup_m = gl_SubgroupID / SUBGROUPS_N;
    const uint subgroup_n = gl_SubgroupID % SUBGROUPS_N;

    [[unroll]] for (uint i = 0; i < C_ROWS; ++i) {
        [[unroll]] for (uint j = 0; j < C_COLS; ++j) {
            accumulators[i][j] = ACC(0);
        }
    }

    fetch(row0, col0, 0);
    if (STAGES == 1) {
        for (uint k = 0; k < shape.K; k += TILE_K) {
            barrier();  // everyone is done reading the previous step's tiles
            stash(0);
            barrier();
            if (k + TILE_K < shape.K) {
                fetch(row0, col0, k + TILE_K);  // in flight while this step multiplies
            }
            multiply(0, subgroup_m, subgroup_n);
        }
    } else {
        stash(0);
        barrier();
        uint stage = 0;
        for (uint k = 0; k < shape.K; k += TILE_K) {
            bool more = k + TILE_K < shape.K;
            if (more) {
                fetch(row0, col0, k + TILE_K);  // in flight while this step multiplies
            }
            multiply(stage, subgroup_m, subgroup_n);
            if (more) {
                stash(stage ^ 1);  // the other copy: its readers passed the previous step's barrier
            }
            barrier();
            stage ^= 1;
        }
    }

    const uint scratch0 = gl_SubgroupID * LM * LN;
    [[unroll]] for (uint i = 0; i < C_ROWS; ++i) {
        [[unroll]] for (uint j = 0; j < C_COLS; ++j) {
            uint row = row0 + subgroup_m * SUB_M + i * LM;
            uint col = col0 + subgroup_n * SUB_N + j * LN;
            const bool whole = ALIGNED || (row + LM <= shape.M && col + LN <= shape.N);
            const bool edge = !whole && row < shape.M && col < shape.N;
            if (whole) {
                coopMatStore(accumulators[i][j], c, row * shape.stride_c + col, shape.stride_c,
                             gl_CooperativeMatrixLayoutRowMajor);
            } else if (edge) {
                coopMatStore(accumulators[i][j], edge_scratch, scratch0, LN, gl_CooperativeMatrixLayoutRowMajor);
            }
            if (!ALIGNED) {
                // Workgroup barriers, reached by every invocation (i and j are the same for all): the subgroup's
                // matrix store is visible before its lanes read the scratch back, and read before the next store.
                // With subgroup barriers here GPU-assisted validation reported a shared-memory race and a ragged
                // s8 case came out wrong.
                barrier();
                if (edge) {
                    for (uint e = gl_SubgroupInvocationID; e < LM * LN; e += SUBGROUP_SIZE) {
                        uint r = row + e / LN;
                        uint q = col + e % LN;
                        if (r < shape.M && q < shape.N) {
                            c[r * shape.stride_c + q] = edge_scratch[scratch0 + e];
                        }
                    }
                }
                barrier();
            }
        }
    }
}
