// Harness glue shared by the SDPA impls (cuda.flash, cuda.math, cuda.cudnn): a problem as
// the kernels' parameters (device_impl/cuda/sdpa_kernels.hpp).
#pragma once

#include "device_impl/cuda/sdpa_kernels.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts {

/// The kernel parameters of a problem, with null pointers (enough for the support checks):
/// dims, scale, softcap, masks, window, and the strides of the problem's layout (BHSD or
/// BSHD storage, refimpl/sdpa.hpp). Throws std::invalid_argument for a dtype other than
/// fp16, bf16 and fp32.
cuda::SdpaParams sdpa_kernel_params(const sdpa::Problem& p, cuda::SdpaPlant plant = cuda::SdpaPlant::none);

/// The backward's parameters: the forward's, with dO, dQ, dK, dV in the layouts of O, Q, K, V.
cuda::SdpaBackwardParams sdpa_kernel_backward_params(const sdpa::Problem& p,
                                                     cuda::SdpaPlant plant = cuda::SdpaPlant::none);

}  // namespace opcts
