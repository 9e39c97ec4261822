// The zero-count trust check of one output against its reference.
#include "runner/trust.hpp"

#include <algorithm>
#include <cstdio>

namespace opcts {

std::optional<std::string> trust_check(const std::string& name, int64_t elements, int64_t zeros, int64_t ref_zeros,
                                       double family_allowance) {
  const int64_t n = elements, zg = zeros, zw = ref_zeros;
  if (n < kTrustMinElements) return std::nullopt;
  char buf[256];
  if (zg == n && zw < n) {
    std::snprintf(buf, sizeof buf, "%s is all zeros (norm 0) while the reference rounded to its dtype has %lld nonzero of %lld",
                  name.c_str(), static_cast<long long>(n - zw), static_cast<long long>(n));
    return std::string(buf);
  }
  const double fg = static_cast<double>(zg) / static_cast<double>(n);
  const double fw = static_cast<double>(zw) / static_cast<double>(n);
  const double margin = std::max(kTrustZeroMargin, 1.0 / static_cast<double>(n));  // at least one element
  const double allowed = std::max(family_allowance, fw) + margin;
  // Compared in elements, so that "one more zero than the reference" is exact.
  const double allowed_zeros = std::max(family_allowance * static_cast<double>(n), static_cast<double>(zw)) +
                               std::max(kTrustZeroMargin * static_cast<double>(n), 1.0);
  if (static_cast<double>(zg) > allowed_zeros + 1e-9) {
    std::snprintf(buf, sizeof buf,
                  "%s has %lld/%lld zeros (%.1f%%), more than allowed %.1f%% (family %.1f%%, rounded reference %.1f%%, +%.1f%%)",
                  name.c_str(), static_cast<long long>(zg), static_cast<long long>(n), 100 * fg, 100 * allowed,
                  100 * family_allowance, 100 * fw, 100 * margin);
    return std::string(buf);
  }
  return std::nullopt;
}

}  // namespace opcts
