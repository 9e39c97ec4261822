// Tests of shard planning: parsing i/N, LPT balance and determinism, test times and the cost model.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/shard_plan.hpp"

namespace opcts {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<std::string>> plan_ids(const std::vector<ShardItem>& items, int count) {
  std::vector<std::vector<std::string>> out;
  for (const auto& shard : plan_shards(items, count)) {
    out.emplace_back();
    for (std::size_t i : shard) out.back().push_back(items.at(i).id);
  }
  return out;
}

double load(const std::vector<ShardItem>& items, const std::vector<std::size_t>& shard) {
  double s = 0;
  for (std::size_t i : shard) s += items[i].cost;
  return s;
}

std::vector<ShardItem> random_items(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> cost(0.001, 5.0);
  std::vector<ShardItem> items;
  for (std::size_t i = 0; i < n; ++i)
    items.push_back({"fam.impl/case_" + std::to_string(i), i % 10 == 0 ? 1.0 : cost(rng)});
  return items;
}

TEST(ParseShard, AcceptsIOverN) {
  const auto s = parse_shard("3/4");
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(parse_shard("1/1").index, 1);
  EXPECT_EQ(parse_shard("12/12").count, 12);
}

TEST(ParseShard, RejectsAndQuotesBadText) {
  for (const char* bad : {"0/4", "5/4", "a/b", "3", "", "/", "1/0", "-1/4", "1/-4", " 1/4", "1/4 ", "1/4/5", "+1/4",
                          "1.0/4", "99999999999/99999999999"}) {
    try {
      parse_shard(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(PlanShards, LptBalancesTheTextbookExample) {
  const std::vector<ShardItem> items{{"a", 7}, {"b", 5}, {"c", 4}, {"d", 3}, {"e", 2}, {"f", 2}};
  const auto plan = plan_shards(items, 2);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_DOUBLE_EQ(load(items, plan[0]), 12);
  EXPECT_DOUBLE_EQ(load(items, plan[1]), 11);
  EXPECT_EQ(plan_ids(items, 2), (std::vector<std::vector<std::string>>{{"a", "d", "f"}, {"b", "c", "e"}}));
}

TEST(PlanShards, TiesGoToTheLowestShardAndLowestId) {
  const std::vector<ShardItem> items{{"z", 1}, {"y", 1}, {"x", 1}};
  EXPECT_EQ(plan_ids(items, 4), (std::vector<std::vector<std::string>>{{"x"}, {"y"}, {"z"}, {}}));
}

TEST(PlanShards, EveryItemInExactlyOneShard) {
  const auto items = random_items(257, 1);
  const auto plan = plan_shards(items, 7);
  ASSERT_EQ(plan.size(), 7u);
  std::vector<int> seen(items.size(), 0);
  for (const auto& shard : plan)
    for (std::size_t i : shard) seen.at(i)++;
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << i;
}

TEST(PlanShards, ShardsAreSortedByIdAndBalanced) {
  const auto items = random_items(300, 2);
  const auto plan = plan_shards(items, 5);
  double lo = 1e300, hi = 0, biggest = 0;
  for (const auto& it : items) biggest = std::max(biggest, it.cost);
  for (const auto& shard : plan) {
    for (std::size_t k = 1; k < shard.size(); ++k) EXPECT_LT(items[shard[k - 1]].id, items[shard[k]].id);
    lo = std::min(lo, load(items, shard));
    hi = std::max(hi, load(items, shard));
  }
  // LPT guarantee: no shard exceeds the lightest by more than the largest item.
  EXPECT_LE(hi - lo, biggest);
}

TEST(PlanShards, SamePlanWhateverTheInputOrder) {
  auto items = random_items(120, 3);
  const auto reference = plan_ids(items, 6);
  std::mt19937 rng(42);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(items.begin(), items.end(), rng);
    EXPECT_EQ(plan_ids(items, 6), reference) << "trial " << trial;
  }
}

TEST(PlanShards, MoreShardsThanItemsAndBadCounts) {
  const std::vector<ShardItem> items{{"a", 1}, {"b", 2}};
  const auto plan = plan_shards(items, 4);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0], (std::vector<std::size_t>{1}));
  EXPECT_EQ(plan[1], (std::vector<std::size_t>{0}));
  EXPECT_TRUE(plan[2].empty() && plan[3].empty());
  EXPECT_THROW(plan_shards(items, 0), std::invalid_argument);
  EXPECT_EQ(plan_shards({}, 3).size(), 3u);
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::path(testing::TempDir()) / ("opcts_times_" + name);
  std::ofstream(p) << text;
  return p;
}

TEST(TimesFile, ReadsAnObjectOfSeconds) {
  const auto p = write_file("ok.json", R"({"sdpa.cuda_flash/a": 1.5, "sdpa.cuda_flash/b": 0})");
  const auto t = read_times_file(p.string());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t.at("sdpa.cuda_flash/a"), 1.5);
  EXPECT_DOUBLE_EQ(t.at("sdpa.cuda_flash/b"), 0.0);
}

TEST(TimesFile, BadInputNamesTheFile) {
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{{"syntax.json", "{\"a\": "},
                                                                                   {"array.json", "[1, 2]"},
                                                                                   {"string.json", R"({"a": "fast"})"},
                                                                                   {"negative.json", R"({"a": -1})"}}) {
    const auto p = write_file(name, text);
    try {
      read_times_file(p.string());
      ADD_FAILURE() << "accepted " << name;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_times_file((fs::path(testing::TempDir()) / "opcts_no_such_times.json").string()),
               std::runtime_error);
}

TEST(ApplyTimes, KnownTimesWinAndEstimatesAreScaledByTheMedianRatio) {
  std::vector<ShardItem> items{{"a", 1}, {"b", 2}, {"c", 4}, {"d", 8}, {"e", 0.5}};
  // Ratios: a 3/1 = 3, b 8/2 = 4, e 0.5/0.5 = 1 -> median 3.
  apply_times(items, {{"a", 3.0}, {"b", 8.0}, {"e", 0.5}, {"not_in_plan", 100.0}});
  EXPECT_DOUBLE_EQ(items[0].cost, 3.0);
  EXPECT_DOUBLE_EQ(items[1].cost, 8.0);
  EXPECT_DOUBLE_EQ(items[2].cost, 12.0);
  EXPECT_DOUBLE_EQ(items[3].cost, 24.0);
  EXPECT_DOUBLE_EQ(items[4].cost, 0.5);
}

TEST(ApplyTimes, EvenCountMedianAndNoneKnown) {
  std::vector<ShardItem> items{{"a", 1}, {"b", 2}, {"c", 4}};
  apply_times(items, {{"a", 3.0}, {"b", 8.0}});  // ratios 3 and 4 -> 3.5
  EXPECT_DOUBLE_EQ(items[2].cost, 14.0);
  std::vector<ShardItem> unknown{{"x", 2}, {"y", 5}};
  apply_times(unknown, {});
  EXPECT_DOUBLE_EQ(unknown[0].cost, 2.0);
  EXPECT_DOUBLE_EQ(unknown[1].cost, 5.0);
}

TEST(EstimateSeconds, FollowsTheDocumentedModel) {
  EXPECT_DOUBLE_EQ(estimate_seconds(0, 0, false), 2e-3);
  EXPECT_DOUBLE_EQ(estimate_seconds(0, 0, true), 2e-3);
  EXPECT_NEAR(estimate_seconds(2e9, 0, false), 1.002, 1e-12);   // 2 GFLOP/s fp64 reference
  EXPECT_NEAR(estimate_seconds(0, 10e9, false), 1.002, 1e-12);  // 10 GB/s host streaming
  EXPECT_NEAR(estimate_seconds(50e12, 0, true) - estimate_seconds(50e12, 0, false), 1.0, 1e-9);
  EXPECT_NEAR(estimate_seconds(0, 1e12, true) - estimate_seconds(0, 1e12, false), 1.0, 1e-9);
  EXPECT_LT(estimate_seconds(1e9, 1e6, false), estimate_seconds(1e10, 1e6, false));
  EXPECT_DOUBLE_EQ(estimate_seconds(-5, -5, true), 2e-3);
}

}  // namespace
}  // namespace opcts
