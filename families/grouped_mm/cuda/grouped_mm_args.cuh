// The checks both grouped-GEMM launchers run (families/grouped_mm/cuda/grouped_mm_args.cu): the sizes
// of the tensors handed in against the mode, and the offsets' values.
#pragma once

#include <cstdint>
#include <vector>

#include "families/grouped_mm/cuda/grouped_mm_kernels.hpp"

namespace opcts::cuda::grouped {

/// A validated problem: the fixed sizes of the mode, the size of the split dimension and every
/// stride resolved (elements). m: rows of a group's A (2d_3d: ΣM allocated), n: columns of
/// out per group (3d_2d: ΣN), k: the reduction (2d_2d: ΣK).
struct Shape {
  int64_t m = 0, n = 0, k = 0;
  int64_t split = 0;  // the split dimension's size (0 for 3d_3d)
  int64_t lda = 0, a_bs = 0, ldb = 0, b_bs = 0, ldo = 0, o_bs = 0;
  int64_t mx_cols = 0;   // mxfp8: round_up(ceil(K/32), 4) for a fixed K (scale columns of a group)
  int64_t mx_width = 0;  // mxfp8 2d_2d: the K-split scale matrix's width ΣK/32 + 4·G
};

/// Throws GroupedArgumentError (the message prefixed by `who`) when the shapes, strides, group
/// count or scale counts disagree with the mode and recipe (grouped_mm_kernels.hpp).
Shape validate(const GroupedMmParams& p, const char* who);

/// What is wrong with the offsets, if anything: an index into offs and a kind.
struct OffsFault {
  enum Kind : int { none = 0, out_of_range = 1, decreasing = 2, misaligned = 3 };
  int64_t index = -1;
  Kind kind = none;
};

/// The first fault of offs (host copy) for a split of `split` elements and a multiple.
OffsFault find_offs_fault(const std::vector<int32_t>& offs, int64_t split, int64_t multiple);
/// The same, computed on the device from p.offs by one small kernel on a stream of its own (not
/// the stream handed to the launcher, which the ABI backend holds behind a gate until the call
/// returns), synchronised before it returns.
OffsFault find_offs_fault_device(const GroupedMmParams& p, int64_t split, int64_t multiple);
/// Throws GroupedArgumentError("offs", ...) describing `f` unless it is none.
void refuse_offs(const OffsFault& f, int64_t split, int64_t multiple, const char* who);

}  // namespace opcts::cuda::grouped
