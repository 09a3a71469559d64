#version 450
// A in vkcoop's 2:4 format expanded to dense rows in a buffer: the first pass of the vk-coopmat2-2:4-expand path
// (vkcoop/gemm/expanded.py), whose second pass is the dense coopmat2 GEMM. coopmat2 has no sparse MMA, so at
// compute-bound shapes the expansion is better paid once per call than once per tile and K step. The bit logic is
// sparse24_expand.glsl's (that of the staged 2:4 kernel); it needs no cooperative matrix, so
// tests/test_sparse24_expand.py runs this shader on any Vulkan 1.2 device (lavapipe included).
//   bindings: 0 values (uvec4, [M][K/16]), 1 metadata (uint, [M][K/32]), 2 dense A (uvec4, [M][K/8])
//   push:     K (a multiple of 32), vectors (M * K / 16: one invocation per 16 dense columns, grid-strided)
#include "sparse24_expand.glsl"
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) restrict readonly buffer Values { uvec4 values[]; };
layout(set = 0, binding = 1) restrict readonly buffer Metadata { uint metadata[]; };
layout(set = 0, binding = 2) restrict writeonly buffer Dense { uvec4 dense[]; };
layout(push_constant) uniform Shape {
    uint K;
    uint vectors;
} shape;

void main() {
    const uint per_row = shape.K / 16u;
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint v = gl_GlobalInvocationID.x; v < shape.vectors; v += stride) {
        const uint row = v / per_row;
        const uint group = v % per_row;                     // which 16 columns of the row
        const uint word = metadata[row * (shape.K / 32u) + group / 2u];
        uvec4 first, second;
        expand16(values[v], (word >> (16u * (group & 1u))) & 0xFFFFu, first, second);
        dense[2u * v] = first;
        dense[2u * v + 1u] = second;
    }
}
