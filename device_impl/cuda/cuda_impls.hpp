// Registration of the CUDA backend's implementations (built only when CUDA is found).
#pragma once

#include "harness/family.hpp"

namespace opcts {
/// cuda.flash and cuda.math (sdpa).
void register_cuda_sdpa(Registry& reg);
/// cuda.cvt and the planted cuda.cvt_ties_up (cast).
void register_cuda_cast(Registry& reg);
}  // namespace opcts
