// Dense GEMM with warp-level mma.sync m16n8k16 (sm_80+): the instruction the NVIDIA Vulkan driver emits for
// coopmat2 on Hopper (HMMA.16816), written by hand so that what the instruction set costs (against wgmma) and what
// Vulkan's shared-memory cap costs (against this kernel with 227 KB) can be measured apart.
//
//   C[M][N] = A[M][K] * B[K][N],  fp16 or bf16 inputs, fp32 accumulation, C stored in the input type.
//
// Operands (row-major, device pointers):
//   a    [M][K]
//   b_t  [N][K]   B stored column-major (B^T row-major), as the Vulkan dense seed reads it ('c' configurations)
//   c    [M][N]
// Requirement (checked in Python before launch): K % 8 == 0 (rows of 16-byte chunks). M, N and K need not be
// multiples of the tile: edge rows and the K tail are zero-filled by the copies (cp.async with a source size of 0)
// and outputs past M or N are not stored.
//
// The CUTLASS sm80 multistage design, written anew:
//  * a STAGES-deep ring of shared-memory slices [rows][BK] for A and B^T, filled by 16-byte cp.async.cg (one commit
//    group per slice, empty past the end), each thread copying fixed chunks whose swizzle phase never changes;
//  * 16-byte chunks XOR-swizzled by row (warp_tiled::swizzled), so the eight row addresses of every ldmatrix phase and
//    of every copy phase fall in eight different bank groups;
//  * fragments through ldmatrix.x4 (A: one m16k16 block; B^T: two n8k16 blocks), double-buffered in registers: the
//    next k16 step loads while this step's MMAs run; the next slice's copies go out during the steps before the
//    last, and the barrier that hands over the next slice sits before the last step;
//  * warp tiles of 64x64 (or 64x32, 32x32...) with fp32 accumulators, MMAs in serpentine order;
//  * grouped raster (GROUP_M row tiles per group) so that CTAs running together share A and B in L2.
// Skinny problems split K by the split kernels the mma.sp kernels run (warp_tiled.cuh): partial tiles in global
// memory summed by the last CTA of a tile (SplitKernel), or in a thread-block cluster through distributed shared
// memory (ClusterSplitKernel).
#include "warp_tiled.cuh"

namespace mma_dense {

using namespace warp_tiled;

// 16 bytes global -> shared, of which `bytes` (16 or 0) are read and the rest zero-filled; the 128-byte L2
// prefetch hint fetches the rest of the line the neighbouring chunks need.
VK_DEVICE void cp_async16_fill(u32 dst, const void* src, u32 bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}

// D += A * B for one m16n8k16 block, fp32 accumulators, fp16 or bf16 inputs.
template <bool kBf16>
VK_DEVICE void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  if (kBf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <bool kBf16, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, int GROUP_M>
struct Kernel {
  static constexpr bool IS_BF16 = kBf16;
  static constexpr bool CLIPPED = true;  // tiles over C's edges: outputs past M or N are not stored
  static constexpr int TILE_M = BM, TILE_N = BN, TILE_K = BK;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MT = WM / 16, NT = WN / 8;     // m16 and n8 blocks of a warp tile
  static constexpr int KSTEPS = BK / 16;               // k16 MMA steps per slice
  static constexpr int CHUNKS = BK / 8;                // 16-byte chunks per row of a slice
  static constexpr int ROW_BYTES = BK * 2;
  static constexpr int A_STAGE = BM * ROW_BYTES, B_STAGE = BN * ROW_BYTES;
  static constexpr int STAGE_BYTES = A_STAGE + B_STAGE;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
  static constexpr int ROW_STEP = THREADS / CHUNKS;    // rows between one thread's successive copies
  static constexpr int A_COPIES = (BM + ROW_STEP - 1) / ROW_STEP, B_COPIES = (BN + ROW_STEP - 1) / ROW_STEP;
  static constexpr int COPIES = A_COPIES + B_COPIES;
  static constexpr int COPY_STEPS = KSTEPS - 1;        // copies go out during steps 0 .. KSTEPS-2
  static_assert(BK == 32 || BK == 64 || BK == 128, "BK must be 32, 64 or 128 (4, 8 or 16 chunks a row)");
  static_assert(STAGES >= 2, "the ring needs at least two stages");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp tile is whole m16 blocks and pairs of n8 blocks");
  static_assert(THREADS % CHUNKS == 0 && ROW_STEP % 8 == 0,
                "row steps must keep the swizzle phase of a thread's copies constant");
  static_assert(A_COPIES + B_COPIES <= 32, "copy predicates are one 32-bit mask");

  static VK_DEVICE void place(Place& at, int M, int N, int linear) {
    init_place<BM, BN, WARPS_N, GROUP_M, CLIPPED>(at, M, N, linear);
  }

  // One thread's copy plan: A rows row0, row0 + ROW_STEP, ... and B^T rows likewise, all at chunk `chunk`; a row
  // past M (N) is zero-filled, and so is a chunk past K in the last slice. A copy's source row is clamped to the
  // matrix's last row (it reads nothing there, and its address stays inside the matrix). Sources advance one slice
  // per issue.
  struct Copier {
    const u16* a_src;
    const u16* b_src;
    int offset[COPIES];  // elements from a_src (b_src) to copy c's clamped row
    u32 dst;          // the chunk's swizzled offset in row row0 (A and B^T rows are alike)
    u32 rows_in;      // bit c: copy c's row lies inside the matrix
    u32 rows_tile;    // bit c: copy c's row lies inside the tile (all set unless a side is shorter than ROW_STEP)
    int chunk_k;      // K index of this thread's chunk in the current slice
    int K;

    VK_DEVICE void init(const u16* a, const u16* b_t, int m0, int n0, int M, int N, int K_, int k0, int tid) {
      const int row0 = tid / CHUNKS, chunk = tid % CHUNKS;
      K = K_;
      dst = swizzled<CHUNKS>(row0, chunk);
      // an edge row reads the last row instead (never past the matrix); its bytes are zero-filled anyway
      const int a_row = min(m0 + row0, M - 1), b_row = min(n0 + row0, N - 1);
      a_src = a + (size_t)a_row * K + k0 + chunk * 8;
      b_src = b_t + (size_t)b_row * K + k0 + chunk * 8;
      chunk_k = k0 + chunk * 8;
      rows_in = rows_tile = 0;
#pragma unroll
      for (int c = 0; c < A_COPIES; ++c) {
        if (row0 + c * ROW_STEP < BM) rows_tile |= 1u << c;
        if (m0 + row0 + c * ROW_STEP < M) rows_in |= 1u << c;
        offset[c] = (min(m0 + row0 + c * ROW_STEP, M - 1) - a_row) * K;
      }
#pragma unroll
      for (int c = 0; c < B_COPIES; ++c) {
        if (row0 + c * ROW_STEP < BN) rows_tile |= 1u << (A_COPIES + c);
        if (n0 + row0 + c * ROW_STEP < N) rows_in |= 1u << (A_COPIES + c);
        offset[A_COPIES + c] = (min(n0 + row0 + c * ROW_STEP, N - 1) - b_row) * K;
      }
    }

    // The copies of part PART (of COPY_STEPS) of one slice into the stage at stage_base.
    template <int PART>
    VK_DEVICE void issue(u32 stage_base) const {
      const bool k_in = chunk_k < K;
#pragma unroll
      for (int c = 0; c < COPIES; ++c) {
        if (c * COPY_STEPS / COPIES != PART) continue;  // folded at compile time
        const bool a_side = c < A_COPIES;
        const int r = a_side ? c : c - A_COPIES;
        if ((a_side ? BM : BN) % ROW_STEP && !(rows_tile >> c & 1u)) continue;  // past a short side of the tile
        const u32 bytes = (k_in && (rows_in >> c & 1u)) ? 16u : 0u;
        const u32 where = stage_base + (a_side ? 0u : (u32)A_STAGE) + dst + r * ROW_STEP * ROW_BYTES;
        cp_async16_fill(where, (a_side ? a_src : b_src) + offset[c], bytes);
      }
    }
    VK_DEVICE void issue_all(u32 stage_base) const {
      issue<0>(stage_base);
      if constexpr (COPY_STEPS > 1) issue<1>(stage_base);
      if constexpr (COPY_STEPS > 2) issue<2>(stage_base);
      if constexpr (COPY_STEPS > 3) issue<3>(stage_base);
      if constexpr (COPY_STEPS > 4) issue<4>(stage_base);
      if constexpr (COPY_STEPS > 5) issue<5>(stage_base);
      if constexpr (COPY_STEPS > 6) issue<6>(stage_base);
    }
    // The part of the next slice's copies that goes out during k16 step ks (none while !live).
    template <int KS>
    VK_DEVICE void issue_step(bool live, u32 stage_base) const {
      if constexpr (KS < COPY_STEPS)
        if (live) issue<KS>(stage_base);
    }
    VK_DEVICE void advance() {
      a_src += BK;
      b_src += BK;
      chunk_k += BK;
    }
  };

  // Per-lane ldmatrix offsets inside a stage, one per k16 step: warp tiles start at multiples of 16 rows and B
  // pairs at multiples of 16, so a lane's swizzle phase is the same for every block of its warp tile.
  struct LaneAddr {
    u32 a[KSTEPS], b[KSTEPS];

    VK_DEVICE void init(int warp_m, int warp_n, int lane) {
      const int a_row = warp_m * WM + (lane & 15);
      const int b_row = warp_n * WN + ((lane >> 4) << 3) + (lane & 7);
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        a[ks] = swizzled<CHUNKS>(a_row, 2 * ks + (lane >> 4));
        b[ks] = A_STAGE + swizzled<CHUNKS>(b_row, 2 * ks + ((lane >> 3) & 1));
      }
    }
  };

  struct Fragments {
    u32 a[MT][4];
    u32 b[NT][2];
  };

  // The A and B^T fragments of k16 step ks from the stage at `stage`.
  static VK_DEVICE void load_fragments(Fragments& f, u32 stage, int ks, const LaneAddr& la) {
#pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(f.a[i], stage + la.a[ks] + i * 16 * ROW_BYTES);
#pragma unroll
    for (int p = 0; p < NT / 2; ++p) {
      u32 r[4];
      ldmatrix_x4(r, stage + la.b[ks] + p * 16 * ROW_BYTES);
      f.b[2 * p][0] = r[0];
      f.b[2 * p][1] = r[1];
      f.b[2 * p + 1][0] = r[2];
      f.b[2 * p + 1][1] = r[3];
    }
  }

  // The MT x NT MMAs of one k16 step, serpentine so that consecutive MMAs share an operand.
  static VK_DEVICE void mma_tile(float (&acc)[MT][NT][4], const Fragments& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int jj = 0; jj < NT; ++jj) {
        const int j = (i & 1) ? NT - 1 - jj : jj;
        mma_16816<kBf16>(acc[i][j], f.a[i], f.b[j][0], f.b[j][1]);
      }
  }

  // Slices 0 .. STAGES-2 in flight (one commit group each, empty past `count`), and slice 0 visible.
  static VK_DEVICE void prologue(Copier& cp, u32 smem_base, int count) {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < count) cp.issue_all(smem_base + s * STAGE_BYTES);
      cp.advance();
      cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();
  }

  // acc = the product of the tile's rows and columns over slices kt0 .. kt0 + count - 1.
  static VK_DEVICE void accumulate(float (&acc)[MT][NT][4], const u16* __restrict__ a, const u16* __restrict__ b_t,
                                   const Place& at, int M, int N, int K, int kt0, int count) {
    const u32 smem_base = smem_addr(smem);
    Copier cp;
    cp.init(a, b_t, at.m0, at.n0, M, N, K, kt0 * BK, at.tid);
    zero_accumulators(acc);
    prologue(cp, smem_base, count);
    LaneAddr la;
    la.init(at.warp_m, at.warp_n, at.lane);
    Fragments f[2];
    load_fragments(f[0], smem_base, 0, la);
    int read_stage = 0, write_stage = STAGES - 1;

    for (int kt = 0; kt < count; ++kt) {
      const bool live = kt + STAGES - 1 < count;  // is there a slice kt + STAGES - 1 to copy?
      const u32 write_base = smem_base + write_stage * STAGE_BYTES;
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        // the step after this one: ks + 1 of this slice, or step 0 of the next slice, whose stage the barrier at
        // the end of step KSTEPS - 2 has handed over
        load_fragments(f[(ks + 1) & 1], smem_base + read_stage * STAGE_BYTES, (ks + 1) % KSTEPS, la);
        if (ks == 0) cp.template issue_step<0>(live, write_base);
        if (ks == 1) cp.template issue_step<1>(live, write_base);
        if (ks == 2) cp.template issue_step<2>(live, write_base);
        if (ks == 3) cp.template issue_step<3>(live, write_base);
        if (ks == 4) cp.template issue_step<4>(live, write_base);
        if (ks == 5) cp.template issue_step<5>(live, write_base);
        if (ks == 6) cp.template issue_step<6>(live, write_base);
        mma_tile(acc, f[ks & 1]);
        if (ks == KSTEPS - 2) {
          hand_over<STAGES>(cp);
          read_stage = ring_next<STAGES>(read_stage);
          write_stage = ring_next<STAGES>(write_stage);
        }
      }
    }
    cp_async_wait<0>();
  }

  static VK_DEVICE void run(u16* __restrict__ c, int M, int N, int K, const u16* __restrict__ a,
                            const u16* __restrict__ b_t) {
    Place at;
    place(at, M, N, blockIdx.x);
    float acc[MT][NT][4];
    accumulate(acc, a, b_t, at, M, N, K, 0, tiles_over<BK, CLIPPED>(K));
    store_accumulators<kBf16, CLIPPED>(c, M, N, acc, at.m0 + at.warp_m * WM, at.n0 + at.warp_n * WN, at.lane);
  }
};

}  // namespace mma_dense

// One extern "C" entry point per (dtype, config), listed in the generated mma_dense_instances.cuh from
// MmaDenseGemm.CONFIGS (vkcoop/cuda/dense.py). KERNEL... is mma_dense::Kernel<...> or a split form of it
// (warp_tiled.cuh); NTHREADS is the launcher's block size, checked against the kernel's own. ClusterSplitKernel
// takes these parameters too (its K splits are the cluster's size).
#define VK_MMA_DENSE_ENTRY(NAME, NTHREADS, ...)                                                    \
  static_assert(__VA_ARGS__::THREADS == NTHREADS, #NAME ": launcher and kernel block sizes differ"); \
  extern "C" __global__ void __launch_bounds__(NTHREADS)                                          \
      NAME(const u16* a, const u16* b_t, u16* c, int M, int N, int K) {                            \
    __VA_ARGS__::run(c, M, N, K, a, b_t);                                                          \
  }
// The split-K entry (SplitKernel): its fp32 partial tiles and per-tile arrival counters (zero before the first
// launch; the kernel leaves them zero), and the number of K splits.
#define VK_MMA_DENSE_SPLIT_ENTRY(NAME, NTHREADS, ...)                                              \
  static_assert(__VA_ARGS__::THREADS == NTHREADS, #NAME ": launcher and kernel block sizes differ"); \
  extern "C" __global__ void __launch_bounds__(NTHREADS)                                          \
      NAME(const u16* a, const u16* b_t, u16* c, float4* partials, int* arrivals, int M, int N, int K, \
           int splits) {                                                                            \
    __VA_ARGS__::run(c, partials, arrivals, M, N, K, splits, a, b_t);                              \
  }
#ifndef VK_MMA_DENSE_INSTANCES  // tests point this at a header of their own
#define VK_MMA_DENSE_INSTANCES "mma_dense_instances.cuh"
#endif
#include VK_MMA_DENSE_INSTANCES
