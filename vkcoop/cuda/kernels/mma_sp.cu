// 2:4 sparse GEMM with warp-level mma.sp::ordered_metadata m16n8k32 (sm_80+).
//
//   C[M][N] = A[M][K] * B[K][N],  A 2:4 sparse along K, fp32 accumulation,
//   C stored in the input type (fp16 or bf16).
//
// Operands (all row-major, device pointers):
//   a_values [M][K/2]            the shared format's kept values (vkcoop.sparse)
//   a_meta   [M/16][K/64][32]    the shared metadata reordered per lane
//                                (vkcoop.cuda.layout.reorder_metadata_for_mma)
//   b_t      [N][K]              B stored column-major (B^T row-major): the
//                                natural layout of LLM activations
//   c        [M][N]
// Requirements (checked in Python before launch): M % BM == 0, N % BN == 0, K % 64 == 0.
//
// Pipeline: a STAGES-deep ring of shared-memory slices filled by cp.async
// (16-byte copies, one commit group per K slice); fragments come from shared
// memory through ldmatrix; each 64-wide K slice is two k32 MMA steps that share
// one metadata register, using sparsity selector 0 then 1 (PTX ISA 9.7.14.6).
//
// Two kernels: Kernel (straightforward: one copy burst and one barrier per
// slice, 447 TFLOP/s at 8192^3 on the H200) and PipelinedKernel (copies spread
// over the k32 steps, fragments double-buffered across steps and slices, the
// barrier before the last step: 733 TFLOP/s, 0.54-0.56x cuSPARSELt).  The
// launcher's "auto" picks the pipelined one; docs/cuda-sparse.md has the sweep (C11-C14).
// Skinny problems split K over Kernel's loop (warp_tiled::SplitKernel, ClusterSplitKernel).
// PipelinedKernel is in mma_sp_pipelined.cuh; the helpers, the MMA and the split
// kernels, which the dense mma.sync kernel shares, in warp_tiled.cuh.  The kernel
// bodies are split into forceinline device functions; the split left every kernel's
// SASS byte-identical, where some other cuts of the same code did not
// (docs/cuda-sparse.md, C15): check again after reshaping them.
#include "warp_tiled.cuh"
#include "mma_sp_pipelined.cuh"

namespace mma_sp {

using namespace warp_tiled;

// BK: dense K per pipeline stage (64 or 128) = BK/32 k32 MMA steps sharing
// BK/64 metadata registers (selector 0 then 1 on each).
template <bool kBf16, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES>
struct Kernel {
  static constexpr bool IS_BF16 = kBf16;
  static constexpr bool CLIPPED = false;  // M, N and K are whole tiles (checked in Python)
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MT = WM / 16, NT = WN / 8;
  static constexpr int KSTEPS = BK / 32, KBLOCKS = BK / 64;
  static constexpr int A_CHUNKS = BK / 16;  // 16-byte chunks per compressed A row (BK/2 halves)
  static constexpr int B_CHUNKS = BK / 8;   // per B^T row (BK halves)
  static constexpr int A_STAGE = BM * A_CHUNKS * 16;
  static constexpr int B_STAGE = BN * B_CHUNKS * 16;
  static constexpr int M_STAGE = (BM / 16) * KBLOCKS * 32 * 4;
  static constexpr int STAGE_BYTES = A_STAGE + B_STAGE + M_STAGE;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
  static_assert(BK == 64 || BK == 128, "BK must be 64 or 128");
  static_assert(WM % 16 == 0 && WN % 8 == 0, "warp tile must be a multiple of m16n8");

  // Tile `linear` of C (grouped raster, groups of 8 row tiles).
  static VK_DEVICE void place(Place& at, int M, int N, int linear) {
    init_place<BM, BN, WARPS_N, 8, CLIPPED>(at, M, N, linear);
  }

  // Slice kt of A, B^T and the metadata into the stage at stage_base: 16-byte cp.async
  // copies, the threads striding over the chunks of each operand.
  static VK_DEVICE void load_stage(u32 stage_base, const u16* a_values, const u32* a_meta,
                                   const u16* b_t, int m0, int n0, int kt, int K, int tid) {
    const int half_k = K / 2;
    for (int i = tid; i < BM * A_CHUNKS; i += THREADS) {
      const int row = i / A_CHUNKS, chunk = i % A_CHUNKS;
      cp_async16(stage_base + swizzled<A_CHUNKS>(row, chunk),
                 a_values + (size_t)(m0 + row) * half_k + kt * (BK / 2) + chunk * 8);
    }
    const u32 b_base = stage_base + A_STAGE;
    for (int i = tid; i < BN * B_CHUNKS; i += THREADS) {
      const int row = i / B_CHUNKS, chunk = i % B_CHUNKS;
      cp_async16(b_base + swizzled<B_CHUNKS>(row, chunk),
                 b_t + (size_t)(n0 + row) * K + kt * BK + chunk * 8);
    }
    // metadata: per 16-row block, KBLOCKS consecutive 32-word lane blocks (contiguous in global)
    const u32 m_base = b_base + B_STAGE;
    const int k_blocks = K / 64;
    constexpr int CHUNKS_PER_BLOCK = KBLOCKS * 8;
    for (int i = tid; i < (BM / 16) * CHUNKS_PER_BLOCK; i += THREADS) {
      const int block = i / CHUNKS_PER_BLOCK, chunk = i % CHUNKS_PER_BLOCK;
      cp_async16(m_base + block * CHUNKS_PER_BLOCK * 16 + chunk * 16,
                 a_meta + ((size_t)(m0 / 16 + block) * k_blocks + kt * KBLOCKS) * 32 + chunk * 4);
    }
  }

  // The warp's metadata registers for one slice, one per 16-row block and 64-wide K block.
  static VK_DEVICE void load_meta(u32 (&meta)[MT][KBLOCKS], const u32* meta_stage, int warp_m, int lane) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int kb = 0; kb < KBLOCKS; ++kb)
        meta[i][kb] = meta_stage[((warp_m * MT + i) * KBLOCKS + kb) * 32 + lane];
  }

  // The A and B fragments of k32 step ks from the slice at `stage`, through ldmatrix.
  static VK_DEVICE void load_fragments(u32 (&a_frag)[MT][4], u32 (&b_frag)[NT][4], u32 stage, int ks,
                                       int warp_m, int warp_n, int lane) {
    const u32 b_stage = stage + A_STAGE;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int row = warp_m * WM + i * 16 + (lane & 15);
      ldmatrix_x4(a_frag[i], stage + swizzled<A_CHUNKS>(row, ks * 2 + (lane >> 4)));
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int row = warp_n * WN + j * 8 + (lane & 7);
      ldmatrix_x4(b_frag[j], b_stage + swizzled<B_CHUNKS>(row, ks * 4 + (lane >> 3)));
    }
  }

  // The MT x NT MMAs of k32 step ks.
  static VK_DEVICE void mma_tile(float (&acc)[MT][NT][4], const u32 (&a_frag)[MT][4], const u32 (&b_frag)[NT][4],
                                 const u32 (&meta)[MT][KBLOCKS], int ks) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_sp_step<kBf16>(acc[i][j], a_frag[i], b_frag[j], meta[i][ks >> 1], ks);
  }

  // acc = the product over slices kt0 .. kt0 + count - 1: the prologue fills STAGES - 1 slices of the ring
  // (one commit group each, empty past the end), then one barrier per slice. (M and N, which the dense kernel's
  // copies clip at, are whole tiles here.)
  static VK_DEVICE void accumulate(float (&acc)[MT][NT][4], const u16* __restrict__ a_values,
                                   const u32* __restrict__ a_meta, const u16* __restrict__ b_t, const Place& at,
                                   int M, int N, int K, int kt0, int count) {
    const u32 smem_base = smem_addr(smem);
    const int tid = at.tid, lane = at.lane, warp_m = at.warp_m, warp_n = at.warp_n, m0 = at.m0, n0 = at.n0;
    zero_accumulators(acc);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < count) load_stage(smem_base + s * STAGE_BYTES, a_values, a_meta, b_t, m0, n0, kt0 + s, K, tid);
      cp_async_commit();
    }

    for (int kt = 0; kt < count; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // slice kt visible to all; slice kt-1 no longer read by anyone
      const int next = kt + STAGES - 1;
      if (next < count)
        load_stage(smem_base + (next % STAGES) * STAGE_BYTES, a_values, a_meta, b_t, m0, n0, kt0 + next, K, tid);
      cp_async_commit();
      const u32 stage = smem_base + (kt % STAGES) * STAGE_BYTES;
      u32 meta[MT][KBLOCKS];
      load_meta(meta, reinterpret_cast<const u32*>(smem + (kt % STAGES) * STAGE_BYTES + A_STAGE + B_STAGE),
                warp_m, lane);
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        u32 a_frag[MT][4];
        u32 b_frag[NT][4];
        load_fragments(a_frag, b_frag, stage, ks, warp_m, warp_n, lane);
        mma_tile(acc, a_frag, b_frag, meta, ks);
      }
    }
    cp_async_wait<0>();
  }

  static VK_DEVICE void run(u16* __restrict__ c, int M, int N, int K, const u16* __restrict__ a_values,
                            const u32* __restrict__ a_meta, const u16* __restrict__ b_t) {
    Place at;
    place(at, M, N, blockIdx.x);
    float acc[MT][NT][4];
    accumulate(acc, a_values, a_meta, b_t, at, M, N, K, 0, K / BK);
    store_accumulators<kBf16, CLIPPED>(c, M, N, acc, at.m0 + at.warp_m * WM, at.n0 + at.warp_n * WN, at.lane);
  }
};

}  // namespace mma_sp

// One extern "C" entry point per (dtype, config), listed in the generated
// mma_sp_instances.cuh from MmaSpGemm.CONFIGS (vkcoop/cuda/gemm.py).  KERNEL... is
// mma_sp::Kernel<...>, mma_sp::PipelinedKernel<...> or a split form of Kernel;
// NTHREADS is the launcher's block size, checked against the kernel's own.
#define VK_MMA_SP_ENTRY(NAME, NTHREADS, ...)                                                     \
  static_assert(__VA_ARGS__::THREADS == NTHREADS, #NAME ": launcher and kernel block sizes differ"); \
  extern "C" __global__ void __launch_bounds__(NTHREADS)                                          \
      NAME(const u16* a_values, const u32* a_meta, const u16* b_t, u16* c, int M, int N, int K) { \
    __VA_ARGS__::run(c, M, N, K, a_values, a_meta, b_t);                                          \
  }
// ClusterSplitKernel takes VK_MMA_SP_ENTRY's parameters: its K splits are the cluster's size.
// The split-K entry (SplitKernel): its fp32 partial tiles and per-tile arrival counters (zero before the first
// launch; the kernel leaves them zero), and the number of K splits.
#define VK_MMA_SP_SPLIT_ENTRY(NAME, NTHREADS, ...)                                               \
  static_assert(__VA_ARGS__::THREADS == NTHREADS, #NAME ": launcher and kernel block sizes differ"); \
  extern "C" __global__ void __launch_bounds__(NTHREADS)                                          \
      NAME(const u16* a_values, const u32* a_meta, const u16* b_t, u16* c, float4* partials,       \
           int* arrivals, int M, int N, int K, int splits) {                                      \
    __VA_ARGS__::run(c, partials, arrivals, M, N, K, splits, a_values, a_meta, b_t);             \
  }
#ifndef VK_MMA_SP_INSTANCES  // tests point this at a header of their own
#define VK_MMA_SP_INSTANCES "mma_sp_instances.cuh"
#endif
#include VK_MMA_SP_INSTANCES

// Register-only throughput probe: every warp issues `iters` x 8 independent
// mma.sp m16n8k32 (no memory traffic), the ceiling any mma.sp GEMM can reach.
extern "C" __global__ void __launch_bounds__(256) mma_sp_peak_f16(float* out, int iters) {
  const u32 one_pair = 0x3C003C00u;  // two fp16 1.0
  const u32 a[4] = {one_pair, one_pair, one_pair, one_pair};
  const u32 b[4] = {one_pair, one_pair, one_pair, one_pair};
  const u32 meta = 0x44444444u;  // every chunk keeps positions 0 and 1
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) warp_tiled::mma_sp_16832<false, 0>(acc[j], a, b, meta);
  }
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (sum == -1.f) out[0] = sum;  // never true; keeps the loop alive
}
