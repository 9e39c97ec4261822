// The conservation check of a reduction output: its elements summed over groups (destination rows) and over the whole
// output against the reference's fp64 sums.
#pragma once

#include <cstdint>
#include <string>

#include "core/family.hpp"
#include "numerics/tensor.hpp"

namespace opcts {

/// What the conservation check found on one output.
struct ConservationStats {
  int64_t groups = 0;      // groups checked (those with a finite Σ got and Σ want)
  int64_t groups_off = 0;  // groups whose Σ got − sum lies outside [−below, above]
  bool total_off = false;  // the whole output's
  // The first group out of bound (or the whole output's, when no group is), described: which
  // elements, Σ got, the sum due and the interval; "" when none is.
  std::string first;
  bool failed() const { return groups_off > 0 || total_off; }
};

/// Sums `got` over each group of `c.group` consecutive elements (0: one group) in index order,
/// in double-double (Ogita, Rump and Oishi's Sum2), and over the whole output from the group
/// sums in group order, so the result never depends on the thread count; each sum must lie in
/// [sum − factor·below − n·floor − slack, sum + factor·above + n·floor + slack], n the group's
/// elements, `floor` the tolerance's absolute floor per element, slack = 2^-50·Σ|got| (the
/// double-double sum's rounding to a double and its own error, far below it). A group whose
/// Σ got or sum is not finite is left to the per-element comparison (NaN/Inf placement, an
/// overflow the bound allows). Throws std::invalid_argument when the sizes disagree.
ConservationStats check_conservation(const std::string& name, const HostTensor& got, const Conservation& c,
                                     double factor = 1, double floor = 0);

}  // namespace opcts
