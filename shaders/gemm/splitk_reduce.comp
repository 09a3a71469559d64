#version 450
// Adds up the SPLIT_K partial products a split-K GEMM wrote: C[i] = sum over s of partial[s][i], in slice order.
//   push constants: element count of C (M*N), number of slices
//   bindings:       0 partial sums [slices][M*N] fp32, 1 C [M*N] fp32
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Partial { float partial[]; };
layout(set = 0, binding = 1) writeonly buffer Result { float c[]; };
layout(push_constant) uniform Sizes { uint count; uint slices; } sizes;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < sizes.count; i += stride) {
        float sum = 0.0;
        for (uint s = 0; s < sizes.slices; ++s) {
            sum += partial[s * sizes.count + i];
        }
        c[i] = sum;
    }
}
