#version 450
// Writes a buffer larger than the L2 cache so the next timed GEMM starts with cold caches
// (`vkcoop bench --flush-l2`). Grid-stride loop: any buffer size with a bounded dispatch.
//   push constants: the buffer length in 32-bit words
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) writeonly buffer Scratch { uint words[]; };
layout(push_constant) uniform Size { uint count; } size;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < size.count; i += stride) {
        words[i] = i;
    }
}
