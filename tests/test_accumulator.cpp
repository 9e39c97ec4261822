// Accumulator models: YAML round trip and errors, hand-computed bounds of tiny reductions, exact-fill checks,
// the bias check (it sees a 2^-8 relative error no element shows), and a simulation of the truncating model
// staying inside its probabilistic bound and drift.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <random>

#include "core/azuma.hpp"
#include "runner/accumulator.hpp"
#include "runner/compare.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

constexpr double kU = 0x1p-24;

double gamma(double k, double u) { return k * u / (1 - k * u); }

ReductionStats one_element(int64_t K, double S, double Q, double X) {
  ReductionStats st;
  st.terms = K;
  st.abs_sum = {S};
  st.sq_sum = {Q};
  st.magnitude = {X};
  return st;
}

TEST(AccumulatorModel, YamlRoundTripAndErrors) {
  const std::string dir = testutil::temp_dir();
  const AccumulatorModel hopper{14, AccRounding::truncate, 128};
  EXPECT_EQ(to_string(hopper), "{bits: 14, rounding: truncate, promote_every: 128}");
  EXPECT_EQ(parse_accumulator("t.yaml", YAML::Load(to_string(hopper))), hopper);
  EXPECT_EQ(parse_accumulator("t.yaml", YAML::Load("{}")), AccumulatorModel{});  // IEEE fp32, whole K
  const auto err = [](const char* text) {
    return testutil::yaml_error_of([&] { parse_accumulator("t.yaml", YAML::Load(text)); });
  };
  EXPECT_NE(err("{bits: 30}").find("2..24"), std::string::npos);
  EXPECT_NE(err("{bits: 14, rounding: up}").find("'up'"), std::string::npos);
  EXPECT_NE(err("{bits: 14, promote: 128}").find("unknown key 'promote'"), std::string::npos);
  EXPECT_NE(err("{promote_every: -1}").find(">= 0"), std::string::npos);
  EXPECT_NE(err("14").find("must be a map"), std::string::npos);
}

// The default model reproduces the fp32 bound the reference used to bake in: (K − 1) additions
// in the chunk, 2 scale roundings outside it, 5 in the epilogue (accumulator.cpp).
TEST(AccumulationBound, DefaultFp32WorstCaseByHand) {
  const ReductionStats st = one_element(16, 10.0, 52.0, 2.0);
  const AccumulationBound b = accumulation_bound(AccumulatorModel{}, st, 0);
  const double g_in = gamma(15, kU), g_out = gamma(2, kU), acc = (g_in + g_out + g_in * g_out) * 10.0;
  EXPECT_DOUBLE_EQ(b.element(st, 0), acc + gamma(5, kU) * (2.0 + acc));
  EXPECT_EQ(b.c_var, 0.0);  // no probabilistic bound without a false-alarm probability
  EXPECT_FALSE(b.exact);
}

// Hopper's model over K = 256: two chunks of 128, 2·128 truncations of 2^-13 each in a chunk.
TEST(AccumulationBound, TruncatingChunksByHand) {
  const AccumulatorModel hopper{14, AccRounding::truncate, 128};
  const double S = 100, Q = 64, X = 5;
  ReductionStats st = one_element(256, S, Q, X);
  const AccumulationBound wc = accumulation_bound(hopper, st, 0);
  const double up = 0x1p-13, g_in = gamma(256, up), g_out = gamma(3, kU);
  EXPECT_DOUBLE_EQ(g_in, 1.0 / 31);
  const double acc_wc = (g_in + g_out + g_in * g_out) * S;
  EXPECT_DOUBLE_EQ(wc.element(st, 0), acc_wc + gamma(5, kU) * (X + acc_wc));

  st.zero_mean = true;  // now the probabilistic bound: λ√V + drift, the smaller of the two
  const AccumulationBound pr = accumulation_bound(hopper, st, 1e-12);
  const double lambda = std::sqrt(2 * std::log(2e12));
  EXPECT_NEAR(pr.lambda, 7.527, 1e-3);
  EXPECT_DOUBLE_EQ(pr.lambda, lambda);
  const double V = (256 * up * up + 3 * kU * kU) * Q;
  const double acc_pr = lambda * std::sqrt(V) + 2.446 * std::sqrt(128.0) * up * std::sqrt(Q);
  EXPECT_DOUBLE_EQ(pr.element(st, 0), acc_pr + gamma(5, kU) * (X + acc_pr));
  EXPECT_LT(acc_pr, acc_wc);
  EXPECT_DOUBLE_EQ(pr.slope_drift, (4.324 * std::sqrt(128.0) + 1) * up);
  // fast_accum (never promoted) over 8192 products: 2·8192·2^-13 >= 1, no worst case at all.
  const ReductionStats fast = one_element(8192, S, Q, X);
  EXPECT_TRUE(std::isinf(accumulation_bound({14, AccRounding::truncate, 0}, fast, 0).element(fast, 0)));
}

TEST(AccumulationBound, ExactFillsNeedTheirBitsInEveryAdder) {
  ReductionStats st = one_element(4096, 1, 1, 1);
  st.exact_term_bits = 6;  // runs of 128 reach 2^13 quanta, the whole K 2^18
  EXPECT_TRUE(accumulation_bound(AccumulatorModel{}, st, 1e-12).exact);
  EXPECT_TRUE(accumulation_bound({14, AccRounding::truncate, 128}, st, 1e-12).exact);
  EXPECT_EQ(accumulation_bound({14, AccRounding::truncate, 128}, st, 1e-12).element(st, 0), 0.0);
  EXPECT_FALSE(accumulation_bound({13, AccRounding::truncate, 128}, st, 1e-12).exact);
  EXPECT_FALSE(accumulation_bound({14, AccRounding::truncate, 256}, st, 1e-12).exact);
  EXPECT_FALSE(accumulation_bound({14, AccRounding::truncate, 0}, st, 1e-12).exact);  // 4096 terms in 14 bits
  st.exact_term_bits = 18;  // the whole K would need 2^30 quanta: not exact even in fp32
  EXPECT_FALSE(accumulation_bound(AccumulatorModel{}, st, 1e-12).exact);
  st.exact_term_bits = -1;  // a random fill
  EXPECT_FALSE(accumulation_bound(AccumulatorModel{}, st, 1e-12).exact);
}

TEST(SlopeCheck, SlopeByHandAndNoCheckWithoutAProbabilisticBound) {
  SlopeAccumulator s;
  s.add(1.0, 0.01, 0.0);
  s.add(2.0, 0.02, 0.0);
  AccumulationBound b;
  EXPECT_EQ(s.finish(b).lo, 0.0);  // c_var = 0: not checked
  b.c_var = 1e-20;
  b.lambda = 1;
  b.c_epi = 0;
  const SlopeCheck c = s.finish(b);
  EXPECT_DOUBLE_EQ(c.slope, 0.01);
  EXPECT_EQ(c.lo, 0.0);  // no noise given, no drift (rne)
  EXPECT_EQ(c.hi, 0.0);
}

// An fp32 output whose every element is off by 2^-8 relative, against reduction statistics of
// K = 4096 products under Hopper's model: each element's bound is ~2^-6 relative, so no
// element shows the error, and the bias check does.
TEST(SlopeCheck, SeesARelativeErrorNoElementShows) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  const int64_t n = 4096, K = 4096;
  HostTensor exact_got(DType::fp32, {n}), scaled_got(DType::fp32, {n});
  std::vector<double> want(n);
  ReductionStats st;
  st.terms = K;
  st.zero_mean = true;
  for (int64_t i = 0; i < n; ++i) {
    const double q = static_cast<double>(K);  // products of variance 1
    want[i] = static_cast<float>(normal(rng) * std::sqrt(q));
    st.abs_sum.push_back(0.64 * static_cast<double>(K));
    st.sq_sum.push_back(q);
    st.magnitude.push_back(std::fabs(want[i]));
    exact_got.set(i, want[i]);
    scaled_got.set(i, want[i] * (1 + 0x1p-8));
  }
  Tolerance t;
  t.metric = Metric::bounded;
  t.factor = 1;
  t.false_alarm = 1e-12;
  t.accumulator = {14, AccRounding::truncate, 128};
  std::vector<WorstElement> worst;
  const OutputStats ok = compare_output("d", exact_got, want, nullptr, t, worst, 5, nullptr, 0, &st);
  EXPECT_EQ(ok.mismatches, 0);
  EXPECT_FALSE(ok.biased());
  const OutputStats bad = compare_output("d", scaled_got, want, nullptr, t, worst, 5, nullptr, 0, &st);
  EXPECT_EQ(bad.mismatches, 0) << "the per-element bound should not see 2^-8 here";
  EXPECT_LT(bad.max_ratio, 1.0);
  EXPECT_TRUE(bad.biased()) << bad.slope << " in [" << bad.slope_lo << ", " << bad.slope_hi << "]";
  EXPECT_NEAR(bad.slope, 0x1p-8, 1e-6);
  // A shrink (both scales × (1 − 2^-8)) is outside too, beyond the truncating model's drift.
  for (int64_t i = 0; i < n; ++i) scaled_got.set(i, want[i] * (1 - 0x1p-7));
  EXPECT_TRUE(compare_output("d", scaled_got, want, nullptr, t, worst, 5, nullptr, 0, &st).biased());
  // The same statistics under IEEE fp32: the bound shrinks by 2^11 and every element shows it.
  t.accumulator = AccumulatorModel{};
  for (int64_t i = 0; i < n; ++i) scaled_got.set(i, want[i] * (1 + 0x1p-8));
  EXPECT_GT(compare_output("d", scaled_got, want, nullptr, t, worst, 5, nullptr, 0, &st).mismatches, n / 2);
}

// The truncating model itself (sequential, one product per step: the worst case for its
// drift), simulated on i.i.d. normal products: every element stays below a fifth of its
// probabilistic bound, and the slope of the errors within the model's drift D.
TEST(AccumulationBound, SimulatedTruncatingAdderStaysInside) {
  const int p = 14;
  const int64_t K = 1024, n = 128, elements = 2000;
  auto trunc_to = [](double x, int bits) {
    if (x == 0) return 0.0;
    int e;
    std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
    const double grid = std::ldexp(1.0, e - bits);
    return std::trunc(x / grid) * grid;
  };
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const AccumulatorModel model{p, AccRounding::truncate, n};
  double worst = 0, swe = 0, sww = 0;
  for (int64_t e = 0; e < elements; ++e) {
    std::vector<double> t(K);
    double exact = 0, S = 0, Q = 0;
    for (auto& x : t) {
      x = static_cast<float>(normal(rng) * normal(rng));
      exact += x;
      S += std::fabs(x);
      Q += x * x;
    }
    double got = 0;
    for (int64_t c = 0; c < K; c += n) {
      double acc = 0;
      for (int64_t k = c; k < c + n; ++k) {
        // Align the smaller operand to the larger one's grid, truncate, normalize by truncation.
        const double big = std::max(std::fabs(acc), std::fabs(t[k]));
        int eb;
        std::frexp(big, &eb);
        const double grid = std::ldexp(1.0, eb - p);
        acc = trunc_to(std::trunc(acc / grid) * grid + std::trunc(t[k] / grid) * grid, p);
      }
      got += acc;
    }
    ReductionStats st = one_element(K, S, Q, std::fabs(exact));
    st.zero_mean = true;
    const AccumulationBound b = accumulation_bound(model, st, 1e-12);
    worst = std::max(worst, std::fabs(got - exact) / b.element(st, 0));
    swe += (got - exact) * exact;
    sww += exact * exact;
  }
  EXPECT_LT(worst, 0.2);
  ReductionStats st = one_element(K, 1, 1, 1);
  st.zero_mean = true;
  const double D = accumulation_bound(model, st, 1e-12).slope_drift;
  EXPECT_LT(swe / sww, 0.0);  // truncation shrinks
  EXPECT_GT(swe / sww, -D / 4);
}

// Azuma–Hoeffding's Λ solves 2·exp(−Λ²/2) = p; the values the bounds were derived with: 7.5265089
// at the scaled GEMMs' and indexing's p = 1e-12, √48 at the lse floor's 2·e^-24.
TEST(AzumaLambda, SolvesTheTwoSidedTailAtEachFalseAlarm) {
  for (double p : {0.5, 1e-3, 1e-12, 2 * std::exp(-24.0)}) {
    const double l = azuma_lambda(p);
    EXPECT_NEAR(2 * std::exp(-l * l / 2), p, 1e-13 * p) << p;
  }
  EXPECT_NEAR(azuma_lambda(1e-12), 7.5265089246593595, 1e-15);
  EXPECT_EQ(azuma_lambda(2 * std::exp(-24.0)), std::sqrt(48.0));
}

}  // namespace
}  // namespace opcts
