// Shard planning: split cases over N shards so that every shard takes about the same time.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace opcts {

/// Shard `index` (1-based) of `count`.
struct ShardSpec {
  int index = 1;
  int count = 1;
};

/// The most shards a run may be split into: CI engines start at most a few hundred parallel
/// jobs (GitHub Actions 256 per matrix, GitLab `parallel:` 200), and the planner's memory and
/// time grow with N, so `--shard 1/2147483647` is a typo to refuse, not a plan to make.
inline constexpr int kMaxShards = 1024;

/// Parses "i/N" with 1 <= i <= N <= kMaxShards (decimal digits only); throws
/// std::invalid_argument quoting the text otherwise.
ShardSpec parse_shard(std::string_view text);

/// One case to place, with its cost in estimated (or measured) seconds.
struct ShardItem {
  std::string id;
  double cost = 0;
};

/// Deterministic longest-processing-time-first: items sorted by cost descending (ties by id
/// ascending), each given to the least-loaded shard (ties to the lowest shard index). Returns
/// `count` shards (0-based here) of indices into `items`, each sorted by id. The same set of
/// items gives the same plan whatever their order. Throws std::invalid_argument if count < 1.
std::vector<std::vector<std::size_t>> plan_shards(const std::vector<ShardItem>& items, int count);

/// Reads a test-times file: one JSON object {"case id": seconds, ...}. Throws
/// std::runtime_error naming the file when it cannot be read, is not a JSON object, or holds
/// a time that is not a finite number >= 0.
std::map<std::string, double> read_times_file(const std::string& path);

/// Items with a measured time take it. The rest keep their estimate scaled by the median of
/// (measured / estimate) over the measured items with a positive estimate (1 when there are
/// none), so measured and estimated costs are in the same units.
void apply_times(std::vector<ShardItem>& items, const std::map<std::string, double>& times);

/// Estimated seconds of one case, for balancing only (see the assumptions in plan.cpp):
/// `flops` and `bytes` are the operator's arithmetic and its inputs plus outputs.
double estimate_seconds(double flops, double bytes, bool on_gpu);

}  // namespace opcts
