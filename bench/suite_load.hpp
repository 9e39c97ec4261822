// The suite's load time, phase by phase, for opcts_bench_suite_load and opcts_bench_suite.
//
// Every opcts process (each CTest shard, `list`, `gate`, `ctest-tests`) loads and expands the
// catalogs before it does anything else (issue 16 item 5: the whole suite at 20,000+ cases in
// <= 0.5 s). The phases timed: reading and expanding the catalogs (load_catalogs), attaching the
// impls of an arch (make_cases), the 1/1 shard order every selection goes through
// (shard_cases), and the whole Suite (archs, tolerances, manifest and the three before).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runner/catalog.hpp"
#include "runner/shard_cases.hpp"
#include "runner/suite.hpp"

namespace opcts_bench {

/// Seconds since `t0`.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One load of `paths` for `arch`, phase by phase (seconds) and the number of cases.
struct LoadTimes {
  double catalogs_s = 0, cases_s = 0, order_s = 0, suite_s = 0;
  size_t entries = 0, cases = 0;
};

/// Times loading the built-in catalogs in `cases_dir` plus `extra` catalog files for `arch`,
/// planted impls included; the best of `reps` runs of each phase (the load is deterministic, so
/// the minimum is its cost without the noise of a shared machine).
inline LoadTimes time_load(const opcts::Registry& reg, const std::string& cases_dir, const std::string& arch,
                           const std::vector<std::string>& extra, int reps = 3) {
  using clock = std::chrono::steady_clock;
  LoadTimes best;
  for (int r = 0; r < reps; ++r) {
    LoadTimes t;
    opcts::SuiteOptions opt;
    opt.cases_dir = cases_dir;
    opt.arch = arch;
    opt.catalogs = extra;
    opt.include_planted = true;
    auto t0 = clock::now();
    const opcts::Suite suite(reg, opt);
    t.suite_s = seconds_since(t0);
    std::vector<std::string> paths{cases_dir};
    paths.insert(paths.end(), extra.begin(), extra.end());
    t0 = clock::now();
    const auto entries = opcts::load_catalogs(reg, paths);
    t.catalogs_s = seconds_since(t0);
    t0 = clock::now();
    const auto cases = opcts::make_cases(reg, entries, suite.arch(), true);
    t.cases_s = seconds_since(t0);
    t0 = clock::now();
    const auto ordered = opcts::shard_cases(cases, {1, 1}, "", false);
    t.order_s = seconds_since(t0);
    t.entries = entries.size();
    t.cases = ordered.size();
    if (r == 0 || t.suite_s + t.order_s < best.suite_s + best.order_s) best = t;
  }
  return best;
}

/// One line: what was loaded, its size and each phase in ms.
inline void print_load(const char* what, const LoadTimes& t) {
  std::printf(
      "%-28s %6zu problems %6zu cases  catalogs %7.1f ms  cases %6.1f ms  order %6.1f ms  "
      "suite+order %7.1f ms\n",
      what, t.entries, t.cases, 1e3 * t.catalogs_s, 1e3 * t.cases_s, 1e3 * t.order_s, 1e3 * (t.suite_s + t.order_s));
}

}  // namespace opcts_bench
