// Device detection through the CUDA runtime, else AMD GPUs from the KFD topology (kfd_probe.hpp),
// else the host.
#include "runner/device_probe.hpp"

#include <stdexcept>

#include "runner/kfd_probe.hpp"

#if OPCTS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace opcts {

namespace {

// No CUDA device: the AMD GPU `device` in KFD order, else "host".
std::string amd_or_host(int device, std::string* why, const std::string& no_cuda) {
  const std::vector<std::string> amd = kfd_gpu_archs();
  const size_t d = device < 0 ? 0 : static_cast<size_t>(device);
  if (d < amd.size()) {
    if (why) *why = no_cuda + "; AMD GPU " + std::to_string(d) + " (KFD topology): " + amd[d];
    return amd[d];
  }
  if (why) *why = no_cuda + (amd.empty() ? "" : "; only " + std::to_string(amd.size()) + " AMD GPUs");
  return "host";
}

}  // namespace

int amd_device_count() { return static_cast<int>(kfd_gpu_archs().size()); }

int cuda_device_count() {
#if OPCTS_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

void use_cuda_device(int device) {
#if OPCTS_HAVE_CUDA
  if (device >= 0 && device < cuda_device_count()) cudaSetDevice(device);
#else
  (void)device;
#endif
}

std::string detect_arch(int device, std::string* why) {
#if OPCTS_HAVE_CUDA
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0)
    return amd_or_host(
        device, why,
        std::string("no NVIDIA GPU found: ") + (err != cudaSuccess ? cudaGetErrorName(err) : "count is 0"));
  const int d = device < 0 ? 0 : device;
  if (d >= n)
    throw std::invalid_argument("--device " + std::to_string(d) + " but only " + std::to_string(n) + " CUDA devices");
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
    if (why) *why = "cudaGetDeviceProperties failed";
    return "host";
  }
  if (why) *why = std::string("CUDA device ") + std::to_string(d) + ": " + prop.name;
  return "sm" + std::to_string(prop.major) + std::to_string(prop.minor);
#else
  return amd_or_host(device, why, "built without CUDA");
#endif
}

}  // namespace opcts
