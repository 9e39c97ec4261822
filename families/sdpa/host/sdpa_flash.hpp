// host.flash's kernel, shared with its planted-bug variants (sdpa_planted.cpp).
#pragma once

#include "families/sdpa/sdpa.hpp"
#include "numerics/tensor.hpp"

namespace opcts::host_sdpa {

/// Deliberate bugs of the planted impls (families/sdpa/sdpa.hpp; none for host.flash itself).
using Plant = sdpa::PlantedBug;

/// Runs the problem (forward: O, lse; backward: dQ, dK, dV) with the flash numerics of
/// sdpa_flash.cpp; throws opcts::InvalidArgument for a broken contract.
TensorMap flash_run(const sdpa::Problem& p, const TensorMap& in, Plant plant);

}  // namespace opcts::host_sdpa
