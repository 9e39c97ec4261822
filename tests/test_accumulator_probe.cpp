// opcts probe accumulators: the experiments read back the model of a simulated adder, refuse
// what no model explains, and, through the CLI, read host.emulated_hopper as Hopper's model.
#include <gtest/gtest.h>

#include <cmath>

#include "runner/accumulator_probe.hpp"
#include "runner/catalog.hpp"
#include "test_util.hpp"

namespace opcts {
namespace {

enum class Mode { nearest_even, toward_zero, floor };

// x rounded to p significant bits.
double round_bits(double x, int p, Mode mode) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);  // x = f·2^e, 0.5 <= |f| < 1
  const double scaled = std::ldexp(x, p - e);
  const double r = mode == Mode::toward_zero ? std::trunc(scaled)
                   : mode == Mode::floor     ? std::floor(scaled)
                                             : std::nearbyint(scaled);
  return std::ldexp(r, e - p);
}

// The AccumulatorModel's own semantics, in the order of k: each chunk of promote_every products
// summed by a p-bit adder (every add rounded), chunk sums added in fp32. `lanes` > 1 sums each
// chunk in that many interleaved accumulators (k mod lanes), added in fp32 at the chunk's end:
// another order, which no chunk length describes.
ProbeRun simulated(AccumulatorModel m, bool floor_rounding = false, int lanes = 1) {
  return [m, floor_rounding, lanes](const ProbeBatch& b) {
    const Mode mode = floor_rounding                        ? Mode::floor
                      : m.rounding == AccRounding::truncate ? Mode::toward_zero
                                                            : Mode::nearest_even;
    std::vector<double> out;
    for (const auto& row : b.a) {
      float total = 0;
      const int64_t chunk = m.promote_every ? m.promote_every : b.k_len;
      for (int64_t c0 = 0; c0 < b.k_len; c0 += chunk) {
        std::vector<double> acc(static_cast<size_t>(lanes), 0.0);
        for (int64_t k = c0; k < std::min(b.k_len, c0 + chunk); ++k) {
          const double t = row[static_cast<size_t>(k)] * b.b[static_cast<size_t>(k)];
          double& a = acc[static_cast<size_t>(k % lanes)];
          if (t != 0) a = round_bits(a + t, m.bits, mode);
        }
        for (double a : acc) total += static_cast<float>(a);
      }
      out.push_back(total);
    }
    return out;
  };
}

TEST(AccumulatorProbe, ReadsBackTheModelOfASimulatedAdder) {
  const AccumulatorModel models[] = {
      {},                                                                     // IEEE fp32
      {.bits = 14, .rounding = AccRounding::truncate, .promote_every = 128},  // cuBLASLt FP8 on sm90
      {.bits = 14, .rounding = AccRounding::truncate, .promote_every = 0},    // FAST_ACCUM
      {.bits = 11, .rounding = AccRounding::rne, .promote_every = 32},
      {.bits = 22, .rounding = AccRounding::truncate, .promote_every = 64},
      {.bits = 3, .rounding = AccRounding::rne, .promote_every = 0},
  };
  for (const auto& m : models) {
    const ProbeFinding f = probe_accumulator(simulated(m));
    ASSERT_TRUE(f.model) << to_string(m) << ": " << f.unexplained;
    EXPECT_EQ(*f.model, m) << to_string(*f.model);
    EXPECT_EQ(f.evidence.size(), 3u);
  }
}

TEST(AccumulatorProbe, GivesNoModelWhereNoneExplainsTheAnswers) {
  const AccumulatorModel hopper{.bits = 14, .rounding = AccRounding::truncate, .promote_every = 128};
  const ProbeFinding floor = probe_accumulator(simulated(hopper, true));
  EXPECT_FALSE(floor.model);
  EXPECT_NE(floor.unexplained.find("rounding"), std::string::npos) << floor.unexplained;
  // A path that returns something else than the small product or nothing.
  const ProbeFinding garbage =
      probe_accumulator([](const ProbeBatch& b) { return std::vector<double>(b.a.size(), 3.0); });
  EXPECT_FALSE(garbage.model);
  EXPECT_NE(garbage.unexplained.find("bits"), std::string::npos) << garbage.unexplained;
  EXPECT_THROW(probe_accumulator([](const ProbeBatch&) { return std::vector<double>{}; }), std::runtime_error);
}

// Under rne any summation order is bounded, so a path of interleaved accumulators still gets a
// model (unchunked); a truncating one in no chunk pattern does not.
TEST(AccumulatorProbe, InterleavedSumsKeepAnRneModelOnly) {
  const ProbeFinding rne =
      probe_accumulator(simulated({.bits = 16, .rounding = AccRounding::rne, .promote_every = 256}, false, 4));
  ASSERT_TRUE(rne.model) << rne.unexplained;
  EXPECT_EQ(*rne.model, (AccumulatorModel{.bits = 16, .rounding = AccRounding::rne, .promote_every = 0}));
  const ProbeFinding trunc =
      probe_accumulator(simulated({.bits = 16, .rounding = AccRounding::truncate, .promote_every = 256}, false, 4));
  EXPECT_FALSE(trunc.model);
  EXPECT_NE(trunc.unexplained.find("no chunk pattern"), std::string::npos) << trunc.unexplained;
}

// The CLI on the host device: host.emulated_hopper reads as the model sm90's manifest gives
// cuBLASLt (the emulation shares no code with the probe), host.emulated as IEEE fp32, and the
// entries put the longer impl name first so `host_emulated*` cannot take the hopper's cases.
TEST(AccumulatorProbe, CliReadsTheHostEmulations) {
  const testutil::Shell r = testutil::sh(std::string(OPCTS_BINARY) + " probe accumulators --arch host");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string& o = r.output;
  const auto hopper = o.find(
      "  - match: \"scaled_mm.host_emulated_hopper*/*\"\n    accumulator: {bits: 14, rounding: truncate, "
      "promote_every: 128}");
  const auto hopper_fast = o.find(
      "  - match: \"scaled_mm.host_emulated_hopper*/*_fastacc_*\"\n    accumulator: {bits: 14, rounding: truncate, "
      "promote_every: 0}");
  const auto plain =
      o.find("  - match: \"scaled_mm.host_emulated*/*\"\n    accumulator: {bits: 24, rounding: rne, promote_every: 0}");
  ASSERT_NE(hopper, std::string::npos) << o;
  ASSERT_NE(hopper_fast, std::string::npos) << o;
  ASSERT_NE(plain, std::string::npos) << o;
  EXPECT_LT(hopper_fast, hopper);
  EXPECT_LT(hopper, plain);
  EXPECT_NE(o.find("paths measured, 0 without a model"), std::string::npos) << o;
}

}  // namespace
}  // namespace opcts
