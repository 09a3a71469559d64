#version 450
// @variants ELEMENT=F16|BF16
// The second pass of split-KV flash attention (flash decoding): each of KV_SPLITS key slices left a
// normalised fp32 output O_s and its natural log-sum-exp lse_s per query row (flash_attention.comp with
// KV_SPLITS > 1). The whole row's result is O = sum_s exp(lse_s - lse) O_s with lse = log sum_s exp(lse_s);
// the largest lse_s is subtracted first so no exp overflows. An empty slice has lse_s = -1e30: weight 0.
// Scalar code: one invocation per output element, a grid-stride loop; the pass reads splits x |O| floats.
//   defines:        ELEMENT = F16 | BF16 (the output type)
//   push constants: rows (batch * q_heads * seq_q), head_dim, splits
//   bindings:       0 partial O [splits][rows][head_dim] fp32, 1 partial lse [splits][rows] fp32,
//                   2 O [rows][head_dim] (ELEMENT), 3 lse [rows] fp32
#include "vkcoop/common.glsl"

#if ELEMENT != F16 && ELEMENT != BF16
#error "ELEMENT must be F16 or BF16"
#endif

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer PartialOutput { float o_partial[]; };
layout(set = 0, binding = 1) readonly buffer PartialLse { float lse_partial[]; };
layout(set = 0, binding = 2) writeonly buffer Output { ELEMENT_TYPE o[]; };
layout(set = 0, binding = 3) writeonly buffer LogSumExp { float lse[]; };

layout(push_constant) uniform Shape {
    uint rows, head_dim, splits;
} shape;

void main() {
    const uint count = shape.rows * shape.head_dim;
    for (uint i = gl_GlobalInvocationID.x; i < count; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
        const uint row = i / shape.head_dim;
        float largest = lse_partial[row];
        for (uint s = 1; s < shape.splits; ++s) {
            largest = max(largest, lse_partial[s * shape.rows + row]);
        }
        float weight_sum = 0.0;
        float value = 0.0;
        for (uint s = 0; s < shape.splits; ++s) {
            const float weight = exp(lse_partial[s * shape.rows + row] - largest);
            weight_sum += weight;
            value += weight * o_partial[s * count + i];
        }
        o[i] = ELEMENT_TYPE(value / weight_sum);
        if (i % shape.head_dim == 0) {
            lse[row] = largest + log(weight_sum);
        }
    }
}
