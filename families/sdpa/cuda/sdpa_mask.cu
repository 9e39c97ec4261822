// A boolean attn_mask (one byte per element, nonzero = attend) as an additive one in the input
// dtype (0 or -inf): what PyTorch hands cuDNN, computed on the stream (sdpa_kernels.hpp).
#include "gpu/portable/gpu.hpp"

#include <stdexcept>
#include <string>

#include "families/sdpa/cuda/sdpa_kernels.hpp"

namespace opcts::cuda {

namespace {

template <typename T>
__global__ void bool_to_additive(const uint8_t* in, T* out, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = in[i] ? T(0.0f) : T(-INFINITY);
}

}  // namespace

void sdpa_bool_mask_to_additive(const uint8_t* in, void* out, SdpaDType dtype, size_t n, CUstream_st* stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  switch (dtype) {
    case SdpaDType::fp16: bool_to_additive<<<blocks, 256, 0, stream>>>(in, static_cast<__half*>(out), n); break;
    case SdpaDType::bf16: bool_to_additive<<<blocks, 256, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), n); break;
    case SdpaDType::fp32: bool_to_additive<<<blocks, 256, 0, stream>>>(in, static_cast<float*>(out), n); break;
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("sdpa_bool_mask_to_additive: ") + cudaGetErrorString(e));
}

}  // namespace opcts::cuda
