// RAII device memory and runtime error checks for the impl glue (host code, no kernels; CUDA's
// spelling, built for HIP too: gpu/portable/runtime.hpp).
#pragma once

#include "gpu/portable/runtime.hpp"

#include <stdexcept>
#include <string>

#include "core/errors.hpp"
#include "gpu/cuda/cuda_error.hpp"
#include "numerics/tensor.hpp"

namespace opcts::cuda {

/// Throws DeviceLost for sticky errors (the context is unusable: the worker must restart;
/// gpu::is_sticky_error) and std::runtime_error for the rest, both naming the call and the
/// runtime's error name.
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const std::string msg = std::string(what) + ": " + cuda_error_text(e);
  if (gpu::is_sticky_error(e)) throw DeviceLost(msg);
  throw std::runtime_error(msg);
}

/// A cudaMalloc'd buffer freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_) check(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) (void)cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  /// A buffer holding a copy of the tensor's storage.
  static DeviceBuffer upload(const HostTensor& t) {
    DeviceBuffer b(t.nbytes());
    if (t.nbytes()) check(cudaMemcpy(b.get(), t.data(), t.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    return b;
  }
  /// Copies the buffer into the tensor's storage (sizes must agree).
  void download(HostTensor& t) const {
    if (t.nbytes() != bytes_) throw std::logic_error("download: size mismatch");
    if (bytes_) check(cudaMemcpy(t.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace opcts::cuda
