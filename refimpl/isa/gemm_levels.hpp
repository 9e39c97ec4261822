// The per-level entry points of refimpl/isa/gemm_kernel.cpp, for the dispatcher (refimpl/gemm.cpp).
// Plain declarations only: this header is included by the per-level objects, which must define
// no symbol outside their own namespaces (tests/check_isa_objects.cmake checks).
#pragma once

#include <cstdint>

namespace opcts::ref::isa {

/// One product: C = op(A)·op(B) (+ C when accumulate); see refimpl/gemm.hpp.
template <class T>
struct GemmArgs {
  int64_t m, n, k;
  const T* a;
  int64_t lda;
  bool ta;
  const T* b;
  int64_t ldb;
  bool tb;
  T* c;
  int64_t ldc;
  bool accumulate;
};

#define OPCTS_ISA_DECLARE(L)                \
  namespace L {                             \
  void gemm_f64(const GemmArgs<double>& g); \
  void gemm_f32(const GemmArgs<float>& g);  \
  }
OPCTS_ISA_DECLARE(base)
OPCTS_ISA_DECLARE(v2)
OPCTS_ISA_DECLARE(v3)
OPCTS_ISA_DECLARE(v4)
#undef OPCTS_ISA_DECLARE

}  // namespace opcts::ref::isa
