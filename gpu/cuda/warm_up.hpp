// A vendor library's work run once on zeroed device scratch, off the backend's stream: the warm-up of a new plan.
//
// cuBLAS, cuBLASLt and cuDNN load a kernel (cuLibraryLoadData) at its first use in a process,
// whatever CUDA_MODULE_LOADING says, and the load waits for the device: under the ABI backend's
// stream gate a run's first use of a kernel waited out the gate's whole timeout
// (docs/status/data/sm90_gate_waits_2026-12-02c.txt). A row's preparation runs each new plan
// once here instead (cuda.cublaslt, cuda.cudnn).
#pragma once

#include "gpu/portable/runtime.hpp"

#include <cstddef>
#include <vector>

namespace opcts::cuda {

/// Makes one zeroed device allocation holding buffers of `bytes` (each at a 256-byte boundary),
/// calls `work(ptrs, stream)` with their addresses on a new non-blocking stream, waits for it
/// and frees both. Returns whether all of that succeeded; any CUDA error is cleared before it
/// returns (not left for the run's own error check), and an exception from `work` is
/// swallowed: a refusal or failure is the run's to report, with its own arguments. Too little
/// device memory only means the run pays the load itself.
template <class Work>
bool run_on_zeroed_scratch(const std::vector<size_t>& bytes, Work work) noexcept {
  std::vector<size_t> offset(bytes.size());
  size_t total = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    offset[i] = total;
    total += (bytes[i] + 255) / 256 * 256;
  }
  char* mem = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&mem), total == 0 ? 256 : total) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::vector<void*> ptrs(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) ptrs[i] = mem + offset[i];
  cudaStream_t s = nullptr;
  cudaError_t e = cudaMemset(mem, 0, total);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) {
    try {
      work(ptrs, s);
    } catch (...) {
    }
    e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
  cudaFree(mem);
  (void)cudaGetLastError();
  return e == cudaSuccess;
}

}  // namespace opcts::cuda
