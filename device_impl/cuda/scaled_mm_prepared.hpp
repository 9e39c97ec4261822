// A scaled_mm problem uploaded and ready to launch: what cuda.cublaslt, cuda.mx_kernel and the benchmark share.
#pragma once

#include <optional>

#include "device_impl/cuda/device_buffer.hpp"
#include "device_impl/cuda/scaled_mm_kernels.hpp"
#include "core/tensor.hpp"
#include "refimpl/scaled_mm.hpp"

namespace opcts {

/// Device copies of a case's codes, scales, output scale and bias, a NaN-poisoned D, and the
/// kernel parameters pointing at them.
struct PreparedScaledMm {
  cuda::DeviceBuffer a, b, a_scale, b_scale;
  std::optional<cuda::DeviceBuffer> out_scale, bias;
  cuda::DeviceBuffer d;
  cuda::ScaledMmParams params;
};

/// Uploads the inputs (refimpl/scaled_mm.hpp's TensorMap) and fills the parameters. Throws
/// InvalidArgument when a scale tensor has the wrong dtype or element count.
PreparedScaledMm prepare_scaled_mm(const scaled_mm::Problem& p, const TensorMap& inputs);

/// Launches cuBLASLt (`cublaslt`) or opcts's mx kernel on `stream`, without synchronising.
/// Throws InvalidArgument (MmArgumentError) or Unsupported (cuBLASLt status 15 / 7).
void launch_scaled_mm(const PreparedScaledMm& m, bool cublaslt, CUstream_st* stream);

}  // namespace opcts
