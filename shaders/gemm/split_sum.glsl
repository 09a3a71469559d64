// How a coopmat2 GEMM adds up its K slices, by the SPLIT_SUM define:
//   NONE  one K slice (SPLIT_K 1, no tail split): C is stored directly into binding SUM_PARTIALS (`c`);
//   LAST  every slice of a tile stores its partial sums in plane `split` of [SPLIT_K][M][N] (C_TYPE, binding
//         SUM_PARTIALS, `c`), and the last slice of the tile to finish adds the tile's planes up and writes C
//         (binding SUM_PARTIALS + 1) in the same dispatch. It adds in slice order from zero, so the bits do not depend
//         on which slice finishes last. Binding SUM_PARTIALS + 2 counts each tile's arrivals (one uint per workgroup
//         of a slice, gl_WorkGroupID.x). This replaced a second dispatch that added the planes up: 12-21 % faster at
//         M = 4096 on the H100 (docs/gemm.md).
// The sum is in C_TYPE: fp32 and int32 results, and fp16 ones (fp16 accumulation: the slices added in fp16). The
// including shader defines SUM_PARTIALS, C_QUALIFIERS (NONE's C: e.g. restrict), C_VEC4 (four of C_TYPE), and
// declares the spec constants WORKGROUP_SIZE, TILE_M, TILE_N, SPLIT_K, ALIGNED and the push constants shape.M,
// shape.N, shape.stride_c first.
#define NONE 1
#define LAST 2
#ifndef SPLIT_SUM
#define SPLIT_SUM NONE
#endif
#if SPLIT_SUM == NONE
layout(set = 0, binding = SUM_PARTIALS) C_QUALIFIERS writeonly buffer MatrixC { C_TYPE c[]; };
#elif SPLIT_SUM == LAST
// Device-coherent: the last slice reads the planes the others stored. No C_QUALIFIERS: the planes and C have two
// views each (scalars and quads), which restrict would promise away.
layout(set = 0, binding = SUM_PARTIALS) devicecoherent buffer MatrixC { C_TYPE c[]; };
layout(set = 0, binding = SUM_PARTIALS + 1) writeonly buffer SplitSum { C_TYPE sum_c[]; };
layout(set = 0, binding = SUM_PARTIALS + 2) devicecoherent buffer SplitArrivals { uint arrivals[]; };
#include "vkcoop/arrivals.glsl"

// The same buffers four columns at a time, for whole tiles (ALIGNED: rows are whole quads).
layout(set = 0, binding = SUM_PARTIALS) devicecoherent buffer MatrixCQuads { C_VEC4 c4[]; };
layout(set = 0, binding = SUM_PARTIALS + 1) writeonly buffer SplitSumQuads { C_VEC4 sum_c4[]; };
// Elements (or quads) of the tile each invocation adds per round: all their loads, SUM_ROUND x SUM_SLICES, are in flight
// at once (one round for a 64x64 tile of 128 invocations).
const uint SUM_ROUND = 8;

#ifndef SUM_SLICES
#define SUM_SLICES SPLIT_K   // slices per summed tile: the including shader may widen it (a tail split)
#endif

// After this slice stored its plane: the last of the SUM_SLICES slices counted at arrivals[slot] adds the planes up
// into C[row0.., col0..], in slice order. Element (r, q) of the tile in slice s's plane is at
// first + s * plane + r * row_stride + q. Called in uniform control flow.
void sum_planes_when_last(const uint slot, const uint first, const uint plane, const uint row_stride,
                          const uint row0, const uint col0) {
    if (!arrive_last(slot, SUM_SLICES)) {
        return;
    }
    if (ALIGNED) {
        const uint QUADS_PER_ROW = TILE_N / 4, quads = TILE_M * QUADS_PER_ROW;
        for (uint batch = 0; batch * WORKGROUP_SIZE < quads; batch += SUM_ROUND) {
            [[unroll]] for (uint j = 0; j < SUM_ROUND; ++j) {
                const uint quad = (batch + j) * WORKGROUP_SIZE + gl_LocalInvocationIndex;
                if (quad < quads) {
                    const uint row = quad / QUADS_PER_ROW, column = (quad % QUADS_PER_ROW) * 4;
                    const uint from = (first + row * row_stride + column) / 4;
                    C_VEC4 total = C_VEC4(0);
                    [[unroll]] for (uint s = 0; s < SUM_SLICES; ++s) {
                        total += c4[s * (plane / 4) + from];
                    }
                    sum_c4[((row0 + row) * shape.stride_c + col0 + column) / 4] = total;
                }
            }
        }
        return;
    }
    const uint per_invocation = (TILE_M * TILE_N + WORKGROUP_SIZE - 1) / WORKGROUP_SIZE;
    for (uint batch = 0; batch < per_invocation; batch += SUM_ROUND) {
        [[unroll]] for (uint j = 0; j < SUM_ROUND; ++j) {
            const uint element = (batch + j) * WORKGROUP_SIZE + gl_LocalInvocationIndex;   // adjacent columns
            const uint row = element / TILE_N, column = element % TILE_N;
            if (element < TILE_M * TILE_N && row0 + row < shape.M && col0 + column < shape.N) {
                C_TYPE total = C_TYPE(0);
                [[unroll]] for (uint s = 0; s < SUM_SLICES; ++s) {
                    total += c[s * plane + first + row * row_stride + column];
                }
                sum_c[(row0 + row) * shape.stride_c + col0 + column] = total;
            }
        }
    }
}

// The split-K planes [SPLIT_K][M][N]: the tile at (row0, col0) of workgroup column gl_WorkGroupID.x.
void sum_slices_when_last(const uint row0, const uint col0) {
    sum_planes_when_last(gl_WorkGroupID.x, row0 * shape.stride_c + col0, shape.M * shape.stride_c, shape.stride_c,
                         row0, col0);
}
#else
#error "SPLIT_SUM must be NONE or LAST"
#endif
