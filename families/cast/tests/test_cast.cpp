// The cast family: ids, validation, edge inputs, host.cvt against the codec reference on every
// catalog problem, and the planted ties-up bug failing wherever ties are probed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "app/builtins.hpp"
#include "core/family.hpp"
#include "families/cast/cast.hpp"
#include "judge/compare.hpp"
#include "runner/catalog.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

const Family& family() { return *builtin_registry().family("cast"); }

std::vector<CatalogEntry> catalog() {
  return load_catalogs(builtin_registry(), {(testutil::cases_dir() / "cast.yaml").string()});
}

// Mismatches of an impl's output against the codec reference.
int64_t mismatches(const Impl& impl, const cast::Problem& p) {
  const TensorMap in = family().make_inputs(p, case_seed(family(), p));
  const References ref = family().reference(p, in);
  const ArchInfo host{"host", "host"};
  const TensorMap out = impl.run(p, in, RunContext{&host, -1});
  std::vector<WorstElement> worst;
  Tolerance bitexact;
  bitexact.metric = Metric::bitexact;
  return compare_output("y", out.at("y"), {.want = ref.exact.at("y")}, bitexact, worst).mismatches;
}

// Every catalog id round-trips in tests/test_family_kit.cpp (KitRoundTrip); here, the spellings.
TEST(CastId, SpellsTheE8m0Rounding) {
  ASSERT_GE(catalog().size(), 80u);
  EXPECT_EQ(cast::problem_id(cast::parse_problem_id("fp32_to_e8m0fnu_ceil_nonsaturating_edges")),
            "fp32_to_e8m0fnu_ceil_nonsaturating_edges");
}

TEST(CastId, ValidationNamesTheRule) {
  testutil::expect_invalid([](const std::string& id) { cast::parse_problem_id(id); },
                           {
                               {"fp32_to_e2m1fn_nonsaturating_edges", "only overflow satfinite"},
                               {"fp32_to_e4m3fn_satfinite_exhaustive", "16-bit"},
                               {"e4m3fn_to_fp16_allcodes", "fp32"},
                               {"fp32_to_e4m3fn_sideways_edges", "sideways"},
                           });
  // `input: random` without a count is refused; a count of 0 is an empty conversion.
  try {
    cast::Problem{.input = cast::Input::random}.validate();
    ADD_FAILURE() << "random input without a count was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs a count"), std::string::npos) << e.what();
  }
}

// A count of 0 (the zero-size class: `random` samples draw it) converts an empty tensor: the
// reference and host.cvt agree on nothing, packed 4-bit and e8m0 targets included.
TEST(CastEmpty, ACountOfZeroConvertsAnEmptyTensor) {
  for (const char* id : {"fp32_to_e4m3fn_satfinite_random0", "fp32_to_e2m1fn_satfinite_random0",
                         "fp32_to_e8m0fnu_floor_nonsaturating_random0"}) {
    const cast::Problem p = cast::parse_problem_id(id);
    EXPECT_EQ(cast::problem_id(p), id);
    EXPECT_EQ(cast::input_count(p), 0) << id;
    const std::vector<std::string> classes = cast::edge_classes_of(p);
    EXPECT_EQ(std::count(classes.begin(), classes.end(), "zero-size dimensions"), 1) << id;
    EXPECT_EQ(std::count(classes.begin(), classes.end(), "overflow and saturation"), 0) << id;  // no values
    EXPECT_EQ(std::count(classes.begin(), classes.end(), "partial tiles"), 0) << id;            // no block at all
    EXPECT_EQ(mismatches(*builtin_registry().impl("host.cvt"), p), 0) << id;
  }
}

TEST(CastEdges, HoldTiesThresholdsAndSpecials) {
  const auto v = cast::edge_values(DType::e4m3fn);
  auto has = [&](float x) {
    for (float y : v)
      if (y == x || (std::isnan(x) && std::isnan(y))) return true;
    return false;
  };
  EXPECT_TRUE(has(464.f));                            // the RNE tie above max: 448 or overflow
  EXPECT_TRUE(has(std::nextafter(464.f, INFINITY)));  // one ulp past it overflows
  EXPECT_TRUE(has(-0.f) && has(INFINITY) && has(-INFINITY) && has(NAN));
  EXPECT_TRUE(has(std::ldexp(1.f, -10)));  // half the smallest subnormal 2^-9: ties to 0
  EXPECT_TRUE(has(1.0625f));               // the tie between 1 and 1.125
}

TEST(CastReference, E4m3fnOverflowPolicies) {
  cast::Problem p;
  p.to = DType::e4m3fn;
  HostTensor x(DType::fp32, {4});
  x.set(0, 464);
  x.set(1, 465);
  x.set(2, -INFINITY);
  x.set(3, -1e-9);
  p.overflow = Overflow::satfinite;
  const HostTensor sat = cast::reference_output(p, x);
  EXPECT_EQ(sat.code(0), 0x7Eu);  // 448
  EXPECT_EQ(sat.code(1), 0x7Eu);
  EXPECT_EQ(sat.code(2), 0xFEu);
  EXPECT_EQ(sat.code(3), 0x80u);  // −0 survives in FN formats
  p.overflow = Overflow::nonsaturating;
  const HostTensor nonsat = cast::reference_output(p, x);
  EXPECT_EQ(nonsat.code(0), 0x7Eu);
  EXPECT_EQ(nonsat.code(1), 0x7Fu);  // NaN
  EXPECT_EQ(nonsat.code(2), 0xFFu);  // NaN, sign kept
  p.to = DType::e4m3fnuz;
  EXPECT_EQ(cast::reference_output(p, x).code(3), 0x00u);  // FNUZ has no −0
}

TEST(CastHostCvt, AgreesWithTheCodecOnEveryCatalogProblem) {
  const Impl* impl = builtin_registry().impl("host.cvt");
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<cast::Problem>();
    EXPECT_EQ(mismatches(*impl, p), 0) << e.problem_id;
  }
}

TEST(CastPlanted, TiesUpFailsEveryEdgeAndExhaustiveCase) {
  const Impl* planted = builtin_registry().impl("host.cvt_ties_up");
  ASSERT_TRUE(planted && planted->planted());
  const ArchInfo host{"host", "host"};
  int probed = 0;
  for (const auto& e : catalog()) {
    const auto& p = (*e.problem).as<cast::Problem>();
    if (p.input == cast::Input::random || !planted->supports(p, host).ok) continue;
    EXPECT_GT(mismatches(*planted, p), 0) << e.problem_id << ": the planted ties-up bug passed";
    ++probed;
  }
  EXPECT_GE(probed, 30);
}

}  // namespace
}  // namespace opcts
