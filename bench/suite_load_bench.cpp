// Prints the suite's load time (bench/suite_load.hpp): the built-in catalogs for an arch, then
// with a synthetic sdpa grid of about 10,000 and 20,000 points added, so that a load that grows
// faster than linearly in a grid's points shows as a per-point cost that grows with the grid.
//
// Usage: opcts_bench_suite_load [--arch sm90] [--cases-dir DIR] [--reps 3]
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/builtins.hpp"
#include "bench/suite_load.hpp"

namespace {

// An sdpa grid of seqs × seqs × 5 head dims × 2 dtypes × 2 masks points (a PyTorch-like sweep).
std::string synthetic_grid(int seqs) {
  std::string s =
      "family: sdpa\ngrids:\n  - name: synthetic\n    tier: full\n    axes:\n      dtype: [bf16, fp16]\n"
      "      heads: [8]\n      seq: [";
  bool first = true;
  for (int q = 0; q < seqs; ++q)
    for (int k = 0; k < seqs; ++k) {
      s += std::string(first ? "" : ", ") + "{q: " + std::to_string(4 + 8 * q) + ", k: " + std::to_string(4 + 8 * k) +
           "}";
      first = false;
    }
  s += "]\n      head_dim: [8, 16, 32, 64, 128]\n      mask: [none, causal_lower_right]\n";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the suite's load time, phase by phase, and its growth with a grid's points"};
  std::string arch = "sm90", cases_dir = opcts::default_cases_dir();
  int reps = 3;
  app.add_option("--arch", arch, "arch whose impls the cases get");
  app.add_option("--cases-dir", cases_dir, "folder of built-in catalogs");
  app.add_option("--reps", reps, "runs of each load (the fastest is printed)");
  CLI11_PARSE(app, argc, argv);
  const opcts::Registry& reg = opcts::builtin_registry();
  opcts_bench::print_load(("built-in, " + arch).c_str(), opcts_bench::time_load(reg, cases_dir, arch, {}, reps));
  const auto dir = std::filesystem::temp_directory_path() / ("opcts_load_bench_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int seqs : {22, 32}) {  // 22² × 20 = 9,680 and 32² × 20 = 20,480 points
    const std::string path = (dir / ("grid" + std::to_string(seqs) + ".yaml")).string();
    std::ofstream(path) << synthetic_grid(seqs);
    const auto t = opcts_bench::time_load(reg, cases_dir, arch, {path}, reps);
    const auto base = opcts_bench::time_load(reg, cases_dir, arch, {}, 1);
    const double points = static_cast<double>(t.entries - base.entries);
    const std::string what = "+ grid of " + std::to_string(static_cast<long>(points)) + " points";
    opcts_bench::print_load(what.c_str(), t);
    std::printf("%-28s catalogs %.1f us per added point\n", "", 1e6 * (t.catalogs_s - base.catalogs_s) / points);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
