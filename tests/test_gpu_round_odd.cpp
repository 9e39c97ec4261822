// device_impl/portable/gpu.hpp's round_odd_to_float, the first step of HIP's __double2half and __double2bfloat16, against CUDA's own (host-callable) conversions.
//
// HIP 5.2 has no conversion from double to fp16 or bf16; gpu.hpp defines both as
// round_odd_to_float followed by the float conversion to nearest even. Compiled by g++ against
// the CUDA toolkit's headers, the same two steps here use CUDA's float conversions, so the
// comparison with CUDA's __double2half / __double2bfloat16 checks the step HIP adds. The cases
// that decide it are doubles just off a midpoint of the target format, where rounding to float
// first lands on the midpoint: a plain (float) cast there rounds twice, and
// TheMidpointCasesCatchAPlainFloatCast shows these cases tell the two apart.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "device_impl/portable/gpu.hpp"

namespace {

using opcts::gpu::round_odd_to_float;

uint16_t half_bits(__half h) { return __half_as_ushort(h); }
uint16_t bf16_bits(__nv_bfloat16 b) { return __bfloat16_as_ushort(b); }

// The two steps of gpu.hpp's HIP conversions, with CUDA's float conversions.
uint16_t half_via_odd(double d) { return half_bits(__float2half_rn(round_odd_to_float(d))); }
uint16_t bf16_via_odd(double d) { return bf16_bits(__float2bfloat16_rn(round_odd_to_float(d))); }

double with_exponent(std::mt19937_64& rng, int lo, int hi) {
  const double m = 1.0 + std::ldexp(static_cast<double>(rng() >> 11), -53);  // 53 random bits in [1, 2)
  const int e = lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
  return (rng() & 1 ? -1.0 : 1.0) * std::ldexp(m, e);
}

// Midpoints (2j + 1)·2^(e-1) of a grid of spacing 2^e, j in [j_lo, j_hi), e in [e_lo, e_hi],
// each moved by a relative 2^-s (s in 25..52: below float's precision, inside double's), up and
// down. A format with p significand bits has j in [2^(p-1), 2^p) at exponent e (its normals),
// and j in [0, 2^(p-1)) at its subnormal spacing.
std::vector<double> near_midpoints(std::mt19937_64& rng, uint64_t j_lo, uint64_t j_hi, int e_lo, int e_hi, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) {
    const uint64_t j = j_lo + rng() % (j_hi - j_lo);
    const int e = e_lo + static_cast<int>(rng() % static_cast<uint64_t>(e_hi - e_lo + 1));
    const double mid = std::ldexp(static_cast<double>(2 * j + 1), e - 1);
    const double off = std::ldexp(mid, -(25 + static_cast<int>(rng() % 28)));
    const double sign = rng() & 1 ? -1.0 : 1.0;
    out.push_back(sign * (mid + off));
    out.push_back(sign * (mid - off));
  }
  return out;
}

TEST(GpuRoundOdd, HalfFromDoubleMatchesCuda) {
  std::mt19937_64 rng(0x0DDF10A7ull);
  std::vector<double> cases = near_midpoints(rng, 1024, 2048, -24, 5, 20000);  // normals: spacing 2^-24 .. 2^5
  const auto sub = near_midpoints(rng, 0, 1024, -24, -24, 2000);             // subnormals: spacing 2^-24
  cases.insert(cases.end(), sub.begin(), sub.end());
  for (int i = 0; i < 100000; ++i) cases.push_back(with_exponent(rng, -30, 17));
  int bad = 0;
  for (double d : cases)
    if (half_via_odd(d) != half_bits(__double2half(d)) && ++bad <= 5)
      ADD_FAILURE() << std::hexfloat << d << ": round-to-odd gives " << half_via_odd(d) << ", CUDA "
                    << half_bits(__double2half(d));
  EXPECT_EQ(bad, 0);
}

TEST(GpuRoundOdd, Bf16FromDoubleMatchesCuda) {
  std::mt19937_64 rng(0xBF16ull);
  std::vector<double> cases = near_midpoints(rng, 128, 256, -133, 120, 20000);  // normals: spacing 2^-133 .. 2^120
  const auto sub = near_midpoints(rng, 0, 128, -133, -133, 2000);              // subnormals: spacing 2^-133
  cases.insert(cases.end(), sub.begin(), sub.end());
  for (int i = 0; i < 100000; ++i) cases.push_back(with_exponent(rng, -150, 128));
  int bad = 0;
  for (double d : cases)
    if (bf16_via_odd(d) != bf16_bits(__double2bfloat16(d)) && ++bad <= 5)
      ADD_FAILURE() << std::hexfloat << d << ": round-to-odd gives " << bf16_via_odd(d) << ", CUDA "
                    << bf16_bits(__double2bfloat16(d));
  EXPECT_EQ(bad, 0);
}

TEST(GpuRoundOdd, EdgeValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double edges[] = {0.0, -0.0, 1e-300, -1e-300, 0x1p-150, 0x1.8p-150, 0x1p-149, 1e300, -1e300, inf, -inf,
                          65519.99, 65520.0, 65520.01, 0x1.fffffffp+127, 0x1.ff0000001p+127};
  for (double d : edges) {
    EXPECT_EQ(half_via_odd(d), half_bits(__double2half(d))) << std::hexfloat << d;
    EXPECT_EQ(bf16_via_odd(d), bf16_bits(__double2bfloat16(d))) << std::hexfloat << d;
  }
  EXPECT_TRUE(std::isnan(round_odd_to_float(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(round_odd_to_float(0x1.000001p0), std::nextafter(1.0f, 2.0f));  // inexact, even: set the last bit
  EXPECT_EQ(round_odd_to_float(-0x1.0000003p0), -std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(round_odd_to_float(0x1p-160), std::numeric_limits<float>::denorm_min());
}

// A plain cast to float where round-to-odd is needed: the midpoint cases must catch it.
TEST(GpuRoundOdd, TheMidpointCasesCatchAPlainFloatCast) {
  std::mt19937_64 rng(0xCA57ull);
  int half_caught = 0, bf16_caught = 0;
  for (double d : near_midpoints(rng, 1024, 2048, -24, 5, 2000))
    half_caught += half_bits(__float2half_rn(static_cast<float>(d))) != half_bits(__double2half(d));
  for (double d : near_midpoints(rng, 128, 256, -133, 120, 2000))
    bf16_caught += bf16_bits(__float2bfloat16_rn(static_cast<float>(d))) != bf16_bits(__double2bfloat16(d));
  EXPECT_GT(half_caught, 100);
  EXPECT_GT(bf16_caught, 100);
}

}  // namespace
