// The scaled_mm family: ids, the reference on a hand-checked case, host.emulated against the bound on
// the catalog's smoke tier, negative cases, and each planted bug failing where it is probed.
#include <gtest/gtest.h>

#include <cmath>

#include "app/builtins.hpp"
#include "runner/catalog.hpp"
#include "runner/compare.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "refimpl/scaled_mm.hpp"
#include "tests/test_family_util.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

const Family& family() { return *builtin_registry().family("scaled_mm"); }

std::vector<CatalogEntry> catalog() {
  return load_catalogs(builtin_registry(), {(testutil::cases_dir() / "scaled_mm.yaml").string()});
}

const ArchInfo& host() { return testutil::host_arch(); }

int64_t mismatches(const Impl& impl, const scaled_mm::Problem& p) { return testutil::bounded_mismatches(family(), impl, p, "d"); }

// Every catalog id round-trips in tests/test_family_kit.cpp (KitRoundTrip); here, a spelling.
TEST(ScaledMmId, SpellsTheOptionalTokens) {
  ASSERT_GE(catalog().size(), 300u);
  const scaled_mm::Problem p{.m = 128, .n = 256, .k = 512, .bias = true, .fill = scaled_mm::Fill::exact};
  EXPECT_EQ(scaled_mm::problem_id(p), "tensorwise_e4m3fn_e4m3fn_tn_m128_n256_k512_out_bf16_bias_exact");
}

TEST(ScaledMmId, ValidationNamesTheRule) {
  auto err = [](const char* id) {
    try {
      scaled_mm::parse_problem_id(id);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k40_out_bf16_random").find("expect_error: K"), std::string::npos);
  EXPECT_NE(err("mxfp4_e4m3fn_e4m3fn_tn_m1_n1_k64_floor_out_bf16_random").find("e2m1fn"), std::string::npos);
  EXPECT_NE(err("tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k16_out_fp32_bias_random").find("bias"), std::string::npos);
  EXPECT_NE(err("tensorwise_e4m3fn_e4m3fn_xy_m1_n1_k16_out_bf16_random").find("xy"), std::string::npos);
  EXPECT_NE(err("tensorwise_e4m3fn_e4m3fn_tn_m1_n1_k16_out_bf16_random_expect_K").find("valid"), std::string::npos);
}

TEST(ScaledMmReference, HandCheckedTensorwise) {
  // A = [[1, 2]] ... padded to K = 16 with zeros; scales 0.5 and 4: D = 0.5·4·(1·3 + 2·(-1)) = 2.
  scaled_mm::Problem p;
  p.m = 1;
  p.n = 1;
  p.k = 16;
  p.out = DType::fp32;
  TensorMap in;
  HostTensor a(DType::e4m3fn, {1, 16}), b(DType::e4m3fn, {1, 16});
  a.set(0, 1);
  a.set(1, 2);
  b.set(0, 3);
  b.set(1, -1);
  HostTensor as(DType::fp32, {1, 1}), bs(DType::fp32, {1, 1});
  as.set(0, 0.5);
  bs.set(0, 4);
  in.emplace("a", a);
  in.emplace("b", b);
  in.emplace("a_scale", as);
  in.emplace("b_scale", bs);
  const References r = scaled_mm::reference(p, in);
  EXPECT_EQ(r.exact.at("d").at(0), 2.0);
  EXPECT_GT(r.bound.at("d").at(0), 0.0);  // a random fill: the fp32 accumulation bound
  const TensorMap out = builtin_registry().impl("host.emulated")->run(p, in, RunContext{&host(), -1});
  EXPECT_EQ(out.at("d").get(0), 2.0);
}

TEST(ScaledMmReference, ExactFillsHaveZeroBoundAndEmulatedMatchesBitForBit) {
  const Impl* emu = builtin_registry().impl("host.emulated");
  int n = 0;
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<scaled_mm::Problem>();
    if (e.tier != Tier::smoke || p.fill != scaled_mm::Fill::exact || !p.expect_error.empty() || p.fast_accum) continue;
    const TensorMap in = family().make_inputs(p, case_seed(family(), p));
    const References ref = family().reference(p, in);
    for (double b : ref.bound.at("d")) ASSERT_EQ(b, 0.0) << e.problem_id;
    const TensorMap out = emu->run(p, in, RunContext{&host(), -1});
    std::vector<WorstElement> worst;
    Tolerance t;
    t.metric = Metric::exact;
    EXPECT_EQ(compare_output("d", out.at("d"), ref.exact.at("d"), nullptr, t, worst).mismatches, 0) << e.problem_id;
    ++n;
  }
  EXPECT_GE(n, 20);
}

TEST(ScaledMmEmulated, WithinTheBoundOnEverySmokeProblem) {
  const Impl* emu = builtin_registry().impl("host.emulated");
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<scaled_mm::Problem>();
    if (e.tier != Tier::smoke || !p.expect_error.empty()) continue;
    EXPECT_EQ(mismatches(*emu, p), 0) << e.problem_id;
  }
}

TEST(ScaledMmNegative, EveryNegativeCaseRaisesTheNamedArgument) {
  testutil::expect_negative_cases_refused(family(), *builtin_registry().impl("host.emulated"), catalog(), 10);
}

// Each planted impl fails on every smoke problem it takes (it SKIPs the ones that do not
// probe its bug), and takes at least `at_least` of them.
void expect_planted_fails(const char* impl_name, int at_least) {
  testutil::expect_planted_fails_on_smoke(family(), builtin_registry().impl(impl_name), catalog(), "d", at_least);
}

TEST(ScaledMmPlanted, IgnoringTheOutputScaleFails) { expect_planted_fails("host.emulated_no_out_scale", 5); }
TEST(ScaledMmPlanted, TransposedScaleLayoutFails) { expect_planted_fails("host.emulated_scale_transposed", 5); }
TEST(ScaledMmPlanted, DroppingThePartialKTileFails) { expect_planted_fails("host.emulated_drop_partial_k", 5); }

TEST(ScaledMmCompare, BoundedMetricUsesThePerElementBound) {
  HostTensor got(DType::fp32, {2});
  got.set(0, 1.5);
  got.set(1, 10.0);
  const std::vector<double> want{1.0, 10.0}, bound{0.5, 0.0};
  Tolerance t;
  t.metric = Metric::bounded;
  t.factor = 1;
  std::vector<WorstElement> w;
  EXPECT_EQ(compare_output("d", got, want, nullptr, t, w, 5, &bound).mismatches, 0);
  got.set(1, 10.5);
  EXPECT_EQ(compare_output("d", got, want, nullptr, t, w, 5, &bound).mismatches, 1);
  EXPECT_THROW(compare_output("d", got, want, nullptr, t, w), std::invalid_argument);  // no bound given
}

}  // namespace
}  // namespace opcts
