// Registration of the CUDA backend's implementations (built only when CUDA is found).
#pragma once

#include "core/family.hpp"

namespace opcts {
/// cuda.flash, cuda.math and the planted cuda.flash_window_off_by_one, cuda.flash_gqa_modulo,
/// cuda.flash_drop_rowsum, cuda.flash_masked_row_nan, cuda.flash_pv_in_dtype,
/// cuda.flash_rowsum_in_dtype, cuda.flash_lse_plus_log2 (sdpa).
void register_cuda_sdpa(Registry& reg);
/// cuda.cudnn (sdpa): the cuDNN 9 backend-graph SDPA, forward and backward (sdpa_cudnn_impls.cpp).
void register_cuda_sdpa_cudnn(Registry& reg);
}  // namespace opcts
