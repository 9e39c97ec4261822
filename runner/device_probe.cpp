// Device detection through the CUDA runtime (a build without CUDA sees only the host).
#include "runner/device_probe.hpp"

#include <stdexcept>

#if OPCTS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace opcts {

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
  if (err != cudaSuccess || n == 0) {
    if (why) *why = std::string("no CUDA device: ") + (err != cudaSuccess ? cudaGetErrorName(err) : "count is 0");
    return "host";
  }
  const int d = device < 0 ? 0 : device;
  if (d >= n) throw std::invalid_argument("--device " + std::to_string(d) + " but only " + std::to_string(n) + " CUDA devices");
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
    if (why) *why = "cudaGetDeviceProperties failed";
    return "host";
  }
  if (why) *why = std::string("CUDA device ") + std::to_string(d) + ": " + prop.name;
  return "sm" + std::to_string(prop.major) + std::to_string(prop.minor);
#else
  (void)device;
  if (why) *why = "built without CUDA";
  return "host";
#endif
}

}  // namespace opcts
