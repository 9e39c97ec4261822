// CUDA-event timing and error exits shared by the GPU benchmarks (bench/*_bench.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace opcts::bench {

/// Prints `what` and CUDA's message and exits with status 2 unless e is cudaSuccess.
inline void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

/// Median milliseconds of fn over iters runs (CUDA events on the legacy default stream) after
/// 3 warmup runs; throws what fn throws.
inline double time_ms(const std::function<void()>& fn, int iters) {
  for (int i = 0; i < 3; ++i) fn();
  ck(cudaDeviceSynchronize(), "warmup");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a);
    fn();
    cudaEventRecord(b);
    ck(cudaEventSynchronize(b), "timed run");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace opcts::bench
