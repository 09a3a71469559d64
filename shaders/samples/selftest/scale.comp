#version 450
// @variants OFFSET=0|3
// Framework self-test without cooperative matrices (runs on lavapipe): destination[i] = source[i] * SCALE + OFFSET.
// Used by tests/test_samples.py to exercise vkcoop.samples.base end to end (cases, specialization, compare).
layout(constant_id = 0) const float SCALE = 1.0;
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer Source { float source[]; };
layout(set = 0, binding = 1) buffer Destination { float destination[]; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < source.length()) {
        destination[i] = source[i] * SCALE + float(OFFSET);
    }
}
