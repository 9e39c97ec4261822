// Runtime errors in words a user can act on (host code; no harness types). One source for
// both runtimes: gpu/portable/runtime.hpp names them.
#pragma once

#include "gpu/portable/runtime.hpp"

#include <unistd.h>

#include <string>

namespace opcts::cuda {

/// "cudaErrorLaunchFailure (unspecified launch failure)", except on a machine without the
/// runtime's device: the runtime then says cudaErrorNoDevice, or cudaErrorInsufficientDriver
/// ("CUDA driver version is insufficient") when no driver is loaded at all, which reads as a
/// version problem; both become "no NVIDIA GPU found (...)" (HIP: "no ROCm device found (...)").
inline std::string cuda_error_text(cudaError_t e) {
  const std::string name = cudaGetErrorName(e);
  const bool no_driver = e == cudaErrorInsufficientDriver && ::access(gpu::kRuntime.driver_file, F_OK) != 0;
  if (e == cudaErrorNoDevice || no_driver)
    return std::string(gpu::kRuntime.no_device) + " (" + name +
           (no_driver ? std::string(": ") + gpu::kRuntime.no_driver + ")" : ")");
  return name + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace opcts::cuda
