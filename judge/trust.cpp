// The zero-count trust check of one output against its reference.
#include "judge/trust.hpp"

#include <algorithm>
#include <cstdio>

namespace opcts {

std::optional<std::string> trust_check(const OutputStats& s) {
  const int64_t n = s.elements, bad = s.unexplained_zeros;
  if (n == 0 || bad == 0) return std::nullopt;
  char buf[320];
  if (s.zeros == n) {
    std::snprintf(buf, sizeof buf,
                  "%s is all zeros (norm 0) while the reference explains %lld of them (%lld round to 0 in its "
                  "dtype; the rest lie beyond their element's bound)",
                  s.out.c_str(), static_cast<long long>(n - bad), static_cast<long long>(s.ref_zeros));
    return std::string(buf);
  }
  const double margin = std::max(kTrustZeroMargin * static_cast<double>(n), 1.0);
  if (static_cast<double>(bad) > margin) {
    std::snprintf(buf, sizeof buf,
                  "%s has %lld/%lld zeros (%.1f%%), %lld of them where the reference is beyond the element's "
                  "bound and does not round to 0; allowed %lld (%.0f%% of the output, at least one)",
                  s.out.c_str(), static_cast<long long>(s.zeros), static_cast<long long>(n),
                  100.0 * static_cast<double>(s.zeros) / static_cast<double>(n), static_cast<long long>(bad),
                  static_cast<long long>(margin), 100 * kTrustZeroMargin);
    return std::string(buf);
  }
  return std::nullopt;
}

}  // namespace opcts
