// Test only: one planted fault for each compute-sanitizer tool (tests/test_cuda_sanitizer.py launches them through
// vkcoop.cuda.sanitize_child and asserts that the tool reports each, every time), and one probe of what racecheck
// sees across a thread-block cluster (recorded, not asserted: docs/sanitizers.md). Never part of a shipped build.
#include "common.cuh"

// memcheck: no bounds guard. Launched with more threads than `out` holds floats, the threads past `count` write
// past the end of the allocation.
extern "C" __global__ void planted_oob_write(float* out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = static_cast<float>(count);
}

// racecheck: two warps, no barrier. Each thread writes its cell, then reads the cell a thread of the other warp
// wrote: a read-after-write hazard between warps on shared memory (a __syncthreads() between would remove it).
extern "C" __global__ void planted_shared_race(float* out) {
  __shared__ float cells[64];
  const int t = threadIdx.x;
  cells[t] = static_cast<float>(t);
  out[t] = cells[(t + 32) % 64];
}

// initcheck: `in` comes straight from cuMemAlloc, never written, and every thread reads it.
extern "C" __global__ void planted_uninitialized_read(const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] + 1.0f;
}

// synccheck: __syncthreads() reached by the even threads of each warp only (a barrier in divergent code).
extern "C" __global__ void planted_divergent_barrier(float* out) {
  const int t = threadIdx.x;
  if (t % 2 == 0) {
    __syncthreads();
  }
  out[t] = static_cast<float>(t);
}

// Probe (a cluster of two CTAs): CTA 1 writes into CTA 0's shared memory through distributed shared memory while
// CTA 0 reads the same cells, with no cluster barrier between the write and the read. The cluster barriers around
// keep both CTAs alive while the other touches its memory.
extern "C" __global__ void __cluster_dims__(2, 1, 1) probe_cluster_race(float* out) {
  __shared__ float cells[32];
  const int t = threadIdx.x;
  cells[t] = 0.0f;
  cluster_sync_aligned();
  if (cluster_rank() == 1) {
    const u32 remote = cluster_map(smem_addr(&cells[t]), 0);
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(1.0f) : "memory");
  } else {
    out[t] = cells[t];
  }
  cluster_sync_aligned();
}
