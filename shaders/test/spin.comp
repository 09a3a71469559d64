#version 450
// A deliberately long shader: each invocation runs a dependent integer recurrence `iterations` times.
// Used to provoke a fence timeout; the result is stored so the loop cannot be optimized away.
// Keep iterations <= 65535: llvmpipe (lavapipe) stops loops after that many iterations per invocation.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { uint values[]; };
layout(push_constant) uniform Push { uint iterations; } push;

void main() {
    uint state = gl_GlobalInvocationID.x + 1u;
    for (uint i = 0u; i < push.iterations; ++i) {
        state = state * 1664525u + 1013904223u;
    }
    values[gl_GlobalInvocationID.x] = state;
}
