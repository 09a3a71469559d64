// A in the tile-major 2:4 layout (vkcoop/gemm/tile_major.py), fetched into registers and expanded into shared memory:
// fetch_a and stash_a of the staged 2:4 GEMM (coopmat2_staged_sparse24.comp, A_FORMAT TILES_PATTERNS or
// TILES_NIBBLES), and of the expansion test shader that runs the same code on any Vulkan device. Each K step of a
// tile is one block: invocation t reads the block's value vectors t, t + W, ... (W = WORKGROUP_SIZE) and one metadata
// word per two of them, word j at j * W + t, so every address is the block's base plus a constant.
// The including shader defines A_FORMAT and declares first: the spec constants WORKGROUP_SIZE, TILE_M, TILE_K and
// PREFETCH, the push constant shape.K, the bindings `tiles` (uvec4) and `tile_words` (uint) over the same buffer,
// `shared uvec4 shared_a[]` and A_ROW (16-byte vectors per shared row of A). The host makes M and K whole tiles and
// gives each invocation an even number of vectors (TileMajorLayout).
#include "sparse24_expand.glsl"

const uint A_GROUPS_PER_ROW = TILE_K / 16;                          // value vectors per tile row
// A row's groups come in runs of A_RUN (4, else all of them) in consecutive vectors, so the 8 invocations of a
// 16-byte-store phase write 2 rows of 4 groups, 8 different bank quads of the skewed tile (8 groups of one row hit 4).
const uint A_RUN = (A_GROUPS_PER_ROW % 4 == 0) ? 4 : A_GROUPS_PER_ROW;
const uint A_RUN_VECTORS = TILE_M * A_RUN;
const uint A_BLOCK_VECTORS = TILE_M * A_GROUPS_PER_ROW;
const uint A_BLOCK_WORDS = 4 * A_BLOCK_VECTORS + A_BLOCK_VECTORS / 2;   // values, then metadata
const uint A_PER_INVOCATION = A_BLOCK_VECTORS / WORKGROUP_SIZE;
const uint A_WORDS_PER_INVOCATION = A_PER_INVOCATION / 2;
uvec4 fetched_values[PREFETCH * A_PER_INVOCATION];
uint fetched_words[PREFETCH * A_WORDS_PER_INVOCATION];

// The block of tile row row0 / TILE_M and K step k / TILE_K into register set `slot`.
void fetch_a(uint slot, uint row0, uint k) {
    const uint block = (row0 / TILE_M) * (shape.K / TILE_K) + k / TILE_K;
    const uint first_vector = block * (A_BLOCK_WORDS / 4) + gl_LocalInvocationIndex;
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        fetched_values[slot * A_PER_INVOCATION + i] = tiles[first_vector + i * WORKGROUP_SIZE];
    }
    const uint first_word = block * A_BLOCK_WORDS + 4 * A_BLOCK_VECTORS + gl_LocalInvocationIndex;
    [[unroll]] for (uint j = 0; j < A_WORDS_PER_INVOCATION; ++j) {
        fetched_words[slot * A_WORDS_PER_INVOCATION + j] = tile_words[first_word + j * WORKGROUP_SIZE];
    }
}

// Register set `slot` expanded into shared_a[base ...]: vector p of the block is tile row (p % A_RUN_VECTORS) / A_RUN,
// group (p / A_RUN_VECTORS) * A_RUN + p % A_RUN (columns 16 * group .. + 16), two 16-byte vectors of the shared row.
void stash_a(uint slot, uint base) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        const uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        const uint word = fetched_words[slot * A_WORDS_PER_INVOCATION + i / 2];
        uvec4 first, second;
#if A_FORMAT == TILES_PATTERNS
        expand16_patterns(fetched_values[slot * A_PER_INVOCATION + i], word, 4 * (i % 2), first, second);
#else
        expand16(fetched_values[slot * A_PER_INVOCATION + i], (word >> (16 * (i % 2))) & 0xFFFFu, first, second);
#endif
        const uint group = (v / A_RUN_VECTORS) * A_RUN + v % A_RUN;
        const uint at = base + ((v % A_RUN_VECTORS) / A_RUN) * A_ROW + 2 * group;
        shared_a[at] = first;
        shared_a[at + 1] = second;
    }
}
