#version 450
// dst[i] = src[i] + addend: two dispatches in one command buffer (a -> b, then b -> c) check that the runtime's
// barrier makes the first dispatch's writes visible to the second.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push { float addend; uint count; } push;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < push.count) {
        dst[i] = src[i] + push.addend;
    }
}
