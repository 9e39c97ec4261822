// SDPA forward references: fp64 (Eigen, OpenMP) and the same-precision reference of the
// ref_relative metric, for every variant (GQA, Dqk ≠ Dv, causal masks, windows, softcap,
// boolean and additive attn_mask, BSHD storage). Masked keys are masked explicitly (-inf
// before the softmax, P = 0 after it) and K/V rows that no query row sees are zeroed before
// the GEMMs, so poison (NaN) in them cannot leak through 0·NaN.
#include <cmath>
#include <limits>

#include "refimpl/sdpa.hpp"
#include "refimpl/sdpa_detail.hpp"

namespace opcts::sdpa {

using detail::RowMajor;

References reference(const Problem& p, const TensorMap& inputs) {
  const int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k;
  const int64_t D = p.head_dim, Dv = p.head_dim_v;
  const int64_t group = Hq / Hkv;
  const std::vector<double> q = inputs.at("q").to_f64(), k = inputs.at("k").to_f64(), v = inputs.at("v").to_f64();
  const detail::MaskView mask = detail::mask_view(p, inputs);
  const std::vector<char> unseen = unseen_keys(p);
  const Strides qs = q_strides(p), ks = k_strides(p), vs = v_strides(p), os = o_strides(p);
  const DType t = p.dtype;

  References r;
  auto& o = r.exact["O"];
  auto& lse = r.exact["lse"];
  auto& o_lp = r.lowp["O"];
  auto& lse_lp = r.lowp["lse"];
  o.assign(B * Hq * Sq * Dv, 0.0);
  lse.assign(B * Hq * Sq, 0.0);
  o_lp.assign(o.size(), 0.0);
  lse_lp.assign(lse.size(), 0.0);
  const auto exact = [](double x) { return x; };
  const auto round_f = [t](float x) { return static_cast<float>(round_to(t, x)); };
  const auto round_d = [t](double x) { return round_to(t, x); };

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;  // GQA: consecutive query heads share a KV head
      const int64_t row0 = (b * Hq + h) * Sq;
      // fp64: the mathematical value on the rounded inputs.
      {
        const auto kh = detail::gather<double>(k, ks, b, hk, Sk, D, &unseen);
        const auto vh = detail::gather<double>(v, vs, b, hk, Sk, Dv, &unseen);
        RowMajor<double> s = detail::gather<double>(q, qs, b, h, Sq, D) * kh.transpose();
        std::vector<double> l;
        detail::softmax_head<double>(p, mask, b, h, s, l, nullptr, exact);
        const RowMajor<double> out = s * vh;
        detail::scatter(o, os, b, h, out, exact);
        for (int64_t i = 0; i < Sq; ++i) lse[row0 + i] = l[i];
      }
      // Same precision, as a math backend computes it in the input dtype: S rounded to the
      // dtype after an fp32 GEMM (and after the scale, the softcap's tanh and product and the
      // additive mask), softmax in fp32, P normalised and rounded to the dtype, O = P·V
      // accumulated in fp32 and rounded to the dtype (FlashAttention's attention_ref with
      // upcast=False; PyTorch's "[Note] Fused Tolerances" lp_ref).
      {
        const auto kh = detail::gather<float>(k, ks, b, hk, Sk, D, &unseen);
        const auto vh = detail::gather<float>(v, vs, b, hk, Sk, Dv, &unseen);
        RowMajor<float> s = detail::gather<float>(q, qs, b, h, Sq, D) * kh.transpose();
        std::vector<float> l;
        detail::softmax_head<float>(p, mask, b, h, s, l, nullptr, round_f);
        const RowMajor<float> out = s * vh;
        detail::scatter(o_lp, os, b, h, out, round_d);
        for (int64_t i = 0; i < Sq; ++i) lse_lp[row0 + i] = l[i];
      }
    }
  }
  return r;
}

}  // namespace opcts::sdpa
