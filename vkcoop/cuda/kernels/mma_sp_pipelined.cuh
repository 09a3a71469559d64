// The software-pipelined mma.sp kernel (mma_sp.cu instantiates it; same operands
// and results as mma_sp::Kernel).  What differs from Kernel, and why (Kernel
// spends ~half its time with the tensor pipe idle at every K-slice boundary):
//  * every thread's cp.async sources and swizzled destinations are fixed per
//    thread (row steps of THREADS/CHUNKS keep the swizzle phase constant), so a
//    copy is one address add instead of divisions, 64-bit multiplies and loops;
//  * the copies of slice kt+STAGES-1 are spread over the k32 steps of slice kt
//    instead of being issued in one burst while the MMAs drain;
//  * fragments are double-buffered in registers: step ks+1 is loaded from shared
//    memory while step ks's MMAs run, and the barrier that hands over the next
//    slice sits before the last step, so the next slice's first fragments load
//    while the last step's MMAs of this slice are still in flight.
#pragma once
#include "warp_tiled.cuh"

namespace mma_sp {

using namespace warp_tiled;

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

    // Thread `tid`'s plan for the tile at (m0, n0), sources at slice 0.  (Filled in
    // place: returning a Copier by value changed the generated code of one config.)
    VK_DEVICE void init(const u16* a_values, const u32* a_meta, const u16* b_t, int m0, int n0,
                         int K, int tid) {
      const int a_row = tid / A_CHUNKS, a_chunk = tid % A_CHUNKS;
      const int b_row = tid / B_CHUNKS, b_chunk = tid % B_CHUNKS;
      a_src = a_values + (size_t)(m0 + a_row) * (K / 2) + a_chunk * 8;
      b_src = b_t + (size_t)(n0 + b_row) * K + b_chunk * 8;
      a_dst = swizzled<A_CHUNKS>(a_row, a_chunk);
      b_dst = swizzled<B_CHUNKS>(b_row, b_chunk);
      a_row_step = (size_t)(THREADS / A_CHUNKS) * (K / 2);
      b_row_step = (size_t)(THREADS / B_CHUNKS) * K;
      // metadata chunk i of a stage: 16-row block i / (KBLOCKS*8), word (i % (KBLOCKS*8)) * 4
      constexpr int PER_BLOCK = KBLOCKS * 8;
      const int block = tid / PER_BLOCK, chunk = tid % PER_BLOCK;
      m_src = a_meta + ((size_t)(m0 / 16 + block) * (K / 64)) * 32 + chunk * 4;
      m_dst = tid * 16;
      m_block_step = (size_t)(THREADS / PER_BLOCK) * (K / 64) * 32;
#pragma unroll
      for (int j = 0; j < M_COPIES; ++j) has_meta[j] = tid + j * THREADS < META_CHUNKS;
      static_assert(M_COPIES == 1 || THREADS % PER_BLOCK == 0, "metadata copy plan");
    }

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
    // The part of the next slice's copies that goes out during k32 step `ks` (none while !live).
    VK_DEVICE void issue_step(int ks, bool live, u32 stage_base) const {
      if (ks == 0 && live) issue<0>(stage_base);
      if constexpr (COPY_STEPS > 1) if (ks == 1 && live) issue<1>(stage_base);
      if constexpr (COPY_STEPS > 2) if (ks == 2 && live) issue<2>(stage_base);
    }
  };

  // Per-lane ldmatrix offsets: row bits 0..2 equal lane bits 0..2 in both
  // operands (warp tiles start at multiples of 16 rows, B sub-tiles at 8), so
  // the swizzle phase is fixed per lane and the k-step enters as an XOR.
  struct LaneAddr {
    int lane, phase, a_chunk0, b_chunk0;
    u32 a_frag_row, b_frag_row, meta_lane;

    static VK_DEVICE LaneAddr make(int warp_m, int warp_n, int lane) {
      LaneAddr l;
      l.lane = lane;
      l.phase = lane & 7;
      l.a_frag_row = (u32)(warp_m * WM + (lane & 15)) * A_ROW_BYTES;
      l.a_chunk0 = lane >> 4;
      l.b_frag_row = (u32)(warp_n * WN + (lane & 7)) * B_ROW_BYTES + A_STAGE;
      l.b_chunk0 = lane >> 3;
      l.meta_lane = A_STAGE + B_STAGE + ((warp_m * MT) * KBLOCKS * 32 + lane) * 4;
      return l;
    }
    VK_DEVICE u32 a(u32 stage, int ks, int i) const {
      const int chunk = ks * 2 + a_chunk0;
      if constexpr (A_CHUNKS == 4)
        return stage + a_frag_row + i * 16 * A_ROW_BYTES + ((chunk ^ ((lane >> 1) & 3)) << 4);
      else
        return stage + a_frag_row + i * 16 * A_ROW_BYTES + ((chunk ^ phase) << 4);
    }
    VK_DEVICE u32 b(u32 stage, int ks, int j) const {
      const int chunk = ks * 4 + b_chunk0;
      return stage + b_frag_row + j * 8 * B_ROW_BYTES + ((chunk ^ phase) << 4);
    }
  };

  // Slices 0 .. STAGES-2 in flight, one commit group each, and slice 0 visible.
  static VK_DEVICE void prologue(Copier& cp, u32 smem_base, int k_tiles) {
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
  }

  // One operand is double-buffered (step ks+1 loads while step ks multiplies);
  // each fragment of the other one "slides": it is reloaded for the next step as
  // soon as the MMAs of step ks that read it have issued, so it needs no second
  // buffer (255-register limit).  SLIDE_A = false: A double-buffered, B slides,
  // MMAs B-major; true: B double-buffered, A slides, MMAs A-major (A operand reuse).
  static constexpr int A_BUFS = SLIDE_A ? 1 : 2, B_BUFS = SLIDE_A ? 2 : 1;
  struct Fragments {
    u32 a[A_BUFS][MT][4];
    u32 b[B_BUFS][NT][4];
    u32 meta[MT][KBLOCKS];       // this slice's metadata
    u32 meta_next[MT][KBLOCKS];  // the next slice's, loaded during the last step
  };

  // The warp's metadata registers for slice `stage_index`, one per 16-row block and 64-wide K block.
  static VK_DEVICE void load_meta(u32 (&dst)[MT][KBLOCKS], const unsigned char* smem, int stage_index,
                                  const LaneAddr& la) {
    const u32* base = reinterpret_cast<const u32*>(smem + stage_index * STAGE_BYTES + la.meta_lane);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int kb = 0; kb < KBLOCKS; ++kb) dst[i][kb] = base[(i * KBLOCKS + kb) * 32];
  }

  // The fragments of step 0 of slice 0, before the main loop.
  static VK_DEVICE void load_first(Fragments& f, const unsigned char* smem, u32 smem_base, const LaneAddr& la) {
    load_meta(f.meta, smem, 0, la);
#pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(f.a[0][i], la.a(smem_base, 0, i));
#pragma unroll
    for (int j = 0; j < NT; ++j) ldmatrix_x4(f.b[0][j], la.b(smem_base, 0, j));
  }

  // The MMAs of step ks, the sliding operand's fragment o reloaded for step next_ks
  // (at next_stage) right after the last MMA that reads it.
  static VK_DEVICE void mma_and_slide(float (&acc)[MT][NT][4], Fragments& f, int ks, u32 next_stage,
                                      int next_ks, const LaneAddr& la) {
    const int cur = ks & 1;
    const int a_cur = SLIDE_A ? 0 : cur, b_cur = SLIDE_A ? cur : 0;
    constexpr int OUTER = SLIDE_A ? MT : NT, INNER = SLIDE_A ? NT : MT;
#pragma unroll
    for (int o = 0; o < OUTER; ++o) {
#pragma unroll
      for (int n = 0; n < INNER; ++n) {
        const int i = SLIDE_A ? o : n, j = SLIDE_A ? n : o;
        mma_sp_step<kBf16>(acc[i][j], f.a[a_cur][i], f.b[b_cur][j], f.meta[i][ks >> 1], ks);
      }
      if constexpr (SLIDE_A)
        ldmatrix_x4(f.a[0][o], la.a(next_stage, next_ks, o));
      else
        ldmatrix_x4(f.b[0][o], la.b(next_stage, next_ks, o));
    }
  }

  // The double-buffered operand's fragments of step next_ks, into the buffer step ks does not read.
  static VK_DEVICE void load_double_buffered(Fragments& f, int ks, u32 next_stage, int next_ks,
                                             const LaneAddr& la) {
    const int nxt = (ks & 1) ^ 1;
    if constexpr (SLIDE_A) {
#pragma unroll
      for (int j = 0; j < NT; ++j) ldmatrix_x4(f.b[nxt][j], la.b(next_stage, next_ks, j));
    } else {
#pragma unroll
      for (int i = 0; i < MT; ++i) ldmatrix_x4(f.a[nxt][i], la.a(next_stage, next_ks, i));
    }
  }

  // The next slice's metadata, loaded during the last step, becomes this slice's.
  static VK_DEVICE void next_slice_meta(Fragments& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int kb = 0; kb < KBLOCKS; ++kb) f.meta[i][kb] = f.meta_next[i][kb];
  }

  static VK_DEVICE void run(u16* __restrict__ c, int M, int N, int K, const u16* __restrict__ a_values,
                            const u32* __restrict__ a_meta, const u16* __restrict__ b_t) {
    Place at;
    init_place<BM, BN, WARPS_N, 8, false>(at, M, N, blockIdx.x);  // whole tiles, grouped raster of 8 row tiles
    const int tid = at.tid, lane = at.lane, warp_m = at.warp_m, warp_n = at.warp_n, m0 = at.m0, n0 = at.n0;
    const int k_tiles = K / BK;
    const u32 smem_base = smem_addr(smem);

    Copier cp;
    cp.init(a_values, a_meta, b_t, m0, n0, K, tid);

    float acc[MT][NT][4];
    zero_accumulators(acc);
    prologue(cp, smem_base, k_tiles);
    const LaneAddr la = LaneAddr::make(warp_m, warp_n, lane);
    Fragments f;
    int read_stage = 0, write_stage = STAGES - 1;
    load_first(f, smem, smem_base, la);

    for (int kt = 0; kt < k_tiles; ++kt) {
      const bool live = kt + STAGES - 1 < k_tiles;  // is there a slice kt+STAGES-1 to copy?
      const u32 write_base = smem_base + write_stage * STAGE_BYTES;
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        // the step after this one: ks+1 of this slice, or step 0 of the next slice,
        // whose stage the barrier at the end of step KSTEPS-2 has handed over
        const int next_ks = ks + 1 < KSTEPS ? ks + 1 : 0;
        const u32 next_stage = smem_base + read_stage * STAGE_BYTES;
        if (ks + 1 == KSTEPS) load_meta(f.meta_next, smem, read_stage, la);
        load_double_buffered(f, ks, next_stage, next_ks, la);
        cp.issue_step(ks, live, write_base);
        mma_and_slide(acc, f, ks, next_stage, next_ks, la);
        if (ks == KSTEPS - 2) {
          hand_over<STAGES>(cp);  // slice kt+1 visible; nobody reads slice kt after this point
          read_stage = ring_next<STAGES>(read_stage);
          write_stage = ring_next<STAGES>(write_stage);
        }
      }
      next_slice_meta(f);
    }
    cp_async_wait<0>();
    store_accumulators<kBf16, false>(c, M, N, acc, m0 + warp_m * WM, n0 + warp_n * WN, lane);
  }
};

}  // namespace mma_sp
