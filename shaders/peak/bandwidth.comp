#version 450
// @variants MODE=READ|COPY
// Device-memory bandwidth for `vkcoop bench peak`: a grid-stride loop over `count` 16-byte vectors, UNROLL
// independent vectors per invocation per step. READ xors what it reads into one vector per invocation and
// writes it only when `write_all` is set (the host's check) or it equals `magic` (never, for the host's data),
// so the loads stay live and the timed run writes nothing. COPY writes every vector it reads to dst.
// Bytes moved: READ 16 * count, COPY 32 * count.
//   spec constants: 0 WORKGROUP_SIZE, 1 UNROLL
//   push constants: count (vectors), write_all, magic
//   bindings:       0 src (count uvec4), 1 dst (COPY: count uvec4; READ: one uvec4 per invocation)
#extension GL_EXT_control_flow_attributes : enable

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint UNROLL = 4;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Source { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Destination { uvec4 dst[]; };

layout(push_constant) uniform Parameters {
    uint count;
    uint write_all;
    uint magic;
} parameters;

#define READ 1
#define COPY 2

void main() {
    const uint invocations = gl_NumWorkGroups.x * WORKGROUP_SIZE;
    const uint first = gl_GlobalInvocationID.x;
    const uint count = parameters.count;
#if MODE == READ
    uvec4 folded = uvec4(0);
#endif
    for (uint base = first; base < count; base += invocations * UNROLL) {
        [[unroll]] for (uint u = 0; u < UNROLL; ++u) {
            const uint index = base + u * invocations;
            if (index < count) {
#if MODE == READ
                folded ^= src[index];
#elif MODE == COPY
                dst[index] = src[index];
#else
#error "MODE must be READ or COPY"
#endif
            }
        }
    }
#if MODE == READ
    if (parameters.write_all != 0u || all(equal(folded, uvec4(parameters.magic)))) {
        dst[first] = folded;
    }
#endif
}
