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
// launcher's "auto" picks the pipelined one; docs/cuda-notes.md has the sweep.
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

// BK: dense K per pipeline stage (64 or 128) = BK/32 k32 MMA steps sharing
// BK/64 metadata registers (selector 0 then 1 on each).
template <bool kBf16, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES>
struct Kernel {
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

      u32 meta[MT][KBLOCKS];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int kb = 0; kb < KBLOCKS; ++kb)
          meta[i][kb] = meta_stage[((warp_m * MT + i) * KBLOCKS + kb) * 32 + lane];

#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        u32 a_frag[MT][4];
        u32 b_frag[NT][4];
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
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            if ((ks & 1) == 0)
              mma_sp_16832<kBf16, 0>(acc[i][j], a_frag[i], b_frag[j], meta[i][ks >> 1]);
            else
              mma_sp_16832<kBf16, 1>(acc[i][j], a_frag[i], b_frag[j], meta[i][ks >> 1]);
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


// Software-pipelined variant (same operands, same results).  What differs from
// Kernel, and why (Kernel spends ~half its time with the tensor pipe idle at
// every K-slice boundary):
//  * every thread's cp.async sources and swizzled destinations are fixed per
//    thread (row steps of THREADS/CHUNKS keep the swizzle phase constant), so a
//    copy is one address add instead of divisions, 64-bit multiplies and loops;
//  * the copies of slice kt+STAGES-1 are spread over the k32 steps of slice kt
//    instead of being issued in one burst while the MMAs drain;
//  * fragments are double-buffered in registers: step ks+1 is loaded from shared
//    memory while step ks's MMAs run, and the barrier that hands over the next
//    slice sits before the last step, so the next slice's first fragments load
//    while the last step's MMAs of this slice are still in flight.
template <bool kBf16, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool SLIDE_A>
struct PipelinedKernel {
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MT = WM / 16, NT = WN / 8;
  static constexpr int KSTEPS = BK / 32, KBLOCKS = BK / 64;
  static constexpr int A_CHUNKS = BK / 16, B_CHUNKS = BK / 8;
  static constexpr int A_ROW_BYTES = A_CHUNKS * 16, B_ROW_BYTES = B_CHUNKS * 16;
  static constexpr int A_STAGE = BM * A_ROW_BYTES, B_STAGE = BN * B_ROW_BYTES;
  static constexpr int META_CHUNKS = (BM / 16) * KBLOCKS * 8;  // 16-byte chunks per stage
  static constexpr int M_STAGE = META_CHUNKS * 16;
  static constexpr int STAGE_BYTES = A_STAGE + B_STAGE + M_STAGE;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
  static constexpr int A_COPIES = BM * A_CHUNKS / THREADS;  // per thread per slice
  static constexpr int B_COPIES = BN * B_CHUNKS / THREADS;
  static constexpr int M_COPIES = (META_CHUNKS + THREADS - 1) / THREADS;
  static constexpr int COPIES = A_COPIES + B_COPIES + M_COPIES;
  static constexpr int COPY_STEPS = KSTEPS - 1;  // copies go out during steps 0 .. KSTEPS-2
  static_assert(BK == 64 || BK == 128, "BK must be 64 or 128");
  static_assert(STAGES >= 2, "need at least two stages");
  static_assert(A_COPIES * THREADS == BM * A_CHUNKS && B_COPIES * THREADS == BN * B_CHUNKS,
                "every thread copies the same number of A and B chunks");
  static_assert((THREADS / A_CHUNKS) % 8 == 0 && (THREADS / B_CHUNKS) % 8 == 0,
                "row steps must keep the swizzle phase of a thread constant");

  // Per-thread copy plan: source pointers advance by one slice per issue.
  struct Copier {
    const u16* a_src;
    const u16* b_src;
    const u32* m_src;
    u32 a_dst, b_dst, m_dst;  // offsets inside a stage
    size_t a_row_step, b_row_step;  // elements between this thread's successive rows
    size_t m_block_step;             // words between this thread's successive metadata chunks
    bool has_meta[M_COPIES];

    template <int PART>
    VK_DEVICE void issue(u32 stage_base) const {
#pragma unroll
      for (int c = 0; c < COPIES; ++c) {
        if (c * COPY_STEPS / COPIES != PART) continue;  // folded at compile time
        if (c < A_COPIES) {
          cp_async16(stage_base + a_dst + c * (THREADS / A_CHUNKS) * A_ROW_BYTES, a_src + c * a_row_step);
        } else if (c < A_COPIES + B_COPIES) {
          const int j = c - A_COPIES;
          cp_async16(stage_base + A_STAGE + b_dst + j * (THREADS / B_CHUNKS) * B_ROW_BYTES,
                     b_src + j * b_row_step);
        } else {
          const int j = c - A_COPIES - B_COPIES;
          if (has_meta[j])
            cp_async16(stage_base + A_STAGE + B_STAGE + m_dst + j * THREADS * 16, m_src + j * m_block_step);
        }
      }
    }
    VK_DEVICE void advance() {
      a_src += BK / 2;
      b_src += BK;
      m_src += KBLOCKS * 32;
    }
    template <int PART>
    VK_DEVICE void issue_if(bool live, u32 stage_base) const {
      if (live) issue<PART>(stage_base);
    }
  };

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

    Copier cp;
    {
      const int a_row = tid / A_CHUNKS, a_chunk = tid % A_CHUNKS;
      const int b_row = tid / B_CHUNKS, b_chunk = tid % B_CHUNKS;
      cp.a_src = a_values + (size_t)(m0 + a_row) * (K / 2) + a_chunk * 8;
      cp.b_src = b_t + (size_t)(n0 + b_row) * K + b_chunk * 8;
      cp.a_dst = swizzled<A_CHUNKS>(a_row, a_chunk);
      cp.b_dst = swizzled<B_CHUNKS>(b_row, b_chunk);
      cp.a_row_step = (size_t)(THREADS / A_CHUNKS) * (K / 2);
      cp.b_row_step = (size_t)(THREADS / B_CHUNKS) * K;
      // metadata chunk i of a stage: 16-row block i / (KBLOCKS*8), word (i % (KBLOCKS*8)) * 4
      constexpr int PER_BLOCK = KBLOCKS * 8;
      const int block = tid / PER_BLOCK, chunk = tid % PER_BLOCK;
      cp.m_src = a_meta + ((size_t)(m0 / 16 + block) * (K / 64)) * 32 + chunk * 4;
      cp.m_dst = tid * 16;
      cp.m_block_step = (size_t)(THREADS / PER_BLOCK) * (K / 64) * 32;
#pragma unroll
      for (int j = 0; j < M_COPIES; ++j) cp.has_meta[j] = tid + j * THREADS < META_CHUNKS;
      static_assert(M_COPIES == 1 || THREADS % PER_BLOCK == 0, "metadata copy plan");
    }

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    // Prologue: slices 0 .. STAGES-2, one commit group each.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) {
        const u32 base = smem_base + s * STAGE_BYTES;
        cp.template issue<0>(base);
        if constexpr (COPY_STEPS > 1) cp.template issue<1>(base);
        if constexpr (COPY_STEPS > 2) cp.template issue<2>(base);
        cp.advance();
      }
      cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();

    // Per-lane ldmatrix offsets: row bits 0..2 equal lane bits 0..2 in both
    // operands (warp tiles start at multiples of 16 rows, B sub-tiles at 8), so
    // the swizzle phase is fixed per lane and the k-step enters as an XOR.
    const int phase = lane & 7;
    const u32 a_frag_row = (u32)(warp_m * WM + (lane & 15)) * A_ROW_BYTES;
    const int a_chunk0 = lane >> 4;
    const u32 b_frag_row = (u32)(warp_n * WN + (lane & 7)) * B_ROW_BYTES + A_STAGE;
    const int b_chunk0 = lane >> 3;
    const u32 meta_lane = A_STAGE + B_STAGE + ((warp_m * MT) * KBLOCKS * 32 + lane) * 4;

    auto a_addr = [&](u32 stage, int ks, int i) -> u32 {
      const int chunk = ks * 2 + a_chunk0;
      if constexpr (A_CHUNKS == 4)
        return stage + a_frag_row + i * 16 * A_ROW_BYTES + ((chunk ^ ((lane >> 1) & 3)) << 4);
      else
        return stage + a_frag_row + i * 16 * A_ROW_BYTES + ((chunk ^ phase) << 4);
    };
    auto b_addr = [&](u32 stage, int ks, int j) -> u32 {
      const int chunk = ks * 4 + b_chunk0;
      return stage + b_frag_row + j * 8 * B_ROW_BYTES + ((chunk ^ phase) << 4);
    };

    // One operand is double-buffered (step ks+1 loads while step ks multiplies);
    // each fragment of the other one "slides": it is reloaded for the next step as
    // soon as the MMAs of step ks that read it have issued, so it needs no second
    // buffer (255-register limit).  SLIDE_A = false: A double-buffered, B slides,
    // MMAs B-major; true: B double-buffered, A slides, MMAs A-major (A operand reuse).
    constexpr int A_BUFS = SLIDE_A ? 1 : 2, B_BUFS = SLIDE_A ? 2 : 1;
    u32 a_frag[A_BUFS][MT][4];
    u32 b_frag[B_BUFS][NT][4];
    u32 meta[MT][KBLOCKS];
    u32 meta_next[MT][KBLOCKS];

    auto load_meta = [&](u32 (&dst)[MT][KBLOCKS], int stage_index) {
      const u32* base = reinterpret_cast<const u32*>(smem + stage_index * STAGE_BYTES + meta_lane);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int kb = 0; kb < KBLOCKS; ++kb) dst[i][kb] = base[(i * KBLOCKS + kb) * 32];
    };

    int read_stage = 0, write_stage = STAGES - 1;
    load_meta(meta, 0);
#pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(a_frag[0][i], a_addr(smem_base, 0, i));
#pragma unroll
    for (int j = 0; j < NT; ++j) ldmatrix_x4(b_frag[0][j], b_addr(smem_base, 0, j));

    for (int kt = 0; kt < k_tiles; ++kt) {
      const bool live = kt + STAGES - 1 < k_tiles;
      const u32 write_base = smem_base + write_stage * STAGE_BYTES;
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        const int cur = ks & 1, nxt = cur ^ 1;
        const int a_cur = SLIDE_A ? 0 : cur, b_cur = SLIDE_A ? cur : 0;
        // the step after this one: ks+1 of this slice, or step 0 of the next slice,
        // whose stage the barrier at the end of step KSTEPS-2 has handed over
        const int next_ks = ks + 1 < KSTEPS ? ks + 1 : 0;
        const u32 next_stage = smem_base + read_stage * STAGE_BYTES;
        if (ks + 1 == KSTEPS) load_meta(meta_next, read_stage);
        if constexpr (SLIDE_A) {
#pragma unroll
          for (int j = 0; j < NT; ++j) ldmatrix_x4(b_frag[nxt][j], b_addr(next_stage, next_ks, j));
        } else {
#pragma unroll
          for (int i = 0; i < MT; ++i) ldmatrix_x4(a_frag[nxt][i], a_addr(next_stage, next_ks, i));
        }
        if (ks == 0) cp.template issue_if<0>(live, write_base);
        if constexpr (COPY_STEPS > 1) if (ks == 1) cp.template issue_if<1>(live, write_base);
        if constexpr (COPY_STEPS > 2) if (ks == 2) cp.template issue_if<2>(live, write_base);
        constexpr int OUTER = SLIDE_A ? MT : NT, INNER = SLIDE_A ? NT : MT;
#pragma unroll
        for (int o = 0; o < OUTER; ++o) {
#pragma unroll
          for (int n = 0; n < INNER; ++n) {
            const int i = SLIDE_A ? o : n, j = SLIDE_A ? n : o;
            if ((ks & 1) == 0)
              mma_sp_16832<kBf16, 0>(acc[i][j], a_frag[a_cur][i], b_frag[b_cur][j], meta[i][ks >> 1]);
            else
              mma_sp_16832<kBf16, 1>(acc[i][j], a_frag[a_cur][i], b_frag[b_cur][j], meta[i][ks >> 1]);
          }
          if constexpr (SLIDE_A)
            ldmatrix_x4(a_frag[0][o], a_addr(next_stage, next_ks, o));
          else
            ldmatrix_x4(b_frag[0][o], b_addr(next_stage, next_ks, o));
        }
        if (ks == KSTEPS - 2) {
          cp.advance();
          cp_async_commit();
          cp_async_wait<STAGES - 2>();
          __syncthreads();  // slice kt+1 visible; nobody reads slice kt after this point
          read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
          write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
        }
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int kb = 0; kb < KBLOCKS; ++kb) meta[i][kb] = meta_next[i][kb];
    }
    cp_async_wait<0>();

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

// One extern "C" entry point per (dtype, config), listed in the generated
// mma_sp_instances.cuh from MmaSpGemm.CONFIGS (vkcoop/cuda/gemm.py).  KERNEL... is
// mma_sp::Kernel<...> or mma_sp::PipelinedKernel<...>; NTHREADS is the launcher's
// block size, checked against the kernel's own.
#define VK_MMA_SP_ENTRY(NAME, NTHREADS, ...)                                                     \
  static_assert(__VA_ARGS__::THREADS == NTHREADS, #NAME ": launcher and kernel block sizes differ"); \
  extern "C" __global__ void __launch_bounds__(NTHREADS)                                          \
      NAME(const u16* a_values, const u32* a_meta, const u16* b_t, u16* c, int M, int N, int K) { \
    __VA_ARGS__::run(a_values, a_meta, b_t, c, M, N, K);                                          \
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
    for (int j = 0; j < 8; ++j) mma_sp::mma_sp_16832<false, 0>(acc[j], a, b, meta);
  }
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (sum == -1.f) out[0] = sum;  // never true; keeps the loop alive
}
