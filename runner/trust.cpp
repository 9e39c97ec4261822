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
  const double allowed = std::max(family_allowance, fw) + kTrustZeroMargin;
  if (fg > allowed) {
    std::snprintf(buf, sizeof buf,
                  "%s has %lld/%lld zeros (%.1f%%), more than allowed %.1f%% (family %.1f%%, rounded reference %.1f%%, +%.0f%%)",
                  name.c_str(), static_cast<long long>(zg), static_cast<long long>(n), 100 * fg, 100 * allowed,
                  100 * family_allowance, 100 * fw, 100 * kTrustZeroMargin);
    return std::string(buf);
  }
  return std::nullopt;
}

}  // namespace opcts
