// The edge classes of docs/coverage.md that scatter_add's, index_add's and index_select's
// problems reach (`opcts list --coverage`).
#include <algorithm>
#include <string>
#include <vector>

#include "families/indexing/indexing.hpp"

namespace opcts::indexing {

namespace {

// The CUDA kernels' launch (families/indexing/cuda/indexing_device.cuh): 256 threads a block, at
// most 2^16 blocks, grid-stride loops over the work.
constexpr int64_t kThreads = 256, kMaxBlocks = int64_t{1} << 16;

}  // namespace

std::vector<std::string> edge_classes(Op op) {
  std::vector<std::string> out = {"partial tiles", "zero-size dimensions", "launch-grid limits",
                                  "32-bit offset overflow", "strides and alignment"};
  if (op != Op::index_select) {  // the sums' classes: a gather adds nothing
    out.push_back("16-bit atomics at edges");
    out.push_back("nondeterministic sums");
  }
  return out;
}

std::vector<std::string> edge_classes_of(const Problem& p) {
  std::vector<std::string> out;
  const bool gather = p.op == Op::index_select;
  // One thread per element written (a gather) or per term added (the atomics' src).
  const int64_t work = gather ? p.out_numel() : p.src_numel();
  if (work % kThreads != 0) out.push_back("partial tiles");
  if (p.outer == 0 || p.n == 0 || p.m == 0 || p.inner == 0) out.push_back("zero-size dimensions");
  if (work > kThreads * kMaxBlocks) out.push_back("launch-grid limits");  // a grid-stride loop's second pass
  const int64_t largest = std::max({p.self_numel(), p.src_numel(), p.out_numel(), p.index_numel()});
  if (largest >= (int64_t{1} << 31)) out.push_back("32-bit offset overflow");
  if (p.misalign) out.push_back("strides and alignment");
  if (!gather && (p.dtype == DType::fp16 || p.dtype == DType::bf16) && p.m > 0 &&
      (p.self_numel() % 2 != 0 || p.misalign || p.dist == Dist::all_first || p.dist == Dist::all_last))
    out.push_back("16-bit atomics at edges");  // a lone half of a 32-bit word, or every write on one element
  // Some destination takes two terms or more: more terms than rows, or a distribution that
  // piles them up (every index one row; Zipf's and MoE routing's heavy rows).
  const bool piles =
      p.dist == Dist::all_first || p.dist == Dist::all_last || p.dist == Dist::zipf || p.dist == Dist::routed;
  if (!gather && !p.integer() && p.m >= 2 && (p.m > p.n || piles)) out.push_back("nondeterministic sums");
  return out;
}

}  // namespace opcts::indexing
