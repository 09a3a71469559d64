// Throughput probes for `vkcoop bench peak` (launched by vkcoop/cuda/peak.py).
//
// Matrix-multiply kernels keep every operand in registers (mma.sync, mma.sp) or in a small shared-memory
// tile written once before the loop (wgmma, wgmma.sp), and issue `iters` x (chains, or wgmmas per iteration)
// instructions with no memory traffic in the loop. A and B hold the runtime bit pattern `ones` (two packed
// 16-bit values or four int8 values); sparse A keeps positions 0 and 1 of every group of four (metadata
// 0x44444444). Each thread stores the sum of its accumulators when `store` is set (the host's check, run with
// A = B = 1), so the loop cannot be dropped; timed runs pass store = 0.
//   mma.sync / mma.sp: 8 independent accumulator chains per warp (chain j starts at j), 8 warps per block;
//   wgmma / wgmma.sp:  one m64n256 fp32 accumulator per warpgroup (starts at 0), 4 wgmmas per iteration,
//                      2 warpgroups per block.
// stream_read: a grid-stride read of `count` 16-byte vectors, xor-folded, stored only when `write_all` is set.
#include "common.cuh"

namespace peak {

constexpr int kChains = 8;

struct Half2 {  // an fp16x2 accumulator register
  u32 bits;
};

VK_DEVICE void set(float& r, int j) { r = static_cast<float>(j); }
VK_DEVICE void set(int& r, int j) { r = j; }
VK_DEVICE void set(Half2& r, int j) {
  asm("{\n.reg .b16 h;\ncvt.rn.f16.f32 h, %1;\nmov.b32 %0, {h, h};\n}" : "=r"(r.bits) : "f"(static_cast<float>(j)));
}
VK_DEVICE float value(float r) { return r; }
VK_DEVICE float value(int r) { return static_cast<float>(r); }
VK_DEVICE float value(Half2 r) {
  float lo, hi;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi) : "r"(r.bits));
  return lo + hi;
}

// ---- one instruction each: D = A * B + D (a: 4 registers, b: 2 dense / 4 sparse) ------------------------------
// Dense, four accumulator registers of constraint ACC_C ("+f" or "+r").
#define VK_MMA4(NAME, ACC, ACC_C, PTX)                                                                       \
  VK_DEVICE void NAME(ACC (&d)[4], const u32 (&a)[4], const u32 (&b)[4], u32) {                            \
    asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                               \
                 : ACC_C(d[0]), ACC_C(d[1]), ACC_C(d[2]), ACC_C(d[3])                                        \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                      \
  }
// 2:4 sparse A (ordered metadata, selector 0), fp32 accumulators.
#define VK_MMA_SP4(NAME, PTX)                                                                                \
  VK_DEVICE void NAME(float (&d)[4], const u32 (&a)[4], const u32 (&b)[4], u32 meta) {                      \
    asm volatile(PTX " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;"              \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),  \
                   "r"(meta));                                                                               \
  }

VK_MMA4(mma_f16_f32, float, "+f", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
VK_MMA4(mma_bf16_f32, float, "+f", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
VK_MMA4(mma_s8_s32, int, "+r", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
VK_MMA_SP4(mma_sp_f16_f32, "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32")
VK_MMA_SP4(mma_sp_bf16_f32, "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32")

VK_DEVICE void mma_f16_f16(Half2 (&d)[2], const u32 (&a)[4], const u32 (&b)[4], u32) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
               : "+r"(d[0].bits), "+r"(d[1].bits)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace peak

#define VK_PEAK_MMA_KERNEL(NAME, ACC, REGS, OP)                                                             \
  extern "C" __global__ void __launch_bounds__(256)                                                          \
      NAME(float* out, int iters, u32 ones, u32 meta, int store) {                                          \
    const u32 a[4] = {ones, ones, ones, ones};                                                               \
    const u32 b[4] = {ones, ones, ones, ones};                                                               \
    ACC acc[peak::kChains][REGS];                                                                            \
    _Pragma("unroll") for (int j = 0; j < peak::kChains; ++j)                                                \
      _Pragma("unroll") for (int e = 0; e < REGS; ++e) peak::set(acc[j][e], j);                              \
    for (int i = 0; i < iters; ++i) {                                                                        \
      _Pragma("unroll") for (int j = 0; j < peak::kChains; ++j) peak::OP(acc[j], a, b, meta);                \
    }                                                                                                        \
    if (store) {                                                                                             \
      float sum = 0.f;                                                                                       \
      _Pragma("unroll") for (int j = 0; j < peak::kChains; ++j)                                              \
        _Pragma("unroll") for (int e = 0; e < REGS; ++e) sum += peak::value(acc[j][e]);                      \
      out[blockIdx.x * blockDim.x + threadIdx.x] = sum;                                                      \
    }                                                                                                        \
  }

VK_PEAK_MMA_KERNEL(peak_mma_f16_f32, float, 4, mma_f16_f32)
VK_PEAK_MMA_KERNEL(peak_mma_bf16_f32, float, 4, mma_bf16_f32)
VK_PEAK_MMA_KERNEL(peak_mma_f16_f16, peak::Half2, 2, mma_f16_f16)
VK_PEAK_MMA_KERNEL(peak_mma_s8_s32, int, 4, mma_s8_s32)
VK_PEAK_MMA_KERNEL(peak_mma_sp_f16_f32, float, 4, mma_sp_f16_f32)
VK_PEAK_MMA_KERNEL(peak_mma_sp_bf16_f32, float, 4, mma_sp_bf16_f32)

// ---- wgmma m64n256: 128 fp32 accumulator registers per thread, spelled out by the preprocessor ----------------
#define VK_OPS10(p) \
  "%" #p "0, %" #p "1, %" #p "2, %" #p "3, %" #p "4, %" #p "5, %" #p "6, %" #p "7, %" #p "8, %" #p "9, "
#define VK_OPS128                                                                                            \
  VK_OPS10() VK_OPS10(1) VK_OPS10(2) VK_OPS10(3) VK_OPS10(4) VK_OPS10(5) VK_OPS10(6) VK_OPS10(7) VK_OPS10(8) \
  VK_OPS10(9) VK_OPS10(10) VK_OPS10(11) "%120, %121, %122, %123, %124, %125, %126, %127"
#define VK_RW10(p)                                                                                           \
  "+f"(d[p##0]), "+f"(d[p##1]), "+f"(d[p##2]), "+f"(d[p##3]), "+f"(d[p##4]), "+f"(d[p##5]), "+f"(d[p##6]), \
  "+f"(d[p##7]), "+f"(d[p##8]), "+f"(d[p##9])
#define VK_RW128                                                                                             \
  VK_RW10(), VK_RW10(1), VK_RW10(2), VK_RW10(3), VK_RW10(4), VK_RW10(5), VK_RW10(6), VK_RW10(7), VK_RW10(8), \
  VK_RW10(9), VK_RW10(10), VK_RW10(11), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),             \
  "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

namespace peak {

// Dense: A [64][16] and B [256][16], both K-major, no swizzle. Sparse: A [64][16] values of a [64][32]
// 2:4 matrix, B [256][32]. Core matrices (8 rows x 16 bytes) lie 128 B apart along K and 128 B x (K / 8)
// apart along M/N; with every element equal the layout only has to stay inside the tile.
template <bool kSparse, bool kBf16>
VK_DEVICE void wgmma_m64n256(float (&d)[128], u64 desc_a, u64 desc_b, u32 meta) {
  const int accumulate = 1;  // scale-d: D = A * B + D
  if constexpr (!kSparse && !kBf16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" VK_OPS128 "}, %128, %129, p, 1, 1, 0, 0;\n}"
                 : VK_RW128 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (!kSparse && kBf16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" VK_OPS128 "}, %128, %129, p, 1, 1, 0, 0;\n}"
                 : VK_RW128 : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  } else if constexpr (kSparse && !kBf16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %131, 0;\n"
                 "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32.f16.f16 {" VK_OPS128 "}, %128, %129, %130, 0, "
                 "p, 1, 1, 0, 0;\n}"
                 : VK_RW128 : "l"(desc_a), "l"(desc_b), "r"(meta), "r"(accumulate));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %131, 0;\n"
                 "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32.bf16.bf16 {" VK_OPS128 "}, %128, %129, %130, 0, "
                 "p, 1, 1, 0, 0;\n}"
                 : VK_RW128 : "l"(desc_a), "l"(desc_b), "r"(meta), "r"(accumulate));
  }
}

VK_DEVICE u64 descriptor(const void* tile, u32 leading_bytes, u32 stride_bytes) {
  const u32 address = smem_addr(tile);
  return static_cast<u64>((address & 0x3FFFF) >> 4) | (static_cast<u64>(leading_bytes >> 4) << 16) |
         (static_cast<u64>(stride_bytes >> 4) << 32);
}

template <bool kSparse, bool kBf16>
VK_DEVICE void wgmma_peak(float* out, int iters, u32 ones, u32 meta, int store) {
  constexpr int kK = kSparse ? 32 : 16;  // B's K (A holds 16 values per row either way)
  __shared__ alignas(128) u32 tile_a[64 * 16 / 2];
  __shared__ alignas(128) u32 tile_b[256 * kK / 2];
  for (int i = threadIdx.x; i < 64 * 16 / 2; i += blockDim.x) tile_a[i] = ones;
  for (int i = threadIdx.x; i < 256 * kK / 2; i += blockDim.x) tile_b[i] = ones;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic-proxy writes -> wgmma's async proxy
  __syncthreads();
  const u64 desc_a = descriptor(tile_a, 128, 256);
  const u64 desc_b = descriptor(tile_b, 128, 128 * (kK / 8));
  float d[128];
#pragma unroll
  for (int e = 0; e < 128; ++e) d[e] = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int w = 0; w < 4; ++w) wgmma_m64n256<kSparse, kBf16>(d, desc_a, desc_b, meta);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  if (store) {
    float sum = 0.f;
#pragma unroll
    for (int e = 0; e < 128; ++e) sum += d[e];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  }
}

}  // namespace peak

#define VK_PEAK_WGMMA_KERNEL(NAME, SPARSE, BF16)                                                            \
  extern "C" __global__ void __launch_bounds__(256, 1)                                                       \
      NAME(float* out, int iters, u32 ones, u32 meta, int store) {                                          \
    peak::wgmma_peak<SPARSE, BF16>(out, iters, ones, meta, store);                                          \
  }

VK_PEAK_WGMMA_KERNEL(peak_wgmma_f16_f32, false, false)
VK_PEAK_WGMMA_KERNEL(peak_wgmma_bf16_f32, false, true)
VK_PEAK_WGMMA_KERNEL(peak_wgmma_sp_f16_f32, true, false)
VK_PEAK_WGMMA_KERNEL(peak_wgmma_sp_bf16_f32, true, true)

// ---- device-memory read bandwidth ------------------------------------------------------------------------------
struct alignas(16) Vec4 {
  u32 x, y, z, w;
};

extern "C" __global__ void __launch_bounds__(256)
    peak_stream_read(const Vec4* src, u64 count, Vec4* dst, int write_all, u32 magic) {
  const u64 invocations = static_cast<u64>(gridDim.x) * blockDim.x;
  const u64 first = static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x;
  Vec4 folded = {0, 0, 0, 0};
  for (u64 base = first; base < count; base += 4 * invocations) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const u64 index = base + u * invocations;
      if (index < count) {
        const Vec4 v = src[index];
        folded.x ^= v.x;
        folded.y ^= v.y;
        folded.z ^= v.z;
        folded.w ^= v.w;
      }
    }
  }
  if (write_all || (folded.x == magic && folded.y == magic && folded.z == magic && folded.w == magic)) {
    dst[first] = folded;
  }
}
