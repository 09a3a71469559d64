// Structured-sparse GEMM with Hopper wgmma.mma_async.sp (sm_90a only), one
// template over the instruction's types (T: a traits struct of wgmma_sp_ops.cuh,
// generated from vkcoop/cuda/wgmma_types.py):
//
//   C[M][N] = A[M][K] * B[K][N],  A sparse along K (2:4; tf32 1:2),
//   f16, bf16: fp32 accumulation, C in the input type;
//   tf32, e4m3, e5m2: fp32 accumulation, C bf16;  s8, u8: s32 accumulation, C s32.
//
// A K slice is one 128-byte row of B per tile column: BK = 128 / T::ELEM_BYTES
// dense K (64 for 16-bit types, 128 for 8-bit, 32 for tf32), two instructions of
// T::K_STEP.  Operands reach the kernel as three TMA tensor maps (built once on
// the host by vkcoop/cuda/launches.py) plus the output pointer:
//   tm_a     over a_values [M][K/2],  box {BK/2, BM} (64 bytes a row), 64-byte swizzle
//   tm_b     over b_t      [N][K],    box {BK, BN}   (128 bytes a row), 128-byte swizzle
//   tm_meta  over the reordered metadata viewed as [M/16][(K/BK)*32*META_WORDS] (u32),
//            box {32*META_WORDS, BM/16}, no swizzle (vkcoop.cuda.layout)
// Requirements (checked in Python): M % BM == 0, N % BN == 0, K % BK == 0.
//
// Structure: warpgroup 0 is the producer (one thread issues
// cp.async.bulk.tensor loads into a STAGES-deep ring, signalling `full`
// mbarriers by transaction bytes); warpgroups 1..CONSUMERS each own 64 rows of
// the tile and issue two wgmma.mma_async.sp per K slice (f16, bf16, tf32:
// sparsity selector 0, then 1, sharing one metadata register; 8-bit types:
// selector 0 and a register each, PTX ISA 9.7.15.6), fenced
// with wgmma.fence, committed with wgmma.commit_group and retired with
// wgmma.wait_group 1, after which the previous slice is released through its
// `empty` mbarrier.
//
// Kernel::run is split into forceinline device functions: the producer's
// load_slice, the consumers' consume -> consume_slice (load_slice_meta,
// issue_mma, retire) -> store.  The split left every kernel's SASS
// byte-identical (docs/cuda-sparse.md, experiment C15); check again after reshaping
// it (python -m lab.sass_compare BEFORE.cubin AFTER.cubin).
#include "common.cuh"
#include "wgmma_sp_ops.cuh"

namespace wgsp {

struct __align__(64) TmaDesc {
  u64 opaque[16];  // CUtensorMap, 128 bytes
};

VK_DEVICE void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
VK_DEVICE void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
VK_DEVICE void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
VK_DEVICE void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

VK_DEVICE void tma_load_2d(u32 dst, const TmaDesc* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Shared-memory matrix descriptor (PTX ISA 9.7.15.5.1): start address, leading
// byte offset (unused for swizzled K-major, set to 1), stride byte offset
// (distance between 8-row core-matrix groups), swizzle mode in bits 62..63
// (1 = 128B, 2 = 64B).
VK_DEVICE u64 smem_desc(u32 addr, u32 stride_bytes, u32 swizzle_mode) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(stride_bytes >> 4) << 32) |
         ((u64)swizzle_mode << 62);
}

VK_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
VK_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
VK_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

template <int N>
VK_DEVICE void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
VK_DEVICE void fence_accumulators(int (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// Four accumulators as one 16-byte vector (split-K partials), and one loaded from
// another CTA's shared memory.
VK_DEVICE float4 quad(const float* r) { return make_float4(r[0], r[1], r[2], r[3]); }
VK_DEVICE int4 quad(const int* r) { return make_int4(r[0], r[1], r[2], r[3]); }
VK_DEVICE void load_cluster_quad(float (&v)[4], u32 addr) {
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "r"(addr)
               : "memory");
}
VK_DEVICE void load_cluster_quad(int (&v)[4], u32 addr) {
  asm volatile("ld.shared::cluster.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}

// Two adjacent elements of C from two accumulators: fp32 rounded to the 16-bit
// output (one 32-bit store), s32 as they are (one 64-bit store).
template <class T>
VK_DEVICE void store_pair(u16* p, float lo, float hi) {
  *reinterpret_cast<u32*>(p) = pack2<T::OUT_BF16>(lo, hi);
}
template <class T>
VK_DEVICE void store_pair(int* p, int lo, int hi) {
  *reinterpret_cast<int2*>(p) = make_int2(lo, hi);
}

// MSUB = 2: each consumer warpgroup owns 128 rows as two m64 sub-tiles (two
// accumulator sets), so a 256 x BN tile needs less L2 traffic per FLOP.
// kSplitK: split-K for skinny problems.  The K splits of a tile are one
// thread-block cluster (its size, set at launch, is the split count); each CTA
// runs its share of the K slices, leaves its fp32 partial tile in its own ring,
// and after a cluster barrier CTA r adds fragments r, r + splits, ... of every
// CTA's partial through distributed shared memory, in split order from zero
// (the same bits whichever CTA finishes first), and stores them.
// kWarpStore: each warp stages its rows of C on its own (store_by_warp), in a
// region of shared memory after the ring, with no barrier between warps.
// kPersistent: one CTA an SM walks the tiles (blockIdx.x, + gridDim.x, ...);
// the ring's slice count runs on across tiles, so the producer loads the next
// tile's first slices while the consumers store C (store_by_warp: the ring is
// busy then).
template <class T, int BN, int CONSUMERS, int STAGES, bool kSetMaxNReg, int kWaitDepth = 1, int MSUB = 1,
          bool kSplitK = false, bool kWarpStore = false, bool kPersistent = false>
struct Kernel {
  static_assert(!kPersistent || (kWarpStore && !kSplitK && kWaitDepth == 1),
                "a persistent kernel stores without the ring, runs whole K and keeps one group in flight");
  typedef typename T::Acc Acc;
  typedef typename T::Out Out;
  typedef decltype(quad(static_cast<const Acc*>(nullptr))) Quad;
  static constexpr int META_WORDS = T::META_WORDS;
  static constexpr int BK = 128 / T::ELEM_BYTES;  // dense K of a slice: a 128-byte row of B
  static_assert(2 * T::K_STEP == BK, "a slice is two instructions");
  static constexpr int BM = 64 * MSUB * CONSUMERS;
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int A_BYTES = BM * 64;        // BM rows x BK/2 compressed elements
  static constexpr int B_BYTES = BN * 128;       // BN rows x BK elements
  static constexpr int META_BYTES = (BM / 16) * 128 * META_WORDS;
  static constexpr int STAGE_BYTES = (A_BYTES + B_BYTES + META_BYTES + 1023) / 1024 * 1024;
  static constexpr int TX_BYTES = A_BYTES + B_BYTES + META_BYTES;
  // store_by_warp's region: per warp 16 rows of 256 bytes, each padded by 8 outputs so that a warp's pair stores
  // (8 rows, 4 lanes a row) meet distinct banks
  static constexpr int WARP_PITCH = 256 + 8 * (int)sizeof(typename T::Out);
  static constexpr int WARP_STAGE_BYTES = kWarpStore ? 16 * WARP_PITCH : 0;
  // +1024 for aligning the ring, +16 per stage for the two mbarriers
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024 + STAGES * 16 + CONSUMERS * 4 * WARP_STAGE_BYTES;
  static constexpr int ACC = BN / 2;             // accumulators of a thread per m64 sub-tile
  static constexpr u32 EMPTY_COUNT = CONSUMERS * 128;  // empty[s] collects every consumer thread
  static constexpr int CONSUMER_THREADS = CONSUMERS * 128;
  static constexpr int FRAGMENTS = MSUB * ACC / 4;  // float4s of a consumer thread's accumulators
  static constexpr int MAX_SPLITS = 8;              // a portable cluster
  static_assert(!kSplitK || FRAGMENTS * 16 * CONSUMER_THREADS <= STAGES * STAGE_BYTES,
                "the partial tile must fit the ring");
  // A staged row of C: BN outputs and 16 bytes, so that a warp's fragment stores (8 rows, 4 lanes a row) meet
  // distinct banks.
  static constexpr int C_PITCH = BN * (int)sizeof(Out) + 16;
  static constexpr int C_CHUNKS = BN * (int)sizeof(Out) / 16;  // 16-byte pieces of a row of C
  static_assert(kSplitK || BM * C_PITCH <= STAGES * STAGE_BYTES, "the staged C tile must fit the ring");

  // The STAGES slots, 1024-byte aligned for the swizzled TMA boxes, then the
  // mbarriers: full[s] at bars + 8s (slot s's bytes have landed), empty[s] after
  // them (every consumer is done with slot s).
  struct Ring {
    u32 base, bars;
    const unsigned char* ptr;  // `base` as a generic pointer, for the metadata loads

    VK_DEVICE void init(const unsigned char* smem) {
      const u32 raw = smem_addr(smem);
      base = (raw + 1023) & ~1023u;
      bars = base + STAGES * STAGE_BYTES;
      ptr = smem + (base - raw);
    }
    VK_DEVICE u32 full(int s) const { return bars + 8 * s; }
    VK_DEVICE u32 empty(int s) const { return bars + 8 * (STAGES + s); }
    VK_DEVICE u32 slot(int s) const { return base + s * STAGE_BYTES; }
  };

  // This CTA's tile: a grouped raster (for split-K, of the clusters, `rank` the CTA's split).
  static VK_DEVICE void tile_of_cta(int M, int N, int& tile_m, int& tile_n, u32& rank) {
    if constexpr (kSplitK) {
      rank = cluster_rank();  // this CTA's split
      grouped_tile(blockIdx.x / cluster_size(), M / BM, N / BN, 16, tile_m, tile_n);
    } else {
      grouped_tile(blockIdx.x, M / BM, N / BN, 16, tile_m, tile_n);
    }
  }

  // Thread 0 only; nothing may use the barriers before barriers_created().
  static VK_DEVICE void create_barriers(const Ring& ring) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(ring.full(s), 1);
      mbar_init(ring.empty(s), EMPTY_COUNT);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }

  // Every thread waits until the barriers exist.
  static VK_DEVICE void barriers_created() { __syncthreads(); }

  // Producer (one thread): K slice kt, this CTA's slice number `it`, into slot
  // it % STAGES once the consumers have released the slot's previous slice;
  // full[s] counts the bytes as they land.
  static VK_DEVICE void load_slice(const Ring& ring, int it, int kt, const TmaDesc* tm_a, const TmaDesc* tm_b,
                                   const TmaDesc* tm_meta, int m0, int n0) {
    const int s = it % STAGES;
    if (it >= STAGES) mbar_wait(ring.empty(s), ((it / STAGES) + 1) & 1);
    const u32 full = ring.full(s);
    const u32 stage = ring.slot(s);
    mbar_expect_tx(full, TX_BYTES);
    tma_load_2d(stage, tm_a, kt * (BK / 2), m0, full);
    tma_load_2d(stage + A_BYTES, tm_b, kt * BK, n0, full);
    tma_load_2d(stage + A_BYTES + B_BYTES, tm_meta, kt * 32 * META_WORDS, m0 / 16, full);
  }

  // This thread's metadata registers of each sub-tile, from the slice in slot s.
  static VK_DEVICE void load_slice_meta(const Ring& ring, int s, u32 (&meta)[MSUB][META_WORDS], int consumer,
                                        int warp, int lane) {
    const u32* meta_stage = reinterpret_cast<const u32*>(ring.ptr + s * STAGE_BYTES + A_BYTES + B_BYTES);
#pragma unroll
    for (int h = 0; h < MSUB; ++h)
#pragma unroll
      for (int w = 0; w < META_WORDS; ++w) {
        meta[h][w] = meta_stage[(((consumer * MSUB + h) * 4 + warp) * META_WORDS + w) * 32 + lane];
        asm volatile("" : "+r"(meta[h][w]));  // a fresh value the compiler cannot forward or copy
      }
  }

  // The slice's two instructions of every m64 sub-tile as one wgmma group; the
  // accumulators are fenced so the compiler does not touch them while in flight.
  static VK_DEVICE void issue_mma(Acc (&acc)[MSUB][ACC], u32 stage, u32 b_base,
                                  const u32 (&meta)[MSUB][META_WORDS], int consumer) {
    wgmma_fence();
#pragma unroll
    for (int h = 0; h < MSUB; ++h) fence_accumulators(acc[h]);
#pragma unroll
    for (int h = 0; h < MSUB; ++h) {
      const u32 a_base = stage + (consumer * MSUB + h) * 64 * 64;  // this sub-tile's 64 rows
      // step 0: bytes 0..31 of each compressed A row, bytes 0..63 of each B row
      T::template mma<BN, 0>(acc[h], smem_desc(a_base, 512, 2), smem_desc(b_base, 1024, 1), meta[h][0], 1);
      // step 1: A bytes 32..63, B bytes 64..127; the same register with selector 1
      // (one word a slice), or the second word with selector 0 (two)
      T::template mma<BN, META_WORDS == 1 ? 1 : 0>(acc[h], smem_desc(a_base + 32, 512, 2),
                                                   smem_desc(b_base + 64, 1024, 1), meta[h][META_WORDS - 1], 1);
    }
    wgmma_commit();
#pragma unroll
    for (int h = 0; h < MSUB; ++h) fence_accumulators(acc[h]);
  }

  // kWaitDepth = 1 keeps slice kt's group in flight and retires slice kt-1's; 0
  // waits for slice kt's.  The retired slice's slot goes back to the producer.
  static VK_DEVICE void retire(const Ring& ring, int kt, int base, const u32 (&other_meta)[MSUB][META_WORDS]) {
    wgmma_wait<kWaitDepth>();
#pragma unroll
    for (int h = 0; h < MSUB; ++h)
#pragma unroll
      for (int w = 0; w < META_WORDS; ++w)
        asm volatile("" ::"r"(other_meta[h][w]));  // previous group retired: its registers may go
    int release = -1;
    if (kWaitDepth == 0)
      release = (base + kt) % STAGES;
    else if (kt > 0)
      release = (base + kt - 1) % STAGES;
    if (release >= 0) mbar_arrive(ring.empty(release));
  }

  // One K slice (slice kt of a tile whose first is the ring's slice `base`): wait
  // for its data, issue two wgmma, commit, then retire the previous slice.
  static VK_DEVICE void consume_slice(Acc (&acc)[MSUB][ACC], const Ring& ring, int kt, int base,
                                      u32 (&meta)[MSUB][META_WORDS], const u32 (&other_meta)[MSUB][META_WORDS],
                                      int consumer, int warp, int lane) {
    const int s = (base + kt) % STAGES;
    mbar_wait(ring.full(s), ((base + kt) / STAGES) & 1);
    const u32 stage = ring.slot(s);
    const u32 b_base = stage + A_BYTES;
    load_slice_meta(ring, s, meta, consumer, warp, lane);
    issue_mma(acc, stage, b_base, meta, consumer);
    retire(ring, kt, base, other_meta);
  }

  // Accumulator layout of m64nN (PTX ISA 9.7.15.5): warp w of the warpgroup owns
  // rows 16w..16w+15; register 4j+{0,1} holds row g, columns 8j+2t+{0,1}, and
  // 4j+{2,3} the same columns of row g+8 (g = lane/4, t = lane%4).  Fragment f
  // of a thread is registers 4j..4j+3 of sub-tile h = f / (BN/8), j = f % (BN/8).
  static VK_DEVICE int fragment_row(int consumer, int h, int warp, int lane) {
    return (consumer * MSUB + h) * 64 + warp * 16 + (lane >> 2);
  }
  static VK_DEVICE void store_fragment(Out* __restrict__ c, int N, const Acc (&v)[4], int f, int m0, int n0,
                                       int consumer, int warp, int lane) {
    const int h = f / (BN / 8), j = f % (BN / 8);
    const int row = m0 + fragment_row(consumer, h, warp, lane);
    const int col = n0 + j * 8 + 2 * (lane & 3);
    store_pair<T>(c + (size_t)row * N + col, v[0], v[1]);
    store_pair<T>(c + (size_t)(row + 8) * N + col, v[2], v[3]);
  }

  // C through shared memory, once every consumer's groups have retired (the ring is idle: the producer loads no
  // slice past the last): the fragments, converted, into rows of C_PITCH bytes, then each row out in 16-byte
  // pieces, a warp writing 512 contiguous bytes where a fragment store writes 16 bytes in each of 8 rows.
  static VK_DEVICE void store(const Ring& ring, Out* __restrict__ c, int N, const Acc (&acc)[MSUB][ACC],
              int m0, int n0, int consumer, int warp, int lane) {
    unsigned char* tile = const_cast<unsigned char*>(ring.ptr);
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory");
#pragma unroll
    for (int f = 0; f < FRAGMENTS; ++f) {
      const int h = f / (BN / 8), j = f % (BN / 8);
      const int row = fragment_row(consumer, h, warp, lane);
      const int col = j * 8 + 2 * (lane & 3);
      const Acc* r = &acc[h][4 * j];
      store_pair<T>(reinterpret_cast<Out*>(tile + row * C_PITCH) + col, r[0], r[1]);
      store_pair<T>(reinterpret_cast<Out*>(tile + (row + 8) * C_PITCH) + col, r[2], r[3]);
    }
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory");
    const int ctid = consumer * 128 + warp * 32 + lane;
#pragma unroll 4
    for (int i = ctid; i < BM * C_CHUNKS; i += CONSUMER_THREADS) {
      const int row = i / C_CHUNKS, piece = i % C_CHUNKS;
      const uint4 v = *reinterpret_cast<const uint4*>(tile + row * C_PITCH + piece * 16);
      *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(c + (size_t)(m0 + row) * N + n0) + piece * 16) = v;
    }
  }

  // C through this warp's own region: for each m64 sub-tile and each 256 bytes of its columns, the warp's fragments
  // (16 rows) converted into rows of WARP_PITCH bytes, then out in 16-byte pieces (a warp store: two whole rows of
  // 256 bytes).  Only __syncwarp orders them, and the ring is untouched, so a persistent kernel's next tile loads.
  static VK_DEVICE void store_by_warp(const Ring& ring, Out* __restrict__ c, int N, const Acc (&acc)[MSUB][ACC],
                                      int m0, int n0, int consumer, int warp, int lane) {
    constexpr int COLS = 256 / (int)sizeof(Out);  // columns a round
    static_assert(BN % COLS == 0, "whole rounds of 256 bytes");
    unsigned char* region = const_cast<unsigned char*>(ring.ptr) + STAGES * STAGE_BYTES + STAGES * 16 +
                            (consumer * 4 + warp) * WARP_STAGE_BYTES;
#pragma unroll
    for (int h = 0; h < MSUB; ++h)
#pragma unroll
      for (int round = 0; round < BN / COLS; ++round) {
#pragma unroll
        for (int jj = 0; jj < COLS / 8; ++jj) {
          const Acc* r = &acc[h][4 * (round * COLS / 8 + jj)];
          Out* at = reinterpret_cast<Out*>(region + (lane >> 2) * WARP_PITCH) + jj * 8 + 2 * (lane & 3);
          store_pair<T>(at, r[0], r[1]);
          store_pair<T>(reinterpret_cast<Out*>(reinterpret_cast<unsigned char*>(at) + 8 * WARP_PITCH), r[2], r[3]);
        }
        __syncwarp();
        const int row0 = m0 + fragment_row(consumer, h, warp, 0);
#pragma unroll
        for (int i = lane; i < 16 * 16; i += 32) {  // 16 rows of 16 pieces
          const int row = i / 16, piece = i % 16;
          const uint4 v = *reinterpret_cast<const uint4*>(region + row * WARP_PITCH + piece * 16);
          *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(c + (size_t)(row0 + row) * N + n0 + round * COLS) +
                                    piece * 16) = v;
        }
        __syncwarp();
      }
  }

  // Split-K: this CTA's partial tile into its ring as [fragment][consumer thread] quads
  // of accumulators (a warp's stores are 512 contiguous bytes), once every consumer's
  // MMAs have retired.
  static VK_DEVICE void write_partial(const Ring& ring, const Acc (&acc)[MSUB][ACC], int ctid) {
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory");  // the ring is no longer read
    Quad* partial = reinterpret_cast<Quad*>(const_cast<unsigned char*>(ring.ptr));
#pragma unroll
    for (int f = 0; f < FRAGMENTS; ++f)
      partial[f * CONSUMER_THREADS + ctid] = quad(&acc[f / (BN / 8)][4 * (f % (BN / 8))]);
  }

  // Split-K: CTA `split` adds fragments split, split + splits, ... of every CTA's
  // partial (distributed shared memory, all loads in flight, then split order from
  // zero) and stores them; between two cluster barriers, so every partial is
  // written before it is read and stays until every CTA has read it.
  static VK_DEVICE void sum_partials(const Ring& ring, Out* __restrict__ c, int N, int m0, int n0, int consumer,
                                     int warp, int lane, u32 split, u32 splits) {
    const int ctid = consumer * 128 + warp * 32 + lane;
    cluster_sync();
    for (int f = split; f < FRAGMENTS; f += splits) {
      const u32 mine = ring.base + (u32)(f * CONSUMER_THREADS + ctid) * 16;
      Acc parts[MAX_SPLITS][4];
#pragma unroll
      for (int s = 0; s < MAX_SPLITS; ++s)
        if (s < (int)splits) load_cluster_quad(parts[s], cluster_map(mine, s));
      Acc sum[4] = {0, 0, 0, 0};
#pragma unroll
      for (int s = 0; s < MAX_SPLITS; ++s)
        if (s < (int)splits)
#pragma unroll
          for (int e = 0; e < 4; ++e) sum[e] += parts[s][e];
      store_fragment(c, N, sum, f, m0, n0, consumer, warp, lane);
    }
    cluster_sync();
  }

  // Consumer warpgroups 1..CONSUMERS, each owning MSUB x 64 rows of the tile:
  // take registers from the producer, run the K loop, store C.
  static VK_DEVICE void consume(const Ring& ring, Out* __restrict__ c, int N, int m0, int n0, int k_tiles,
                                int tid, int warpgroup, u32 split, int base = 0) {
    const int consumer = warpgroup - 1;
    const int warp = (tid / 32) & 3, lane = tid & 31;

    Acc acc[MSUB][ACC];
#pragma unroll
    for (int h = 0; h < MSUB; ++h)
#pragma unroll
      for (int i = 0; i < ACC; ++i) acc[h][i] = 0;

    // wgmma reads its sparse-metadata register asynchronously, like the
    // accumulators: the register must keep its value until the group retires.
    // With one group left in flight (kWaitDepth = 1) the next slice's metadata
    // would otherwise be loaded into the very register the in-flight group is
    // still reading (seen on the H200: wrong results with two consumer
    // warpgroups and N >= 128).  So slices alternate between two variables and
    // each one is kept alive (empty asm use) until after the wait that retires
    // its group.
    u32 meta_even[MSUB][META_WORDS] = {}, meta_odd[MSUB][META_WORDS] = {};
    if constexpr (META_WORDS == 1) {
      for (int kt = 0; kt < k_tiles; kt += 2) {
        consume_slice(acc, ring, kt, base, meta_even, meta_odd, consumer, warp, lane);
        if (kt + 1 < k_tiles) consume_slice(acc, ring, kt + 1, base, meta_odd, meta_even, consumer, warp, lane);
      }
    } else {
      // Two registers a slice (8-bit types): where the loop's back edge may follow
      // an even slice alone, ptxas serializes every wgmma of the kernel (C7513:
      // non-wgmma instructions defining a wgmma's input registers within its
      // pipeline stage).  So the loop runs whole pairs and an odd last slice
      // follows it.
      int kt = 0;
      for (; kt + 1 < k_tiles; kt += 2) {
        consume_slice(acc, ring, kt, base, meta_even, meta_odd, consumer, warp, lane);
        consume_slice(acc, ring, kt + 1, base, meta_odd, meta_even, consumer, warp, lane);
      }
      if (kt < k_tiles) consume_slice(acc, ring, kt, base, meta_even, meta_odd, consumer, warp, lane);
    }
    wgmma_wait<0>();
#pragma unroll
    for (int h = 0; h < MSUB; ++h) {
#pragma unroll
      for (int w = 0; w < META_WORDS; ++w) asm volatile("" ::"r"(meta_even[h][w]), "r"(meta_odd[h][w]));
      fence_accumulators(acc[h]);
    }
    if constexpr (kPersistent) mbar_arrive(ring.empty((base + k_tiles - 1) % STAGES));  // the last slice's slot
    if constexpr (kSplitK) {
      write_partial(ring, acc, consumer * 128 + warp * 32 + lane);
      sum_partials(ring, c, N, m0, n0, consumer, warp, lane, split, cluster_size());
    } else if constexpr (kWarpStore) {
      store_by_warp(ring, c, N, acc, m0, n0, consumer, warp, lane);
    } else {
      store(ring, c, N, acc, m0, n0, consumer, warp, lane);
    }
  }

  static VK_DEVICE void run(const TmaDesc* tm_a, const TmaDesc* tm_b, const TmaDesc* tm_meta,
                            Out* __restrict__ c, int M, int N, int K) {
    extern __shared__ __align__(1024) unsigned char smem[];
    Ring ring;
    ring.init(smem);
    const int tid = threadIdx.x;
    const int warpgroup = tid / 128;
    int tile_m, tile_n;
    u32 rank = 0;
    tile_of_cta(M, N, tile_m, tile_n, rank);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    // This CTA's K slices: all of them, or for split-K its share (the host makes none empty).
    int k_first = 0, k_tiles = K / BK;
    if constexpr (kSplitK) {
      const int per_split = (k_tiles + cluster_size() - 1) / cluster_size();
      k_first = min(k_tiles, (int)rank * per_split);
      k_tiles = min(k_tiles - k_first, per_split);
    }

    if (tid == 0) create_barriers(ring);
    barriers_created();

    if (warpgroup == 0) {  // the producer: gives registers away, one thread issues the loads
      if constexpr (kSetMaxNReg) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
      if constexpr (kPersistent) {
        if (tid == 0) produce_tiles(ring, tm_a, tm_b, tm_meta, M, N, k_tiles);
        return;
      }
      if (tid == 0)
        for (int it = 0; it < k_tiles; ++it) load_slice(ring, it, k_first + it, tm_a, tm_b, tm_meta, m0, n0);
      if constexpr (kSplitK) {  // the consumers' two cluster barriers (sum_partials)
        cluster_sync();
        cluster_sync();
      }
      return;
    }

    if constexpr (kSetMaxNReg) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    if constexpr (kPersistent) {
      int base = 0;
      for (int tile = blockIdx.x; tile < (M / BM) * (N / BN); tile += gridDim.x, base += k_tiles) {
        int tm0, tn0;
        tile_origin(tile, M, N, tm0, tn0);
        consume(ring, c, N, tm0, tn0, k_tiles, tid, warpgroup, rank, base);
      }
    } else {
      consume(ring, c, N, m0, n0, k_tiles, tid, warpgroup, rank);
    }
  }

  // The persistent producer: every slice of this CTA's tiles in turn, the ring's count running on.
  static VK_DEVICE void produce_tiles(const Ring& ring, const TmaDesc* tm_a, const TmaDesc* tm_b,
                                      const TmaDesc* tm_meta, int M, int N, int k_tiles) {
    int it = 0;
    for (int tile = blockIdx.x; tile < (M / BM) * (N / BN); tile += gridDim.x) {
      int tm0, tn0;
      tile_origin(tile, M, N, tm0, tn0);
      for (int kt = 0; kt < k_tiles; ++kt, ++it) load_slice(ring, it, kt, tm_a, tm_b, tm_meta, tm0, tn0);
    }
  }

  // Tile `linear` of the grouped raster, as its first row and column of C.
  static VK_DEVICE void tile_origin(int linear, int M, int N, int& m0, int& n0) {
    int tile_m, tile_n;
    grouped_tile(linear, M / BM, N / BN, 16, tile_m, tile_n);
    m0 = tile_m * BM;
    n0 = tile_n * BN;
  }
};

}  // namespace wgsp

// One extern "C" entry point per (type, config), listed in the generated
// wgmma_sp_instances.cuh from WgmmaSpGemm.CONFIGS and DIAGNOSTIC_CONFIGS
// (vkcoop/cuda/gemm.py).  KERNEL... is a wgsp::Kernel<...>; NTHREADS is the
// launcher's block size, checked against the kernel's own.
// C is the kernel's output type (u16: fp16 or bf16; int: s32).
#define VK_WGMMA_SP_PARAMS(...)                                                                    \
  const __grid_constant__ wgsp::TmaDesc tm_a, const __grid_constant__ wgsp::TmaDesc tm_b,          \
      const __grid_constant__ wgsp::TmaDesc tm_meta, __VA_ARGS__::Out *c, int M, int N, int K
#define VK_WGMMA_SP_ENTRY(NAME, NTHREADS, ...)                                                   \
  static_assert(__VA_ARGS__::THREADS == NTHREADS, #NAME ": launcher and kernel block sizes differ"); \
  extern "C" __global__ void __launch_bounds__(NTHREADS, 1) NAME(VK_WGMMA_SP_PARAMS(__VA_ARGS__)) { \
    __VA_ARGS__::run(&tm_a, &tm_b, &tm_meta, c, M, N, K);                                         \
  }
#ifndef VK_WGMMA_SP_INSTANCES  // tests point this at a header of their own
#define VK_WGMMA_SP_INSTANCES "wgmma_sp_instances.cuh"
#endif
#include VK_WGMMA_SP_INSTANCES
