// host.flash's kernel, shared with its planted-bug variants (device_impl/host/sdpa_planted.cpp).
#pragma once

#include "harness/tensor.hpp"
#include "refimpl/sdpa.hpp"

namespace opcts::host_sdpa {

/// Deliberate bugs of the planted impls (the same classes as device_impl/cuda's SdpaPlant).
enum class Plant {
  none,
  window_off_by_one,  // the left window bound keeps one key too many
  gqa_modulo,         // query head h reads KV head h % Hkv instead of h / (Hq / Hkv)
  drop_rowsum,        // backward: dS = P ⊙ dP, without subtracting rowsum(dO ⊙ O)
  masked_row_nan,     // a row that sees no key divides 0 by 0 (O = NaN) instead of O = 0
};

/// Runs the problem (forward: O, lse; backward: dQ, dK, dV) with the flash numerics of
/// device_impl/host/sdpa_flash.cpp; throws opcts::InvalidArgument for a broken contract.
TensorMap flash_run(const sdpa::Problem& p, const TensorMap& in, Plant plant);

}  // namespace opcts::host_sdpa
