// The kernel of flash_attention.comp, which declares its variants; a file of its own so that a build with trace
// points (lab/shaders/flash_attention_trace.comp) compiles the same kernel: #version must come first, and only once.
//
// Flash attention forward: O = softmax(Q Kᵀ · scale + mask) V, one workgroup per BR query rows of one head,
// walking the keys BC at a time with online softmax (running row max m and row sum l, O rescaled as m grows).
// Every coopmat2 feature has one job here (docs/attention.md):
//   workgroup scope    Q, K, V, S, P and O are workgroup-scope matrices: the driver stages them, not us;
//   tensor layouts     Q/K/V/O through 2-D layouts (Constant clamp, value 0, where a tile crosses seq_q or
//                      seq_kv: padded Q rows and K/V rows read as 0), K through a transposing view, the
//                      log-sum-exp through a 3-D layout whose last dimension is 1 (only column 0 survives);
//   per-element ops    the padded-key and causal mask (they need the element's row and column), exp2;
//   reductions         row max and row sum of S and P, and the "smear" of a per-row value onto O's shape;
//   conversions        P (fp32 accumulator) to an A matrix of the input type for P·V; O to the input type.
// Scores are kept in log2 units (scale · log2 e folded into one multiply) so exp becomes exp2.
//   defines:        ELEMENT = F16 | BF16 (input and output type; accumulation is fp32)
//                   SCOPE = WORKGROUP (Q, S, P and O are workgroup-scope matrices of BR rows: the driver splits
//                   them among the subgroups) | SUBGROUP (FlashAttention-2's split: each subgroup owns BR / subgroups
//                   consecutive rows as subgroup-scope flexible-dimension matrices, and Q is copied once to shared
//                   memory and loaded from there for every block, so that it holds no registers across the key
//                   loop; the host requires subgroup size 32. With 32 rows per subgroup and KV_STAGED this is the
//                   head_dim 64 prefill choice, the H100's seed 128:128x64rk: two 16-row MMA tiles per warp share
//                   each K and V fragment; docs/attention.md, experiments table)
//                   SPLIT_MERGE = PASS (key slices are merged by attention_combine.comp, a second dispatch) |
//                   WAIT (MERGE_LAYERS workgroups per (x, y) tile, after the slices in the grid, wait for the slices
//                   and merge them: one dispatch, the merge spread wide; merge_waiting.glsl; KV_SPLITS > 1 only)
//   spec constants: 0 WORKGROUP_SIZE, 1 BR (query rows), 2 BC (keys per step), 3 HEAD_DIM (64 or 128),
//                   4 CAUSAL (key j is visible to query i iff j <= i: torch's is_causal, top-left aligned),
//                   5 KV_SPLITS (> 1: the keys are cut into that many slices, gl_WorkGroupID.z = batch *
//                   KV_SPLITS + slice, slice s holding key blocks s, s + KV_SPLITS, ...; each slice writes its
//                   normalised fp32 O and its log-sum-exp to the partial buffers, and attention_combine.comp
//                   merges them: flash decoding)
//                   6 GQA_ROWS (the q heads of one kv head share a tile: rows are (head in group, query)
//                   pairs, group * seq_q of them, contiguous in Q and O; gl_WorkGroupID.y is the kv head. One
//                   pass over K and V serves the whole group, and a decode step fills group rows instead of 1)
//                   7 ALIGNED (the tile's rows are a multiple of BR and seq_kv of BC: Q, K, V and O move through
//                   unclamped layouts and, without CAUSAL, no block is masked; the clamped code is not compiled)
//                   8 STATS_COLS (columns of the running row max m and row sum l, whose columns all hold the
//                   row's value: the N granularity keeps them small, and a row reduction smears m onto S's shape)
//                   9 KV_STAGED (the blocks that need no clamp pass K and V through shared memory that this shader
//                   fills, in FlashAttention-2's order: V of block j is fetched while S of block j is computed, K of
//                   block j + 1 while P V of block j is; the invocations share a block's 16-byte vectors evenly,
//                   which the host checks)
//                   10 KEYS_ALIGNED (seq_kv is a multiple of BC, whatever the rows: K and V move through unclamped
//                   layouts and, without CAUSAL, the clamped key loop is not compiled; implied by ALIGNED)
//                   11 MERGE_LAYERS (SPLIT_MERGE=WAIT: mergers per (x, y) tile)
//                   BR, BC, HEAD_DIM and STATS_COLS are multiples of a flexible-dimensions granularity row whose
//                   workgroupInvocations == WORKGROUP_SIZE (vkcoop.attention.tiles).
//   push constants: batch, seq_q, seq_kv, q_heads, kv_heads, group (= q_heads / kv_heads: GQA maps q head h to kv
//                   head h / group), scale_log2 (softmax scale · log2 e); CAUSAL without key slices: order_tail (the
//                   last order_tail (head, batch) pairs form one chunk) and order_chunks (the pairs before them fall
//                   into that many chunks, sizes within one); the query tiles of a chunk's pairs start heaviest first
//                   together
//   bindings:       0 Q [batch][q_heads][seq_q][HEAD_DIM], 1 K and 2 V [batch][kv_heads][seq_kv][HEAD_DIM],
//                   3 O [batch][q_heads][seq_q][HEAD_DIM] (ELEMENT; fp32 [KV_SPLITS][...] when split),
//                   4 LSE [batch][q_heads][seq_q] fp32, natural log of the row sum of exp(scaled scores)
//                   ([KV_SPLITS][...] when split); WAIT: 3 and 4 are the partials ([KV_SPLITS][...]), 5 O, 6 LSE,
//                   7 arrival counters [tiles][MERGE_LAYERS] (zero before the first launch; each launch leaves them
//                   zero)
//   grid:           (ceil(rows / BR), q_heads (GQA_ROWS: kv_heads), batch * KV_SPLITS [+ MERGE_LAYERS]) with
//                   rows = seq_q (GQA_ROWS: group * seq_q); offsets are 32-bit (elements < 2^32)
//   trace points:   TRACE_POINT(EVENT) (at the start and end of a slice's or merger's phases, in workgroup-uniform
//                   control flow) and TRACE_BLOCK_DONE (after each key block) are empty unless the including
//                   file defines them
#include "vkcoop/common.glsl"
#extension GL_EXT_control_flow_attributes : enable
#if SCOPE == SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#endif

#if ELEMENT != F16 && ELEMENT != BF16
#error "ELEMENT must be F16 or BF16"
#endif

layout(constant_id = 0) const uint WORKGROUP_SIZE = 128;
layout(constant_id = 1) const uint BR = 64;
layout(constant_id = 2) const uint BC = 64;
layout(constant_id = 3) const uint HEAD_DIM = 64;
layout(constant_id = 4) const bool CAUSAL = false;
layout(constant_id = 5) const uint KV_SPLITS = 1;
layout(constant_id = 6) const bool GQA_ROWS = false;
layout(constant_id = 7) const bool ALIGNED = false;
layout(constant_id = 8) const uint STATS_COLS = 64;
layout(constant_id = 9) const bool KV_STAGED = false;
layout(constant_id = 10) const bool KEYS_ALIGNED = false;
layout(constant_id = 11) const uint MERGE_LAYERS = 1;
const bool KV_ALIGNED = ALIGNED || KEYS_ALIGNED;
layout(local_size_x_id = 0) in;

#define WORKGROUP 1
#define SUBGROUP 2
#if SCOPE == WORKGROUP
#define MATRIX_SCOPE gl_ScopeWorkgroup
const uint OWN_ROWS = BR;
const bool Q_SHARED = false;
#elif SCOPE == SUBGROUP
#define MATRIX_SCOPE gl_ScopeSubgroup
const uint OWN_ROWS = BR / (WORKGROUP_SIZE / 32);   // rows of one subgroup's matrices
const bool Q_SHARED = true;                         // Q waits in shared memory across the key loop
#else
#error "SCOPE must be WORKGROUP or SUBGROUP"
#endif

// Q's tile in 16-byte vectors, each row one vector longer than HEAD_DIM (a bank skew for the matrix loads).
const uint Q_ROW = HEAD_DIM / 8 + 1;
shared uvec4 q_stage[Q_SHARED ? BR * Q_ROW : 1];   // each subgroup its own rows
// KV_STAGED: one block of K and one of V in 16-byte vectors, rows skewed like Q's. Each invocation fetches
// STAGE_VECTORS of a block into registers, which the multiplies of the current block hide, then stores them.
const uint KV_ROW = HEAD_DIM / 8 + 1;
const uint BLOCK_VECTORS = BC * HEAD_DIM / 8;
const uint STAGE_VECTORS = KV_STAGED ? BLOCK_VECTORS / WORKGROUP_SIZE : 1;
shared uvec4 k_stage[KV_STAGED ? BC * KV_ROW : 1];
shared uvec4 v_stage[KV_STAGED ? BC * KV_ROW : 1];

layout(set = 0, binding = 0) readonly buffer Queries { ELEMENT_TYPE q[]; };
layout(set = 0, binding = 1) readonly buffer Keys { ELEMENT_TYPE k[]; };
layout(set = 0, binding = 2) readonly buffer Values { ELEMENT_TYPE v[]; };
layout(set = 0, binding = 1) readonly buffer KeyVectors { uvec4 k4[]; };      // KV_STAGED's copies
layout(set = 0, binding = 2) readonly buffer ValueVectors { uvec4 v4[]; };
#define PASS 1
#define WAIT 2
#if SPLIT_MERGE == WAIT
// Device-coherent: another workgroup's partials are read by the mergers of their tile.
layout(set = 0, binding = 3) devicecoherent buffer PartialOutput { float o_partial[]; };
layout(set = 0, binding = 3) devicecoherent buffer PartialOutputQuads { vec4 o_partial4[]; };   // the merges' view
layout(set = 0, binding = 4) devicecoherent buffer PartialLogSumExp { float lse_partial[]; };
layout(set = 0, binding = 5) writeonly buffer Output { ELEMENT_TYPE o[]; };
layout(set = 0, binding = 6) writeonly buffer LogSumExp { float lse[]; };
layout(set = 0, binding = 7) devicecoherent buffer Arrivals { uint arrivals[]; };
#define LSE_OUT lse_partial
#elif SPLIT_MERGE == PASS
layout(set = 0, binding = 3) writeonly buffer Output { ELEMENT_TYPE o[]; };
layout(set = 0, binding = 4) writeonly buffer LogSumExp { float lse[]; };
// The split path writes fp32 partials into the same binding (one SPIR-V, KV_SPLITS a spec constant).
layout(set = 0, binding = 3) writeonly buffer PartialOutput { float o_partial[]; };
#define LSE_OUT lse
#else
#error "SPLIT_MERGE must be PASS or WAIT"
#endif

layout(push_constant) uniform Shape {
    uint batch, seq_q, seq_kv;
    uint q_heads, kv_heads, group;
    float scale_log2;
    uint order_chunks, order_tail;
} shape;

#ifndef TRACE_POINT
#define TRACE_POINT(EVENT)
#endif
#ifndef TRACE_BLOCK_DONE
#define TRACE_BLOCK_DONE
#endif

#define MAT_Q coopmat<ELEMENT_TYPE, MATRIX_SCOPE, OWN_ROWS, HEAD_DIM, gl_MatrixUseA>
#define MAT_KT coopmat<ELEMENT_TYPE, MATRIX_SCOPE, HEAD_DIM, BC, gl_MatrixUseB>
#define MAT_V coopmat<ELEMENT_TYPE, MATRIX_SCOPE, BC, HEAD_DIM, gl_MatrixUseB>
#define MAT_S coopmat<float, MATRIX_SCOPE, OWN_ROWS, BC, gl_MatrixUseAccumulator>
#define MAT_P coopmat<ELEMENT_TYPE, MATRIX_SCOPE, OWN_ROWS, BC, gl_MatrixUseA>
#define MAT_O coopmat<float, MATRIX_SCOPE, OWN_ROWS, HEAD_DIM, gl_MatrixUseAccumulator>
#define MAT_STATS coopmat<float, MATRIX_SCOPE, OWN_ROWS, STATS_COLS, gl_MatrixUseAccumulator>
#define CLAMPED gl_CooperativeMatrixClampModeConstantNV

// Finite, not -infinity: exp2(MASKED - m) is 0 for any real m, and MASKED - MASKED is 0, never NaN. No row is
// ever masked whole: block 0 is always processed and holds key 0, which every query row may see.
const float MASKED = -1.0e30;
const float LN2 = 0.69314718055994531;

float max_combine(const in float a, const in float b) { return max(a, b); }
float sum_combine(const in float a, const in float b) { return a + b; }
float pairwise_max(const in uint32_t row, const in uint32_t col, const in float a, const in float b) {
    return max(a, b);
}
float exp2_element(const in uint32_t row, const in uint32_t col, const in float x) { return exp2(x); }

// Keys past seq_kv (Constant clamp read them as 0, a real score) and, when CAUSAL, keys after the query.
// Tile row r is query (row0 + r) % seq_q: GQA_ROWS stacks the group's heads (seq_q rows each).
float mask_scores(const in uint32_t row, const in uint32_t col, const in float s, const in uint row0,
                  const in uint col0, const in uint seq_kv, const in uint seq_q) {
    const uint key = col0 + col;
    const uint query = GQA_ROWS ? (row0 + row) % seq_q : row0 + row;
    const bool hidden = key >= seq_kv || (CAUSAL && key > query);
    return hidden ? MASKED : s;
}

// Natural log-sum-exp of a row from its log2-unit max m and its sum l of exp2(s - m).
float log_sum_exp(const in uint32_t row, const in uint32_t col, const in float m, const in float l) {
    return (m + log2(l)) * LN2;
}

// The number of this workgroup's (query tile, head) pair in `batch`, whose slices a merge counts and merges.
uint tile_index(const uint batch) {
    return (batch * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}

#if SPLIT_MERGE == WAIT
#include "merge_waiting.glsl"

// A merger workgroup (gl_WorkGroupID.z past the slices): layer z - batch * KV_SPLITS of tile (x, y), every batch.
void merge_as_waiting_workgroup() {
    TRACE_POINT(0)
    const uint heads_per_tile = GQA_ROWS ? shape.group : 1;
    const uint rows = heads_per_tile * shape.seq_q;
    const uint q_tiles = (rows + BR - 1) / BR;
    const uint row0 = (CAUSAL ? q_tiles - 1 - gl_WorkGroupID.x : gl_WorkGroupID.x) * BR;   // the slices' tile
    const uint layer = gl_WorkGroupID.z - shape.batch * KV_SPLITS;
    const uint total_rows = shape.batch * shape.q_heads * shape.seq_q;
    for (uint batch = 0; batch < shape.batch; ++batch) {
        const uint tile = tile_index(batch);
        const bool ready = wait_for_slices(tile, layer);
        TRACE_POINT(1)
        const uint bh = batch * shape.q_heads + gl_WorkGroupID.y * heads_per_tile;
        merge_tile_layer(bh * shape.seq_q + row0, min(BR, rows - row0), total_rows, layer, ready);
    }
    TRACE_POINT(2)
}
#endif

// The (query tile, y, z) this workgroup computes. Causal tiles further down carry more keys, so they start first and
// the short ones fill the tail. Without key slices the order runs across the (head, batch) pairs of a chunk: the
// grid's workgroups are numbered x fastest, and taking the tiles of one head heaviest first before the next head's
// would start the last heads' longest tiles near the end. Small chunks keep the K and V that the running tiles read
// in L2; the last chunk (order_tail pairs) is wide enough that its longest tiles start a wave or more before the end
// (docs/attention.md, experiment 41).
uvec3 scheduled_tile(const uint q_tiles) {
    if (!CAUSAL) {
        return gl_WorkGroupID;
    }
    if (KV_SPLITS > 1) {   // the merges find a tile's slices by (x, y): keep them where the grid puts them
        return uvec3(q_tiles - 1 - gl_WorkGroupID.x, gl_WorkGroupID.yz);
    }
    const uint pairs = gl_NumWorkGroups.y * gl_NumWorkGroups.z;
    const uint tail = min(shape.order_tail, pairs);
    const uint body = pairs - tail;
    const uint linear = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * q_tiles + gl_WorkGroupID.x;
    uint first_pair = body;
    uint in_chunk = tail;
    if (linear < body * q_tiles) {
        const uint chunks = clamp(shape.order_chunks, 1u, body);
        const uint small = body / chunks;                    // pairs of a chunk; the first `large` hold one more
        const uint large = body % chunks;
        const uint large_workgroups = large * (small + 1) * q_tiles;
        const uint chunk = linear < large_workgroups ? linear / ((small + 1) * q_tiles)
                                                     : large + (linear - large_workgroups) / (small * q_tiles);
        first_pair = chunk * small + min(chunk, large);
        in_chunk = small + (chunk < large ? 1 : 0);
    }
    const uint rank = linear - first_pair * q_tiles;         // heaviest tile of every pair first, then the next
    const uint pair = first_pair + rank % in_chunk;
    return uvec3(q_tiles - 1 - rank / in_chunk, pair % gl_NumWorkGroups.y, pair / gl_NumWorkGroups.y);
}

void main() {
#if SPLIT_MERGE == WAIT
    if (gl_WorkGroupID.z >= shape.batch * KV_SPLITS) {
        merge_as_waiting_workgroup();
        return;
    }
#endif
    TRACE_POINT(0)
    // A tile's rows: one head's seq_q queries, or (GQA_ROWS) the group's heads stacked, group * seq_q rows.
    const uint heads_per_tile = GQA_ROWS ? shape.group : 1;
    const uint rows = heads_per_tile * shape.seq_q;
    const uint q_tiles = (rows + BR - 1) / BR;
    const uvec3 tile_id = scheduled_tile(q_tiles);
    const uint q_tile = tile_id.x;
    const uint first_head = tile_id.y * heads_per_tile;
    const uint batch = tile_id.z / KV_SPLITS;
    const uint split = tile_id.z % KV_SPLITS;
    const uint kv_head = first_head / shape.group;
    const uint row0 = q_tile * BR;
    // The first of the rows this invocation's matrices hold: the tile's, or (SUBGROUP) its subgroup's.
#if SCOPE == SUBGROUP
    const uint own_row0 = row0 + gl_SubgroupID * OWN_ROWS;
    const uint q_stage_first = gl_SubgroupID * OWN_ROWS * Q_ROW;
#else
    const uint own_row0 = row0;
    const uint q_stage_first = 0;
#endif
    const uint bh = batch * shape.q_heads + first_head;
    // Element offsets of the tile's [rows][HEAD_DIM] block: multiples of HEAD_DIM (>= 64), so 16-byte aligned.
    const uint q_base = bh * shape.seq_q * HEAD_DIM;
    const uint kv_base = (batch * shape.kv_heads + kv_head) * shape.seq_kv * HEAD_DIM;
    // The queries the tile's real rows hold: stacked heads wrap around seq_q.
    const uint last_row = min(row0 + BR, rows) - 1;
    const bool wraps = GQA_ROWS && row0 / shape.seq_q != last_row / shape.seq_q;
    const uint first_query = wraps ? 0 : row0 % shape.seq_q;
    const uint last_query = wraps ? shape.seq_q - 1 : (GQA_ROWS ? last_row % shape.seq_q : row0 + BR - 1);

    tensorLayoutNV<2, CLAMPED> layout_q = createTensorLayoutNV(2, CLAMPED);
    layout_q = setTensorLayoutDimensionNV(layout_q, rows, HEAD_DIM);
    layout_q = setTensorLayoutStrideNV(layout_q, HEAD_DIM, 1);
    tensorLayoutNV<2, CLAMPED> layout_kv_clamped = createTensorLayoutNV(2, CLAMPED);
    layout_kv_clamped = setTensorLayoutDimensionNV(layout_kv_clamped, shape.seq_kv, HEAD_DIM);
    layout_kv_clamped = setTensorLayoutStrideNV(layout_kv_clamped, HEAD_DIM, 1);
    // Blocks wholly inside seq_kv read without clamping (the GEMM's fast path: no per-element bounds test).
    tensorLayoutNV<2> layout_kv = createTensorLayoutNV(2);
    layout_kv = setTensorLayoutDimensionNV(layout_kv, shape.seq_kv, HEAD_DIM);
    layout_kv = setTensorLayoutStrideNV(layout_kv, HEAD_DIM, 1);
    // K is stored [seq_kv][HEAD_DIM]; Kᵀ (the B of Q Kᵀ) is read through a view that swaps the dimensions.
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    tensorLayoutNV<2> layout_q_aligned = createTensorLayoutNV(2);
    layout_q_aligned = setTensorLayoutDimensionNV(layout_q_aligned, rows, HEAD_DIM);
    layout_q_aligned = setTensorLayoutStrideNV(layout_q_aligned, HEAD_DIM, 1);

    MAT_Q tile_q;
    if (ALIGNED) {
        coopMatLoadTensorNV(tile_q, q, q_base,
                            sliceTensorLayoutNV(layout_q_aligned, own_row0, OWN_ROWS, 0, HEAD_DIM));
    } else {
        coopMatLoadTensorNV(tile_q, q, q_base, sliceTensorLayoutNV(layout_q, own_row0, OWN_ROWS, 0, HEAD_DIM));
    }
    if (Q_SHARED) {
        coopMatStore(tile_q, q_stage, q_stage_first, Q_ROW, gl_CooperativeMatrixLayoutRowMajor);
        barrier();
    }

    MAT_O acc = MAT_O(0.0);
    MAT_STATS m = MAT_STATS(MASKED);   // running row max (log2 units), the same value across each row
    MAT_STATS l = MAT_STATS(0.0);      // running row sum of exp2(s - m)

    // Keys this tile sees: causal rows stop at the tile's last row. Blocks [0, unmasked) need no mask at all.
    const uint kv_end = CAUSAL ? min(shape.seq_kv, last_query + 1) : shape.seq_kv;
    const uint blocks_total = (kv_end + BC - 1) / BC;
    // Slice s takes blocks s, s + KV_SPLITS, ...: at any moment a tile's slices read neighbouring blocks, and
    // the slices of one tile differ by at most one block.
    const uint block_step = KV_SPLITS;
    const uint block_begin = min(blocks_total, split);
    const uint block_end = blocks_total;
    const uint inside = shape.seq_kv / BC;                          // blocks that end inside seq_kv
    const uint unmasked = min(block_end, CAUSAL ? min(inside, (first_query + 1) / BC) : inside);
    uint block = block_begin;

// The online-softmax update of one block's scores s (masked where MASK): p = exp2(s - m_new), and m, l, acc
// rescaled to the new row max. Declares p in the enclosing block.
#define ONLINE_SOFTMAX(MASK)                                                                                  \
        s = s * shape.scale_log2;                                                                             \
        if (MASK) {                                                                                           \
            coopMatPerElementNV(s, s, mask_scores, own_row0, col0, shape.seq_kv, shape.seq_q);                \
        }                                                                                                     \
        MAT_STATS block_max;                                                                                  \
        coopMatReduceNV(block_max, s, gl_CooperativeMatrixReduceRowNV, max_combine);                          \
        MAT_STATS m_new;                                                                                      \
        coopMatPerElementNV(m_new, m, pairwise_max, block_max);                                               \
        /* a row max "smears" the per-row m onto S's shape */                                                 \
        MAT_S m_wide;                                                                                         \
        coopMatReduceNV(m_wide, m_new, gl_CooperativeMatrixReduceRowNV, max_combine);                         \
        MAT_S p;                                                                                              \
        coopMatPerElementNV(p, s - m_wide, exp2_element);                                                     \
        MAT_STATS rescale;                                                                                    \
        coopMatPerElementNV(rescale, m - m_new, exp2_element);                                                \
        m = m_new;                                                                                            \
        MAT_STATS block_sum;                                                                                  \
        coopMatReduceNV(block_sum, p, gl_CooperativeMatrixReduceRowNV, sum_combine);                          \
        l = l * rescale + block_sum;                                                                          \
        /* every element of a row of rescale is equal: a row max "smears" it onto O's shape */                \
        MAT_O rescale_o;                                                                                      \
        coopMatReduceNV(rescale_o, rescale, gl_CooperativeMatrixReduceRowNV, max_combine);                    \
        acc = acc * rescale_o;

// One block of BC keys: S = Q Kᵀ, masked where MASK, then the online-softmax update and acc += P V.
#define ATTENTION_STEP(LAYOUT, MASK)                                                                          \
    {                                                                                                         \
        const uint col0 = block * BC;                                                                         \
        MAT_KT tile_kt;                                                                                       \
        coopMatLoadTensorNV(tile_kt, k, kv_base, sliceTensorLayoutNV(LAYOUT, col0, BC, 0, HEAD_DIM), transposed);\
        MAT_Q q_now = tile_q;                                                                                 \
        if (Q_SHARED) {                                                                                       \
            coopMatLoad(q_now, q_stage, q_stage_first, Q_ROW, gl_CooperativeMatrixLayoutRowMajor);            \
        }                                                                                                     \
        MAT_S s = coopMatMulAdd(q_now, tile_kt, MAT_S(0.0));                                                  \
        ONLINE_SOFTMAX(MASK)                                                                                  \
        MAT_V tile_v;                                                                                         \
        coopMatLoadTensorNV(tile_v, v, kv_base, sliceTensorLayoutNV(LAYOUT, col0, BC, 0, HEAD_DIM));          \
        acc = coopMatMulAdd(MAT_P(p), tile_v, acc);                                                           \
    }

// KV_STAGED: the block's BC rows of HEAD_DIM / 8 vectors are contiguous from vector FIRST of BUFFER.
#define FETCH_BLOCK(BUFFER, FIRST)                                                                            \
    [[unroll]] for (uint i = 0; i < STAGE_VECTORS; ++i) {                                                     \
        pending[i] = BUFFER[(FIRST) + gl_LocalInvocationIndex + i * WORKGROUP_SIZE];                          \
    }
#define STAGE_BLOCK(STAGE)                                                                                    \
    [[unroll]] for (uint i = 0; i < STAGE_VECTORS; ++i) {                                                     \
        const uint vector = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;                                     \
        STAGE[vector / (HEAD_DIM / 8) * KV_ROW + vector % (HEAD_DIM / 8)] = pending[i];                       \
    }

// The same block with K and V from shared memory (KV_STAGED): K of this block is staged already. V is fetched
// before S = Q Kᵀ and stored after the softmax; K of the next block is fetched before P V and stored after it.
// Two barriers per block: the first publishes V (everyone's reads of K are done by then), the second K (and
// everyone's reads of V are done before the next block stores it).
#define STAGED_STEP(MASK)                                                                                     \
    {                                                                                                         \
        const uint col0 = block * BC;                                                                         \
        FETCH_BLOCK(v4, (kv_base + col0 * HEAD_DIM) / 8)                                                      \
        MAT_KT tile_kt;                                                                                       \
        coopMatLoad(tile_kt, k_stage, 0, KV_ROW, gl_CooperativeMatrixLayoutColumnMajor);                      \
        MAT_Q q_now = tile_q;                                                                                 \
        if (Q_SHARED) {                                                                                       \
            coopMatLoad(q_now, q_stage, q_stage_first, Q_ROW, gl_CooperativeMatrixLayoutRowMajor);            \
        }                                                                                                     \
        MAT_S s = coopMatMulAdd(q_now, tile_kt, MAT_S(0.0));                                                  \
        ONLINE_SOFTMAX(MASK)                                                                                  \
        STAGE_BLOCK(v_stage)                                                                                  \
        barrier();                                                                                            \
        if (block + block_step < staged_end) {                                                                \
            FETCH_BLOCK(k4, (kv_base + (col0 + BC * block_step) * HEAD_DIM) / 8)                              \
        }                                                                                                     \
        MAT_V tile_v;                                                                                         \
        coopMatLoad(tile_v, v_stage, 0, KV_ROW, gl_CooperativeMatrixLayoutRowMajor);                          \
        acc = coopMatMulAdd(MAT_P(p), tile_v, acc);                                                           \
        if (block + block_step < staged_end) {                                                                \
            STAGE_BLOCK(k_stage)                                                                              \
        }                                                                                                     \
        barrier();                                                                                            \
    }

    // Blocks [block, unmasked) need neither clamp nor mask; with KV_ALIGNED the rest need only the causal mask.
    const uint staged_end = KV_ALIGNED ? block_end : unmasked;
    if (KV_STAGED) {   // K of the first block is staged before the loop
        uvec4 pending[STAGE_VECTORS];
        if (block < staged_end) {
            FETCH_BLOCK(k4, (kv_base + block * BC * HEAD_DIM) / 8)
            STAGE_BLOCK(k_stage)
            barrier();
        }
        [[dont_unroll]] for (; block < unmasked; block += block_step) {
            STAGED_STEP(false)
            TRACE_BLOCK_DONE
        }
        if (KV_ALIGNED && CAUSAL) {
            [[dont_unroll]] for (; block < block_end; block += block_step) {
                STAGED_STEP(true)
                TRACE_BLOCK_DONE
            }
        }
    } else {
        [[dont_unroll]] for (; block < unmasked; block += block_step) {
            ATTENTION_STEP(layout_kv, false)
            TRACE_BLOCK_DONE
        }
        if (KV_ALIGNED && CAUSAL) {
            [[dont_unroll]] for (; block < block_end; block += block_step) {
                ATTENTION_STEP(layout_kv, true)
                TRACE_BLOCK_DONE
            }
        }
    }
    if (!KV_ALIGNED) {   // the blocks that cross seq_kv or need the mask, through the clamped layout
        [[dont_unroll]] for (; block < block_end; block += block_step) {
            ATTENTION_STEP(layout_kv_clamped, true)
            TRACE_BLOCK_DONE
        }
    }

    TRACE_POINT(2)
    // O = acc / l. An empty split (no blocks) has l = 0: it writes O = 0 and a log-sum-exp of MASKED, which
    // the combine pass weighs by exp(MASKED - lse) = 0.
    const bool empty = block_begin >= block_end;
    MAT_O l_o;
    coopMatReduceNV(l_o, l, gl_CooperativeMatrixReduceRowNV, max_combine);
    if (!empty) {
        acc = acc / l_o;
    }
    MAT_STATS row_lse = m;
    if (!empty) {
        coopMatPerElementNV(row_lse, m, log_sum_exp, l);
    }

    // Rows past seq_q fall outside the clamped layouts: "out of bounds stores are dropped".
    const uint planes = shape.batch * shape.q_heads;
    const uint plane = split * planes + bh;   // [split][batch * q_heads], the tile's first head
    if (KV_SPLITS == 1) {
        // Use A, not Accumulator: the driver's table lists bf16 only as an A/B type.
        coopmat<ELEMENT_TYPE, MATRIX_SCOPE, OWN_ROWS, HEAD_DIM, gl_MatrixUseA> result =
            coopmat<ELEMENT_TYPE, MATRIX_SCOPE, OWN_ROWS, HEAD_DIM, gl_MatrixUseA>(acc);
        if (ALIGNED) {
            coopMatStoreTensorNV(result, o, q_base,
                                 sliceTensorLayoutNV(layout_q_aligned, own_row0, OWN_ROWS, 0, HEAD_DIM));
        } else {
            coopMatStoreTensorNV(result, o, q_base, sliceTensorLayoutNV(layout_q, own_row0, OWN_ROWS, 0, HEAD_DIM));
        }
    } else {
        coopMatStoreTensorNV(acc, o_partial, plane * shape.seq_q * HEAD_DIM,
                             sliceTensorLayoutNV(layout_q, own_row0, OWN_ROWS, 0, HEAD_DIM));
    }
    // [planes / heads_per_tile][rows][1] (every count is a multiple of heads_per_tile = group): the matrix's
    // STATS_COLS columns all hold the row's value; columns >= 1 are out of bounds, and so are rows past the tile's
    // heads.
    tensorLayoutNV<3, CLAMPED> layout_lse = createTensorLayoutNV(3, CLAMPED);
    layout_lse = setTensorLayoutDimensionNV(layout_lse, KV_SPLITS * planes / heads_per_tile, rows, 1);
    layout_lse = setTensorLayoutStrideNV(layout_lse, rows, 1, 1);
    coopMatStoreTensorNV(row_lse, LSE_OUT, 0,
                         sliceTensorLayoutNV(layout_lse, plane / heads_per_tile, 1, own_row0, OWN_ROWS, 0,
                                             STATS_COLS));
#if SPLIT_MERGE == WAIT
    arrive_slice(tile_index(batch));
#endif
    TRACE_POINT(3)
}
