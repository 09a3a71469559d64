#version 450
// flash_attention.comp with its trace points defined (lab/attention_trace.py reads what they write): invocation 0 of
// every workgroup writes the device clock at TRACE_EVENTS points, after a barrier so that the workgroup's earlier
// work has issued, and its SM and warp into trace[workgroup][TRACE_EVENTS] (workgroups numbered x fastest, then y,
// then z; TRACE_EVENTS + 1 entries each). Slices: 0 start, 1 first key block done, 2 key loop done, 3 output stored
// (and, with the waiting merge, counted); mergers: 0 start, 1 wait over, 2 merged. The trace buffer is bound after
// the kernel's own buffers. Compiled with flash_attention.comp's defines (ELEMENT, SPLIT_MERGE, SCOPE).
#extension GL_EXT_shader_realtime_clock : require
#extension GL_NV_shader_sm_builtins : require

void trace_point(const uint event);
void trace_block_done();
#define TRACE_POINT(EVENT) trace_point(EVENT);
#define TRACE_BLOCK_DONE trace_block_done();
#include "../../shaders/attention/flash_attention.glsl"

const uint TRACE_EVENTS = 4;
#if SPLIT_MERGE == PASS
layout(set = 0, binding = 5) writeonly buffer Trace { uvec2 trace[]; };
#else
layout(set = 0, binding = 8) writeonly buffer Trace { uvec2 trace[]; };
#endif

void trace_point(const uint event) {
    barrier();
    if (gl_LocalInvocationIndex == 0) {
        const uint workgroup = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x
                               + gl_WorkGroupID.x;
        trace[workgroup * (TRACE_EVENTS + 1) + event] = clockRealtime2x32EXT();
        if (event == 0) {
            trace[workgroup * (TRACE_EVENTS + 1) + TRACE_EVENTS] = uvec2(gl_SMIDNV, gl_WarpIDNV);
        }
    }
}

// Event 1 of a slice: its first key block done (the same in every invocation, so the barrier is uniform).
bool first_block_done = false;
void trace_block_done() {
    if (!first_block_done) {
        first_block_done = true;
        trace_point(1);
    }
}
