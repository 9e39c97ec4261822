// gpu/portable/gpu.hpp's round_odd_to_float, the first step of HIP's __double2half and __double2bfloat16,
// against CUDA's own (host-callable) conversions.
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

#include "gpu/portable/gpu.hpp"

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

// A format's test doubles: near midpoints of its normals (p significand bits, spacings 2^e_lo ..
// 2^e_hi) and of its subnormals (spacing 2^e_lo), and random doubles with exponents in
// [r_lo, r_hi] (underflow and overflow included).
struct Grid {
  int p, e_lo, e_hi, r_lo, r_hi;
};
std::vector<double> cases_of(const Grid& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t half = uint64_t{1} << (g.p - 1);
  std::vector<double> cases = near_midpoints(rng, half, 2 * half, g.e_lo, g.e_hi, 20000);
  const auto sub = near_midpoints(rng, 0, half, g.e_lo, g.e_lo, 2000);
  cases.insert(cases.end(), sub.begin(), sub.end());
  for (int i = 0; i < 100000; ++i) cases.push_back(with_exponent(rng, g.r_lo, g.r_hi));
  return cases;
}

// How many of `cases` `ours` converts otherwise than `cuda` (the first few reported).
int mismatches(const std::vector<double>& cases, uint16_t (*ours)(double), uint16_t (*cuda)(double)) {
  int bad = 0;
  for (double d : cases)
    if (ours(d) != cuda(d) && ++bad <= 5)
      ADD_FAILURE() << std::hexfloat << d << ": round-to-odd gives " << ours(d) << ", CUDA " << cuda(d);
  return bad;
}

constexpr Grid kHalf{11, -24, 5, -30, 17}, kBf16{8, -133, 120, -150, 128};
uint16_t cuda_half(double d) { return half_bits(__double2half(d)); }
uint16_t cuda_bf16(double d) { return bf16_bits(__double2bfloat16(d)); }

TEST(GpuRoundOdd, HalfFromDoubleMatchesCuda) {
  EXPECT_EQ(mismatches(cases_of(kHalf, 0x0DDF10A7ull), half_via_odd, cuda_half), 0);
}

TEST(GpuRoundOdd, Bf16FromDoubleMatchesCuda) {
  EXPECT_EQ(mismatches(cases_of(kBf16, 0xBF16ull), bf16_via_odd, cuda_bf16), 0);
}

TEST(GpuRoundOdd, EdgeValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double edges[] = {0.0,    -0.0, 1e-300, -1e-300,  0x1p-150, 0x1.8p-150, 0x1p-149,         1e300,
                          -1e300, inf,  -inf,   65519.99, 65520.0,  65520.01,   0x1.fffffffp+127, 0x1.ff0000001p+127};
  for (double d : edges) {
    EXPECT_EQ(half_via_odd(d), cuda_half(d)) << std::hexfloat << d;
    EXPECT_EQ(bf16_via_odd(d), cuda_bf16(d)) << std::hexfloat << d;
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
  for (double d : near_midpoints(rng, 1024, 2048, kHalf.e_lo, kHalf.e_hi, 2000))
    half_caught += half_bits(__float2half_rn(static_cast<float>(d))) != cuda_half(d);
  for (double d : near_midpoints(rng, 128, 256, kBf16.e_lo, kBf16.e_hi, 2000))
    bf16_caught += bf16_bits(__float2bfloat16_rn(static_cast<float>(d))) != cuda_bf16(d);
  EXPECT_GT(half_caught, 100);
  EXPECT_GT(bf16_caught, 100);
}

}  // namespace
