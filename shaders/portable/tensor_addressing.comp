#version 450
// Portable tensor addressing: the cooperative_matrix2 layout/view pseudo-code in scalar GLSL.
//
// SPV_NV_cooperative_matrix2 section 3.X "Tensor Layout and View" (matrixCoordToTensorElement and
// matrixCoordToTensorElementWithView), with the decisions of docs/spec-notes.md, exactly as
// vkcoop.tensor computes them. Needs only Vulkan 1.2 compute and 32-bit integer arithmetic: no
// cooperative matrix, no 64-bit types, so it runs on any Vulkan device (lavapipe in CI).
//
// One workgroup per case. A case is one record of RECORD_WORDS uint words (vkcoop.portable.encode_records):
//   0 ldim, 1 clamp mode, 2 op (0 load, 1 store), 3 rows, 4 cols, 5 clamp value, 6 flags
//   (bit 0 has view, bit 1 view hasDimensions, bit 2 explicit layout stride, bit 3 explicit view stride),
//   7 vdim, 8 block size[5], 13 layout dimension[5], 18 stride[5], 23 offset[5] (int32 bits), 28 span[5],
//   33 permutation[5], 38 view dimension[5], 43 view stride[5], 48 clip (row offset, row span,
//   col offset, col span).
// Output: OUT_WORDS words per matrix element, element e of case k at (k * max_elements + e) * OUT_WORDS:
//   index, status (vkcoop.tensor.ElementStatus), blockCoord[5], coordInBlock[5]
//   (index and coordinates are 0xFFFFFFFF unless the status is IN_BOUNDS; coordinates >= ldim are 0).
// The view stride is always the record's final state: the builders (setTensorLayoutDimensionNV's packed
// strides...) run in Python, so the record holds exactly the spec's logical state.

#define RECORD_WORDS 64
#define OUT_WORDS 12
#define MAX_DIM 5

#define R_LDIM 0
#define R_MODE 1
#define R_OP 2
#define R_ROWS 3
#define R_COLS 4
#define R_FLAGS 6
#define R_VDIM 7
#define R_BLOCK 8
#define R_DIM 13
#define R_STRIDE 18
#define R_OFFSET 23
#define R_SPAN 28
#define R_PERM 33
#define R_VIEW_DIM 38
#define R_VIEW_STRIDE 43
#define R_CLIP 48

#define FLAG_VIEW 1u
#define FLAG_HAS_DIMENSIONS 2u

// ClampMode and ElementStatus values (vkcoop.tensor).
#define MODE_UNDEFINED 0u
#define MODE_CONSTANT 1u
#define MODE_CLAMP_TO_EDGE 2u
#define MODE_REPEAT 3u
#define MODE_MIRROR_REPEAT 4u
#define STATUS_IN_BOUNDS 0u
#define STATUS_CLAMP_VALUE 1u
#define STATUS_DISCARDED 2u
#define STATUS_SKIPPED_BY_CLIP 3u
#define STATUS_UNDEFINED 4u
#define NONE 0xFFFFFFFFu

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) writeonly buffer Results { uint results[]; };
layout(push_constant) uniform Push {
    uint case_count;
    uint max_elements;   // output slots per case (>= rows * cols of every case)
} push;

uint rec(uint base, uint word) { return records[base + word]; }

// OpSMod of an int32 by a positive uint32 divisor (the result takes the divisor's sign, i.e. floor
// modulo), without overflow for any divisor up to 0xFFFFFFFF: -(c + 1) never overflows.
uint floor_mod(int c, uint d) {
    if (c >= 0) {
        return uint(c) % d;
    }
    return d - 1u - (uint(-(c + 1)) % d);
}

// MirrorRepeat of an out-of-bounds c (docs/spec-notes.md 1, 2): period 2L-2 with L the layout dimension,
// every c maps to 0 when L == 1. For L > 2^31 the period does not fit 32 bits; then c < 0 (an int32 is
// never >= L) and c smod (2L-2) = 2L-2+c because -c <= 2^31 < 2L-2.
uint mirror_repeat(int c, uint L) {
    if (L == 1u) {
        return 0u;
    }
    if (L > 0x80000000u) {
        // Is 2L-2+c >= L, i.e. L-2+c >= 0 (L-2 >= 2^31-1 and c >= -2^31, so the test is exact in uint)?
        if (L - 2u >= uint(-(c + 1)) + 1u) {
            return uint(-(c + 1)) + 1u;                // period - (2L-2+c) = -c
        }
        return 2u * L - 2u + uint(c);                  // wraps to the true value, which is < L
    }
    uint period = 2u * L - 2u;
    uint m = floor_mod(c, period);
    return (m >= L) ? period - m : m;
}

void main() {
    uint case_index = gl_WorkGroupID.x;
    if (case_index >= push.case_count) {
        return;
    }
    uint base = case_index * RECORD_WORDS;
    uint ldim = rec(base, R_LDIM);
    uint mode = rec(base, R_MODE);
    bool is_store = rec(base, R_OP) != 0u;
    uint rows = rec(base, R_ROWS);
    uint cols = rec(base, R_COLS);
    uint flags = rec(base, R_FLAGS);
    uint vdim = rec(base, R_VDIM);
    bool has_view = (flags & FLAG_VIEW) != 0u;
    bool has_dimensions = (flags & FLAG_HAS_DIMENSIONS) != 0u;

    for (uint e = gl_LocalInvocationID.x; e < rows * cols; e += gl_WorkGroupSize.x) {
        uint row = e / cols;
        uint col = e % cols;
        uint status = STATUS_IN_BOUNDS;
        uint index;

        if (has_view) {
            // matrixCoordToLinear(t, v, row, col, N): the clip test evaluates offset + span without
            // uint32 wraparound (spec-notes 9), i.e. row - offset < span once row >= offset.
            uint clip_row_offset = rec(base, R_CLIP), clip_row_span = rec(base, R_CLIP + 1u);
            uint clip_col_offset = rec(base, R_CLIP + 2u), clip_col_span = rec(base, R_CLIP + 3u);
            if (row < clip_row_offset || row - clip_row_offset >= clip_row_span ||
                col < clip_col_offset || col - clip_col_offset >= clip_col_span) {
                status = STATUS_SKIPPED_BY_CLIP;
            }
            // The row width is min(N, clipColSpan), not N - clipColOffset (spec-notes 10).
            index = (row - clip_row_offset) * min(cols, clip_col_span) + (col - clip_col_offset);

            // linearToViewCoord: peel coordinates in permuted order, innermost first.
            uint view_coord[MAX_DIM];
            for (uint d = vdim; d-- > 0u;) {
                uint i = rec(base, R_PERM + d);
                uint extent = has_dimensions ? rec(base, R_VIEW_DIM + i) : rec(base, R_SPAN + i);
                view_coord[i] = index % extent;
                index /= extent;
            }
            // viewCoordToLinear: explicit view strides, or the packed strides of the layout span.
            index = 0u;
            uint packed = 1u;
            for (uint d = vdim; d-- > 0u;) {
                uint stride = has_dimensions ? rec(base, R_VIEW_STRIDE + d) : packed;
                index += view_coord[d] * stride;
                packed *= rec(base, R_SPAN + d);
            }
        } else {
            index = row * cols + col;   // matrixCoordToLinear
        }

        // linearToSpanCoord, then spanCoordToTensorCoord (the outermost coordinate wraps modulo span[0]).
        uint span_coord[MAX_DIM];
        for (uint d = ldim; d-- > 0u;) {
            uint span = rec(base, R_SPAN + d);
            span_coord[d] = index % span;
            index /= span;
        }
        uint block_coord[MAX_DIM];
        uint coord_in_block[MAX_DIM];
        for (uint d = 0u; d < MAX_DIM; ++d) {
            block_coord[d] = 0u;
            coord_in_block[d] = 0u;
        }
        for (uint d = 0u; d < ldim && status == STATUS_IN_BOUNDS; ++d) {
            int c = int(span_coord[d] + rec(base, R_OFFSET + d));   // int32, wrapping (spec-notes 6)
            uint L = rec(base, R_DIM + d);
            if (c < 0 || uint(c) >= L) {
                if (is_store && mode != MODE_UNDEFINED) {
                    status = STATUS_DISCARDED;
                } else if (mode == MODE_UNDEFINED) {
                    status = STATUS_UNDEFINED;
                } else if (mode == MODE_CONSTANT) {
                    status = STATUS_CLAMP_VALUE;
                } else if (L == 0u) {
                    status = STATUS_UNDEFINED;               // remapping against an empty dimension (spec-notes 4)
                } else if (mode == MODE_CLAMP_TO_EDGE) {
                    c = (c < 0) ? 0 : int(L - 1u);           // c >= L >= 1 here, so L - 1 < 2^31
                } else if (mode == MODE_REPEAT) {
                    c = int(floor_mod(c, L));
                } else {
                    c = int(mirror_repeat(c, L));
                }
                if (status != STATUS_IN_BOUNDS) {
                    break;
                }
            }
            uint block = rec(base, R_BLOCK + d);
            coord_in_block[d] = uint(c) % block;             // c >= 0 here: smod == %
            block_coord[d] = uint(c) / block;
        }

        // tensorCoordToLinear
        uint tensor_index = 0u;
        for (uint d = 0u; d < ldim; ++d) {
            tensor_index += block_coord[d] * rec(base, R_STRIDE + d);
        }

        uint out_base = (case_index * push.max_elements + e) * OUT_WORDS;
        bool valid = status == STATUS_IN_BOUNDS;
        results[out_base] = valid ? tensor_index : NONE;
        results[out_base + 1u] = status;
        for (uint d = 0u; d < MAX_DIM; ++d) {
            results[out_base + 2u + d] = valid ? block_coord[d] : NONE;
            results[out_base + 7u + d] = valid ? coord_in_block[d] : NONE;
        }
    }
}
