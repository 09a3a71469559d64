// Expanding vkcoop's 2:4 format (vkcoop/sparse/two_four.py) back to dense 16-bit elements, 16 columns at a time, on
// 32- and 64-bit words (no 16-bit types needed, so the portable test shader runs it on any device with shaderInt64).
//   values:   one uvec4 = 8 kept 16-bit values = 4 chunks of 4 columns, word c holding chunk c's two values
//             (the lower K in the low half);
//   nibbles:  the 16 metadata bits of those chunks, chunk c in bits 4c..4c+3 as idx0 | idx1 << 2.
// Result: 16 dense elements as two uvec4, zeros where nothing was kept.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : enable

// Position p of a chunk is bits 16p..16p+15 of a 64-bit word: v0 shifted to position i0, v1 to i1 (the kept positions
// differ, so OR is enough), then the two 32-bit halves: shifts instead of a comparison and a select per position
// (on the H100 the staged 2:4 kernel +4 % at 8192^3 and 9-10 % less time at N = 16 and 32; docs/gemm.md).
uvec2 expand_chunk(uint pair, uint nibble) {
    const uint shift0 = (nibble << 4) & 0x30u;   // 16 * idx0
    const uint shift1 = (nibble << 2) & 0x30u;   // 16 * idx1
    const uint64_t placed = (uint64_t(pair & 0xFFFFu) << shift0) | (uint64_t(pair >> 16) << shift1);
    return unpack32(placed);
}

void expand16(uvec4 values, uint nibbles, out uvec4 first, out uvec4 second) {
    first = uvec4(expand_chunk(values.x, nibbles & 0xFu), expand_chunk(values.y, (nibbles >> 4) & 0xFu));
    second = uvec4(expand_chunk(values.z, (nibbles >> 8) & 0xFu), expand_chunk(values.w, (nibbles >> 12) & 0xFu));
}
