// The error-energy check (judge/error_energy.hpp): the limit's arithmetic, the weighted sum over
// finite elements, and that the limit holds for modelled roundings and fails when each element
// carries a few more of them than the model allows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "judge/error_energy.hpp"

namespace opcts {
namespace {

TEST(ErrorEnergy, LimitIsTheQuadraticFormTailBound) {
  ErrorEnergy e;
  e.sources = {{100, 100, 1}};
  // √(tr + 2·√(tr C²·t) + 2·‖C‖·t) at t = 25: √(100 + 100 + 50).
  EXPECT_DOUBLE_EQ(error_energy_limit(e), std::sqrt(250.0));
  e.fixed = 2;
  EXPECT_DOUBLE_EQ(error_energy_limit(e), std::sqrt(250.0) + 2);
  // Two sources: Minkowski, each at t + ln 2 (a union bound over the sources).
  e.sources.push_back({4, 16, 4});
  const double t = kEnergyTail + std::log(2.0);
  EXPECT_DOUBLE_EQ(error_energy_limit(e),
                   2 + std::sqrt(100 + 2 * std::sqrt(100 * t) + 2 * t) + std::sqrt(4 + 2 * std::sqrt(16 * t) + 8 * t));
}

TEST(ErrorEnergy, WeightedNormOverFiniteElements) {
  HostTensor got(DType::fp32, {4});
  for (int i = 0; i < 4; ++i) got.set(i, i);
  got.set(3, NAN);  // the per-element comparison's
  const std::vector<double> want = {0, 0, 0, 0};
  ErrorEnergy e;
  e.sources = {{1, 1, 1}};
  ErrorEnergyStats s = check_error_energy("o", got, want, e);
  EXPECT_EQ(s.elements, 3);
  EXPECT_DOUBLE_EQ(s.norm, std::sqrt(5.0));
  e.weight = {1, 4, 0.25, 1};
  s = check_error_energy("o", got, want, e);
  EXPECT_DOUBLE_EQ(s.norm, std::sqrt(4 + 1.0));
  EXPECT_DOUBLE_EQ(s.ratio(), s.norm / error_energy_limit(e));
  e.weight = {1, 2};
  EXPECT_THROW(check_error_energy("o", got, want, e), std::invalid_argument);
  EXPECT_THROW(check_error_energy("o", got, {0, 0}, ErrorEnergy{}), std::invalid_argument);
  // A zero limit: any error fails, none passes.
  EXPECT_TRUE(std::isinf(check_error_energy("o", got, want, ErrorEnergy{}).ratio()));
  got.set(1, 0), got.set(2, 0);
  EXPECT_EQ(check_error_energy("o", got, want, ErrorEnergy{}).ratio(), 0);
}

// n elements, each the sum of `roundings` independent errors uniform on [−1, 1], against the
// model of one such rounding per element (C = I/3): the largest ratio over `seeds` draws.
double worst_ratio(int64_t n, int roundings, int seeds) {
  ErrorEnergy e;
  e.sources = {{n / 3.0, n / 9.0, 1 / 3.0}};
  const std::vector<double> want(static_cast<size_t>(n), 0.0);
  double worst = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919 + static_cast<uint64_t>(roundings));
    std::uniform_real_distribution<double> u(-1, 1);
    HostTensor got(DType::fp64, {n});
    for (int64_t i = 0; i < n; ++i) {
      double x = 0;
      for (int r = 0; r < roundings; ++r) x += u(rng);
      got.set(i, x);
    }
    worst = std::max(worst, check_error_energy("o", got, want, e).ratio());
  }
  return worst;
}

TEST(ErrorEnergy, HoldsForTheModelAndFailsForTwoRoundingsMore) {
  EXPECT_LT(worst_ratio(4096, 1, 50), 1);
  EXPECT_LT(worst_ratio(16, 1, 200), 1);
  // Three roundings where the model has one: 3 × the energy, beyond the limit's ≈ 1.17 × tr C
  // at 4096 elements; the limit's excess over tr C shrinks as 1/√n, so small outputs need more.
  EXPECT_GT(worst_ratio(4096, 3, 1), 1.4);
  EXPECT_GT(worst_ratio(256, 3, 1), 1.05);
}

}  // namespace
}  // namespace opcts
