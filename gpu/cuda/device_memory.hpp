// Whether a case's buffers fit in the current device's free memory: the glue's SKIP check
// (CUDA's spelling, built for HIP too: gpu/portable/runtime.hpp).
#pragma once

#include "gpu/portable/runtime.hpp"

#include <cstdio>
#include <string>
#include <string_view>

#include "core/family.hpp"

namespace opcts::cuda {

/// Free memory kept back for what the glue does not count (cuBLAS workspace, the context's
/// own allocations, fragmentation).
constexpr double kDeviceMemoryHeadroom = 0.9;

/// Support::no naming both sizes when `bytes` (Family::device_bytes) exceed
/// kDeviceMemoryHeadroom of the current device's free memory (cudaMemGetInfo), so such a case
/// is SKIP with that reason instead of a cudaErrorMemoryAllocation. When the runtime cannot
/// answer, yes: the run then reports the real error. The supervisor makes the run's GPU
/// current first (use_cuda_device). Used by the sdpa, cast and scaled_mm glue.
inline Support fits_device_memory(double bytes, std::string_view impl) {
  int dev = 0;
  size_t free_b = 0, total_b = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so that it does not surface in the next call
    return Support::yes();
  }
  if (bytes <= kDeviceMemoryHeadroom * static_cast<double>(free_b)) return Support::yes();
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.*s: buffers need %.2f GiB but GPU %d has %.2f GiB free of %.2f GiB",
                static_cast<int>(impl.size()), impl.data(), bytes / 1073741824.0, dev,
                static_cast<double>(free_b) / 1073741824.0, static_cast<double>(total_b) / 1073741824.0);
  return Support::no(buf);
}

}  // namespace opcts::cuda
