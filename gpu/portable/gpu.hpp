// The CUDA/HIP differences of opcts's own kernels, in one header: the kernel files keep CUDA's
// spelling and include this instead of the CUDA headers, so nvcc and hipcc build the same files.
//
// Under nvcc (no __HIPCC__) it only includes the CUDA headers and defines the opcts::gpu
// wrappers as the CUDA intrinsic each stands for, so the CUDA build compiles to the code it
// compiled to before. Under hipcc (HIP 5.2, Debian's hipcc) it maps:
//   - the runtime calls and types the kernel files use (cudaX -> hipX, CUstream_st -> ihipStream_t,
//     the struct hipStream_t points to), the way ggml's vendors/hip.h does;
//   - bf16: HIP 5.2 has no hip_bf16.h, only hip_bfloat16.h's hip_bfloat16 (RNE from float, NaN kept),
//     so __nv_bfloat16 / __nv_bfloat162 and their conversions are defined over it here;
//   - conversions from double: HIP 5.2 has neither __double2half nor __double2bfloat16; both are
//     defined here with one rounding (round_odd_to_float, then to nearest even);
//   - runtime: cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount) (a CU count on AMD);
//   - fp8/fp6/fp4: HIP 5.2 has no such types; kernels use numerics/minifloat_bits.hpp instead;
//   - 16-bit atomics: HIP 5.2 has no atomicAdd for __half/__half2/bf16, so atomic_add16 and
//     atomic_add16x2 are compare-and-swap loops on the 32-bit word (gfx90a+ have packed-f16 atomic
//     instructions; using them is a follow-up, issue 15);
//   - the warp: opcts's kernels are written for 32-lane warps (the m16n8k16 fragment layout, the
//     `lane = tid % 32` maps). On wave64 targets (gfx9: gfx90a, gfx94x, gfx950) one wavefront holds
//     two such warps, so every cross-lane op here has width kWarp = 32 and stays inside its half
//     (__shfl_xor(v, off, 32)); RDNA (gfx11, gfx12) runs wave32, where the width is the wavefront.
//     Kernels that want the hardware wavefront (ballot-based lane grouping) use kWave / LaneMask.
//   - __launch_bounds__(threads, min_blocks): HIP's second argument means minimum waves per EU,
//     not blocks per SM, so OPCTS_LAUNCH_BOUNDS drops it under HIP;
//   - the dynamic shared memory opt-in (cudaFuncSetAttribute) takes a const void* in HIP:
//     set_max_dynamic_smem wraps both.
// Sources: HIP 5.2 headers (/usr/include/hip: amd_warp_functions.h, amd_hip_atomic.h,
// hip_bfloat16.h, amd_device_functions.h); HIP programming guide, "Warp cross-lane functions".
#pragma once

#include <cstdint>

#include "gpu/portable/runtime.hpp"  // OPCTS_GPU_HIP and the runtime's names

#if OPCTS_GPU_HIP
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#if OPCTS_GPU_HIP
// --- bf16 over hip_bfloat16 -------------------------------------------------------------------
using __nv_bfloat16 = hip_bfloat16;
struct __nv_bfloat162 {
  hip_bfloat16 x, y;
};
__host__ __device__ inline hip_bfloat16 __float2bfloat16_rn(float f) { return hip_bfloat16(f); }
__host__ __device__ inline float __bfloat162float(hip_bfloat16 b) { return static_cast<float>(b); }
__host__ __device__ inline unsigned short __bfloat16_as_ushort(hip_bfloat16 b) { return b.data; }
__host__ __device__ inline hip_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  hip_bfloat16 b;
  b.data = u;
  return b;
}
__host__ __device__ inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {hip_bfloat16(lo), hip_bfloat16(hi)};
}
__host__ __device__ inline float2 __bfloat1622float2(__nv_bfloat162 v) {
  return make_float2(static_cast<float>(v.x), static_cast<float>(v.y));
}

#define OPCTS_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#else
#define OPCTS_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#endif

#if defined(__CUDACC__) || OPCTS_GPU_HIP
#define OPCTS_GPU_HD __host__ __device__
#else
#define OPCTS_GPU_HD
#endif

namespace opcts::gpu {

/// d rounded to float by round-to-odd (toward zero, the last bit set when inexact): a second
/// rounding, to nearest even, to a format of at most 22 significand bits (fp16, bf16) then gives
/// the correctly rounded value of d, where float's own rounding would round twice. Boldo and
/// Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
/// odd", IEEE Trans. Computers 57(4), 2008, Theorem 3. Used by HIP's __double2half and
/// __double2bfloat16 below (tests/test_gpu_round_odd.cpp checks them against CUDA's).
OPCTS_GPU_HD inline float round_odd_to_float(double d) {
  float f = static_cast<float>(d);                      // to nearest: the answer is f or its neighbour toward d
  if (static_cast<double>(f) == d || d != d) return f;  // exact, or NaN
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 1u) == 0) u = __builtin_fabs(static_cast<double>(f)) > __builtin_fabs(d) ? u - 1 : u + 1;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

/// The warp opcts's kernels are written for: 32 lanes on every target (see the file comment).
constexpr int kWarp = 32;

#if OPCTS_GPU_HIP
#if defined(__AMDGCN_WAVEFRONT_SIZE)
constexpr int kWave = __AMDGCN_WAVEFRONT_SIZE;  // 64 on gfx9, 32 on gfx10+ (hipcc's default)
#else
constexpr int kWave = 64;  // host pass: device code only may use it
#endif
using LaneMask = unsigned long long;
#else
constexpr int kWave = 32;
using LaneMask = unsigned;
#endif

#if defined(__CUDACC__) || OPCTS_GPU_HIP

/// v of the lane `lane ^ off` of this 32-lane warp (off < 32).
template <class T>
__device__ __forceinline__ T warp_xor(T v, int off) {
#if OPCTS_GPU_HIP
  return __shfl_xor(v, off, kWarp);
#else
  return __shfl_xor_sync(0xffffffffu, v, off);
#endif
}

/// v of lane `src` (0..31) of this 32-lane warp.
template <class T>
__device__ __forceinline__ T warp_shfl(T v, int src) {
#if OPCTS_GPU_HIP
  return __shfl(v, src, kWarp);
#else
  return __shfl_sync(0xffffffffu, v, src);
#endif
}

/// v of the lane `lane - d` of this 32-lane warp (its own v in lanes below d), for scans.
template <class T>
__device__ __forceinline__ T warp_up(T v, int d) {
#if OPCTS_GPU_HIP
  return __shfl_up(v, static_cast<unsigned>(d), kWarp);
#else
  return __shfl_up_sync(0xffffffffu, v, d);
#endif
}

/// The OR of v over this 32-lane warp, in every lane.
__device__ __forceinline__ uint32_t warp_or(uint32_t v) {
#if OPCTS_GPU_HIP
  for (int off = kWarp / 2; off > 0; off >>= 1) v |= __shfl_xor(v, off, kWarp);
  return v;
#else
  return __reduce_or_sync(0xffffffffu, v);
#endif
}

/// Orders this warp's shared-memory writes before its later reads (CUDA's __syncwarp; on AMD a
/// wavefront runs in lockstep, so a wavefront-scope fence and the compiler barrier suffice).
__device__ __forceinline__ void syncwarp() {
#if OPCTS_GPU_HIP
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
  __syncwarp();
#endif
}

/// Ballot over the hardware wavefront (kWave lanes), and the shuffles and lane search that go
/// with it: for kernels that group lanes by value, whatever the wave size.
__device__ __forceinline__ LaneMask wave_ballot(bool p) {
#if OPCTS_GPU_HIP
  return __ballot(p);
#else
  return __ballot_sync(0xffffffffu, p);
#endif
}
template <class T>
__device__ __forceinline__ T wave_shfl(T v, int lane) {
#if OPCTS_GPU_HIP
  return __shfl(v, lane);
#else
  return __shfl_sync(0xffffffffu, v, lane);
#endif
}
__device__ __forceinline__ int lowest_lane(LaneMask m) {
#if OPCTS_GPU_HIP
  return static_cast<int>(__ffsll(m)) - 1;
#else
  return __ffs(m) - 1;
#endif
}

/// Nanoseconds of a device clock that runs while the GPU waits (CUDA: %globaltimer; AMD:
/// s_memrealtime, a constant 100 MHz counter on CDNA and RDNA — AMD's ISA manuals,
/// "S_MEMREALTIME").
__device__ __forceinline__ unsigned long long global_ns() {
#if OPCTS_GPU_HIP && defined(__HIP_DEVICE_COMPILE__)
  return static_cast<unsigned long long>(wall_clock64()) * 10ull;
#elif OPCTS_GPU_HIP
  return 0;  // host pass of a device function: never called
#else
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

/// Sleeps about `ns` nanoseconds in a polling loop.
__device__ __forceinline__ void nanosleep(unsigned ns) {
#if OPCTS_GPU_HIP
  (void)ns;
  __builtin_amdgcn_s_sleep(127);  // the longest s_sleep: 127 * 64 clocks
#else
  __nanosleep(ns);
#endif
}

#if OPCTS_GPU_HIP
/// Replaces the aligned 32-bit word at `word` by f(word) atomically (a compare-and-swap loop).
template <class F>
__device__ __forceinline__ void atomic_update32(unsigned* word, F f) {
  unsigned old = *word, assumed;
  do {
    assumed = old;
    old = atomicCAS(word, assumed, f(assumed));
  } while (old != assumed);
}
__device__ __forceinline__ unsigned short add_bits(unsigned short a, __half v) {
  return __half_as_ushort(__float2half_rn(__half2float(__ushort_as_half(a)) + __half2float(v)));
}
__device__ __forceinline__ unsigned short add_bits(unsigned short a, __nv_bfloat16 v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(a)) + __bfloat162float(v)));
}
#endif

/// *at += v atomically for a 16-bit float type T (__half, __nv_bfloat16): one rounding in T.
template <class T>
__device__ __forceinline__ void atomic_add16(T* at, T v) {
#if OPCTS_GPU_HIP
  const uintptr_t addr = reinterpret_cast<uintptr_t>(at);
  const unsigned shift = (addr & 2u) ? 16u : 0u;
  atomic_update32(reinterpret_cast<unsigned*>(addr & ~uintptr_t{3}), [=](unsigned w) {
    const unsigned short next = add_bits(static_cast<unsigned short>(w >> shift), v);
    return (w & ~(0xFFFFu << shift)) | (unsigned{next} << shift);
  });
#else
  atomicAdd(at, v);
#endif
}

/// The 4-byte aligned pair *at += v atomically (__half2, __nv_bfloat162): each half rounded once.
template <class T2>
__device__ __forceinline__ void atomic_add16x2(T2* at, T2 v) {
#if OPCTS_GPU_HIP
  atomic_update32(reinterpret_cast<unsigned*>(at), [=](unsigned w) {
    const unsigned lo = add_bits(static_cast<unsigned short>(w), v.x);
    const unsigned hi = add_bits(static_cast<unsigned short>(w >> 16), v.y);
    return lo | (hi << 16);
  });
#else
  atomicAdd(at, v);
#endif
}

#endif  // device code

/// Opts `kernel` in to `bytes` of dynamic shared memory (above 48 KiB on CUDA; AMD's LDS is
/// 64 KiB per workgroup on gfx90a/gfx94x and 160 KiB on gfx950, and the launch fails beyond it).
template <class Kernel>
inline cudaError_t set_max_dynamic_smem(Kernel kernel, int bytes) {
#if OPCTS_GPU_HIP
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
#else
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
#endif
}

}  // namespace opcts::gpu

#if OPCTS_GPU_HIP
// One rounding from double, as CUDA's (HIP 5.2 has neither).
__host__ __device__ inline __half __double2half(double d) { return __float2half_rn(opcts::gpu::round_odd_to_float(d)); }
__host__ __device__ inline hip_bfloat16 __double2bfloat16(double d) {
  return hip_bfloat16(opcts::gpu::round_odd_to_float(d));
}
#endif
