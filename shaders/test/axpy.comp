#version 450
// out[i] = a * x[i] + y[i] for i < count; a and count come from push constants.
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float result[]; };
layout(push_constant) uniform Push { float a; uint count; } push;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < push.count) {
        result[i] = push.a * x[i] + y[i];
    }
}
