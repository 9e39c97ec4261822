// fp64 GEMM rate of each ISA level of the references' GEMM (refimpl/gemm.hpp) on this CPU:
// the "best fp64 GEMM found on the same CPU in the same run" that reference rates are held
// against (issue 16 items 1 and 4).
#pragma once

#include <chrono>
#include <cstdio>
#include <vector>

#include "refimpl/gemm.hpp"

namespace opcts_bench {

/// GFLOP/s of an n³ product in T (double or float) at `level` (the best of `reps` runs; 2n³
/// flops a run). Leaves the process's level at `level`.
template <class T = double>
inline double gemm_gflops(opcts::ref::IsaLevel level, int64_t n, int reps = 3) {
  opcts::ref::set_gemm_isa_level(level);
  std::vector<T> a(static_cast<size_t>(n * n)), b(a.size()), c(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>(i % 7) - T(3);
    b[i] = static_cast<T>(i % 5) - T(2);
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    opcts::ref::gemm<T>(n, n, n, {a.data(), n}, {b.data(), n}, c.data(), n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best / 1e9;
}

/// Prints each supported level's GFLOP/s at n³ and returns the best; the process's level is
/// left at the one it had.
inline double print_gemm_levels(int64_t n, int reps = 3) {
  const auto before = opcts::ref::gemm_isa_level();
  double best = 0;
  for (auto l : opcts::ref::supported_isa_levels()) {
    const double g = gemm_gflops(l, n, reps);
    std::printf("fp64 GEMM %ld^3 at %-10s %7.1f GFLOP/s\n", static_cast<long>(n), std::string(to_string(l)).c_str(), g);
    best = std::max(best, g);
  }
  opcts::ref::set_gemm_isa_level(before);
  return best;
}

}  // namespace opcts_bench
