// Prints the references' fp64 GEMM rate at every ISA level this CPU supports (bench/gemm_peak.hpp)
// and which level the dispatcher picks.
//
// Usage: opcts_bench_ref_gemm [--n 1536] [--reps 3]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "bench/gemm_peak.hpp"

int main(int argc, char** argv) {
  CLI::App app{"the references' fp64 GEMM rate per ISA level"};
  int64_t n = 1536;
  int reps = 3;
  app.add_option("--n", n, "matrix size (n x n times n x n)");
  app.add_option("--reps", reps, "runs per level (the fastest is printed)");
  CLI11_PARSE(app, argc, argv);
  std::printf("dispatcher picks %s\n", std::string(opcts::ref::to_string(opcts::ref::gemm_isa_level())).c_str());
  const double best = opcts_bench::print_gemm_levels(n, reps);
  std::printf("best %.1f GFLOP/s\n", best);
  return 0;
}
