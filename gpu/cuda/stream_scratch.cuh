// Device scratch allocated and freed on the stream of a call (cudaMallocAsync / cudaFreeAsync):
// what the rows' callbacks and the kernels' launchers use, so that a call never waits for the
// device and can run on a stream its caller holds until it returns (the ABI backend's gate).
// Host code only; no harness types.
#pragma once

#include "gpu/portable/runtime.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace opcts::cuda {

class StreamScratch {
 public:
  explicit StreamScratch(cudaStream_t s) : s_(s) {}
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  /// Frees every allocation on the stream, after the work queued on it so far.
  ~StreamScratch() {
    for (void* p : ptrs_) (void)cudaFreeAsync(p, s_);  // a destructor cannot throw: a failed free leaks
  }
  /// `bytes` of device memory (nullptr for 0). Throws std::runtime_error naming `what`.
  void* alloc(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, bytes, s_);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clears the error it returned as e
      throw std::runtime_error(std::string("cudaMallocAsync(") + what + ", " + std::to_string(bytes) +
                               " bytes): " + cudaGetErrorString(e));
    }
    ptrs_.push_back(p);
    return p;
  }
  /// `count` elements of T.
  template <class T>
  T* alloc_n(size_t count, const char* what) {
    return static_cast<T*>(alloc(count * sizeof(T), what));
  }

 private:
  cudaStream_t s_;
  std::vector<void*> ptrs_;
};

}  // namespace opcts::cuda
