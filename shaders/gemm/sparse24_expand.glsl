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

// The tile-major layout's pattern code (vkcoop/gemm/tile_major.py): chunk c (0..7, a constant once unrolled) of a
// metadata word has bit c (the chunk's low word keeps the pair's high half), bit 16 + c (it keeps the pair's low
// half) and bit 8 + c (a diagonal pattern, (0,2) or (1,3)); the pairs of (1,2) and (1,3) arrive swapped. The kept
// halves come from one 32 x 32 -> 64-bit multiply: (word & (0x10001 << c)) * (0xFFFF << (16 - c)) is the mask of the
// pair's low half in its high word and that of the pair's high half in its low word. Then the low word is pair & keep and the high word
// rotated & keep (diagonal) or pair & ~keep: masks, a rotation and a select instead of the 64-bit variable shifts
// of expand_chunk.
uvec2 expand_pattern(uint pair, uint word, const uint c) {
    uint low_half, high_half;
    umulExtended(word & (0x00010001u << c), 0xFFFFu << (16u - c), low_half, high_half);
    const uint keep = low_half | high_half;
    const uint rotated = (pair << 16) | (pair >> 16);
    const bool diagonal = (word & (0x100u << c)) != 0u;
    return uvec2(pair & keep, diagonal ? rotated & keep : pair & ~keep);
}

// The 16 columns of one value vector: chunks first_chunk .. first_chunk + 3 of the metadata word.
void expand16_patterns(uvec4 values, uint word, const uint first_chunk, out uvec4 first, out uvec4 second) {
    first = uvec4(expand_pattern(values.x, word, first_chunk), expand_pattern(values.y, word, first_chunk + 1u));
    second = uvec4(expand_pattern(values.z, word, first_chunk + 2u), expand_pattern(values.w, word, first_chunk + 3u));
}
