#version 450
// @variants ELEMENT=F16|BF16
// The second pass of split-KV flash attention (flash decoding): each of KV_SPLITS key slices left a
// normalised fp32 output O_s and its natural log-sum-exp lse_s per query row (flash_attention.comp with
// KV_SPLITS > 1). The whole row's result is O = sum_s exp(lse_s - lse) O_s with lse = log sum_s exp(lse_s);
// the largest lse_s is subtracted first so no exp overflows. An empty slice has lse_s = -1e30: weight 0.
// One workgroup per (row, 32 columns of head_dim): its 16 groups of 32 invocations share the slices (group g takes
// slices g, g + 16, ...), so each invocation issues splits / 16 independent loads instead of a serial walk over all of
// them; the 16 partial sums meet in shared memory. A decode step has few rows, so this pass is latency-bound:
// the loads in flight, not the bytes, set its time.
//   defines:        ELEMENT = F16 | BF16 (the output type)
//   push constants: rows (batch * q_heads * seq_q), head_dim (a multiple of 32), splits
//   bindings:       0 partial O [splits][rows][head_dim] fp32, 1 partial lse [splits][rows] fp32,
//                   2 O [rows][head_dim] (ELEMENT), 3 lse [rows] fp32
//   grid:           (rows * head_dim / 32, up to a limit: a grid-stride loop covers the rest)
#include "vkcoop/common.glsl"
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable

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

shared float subgroup_largest[COLUMNS * LANES];   // one per subgroup, whatever the subgroup size
shared float lane_value[LANES][COLUMNS];
shared float lane_weight[LANES];

// The row's largest slice lse: every invocation strides over the slices, then subgroups, then the workgroup.
float largest_lse(const uint row) {
    float largest = -3.0e38;
    for (uint s = gl_LocalInvocationIndex; s < shape.splits; s += gl_WorkGroupSize.x) {
        largest = max(largest, lse_partial[s * shape.rows + row]);
    }
    largest = subgroupMax(largest);
    if (subgroupElect()) {
        subgroup_largest[gl_SubgroupID] = largest;
    }
    barrier();
    largest = subgroup_largest[0];
    for (uint g = 1; g < gl_NumSubgroups; ++g) {
        largest = max(largest, subgroup_largest[g]);
    }
    return largest;
}

void main() {
    const uint column = gl_LocalInvocationIndex % COLUMNS;
    const uint lane = gl_LocalInvocationIndex / COLUMNS;
    const uint chunks = shape.head_dim / COLUMNS;
    const uint count = shape.rows * shape.head_dim;
    for (uint item = gl_WorkGroupID.x; item < shape.rows * chunks; item += gl_NumWorkGroups.x) {
        const uint row = item / chunks;
        const uint element = row * shape.head_dim + (item % chunks) * COLUMNS + column;
        const float largest = largest_lse(row);
        // Two slices per step: independent loads in flight (the loop bound is not a constant).
        float value = 0.0, weight_sum = 0.0;
        uint s = lane;
        for (; s + LANES < shape.splits; s += 2 * LANES) {
            const float w0 = exp(lse_partial[s * shape.rows + row] - largest);
            const float w1 = exp(lse_partial[(s + LANES) * shape.rows + row] - largest);
            value += w0 * o_partial[s * count + element] + w1 * o_partial[(s + LANES) * count + element];
            weight_sum += w0 + w1;
        }
        if (s < shape.splits) {
            const float w = exp(lse_partial[s * shape.rows + row] - largest);
            value += w * o_partial[s * count + element];
            weight_sum += w;
        }
        lane_value[lane][column] = value;
        if (column == 0) {
            lane_weight[lane] = weight_sum;
        }
        barrier();
        if (lane == 0) {
            float total = lane_value[0][column], total_weight = lane_weight[0];
            [[unroll]] for (uint g = 1; g < LANES; ++g) {
                total += lane_value[g][column];
                total_weight += lane_weight[g];
            }
            o[element] = ELEMENT_TYPE(total / total_weight);
            if (element % shape.head_dim == 0) {
                lse[row] = largest + log(total_weight);
            }
        }
        barrier();   // the shared arrays are reused by the next item
    }
}
