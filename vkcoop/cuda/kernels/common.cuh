// Small device helpers shared by the vkcoop 2:4 kernels.  No CUDA headers are
// included so the sources compile unchanged with nvcc and with NVRTC.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

#define VK_DEVICE __device__ __forceinline__

VK_DEVICE u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// fp32 pair -> packed 16-bit pair; `lo` lands at the lower address.
template <bool kBf16>
VK_DEVICE u32 pack2(float lo, float hi) {
  u32 r;
  if (kBf16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// Triton-style grouped raster: consecutive CTAs share B columns and walk a
// group of `group_m` row tiles, so A and B tiles are reused from L2.
VK_DEVICE void grouped_tile(int linear, int tiles_m, int tiles_n, int group_m,
                            int& tile_m, int& tile_n) {
  const int per_group = group_m * tiles_n;
  const int group = linear / per_group;
  const int first_m = group * group_m;
  const int rows = min(tiles_m - first_m, group_m);
  tile_m = first_m + (linear % per_group) % rows;
  tile_n = (linear % per_group) / rows;
}

// Thread-block clusters (sm_90): this CTA's rank and the cluster's size; a barrier of every thread of the cluster
// (release then acquire: shared-memory writes before it are visible to every CTA of the cluster after it), in the
// form any thread may reach and the `.aligned` form for code every thread of the CTA runs in step; and a
// shared::cta address mapped to the same offset in CTA `rank`'s shared memory.
VK_DEVICE u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
VK_DEVICE u32 cluster_size() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
VK_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
VK_DEVICE void cluster_sync_aligned() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
VK_DEVICE u32 cluster_map(u32 addr, u32 rank) {
  u32 mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(addr), "r"(rank));
  return mapped;
}
