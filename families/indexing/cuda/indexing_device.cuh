// Device helpers of the indexing kernels: warp primitives written once for 32- and 64-lane warps, the accumulator
// types, and the atomic add of each value type (PyTorch's paired 16-bit fast path).
//
// Portable (nvcc and hipcc build it): the warp size is a compile-time constant, lanes are
// grouped with ballots and shuffles (no __match_any_sync, which HIP lacks), and no inline PTX;
// the 16-bit atomics are CUDA's own atomicAdd overloads (native atom.add.noftz.f16x2 / bf16x2 on
// sm_90, CUDA's atomicCAS loops before), and under HIP 5.2, which has none, gpu.hpp's CAS loops.
#pragma once

#include "gpu/portable/gpu.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "families/indexing/cuda/indexing_kernels.hpp"
#include "families/indexing/cuda/indexing_layout.cuh"

namespace opcts::cuda::idx {

// The hardware wavefront and its ballot / shuffle / lane search (gpu/portable/gpu.hpp):
// 32 lanes on CUDA and RDNA, 64 on CDNA.
constexpr int kWarpSize = gpu::kWave;
using LaneMask = gpu::LaneMask;
__device__ __forceinline__ LaneMask warp_ballot(bool p) { return gpu::wave_ballot(p); }
template <class T>
__device__ __forceinline__ T warp_shfl(T v, int lane) {
  return gpu::wave_shfl(v, lane);
}
__device__ __forceinline__ int lowest_lane(LaneMask m) { return gpu::lowest_lane(m); }

constexpr int kThreads = 256;  // a multiple of kWarpSize: every warp is full
constexpr int64_t kMaxBlocks = 1 << 16;

inline int blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// The accumulator of a value type: fp32 for the 16-bit types, the type itself otherwise.
template <class T>
struct AccOf {
  using type = T;
};
template <>
struct AccOf<__half> {
  using type = float;
};
template <>
struct AccOf<__nv_bfloat16> {
  using type = float;
};
template <class T>
using acc_t = typename AccOf<T>::type;

template <class T>
__device__ __forceinline__ acc_t<T> widen(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}

/// One rounding to nearest even into T (exact for the wide types and integers).
template <class T>
__device__ __forceinline__ T narrow(acc_t<T> v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return v;
}

/// out[e] += v atomically: one rounding in T. 16-bit types take PyTorch's fastSpecializedAtomicAdd
/// (aten/src/ATen/native/cuda/KernelUtils.cuh): the 32-bit pair holding e, with +0 added to the
/// other half, unless the pair would leave the tensor (layout::pair_of; `no_ends_check` is the
/// planted bug that lets it).
template <class T>
__device__ __forceinline__ void atomic_add(T* out, int64_t e, int64_t numel, T v, bool no_ends_check) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    T* at = out + e;
    const bool aligned4 = (reinterpret_cast<uintptr_t>(at) & 3u) == 0;
    T zero;
    if constexpr (std::is_same_v<T, __half>) zero = __ushort_as_half(0);
    else zero = __ushort_as_bfloat16(0);
    switch (layout::pair_of(e, numel, aligned4, no_ends_check)) {
      case layout::Pair::starts_here: {
        T2 pair;
        pair.x = v;
        pair.y = zero;
        gpu::atomic_add16x2(reinterpret_cast<T2*>(at), pair);
        return;
      }
      case layout::Pair::ends_here: {
        T2 pair;
        pair.x = zero;
        pair.y = v;
        gpu::atomic_add16x2(reinterpret_cast<T2*>(at - 1), pair);
        return;
      }
      case layout::Pair::scalar: gpu::atomic_add16(at, v); return;
    }
  } else if constexpr (std::is_same_v<T, long long>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(out + e), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(out + e, v);
  }
}

/// Calls f(T{}, I{}) for the value and index types of a problem.
template <class F>
void with_types(IdxValue v, IdxIndex i, F&& f) {
  auto go = [&](auto value_tag) {
    if (i == IdxIndex::int32) f(value_tag, int32_t{});
    else f(value_tag, static_cast<long long>(0));
  };
  switch (v) {
    case IdxValue::fp64: go(double{}); return;
    case IdxValue::fp32: go(float{}); return;
    case IdxValue::fp16: go(__half{}); return;
    case IdxValue::bf16: go(__nv_bfloat16{}); return;
    case IdxValue::int32: go(int{}); return;
    case IdxValue::int64: go(static_cast<long long>(0)); return;
  }
}

/// Bytes of one element of a value type.
inline int64_t value_bytes(IdxValue v) {
  switch (v) {
    case IdxValue::fp64:
    case IdxValue::int64: return 8;
    case IdxValue::fp32:
    case IdxValue::int32: return 4;
    default: return 2;
  }
}

}  // namespace opcts::cuda::idx
