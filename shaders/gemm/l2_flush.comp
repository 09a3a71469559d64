#version 450
// Reads a buffer larger than the L2 cache so the next timed GEMM starts with cold caches (`vkcoop bench
// --flush-l2`). Reading leaves the L2 full of clean lines, which the timed work evicts for free; writing the buffer
// left dirty lines whose write-back the timed work's reads waited for (3-10 µs a run at the memory-bound shapes on
// the H100, docs/gemm.md). Grid-stride loop of 16-byte loads: any size with a bounded dispatch.
// The loads fold into a value that is stored only if it equals `never`, so the compiler keeps them; the host keeps
// the buffer zero, whose words fold to 0.
//   push constants: the buffer length in 16-byte quads, and `never` (non-zero)
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer Scratch { uvec4 quads[]; };
layout(push_constant) uniform Size { uint count; uint never; } size;

void main() {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uvec4 folded = uvec4(0);
    for (uint i = gl_GlobalInvocationID.x; i < size.count; i += stride) {
        folded ^= quads[i];
    }
    const uint any_bits = folded.x | folded.y | folded.z | folded.w;
    if (any_bits == size.never && gl_GlobalInvocationID.x < size.count) {
        quads[gl_GlobalInvocationID.x] = uvec4(any_bits);
    }
}
