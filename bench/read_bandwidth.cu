// A kernel that only reads a buffer (read_bandwidth.hpp).
#include "bench/read_bandwidth.hpp"

#include <cstdint>

namespace opcts::bench {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // 4 × 16 bytes in flight per thread before the first use

__global__ void __launch_bounds__(kThreads) read_all_kernel(const uint4* __restrict__ p, size_t words, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads;
  size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < words; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < words; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // One word per block: the XOR over its threads.
  for (int o = 16; o > 0; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  __shared__ unsigned warps[kThreads / 32];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned all = 0;
    for (int w = 0; w < kThreads / 32; ++w) all ^= warps[w];
    sink[blockIdx.x] = all;
  }
}

}  // namespace

void read_all(const void* p, size_t bytes, unsigned* sink, int sm_count, int blocks_per_sm, cudaStream_t stream) {
  read_all_kernel<<<read_all_blocks(sm_count, blocks_per_sm), kThreads, 0, stream>>>(static_cast<const uint4*>(p),
                                                                                     bytes / 16, sink);
}

}  // namespace opcts::bench
