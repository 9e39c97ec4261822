// SDPA forward: the problem type, its id and YAML forms, and the fp64 / same-precision references.
//
// Semantics (spec/numerics.md §5): O = softmax(scale·Q·Kᵀ + mask)·V per (batch, query head),
// query head h reads KV head h / (Hq/Hkv) (GQA, PyTorch enable_gqa), logsumexp is the natural
// log of Σ_j exp(scale·q_i·k_j) over the keys row i sees, fp32, [B, Hq, Sq]. A row that sees
// no key gives O = 0 and logsumexp = -inf (PyTorch ≥ 2.5 _safe_softmax, FlashAttention-3).
// Layout: Q [B, Hq, Sq, D]; K, V [B, Hkv, Sk, D]; O [B, Hq, Sq, D]; all contiguous (BHSD).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/family.hpp"

namespace opcts::sdpa {

enum class Mask {
  none,
  causal_upper_left,   // keep j <= i (PyTorch is_causal)
  causal_lower_right,  // keep j <= i + Sk - Sq (FlashAttention-2 causal, cuDNN BOTTOM_RIGHT)
};
std::string_view to_string(Mask m);
/// "none", "causal_upper_left", "causal_lower_right"; throws std::invalid_argument.
Mask parse_mask(std::string_view s);

struct Problem final : opcts::Problem {
  DType dtype = DType::bf16;
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t seq_q = 1;
  int64_t seq_k = 1;
  int64_t head_dim = 64;
  std::optional<double> scale;  // unset: 1/sqrt(head_dim)
  Mask mask = Mask::none;

  double effective_scale() const;
  /// Whether key j is visible to query row i under the mask.
  bool visible(int64_t i, int64_t j) const;
  /// The number of keys of row i: sum over j of visible(i, j), in O(1).
  int64_t keys_of_row(int64_t i) const;
  /// Throws std::invalid_argument naming the field: negative sizes, heads_q % heads_kv != 0, ...
  void validate() const;
};

/// "bf16_b2_hq32_hkv8_sq4096_sk4096_d128_causal_lr" (+ "_scale0p125" when the scale is set;
/// 'p' for the decimal point and 'm' for a minus sign keep the id a valid gtest name).
std::string problem_id(const Problem& p);
/// Inverse of problem_id; throws std::invalid_argument naming the token it cannot read.
Problem parse_problem_id(std::string_view id);

/// Shapes of the tensors.
std::vector<int64_t> q_shape(const Problem& p);
std::vector<int64_t> kv_shape(const Problem& p);
std::vector<int64_t> lse_shape(const Problem& p);

/// The fp64 reference on inputs q, k, v (any dtype; their rounded values are used):
/// scores, softmax and both products in double with Eigen, (batch, head) pairs in parallel
/// with OpenMP, a fixed summation order. Outputs "O" and "lse", row-major.
References reference(const Problem& p, const TensorMap& inputs);

}  // namespace opcts::sdpa

namespace opcts {
/// Registers the sdpa family (problem parsing, ids, inputs, references).
void register_sdpa_family(Registry& reg);
}  // namespace opcts
