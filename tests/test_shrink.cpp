// Shrinking a failing case (runner/shrink.hpp): a planted lost update found on a seeded sample
// shrinks to the smallest problem that shows it, no larger than any hand-written case where the
// plant runs; the candidates prefer tile boundaries; a passing case has nothing to shrink.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "families/indexing/indexing.hpp"
#include "runner/catalog.hpp"
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
