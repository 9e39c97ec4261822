// Device helpers shared by the flash forward (sdpa_flash.cu) and backward
// (sdpa_flash_backward.cu): the visibility rule of sdpa_kernels.hpp reduced to a per-row key
// interval, and the host-side checks both kernels share.
#pragma once

#include "gpu/cuda/cp_async.cuh"
#include "gpu/portable/gpu.hpp"
#include "gpu/portable/mma_tile.cuh"

#include <cstdint>

#include "sdpa_kernels.hpp"

namespace opcts::cuda::flash {

/// Causal mask and window as one interval: key j is visible to query row i iff
/// i + lo_off <= j <= i + hi_off (and 0 <= j < Sk); +-2^62 stands for "unbounded".
struct KeyInterval {
  int64_t lo_off, hi_off;
};

constexpr int64_t kUnbounded = int64_t(1) << 62;

/// The interval before the alignment is known: the bounds that move with off = Sk − Sq (the
/// lower-right mask and the window, relative to off) and upper-left causal's, which does not.
/// A varlen kernel places it per sequence (at_offset with Sk_b − Sq_b).
struct RelInterval {
  int64_t lo_rel, hi_rel;
  bool upper_left;
};

inline RelInterval rel_interval(const SdpaParams& p) {
  RelInterval r{-kUnbounded, kUnbounded, p.mask == SdpaMask::causal_upper_left};
  if (p.mask == SdpaMask::causal_lower_right) r.hi_rel = 0;
  if (p.window_right >= 0 && p.window_right < r.hi_rel) r.hi_rel = p.window_right;
  if (p.window_left >= 0) {
    r.lo_rel = -p.window_left;
    if (p.plant == SdpaPlant::window_off_by_one) r.lo_rel -= 1;  // planted: one key too many
  }
  return r;
}

inline __host__ __device__ KeyInterval at_offset(const RelInterval& r, int64_t off) {
  KeyInterval k{-kUnbounded, kUnbounded};
  if (r.lo_rel != -kUnbounded) k.lo_off = off + r.lo_rel;
  if (r.hi_rel != kUnbounded) k.hi_off = off + r.hi_rel;
  if (r.upper_left && k.hi_off > 0) k.hi_off = 0;
  return k;
}

inline KeyInterval key_interval(const SdpaParams& p) { return at_offset(rel_interval(p), p.seq_k - p.seq_q); }

/// The first key of the chunk holding position a (chunked-local attention, SdpaParams::chunk):
/// ⌊a / c⌋·c, the floor also for the negative positions of rows above the lower-right diagonal.
inline __host__ __device__ int64_t chunk_first(int64_t a, int64_t c) {
  return (a >= 0 ? a / c : -((-a + c - 1) / c)) * c;
}

/// ALiBi's bias (SdpaParams::alibi) at the distance d = i + Sk − Sq − j of row i and key j:
/// slope·|d|, |d| exact until its one conversion and the product rounded on its own (__fmul_rn,
/// so that the compiler does not fuse it into the score's subtraction), as the reference
/// computes it.
template <typename I>
__device__ __forceinline__ float alibi_bias(float slope, I d) {
  return __fmul_rn(slope, static_cast<float>(d < 0 ? -d : d));
}

/// The longest Sq and Sk with ALiBi in the flash forward, whose distances are 32-bit integers
/// (a tile's rows and columns around the block's first: |d| < 2^31 with room for them).
constexpr int64_t kAlibiMaxSeq = (int64_t(1) << 31) - 4096;

/// The step of alibi_slopes between batch entries (sequences): Hq for per_batch_head, 0 for
/// per_head (every batch entry reads row 0).
inline int64_t alibi_batch_stride(const SdpaParams& p) { return p.alibi == SdpaAlibi::per_batch_head ? p.heads_q : 0; }

/// The keys some row in [r0, r1] (clipped to [0, Sq)) may see under the interval, clipped to
/// [0, Sk): [*k0, *k1), empty when *k0 >= *k1.
inline __host__ __device__ void keys_of_rows(const KeyInterval& iv, int64_t r0, int64_t r1, int64_t seq_k, int64_t* k0,
                                             int64_t* k1) {
  // lo_off > hi_off (upper-left causal with a window starting right of the diagonal):
  // every row's interval is empty. Otherwise the union over consecutive rows is one
  // interval, so every key of the result is seen by some row of [r0, r1].
  if (iv.lo_off > iv.hi_off || r0 > r1) {
    *k0 = *k1 = 0;
    return;
  }
  int64_t lo = r0 + iv.lo_off, hi = r1 + iv.hi_off + 1;
  if (lo < 0) lo = 0;
  if (hi > seq_k) hi = seq_k;
  *k0 = lo;
  *k1 = hi;
}

/// The query rows that may see some key in [c0, c1] under the interval, clipped to [0, Sq):
/// [*q0, *q1).
inline __host__ __device__ void rows_of_keys(const KeyInterval& iv, int64_t c0, int64_t c1, int64_t seq_q, int64_t* q0,
                                             int64_t* q1) {
  // j visible to i  <=>  j - hi_off <= i <= j - lo_off
  if (iv.lo_off > iv.hi_off || c0 > c1) {
    *q0 = *q1 = 0;
    return;
  }
  int64_t lo = c0 - iv.hi_off, hi = c1 - iv.lo_off + 1;
  if (lo < 0) lo = 0;
  if (hi > seq_q) hi = seq_q;
  *q0 = lo;
  *q1 = hi;
}

template <typename T>
__device__ __forceinline__ float to_f32(T x) {
  return static_cast<float>(x);
}

inline bool is_supported_head_dims(int64_t dqk, int64_t dv) {
  auto one = [](int64_t d) { return d == 32 || d == 64 || d == 80 || d == 96 || d == 128 || d == 192 || d == 256; };
  return (one(dqk) && dqk == dv) || (dqk == 192 && dv == 128);
}

constexpr const char* kHeadDimsWhy =
    "flash kernel supports head_dim 32, 64, 80, 96, 128, 192 and 256 (Dv = Dqk), and "
    "Dqk 192 with Dv 128";

// ---------------------------------------------------------------------------------------
// The tile building blocks of the tensor-core kernels, forward and backward: inline PTX
// (sm_80+) under CUDA; under HIP the same functions with the same fragment semantics, written
// with 32-lane shuffles and plain loads (the portable path of gpu/portable/gpu.hpp; the
// m16n8k16 product itself is gpu/portable/mma_tile.cuh's, shared with the GEMM kernels:
// no matrix cores yet; an MFMA path, whose fragments are laid out differently, is issue 15's
// follow-up). OPCTS_EMULATE_MMA selects the HIP path under nvcc too, so an H200 can check it
// against the PTX path.
#define OPCTS_FLASH_EMULATED_TILES OPCTS_MMA_EMULATED

namespace ptx {

#if OPCTS_FLASH_EMULATED_TILES
#if OPCTS_GPU_HIP
// LDS addresses are 32-bit (address space 3): the same uint32_t currency as PTX's .shared.
typedef __attribute__((address_space(3))) unsigned char lds_byte;
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>((const lds_byte*)p));
}
template <class U>
__device__ __forceinline__ U* smem_ptr(uint32_t addr) {
  return (U*)(reinterpret_cast<lds_byte*>(static_cast<uintptr_t>(addr)));
}
#else
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
template <class U>
__device__ __forceinline__ U* smem_ptr(uint32_t addr) {
  return static_cast<U*>(__cvta_shared_to_generic(addr));
}
#endif

// Synchronous copies: strictly stronger than cp.async's (commit and wait have nothing to do).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  *smem_ptr<uint4>(dst) = src_bytes ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  *smem_ptr<uint32_t>(dst) = src_bytes ? *static_cast<const uint32_t*>(src) : 0u;
}
__device__ __forceinline__ void cp_async_commit() {}
__device__ __forceinline__ void cp_async_wait_all() {}

// ldmatrix .x4: lane 8j + r gives the address of row r of 8x8 matrix j; lane l gets, of each
// matrix j, row l/4's 16-bit elements 2(l%4), 2(l%4)+1 (.trans: column l/4's rows 2(l%4), 2(l%4)+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  const int lane = static_cast<int>(threadIdx.x) % gpu::kWarp;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t row = gpu::warp_shfl(addr, 8 * j + lane / 4);
    r[j] = *smem_ptr<const uint32_t>(row + 4 * (lane % 4));
  }
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  const int lane = static_cast<int>(threadIdx.x) % gpu::kWarp;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t row0 = gpu::warp_shfl(addr, 8 * j + 2 * (lane % 4));
    const uint32_t row1 = gpu::warp_shfl(addr, 8 * j + 2 * (lane % 4) + 1);
    const uint32_t lo = *smem_ptr<const uint16_t>(row0 + 2 * (lane / 4));
    const uint32_t hi = *smem_ptr<const uint16_t>(row1 + 2 * (lane / 4));
    r[j] = lo | (hi << 16);
  }
}

__device__ __forceinline__ float fast_exp2(float x) { return exp2f(x); }  // exp2(-inf) = +0

#else

// The copies (gpu/cuda/cp_async.cuh, shared with cuda.int4_gemv's ring).
using async::cp_async_16;
using async::cp_async_4;
using async::cp_async_commit;
using async::cp_async_wait_all;
using async::smem_addr;

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 2^x with flush-to-zero: exp2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif  // OPCTS_FLASH_EMULATED_TILES

// D += A·B for m16n8k16, row.col, fp32 accumulation (gpu::mma::mma_m16n8k16, whose header
// gives the fragments), and the packing of fp32 pairs into T fragments and back.
template <typename T>
struct Mma;

template <>
struct Mma<__half> {
  __device__ __forceinline__ static void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    gpu::mma::mma_m16n8k16<__half>(c, a, b0, b1);
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  __device__ __forceinline__ static float2 unpack(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
  }
  __device__ __forceinline__ static uint16_t one(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

template <>
struct Mma<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    gpu::mma::mma_m16n8k16<__nv_bfloat16>(c, a, b0, b1);
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  __device__ __forceinline__ static float2 unpack(uint32_t w) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w));
  }
  __device__ __forceinline__ static uint16_t one(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};

}  // namespace ptx

// ---------------------------------------------------------------------------------------
// Block-sparse attention (SdpaParams::block_mask): a (batch, query head)'s mask is ⌈Sq / bq⌉ rows
// of nkb bytes. The kernels index it in 32 bits (sdpa_flash_supports bounds Sq and Sk; block
// sizes come clamped to the lengths, which changes no quotient).

/// The block sizes as the kernels take them: at most the length (and at least 1), so that they
/// fit 32 bits; the quotient of every index below the length is unchanged.
inline int block_size_for(int64_t block, int64_t len) {
  const int64_t b = block < len ? block : len;
  return static_cast<int>(b < 1 ? 1 : b);
}

/// The kernel arguments' block-mask fields (block_mask, block_hs, block_nk, block_q, block_k) from
/// p: block_mask null when off (and for packed layouts, which have none); (b, h)'s mask at
/// block_mask + (b·Hq + h)·block_hs, rows of block_nk bytes.
template <typename Args>
inline void set_block_mask(Args& a, const SdpaParams& p) {
  const bool on = p.block_q > 0 && p.block_k > 0 && !p.cu_seqlens_q;
  a.block_mask = on ? p.block_mask : nullptr;
  a.block_nk = on ? (p.seq_k + p.block_k - 1) / p.block_k : 0;
  a.block_hs = on ? (p.seq_q + p.block_q - 1) / p.block_q * a.block_nk : 0;
  a.block_q = block_size_for(p.block_q, p.seq_q);
  a.block_k = block_size_for(p.block_k, p.seq_k);
}

/// Whether row i's query block reads key j's block (i < Sq, j < Sk).
__device__ __forceinline__ bool block_reads(const uint8_t* bm, int64_t nkb, int bq, int bk, int64_t i, int64_t j) {
  const uint32_t qb = static_cast<uint32_t>(i) / static_cast<uint32_t>(bq);
  const uint32_t kb = static_cast<uint32_t>(j) / static_cast<uint32_t>(bk);
  return bm[int64_t(qb) * nkb + kb] != 0;
}

/// Whether some pair of rows [r0, r1] and keys [c0, c1] (within the lengths, r0 <= r1, c0 <= c1)
/// lies in a block pair the mask reads. A barrier (a block-wide vote): every thread of the block
/// calls it with the same arguments; the threads share the block pairs, and a tile for which it
/// is false need not be loaded at all (FlexAttention's kv_num_blocks).
__device__ __forceinline__ bool block_tile_reads(const uint8_t* bm, int64_t nkb, int bq, int bk, int64_t r0, int64_t r1,
                                                 int64_t c0, int64_t c1) {
  const int64_t qb0 = r0 / bq, kb0 = c0 / bk, nk = c1 / bk - kb0 + 1, pairs = (r1 / bq - qb0 + 1) * nk;
  int any = 0;
  for (int64_t x = threadIdx.x; x < pairs && !any; x += blockDim.x) any = bm[(qb0 + x / nk) * nkb + kb0 + x % nk] != 0;
#if OPCTS_GPU_HIP
  // HIP's __syncthreads_or (ockl's wgred) selects permlanex16, which gfx90a lacks (hipcc 5.x,
  // clang 15): the vote in shared memory instead, between barriers.
  __shared__ int vote;
  __syncthreads();  // every thread has read the previous vote
  if (threadIdx.x == 0) vote = 0;
  __syncthreads();
  if (any) vote = 1;
  __syncthreads();
  return vote != 0;
#else
  return __syncthreads_or(any) != 0;
#endif
}

}  // namespace opcts::cuda::flash
