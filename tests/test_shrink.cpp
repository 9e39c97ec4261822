// Shrinking a failing case (runner/shrink.hpp): a planted lost update found on a seeded sample
// shrinks to the smallest problem that shows it, no larger than any hand-written case where the
// plant runs; a planted short tail that only the samples reach (no hand-written problem shows
// it) shrinks to the fewest terms that show it; the candidates prefer tile boundaries; a passing
// case has nothing to shrink.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "families/indexing/indexing.hpp"
#include "runner/catalog.hpp"
#include "runner/execute.hpp"
#include "runner/shrink.hpp"
#include "tests/test_util.hpp"

namespace opcts {
namespace {

Suite host_suite() { return Suite(builtin_registry(), SuiteOptions{testutil::cases_dir().string(), {}, "host", ""}); }

TEST(Shrink, CandidatesAreSmallerAndPreferTileBoundaries) {
  const std::vector<int64_t> c = shrink_candidates(130);
  EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
  for (const int64_t want : {0, 1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129})
    EXPECT_TRUE(std::count(c.begin(), c.end(), want)) << want;
  EXPECT_EQ(c.back(), 129);
  EXPECT_TRUE(shrink_candidates(1) == std::vector<int64_t>{0});
  EXPECT_TRUE(shrink_candidates(0).empty());
}

// host.atomic_drop_dups on the scatter_add catalog's sampled smoke draw fp32 n33 m447 inner 5
// all_first loses every repeated term; the shrink ends at one destination and two terms, the
// least a lost update needs, which is no larger than any hand-written problem it runs on.
TEST(Shrink, ASampledPlantedFailureShrinksBelowEveryHandWrittenCase) {
  const Suite suite = host_suite();
  const std::string sampled = "scatter_add.host_atomic_drop_dups/fp32_i64_n33_m447_h5_allfirst";
  const auto entries = load_catalogs(builtin_registry(), {testutil::cases_dir().string()});
  bool drawn = false;
  int64_t smallest = INT64_MAX;  // the fewest terms of a hand-written problem the plant runs on
  const Impl& plant = *builtin_registry().impl("host.atomic_drop_dups");
  for (const auto& e : entries) {
    if (e.family->name() != "scatter_add") continue;
    if (e.source.find("(sample ") != std::string::npos) {
      drawn = drawn || "scatter_add.host_atomic_drop_dups/" + e.problem_id == sampled;
      continue;
    }
    if (plant.supports(*e.problem, suite.arch()).ok)
      smallest = std::min(smallest, e.problem->as<indexing::Problem>().src_numel());
  }
  ASSERT_TRUE(drawn) << sampled << " is no longer a draw of cases/scatter_add.yaml's sample";
  std::vector<std::string> steps;
  const ShrinkResult r = shrink_case(suite, sampled, -1, 60, [&](const std::string& s) { steps.push_back(s); });
  EXPECT_EQ(r.shrunk, "scatter_add.host_atomic_drop_dups/fp32_i64_n1_m2_allfirst");
  EXPECT_FALSE(r.out_of_time);
  EXPECT_EQ(steps.back(), r.shrunk);
  EXPECT_EQ(failure_signature(r.record), "FAIL out:exceeds_bound out:not_conserved");
  const Case c = case_from_id(suite.registry(), r.shrunk);
  EXPECT_LE(c.problem->as<indexing::Problem>().src_numel(), smallest);
}

// host.atomic_vec4_tail adds the terms four a step and, of the count % 4 left, only the last
// (families/indexing/host/indexing_atomic.cpp): a count of 2 or 3 (mod 4) loses terms. Every
// hand-written scatter_add problem has a count of 0 or 1 (mod 4), so the plant SKIPs them all, and
// its kernel, run on them anyway, passes each under the family's own bounds: the hand grids
// cannot catch it. The seeded smoke draws 2 and 3 (43 and 2,235 terms) can, and fail; the shrink
// ends at one destination and two terms, the fewest that leave a tail of two, which is no more
// than any hand-written problem with a term to lose.
TEST(Shrink, ATailBugOnlySamplesReachShrinksToTheFewestTermsThatShowIt) {
  const Suite suite = host_suite();
  const std::string head = "scatter_add.host_atomic_vec4_tail/";
  const auto entries = load_catalogs(builtin_registry(), {testutil::cases_dir().string()});
  ReferenceCache cache;
  int hand = 0, ran = 0;
  int64_t smallest = INT64_MAX;      // the fewest terms of a hand-written problem of two terms or more
  std::vector<std::string> failing;  // the sampled smoke draws the plant fails
  for (const auto& e : entries) {
    if (e.family->name() != "scatter_add" || !e.family->expected_error(*e.problem).empty()) continue;
    const Case c = case_from_id(suite.registry(), head + e.problem_id);
    const auto why = suite.skip_reason(c);
    if (e.source.find("(sample ") != std::string::npos) {
      if (e.tier == Tier::smoke && !why && execute_case(suite, c, -1, cache).raw_outcome == Outcome::FAIL)
        failing.push_back(e.problem_id);
      continue;
    }
    ++hand;
    ASSERT_TRUE(why.has_value()) << c.id << " runs: a hand-written problem shows the tail bug";
    EXPECT_NE(why->find("the one-term tail adds all of them"), std::string::npos) << c.id << ": " << *why;
    const int64_t terms = e.problem->as<indexing::Problem>().src_numel();
    if (terms >= 2) smallest = std::min(smallest, terms);
    if (terms > 200000) continue;  // quick on 2 cores: the same code path as the small ones
    EXPECT_EQ(execute_case(suite, c, -1, cache).raw_outcome, Outcome::PASS) << c.id;
    ++ran;
  }
  EXPECT_GE(hand, 200);
  EXPECT_GE(ran, 180);
  EXPECT_EQ(failing, (std::vector<std::string>{"int32_i32_n11_m43_allfirst", "fp32_i64_n33_m447_h5_allfirst"}));
  const ShrinkResult r = shrink_case(suite, head + "fp32_i64_n33_m447_h5_allfirst", -1, 60);
  EXPECT_EQ(r.shrunk, head + "fp32_i64_n1_m2_allfirst");
  EXPECT_FALSE(r.out_of_time);
  EXPECT_EQ(failure_signature(r.record), "FAIL out:exceeds_bound out:not_conserved");
  const Case c = case_from_id(suite.registry(), r.shrunk);
  EXPECT_EQ(c.problem->as<indexing::Problem>().src_numel(), 2);
  EXPECT_LE(2, smallest);
}

TEST(Shrink, APassingCaseHasNothingToShrink) {
  const Suite suite = host_suite();
  try {
    shrink_case(suite, "scatter_add.host_omp/fp32_i64_n37_m301_uniform", -1, 10);
    FAIL() << "a passing case shrank";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("does not fail (PASS)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace opcts
