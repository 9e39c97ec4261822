// The code-domain normal sampler (numerics/normal_codes.hpp): the distribution of its codes, and its
// 32-bit table lookup against the search on u = bits·2^-32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "numerics/codec.hpp"
#include "numerics/normal_codes.hpp"

namespace opcts {
namespace {

// The code-domain sampler draws RN_satfinite(z·sigma): on a fine grid of u its codes are
// valid values of the format with mean 0, the normal's spread (within the rounding), both signs
// alike, and the largest value as often as the normal's tail beyond its rounding boundary.
TEST(NormalCodes, CodesFollowTheRoundedNormal) {
  struct Case {
    DType t;
    double sigma;
  };
  for (const Case c :
       {Case{DType::e4m3fn, 112}, Case{DType::e5m2, 14336}, Case{DType::e2m1fn, 1.5}, Case{DType::e4m3fnuz, 60},
        Case{DType::e2m3fn, 1}, Case{DType::e4m3fn, 112.0 / 64}, Case{DType::bf16, 1}, Case{DType::fp16, 1},
        Case{DType::fp16, 0.125}, Case{DType::fp16, 16000}}) {
    SCOPED_TRACE(std::string(name(c.t)) + " sigma " + std::to_string(c.sigma));
    const NormalCodeSampler sample(c.t, c.sigma);
    const int n = 400000;
    double sum = 0, sum_sq = 0, top = 0;
    int64_t positive = 0, negative = 0, at_max = 0;
    for (int i = 0; i < n; ++i) {
      const double v = decode(c.t, sample((i + 0.5) / n));
      ASSERT_TRUE(std::isfinite(v));
      sum += v, sum_sq += v * v, top = std::max(top, std::fabs(v));
      positive += v > 0, negative += v < 0, at_max += std::fabs(v) == dtype_info(c.t).max_finite;
    }
    const double mean = sum / n, sd = std::sqrt(sum_sq / n);
    EXPECT_LT(std::fabs(mean), 1e-3 * c.sigma);
    EXPECT_EQ(positive, negative);
    // RN adds at most half a spacing, relative 2^-(m+1), to each value's size (and the
    // saturated tail takes off less than that at 4 sigma).
    const double rel = std::ldexp(1.0, -dtype_info(c.t).format.mantissa_bits);
    EXPECT_NEAR(sd, c.sigma, (rel + 0.01) * c.sigma);
    EXPECT_LE(top, dtype_info(c.t).max_finite);
    // P(|RN(z·sigma)| = max) lies between the normal's mass beyond max and beyond max / 2.
    const double hi = std::erfc(dtype_info(c.t).max_finite / c.sigma / std::sqrt(2.0));
    const double lo_edge = std::erfc(dtype_info(c.t).max_finite / 2 / c.sigma / std::sqrt(2.0));
    EXPECT_GE(at_max, static_cast<int64_t>(hi * n) - 1);
    EXPECT_LE(at_max, static_cast<int64_t>(lo_edge * n) + 1);
    // The table lookup from 32 bits is the same draw as the search from u = bits·2^-32:
    // on a lattice of draws, and on both sides of every boundary between codes the lattice
    // brackets (found by bisection on the search), where an off-by-one threshold would show.
    const auto by_search = [&](uint64_t b) { return sample(static_cast<double>(b) * 0x1p-32); };
    int boundaries = 0;
    for (uint64_t b = 0; b + 0x10001 < (uint64_t{1} << 32); b += 0x10001) {
      ASSERT_EQ(sample.from_bits(static_cast<uint32_t>(b)), by_search(b)) << b;
      if (by_search(b) == by_search(b + 0x10001)) continue;
      uint64_t lo = b, hi = b + 0x10001;  // by_search(lo) != by_search(hi)
      while (hi - lo > 1) (by_search((lo + hi) / 2) == by_search(lo) ? lo : hi) = (lo + hi) / 2;
      ASSERT_EQ(sample.from_bits(static_cast<uint32_t>(lo)), by_search(lo)) << lo;
      ASSERT_EQ(sample.from_bits(static_cast<uint32_t>(hi)), by_search(hi)) << hi;
      ++boundaries;
    }
    EXPECT_GT(boundaries, 8);
    // Both ends of every 2^16-draw range (the direct table's unit): a range given one code must
    // hold no boundary.
    for (uint64_t j = 0; j < (uint64_t{1} << 16); ++j) {
      ASSERT_EQ(sample.from_bits(static_cast<uint32_t>(j << 16)), by_search(j << 16)) << j;
      ASSERT_EQ(sample.from_bits(static_cast<uint32_t>(j << 16 | 0xFFFF)), by_search(j << 16 | 0xFFFF)) << j;
    }
  }
  EXPECT_THROW(NormalCodeSampler(DType::fp32, 1), std::invalid_argument);
  EXPECT_THROW(NormalCodeSampler(DType::int32, 1), std::invalid_argument);
  EXPECT_THROW(NormalCodeSampler(DType::e4m3fn, 0), std::invalid_argument);
  EXPECT_THROW(NormalCodeSampler(DType::bf16, NAN), std::invalid_argument);
}

// The process-wide cache gives one sampler per (dtype, sigma).
TEST(NormalCodes, CacheKeepsOneSamplerPerDtypeAndSigma) {
  const NormalCodeSampler& a = normal_code_sampler(DType::bf16, 1);
  EXPECT_EQ(&a, &normal_code_sampler(DType::bf16, 1));
  EXPECT_NE(&a, &normal_code_sampler(DType::bf16, 2));
  EXPECT_NE(&a, &normal_code_sampler(DType::fp16, 1));
  EXPECT_EQ(normal_code_sampler(DType::fp16, 2).sigma(), 2);
  EXPECT_THROW(normal_code_sampler(DType::fp32, 1), std::invalid_argument);
  EXPECT_THROW(normal_code_sampler(DType::fp32, 1), std::invalid_argument);    // not cached as built
  EXPECT_THROW(normal_code_sampler(DType::bf16, NAN), std::invalid_argument);  // not bf16 σ = 1's sampler
  EXPECT_THROW(normal_code_sampler(DType::bf16, -1), std::invalid_argument);
}

}  // namespace
}  // namespace opcts
