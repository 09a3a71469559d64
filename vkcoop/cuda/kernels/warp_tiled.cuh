// What the warp-tiled kernels share: the 2:4 mma.sp kernels (mma_sp.cu, mma_sp_pipelined.cuh) and the dense
// mma.sync kernel (mma_dense.cu). Both fill a ring of shared-memory slices by cp.async, read fragments through
// ldmatrix from swizzled rows, multiply with warp-level m16n8 MMAs into fp32 accumulators and store C in m16n8
// fragments; both split K for skinny problems by the two split kernels at the end of this file, written once over
// either kernel's mainloop.
#pragma once
#include "common.cuh"

namespace warp_tiled {

// Every warp-tiled kernel's dynamic shared memory: its ring of slices, and where a cluster split leaves its partial
// tile. (Declared once for all, so that the mainloop and the split kernel around it address the same array.)
extern __shared__ __align__(128) unsigned char smem[];

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

// The 2:4 MMA, the same instruction for both input types T ("f16", "bf16"): D += A*B with D in fp32.
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

// The tiles of TILE along a side of `size`: CLIPPED, the last may cross the edge; else `size` is whole tiles.
template <int TILE, bool CLIPPED>
VK_DEVICE int tiles_over(int size) {
  if constexpr (CLIPPED)
    return (size + TILE - 1) / TILE;
  else
    return size / TILE;
}

// Where this thread works: its lane, its warp's place in the WARPS_M x WARPS_N grid, and the CTA's tile of C.
struct Place {
  int tid, lane, warp_m, warp_n, m0, n0;
};

// `at` for tile `linear` of BM x BN tiles over the M x N problem (tiles_over), in grouped raster of GROUP_M row
// tiles per group. (A function rather than a member template: called on a fresh local, a member template draws
// nvcc's "used before its value is set".)
template <int BM, int BN, int WARPS_N, int GROUP_M, bool CLIPPED>
VK_DEVICE void init_place(Place& at, int M, int N, int linear) {
  at.tid = threadIdx.x;
  at.lane = at.tid & 31;
  at.warp_m = (at.tid >> 5) / WARPS_N;
  at.warp_n = (at.tid >> 5) % WARPS_N;
  int tile_m, tile_n;
  grouped_tile(linear, tiles_over<BM, CLIPPED>(M), tiles_over<BN, CLIPPED>(N), GROUP_M, tile_m, tile_n);
  at.m0 = tile_m * BM;
  at.n0 = tile_n * BN;
}

// The stage after `stage` in a ring of STAGES.
template <int STAGES>
VK_DEVICE int ring_next(int stage) { return stage + 1 == STAGES ? 0 : stage + 1; }

// After the copies of the step before last (a pipelined mainloop's Copier): commit them and wait until the next
// slice has landed; past the barrier nobody reads this slice, so its stage may be refilled.
template <int STAGES, class Copier>
VK_DEVICE void hand_over(Copier& cp) {
  cp.advance();
  cp_async_commit();
  cp_async_wait<STAGES - 2>();
  __syncthreads();
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

// Two elements of C at (row, col) and (row, col + 1). With N even a pair is one aligned 32-bit store (whole or out);
// with N odd each element is stored alone, the second only inside C.
template <bool kBf16>
VK_DEVICE void store_pair(u16* __restrict__ c, int N, int row, int col, float lo, float hi) {
  const u32 pair = pack2<kBf16>(lo, hi);
  if ((N & 1) == 0) {
    *reinterpret_cast<u32*>(c + (size_t)row * N + col) = pair;
  } else {
    c[(size_t)row * N + col] = (u16)(pair & 0xFFFFu);
    if (col + 1 < N) c[(size_t)row * N + col + 1] = (u16)(pair >> 16);
  }
}

// One m16n8 fragment of C whose first element is (row, col): thread (g, t) owns rows g and g + 8, columns 2t and
// 2t + 1. CLIPPED (tiles over C's edges): outputs past M or N are not stored; else every one lies inside C.
template <bool kBf16, bool CLIPPED>
VK_DEVICE void store_fragment(u16* __restrict__ c, int M, int N, const float (&v)[4], int row, int col, int lane) {
  row += lane >> 2;
  col += 2 * (lane & 3);
  if constexpr (CLIPPED) {
    if (col >= N) return;
    if (row < M) store_pair<kBf16>(c, N, row, col, v[0], v[1]);
    if (row + 8 < M) store_pair<kBf16>(c, N, row + 8, col, v[2], v[3]);
  } else {
    *reinterpret_cast<u32*>(c + (size_t)row * N + col) = pack2<kBf16>(v[0], v[1]);
    *reinterpret_cast<u32*>(c + (size_t)(row + 8) * N + col) = pack2<kBf16>(v[2], v[3]);
  }
}

// Every fragment of a warp tile whose first element in C is (row0, col0).
template <bool kBf16, bool CLIPPED, int MT, int NT>
VK_DEVICE void store_accumulators(u16* __restrict__ c, int M, int N, const float (&acc)[MT][NT][4], int row0,
                                  int col0, int lane) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
      store_fragment<kBf16, CLIPPED>(c, M, N, acc[i][j], row0 + i * 16, col0 + j * 8, lane);
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

// A float4 of another CTA's shared memory (an address from cluster_map, common.cuh).
VK_DEVICE void cluster_load4(float (&v)[4], u32 addr) {
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "r"(addr)
               : "memory");
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

// The split kernels run the K loop of a mainloop `Tile` (mma_sp::Kernel, mma_dense::Kernel), which provides:
//   THREADS, SMEM_BYTES; MT, NT (m16 and n8 blocks of a warp tile), WM, WN (a warp tile's rows and columns);
//   TILE_M, TILE_N, TILE_K (a CTA tile and a K slice), IS_BF16, and CLIPPED (whether its tiles and slices may cross
//   C's edges and K's end: tiles_over, store_fragment); place(at, M, N, linear): init_place for tile `linear`;
//   accumulate(acc, inputs..., at, M, N, K, kt0, count): acc = the product over slices kt0 .. kt0 + count - 1.
// The inputs are the kernel's operand pointers (mma.sp: values, metadata, B^T; dense: A, B^T), passed through.

// Split-K through global memory, for skinny problems (N of 16 to 64, where the tiles of C leave most SMs idle and
// each CTA would walk all of K alone). CTA (tile, split) runs the mainloop over its share of the slices and writes
// its fp32 partial tile to `partials` ([tile][split][fragment][thread] float4s). The last CTA of a tile to arrive
// (a counter per tile) adds the partials up in split order, the same order whichever CTA came last, so results
// repeat bit for bit; it stores C and puts the counter back to 0 for the next launch.
template <class Tile>
struct SplitKernel {
  static constexpr int THREADS = Tile::THREADS, SMEM_BYTES = Tile::SMEM_BYTES;
  static constexpr int MT = Tile::MT, NT = Tile::NT;

  // acc = the product over split `split`'s share of the slices (the last share may be short or empty).
  template <class... In>
  static VK_DEVICE void accumulate_split(float (&acc)[MT][NT][4], const Place& at, int M, int N, int K, int split,
                                         int splits, const In* __restrict__... in) {
    const int k_tiles = tiles_over<Tile::TILE_K, Tile::CLIPPED>(K), per = (k_tiles + splits - 1) / splits;
    const int kt0 = split * per;
    Tile::accumulate(acc, in..., at, M, N, K, kt0, max(0, min(per, k_tiles - kt0)));
  }

  template <class... In>
  static VK_DEVICE void run(u16* __restrict__ c, float4* partials, int* arrivals, int M, int N, int K, int splits,
                            const In* __restrict__... in) {
    __shared__ int last;
    const int tiles = tiles_over<Tile::TILE_M, Tile::CLIPPED>(M) * tiles_over<Tile::TILE_N, Tile::CLIPPED>(N);
    const int tile = blockIdx.x % tiles, split = blockIdx.x / tiles;
    Place at;
    Tile::place(at, M, N, tile);
    float acc[MT][NT][4];
    accumulate_split(acc, at, M, N, K, split, splits, in...);

    float4* tile_partials = partials + (size_t)tile * splits * MT * NT * THREADS;
    write_partial<THREADS>(tile_partials + (size_t)split * MT * NT * THREADS, acc, at.tid);
    __threadfence();  // the partial reaches L2 before this CTA is counted
    __syncthreads();
    if (at.tid == 0) last = atomicAdd(arrivals + tile, 1) == splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();  // every other split's partial is visible to the loads below
    add_partials<THREADS>(acc, tile_partials, splits, at.tid);
    store_accumulators<Tile::IS_BF16, Tile::CLIPPED>(c, M, N, acc, at.m0 + at.warp_m * Tile::WM,
                                                     at.n0 + at.warp_n * Tile::WN, at.lane);
    if (at.tid == 0) arrivals[tile] = 0;
  }
};

// Split-K whose partial tiles stay on chip (Hopper's thread-block clusters): the `splits` CTAs of a tile are one
// cluster, launched with cluster dimension (splits, 1, 1) (vkcoop.cuda.driver.launch's `cluster`; at most 8, the
// portable size). Each CTA runs the mainloop over its share of the slices and leaves its fp32 partial tile in its
// own shared memory ([fragment][thread] float4s, where the ring was); after a cluster barrier, CTA r adds fragments
// r, r + splits, ... of every partial, read through distributed shared memory in split order from zero (the bits
// SplitKernel gives), and stores them to C. No partial buffer in global memory, no counters, no fence to L2: the
// cost SplitKernel pays after its loop is one round trip to L2 for the count and one for the partials, which one
// CTA then reads alone.
template <class Tile>
struct ClusterSplitKernel {
  using Split = SplitKernel<Tile>;  // its K shares and partial layout
  static constexpr int THREADS = Tile::THREADS, SMEM_BYTES = Tile::SMEM_BYTES;
  static constexpr int MT = Tile::MT, NT = Tile::NT, FRAGMENTS = MT * NT;
  static constexpr int MAX_SPLITS = 8;  // the portable cluster size; the launcher never asks for more
  static_assert(FRAGMENTS * THREADS * 16 <= SMEM_BYTES, "the partial tile must fit where the ring was");

  template <class... In>
  static VK_DEVICE void run(u16* __restrict__ c, int M, int N, int K, const In* __restrict__... in) {
    const int splits = cluster_size(), split = cluster_rank();
    Place at;
    Tile::place(at, M, N, blockIdx.x / splits);
    float acc[MT][NT][4];
    Split::accumulate_split(acc, at, M, N, K, split, splits, in...);

    __syncthreads();  // every warp is done with the ring before it holds the partial
    write_partial<THREADS>(reinterpret_cast<float4*>(smem), acc, at.tid);
    cluster_sync_aligned();  // every partial of the tile is in its CTA's shared memory, visible to the cluster

    const u32 mine = smem_addr(smem) + at.tid * 16;
    const int row0 = at.m0 + at.warp_m * Tile::WM, col0 = at.n0 + at.warp_n * Tile::WN;
    sum_cluster_partials<THREADS, FRAGMENTS, MAX_SPLITS>(mine, split, splits, [&](int f, const float (&sum)[4]) {
      store_fragment<Tile::IS_BF16, Tile::CLIPPED>(c, M, N, sum, row0 + (f / NT) * 16, col0 + (f % NT) * 8,
                                                   at.lane);
    });
    cluster_sync_aligned();  // no CTA leaves while another still reads its shared memory
  }
};

}  // namespace warp_tiled
