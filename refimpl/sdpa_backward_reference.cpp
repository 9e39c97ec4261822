// SDPA backward references: the fp64 gradients and the same-precision pipeline of PyTorch's
// math backend, for every variant the forward has.
//
// fp64 (per batch and KV head, the group's query heads in a fixed order, OpenMP over the
// pairs): P from the forward's softmax (refimpl/sdpa_detail.hpp), O = P·V,
// D_i = rowsum(dO ⊙ O), dP = dO·Vᵀ, dS = P ⊙ (dP − D) (0 where P is 0: masked keys and
// rows that see no key, never 0·NaN), dX = dS ⊙ (1 − tanh²(x/softcap)) with a softcap,
// dQ = scale·dX·K, dK = Σ_group scale·dXᵀ·Q, dV = Σ_group Pᵀ·dO.
//
// Same precision (lowp; the math backend in the dtype, the yardstick of ref_relative and of
// PyTorch's "[Note] Fused Tolerances"): the forward's lowp P (rounded to the dtype), then
// dV = Pᵀ·dO, dP = dO·Vᵀ as fp32 GEMMs, dP rounded; softmax backward in fp32 as
// _softmax_backward_data does it, dS = P ⊙ (dP − Σ_j dP ⊙ P), rounded; the softcap's
// derivative with tanh rounded, product rounded; dQ = scale·dS·K and dK = scale·dSᵀ·Q as
// fp32 GEMMs rounded once; GQA sums (repeat_interleave's backward) in fp32, rounded once.
#include <cmath>

#include "refimpl/sdpa.hpp"
#include "refimpl/sdpa_detail.hpp"

namespace opcts::sdpa {

using detail::RowMajor;

namespace {

// dS from P and dP for one head: P ⊙ (dP − D), explicitly 0 wherever P is 0. A row with a
// single key has P = 1 there and D = dO·V_j = dP_ij, so its dS is exactly 0 (rounding would
// leave ~1e-17 noise that the trust check would take for a real value): set it so.
template <typename T, typename Round>
void softmax_backward(RowMajor<T>& dp, const RowMajor<T>& prob, const std::vector<T>& dsum, Round rnd) {
  for (int64_t i = 0; i < dp.rows(); ++i) {
    int64_t keys = 0;
    for (int64_t j = 0; j < dp.cols(); ++j) keys += prob(i, j) != T(0);
    for (int64_t j = 0; j < dp.cols(); ++j)
      dp(i, j) = prob(i, j) == T(0) || keys == 1 ? T(0) : rnd(prob(i, j) * (dp(i, j) - dsum[i]));
  }
}

}  // namespace

References backward_reference(const Problem& p, const TensorMap& inputs) {
  const int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k;
  const int64_t D = p.head_dim, Dv = p.head_dim_v;
  const int64_t group = Hq / Hkv;
  const std::vector<double> q = inputs.at("q").to_f64(), k = inputs.at("k").to_f64(), v = inputs.at("v").to_f64(),
                            d_o = inputs.at("dO").to_f64();
  const detail::MaskView mask = detail::mask_view(p, inputs);
  const std::vector<char> unseen = unseen_keys(p);
  const Strides qs = q_strides(p), ks = k_strides(p), vs = v_strides(p), os = o_strides(p);
  const DType t = p.dtype;
  const bool capped = p.softcap > 0;
  const double scale = p.effective_scale();
  const float scale_f = static_cast<float>(scale);

  References r;
  for (auto* refs : {&r.exact, &r.lowp}) {
    (*refs)["dQ"].assign(B * Hq * Sq * D, 0.0);
    (*refs)["dK"].assign(B * Hkv * Sk * D, 0.0);
    (*refs)["dV"].assign(B * Hkv * Sk * Dv, 0.0);
  }
  auto &dq_x = r.exact.at("dQ"), &dk_x = r.exact.at("dK"), &dv_x = r.exact.at("dV");
  auto &dq_l = r.lowp.at("dQ"), &dk_l = r.lowp.at("dK"), &dv_l = r.lowp.at("dV");
  const auto exact = [](double x) { return x; };
  const auto round_f = [t](float x) { return static_cast<float>(round_to(t, x)); };
  const auto round_d = [t](double x) { return round_to(t, x); };

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      // fp64
      {
        const auto kh = detail::gather<double>(k, ks, b, hk, Sk, D, &unseen);
        const auto vh = detail::gather<double>(v, vs, b, hk, Sk, Dv, &unseen);
        RowMajor<double> dk = RowMajor<double>::Zero(Sk, D), dv = RowMajor<double>::Zero(Sk, Dv);
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          const auto qh = detail::gather<double>(q, qs, b, h, Sq, D);
          const auto doh = detail::gather<double>(d_o, os, b, h, Sq, Dv);
          RowMajor<double> prob = qh * kh.transpose(), dcap;
          std::vector<double> lse;
          detail::softmax_head<double>(p, mask, b, h, prob, lse, capped ? &dcap : nullptr, exact);
          const RowMajor<double> o = prob * vh;
          std::vector<double> dsum(Sq);
          for (int64_t i = 0; i < Sq; ++i) dsum[i] = o.row(i).dot(doh.row(i));
          RowMajor<double> ds = doh * vh.transpose();
          softmax_backward(ds, prob, dsum, exact);
          if (capped) ds = ds.cwiseProduct(dcap);
          const RowMajor<double> dq = (ds * kh) * scale;
          detail::scatter(dq_x, qs, b, h, dq, exact);
          dk.noalias() += (ds.transpose() * qh) * scale;
          dv.noalias() += prob.transpose() * doh;
        }
        detail::scatter(dk_x, ks, b, hk, dk, exact);
        detail::scatter(dv_x, vs, b, hk, dv, exact);
      }
      // Same precision.
      {
        const auto kh = detail::gather<float>(k, ks, b, hk, Sk, D, &unseen);
        const auto vh = detail::gather<float>(v, vs, b, hk, Sk, Dv, &unseen);
        RowMajor<float> dk = RowMajor<float>::Zero(Sk, D), dv = RowMajor<float>::Zero(Sk, Dv);
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          const auto qh = detail::gather<float>(q, qs, b, h, Sq, D);
          const auto doh = detail::gather<float>(d_o, os, b, h, Sq, Dv);
          RowMajor<float> prob = qh * kh.transpose(), dcap;
          std::vector<float> lse;
          detail::softmax_head<float>(p, mask, b, h, prob, lse, capped ? &dcap : nullptr, round_f);
          dv.noalias() += prob.transpose() * doh;
          RowMajor<float> ds = doh * vh.transpose();
          for (int64_t e = 0; e < ds.size(); ++e) ds.data()[e] = round_f(ds.data()[e]);
          std::vector<float> dsum(Sq);
          for (int64_t i = 0; i < Sq; ++i) dsum[i] = ds.row(i).dot(prob.row(i));
          softmax_backward(ds, prob, dsum, round_f);
          if (capped)
            for (int64_t e = 0; e < ds.size(); ++e) ds.data()[e] = round_f(ds.data()[e] * dcap.data()[e]);
          const RowMajor<float> dq = (ds * kh) * scale_f;
          detail::scatter(dq_l, qs, b, h, dq, round_d);
          dk.noalias() += ds.transpose() * qh;
        }
        dk *= scale_f;
        detail::scatter(dk_l, ks, b, hk, dk, round_d);
        detail::scatter(dv_l, vs, b, hk, dv, round_d);
      }
    }
  }
  return r;
}

}  // namespace opcts::sdpa
