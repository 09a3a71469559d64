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
#include "common.cuh"

namespace mma_sp {

constexpr int BK = 64;            // dense K per pipeline stage
constexpr int A_ROW_BYTES = 64;   // BK/2 compressed halves
constexpr int B_ROW_BYTES = 128;  // BK halves

VK_DEVICE void cp_async16(u32 dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src));
}
VK_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
VK_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

VK_DEVICE void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
VK_DEVICE void ldmatrix_x2(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// Swizzled byte offsets: 16-byte chunk index XOR a few row bits, so the eight
// row addresses of one ldmatrix phase hit eight different bank groups.
VK_DEVICE u32 a_offset(int row, int chunk) {  // 4 chunks per 64-byte row
  return row * A_ROW_BYTES + ((chunk ^ ((row >> 1) & 3)) << 4);
}
VK_DEVICE u32 b_offset(int row, int chunk) {  // 8 chunks per 128-byte row
  return row * B_ROW_BYTES + ((chunk ^ (row & 7)) << 4);
}

template <bool kBf16, int SEL>
VK_DEVICE void mma_sp_16832(float (&d)[4], const u32 (&a)[4], const u32 (&b)[4], u32 meta) {
  if (kBf16) {
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, %13;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),
          "r"(meta), "n"(SEL));
  } else {
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, %13;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),
          "r"(meta), "n"(SEL));
  }
}

template <bool kBf16, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
struct Kernel {
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MT = WM / 16, NT = WN / 8;
  static constexpr int A_STAGE = BM * A_ROW_BYTES;
  static constexpr int B_STAGE = BN * B_ROW_BYTES;
  static constexpr int M_STAGE = (BM / 16) * 32 * 4;  // one 32-lane word block per 16 rows
  static constexpr int STAGE_BYTES = A_STAGE + B_STAGE + M_STAGE;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
  static_assert(WM % 16 == 0 && WN % 8 == 0, "warp tile must be a multiple of m16n8");
  static_assert((BM * 4) % THREADS == 0 || BM * 4 < THREADS, "A copy split");

  static VK_DEVICE void load_stage(u32 stage_base, const u16* a_values, const u32* a_meta,
                                   const u16* b_t, int m0, int n0, int kt, int K, int tid) {
    const int half_k = K / 2;
    // A: BM rows x 4 chunks of 16 bytes
    for (int i = tid; i < BM * 4; i += THREADS) {
      const int row = i >> 2, chunk = i & 3;
      cp_async16(stage_base + a_offset(row, chunk),
                 a_values + (size_t)(m0 + row) * half_k + kt * (BK / 2) + chunk * 8);
    }
    // B^T: BN rows x 8 chunks
    const u32 b_base = stage_base + A_STAGE;
    for (int i = tid; i < BN * 8; i += THREADS) {
      const int row = i >> 3, chunk = i & 7;
      cp_async16(b_base + b_offset(row, chunk),
                 b_t + (size_t)(n0 + row) * K + kt * BK + chunk * 8);
    }
    // metadata: BM/16 blocks of 32 words (128 bytes = 8 chunks) each
    const u32 m_base = b_base + B_STAGE;
    const int k_blocks = K / BK;
    for (int i = tid; i < (BM / 16) * 8; i += THREADS) {
      const int block = i >> 3, chunk = i & 7;
      cp_async16(m_base + block * 128 + chunk * 16,
                 a_meta + ((size_t)(m0 / 16 + block) * k_blocks + kt) * 32 + chunk * 4);
    }
  }

  static VK_DEVICE void run(const u16* __restrict__ a_values, const u32* __restrict__ a_meta,
                            const u16* __restrict__ b_t, u16* __restrict__ c, int M, int N,
                            int K) {
    extern __shared__ __align__(128) unsigned char smem[];
    const u32 smem_base = smem_addr(smem);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;

    int tile_m, tile_n;
    grouped_tile(blockIdx.x, M / BM, N / BN, 8, tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const int k_tiles = K / BK;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    // Prologue: fill STAGES-1 slices.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) load_stage(smem_base + s * STAGE_BYTES, a_values, a_meta, b_t, m0, n0, s, K, tid);
      cp_async_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // slice kt visible to all; slice kt-1 no longer read by anyone
      {
        const int next = kt + STAGES - 1;
        if (next < k_tiles)
          load_stage(smem_base + (next % STAGES) * STAGE_BYTES, a_values, a_meta, b_t, m0, n0, next, K, tid);
        cp_async_commit();
      }
      const u32 stage = smem_base + (kt % STAGES) * STAGE_BYTES;
      const u32 b_stage = stage + A_STAGE;
      const u32* meta_stage =
          reinterpret_cast<const u32*>(smem + (kt % STAGES) * STAGE_BYTES + A_STAGE + B_STAGE);

      u32 meta[MT];
#pragma unroll
      for (int i = 0; i < MT; ++i) meta[i] = meta_stage[(warp_m * MT + i) * 32 + lane];

#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        u32 a_frag[MT][4];
        u32 b_frag[NT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const int row = warp_m * WM + i * 16 + (lane & 15);
          ldmatrix_x4(a_frag[i], stage + a_offset(row, ks * 2 + (lane >> 4)));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const int row = warp_n * WN + j * 8 + (lane & 7);
          ldmatrix_x4(b_frag[j], b_stage + b_offset(row, ks * 4 + (lane >> 3)));
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            if (ks == 0)
              mma_sp_16832<kBf16, 0>(acc[i][j], a_frag[i], b_frag[j], meta[i]);
            else
              mma_sp_16832<kBf16, 1>(acc[i][j], a_frag[i], b_frag[j], meta[i]);
          }
      }
    }
    cp_async_wait<0>();

    // Epilogue: thread (g, t) of an m16n8 tile owns rows g and g+8, columns 2t, 2t+1.
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int row = m0 + warp_m * WM + i * 16 + g;
        const int col = n0 + warp_n * WN + j * 8 + 2 * t;
        *reinterpret_cast<u32*>(c + (size_t)row * N + col) = pack2<kBf16>(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<u32*>(c + (size_t)(row + 8) * N + col) = pack2<kBf16>(acc[i][j][2], acc[i][j][3]);
      }
  }
};

}  // namespace mma_sp

// One extern "C" entry point per (dtype, tile config).  The Python launcher
// (vkcoop/cuda/gemm.py, MmaSpGemm.CONFIGS) knows these names and their shared-memory sizes.
#define VK_MMA_SP_KERNEL(NAME, BF16, BM, BN, WM_, WN_, ST)                                     \
  extern "C" __global__ void __launch_bounds__(32 * WM_ * WN_)                                  \
      NAME(const u16* a_values, const u32* a_meta, const u16* b_t, u16* c, int M, int N, int K) { \
    mma_sp::Kernel<BF16, BM, BN, WM_, WN_, ST>::run(a_values, a_meta, b_t, c, M, N, K);         \
  }

VK_MMA_SP_KERNEL(mma_sp_f16_128x128_2x2_s4, false, 128, 128, 2, 2, 4)
VK_MMA_SP_KERNEL(mma_sp_bf16_128x128_2x2_s4, true, 128, 128, 2, 2, 4)
VK_MMA_SP_KERNEL(mma_sp_f16_128x256_2x4_s3, false, 128, 256, 2, 4, 3)
VK_MMA_SP_KERNEL(mma_sp_bf16_128x256_2x4_s3, true, 128, 256, 2, 4, 3)
VK_MMA_SP_KERNEL(mma_sp_f16_256x128_4x2_s3, false, 256, 128, 4, 2, 3)
VK_MMA_SP_KERNEL(mma_sp_bf16_256x128_4x2_s3, true, 256, 128, 4, 2, 3)
VK_MMA_SP_KERNEL(mma_sp_f16_64x16_4x1_s6, false, 64, 16, 4, 1, 6)
VK_MMA_SP_KERNEL(mma_sp_bf16_64x16_4x1_s6, true, 64, 16, 4, 1, 6)
