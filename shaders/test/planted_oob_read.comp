#version 450
// Test only, a planted fault: invocation i copies src[i + offset], so with offset 1 and count = src's length the
// last invocation reads one element past the end of src. GPU-assisted validation must report that read
// (tests/test_vk_gpu_validation.py); with offset 0 the same shader stays inside its buffers.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push { uint count; uint offset; } push;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < push.count) {
        dst[i] = src[i + push.offset];
    }
}
