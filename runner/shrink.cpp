// Shrinking a failing case (runner/shrink.hpp).
#include "runner/shrink.hpp"

#include <algorithm>
#include <chrono>
#include <regex>
#include <set>
#include <stdexcept>

#include "numerics/dtype.hpp"
#include "runner/execute.hpp"

namespace opcts {

std::string failure_signature(const ResultRecord& r) {
  std::set<std::string> kinds;
  for (const Failure& f : r.failures) kinds.insert(f.out + ":" + std::string(to_string(f.kind)));
  std::string s(to_string(r.raw_outcome));
  for (const auto& k : kinds) s += " " + k;
  return s;
}

std::vector<int64_t> shrink_candidates(int64_t v) {
  std::set<int64_t> c;
  auto add = [&](int64_t x) {
    if (x >= 0 && x < v) c.insert(x);
  };
  for (int64_t x = 0; x <= 3; ++x) add(x);
  for (int64_t p = 4; p < v; p *= 2) add(p - 1), add(p), add(p + 1);
  for (int64_t m : {16, 64, 128})
    for (int64_t x = m; x < v; x += m) add(x);
  add(v / 2);
  add(v - 1);
  return {c.begin(), c.end()};
}

namespace {

// Whether an id token names a type rather than a size: a dtype ("fp32", "bf16") or an index
// width ("i64"). Narrowing a type is another problem, not a smaller one.
bool names_a_type(const std::string& token) {
  if (token == "i32" || token == "i64") return true;
  try {
    parse_dtype(token);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// A run of the case in this process, as `opcts repro` runs it; a skipped or refused problem is
// no candidate (an empty signature).
ResultRecord run_here(const Suite& suite, const Case& c, int device, ReferenceCache& cache) {
  if (auto why = suite.skip_reason(c)) {
    ResultRecord r;
    r.raw_outcome = r.outcome = Outcome::SKIP;
    r.message = *why;
    return r;
  }
  return execute_case(suite, c, device, cache);
}

}  // namespace

ShrinkResult shrink_case(const Suite& suite, const std::string& id, int device, double seconds,
                         const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const auto left = [&] {
    return seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const Case first = case_from_id(suite.registry(), id);
  if (first.impl->backend() != suite.arch().backend)
    throw std::invalid_argument("shrink: impl " + std::string(first.impl->name()) + " does not run on " +
                                suite.arch().name);
  ReferenceCache cache;
  ShrinkResult out;
  out.original = out.shrunk = id;
  out.record = run_here(suite, first, device, cache);
  const std::string want = failure_signature(out.record);
  if (out.record.raw_outcome == Outcome::PASS || out.record.raw_outcome == Outcome::SKIP)
    throw std::invalid_argument("shrink: " + id + " does not fail (" + want + "): nothing to shrink");
  const std::string head = id.substr(0, id.find('/') + 1);
  // The tactic stays the same; a smaller problem that the impl runs without it fails to parse.
  const std::string tactic = first.tactic.empty() ? "" : "/" + first.tactic;
  std::string problem(split_case_id(id).problem_id);
  // A number of the id: a token's trailing digits after a letter ("sq77", "n4096", "g128").
  const std::regex number(R"((^|_)([a-z]+)(\d+)(?=_|$))");
  bool shrank = true;
  while (shrank && left() > 0) {
    shrank = false;
    std::vector<std::smatch> tokens;
    for (std::sregex_iterator it(problem.begin(), problem.end(), number), end; it != end; ++it) tokens.push_back(*it);
    for (const std::smatch& t : tokens) {
      if (names_a_type(t[2].str() + t[3].str())) continue;
      const int64_t v = std::stoll(t[3].str());
      const auto at = static_cast<size_t>(t.position(3));
      // The token left out first (an optional field's default: "_h2" → inner 1), then smaller
      // numbers in it.
      std::vector<std::string> nexts;
      const auto from = static_cast<size_t>(t.position(0)), len = static_cast<size_t>(t.length(0));
      std::string without = problem.substr(0, from) + problem.substr(from + len);
      if (from == 0 && !without.empty() && without[0] == '_') without.erase(0, 1);
      nexts.push_back(without);
      for (const int64_t cand : shrink_candidates(v))
        nexts.push_back(problem.substr(0, at) + std::to_string(cand) + problem.substr(at + t[3].length()));
      for (const std::string& next : nexts) {
        if (left() <= 0) break;
        Case c;
        try {
          c = case_from_id(suite.registry(), head + next + tactic);  // the contract and canonical spelling
        } catch (const std::exception&) {
          continue;
        }
        ++out.tried;
        ResultRecord r = run_here(suite, c, device, cache);
        if (failure_signature(r) != want) continue;
        problem = next;
        out.shrunk = head + next + tactic;
        out.record = std::move(r);
        if (progress) progress(out.shrunk);
        shrank = true;
        break;
      }
      if (shrank) break;  // the tokens moved: read them again
    }
  }
  out.out_of_time = left() <= 0;
  return out;
}

}  // namespace opcts
