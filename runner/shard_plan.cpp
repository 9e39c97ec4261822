// Time-balanced shard plans: LPT over measured or estimated case costs.
#include "runner/shard_plan.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

namespace opcts {

namespace {

bool parse_positive(std::string_view s, int& v) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

ShardSpec parse_shard(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("invalid shard '" + std::string(text) + "': " + why);
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) throw bad("expected i/N, e.g. 1/4");
  ShardSpec s;
  if (!parse_positive(text.substr(0, slash), s.index) || !parse_positive(text.substr(slash + 1), s.count))
    throw bad("expected i/N with decimal integers, e.g. 1/4, N at most " + std::to_string(kMaxShards));
  if (s.count < 1) throw bad("the shard count N must be at least 1");
  if (s.count > kMaxShards) throw bad("the shard count N must be at most " + std::to_string(kMaxShards));
  if (s.index < 1 || s.index > s.count) throw bad("the shard index i must satisfy 1 <= i <= N");
  return s;
}

std::vector<std::vector<std::size_t>> plan_shards(const std::vector<ShardItem>& items, int count) {
  if (count < 1) throw std::invalid_argument("plan_shards: shard count must be >= 1, got " + std::to_string(count));
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Cost descending, then id ascending; equal (cost, id) pairs are interchangeable.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(items[b].cost, items[a].id) < std::tie(items[a].cost, items[b].id);
  });
  std::vector<std::vector<std::size_t>> shards(static_cast<std::size_t>(count));
  std::vector<double> load(shards.size(), 0.0);
  for (std::size_t i : order) {
    // min_element returns the first minimum: ties go to the lowest shard index.
    const auto s = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shards[s].push_back(i);
    load[s] += items[i].cost;
  }
  for (auto& shard : shards)
    std::stable_sort(shard.begin(), shard.end(),
                     [&](std::size_t a, std::size_t b) { return items[a].id < items[b].id; });
  return shards;
}

std::map<std::string, double> read_times_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open test-times file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw std::runtime_error(path + ": expected a JSON object {\"case id\": seconds, ...}");
  std::map<std::string, double> out;
  for (const auto& [id, v] : j.items()) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw std::runtime_error(path + ": time of '" + id + "' is not a number of seconds >= 0: " + v.dump());
    out[id] = v.get<double>();
  }
  return out;
}

void apply_times(std::vector<ShardItem>& items, const std::map<std::string, double>& times) {
  std::vector<double> ratios;
  for (const auto& item : items) {
    const auto it = times.find(item.id);
    if (it != times.end() && item.cost > 0) ratios.push_back(it->second / item.cost);
  }
  const double scale = ratios.empty() ? 1.0 : median(ratios);
  for (auto& item : items) {
    const auto it = times.find(item.id);
    item.cost = it != times.end() ? it->second : item.cost * scale;
  }
}

double estimate_seconds(double flops, double bytes, bool on_gpu) {
  flops = std::max(flops, 0.0);
  bytes = std::max(bytes, 0.0);
  // Per case: worker bookkeeping, allocations, result line; ~2 ms measured order of magnitude.
  constexpr double kOverheadS = 2e-3;
  // The fp64 reference runs on the CPU for every case, GPU or not: plain loops with fp64
  // accumulation reach ~2 GFLOP/s on one core.
  constexpr double kRefFlopsPerS = 2e9;
  // Input generation (counter-based RNG, quantization) and the comparison stream every byte
  // a few times: ~10 GB/s.
  constexpr double kHostBytesPerS = 10e9;
  // Device time, conservatively: 50 TFLOP/s and 1 TB/s (far below peak on any target arch;
  // small cases are launch-bound anyway). Uploads and downloads are in the host byte term.
  constexpr double kDeviceFlopsPerS = 50e12;
  constexpr double kDeviceBytesPerS = 1e12;
  double s = kOverheadS + flops / kRefFlopsPerS + bytes / kHostBytesPerS;
  if (on_gpu) s += flops / kDeviceFlopsPerS + bytes / kDeviceBytesPerS;
  return s;
}

}  // namespace opcts
