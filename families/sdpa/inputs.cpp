// sdpa inputs: q, k, v (and dO) N(0, 1) in the problem's dtype and layout, the attn_mask by the boolean rule, and NaN
// in the keys and values no query sees where the problem poisons them (sdpa.hpp, "Inputs").
#include <algorithm>
#include <limits>

#include "families/sdpa/sdpa.hpp"
#include "numerics/rng.hpp"

namespace opcts::sdpa {

namespace {

// The boolean rule of the attn_mask inputs (sdpa.hpp): row i ≡ 3 (mod 8) fully masked, every
// other element kept with probability 0.8, element e of the mask tensor drawing stream 4.
bool mask_keeps(uint64_t seed, int64_t e, int64_t row) { return row % 8 != 3 && uniform01(seed, 4, e) < 0.8; }

}  // namespace

TensorMap make_inputs(const Problem& p, uint64_t seed) {
  TensorMap in;
  in.emplace("q", HostTensor(p.dtype, q_shape(p)));
  in.emplace("k", HostTensor(p.dtype, k_shape(p)));
  in.emplace("v", HostTensor(p.dtype, v_shape(p)));
  // Standard normal q, k, v: with the default scale the scores are about N(0, 1), as in
  // trained models' attention, and V rows of unit size keep O's error visible.
  fill_normal(in.at("q"), seed, 0, 1.0);
  fill_normal(in.at("k"), seed, 1, 1.0);
  fill_normal(in.at("v"), seed, 2, 1.0);
  if (p.direction == Direction::backward) {
    in.emplace("dO", HostTensor(p.dtype, o_shape(p)));
    fill_normal(in.at("dO"), seed, 3, 1.0);
  }
  if (p.mask_tensor != MaskTensor::none) {
    const bool boolean = p.mask_tensor == MaskTensor::boolean;
    HostTensor m(boolean ? DType::bool8 : p.dtype, mask_shape(p));
    if (!boolean) fill_normal(m, seed, 5, 1.0);
    const int64_t n = m.numel();
    for (int64_t e = 0; e < n; ++e) {
      const int64_t row = (e / std::max<int64_t>(p.seq_k, 1)) % std::max<int64_t>(p.seq_q, 1);
      const bool keep = mask_keeps(seed, e, row);
      if (boolean) m.set(e, keep ? 1.0 : 0.0);
      else if (!keep) m.set(e, -std::numeric_limits<double>::infinity());
    }
    in.emplace("attn_mask", std::move(m));
  }
  if (p.varlen()) {
    for (const auto& [name, lens] :
         {std::pair{"cu_seqlens_q", &p.seqlens_q}, std::pair{"cu_seqlens_k", &p.seqlens_k}}) {
      const std::vector<int64_t> cu = cu_seqlens(*lens);
      HostTensor t(DType::int32, {static_cast<int64_t>(cu.size())});
      for (size_t b = 0; b < cu.size(); ++b) t.set(static_cast<int64_t>(b), static_cast<double>(cu[b]));
      in.emplace(name, std::move(t));
    }
  }
  if (p.poison_masked) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Strides ks = k_strides(p), vs = v_strides(p);
    // A varlen sequence's keys are packed rows cu_seqlens_k[b] + j (ks.batch is 0 there).
    const std::vector<int64_t> cu_k = p.varlen() ? cu_seqlens(p.seqlens_k) : std::vector<int64_t>();
    for (int64_t b = 0; b < p.batch; ++b) {
      const auto unseen = unseen_keys(p.sequence(b));
      const int64_t row0 = p.varlen() ? cu_k[b] : 0;
      for (int64_t h = 0; h < p.heads_kv; ++h)
        for (size_t j = 0; j < unseen.size(); ++j) {
          if (!unseen[j]) continue;
          const int64_t row = row0 + static_cast<int64_t>(j);
          for (int64_t d = 0; d < p.head_dim; ++d) in.at("k").set(ks.at(b, h, row) + d, nan);
          for (int64_t d = 0; d < p.head_dim_v; ++d) in.at("v").set(vs.at(b, h, row) + d, nan);
        }
    }
  }
  return in;
}

}  // namespace opcts::sdpa
