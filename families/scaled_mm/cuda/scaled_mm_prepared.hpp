// A scaled_mm problem uploaded and ready to launch outside a run through the ABI backend: what
// the benchmark uses (the rows go through abi_backend.cpp).
#pragma once

#include "gpu/portable/runtime.hpp"  // first: the runtime's stream type in the kernels' declarations

#include <optional>

#include "families/scaled_mm/cuda/scaled_mm_kernels.hpp"
#include "families/scaled_mm/scaled_mm.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "numerics/tensor.hpp"

namespace opcts {

/// Device copies of a case's codes, scales, output scale and bias, a D with rows padded to 16
/// bytes, and the kernel parameters pointing at them, through the mapping the rows use
/// (the ABI's parameter struct and descriptors, mm_kernel_params).
struct PreparedScaledMm {
  cuda::DeviceBuffer a, b, a_scale, b_scale;
  std::optional<cuda::DeviceBuffer> out_scale, bias;
  cuda::DeviceBuffer d;
  cuda::ScaledMmParams params;
};

/// Uploads the inputs (families/scaled_mm/scaled_mm.hpp's TensorMap) and fills the parameters.
PreparedScaledMm prepare_scaled_mm(const scaled_mm::Problem& p, const TensorMap& inputs);

/// Launches cuBLASLt (`cublaslt`) or opcts's mx kernel on `stream`, without synchronising.
/// Throws what the launchers throw (MmArgumentError, MmLibraryRefusal, std::runtime_error).
void launch_scaled_mm(const PreparedScaledMm& m, bool cublaslt, CUstream_st* stream);

}  // namespace opcts
