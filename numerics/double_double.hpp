// A compensated running sum for fp64 references and the checks that compare against them.
#pragma once

namespace opcts {

/// Sum2's accumulator (Ogita, Rump and Oishi, "Accurate sum and dot product", SIAM J. Sci.
/// Comput. 26(6), 2005): hi + lo holds the running sum, lo collecting TwoSum's exact rounding
/// errors, so a sum of n terms is as accurate as if computed in twice the working precision
/// and then rounded (error ≤ u·|s| + γ_{n-1}²·Σ|x|).
struct DoubleDouble {
  double hi = 0, lo = 0;
  void add(double x) {
    const double s = hi + x, b = s - hi;
    lo += (hi - (s - b)) + (x - b);
    hi = s;
  }
  double value() const { return hi + lo; }
};

}  // namespace opcts
