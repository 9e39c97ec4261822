// The error-energy check (judge/error_energy.hpp says what it bounds and why).
#include "judge/error_energy.hpp"

#include <cmath>
#include <stdexcept>

namespace opcts {

double error_energy_limit(const ErrorEnergy& e, double t) {
  const double tk = t + (e.sources.size() > 1 ? std::log(static_cast<double>(e.sources.size())) : 0.0);
  double limit = e.fixed;
  for (const ErrorEnergy::Source& s : e.sources)
    limit += std::sqrt(s.trace + 2 * std::sqrt(s.trace_sq * tk) + 2 * s.spectral * tk);
  return limit;
}

ErrorEnergyStats check_error_energy(const std::string& name, const HostTensor& got, const std::vector<double>& want,
                                    const ErrorEnergy& e) {
  const std::vector<double> g = got.to_f64();
  if (g.size() != want.size() || (!e.weight.empty() && e.weight.size() != g.size()))
    throw std::invalid_argument("output '" + name + "': " + std::to_string(g.size()) + " elements, the reference has " +
                                std::to_string(want.size()) + " and " + std::to_string(e.weight.size()) + " weights");
  ErrorEnergyStats s;
  double sum = 0;  // in index order: the result never depends on a thread count
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]) || !std::isfinite(want[i])) continue;
    const double d = g[i] - want[i];
    sum += (e.weight.empty() ? 1.0 : e.weight[i]) * d * d;
    ++s.elements;
  }
  s.norm = std::sqrt(sum);
  s.limit = error_energy_limit(e);
  return s;
}

}  // namespace opcts
