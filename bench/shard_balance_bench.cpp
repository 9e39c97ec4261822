// Prints max/mean shard time for N shards planned from the cost estimate vs from a times file of measured case times.
//
// Usage: opcts_bench_shards --arch ARCH --results REPORT [--tier T] [--filter GLOB]... [--shards N]
// REPORT (results .jsonl or JUnit .xml, e.g. from `opcts run --results`) holds the measured time
// of each case; it is both the "truth" every plan is scored against and, written out as a
// times file ({case id: seconds}, what `opcts report times` writes), the input of the second plan.
// A shard's time is the sum of the measured times of its cases (cases the report lacks are left
// out). Worker start-up and reference sharing are not modelled.
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "app/builtins.hpp"
#include "reports/merge.hpp"
#include "reports/summary.hpp"
#include "reports/times.hpp"
#include "runner/catalog.hpp"
#include "runner/shard_cases.hpp"
#include "runner/suite.hpp"

namespace {

struct Balance {
  double max = 0, mean = 0;
  std::vector<double> shard_s;
};

Balance score(const std::vector<opcts::Case>& cases, int shards, const std::string& times_file, bool gpu,
              const std::map<std::string, double>& truth) {
  Balance b;
  for (int i = 1; i <= shards; ++i) {
    double t = 0;
    for (const auto& c : opcts::shard_cases(cases, {i, shards}, times_file, gpu)) {
      const auto it = truth.find(c.id);
      if (it != truth.end()) t += it->second;
    }
    b.shard_s.push_back(t);
  }
  b.max = *std::max_element(b.shard_s.begin(), b.shard_s.end());
  b.mean = std::accumulate(b.shard_s.begin(), b.shard_s.end(), 0.0) / shards;
  return b;
}

void print(const char* what, const Balance& b) {
  std::printf("%-22s max %8.3f s  mean %8.3f s  max/mean %.3f  shards:", what, b.max, b.mean,
              b.mean > 0 ? b.max / b.mean : 0.0);
  for (double s : b.shard_s) std::printf(" %.2f", s);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shard balance: cost estimate vs measured times"};
  std::string arch, results, tier = "default", cases_dir = opcts::default_cases_dir();
  std::vector<std::string> filters;
  int shards = 8;
  app.add_option("--arch", arch, "arch whose cases are planned")->required();
  app.add_option("--results", results, "report with measured case times")->required();
  app.add_option("--tier", tier, "tier of the plan");
  app.add_option("--filter", filters, "glob over case ids (repeatable)");
  app.add_option("--shards", shards, "shard count")->check(CLI::PositiveNumber);
  app.add_option("--cases-dir", cases_dir, "cases folder");
  CLI11_PARSE(app, argc, argv);
  try {
    opcts::SuiteOptions so{cases_dir, {}, arch, ""};
    opcts::Suite suite(opcts::builtin_registry(), so);
    auto cases = opcts::select_cases(suite.all_cases(), opcts::parse_tier(tier), filters, {});
    const auto all_times = opcts::times_by_arch(opcts::load_reports({results}));
    if (!all_times.count(arch)) throw std::runtime_error("no results of arch " + arch + " in " + results);
    const auto& truth = all_times.at(arch);
    // Cases the report lacks (a catalog newer than the report) are left out of both plans, so
    // that no shard holds work the score cannot see.
    const std::size_t planned = cases.size();
    std::erase_if(cases, [&](const opcts::Case& c) { return !truth.count(c.id); });
    const std::size_t unknown = planned - cases.size();
    const auto tmp =
        std::filesystem::temp_directory_path() / ("opcts_bench_times_" + std::to_string(getpid()) + ".json");
    opcts::write_text_file(tmp.string(), opcts::times_json(truth));
    const bool gpu = suite.arch().backend != "host";
    double total = 0, biggest = 0;
    for (const auto& c : cases)
      if (truth.count(c.id)) total += truth.at(c.id), biggest = std::max(biggest, truth.at(c.id));
    std::printf(
        "arch %s, tier %s, %zu cases (%zu more without a measured time left out), %d shards, %.3f s measured in all, "
        "slowest case %.3f s\n",
        arch.c_str(), tier.c_str(), cases.size(), unknown, shards, total, biggest);
    print("cost estimate:", score(cases, shards, "", gpu, truth));
    print("times file:", score(cases, shards, tmp.string(), gpu, truth));
    std::printf("ideal (mean):          %8.3f s\n", total / shards);
    std::filesystem::remove(tmp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opcts_bench_shards: %s\n", e.what());
    return 2;
  }
  return 0;
}
