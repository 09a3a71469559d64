#version 450
// @variants ELEMENT=F16|BF16
// The second pass of split-KV flash attention (flash decoding): each of KV_SPLITS key slices left a
// normalised fp32 output O_s and its natural log-sum-exp lse_s per query row (flash_attention.comp with
// KV_SPLITS > 1). The whole row's result is O = sum_s exp(lse_s - lse) O_s with lse = log sum_s exp(lse_s);
// the largest lse_s is subtracted first so no exp overflows. An empty slice has lse_s = -1e30: weight 0.
// One workgroup per (row, 32 columns of head_dim): its 16 groups of 32 invocations share the slices (group g takes
// slices g, g + 16, ...), so each invocation issues splits / 16 independent loads instead of a serial walk over all of
// them, and merges them online (one round of loads: no row maximum is read first); the 16 partial merges meet in
// shared memory. A decode step has few rows, so this pass is latency-bound:
// the loads in flight, not the bytes, set its time.
//   defines:        ELEMENT = F16 | BF16 (the output type)
//   push constants: rows (batch * q_heads * seq_q), head_dim (a multiple of 32), splits
//   bindings:       0 partial O [splits][rows][head_dim] fp32, 1 partial lse [splits][rows] fp32,
//                   2 O [rows][head_dim] (ELEMENT), 3 lse [rows] fp32
//   grid:           (rows * head_dim / 32, up to a limit: a grid-stride loop covers the rest)
#include "vkcoop/common.glsl"
#extension GL_EXT_control_flow_attributes : enable

#if ELEMENT != F16 && ELEMENT != BF16
#error "ELEMENT must be F16 or BF16"
#endif

const uint COLUMNS = 32;              // head_dim columns per workgroup: one 128-byte line of a partial O row
const uint LANES = 16;                // slice groups per workgroup (8 and 32 were slower on the H100)
layout(local_size_x = 512) in;        // COLUMNS * LANES

layout(set = 0, binding = 0) restrict readonly buffer PartialOutput { float o_partial[]; };
layout(set = 0, binding = 1) restrict readonly buffer PartialLse { float lse_partial[]; };
layout(set = 0, binding = 2) restrict writeonly buffer Output { ELEMENT_TYPE o[]; };
layout(set = 0, binding = 3) restrict writeonly buffer LogSumExp { float lse[]; };

layout(push_constant) uniform Shape {
    uint rows, head_dim, splits;
} shape;

shared float lane_largest[LANES];
shared float lane_value[LANES][COLUMNS];
shared float lane_weight[LANES];

void main() {
    const uint column = gl_LocalInvocationIndex % COLUMNS;
    const uint lane = gl_LocalInvocationIndex / COLUMNS;
    const uint chunks = shape.head_dim / COLUMNS;
    const uint count = shape.rows * shape.head_dim;
    for (uint item = gl_WorkGroupID.x; item < shape.rows * chunks; item += gl_NumWorkGroups.x) {
        const uint row = item / chunks;
        const uint element = row * shape.head_dim + (item % chunks) * COLUMNS + column;
        // One round of loads: each lane merges its slices online (its own running max, the sums rescaled when
        // it grows), two slices per step so that their loads are in flight together; the lanes meet after.
        float largest = -3.0e38, value = 0.0, weight_sum = 0.0;
        uint s = lane;
        for (; s + LANES < shape.splits; s += 2 * LANES) {
            const float lse0 = lse_partial[s * shape.rows + row], lse1 = lse_partial[(s + LANES) * shape.rows + row];
            const float o0 = o_partial[s * count + element], o1 = o_partial[(s + LANES) * count + element];
            const float grown = max(largest, max(lse0, lse1));
            const float rescale = exp(largest - grown), w0 = exp(lse0 - grown), w1 = exp(lse1 - grown);
            value = value * rescale + (w0 * o0 + w1 * o1);
            weight_sum = weight_sum * rescale + (w0 + w1);
            largest = grown;
        }
        if (s < shape.splits) {
            const float lse0 = lse_partial[s * shape.rows + row];
            const float grown = max(largest, lse0);
            const float rescale = exp(largest - grown), w0 = exp(lse0 - grown);
            value = value * rescale + w0 * o_partial[s * count + element];
            weight_sum = weight_sum * rescale + w0;
            largest = grown;
        }
        lane_value[lane][column] = value;
        if (column == 0) {
            lane_largest[lane] = largest;
            lane_weight[lane] = weight_sum;
        }
        barrier();
        if (lane == 0) {
            float row_largest = lane_largest[0];
            [[unroll]] for (uint g = 1; g < LANES; ++g) {
                row_largest = max(row_largest, lane_largest[g]);
            }
            float total = 0.0, total_weight = 0.0;
            [[unroll]] for (uint g = 0; g < LANES; ++g) {
                const float w = exp(lane_largest[g] - row_largest);
                total += w * lane_value[g][column];
                total_weight += w * lane_weight[g];
            }
            o[element] = ELEMENT_TYPE(total / total_weight);
            if (element % shape.head_dim == 0) {
                lse[row] = row_largest + log(total_weight);
            }
        }
        barrier();   // the shared arrays are reused by the next item
    }
}
