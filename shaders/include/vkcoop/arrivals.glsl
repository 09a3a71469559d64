// Counting which workgroup of a group finishes last, so that it can finish the group's work in the same dispatch
// (the GEMMs' split-K sum). The including shader declares
//   devicecoherent buffer ... { uint arrivals[]; };
// whose counters start at zero (a zero-filled buffer); the last arrival sets its counter back to zero, so the next
// launch finds it so.
#ifndef VKCOOP_ARRIVALS_GLSL
#define VKCOOP_ARRIVALS_GLSL
#extension GL_KHR_memory_scope_semantics : enable

shared bool arrived_last;

// Whether this workgroup is the last of `count` to arrive at arrivals[slot]. Every invocation's buffer writes are
// ordered before the workgroup arrives (release), and the last one sees the others' (acquire). The buffers the
// workgroups hand over must be devicecoherent: each access is then made available (visible) to the device as it is
// made, so the barriers need only workgroup scope, and invocation 0's device-scope atomic carries the order between
// workgroups. Device-scope barriers here cost the memory-bound GEMMs 0.5-0.8 us a launch on the H100
// (docs/gemm.md, experiment G25). Called in uniform control flow.
bool arrive_last(const uint slot, const uint count) {
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
    if (gl_LocalInvocationIndex == 0) {
        const uint before = atomicAdd(arrivals[slot], 1u, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                                      gl_SemanticsAcquireRelease);
        arrived_last = before == count - 1;
        if (arrived_last) {
            atomicExchange(arrivals[slot], 0u, gl_ScopeDevice, 0, gl_SemanticsRelaxed);
        }
    }
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeWorkgroup, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease);
    return arrived_last;
}
#endif
