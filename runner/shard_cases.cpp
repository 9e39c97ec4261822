// Problem-grouped shard selection on top of the LPT planner.
#include "runner/shard_cases.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace opcts {

namespace {

// "<family>/<problem id>": the case id without its impl and tactic. A case id is
// "<family>.<impl>/<problem id>[/<tactic>]" (case_id) and a problem id holds no '/', so the key is
// cut from the id rather than rendered again (rendering it per comparison made ordering the suite
// most of its load time).
std::string problem_key(const Case& c) {
  const auto slash = c.id.find('/');
  if (slash == std::string::npos) return std::string(c.family->name()) + "/" + c.family->problem_id(*c.problem);
  return std::string(c.family->name()) + c.id.substr(slash, c.id.find('/', slash + 1) - slash);
}

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
    // Each key once, then the order of the indices: O(n log n) comparisons, n keys.
    std::vector<std::string> keys;
    keys.reserve(cases.size());
    for (const auto& c : cases) keys.push_back(problem_key(c));
    std::vector<size_t> order(cases.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return keys[a] != keys[b] ? keys[a] < keys[b] : cases[a].id < cases[b].id; });
    std::vector<Case> out;
    out.reserve(cases.size());
    for (size_t i : order) out.push_back(cases[i]);
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
