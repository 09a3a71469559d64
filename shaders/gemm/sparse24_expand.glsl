// Expanding vkcoop's 2:4 format (vkcoop/sparse.py) back to dense 16-bit elements, 16 columns at a time, on
// 32-bit words only (no 16-bit types needed, so the portable test shader can run it anywhere).
//   values:   one uvec4 = 8 kept 16-bit values = 4 chunks of 4 columns, word c holding chunk c's two values
//             (the lower K in the low half);
//   nibbles:  the 16 metadata bits of those chunks, chunk c in bits 4c..4c+3 as idx0 | idx1 << 2.
// Result: 16 dense elements as two uvec4, zeros where nothing was kept.

// Position p of a chunk lands in word p >> 1 at bit 16 * (p & 1); the kept positions differ, so OR is enough.
uvec2 expand_chunk(uint pair, uint nibble) {
    uint i0 = nibble & 3u;
    uint i1 = (nibble >> 2) & 3u;
    uint v0 = pair & 0xFFFFu;
    uint v1 = pair >> 16;
    uint low = (i0 < 2u ? v0 << (16u * i0) : 0u) | (i1 < 2u ? v1 << (16u * i1) : 0u);
    uint high = (i0 >= 2u ? v0 << (16u * (i0 - 2u)) : 0u) | (i1 >= 2u ? v1 << (16u * (i1 - 2u)) : 0u);
    return uvec2(low, high);
}

void expand16(uvec4 values, uint nibbles, out uvec4 first, out uvec4 second) {
    first = uvec4(expand_chunk(values.x, nibbles & 0xFu), expand_chunk(values.y, (nibbles >> 4) & 0xFu));
    second = uvec4(expand_chunk(values.z, (nibbles >> 8) & 0xFu), expand_chunk(values.w, (nibbles >> 12) & 0xFu));
}
