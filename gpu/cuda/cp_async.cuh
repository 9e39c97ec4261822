// Asynchronous global-to-shared copies (sm_80+ cp.async, PTX ISA "cp.async"): the one set of
// wrappers the tensor-core kernels stream through (the flash kernels' tiles, cuda.int4_gemv's ring).
//
// A thread's copies complete in the order of their commit groups; cp_async_wait<N> returns once
// at most N of its groups are still in flight. .cg caches in L2 only and takes 16 bytes; 4-byte
// copies take .ca. CUDA only: the HIP builds have no cp.async (the flash kernels' emulated tiles
// copy synchronously; cuda.int4_gemv's HIP path loads into registers).
#pragma once

#include <cstdint>

#include "gpu/portable/gpu.hpp"

#if !OPCTS_GPU_HIP

namespace opcts::cuda::async {

/// The 32-bit shared-memory address of a generic pointer into shared memory (PTX's .shared).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared; src_bytes (0 or 16) = 0 zero-fills the destination without reading.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
/// 4 bytes global -> shared; src_bytes (0 or 4) = 0 zero-fills.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
/// 16 bytes global -> shared, always read (no source-size operand).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
/// 4 bytes global -> shared, always read.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src));
}
/// Closes this thread's current group of copies.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/// Waits for all of them.
__device__ __forceinline__ void cp_async_wait_all() { cp_async_wait<0>(); }

}  // namespace opcts::cuda::async

#endif  // !OPCTS_GPU_HIP
