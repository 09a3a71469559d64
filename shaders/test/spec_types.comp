#version 450
// Writes one specialization constant of each scalar kind, as raw 32-bit words, so the runtime's packing of
// uint, int, float and bool constants can be checked bit for bit.
layout(local_size_x = 1) in;
layout(constant_id = 1) const uint UNSIGNED_VALUE = 0u;
layout(constant_id = 2) const int SIGNED_VALUE = 0;
layout(constant_id = 3) const float FLOAT_VALUE = 0.0;
layout(constant_id = 4) const bool BOOL_VALUE = false;
layout(set = 0, binding = 0) writeonly buffer Out { uint words[4]; };

void main() {
    words[0] = UNSIGNED_VALUE;
    words[1] = uint(SIGNED_VALUE);
    words[2] = floatBitsToUint(FLOAT_VALUE);
    words[3] = BOOL_VALUE ? 1u : 0u;
}
