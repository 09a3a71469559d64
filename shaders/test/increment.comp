#version 450
// counter[i] += step for every element: resubmitting one recorded command buffer N times adds N * step.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Counter { uint counter[]; };
layout(push_constant) uniform Push { uint count; uint step; } push;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < push.count) {
        counter[i] += push.step;
    }
}
