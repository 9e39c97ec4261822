// The checks both int4 launchers run on their parameter struct (families/int4_mm/cuda/int4_mm_args.cu).
#pragma once

#include <cstdint>

#include "families/int4_mm/cuda/int4_mm_kernels.hpp"

namespace opcts::cuda::int4mm {

/// The group sizes the operator's contract has for a format: 32, 64, 128, 256; Q4_0 32.
bool takes(Int4Format f, int64_t group_size);

/// Throws Int4ArgumentError naming the argument (`who` prefixes the message) when the sizes,
/// the group size, the packing's tiles or the tensors handed in (x, weight bytes, scale and zero
/// group counts) disagree, or a buffer is null or misaligned.
void validate(const Int4MmParams& p, const char* who);

}  // namespace opcts::cuda::int4mm
