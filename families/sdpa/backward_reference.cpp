// SDPA backward references for every variant the forward has: the fp64 gradients, the
// same-precision reference of the ref_relative metric and its per-element bounds.
//
// Both run families/sdpa/detail.hpp's backward_head per (batch, KV head), the group's query
// heads in a fixed order (OpenMP over the pairs), each head by blocks of 128 query rows and the
// keys they see (detail::RowBlock): the head's forward, D_i = rowsum(dO ⊙ O),
// dP = dO·Vᵀ, dS = P ⊙ (dP − D) (0 where P is 0: masked keys and rows that see no key, never
// 0·NaN), ⊙ (1 − tanh²(x/softcap)) with a softcap, dQ = scale·dS·K, dK = Σ_group scale·dSᵀ·Q,
// dV = Σ_group Pᵀ·dO (FlashAttention-2, Dao 2023, Algorithm 2).
//
// fp64: in double without rounding (dS of a row with a single key set to its exact 0).
//
// Same precision (`lowp`): the ideal low-precision flash backward, in fp32, keeping the
// roundings every flash backward makes and nothing else:
//   - O rounded to the dtype, as the forward stored it (D = rowsum(dO ⊙ O) reads that O), and
//     the forward's fp32 lse (P = e/l here, equal to exp(s − lse) up to fp32 rounding);
//   - P rounded once for the Pᵀ·dO product and dS rounded once for the dS·K and dSᵀ·Q
//     products (the MMAs take them in the dtype), dP = dO·Vᵀ and dS in fp32;
//   - dQ, dK, dV accumulated in fp32 (the GQA sums too), stored before their one rounding to
//     the dtype, which the bound adds (as in the forward, families/sdpa/reference.cpp).
// PyTorch's math backend in the dtype rounds S, P, dP and dS where it stores them; this one
// does not (cases/tolerances.yaml).
//
// Bounds (`bound`): families/sdpa/bound.hpp, from the same-precision pipeline's own P, dS and O.
#include <cmath>
#include <stdexcept>

#include "families/sdpa/bound.hpp"
#include "families/sdpa/detail.hpp"
#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

using detail::RowMajor;

SinkGradients::SinkGradients(int64_t heads) {
  for (auto* v : {&exact, &lowp, &var, &outright, &terms, &abs_sum}) v->assign(static_cast<size_t>(heads), 0.0);
}

void SinkGradients::add(const SinkGradients& o) {
  if (o.exact.size() != exact.size()) throw std::logic_error("SinkGradients::add: head counts differ");
  for (size_t h = 0; h < exact.size(); ++h) {
    exact[h] += o.exact[h], lowp[h] += o.lowp[h], var[h] += o.var[h], outright[h] += o.outright[h];
    terms[h] += o.terms[h], abs_sum[h] += o.abs_sum[h];
  }
}

void SinkGradients::finish(References& r) const {
  const double lambda = detail::kAzumaSigmas;
  r.exact["dsinks"] = exact;
  r.lowp["dsinks"] = lowp;
  std::vector<double>& bound = r.bound["dsinks"];
  bound.assign(exact.size(), 0.0);
  for (size_t h = 0; h < exact.size(); ++h)
    bound[h] = lambda * (std::sqrt(var[h]) + detail::kAccUnit / 2 * std::sqrt(terms[h]) * abs_sum[h]) + outright[h];
}

References backward_reference(const Problem& p, const TensorMap& inputs) {
  SinkGradients sinks(p.sinks ? p.heads_q : 0);
  References r = backward_reference(p, inputs, p.sinks ? &sinks : nullptr);
  if (p.sinks) sinks.finish(r);
  return r;
}

References backward_reference(const Problem& p, const TensorMap& inputs, SinkGradients* sinks) {
  const int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k;
  const int64_t D = p.head_dim, Dv = p.head_dim_v;
  const int64_t group = Hq / Hkv;
  const std::vector<double> q = inputs.at("q").to_f64(), k = inputs.at("k").to_f64(), v = inputs.at("v").to_f64(),
                            d_o = inputs.at("dO").to_f64();
  const detail::MaskView mask = detail::mask_view(p, inputs);
  const std::vector<char> unseen = unseen_keys(p);
  const Strides qs = q_strides(p), ks = k_strides(p), vs = v_strides(p), os = o_strides(p);
  const detail::ToDtype to_dtype{p.dtype};

  References r;
  for (auto* refs : {&r.exact, &r.lowp, &r.bound}) {
    (*refs)["dQ"].assign(B * Hq * Sq * D, 0.0);
    (*refs)["dK"].assign(B * Hkv * Sk * D, 0.0);
    (*refs)["dV"].assign(B * Hkv * Sk * Dv, 0.0);
  }

  const std::vector<detail::RowBlock> blocks = detail::row_blocks(p);
  // The sinks' gradient per (batch, query head), summed over the batch in order after the loop.
  std::vector<SinkGradients> sink_parts(sinks ? static_cast<size_t>(B) : 0, SinkGradients(Hq));

  // One precision's gradients of (b, hk) into `refs`, row block by row block; `bounds` (lowp only) also writes the
  // bounds from that pipeline's own P, dS and O.
  const auto run = [&]<typename T, typename Round>(T, Round rnd, int64_t b, int64_t hk, bool exact_zeros,
                                                   std::map<std::string, std::vector<double>>& refs, bool bounds) {
    const auto kh = detail::gather<T>(k, ks, b, hk, Sk, D, &unseen);
    const auto vh = detail::gather<T>(v, vs, b, hk, Sk, Dv, &unseen);
    RowMajor<T> dk = RowMajor<T>::Zero(Sk, D), dv = RowMajor<T>::Zero(Sk, Dv);
    detail::GradientBounds<T> gb(p, Sk);
    RowMajor<T> dq(Sq, D), dq_bound(bounds ? Sq : 0, D);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const auto qh = detail::gather<T>(q, qs, b, h, Sq, D);
      const auto doh = detail::gather<T>(d_o, os, b, h, Sq, Dv);
      for (const detail::RowBlock& blk : blocks) {
        const RowMajor<T> qb = qh.middleRows(blk.r0, blk.rows), dob = doh.middleRows(blk.r0, blk.rows),
                          kb = kh.middleRows(blk.k0, blk.keys), vb = vh.middleRows(blk.k0, blk.keys);
        const auto g = detail::backward_head(p, mask, b, h, blk, qb, kb, vb, dob, rnd, exact_zeros, dk, dv);
        dq.middleRows(blk.r0, blk.rows) = g.dq;
        if (bounds) dq_bound.middleRows(blk.r0, blk.rows) = gb.add_head(blk, g, qb, kb, vb, dob);
        if (!sinks) continue;
        SinkGradients& s = sink_parts[static_cast<size_t>(b)];
        if (bounds) {
          detail::sink_gradient_parts(p, g, qb, kb, dob, s.lowp[h], s.var[h], s.outright[h], s.terms[h], s.abs_sum[h]);
        } else {
          for (int64_t i = 0; i < blk.rows; ++i)
            if (g.f.sink_e[i] != 0) s.exact[h] -= static_cast<double>(g.f.sink_e[i]) / g.f.l[i] * g.d[i];
        }
      }
      detail::scatter(refs.at("dQ"), qs, b, h, dq, detail::Exact{});
      if (bounds) detail::scatter(r.bound.at("dQ"), qs, b, h, dq_bound, detail::Exact{});
    }
    dk *= static_cast<T>(p.effective_scale());
    detail::scatter(refs.at("dK"), ks, b, hk, dk, detail::Exact{});
    detail::scatter(refs.at("dV"), vs, b, hk, dv, detail::Exact{});
    if (!bounds) return;
    detail::scatter(r.bound.at("dK"), ks, b, hk, gb.dk(), detail::Exact{});
    detail::scatter(r.bound.at("dV"), vs, b, hk, gb.dv(), detail::Exact{});
  };

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      run(0.0, detail::Exact{}, b, hk, true, r.exact, false);
      run(0.0f, to_dtype, b, hk, false, r.lowp, true);
    }
  }
  for (const SinkGradients& s : sink_parts) sinks->add(s);
  return r;
}

}  // namespace opcts::sdpa
