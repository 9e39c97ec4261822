// The stream gate's spin kernel and its mapped host flags (stream_gate_kernels.hpp).
#include "gpu/portable/gpu.hpp"

#include <stdexcept>
#include <string>

#include "gpu/cuda/stream_gate_kernels.hpp"

namespace opcts::cuda {

namespace {

__global__ void spin_until_released(volatile int* flag, int* timed_out, unsigned long long timeout_ns) {
  const unsigned long long t0 = gpu::global_ns();
  while (*flag == 0) {
    if (gpu::global_ns() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
    gpu::nanosleep(2000);
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("stream gate: ") + what + ": " + cudaGetErrorName(e));
}

}  // namespace

StreamGate::StreamGate(CUstream_st* stream, int timeout_ms) : stream_(stream) {
  void* p = nullptr;
  check(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
  flag_ = static_cast<volatile int*>(p);
  timed_out_ = static_cast<int*>(p) + 1;
  flag_[0] = 0;
  *timed_out_ = 0;
  int* dflag = nullptr;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), p, 0), "cudaHostGetDevicePointer");
  spin_until_released<<<1, 1, 0, stream>>>(dflag, dflag + 1, static_cast<unsigned long long>(timeout_ms) * 1000000ull);
  check(cudaGetLastError(), "launch");
}

void StreamGate::release() {
  if (flag_) flag_[0] = 1;
}

bool StreamGate::timed_out() const { return timed_out_ && *static_cast<volatile int*>(timed_out_) != 0; }

StreamGate::~StreamGate() {
  release();
  // The kernel reads the flags until it sees the release: wait for it before freeing them.
  (void)cudaStreamSynchronize(stream_);
  if (flag_) (void)cudaFreeHost(const_cast<int*>(flag_));
}

}  // namespace opcts::cuda
