// host.flash's kernel, shared with its planted-bug variants (sdpa_planted.cpp).
#pragma once

#include <optional>

#include "families/sdpa/sdpa.hpp"
#include "numerics/tensor.hpp"

namespace opcts::host_sdpa {

/// Deliberate bugs of the planted impls (families/sdpa/sdpa.hpp; none for host.flash itself).
using Plant = sdpa::PlantedBug;

/// Runs the problem (forward: O, lse; backward: dQ, dK, dV) with the flash numerics of
/// sdpa_flash.cpp; throws opcts::InvalidArgument for a broken contract.
TensorMap flash_run(const sdpa::Problem& p, const TensorMap& in, Plant plant);

/// A dense problem (BHSD or BSHD) with the bottom-right alignment offset `align` in place of
/// Sk − Sq when given (the varlen_max_alignment plant); the varlen runner's kernel.
TensorMap flash_run_dense(const sdpa::Problem& p, const TensorMap& in, Plant plant, std::optional<int64_t> align);

/// A varlen problem (sdpa_flash_varlen.cpp): cu_seqlens_q and cu_seqlens_k read from the
/// inputs (checked: opcts::InvalidArgument naming the one that is malformed), each sequence run
/// by flash_run_dense on its rows.
TensorMap flash_run_varlen(const sdpa::Problem& p, const TensorMap& in, Plant plant);

}  // namespace opcts::host_sdpa
