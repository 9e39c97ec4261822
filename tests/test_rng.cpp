// Counter-based RNG: FNV-1a seeds, uniform and normal fills, and per-element determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics/philox_blocks.hpp"
#include "numerics/rng.hpp"

namespace opcts {
namespace {

TEST(RngSeed, IsFnv1a64) {
  EXPECT_EQ(seed_of(""), 0xcbf29ce484222325ull);  // the FNV-1a offset basis
  EXPECT_EQ(seed_of("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(seed_of("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(seed_of("sdpa/bf16_b1"), seed_of("sdpa/bf16_b2"));
  EXPECT_EQ(seed_hex(0xaf63dc4c8601ec8cull), "0xaf63dc4c8601ec8c");
  EXPECT_EQ(seed_hex(1), "0x0000000000000001");
}

// Checks every element of a uniform fill of `t` over [-2, 3): in range, a value of the dtype,
// the range covered and the mean near 0.5 (5 σ of the mean: 5·(5/√12)/√n ≈ 0.023).
void expect_uniform_fill_in_range(DType t) {
  SCOPED_TRACE(std::string(name(t)));
  HostTensor x(t, {100003});
  fill_uniform(x, seed_of("uniform"), 0, -2.0, 3.0);
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t out_of_range = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.get(i);
    out_of_range += !(v >= -2.0 && v < 3.0);
    ASSERT_EQ(round_to(t, v), v) << i;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_EQ(out_of_range, 0) << "values outside [lo, hi); the largest is " << hi;
  EXPECT_LT(lo, -1.9);
  EXPECT_GT(hi, 2.9);
  EXPECT_NEAR(sum / x.numel(), 0.5, 0.023);
}

TEST(RngUniform, ValuesLieInRangeAndAreRoundedToTheDtype) {
  expect_uniform_fill_in_range(DType::fp64);
  expect_uniform_fill_in_range(DType::fp32);
}

// Rounding to a 16-bit dtype must not carry a value near hi onto hi itself.
TEST(RngUniform, SixteenBitValuesStayBelowHi) {
  expect_uniform_fill_in_range(DType::bf16);
  expect_uniform_fill_in_range(DType::fp16);
}

TEST(RngUniform, Fp64FillIsTheAffineMapOfItsDraw) {
  // Element i of a fp64 fill is lo + (hi − lo)·u for some u in [0, 1) that depends on (seed, stream, i):
  // two fills over different ranges agree after undoing the map.
  HostTensor a(DType::fp64, {1000}), b(DType::fp64, {1000});
  fill_uniform(a, 7, 3, 0.0, 1.0);
  fill_uniform(b, 7, 3, 10.0, 14.0);
  for (int64_t i = 0; i < 1000; ++i) EXPECT_NEAR((b.get(i) - 10.0) / 4.0, a.get(i), 1e-15) << i;
  for (int64_t i = 0; i < 1000; ++i) {
    const double u = uniform01(7, 3, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(RngUniform, ElementDependsOnlyOnSeedStreamAndIndex) {
  for (DType t : {DType::fp16, DType::fp32}) {
    SCOPED_TRACE(std::string(name(t)));
    HostTensor small(t, {7}), mid(t, {3, 333}), large(t, {300001});  // large crosses the parallel threshold
    fill_uniform(small, 42, 1, -1.0, 1.0);
    fill_uniform(mid, 42, 1, -1.0, 1.0);
    fill_uniform(large, 42, 1, -1.0, 1.0);
    for (int64_t i = 0; i < small.numel(); ++i) EXPECT_EQ(small.get(i), large.get(i)) << i;
    for (int64_t i = 0; i < mid.numel(); ++i) ASSERT_EQ(mid.get(i), large.get(i)) << i;
    HostTensor again(t, {300001});
    fill_uniform(again, 42, 1, -1.0, 1.0);
    EXPECT_EQ(again.to_f64(), large.to_f64());
  }
}

int64_t count_equal(const HostTensor& a, const HostTensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += a.get(i) == b.get(i);
  return n;
}

TEST(RngUniform, DifferentStreamsAndSeedsDiffer) {
  HostTensor s0(DType::fp32, {4096}), s1(DType::fp32, {4096}), other(DType::fp32, {4096});
  fill_uniform(s0, 42, 0, 0.0, 1.0);
  fill_uniform(s1, 42, 1, 0.0, 1.0);
  fill_uniform(other, 43, 0, 0.0, 1.0);
  // Independent fp32 uniforms coincide with probability about 2^-24 per element.
  EXPECT_LT(count_equal(s0, s1), 4);
  EXPECT_LT(count_equal(s0, other), 4);
}

TEST(RngNormal, MeanAndStdMatchSigma) {
  const double sigma = 2.5;
  HostTensor x(DType::fp32, {100001});  // odd: the last Box-Muller pair is cut
  fill_normal(x, seed_of("normal"), 5, sigma);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.get(i);
    ASSERT_TRUE(std::isfinite(v)) << i;
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(x.numel());
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  // 5 standard errors: σ/√n ≈ 0.0079 for the mean, σ/√(2n) ≈ 0.0056 for the std.
  EXPECT_NEAR(mean, 0.0, 5 * sigma / std::sqrt(n));
  EXPECT_NEAR(sd, sigma, 5 * sigma / std::sqrt(2 * n));
}

TEST(RngNormal, PrefixStableAndStreamsDiffer) {
  HostTensor small(DType::bf16, {5}), large(DType::bf16, {70001}), other(DType::bf16, {70001});
  fill_normal(small, 9, 2, 1.0);
  fill_normal(large, 9, 2, 1.0);
  fill_normal(other, 9, 3, 1.0);
  for (int64_t i = 0; i < small.numel(); ++i) EXPECT_EQ(small.get(i), large.get(i)) << i;
  for (int64_t i = 0; i < large.numel(); ++i) ASSERT_EQ(round_to(DType::bf16, large.get(i)), large.get(i));
  // bf16 normals collide more often (8 significant bits), but far from always.
  EXPECT_LT(count_equal(large, other), large.numel() / 20);
}

// sigma = 0 (a K = 0 GEMM's bias, whose spread scales with √K) gives zeros in every dtype; the
// 16-bit sampler would refuse it.
TEST(RngNormal, ZeroSigmaGivesZeros) {
  for (DType t : {DType::fp32, DType::bf16, DType::fp16, DType::fp64}) {
    HostTensor x(t, {9});
    fill_normal(x, 3, 2, 0.0);
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(x.get(i), 0.0) << name(t) << " " << i;
  }
  HostTensor h(DType::bf16, {4});
  EXPECT_THROW(fill_normal(h, 3, 2, -1.0), std::invalid_argument);
}

// A contiguous fp32, bf16 or fp16 tensor is filled in place (numerics/rng.cpp); a strided one goes
// through set(): the two give the same codes.
TEST(RngNormal, ContiguousFillIsTheCodecsFill) {
  const int64_t rows = 300, cols = 301;
  for (DType t : {DType::fp32, DType::bf16, DType::fp16}) {
    HostTensor fast(t, {rows, cols}), slow(t, {rows, cols}, {1, rows}, rows * cols);
    fill_normal(fast, 4, 1, 3.0);
    fill_normal(slow, 4, 1, 3.0);
    ASSERT_TRUE(fast.is_contiguous());
    ASSERT_FALSE(slow.is_contiguous());
    for (int64_t i = 0; i < fast.numel(); ++i) ASSERT_EQ(fast.code(i), slow.code(i)) << name(t) << " " << i;
  }
}

// Every SIMD path the CPU has gives Random123's bits (random_block, one call a block): runs that
// start anywhere (a counter whose low word wraps into the high word included), of lengths that
// are and are not multiples of the 8 and 16 lanes, for several seeds and streams.
TEST(RngBlocks, EveryPathIsRandom123BlockForBlock) {
  const auto paths = detail::supported_philox_paths();
  ASSERT_EQ(paths.front(), detail::PhiloxPath::scalar);
  std::printf("[          ] %zu Philox path(s) on this CPU\n", paths.size());
  const uint64_t firsts[] = {0, 5, 0xFFFFFFF9ull, (1ull << 40) + 3};
  const int64_t counts[] = {1, 7, 8, 15, 16, 17, 100, 1000};
  for (const detail::PhiloxPath path : paths)
    for (const uint64_t seed : {0ull, 0x0123456789abcdefull, ~0ull})
      for (const uint32_t stream : {0u, 300u, 0xFFFFFFFFu})
        for (const uint64_t first : firsts)
          for (const int64_t count : counts) {
            std::vector<uint32_t> got(static_cast<size_t>(4 * count + 4), 0xDEADBEEFu);
            detail::random_blocks_on(path, seed, stream, first, count, got.data());
            for (int64_t b = 0; b < count; ++b) {
              const std::array<uint32_t, 4> want = random_block(seed, stream, first + static_cast<uint64_t>(b));
              for (int j = 0; j < 4; ++j)
                ASSERT_EQ(got[static_cast<size_t>(4 * b + j)], want[static_cast<size_t>(j)])
                    << "path " << static_cast<int>(path) << " seed " << seed << " stream " << stream << " first "
                    << first << " block " << b << " lane " << j;
            }
            for (int j = 0; j < 4; ++j)
              EXPECT_EQ(got[static_cast<size_t>(4 * count + j)], 0xDEADBEEFu) << "wrote past the run";
          }
  std::vector<uint32_t> got(400);
  random_blocks(7, 9, 11, 100, got.data());  // the dispatched path
  for (int64_t b = 0; b < 100; ++b)
    EXPECT_EQ(got[static_cast<size_t>(4 * b + 2)], random_block(7, 9, 11 + static_cast<uint64_t>(b))[2]);
}

// fill_block_codes is random_block's bytes, code by code, through the map; the last partial
// block gives its first codes only.
TEST(RngBlocks, FillBlockCodesIsTheBlocksBytes) {
  const int64_t n = 16 * 300 + 5;  // past one 256-block run, and a partial block
  std::vector<uint8_t> codes(static_cast<size_t>(n) + 1, 0xAB);
  fill_block_codes(codes.data(), n, 42, 3, [](uint8_t x) { return static_cast<uint8_t>(x ^ 0x55); });
  for (int64_t i = 0; i < n; ++i) {
    const std::array<uint32_t, 4> r = random_block(42, 3, static_cast<uint64_t>(i / 16));
    uint8_t bytes[16];
    std::memcpy(bytes, r.data(), 16);
    ASSERT_EQ(codes[static_cast<size_t>(i)], bytes[i % 16] ^ 0x55) << i;
  }
  EXPECT_EQ(codes[static_cast<size_t>(n)], 0xAB) << "wrote past n";
}

}  // namespace
}  // namespace opcts
