// SPLIT_MERGE=WAIT for flash_attention.comp: flash decoding's merge, O = sum_s exp(lse_s - lse) O_s with
// lse = log sum_s exp(lse_s), by workgroups of the same dispatch that wait for the key slices instead of a second
// dispatch. The grid's z holds batch * KV_SPLITS slices and then MERGE_LAYERS mergers per (x, y) tile; merger layer
// l of tile (x, y) takes rounds l, l + MERGE_LAYERS, ... of MERGE_ITEMS output quads of that tile, for every batch.
// Each merger has its own arrival counter: each slice, after storing its partials, counts itself on all MERGE_LAYERS
// counters of its tile (release, one invocation per counter); a merger polls its counter until all KV_SPLITS have
// arrived (acquire), then sets it back to zero for the next launch, which no slice of this launch can reach again.
// Deadlock-free whatever order the workgroups start in, as long as the mergers leave the slices a slot: the host
// launches at most one merger per SM (vkcoop.attention.kernel.waiting_mergers). The poll gives up after
// WAIT_POLLS reads and writes NaN, so a broken assumption shows as a failed check, not a hung device (slices that
// arrive after that leave the counts of the next launch wrong: the NaN has already said the device cannot run this).
// Counters: arrivals[tile * MERGE_LAYERS + layer], tile = (b * y_count + y) * x_count + x; zero before the first
// launch, and each launch leaves them zero.
#ifndef VKCOOP_MERGE_WAITING_GLSL
#define VKCOOP_MERGE_WAITING_GLSL

const uint MERGE_LANES = 8;                                   // invocations that share one output quad's slices
const uint MERGE_ITEMS = WORKGROUP_SIZE / MERGE_LANES;        // output quads per merger round
const uint LANE_SLICES = (KV_SPLITS + MERGE_LANES - 1) / MERGE_LANES;
const uint WAIT_POLLS = 1u << 24;
shared vec4 lane_value[WORKGROUP_SIZE];
shared float lane_largest[WORKGROUP_SIZE];
shared float lane_weight[WORKGROUP_SIZE];
shared bool merge_ready;

// A slice's partials are stored: count it on each merger's counter. The partial buffers are devicecoherent, so each
// store is made available to the device as it is made; the barrier (workgroup scope) orders every invocation's
// stores before the counting invocations' device-scope releases, which carry them to the mergers' acquires. A
// device-scope barrier here cost 0.5-0.7 us a launch on the H100 (docs/attention.md, experiment 32).
void arrive_slice(const uint tile) {
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer, gl_SemanticsAcquireRelease);
    for (uint layer = gl_LocalInvocationIndex; layer < MERGE_LAYERS; layer += WORKGROUP_SIZE) {
        atomicAdd(arrivals[tile * MERGE_LAYERS + layer], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                  gl_SemanticsRelease);
    }
}

// Waits until this merger's counter of the tile says that its KV_SPLITS slices have arrived, then sets it back to
// zero (no slice of this launch counts on it again); false if WAIT_POLLS reads did not see them. The polls are
// relaxed (a device-scope acquire on every read costs a fence each); one acquire after the last orders the reads.
// The reset is a relaxed store whose result nobody waits for (a returned count cost a round trip per merger).
bool wait_for_slices(const uint tile, const uint layer) {
    if (gl_LocalInvocationIndex == 0) {
        const uint counter = tile * MERGE_LAYERS + layer;
        uint polls = 0;
        while (atomicLoad(arrivals[counter], gl_ScopeDevice, 0, gl_SemanticsRelaxed) < KV_SPLITS
               && ++polls < WAIT_POLLS) {
        }
        atomicLoad(arrivals[counter], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsAcquire);
        atomicStore(arrivals[counter], 0u, gl_ScopeDevice, 0, gl_SemanticsRelaxed);
        merge_ready = polls < WAIT_POLLS;
    }
    // Workgroup scope: invocation 0's acquire ordered the slices' stores before it, the barrier orders it before the
    // other invocations' devicecoherent reads (made visible to the device as they are made).
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
    return merge_ready;
}

// One output quad (4 columns of one row) over this lane's slices lane, lane + MERGE_LANES, ...: every load is
// independent, so all LANE_SLICES are in flight at once, and so is every weight (the largest log-sum-exp first).
void merge_lane_slices(const uint row, const uint quad, const uint lane, const uint total_rows, inout float largest,
                       inout float weight_sum, inout vec4 value) {
    const uint QUADS = HEAD_DIM / 4;
    float lse_s[LANE_SLICES];
    vec4 o_s[LANE_SLICES];
    [[unroll]] for (uint u = 0; u < LANE_SLICES; ++u) {
        const uint s = lane + u * MERGE_LANES;
        lse_s[u] = s < KV_SPLITS ? lse_partial[s * total_rows + row] : largest;
        o_s[u] = s < KV_SPLITS ? o_partial4[(s * total_rows + row) * QUADS + quad] : vec4(0.0);
        largest = max(largest, lse_s[u]);
    }
    [[unroll]] for (uint u = 0; u < LANE_SLICES; ++u) {
        const float weight = lane + u * MERGE_LANES < KV_SPLITS ? exp(lse_s[u] - largest) : 0.0;
        value += weight * o_s[u];
        weight_sum += weight;
    }
}

// Merges the rows base_row .. base_row + row_count - 1 (of total_rows in a partial slot) that fall to `layer`.
void merge_tile_layer(const uint base_row, const uint row_count, const uint total_rows, const uint layer,
                      const bool ready) {
    const uint QUADS = HEAD_DIM / 4;
    const uint items = row_count * QUADS;
    const uint lane = gl_LocalInvocationIndex % MERGE_LANES;
    for (uint first = layer * MERGE_ITEMS; first < items; first += MERGE_LAYERS * MERGE_ITEMS) {   // uniform
        const uint item = first + gl_LocalInvocationIndex / MERGE_LANES;
        const uint row = base_row + item / QUADS, quad = item % QUADS;
        float largest = -3.0e38, weight_sum = 0.0;
        vec4 value = vec4(0.0);
        if (item < items && ready) {
            merge_lane_slices(row, quad, lane, total_rows, largest, weight_sum, value);
        }
        lane_value[gl_LocalInvocationIndex] = value;
        lane_largest[gl_LocalInvocationIndex] = largest;
        lane_weight[gl_LocalInvocationIndex] = weight_sum;
        barrier();
        if (lane == 0 && item < items) {
            float row_largest = largest;
            [[unroll]] for (uint g = 1; g < MERGE_LANES; ++g) {
                row_largest = max(row_largest, lane_largest[gl_LocalInvocationIndex + g]);
            }
            vec4 total = vec4(0.0);
            float total_weight = 0.0;
            [[unroll]] for (uint g = 0; g < MERGE_LANES; ++g) {
                const float w = exp(lane_largest[gl_LocalInvocationIndex + g] - row_largest);
                total += w * lane_value[gl_LocalInvocationIndex + g];
                total_weight += w * lane_weight[gl_LocalInvocationIndex + g];
            }
            const float nan = uintBitsToFloat(0x7fc00000u);
            total = ready ? total / total_weight : vec4(nan);
            [[unroll]] for (uint c = 0; c < 4; ++c) {
                o[row * HEAD_DIM + 4 * quad + c] = ELEMENT_TYPE(total[c]);
            }
            if (quad == 0) {
                lse[row] = ready ? row_largest + log(total_weight) : nan;
            }
        }
        barrier();   // the shared arrays are reused by the next round
    }
}
#endif
