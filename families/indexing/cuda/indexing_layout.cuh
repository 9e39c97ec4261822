// The indexing kernels' per-element address arithmetic as plain __host__ __device__ C++, so the CPU tests run it
// (families/indexing/tests/test_indexing_layout.cpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define OPCTS_IDX_HD __host__ __device__ __forceinline__
#else
#define OPCTS_IDX_HD inline
#endif

namespace opcts::cuda::layout {

/// Term t of [outer, m, inner] (t = (o·m + j)·inner + k): its o, j, k.
struct Term {
  int64_t o, j, k;
};
OPCTS_IDX_HD Term term_of(int64_t t, int64_t m, int64_t inner) {
  const int64_t k = t % inner, oj = t / inner;
  return {oj / m, oj % m, k};
}

/// The element of out [outer, n, inner] a term lands on, given its index value.
OPCTS_IDX_HD int64_t destination(const Term& t, int64_t index, int64_t n, int64_t inner) {
  return (t.o * n + index) * inner + t.k;
}

/// index_select's source offset of out element (o, j, k) reading row `row` of input
/// [outer, n, inner]: 64-bit, or (the planted bug) 32-bit unsigned arithmetic that wraps past
/// 2^32 elements.
OPCTS_IDX_HD int64_t gather_offset(int64_t o, int64_t row, int64_t k, int64_t n, int64_t inner, bool offsets32) {
  if (offsets32) {
    const uint32_t r = static_cast<uint32_t>(o) * static_cast<uint32_t>(n) + static_cast<uint32_t>(row);
    return static_cast<int64_t>(r * static_cast<uint32_t>(inner) + static_cast<uint32_t>(k));
  }
  return (o * n + row) * inner + k;
}

/// PyTorch's fastSpecializedAtomicAdd choice for a 16-bit element e of a tensor of `numel`
/// elements whose address is 4-byte aligned or not: the pair starting at e (e, e + 1) with 0
/// added to e + 1, the pair ending at e (e − 1, e) with 0 added to e − 1, or the scalar atomic
/// at an end where the pair would leave the tensor. `no_ends_check` is the planted bug.
enum class Pair { starts_here, ends_here, scalar };
OPCTS_IDX_HD Pair pair_of(int64_t e, int64_t numel, bool aligned4, bool no_ends_check) {
  if (aligned4 && (no_ends_check || e < numel - 1)) return Pair::starts_here;
  if (!aligned4 && (no_ends_check || e > 0)) return Pair::ends_here;
  return Pair::scalar;
}

}  // namespace opcts::cuda::layout
