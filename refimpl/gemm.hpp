// The references' dense products: one GEMM, compiled for several x86-64 ISA levels and
// dispatched at run time on the CPU found (issue 16 item 1).
//
// The fp64 (and fp32 same-precision) reference GEMMs are Eigen's; built for the x86-64
// baseline (SSE2, no FMA) they run at a fifth of what the same code reaches with AVX-512 on
// the development machine (11.9 vs 53.4 GFLOP/s at 1536³ on 2 cores). refimpl/isa/gemm_kernel.cpp
// is compiled once per level (base, x86-64-v2, v3, v4: separate objects, Eigen's namespace
// renamed per level so that no template instance of one level can stand in for another's) and
// gemm() calls the best level the CPU supports. What the product computes does not change: the
// same sums of the same products; only the order and fusing of the roundings (FMA, vector
// width) differ between levels, so a product whose every partial sum is exact in T is
// bit-identical at every level and any other stays within the classic bound
// |ĉ − c| <= γ_K·Σ|a||b| (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
// §3.5) of the exact product (tests/test_gemm.cpp checks both at every level the CPU has).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace opcts::ref {

/// The ISA levels a kernel is built for, in increasing order (x86-64 psABI micro-architecture
/// levels; `base` is the x86-64 baseline the rest of the build uses).
enum class IsaLevel { base, v2, v3, v4 };

/// "base", "x86-64-v2", "x86-64-v3", "x86-64-v4".
std::string_view to_string(IsaLevel l);
/// Inverse of to_string, also "v2", "v3", "v4"; throws std::invalid_argument.
IsaLevel parse_isa_level(std::string_view s);

/// The levels this CPU can run (always base), in increasing order.
std::vector<IsaLevel> supported_isa_levels();

/// The level gemm() runs: $OPCTS_REF_ISA when set (an unsupported or unknown level is an
/// error: std::invalid_argument at the first gemm), else the best level of this CPU.
IsaLevel gemm_isa_level();
/// Overrides the level for the whole process (tests, benchmarks); throws std::invalid_argument
/// when the CPU does not support it.
void set_gemm_isa_level(IsaLevel l);

/// A row-major operand: element (i, j) of op(X) is x[i·ld + j], or x[j·ld + i] when transposed.
template <class T>
struct GemmOperand {
  const T* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
};

/// C[m, n] (row-major, leading dimension ldc) = op(A)[m, k]·op(B)[k, n], or C += that when
/// `accumulate`. Operands must not alias C. T is double or float. Threads: Eigen's OpenMP
/// GEMM outside a parallel region, one thread inside one (as before the dispatch).
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c, int64_t ldc,
          bool accumulate = false);

/// The flops (2·m·n·k a call) of every gemm() this process has run, by type: benchmarks take
/// the difference around a reference to tell what share of its time its products take at the
/// CPU's GEMM rate (bench/suite_bench.cpp).
struct GemmFlops {
  uint64_t f64 = 0, f32 = 0;
};
GemmFlops gemm_flops();

}  // namespace opcts::ref
