// Device helpers of the mma.sp kernels (mma_sp.cu): cp.async, ldmatrix, the shared-memory
// swizzle, the m16n8k32 sparse MMA, and the accumulator set-up and store both kernels share.
#pragma once
#include "common.cuh"

namespace mma_sp {

VK_DEVICE void cp_async16(u32 dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
VK_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
VK_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

VK_DEVICE void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Swizzled byte offset of 16-byte chunk `chunk` in row `row` of a tile whose rows
// are CHUNKS x 16 bytes: the chunk index is XORed with row bits so the eight row
// addresses of one ldmatrix phase land in eight different 16-byte bank groups.
template <int CHUNKS>
VK_DEVICE u32 swizzled(int row, int chunk) {
  if constexpr (CHUNKS == 4) {
    return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);  // two 64-byte rows per 128 bytes
  } else {
    return row * (CHUNKS * 16) + ((chunk ^ (row & 7)) << 4);
  }
}

// The same instruction for both input types T ("f16", "bf16"): D += A*B with D in fp32.
#define VK_MMA_SP_16832(T)                                                                      \
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32." T "." T ".f32 "   \
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, %13;"        \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]),   \
                 "r"(b[3]), "r"(meta), "n"(SEL))
template <bool kBf16, int SEL>
VK_DEVICE void mma_sp_16832(float (&d)[4], const u32 (&a)[4], const u32 (&b)[4], u32 meta) {
  if (kBf16) {
    VK_MMA_SP_16832("bf16");
  } else {
    VK_MMA_SP_16832("f16");
  }
}
#undef VK_MMA_SP_16832

// k32 step `ks` of a slice: the two k32 steps of every 64-wide K block share one
// metadata register, the even step reading it with selector 0, the odd with 1.
template <bool kBf16>
VK_DEVICE void mma_sp_step(float (&d)[4], const u32 (&a)[4], const u32 (&b)[4], u32 meta, int ks) {
  if ((ks & 1) == 0)
    mma_sp_16832<kBf16, 0>(d, a, b, meta);
  else
    mma_sp_16832<kBf16, 1>(d, a, b, meta);
}

// Where this thread works: its lane, its warp's place in the WARPS_M x WARPS_N
// grid, and the CTA's BM x BN tile of C (grouped raster, groups of 8 row tiles).
template <int BM, int BN, int WARPS_N>
struct ThreadTile {
  int tid, lane, warp_m, warp_n, m0, n0;

  VK_DEVICE void init(int M, int N) { init_at(M, N, blockIdx.x); }

  // The same for the linear tile index `linear` (SplitKernel runs several CTAs on one tile).
  VK_DEVICE void init_at(int M, int N, int linear) {
    tid = threadIdx.x;
    lane = tid & 31;
    const int warp = tid >> 5;
    warp_m = warp / WARPS_N;
    warp_n = warp % WARPS_N;
    int tile_m, tile_n;
    grouped_tile(linear, M / BM, N / BN, 8, tile_m, tile_n);
    m0 = tile_m * BM;
    n0 = tile_n * BN;
  }
};

// A float4 of another CTA's shared memory (an address from cluster_map, common.cuh).
VK_DEVICE void cluster_load4(float (&v)[4], u32 addr) {
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "r"(addr)
               : "memory");
}

template <int MT, int NT>
VK_DEVICE void zero_accumulators(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
}

// Split-K partial tiles are [split][fragment][thread] float4s: a warp's stores and loads are 512 contiguous bytes.
// This thread's accumulators as one split's partial.
template <int THREADS, int MT, int NT>
VK_DEVICE void write_partial(float4* partials, const float (&acc)[MT][NT][4], int tid) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
      partials[(i * NT + j) * THREADS + tid] = make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
}

// acc = the `splits` partials of a tile added up in split order from zero: the same bits whichever CTA adds them.
template <int THREADS, int MT, int NT>
VK_DEVICE void add_partials(float (&acc)[MT][NT][4], const float4* partials, int splits, int tid) {
  zero_accumulators(acc);
  for (int s = 0; s < splits; ++s) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float4 p = __ldcg(partials + ((size_t)s * MT * NT + i * NT + j) * THREADS + tid);  // L2, not L1
        acc[i][j][0] += p.x;
        acc[i][j][1] += p.y;
        acc[i][j][2] += p.z;
        acc[i][j][3] += p.w;
      }
  }
}

// The cluster's sum of its CTAs' partial tiles, each in its CTA's shared memory (`mine`: this thread's float4 of
// fragment 0 in this CTA's): CTA `split` of `splits` adds fragments split, split + splits, ... of every partial,
// read through distributed shared memory in split order from zero (the bits add_partials gives), and hands each
// sum to store(fragment, sum).
template <int THREADS, int FRAGMENTS, int MAX_SPLITS, class Store>
VK_DEVICE void sum_cluster_partials(u32 mine, int split, int splits, Store store) {
  for (int f = split; f < FRAGMENTS; f += splits) {
    float parts[MAX_SPLITS][4];
#pragma unroll
    for (int s = 0; s < MAX_SPLITS; ++s)  // all loads in flight before the first add
      if (s < splits) cluster_load4(parts[s], cluster_map(mine + f * THREADS * 16, s));
    float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < MAX_SPLITS; ++s)
      if (s < splits)
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[e] += parts[s][e];
    store(f, sum);
  }
}

// Epilogue: thread (g, t) of an m16n8 tile owns rows g and g+8, columns 2t, 2t+1; (row, col) is the m16n8
// tile's first element in C.
template <bool kBf16>
VK_DEVICE void store_fragment(u16* __restrict__ c, int N, const float (&v)[4], int row, int col, int lane) {
  row += lane >> 2;
  col += 2 * (lane & 3);
  *reinterpret_cast<u32*>(c + (size_t)row * N + col) = pack2<kBf16>(v[0], v[1]);
  *reinterpret_cast<u32*>(c + (size_t)(row + 8) * N + col) = pack2<kBf16>(v[2], v[3]);
}

// Every fragment of a warp tile whose first element in C is (row0, col0).
template <bool kBf16, int MT, int NT>
VK_DEVICE void store_accumulators(u16* __restrict__ c, int N, const float (&acc)[MT][NT][4], int row0,
                                  int col0, int lane) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) store_fragment<kBf16>(c, N, acc[i][j], row0 + i * 16, col0 + j * 8, lane);
}

}  // namespace mma_sp
