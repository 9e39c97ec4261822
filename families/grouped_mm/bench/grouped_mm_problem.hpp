// A grouped-GEMM problem for families/grouped_mm/bench/grouped_mm_bench.cpp: device buffers generated in the code
// domain from a hash of each element's index (so a DeepSeek-V3 layer is made in seconds and any
// element can be recomputed on the host without a host copy), the family's problem they make, and
// any output element's reference as the wing gives it (grouped_mm::reference_element: the exact
// value and the statistics the family's bound is derived from). Layouts:
// families/grouped_mm/cuda/grouped_mm_kernels.hpp (this file re-derives them on the host from that documentation).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "families/grouped_mm/cuda/grouped_mm_kernels.hpp"
#include "families/grouped_mm/grouped_mm.hpp"

namespace opcts::bench {

/// What to generate. sizes: the groups' sizes along the split dimension (G = sizes.size(); for
/// 3d_3d, G = groups3d and sizes is unused); guard: elements of the split dimension past the
/// last offset (never owned by a group). m, n, k: the fixed sizes of the mode.
struct GroupedSpec {
  cuda::GroupedMode mode = cuda::GroupedMode::m2d_3d;
  cuda::GroupedRecipe recipe = cuda::GroupedRecipe::bf16;
  std::vector<int64_t> sizes;
  int64_t groups3d = 0, guard = 0;
  int64_t m = 0, n = 0, k = 0;
  uint64_t seed = 1;
};

/// The device buffers of a spec and the parameter struct that describes them (out filled with
/// 0xFF bytes, a bf16 NaN, so unwritten elements show).
class GroupedProblem {
 public:
  explicit GroupedProblem(const GroupedSpec& spec);
  ~GroupedProblem();
  GroupedProblem(const GroupedProblem&) = delete;
  GroupedProblem& operator=(const GroupedProblem&) = delete;

  const GroupedSpec& spec() const { return spec_; }
  /// The launch parameters (plant none); out points at this problem's output.
  const cuda::GroupedMmParams& params() const { return p_; }
  int64_t groups() const { return p_.groups; }
  int64_t out_elems() const { return out_elems_; }
  /// The offsets on the host (empty for 3d_3d).
  const std::vector<int32_t>& offs() const { return offs_; }
  /// Group g's [start, end) along the split dimension (3d_3d: [0, 0)).
  void range(int64_t g, int64_t& start, int64_t& end) const;
  /// Rows and columns of group g's output block, and its reduction length.
  void group_dims(int64_t g, int64_t& rows, int64_t& cols, int64_t& kg) const;
  /// Element index into out of group g's output (r, c).
  int64_t out_index(int64_t g, int64_t r, int64_t c) const;
  /// The family's problem of the spec (mode, recipe, groups and their sizes; the fp8 recipe is
  /// rowwise), whose reduction_shape states what every element's statistics share.
  grouped_mm::Problem family_problem() const;
  /// Group g's output (r, c) as the wing's reference gives it, from the dequantized operands.
  grouped_mm::ElementReference reference(int64_t g, int64_t r, int64_t c) const;
  /// Refills out with 0xFF bytes.
  void poison_out() const;
  /// A second output buffer of the same shape (for comparing two impls); freed with the problem.
  void* extra_out();

 private:
  double a_value(int64_t g, int64_t r, int64_t kk) const;  // dequantized, group-local coordinates
  double b_value(int64_t g, int64_t kk, int64_t c) const;
  // Element i of A's (operand_a) or B's codes, at group g's row/column idx and depth kk, dequantized.
  double dequant(bool operand_a, int64_t i, int64_t g, int64_t idx, int64_t kk) const;
  // mxfp8: the scale byte of group g's row/column idx at K block kb (grouped_mm_kernels.hpp).
  int64_t mx_at(bool operand_a, int64_t g, int64_t idx, int64_t kb) const;
  double row_scale(int64_t g, int64_t r) const;  // fp8_rowwise
  double col_scale(int64_t g, int64_t c) const;

  GroupedSpec spec_;
  cuda::GroupedMmParams p_;
  std::vector<int32_t> offs_;
  std::vector<int64_t> pad_before_;  // mxfp8: scale rows (M/N split) or columns (K split) before group g
  int64_t out_elems_ = 0;
  std::vector<void*> owned_;
};

/// Decodes an e4m3fn code (NaN for 0x7F / 0xFF).
double decode_e4m3(uint8_t c);
/// The bf16 value of 16 bits.
double bf16_value(uint16_t bits);

}  // namespace opcts::bench
