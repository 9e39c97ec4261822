// Prints the reference time of a suite's problems computed (first run) against loaded from the on-disk cache (second
// run).
//
// Usage: opcts_bench_ref_cache [--tier smoke] [--filter GLOB]... [--limit N] [--dir DIR]
// Runs the workers' ReferenceCache over the selected host cases three times — without the disk
// cache (the baseline), with an empty cache folder (computes and stores), and again (loads) —
// and prints each run's total reference time (inputs + reference, as execute_case spends it).
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "app/builtins.hpp"
#include "runner/execute.hpp"

namespace fs = std::filesystem;
using namespace opcts;

namespace {

ReferenceCache::Stats pass(const std::vector<Case>& cases, const std::string& dir) {
  ReferenceCache cache(dir);
  for (const auto& c : cases) cache.get(c);
  return cache.stats();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reference time: computed vs loaded from the on-disk reference cache"};
  std::string tier = "smoke", dir;
  std::vector<std::string> filters;
  size_t limit = 0;
  app.add_option("--tier", tier, "smoke, default or full");
  app.add_option("--filter", filters, "glob over case ids (repeatable)");
  app.add_option("--limit", limit, "at most this many cases (0: all)");
  app.add_option("--dir", dir, "cache folder (default: a fresh temp folder, removed after)");
  CLI11_PARSE(app, argc, argv);
  SuiteOptions so;
  so.cases_dir = default_cases_dir();
  so.arch = "host";
  Suite suite(builtin_registry(), so);
  auto cases = select_cases(suite.all_cases(), parse_tier(tier), filters, {});
  if (limit && cases.size() > limit) cases.resize(limit);
  const bool temp = dir.empty();
  if (temp) dir = (fs::temp_directory_path() / ("opcts_ref_bench_" + std::to_string(getpid()))).string();
  fs::remove_all(dir);

  const auto base = pass(cases, "");
  const auto first = pass(cases, dir);
  const auto second = pass(cases, dir);
  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += e.file_size();
  std::printf("%zu cases (tier %s), %d problems\n", cases.size(), tier.c_str(), base.computed);
  std::printf("no disk cache   %10.1f ms  (%d computed)\n", base.ref_ms, base.computed);
  std::printf("first run       %10.1f ms  (%d computed and stored, %.1f MiB)\n", first.ref_ms, first.computed,
              static_cast<double>(bytes) / 1048576.0);
  std::printf("second run      %10.1f ms  (%d loaded, %d computed)\n", second.ref_ms, second.loaded, second.computed);
  std::printf("second / first  %10.3f  (%.1fx faster)\n", second.ref_ms / first.ref_ms, first.ref_ms / second.ref_ms);
  if (temp) fs::remove_all(dir);
  return second.computed == 0 ? 0 : 1;
}
