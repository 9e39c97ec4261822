// The SDPA references run a head by blocks of 128 query rows and the keys those rows see
// (families/sdpa/detail.hpp RowBlock). Shown three ways on problems of several blocks, causal in
// both alignments and windowed: the blocks cover every visible key and nothing else of a row;
// the fp64 forward and backward equal a naive one written from the definition (the forward
// also with a softcap, attn_masks, poison and BSHD storage); and every
// reference (fp64, the fp32 pipeline, its bounds) equals the reference of the same masking given
// as data (a boolean attn_mask, so that every block reads every key).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "families/sdpa/detail.hpp"
#include "families/sdpa/tests/test_sdpa_util.hpp"

namespace opcts {
namespace {

using sdpa::Mask;
using sdpatest::at;
using sdpatest::make;

std::vector<sdpa::Problem> blocked_problems() {
  std::vector<sdpa::Problem> v;
  v.push_back(make(DType::fp32, 1, 2, 1, 300, 300, 16, Mask::causal_upper_left));
  v.push_back(make(DType::fp32, 1, 2, 2, 260, 530, 16, Mask::causal_upper_left));   // keys past every row
  v.push_back(make(DType::fp32, 1, 4, 2, 530, 260, 16, Mask::causal_lower_right));  // rows that see no key
  v.push_back(make(DType::fp32, 2, 2, 1, 300, 400, 8, Mask::causal_lower_right));
  auto w = make(DType::fp32, 1, 2, 1, 400, 400, 8, Mask::none);
  w.window_left = 70, w.window_right = 5;  // blocks whose keys start after key 0
  v.push_back(w);
  v.push_back(make(DType::fp32, 1, 2, 2, 257, 190, 8, Mask::none));  // a last block of one row
  return v;
}

TEST(SdpaRowBlocks, CoverEveryVisibleKeyTightly) {
  std::vector<sdpa::Problem> ps = blocked_problems();
  ps.push_back(make(DType::bf16, 1, 1, 1, 0, 9, 8, Mask::causal_lower_right));
  ps.push_back(make(DType::bf16, 1, 1, 1, 200, 0, 8, Mask::none));
  for (const sdpa::Problem& p : ps) {
    int64_t next = 0;
    for (const auto& blk : sdpa::detail::row_blocks(p)) {
      ASSERT_EQ(blk.r0, next) << sdpa::problem_id(p);
      ASSERT_GE(blk.rows, 1);
      ASSERT_LE(blk.rows, sdpa::detail::kBlockRows);
      next += blk.rows;
      int64_t lo = p.seq_k, hi = 0;
      for (int64_t i = blk.r0; i < blk.r0 + blk.rows; ++i)
        for (int64_t j = 0; j < p.seq_k; ++j)
          if (p.visible(i, j)) lo = std::min(lo, j), hi = std::max(hi, j + 1);
      if (hi == 0) EXPECT_EQ(blk.keys, 0) << sdpa::problem_id(p) << " rows " << blk.r0;
      else EXPECT_TRUE(blk.k0 == lo && blk.k0 + blk.keys == hi) << sdpa::problem_id(p) << " rows " << blk.r0;
    }
    EXPECT_EQ(next, p.seq_q) << sdpa::problem_id(p);
  }
  // Causal blocks skip keys: the point of them.
  const auto blocks = sdpa::detail::row_blocks(blocked_problems()[0]);
  EXPECT_EQ(blocks.front().keys, 128);
  EXPECT_EQ(blocks.back().keys, 300);
}

// The gradients from the definition (no softcap, no attn_mask): P = exp(s − lse),
// dP = dO·Vᵀ, D = rowsum(dO ⊙ O), dS = P ⊙ (dP − D), dQ = scale·dS·K, dK = scale·dSᵀ·Q
// (summed over the GQA group), dV = Pᵀ·dO.
struct NaiveGrads {
  std::vector<double> dq, dk, dv;
};

NaiveGrads naive_backward(const sdpa::Problem& p, const TensorMap& in) {
  auto fwd = p;
  fwd.direction = sdpa::Direction::forward;
  const auto n = sdpatest::naive_forward(fwd, in);
  const auto &q = in.at("q"), &k = in.at("k"), &v = in.at("v"), &d_o = in.at("dO");
  const int64_t D = p.head_dim, Dv = p.head_dim_v, Hq = p.heads_q, Hkv = p.heads_kv, group = Hq / Hkv;
  const double scale = p.effective_scale();
  NaiveGrads g;
  g.dq.assign(p.batch * Hq * p.seq_q * D, 0.0);
  g.dk.assign(p.batch * Hkv * p.seq_k * D, 0.0);
  g.dv.assign(p.batch * Hkv * p.seq_k * Dv, 0.0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i) {
        const double lse = n.lse[(b * Hq + h) * p.seq_q + i];
        if (std::isinf(lse)) continue;
        double d_i = 0;
        for (int64_t d = 0; d < Dv; ++d)
          d_i += d_o.get(at(p, Hq, p.seq_q, Dv, b, h, i, d)) * n.o[at(p, Hq, p.seq_q, Dv, b, h, i, d)];
        for (int64_t j = 0; j < p.seq_k; ++j) {
          if (!p.visible(i, j)) continue;
          double s = 0, dp = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q.get(at(p, Hq, p.seq_q, D, b, h, i, d)) * k.get(at(p, Hkv, p.seq_k, D, b, h / group, j, d));
          for (int64_t d = 0; d < Dv; ++d)
            dp += d_o.get(at(p, Hq, p.seq_q, Dv, b, h, i, d)) * v.get(at(p, Hkv, p.seq_k, Dv, b, h / group, j, d));
          const double pij = std::exp(s * scale - lse), ds = pij * (dp - d_i);
          for (int64_t d = 0; d < D; ++d) {
            g.dq[at(p, Hq, p.seq_q, D, b, h, i, d)] += scale * ds * k.get(at(p, Hkv, p.seq_k, D, b, h / group, j, d));
            g.dk[at(p, Hkv, p.seq_k, D, b, h / group, j, d)] += scale * ds * q.get(at(p, Hq, p.seq_q, D, b, h, i, d));
          }
          for (int64_t d = 0; d < Dv; ++d)
            g.dv[at(p, Hkv, p.seq_k, Dv, b, h / group, j, d)] += pij * d_o.get(at(p, Hq, p.seq_q, Dv, b, h, i, d));
        }
      }
  return g;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double t : want)
    if (std::isfinite(t)) scale = std::max(scale, std::fabs(t));
  for (size_t e = 0; e < got.size(); ++e) {
    if (!std::isfinite(want[e])) {
      ASSERT_EQ(got[e], want[e]) << what << "[" << e << "]";
      continue;
    }
    ASSERT_NEAR(got[e], want[e], rel * std::max(std::fabs(want[e]), 1e-3 * scale)) << what << "[" << e << "]";
  }
}

// The forward references of p: fp64 O and lse against the naive forward.
References expect_naive_forward(const sdpa::Problem& p) {
  const TensorMap in = sdpatest::inputs_of(p);
  const auto n = sdpatest::naive_forward(p, in);
  References f = sdpatest::family().reference(p, in);
  expect_close(f.exact.at("O"), n.o, 1e-12, sdpa::problem_id(p) + " O");
  expect_close(f.exact.at("lse"), n.lse, 1e-12, sdpa::problem_id(p) + " lse");
  return f;
}

TEST(SdpaRowBlocks, Fp64ReferencesEqualTheDefinition) {
  for (sdpa::Problem p : blocked_problems()) {
    expect_naive_forward(p);
    p.direction = sdpa::Direction::backward;
    const TensorMap bin = sdpatest::inputs_of(p);
    const NaiveGrads g = naive_backward(p, bin);
    const References r = sdpatest::family().reference(p, bin);
    expect_close(r.exact.at("dQ"), g.dq, 1e-10, sdpa::problem_id(p) + " dQ");
    expect_close(r.exact.at("dK"), g.dk, 1e-10, sdpa::problem_id(p) + " dK");
    expect_close(r.exact.at("dV"), g.dv, 1e-10, sdpa::problem_id(p) + " dV");
  }
}

// The forward's other variants on problems of several blocks, against the naive forward (which
// reads them all): a softcap, additive masks per batch and head, a boolean mask with a window,
// poisoned unseen K/V rows and BSHD storage, in the 16-bit dtypes.
TEST(SdpaRowBlocks, Fp64ForwardOfEveryVariantEqualsTheDefinition) {
  std::vector<sdpa::Problem> ps;
  auto cap = make(DType::bf16, 1, 4, 2, 300, 280, 16, Mask::causal_lower_right);
  cap.softcap = 2.5, cap.window_left = 90;
  ps.push_back(cap);
  auto add = make(DType::fp16, 2, 2, 1, 260, 400, 8, Mask::causal_lower_right);
  add.mask_tensor = sdpa::MaskTensor::additive, add.mask_per_batch = add.mask_per_head = true;
  add.window_left = 60;
  ps.push_back(add);
  auto boolean = make(DType::bf16, 2, 2, 2, 300, 300, 8, Mask::none);
  boolean.mask_tensor = sdpa::MaskTensor::boolean, boolean.mask_per_batch = true;
  boolean.window_left = 40, boolean.window_right = 0;
  boolean.poison_masked = true, boolean.layout = sdpa::Layout::bshd;
  ps.push_back(boolean);
  for (const sdpa::Problem& p : ps) {
    const auto blocks = sdpa::detail::row_blocks(p);
    ASSERT_GT(blocks.size(), 1u);
    // Some block's keys start after key 0: block-local key indices differ from the head's.
    ASSERT_TRUE(std::any_of(blocks.begin(), blocks.end(), [](const auto& blk) { return blk.k0 > 0; }))
        << sdpa::problem_id(p);
    const References f = expect_naive_forward(p);
    for (const auto* refs : {&f.lowp, &f.bound})
      for (const auto& [name, v] : *refs)
        for (double x : v) ASSERT_FALSE(std::isnan(x)) << sdpa::problem_id(p) << " " << name;
  }
}

// p's masking (causal alignment, window) as a boolean attn_mask on a problem without either.
std::pair<sdpa::Problem, TensorMap> as_data(const sdpa::Problem& p, TensorMap in) {
  sdpa::Problem d = p;
  d.mask = Mask::none, d.window_left = d.window_right = -1;
  d.mask_tensor = sdpa::MaskTensor::boolean;
  HostTensor m(DType::bool8, sdpa::mask_shape(d));
  for (int64_t i = 0; i < p.seq_q; ++i)
    for (int64_t j = 0; j < p.seq_k; ++j) m.set(i * p.seq_k + j, p.visible(i, j) ? 1.0 : 0.0);
  in.emplace("attn_mask", std::move(m));
  return {d, std::move(in)};
}

TEST(SdpaRowBlocks, EveryReferenceEqualsTheSameMaskGivenAsData) {
  for (sdpa::Problem p : blocked_problems())
    for (auto dir : {sdpa::Direction::forward, sdpa::Direction::backward}) {
      p.direction = dir;
      const TensorMap in = sdpatest::inputs_of(p);
      const auto [d, din] = as_data(p, in);
      for (const auto& blk : sdpa::detail::row_blocks(d)) ASSERT_EQ(blk.keys, d.seq_k);
      const References blocked = sdpatest::family().reference(p, in), plain = sdpatest::family().reference(d, din);
      // fp64: the same nonzero products summed in other groupings, ~1e-16 relative; the fp32
      // pipeline and its bounds (fp32 dtype: no rounding to the dtype to flip) ~1e-7.
      for (const auto& [name, x] : blocked.exact)
        expect_close(x, plain.exact.at(name), 1e-12, sdpa::problem_id(p) + " exact " + name);
      for (const auto& [name, x] : blocked.lowp)
        expect_close(x, plain.lowp.at(name), 1e-4, sdpa::problem_id(p) + " lowp " + name);
      for (const auto& [name, x] : blocked.bound)
        expect_close(x, plain.bound.at(name), 1e-4, sdpa::problem_id(p) + " bound " + name);
    }
}

}  // namespace
}  // namespace opcts
