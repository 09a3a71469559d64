#version 450
#extension GL_EXT_buffer_reference : require
// Reads its input through a device address in push constants (as decode functions do) and doubles it.
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Floats { float values[]; };
layout(set = 0, binding = 0) writeonly buffer Out { float result[]; };
layout(push_constant) uniform Push { Floats source; uint count; } push;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < push.count) {
        result[i] = 2.0 * push.source.values[i];
    }
}
