#version 450
#extension GL_KHR_shader_subgroup_basic : require
// Reports gl_SubgroupSize and gl_NumSubgroups, to check a required subgroup size took effect.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer Out { uint sizes[2]; };

void main() {
    if (gl_LocalInvocationIndex == 0u) {
        sizes[0] = gl_SubgroupSize;
        sizes[1] = gl_NumSubgroups;
    }
}
