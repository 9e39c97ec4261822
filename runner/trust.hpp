// benchdnn's trust check: an output of zeros (all zero, norm 0, too many zeros) cannot PASS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace opcts {

/// Outputs smaller than this are not judged (benchdnn: nelems >= 10).
constexpr int64_t kTrustMinElements = 10;
/// Zeros the output may hold beyond what the family and the reference allow: room for a few
/// elements within tolerance of zero that an impl rounds to exactly zero — 1% of the output,
/// and at least one element (a bf16 sum of 37 atomics cancels to an exact 0 in some orders:
/// measured on the H200, docs/status/sm90.md call Q).
constexpr double kTrustZeroMargin = 0.01;

/// Why an output within tolerance is still not trusted, or nullopt. `elements` is the
/// output's size, `zeros` its exact zeros and `ref_zeros` those of its fp64 reference rounded
/// to the output dtype (counted by compare_output: a value that underflows there is a correct
/// 0), `family_allowance` is Family::max_zero_fraction. MISTRUSTED when the
/// output is all zero (norm 0) while the reference is not, or when its zeros exceed
/// max(family_allowance, reference zero fraction)·elements + max(kTrustZeroMargin·elements, 1).
std::optional<std::string> trust_check(const std::string& name, int64_t elements, int64_t zeros, int64_t ref_zeros,
                                       double family_allowance);

}  // namespace opcts
