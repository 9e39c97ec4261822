// An int4_mm problem as the kernels see it, outside a run through the ABI backend: what the
// benchmark and the kernels' host-emulation tests use (the rows go through abi_backend.cpp).
#pragma once

#include "gpu/portable/runtime.hpp"  // first: the runtime's stream type in the kernels' declarations

#include <optional>

#include "families/int4_mm/cuda/int4_mm_kernels.hpp"
#include "families/int4_mm/int4_mm.hpp"
#include "gpu/cuda/device_buffer.hpp"
#include "numerics/tensor.hpp"

namespace opcts {

/// The kernel parameters of a problem whose tensors are `inputs`, through the same mapping the
/// rows use (the ABI's parameter struct and descriptors, int4_kernel_params), pointing at the
/// host tensors' storage (the kernels' per-thread code runs on them in tests).
cuda::Int4MmParams int4_params(const int4_mm::Problem& p, const TensorMap& inputs, cuda::Int4Plant plant);

/// Device copies of the inputs, y, the gemv's workspace, and the parameters pointing at them.
struct PreparedInt4Mm {
  cuda::DeviceBuffer x, weight;
  std::optional<cuda::DeviceBuffer> scales, zeros, workspace;
  cuda::DeviceBuffer y;
  cuda::Int4MmParams params;
};

/// Uploads the inputs for the gemv (`gemv`, with its workspace) or the mma kernel.
PreparedInt4Mm prepare_int4_mm(const int4_mm::Problem& p, const TensorMap& inputs, bool gemv, cuda::Int4Plant plant);

/// Launches cuda.int4_gemv or cuda.int4_mm on `stream`, without synchronising.
void launch_int4_mm(const PreparedInt4Mm& m, bool gemv, CUstream_st* stream);

}  // namespace opcts
