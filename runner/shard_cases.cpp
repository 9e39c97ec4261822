// Problem-grouped shard selection on top of the LPT planner.
#include "runner/shard_cases.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace opcts {

namespace {

std::string problem_key(const Case& c) { return std::string(c.family->name()) + "/" + c.family->problem_id(*c.problem); }

struct Groups {
  std::vector<std::string> keys;
  std::vector<std::vector<const Case*>> members;
};

Groups group(const std::vector<Case>& cases) {
  std::map<std::string, std::vector<const Case*>> by_key;
  for (const auto& c : cases) by_key[problem_key(c)].push_back(&c);
  Groups g;
  for (auto& [k, v] : by_key) {
    std::sort(v.begin(), v.end(), [](const Case* a, const Case* b) { return a->id < b->id; });
    g.keys.push_back(k);
    g.members.push_back(std::move(v));
  }
  return g;
}

std::vector<std::vector<size_t>> plan(const Groups& g, int count, const std::string& times_file, bool on_gpu) {
  std::vector<ShardItem> items;
  for (size_t i = 0; i < g.keys.size(); ++i) {
    const Case& c = *g.members[i].front();
    const Cost cost = c.family->cost(*c.problem);
    // The reference runs once per problem; each impl adds its own device time.
    const double ref = estimate_seconds(cost.flops, cost.bytes, false);
    const double dev = on_gpu ? estimate_seconds(cost.flops, cost.bytes, true) - ref : ref;
    items.push_back({g.keys[i], ref + dev * static_cast<double>(g.members[i].size())});
  }
  if (!times_file.empty()) {
    const auto case_times = read_times_file(times_file);
    std::map<std::string, double> group_times;
    for (size_t i = 0; i < g.keys.size(); ++i) {
      double sum = 0;
      bool all = true;
      for (const Case* c : g.members[i]) {
        auto it = case_times.find(c->id);
        if (it == case_times.end()) {
          all = false;
          break;
        }
        sum += it->second;
      }
      if (all) group_times[g.keys[i]] = sum;
    }
    apply_times(items, group_times);
  }
  return plan_shards(items, count);
}

}  // namespace

std::vector<Case> shard_cases(const std::vector<Case>& cases, ShardSpec spec, const std::string& times_file,
                              bool on_gpu) {
  if (spec.count == 1 && times_file.empty()) {
    std::vector<Case> out = cases;
    std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) {
      const auto ka = problem_key(a), kb = problem_key(b);
      return ka != kb ? ka < kb : a.id < b.id;
    });
    return out;
  }
  const Groups g = group(cases);
  const auto shards = plan(g, spec.count, times_file, on_gpu);
  std::vector<Case> out;
  for (size_t gi : shards.at(spec.index - 1))
    for (const Case* c : g.members[gi]) out.push_back(*c);
  return out;
}

}  // namespace opcts
