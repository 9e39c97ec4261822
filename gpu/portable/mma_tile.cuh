// The m16n8k16 tile of opcts's tensor-core kernels (cuda.int4_mm, cuda.grouped_kernel, the flash
// kernels' products), for nvcc and hipcc from one header.
//
// Fragments of C[16×8] += A[16×16]·B[16×8] (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
// floating point type"; g = lane / 4, t = lane % 4 of a 32-lane warp):
//   a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..2t+1], a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9];
//   b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]; c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1].
// The GEMM kernels' walk over them: a warp computes a 32×32 quarter of a 64×64 block tile as
// 2 (m16) × 4 (n8) products per 16 k, A and Bᵀ staged in shared memory K-contiguous, Ld elements
// a row; each_acc names a lane's 32 accumulators' rows and columns. (The kernels keep that 2 × 4
// loop in their own body: nvcc emits their former code only when the accumulators are not passed
// through one more inlined function.)
//
// CUDA (sm_80+): mma.sync, the fragments loaded by ldmatrix (Load::ldmatrix) or by 32-bit shared
// loads (Load::words): the instructions the kernels issued before they shared this header.
// Elsewhere (HIP; nvcc with -DOPCTS_EMULATE_MMA, so an NVIDIA GPU can check this path against the
// PTX one; an sm below 80): the same fragments by 32-bit loads (ldmatrix's registers are those
// words) and the product emulated (mma_emulated): the lanes exchange fragments by 32-lane
// shuffles, each product of two 16-bit values is exact in fp32 (at most 11 + 11 significand bits)
// and is added by one fp32 FMA, k in order. tests/test_mma_tile.cpp runs the walk, the
// emulation and ldmatrix's addressing on the CPU against an fp64 GEMM.
// Next step (issue 15): an MFMA path (v_mfma_f32_16x16x16f16 / _bf16_1k on gfx90a and gfx94x),
// whose wave-64 fragments are laid out differently, so the walk, not only mma_m16n8k16, changes.
#pragma once

#include "gpu/portable/gpu.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

#if OPCTS_GPU_HIP || defined(OPCTS_EMULATE_MMA) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800)
#define OPCTS_MMA_EMULATED 1
#else
#define OPCTS_MMA_EMULATED 0
#endif

namespace opcts::gpu::mma {

/// The 16-bit pair of a fragment register as two floats (low half first): exact.
template <class T>
OPCTS_GPU_HD inline float2 widen2(uint32_t u) {
  if constexpr (std::is_same_v<T, __half>) {
    return make_float2(__half2float(__ushort_as_half(static_cast<unsigned short>(u & 0xFFFFu))),
                       __half2float(__ushort_as_half(static_cast<unsigned short>(u >> 16))));
  } else {
    const uint32_t lo = u << 16, hi = u & 0xFFFF0000u;
    float flo, fhi;
    __builtin_memcpy(&flo, &lo, 4);
    __builtin_memcpy(&fhi, &hi, 4);
    return make_float2(flo, fhi);
  }
}

/// c += A·B of one m16n8k16 product, this lane's part (fragments above), as the warp's lanes would
/// compute it without matrix instructions: `from(r, l)` is lane l's register r (0..3: a[0..3],
/// 4, 5: b[0], b[1]), on the GPU a shuffle, on the CPU a look-up. fp32 FMA over k = 0..15 in order.
template <class T, class From>
OPCTS_GPU_HD inline void mma_emulated(float (&c)[4], int lane, From from) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int kp = 0; kp < 8; ++kp) {
    const int ts = kp % 4, hi = kp / 4;  // k = 2kp, 2kp+1 sit in lane t' = kp % 4, register hi
    const float2 a0 = widen2<T>(from(hi ? 2 : 0, 4 * g + ts));
    const float2 a1 = widen2<T>(from(hi ? 3 : 1, 4 * g + ts));
    const float2 bc0 = widen2<T>(from(hi ? 5 : 4, 4 * (2 * t) + ts));
    const float2 bc1 = widen2<T>(from(hi ? 5 : 4, 4 * (2 * t + 1) + ts));
    c[0] = fmaf(a0.y, bc0.y, fmaf(a0.x, bc0.x, c[0]));
    c[1] = fmaf(a0.y, bc1.y, fmaf(a0.x, bc1.x, c[1]));
    c[2] = fmaf(a1.y, bc0.y, fmaf(a1.x, bc0.x, c[2]));
    c[3] = fmaf(a1.y, bc1.y, fmaf(a1.x, bc1.x, c[3]));
  }
}

/// An element of a K-contiguous tile: row `row`, k `k`.
struct At {
  int row, k;
};

/// Where lane `lane` points ldmatrix .x4 for A's fragment of rows r0..r0+15 at k kk: lanes 8j..8j+7
/// give the rows of 8×8 matrix j, which is (rows +0, k +0), (+8, +0), (+0, +8), (+8, +8).
OPCTS_GPU_HD inline At ldmatrix_a_at(int r0, int kk, int lane) {
  const int i = lane % 8, j = lane / 8;
  return {r0 + i + 8 * (j % 2), kk + 8 * (j / 2)};
}

/// Where lane `lane` points ldmatrix .x4 for the B fragments of columns c0..c0+7 (registers 0, 1)
/// and c0+8..c0+15 (2, 3) at kk, Bᵀ rows being B's columns: (cols +0, k +0), (+0, +8), (+8, +0), (+8, +8).
OPCTS_GPU_HD inline At ldmatrix_b_at(int c0, int kk, int lane) {
  const int i = lane % 8, j = lane / 8;
  return {c0 + i + 8 * (j / 2), kk + 8 * (j % 2)};
}

/// The 32-bit word (elements k, k+1) of row `row` of a tile of Ld-element rows.
template <int Ld, class T>
OPCTS_GPU_HD inline uint32_t word_at(const T* tile, int row, int k) {
  return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(tile) + (row * Ld + k) * 2);
}

/// A's fragment of rows r0..r0+15 at kk by 32-bit loads.
template <int Ld, class T>
OPCTS_GPU_HD inline void load_a_words(uint32_t (&a)[4], const T* As, int r0, int kk, int lane) {
  const int r = r0 + lane / 4, k = kk + 2 * (lane % 4);
  a[0] = word_at<Ld>(As, r, k);
  a[1] = word_at<Ld>(As, r + 8, k);
  a[2] = word_at<Ld>(As, r, k + 8);
  a[3] = word_at<Ld>(As, r + 8, k + 8);
}

/// B's fragment of columns c0..c0+7 at kk (Bᵀ rows c0..) by 32-bit loads.
template <int Ld, class T>
OPCTS_GPU_HD inline void load_b_words(uint32_t (&b)[2], const T* Bs, int c0, int kk, int lane) {
  const int c = c0 + lane / 4, k = kk + 2 * (lane % 4);
  b[0] = word_at<Ld>(Bs, c, k);
  b[1] = word_at<Ld>(Bs, c, k + 8);
}

/// Calls f(mi, ni, e, row, col) for each of a lane's 32 accumulators of the warp's quarter at
/// (wr, wc): fragment element e of m16 block mi and n8 block ni is row g + 8·(e/2), column 2t + e%2.
template <class F>
OPCTS_GPU_HD inline void each_acc(int wr, int wc, int lane, F f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(mi, ni, e, wr + 16 * mi + g + 8 * (e / 2), wc + 8 * ni + 2 * t + e % 2);
}

#if defined(__CUDACC__) || OPCTS_GPU_HIP

/// c += A·B for m16n8k16 with fp32 accumulation, T = __half or __nv_bfloat16 (fragments above).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if OPCTS_MMA_EMULATED
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  mma_emulated<T>(c, lane, [&](int r, int l) { return warp_shfl(r < 4 ? a[r] : r == 4 ? b0 : b1, l); });
#else
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/// How a kernel loads its fragments from shared memory (the same registers either way).
enum class Load { words, ldmatrix };

#if !OPCTS_MMA_EMULATED
/// Four 8×8 b16 matrices from shared memory (ldmatrix .x4, `row` this lane's row address): lane l
/// receives in r[j] the pair (row l / 4, columns 2(l % 4), +1) of matrix j.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const auto at = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}
#endif

/// Four fragment registers from the tile: by ldmatrix at this lane's row `at` (L = ldmatrix, with
/// mma.sync), else by `words()`, the 32-bit loads of the same registers.
template <Load L, int Ld, class T, class Words>
__device__ __forceinline__ void load_x4(uint32_t (&r)[4], const T* tile, At at, Words words) {
#if !OPCTS_MMA_EMULATED
  if constexpr (L == Load::ldmatrix) {
    ldmatrix_x4(r, tile + at.row * Ld + at.k);
    return;
  }
#endif
  (void)r, (void)tile, (void)at;
  words();
}

/// A's fragment of rows r0..r0+15 at kk (As K-contiguous, Ld-element rows).
template <Load L, int Ld, class T>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T* As, int r0, int kk, int lane) {
  load_x4<L, Ld>(a, As, ldmatrix_a_at(r0, kk, lane), [&] { load_a_words<Ld>(a, As, r0, kk, lane); });
}

/// The B fragments of two n8 blocks at kk: columns c0..c0+7 in b[0], b[1], c0+8..c0+15 in b[2], b[3]
/// (Bs = Bᵀ, K-contiguous, Ld-element rows).
template <Load L, int Ld, class T>
__device__ __forceinline__ void load_b2(uint32_t (&b)[4], const T* Bs, int c0, int kk, int lane) {
  load_x4<L, Ld>(b, Bs, ldmatrix_b_at(c0, kk, lane), [&] {
    load_b_words<Ld>(reinterpret_cast<uint32_t(&)[2]>(b[0]), Bs, c0, kk, lane);
    load_b_words<Ld>(reinterpret_cast<uint32_t(&)[2]>(b[2]), Bs, c0 + 8, kk, lane);
  });
}

#endif  // device code

}  // namespace opcts::gpu::mma
