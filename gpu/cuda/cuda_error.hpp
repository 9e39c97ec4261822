// CUDA runtime errors in words a user can act on (host code; no harness types).
#pragma once

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <string>

namespace opcts::cuda {

/// "cudaErrorLaunchFailure (unspecified launch failure)", except on a machine with no NVIDIA
/// GPU: the runtime then says cudaErrorNoDevice, or cudaErrorInsufficientDriver ("CUDA driver
/// version is insufficient") when no NVIDIA driver is loaded at all, which reads as a version
/// problem; both become "no NVIDIA GPU found (...)".
inline std::string cuda_error_text(cudaError_t e) {
  const std::string name = cudaGetErrorName(e);
  const bool no_driver = e == cudaErrorInsufficientDriver && ::access("/proc/driver/nvidia/version", F_OK) != 0;
  if (e == cudaErrorNoDevice || no_driver)
    return "no NVIDIA GPU found (" + name + (no_driver ? ": no NVIDIA driver is loaded)" : ")");
  return name + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace opcts::cuda
