// The staged coopmat2 GEMM around its A operand (coopmat2_staged_gemm.comp: dense A; coopmat2_staged_sparse24.comp:
// 2:4 A expanded on the way): B is copied to shared memory in 16-byte vectors, double-buffered with A, and the
// workgroup-scope matrices are loaded from there. The including shader declares binding 0.. for A, then
//   A_BINDINGS (how many bindings A takes), A_PER_INVOCATION, a register array for one A tile, and
//   void fetch_a(uint row0, uint k);   // global -> registers, zeros past the edges
//   void stash_a(uint base);           // registers -> shared_a[base ...], rows of A_ROW vectors
// Why this shape: GPU_HOST.md saw the direct kernel's tensor loads become 16-bit global loads (LDG.E.U16).
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
layout(local_size_x_id = 0) in;

// restrict: A, B and C never alias, so the driver may use its non-coherent load path for A and B.
layout(set = 0, binding = A_BINDINGS) restrict readonly buffer MatrixB { uvec4 b[]; };
layout(set = 0, binding = A_BINDINGS + 1) restrict writeonly buffer MatrixC { C_TYPE c[]; };

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

void fetch_b(uint col0, uint k) {
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint kk = k + v / B_VECS_PER_ROW;
        uint col = col0 + (v % B_VECS_PER_ROW) * E;
        fetched_b[i] = (kk < shape.K && col < shape.N) ? b[(kk * shape.stride_b + col) / E] : uvec4(0);
    }
}

void stash_b(uint base) {
    [[unroll]] for (uint i = 0; i < B_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_b[base + (v / B_VECS_PER_ROW) * B_ROW + v % B_VECS_PER_ROW] = fetched_b[i];
    }
}

void fetch_a(uint row0, uint k);
void stash_a(uint base);

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
    fetch_a(row0, 0);
    fetch_b(col0, 0);
    stash_a(0);
    stash_b(0);
    barrier();
    for (uint step = 0; step < steps; ++step) {
        const uint stage = step & 1;
        const bool more = step + 1 < steps;
        if (more) {   // in flight while this stage multiplies
            fetch_a(row0, (step + 1) * TILE_K);
            fetch_b(col0, (step + 1) * TILE_K);
        }
        MAT_A tile_a;
        MAT_B tile_b;
        coopMatLoad(tile_a, shared_a, stage * A_STAGE, A_ROW, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(tile_b, shared_b, stage * B_STAGE, B_ROW, gl_CooperativeMatrixLayoutRowMajor);
        sum = coopMatMulAdd(tile_a, tile_b, sum);
        if (more) {
            // The other stage was last read in the previous step, which ended with a barrier.
            stash_a((stage ^ 1) * A_STAGE);
            stash_b((stage ^ 1) * B_STAGE);
        }
        barrier();
    }

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> layout_c =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    layout_c = setTensorLayoutDimensionNV(layout_c, shape.M, shape.N);
    layout_c = setTensorLayoutStrideNV(layout_c, shape.stride_c, 1);
    coopMatStoreTensorNV(sum, c, 0, sliceTensorLayoutNV(layout_c, row0, TILE_M, col0, TILE_N));
}
