// An int4_mm problem uploaded and ready to launch: what cuda.int4_gemv, cuda.int4_mm, their planted variants and the benchmark share.
#pragma once

#include <optional>

#include "core/tensor.hpp"
#include "device_impl/cuda/device_buffer.hpp"
#include "device_impl/cuda/int4_mm_kernels.hpp"
#include "refimpl/int4_mm.hpp"

namespace opcts {

/// Bytes of canary kept before and after y: a kernel that writes outside its output is caught.
constexpr int64_t kInt4GuardBytes = 256;

/// Device copies of x, the packed weight, scales and zero points; y between two guard bands
/// (y NaN-poisoned, the guards a canary pattern); the gemv's workspace; the parameters
/// pointing at them, with the tensor sizes read from the tensors handed in.
struct PreparedInt4Mm {
  cuda::DeviceBuffer x, weight;
  std::optional<cuda::DeviceBuffer> scales, zeros, workspace;
  cuda::DeviceBuffer y;  // guard, M·N elements, guard
  cuda::Int4MmParams params;
};

/// The kernel parameters of a problem whose tensors are `inputs`: sizes from the problem, the
/// tensor sizes (x's shape, the weight's bytes, the scale and zero tensors' first two
/// dimensions) from the tensors themselves, and pointers to the host tensors' storage (the
/// kernels' per-thread code runs on them in tests; prepare_int4_mm points them at device copies).
cuda::Int4MmParams int4_params(const int4_mm::Problem& p, const TensorMap& inputs, cuda::Int4Plant plant);

/// Uploads the inputs (refimpl/int4_mm.hpp's TensorMap) for the gemv (`gemv`, with its
/// workspace) or the mma kernel, with `plant` set for a planted variant.
PreparedInt4Mm prepare_int4_mm(const int4_mm::Problem& p, const TensorMap& inputs, bool gemv, cuda::Int4Plant plant);

/// Launches cuda.int4_gemv or cuda.int4_mm on `stream`, without synchronising. Throws
/// InvalidArgument for the kernel's Int4ArgumentError.
void launch_int4_mm(const PreparedInt4Mm& m, bool gemv, CUstream_st* stream);

/// y [M, N] from the device; throws std::runtime_error naming the first guard byte a kernel
/// overwrote.
HostTensor download_int4_y(const PreparedInt4Mm& m, DType dtype);

}  // namespace opcts
