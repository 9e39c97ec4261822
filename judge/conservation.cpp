// The conservation check: each group's and the whole output's Σ got against the reference's interval.
#include "judge/conservation.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "numerics/double_double.hpp"

namespace opcts {

namespace {

struct GroupSum {
  double sum = 0, abs_sum = 0;
};

// Whether Σ got = `got` lies within the interval around `want`; describes it when not.
bool within(double got, double abs_sum, double want, double below, double above, double pad) {
  const double slack = 0x1p-50 * abs_sum + pad;
  const double d = got - want;
  return d >= -(below + slack) && d <= above + slack;
}

std::string describe(const HostTensor& t, const std::string& name, int64_t first, int64_t last) {
  auto at = [&](int64_t i) {
    std::ostringstream m;
    m << name << "[";
    const auto idx = t.unravel(i);
    for (size_t k = 0; k < idx.size(); ++k) m << (k ? "," : "") << idx[k];
    m << "]";
    return m.str();
  };
  return first == last ? at(first) : at(first) + " to " + at(last);
}

}  // namespace

ConservationStats check_conservation(const std::string& name, const HostTensor& got, const Conservation& c,
                                     double factor, double floor) {
  const int64_t n = got.numel();
  const int64_t g = c.group > 0 ? c.group : std::max<int64_t>(n, 1);
  const int64_t count = n == 0 ? 0 : (n + g - 1) / g;
  if (static_cast<int64_t>(c.sum.size()) != count || c.below.size() != c.sum.size() || c.above.size() != c.sum.size())
    throw std::invalid_argument("output '" + name + "': the conservation check has " + std::to_string(c.sum.size()) +
                                " groups, " + std::to_string(count) + " expected of " + std::to_string(n) +
                                " elements in groups of " + std::to_string(g));
  const std::vector<double> v = got.to_f64();
  std::vector<GroupSum> sums(static_cast<size_t>(count));
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t k = 0; k < count; ++k) {
    DoubleDouble s;
    double a = 0;
    for (int64_t i = k * g; i < std::min(n, (k + 1) * g); ++i)
      s.add(v[static_cast<size_t>(i)]), a += std::fabs(v[static_cast<size_t>(i)]);
    sums[static_cast<size_t>(k)] = {s.value(), a};
  }
  ConservationStats st;
  DoubleDouble total;
  double total_abs = 0;
  bool total_finite = std::isfinite(c.total_sum);
  auto fmt = [&](const std::string& what, double sum, double want, double below, double above) {
    std::ostringstream m;
    m.precision(9);
    m << what << ": sum " << sum << ", due " << want << " within [-" << below << ", +" << above << "] (off by "
      << sum - want << ")";
    return m.str();
  };
  for (int64_t k = 0; k < count; ++k) {
    const GroupSum& s = sums[static_cast<size_t>(k)];
    const auto i = static_cast<size_t>(k);
    total.add(s.sum);
    total_abs += s.abs_sum;
    if (!std::isfinite(s.sum) || !std::isfinite(c.sum[i])) {
      total_finite = false;
      continue;
    }
    ++st.groups;
    const int64_t elements = std::min(n, (k + 1) * g) - k * g;
    const double below = factor * c.below[i], above = factor * c.above[i];
    if (within(s.sum, s.abs_sum, c.sum[i], below, above, static_cast<double>(elements) * floor)) continue;
    if (st.groups_off++ == 0)
      st.first = fmt("group " + std::to_string(k) + " of " + std::to_string(count) + " (" +
                         describe(got, name, k * g, std::min(n, (k + 1) * g) - 1) + ")",
                     s.sum, c.sum[i], below, above);
  }
  if (total_finite && count > 1) {
    const double below = factor * c.total_below, above = factor * c.total_above;
    st.total_off = !within(total.value(), total_abs, c.total_sum, below, above, static_cast<double>(n) * floor);
    if (st.total_off && st.first.empty()) st.first = fmt("the whole output", total.value(), c.total_sum, below, above);
  }
  return st;
}

}  // namespace opcts
