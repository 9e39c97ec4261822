// Eigen's GEMM for one ISA level. CMake compiles this file once per level with
// -DOPCTS_ISA=<level> -march=<level> -DEigen=opcts_eigen_<level> (cmake/isa_levels.cmake):
// renaming Eigen's namespace gives every template instance of this level its own symbols, so the
// linker cannot fold a v4 instance into the base code path (an illegal instruction on a CPU
// without AVX-512) or the reverse. Nothing here may use a library template that emits an
// out-of-line symbol of its own (std::vector, std::string, ...): that one would be shared.
#ifndef OPCTS_ISA
#error "compiled once per ISA level by cmake/isa_levels.cmake, with OPCTS_ISA set"
#endif

#include "numerics/x86_intrinsics.hpp"  // first: GCC 12's avx512fintrin.h false positive, silenced there

// Every product through Eigen's blocked GEMM (or its GEMV for a vector), never its
// coefficient-based product for small sizes (m + n + k < 20 by default): that one sums each dot
// product in an order set by the operands' addresses (its vector loop starts at the first
// 64-byte-aligned element), so the same product gave different last bits from one allocation to
// the next, and two heads of a GQA group with equal inputs could differ
// (families/sdpa/tests/test_sdpa.cpp GqaUsesHeadDivRatio, once the references ran row blocks of 5 keys).
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0
#include <Eigen/Core>

#include "refimpl/isa/gemm_levels.hpp"

namespace opcts::ref::isa::OPCTS_ISA {

namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using View = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;

template <class T, class A, class B>
void store(const GemmArgs<T>& g, const A& a, const B& b) {
  Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>> c(g.c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
  if (g.accumulate) c.noalias() += a * b;
  else c.noalias() = a * b;
}

template <class T>
void run(const GemmArgs<T>& g) {
  const View<T> a(g.a, g.ta ? g.k : g.m, g.ta ? g.m : g.k, Eigen::OuterStride<>(g.lda));
  const View<T> b(g.b, g.tb ? g.n : g.k, g.tb ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
  if (g.ta && g.tb) store(g, a.transpose(), b.transpose());
  else if (g.ta) store(g, a.transpose(), b);
  else if (g.tb) store(g, a, b.transpose());
  else store(g, a, b);
}

}  // namespace

void gemm_f64(const GemmArgs<double>& g) { run(g); }
void gemm_f32(const GemmArgs<float>& g) { run(g); }

}  // namespace opcts::ref::isa::OPCTS_ISA
