// Throughput probes for `vkcoop bench peak` (launched by vkcoop/cuda/peak.py).
//
// Matrix-multiply kernels keep every operand in registers (mma.sync, mma.sp) or in a small shared-memory
// tile written once before the loop (wgmma, wgmma.sp), and issue `iters` x (chains, or wgmmas per iteration)
// instructions with no memory traffic in the loop. A and B hold the runtime bit pattern `ones` (a register of
// 1.0 or 1 in the type: one tf32, two 16-bit values or four 8-bit ones); sparse A keeps positions 0 and 1 of
// every group of four (metadata 0x44444444; for tf32's 1:2, element 0 of each pair, the same nibbles). Each thread
// stores the sum of its accumulators when `store` is set (the host's check, run with A = B = 1), so the loop
// cannot be dropped; timed runs pass store = 0.
//   mma.sync / mma.sp: 8 independent accumulator chains per warp (chain j starts at j), 8 warps per block;
//   wgmma / wgmma.sp:  one m64n256 accumulator (fp32, s32 for the integer types) per warpgroup (starts at 0),
//                      4 wgmmas per iteration, 2 warpgroups per block; every type of wgmma_types.py.
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

// ---- wgmma m64n256 of every type: the generated instructions and traits of the wgmma.sp kernel ----------------
#include "wgmma_sp_ops.cuh"

namespace peak {

// Every type moves the same bytes an instruction (wgmma_types.py): A is 64 rows of 32 bytes (a dense K, or the
// kept half of a sparse K), B 256 rows of 32 bytes (dense) or 64 (sparse), both K-major, no swizzle. Core
// matrices (8 rows x 16 bytes) lie 128 B apart along K and 8 rows x the row's bytes apart along M/N; with every
// element equal the layout only has to stay inside the tile.
VK_DEVICE u64 descriptor(const void* tile, u32 leading_bytes, u32 stride_bytes) {
  const u32 address = smem_addr(tile);
  return static_cast<u64>((address & 0x3FFFF) >> 4) | (static_cast<u64>(leading_bytes >> 4) << 16) |
         (static_cast<u64>(stride_bytes >> 4) << 32);
}

template <class T, bool kSparse>
VK_DEVICE void wgmma_peak(float* out, int iters, u32 ones, u32 meta, int store) {
  constexpr int kBRowBytes = kSparse ? 64 : 32;
  __shared__ alignas(128) u32 tile_a[64 * 32 / 4];
  __shared__ alignas(128) u32 tile_b[256 * kBRowBytes / 4];
  for (int i = threadIdx.x; i < 64 * 32 / 4; i += blockDim.x) tile_a[i] = ones;
  for (int i = threadIdx.x; i < 256 * kBRowBytes / 4; i += blockDim.x) tile_b[i] = ones;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic-proxy writes -> wgmma's async proxy
  __syncthreads();
  const u64 desc_a = descriptor(tile_a, 128, 8 * 32);
  const u64 desc_b = descriptor(tile_b, 128, 8 * kBRowBytes);
  typename T::Acc d[128];
#pragma unroll
  for (int e = 0; e < 128; ++e) d[e] = 0;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if constexpr (kSparse) {
        T::template mma<256, 0>(d, desc_a, desc_b, meta, 1);  // scale-d 1: D = A * B + D
      } else {
        T::dense_mma_n256(d, desc_a, desc_b, 1);
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  if (store) {
    float sum = 0.f;
#pragma unroll
    for (int e = 0; e < 128; ++e) sum += static_cast<float>(d[e]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  }
}

}  // namespace peak

#define VK_PEAK_WGMMA_KERNEL(NAME, TRAITS, SPARSE)                                                          \
  extern "C" __global__ void __launch_bounds__(256, 1)                                                       \
      NAME(float* out, int iters, u32 ones, u32 meta, int store) {                                          \
    peak::wgmma_peak<TRAITS, SPARSE>(out, iters, ones, meta, store);                                        \
  }
// One dense and one sparse kernel a type of WGMMA_SP_TYPES: peak_wgmma[_sp]_<ptx>_<accumulator>.
#define VK_PEAK_WGMMA_TYPE(PTX, ACC, TRAITS)                                                                \
  VK_PEAK_WGMMA_KERNEL(peak_wgmma_##PTX##_##ACC, TRAITS, false)                                            \
  VK_PEAK_WGMMA_KERNEL(peak_wgmma_sp_##PTX##_##ACC, TRAITS, true)

VK_PEAK_WGMMA_TYPE(f16, f32, wgsp::F16)
VK_PEAK_WGMMA_TYPE(bf16, f32, wgsp::BF16)
VK_PEAK_WGMMA_TYPE(tf32, f32, wgsp::TF32)
VK_PEAK_WGMMA_TYPE(e4m3, f32, wgsp::E4M3)
VK_PEAK_WGMMA_TYPE(e5m2, f32, wgsp::E5M2)
VK_PEAK_WGMMA_TYPE(s8, s32, wgsp::S8)
VK_PEAK_WGMMA_TYPE(u8, s32, wgsp::U8)

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
