// The toy problem's reference: y = x · 2^shift in double (exact).
#include <cmath>

#include "families/toy/toy.hpp"

namespace opcts::toy {

std::vector<double> reference_output(const Problem& p, const HostTensor& x) {
  std::vector<double> y = x.to_f64();
  for (double& v : y) v = std::ldexp(v, static_cast<int>(p.shift));
  return y;
}

}  // namespace opcts::toy
