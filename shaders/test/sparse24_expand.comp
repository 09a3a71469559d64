#version 450
// Runs sparse24_expand.glsl on any Vulkan 1.2 device (lavapipe included) so its bit logic is checked against
// vkcoop.sparse.decompress_2to4 where no coopmat2 GPU exists. One invocation per 16 dense columns.
//   bindings: 0 values (uvec4, [M][K/16]), 1 metadata (uint, [M][K/32]), 2 dense out (uvec4, [M][K/8])
//   push:     K (a multiple of 32), vectors (M * K / 16)
#include "../gemm/sparse24_expand.glsl"
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Values { uvec4 values[]; };
layout(set = 0, binding = 1) readonly buffer Metadata { uint metadata[]; };
layout(set = 0, binding = 2) writeonly buffer Dense { uvec4 dense[]; };
layout(push_constant) uniform Shape {
    uint K;
    uint vectors;
} shape;

void main() {
    uint v = gl_GlobalInvocationID.x;
    if (v >= shape.vectors) {
        return;
    }
    uint per_row = shape.K / 16u;
    uint row = v / per_row;
    uint group = v % per_row;                       // which 16 columns of the row
    uint word = metadata[row * (shape.K / 32u) + group / 2u];
    uvec4 first, second;
    expand16(values[v], (word >> (16u * (group & 1u))) & 0xFFFFu, first, second);
    dense[2u * v] = first;
    dense[2u * v + 1u] = second;
}
