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

namespace {

// dbias's sums over one (batch, KV head) task's terms, in the mask slices the task touches: its
// group's query heads' (or the one broadcast head's) [Sqm, Sk] of batch entry b (or of the
// broadcast one). Summed over the tasks in their order after the parallel loop, so the fp64
// reference does not depend on the threads.
struct DbiasParts {
  int64_t heads = 0, rows = 0, keys = 0;
  std::vector<double> exact, lowp, floor, var, sq, terms, abs_sum;
  DbiasParts() = default;
  DbiasParts(int64_t h, int64_t r, int64_t k) : heads(h), rows(r), keys(k) {
    for (auto* v : {&exact, &lowp, &floor, &var, &sq, &terms, &abs_sum}) v->assign(static_cast<size_t>(h * r * k), 0.0);
  }
};

// dbias from the summed parts (bound.hpp's file comment): the terms' fp32 floors outright, D's
// errors through them in a root; where
// an element sums two terms or more, their modelled roundings to the dtype (a kernel may round dS
// before it sums it: λ·√Σ b²) and the fp32 sum's roundings to nearest, mean-zero, at most u/2 of
// a partial no larger than Σ|t| (Azuma–Hoeffding at the lse floor's Λ, as dsinks' sum). A single
// term's one rounding is the output rounding the judge adds.
void finish_dbias(const Problem& p, const std::vector<DbiasParts>& tasks, References& r) {
  const std::vector<int64_t> shape = mask_shape(p);
  const int64_t rows = shape[2], keys = shape[3], n = shape[0] * shape[1] * rows * keys;
  std::vector<double> exact(n, 0.0), lowp(n, 0.0), floor(n, 0.0), var(n, 0.0), sq(n, 0.0), terms(n, 0.0),
      abs_sum(n, 0.0);
  const int64_t group = p.heads_q / p.heads_kv;
  for (int64_t t = 0; t < static_cast<int64_t>(tasks.size()); ++t) {
    const DbiasParts& part = tasks[static_cast<size_t>(t)];
    const int64_t b = t / p.heads_kv, hk = t % p.heads_kv;
    const int64_t bm = p.mask_per_batch ? b : 0;
    for (int64_t lh = 0; lh < part.heads; ++lh) {
      const int64_t hm = p.mask_per_head ? hk * group + lh : 0;
      const int64_t base = (bm * shape[1] + hm) * rows * keys, local = lh * rows * keys;
      for (int64_t e = 0; e < rows * keys; ++e) {
        const size_t g = static_cast<size_t>(base + e), l = static_cast<size_t>(local + e);
        exact[g] += part.exact[l], lowp[g] += part.lowp[l], floor[g] += part.floor[l], var[g] += part.var[l];
        sq[g] += part.sq[l];
        terms[g] += part.terms[l], abs_sum[g] += part.abs_sum[l];
      }
    }
  }
  // "dbias@fp32_terms": the kernels that declare they sum dS′ unrounded in fp32 (bound.hpp) are
  // charged no rounding of a term.
  std::vector<double> bound(n, 0.0), fp32_terms(n, 0.0);
  for (int64_t e = 0; e < n; ++e) {
    bound[e] = fp32_terms[e] = floor[e] + detail::kAzumaSigmas * std::sqrt(var[e]);
    if (terms[e] < 2) continue;
    const double sum = detail::kAzumaSigmas * detail::kAccUnit / 2 * std::sqrt(terms[e]) * abs_sum[e];
    bound[e] += detail::kRoundingSigmas * std::sqrt(sq[e]) + sum;
    fp32_terms[e] += sum;
  }
  r.exact["dbias"] = std::move(exact);
  r.lowp["dbias"] = std::move(lowp);
  r.bound["dbias"] = std::move(bound);
  r.bound[bound_key("dbias", detail::kDbiasFp32Terms)] = std::move(fp32_terms);
}

}  // namespace

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
  // dbias per (batch, KV head) task, likewise.
  std::vector<DbiasParts> dbias_parts(p.dbias ? static_cast<size_t>(B * Hkv) : 0);
  const int64_t mask_rows = p.dbias ? mask_shape(p)[2] : 0;

  // One precision's gradients of (b, hk) into `refs`, row block by row block; `bounds` (lowp only) also writes the
  // bounds from that pipeline's own P, dS and O.
  const auto run = [&]<typename T, typename Round>(T, Round rnd, int64_t b, int64_t hk, bool exact_zeros,
                                                   std::map<std::string, std::vector<double>>& refs, bool bounds) {
    const auto kh = detail::gather<T>(k, ks, b, hk, Sk, D, &unseen);
    const auto vh = detail::gather<T>(v, vs, b, hk, Sk, Dv, &unseen);
    RowMajor<T> dk = RowMajor<T>::Zero(Sk, D), dv = RowMajor<T>::Zero(Sk, Dv);
    detail::GradientBounds<T> gb(p, Sk);
    RowMajor<T> dq(Sq, D), dq_bound(bounds ? Sq : 0, D);
    DbiasParts* db = p.dbias ? &dbias_parts[static_cast<size_t>(b * Hkv + hk)] : nullptr;
    if (db && db->heads == 0) *db = DbiasParts(p.mask_per_head ? group : 1, mask_rows, Sk);
    RowMajor<T> db_floor, db_var;
    const detail::Rounding<T> rounding(p.dtype);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const auto qh = detail::gather<T>(q, qs, b, h, Sq, D);
      const auto doh = detail::gather<T>(d_o, os, b, h, Sq, Dv);
      for (const detail::RowBlock& blk : blocks) {
        const RowMajor<T> qb = qh.middleRows(blk.r0, blk.rows), dob = doh.middleRows(blk.r0, blk.rows),
                          kb = kh.middleRows(blk.k0, blk.keys), vb = vh.middleRows(blk.k0, blk.keys);
        const auto g = detail::backward_head(p, mask, b, h, blk, qb, kb, vb, dob, rnd, exact_zeros, dk, dv);
        dq.middleRows(blk.r0, blk.rows) = g.dq;
        if (bounds)
          dq_bound.middleRows(blk.r0, blk.rows) =
              gb.add_head(blk, g, qb, kb, vb, dob, db ? &db_floor : nullptr, &db_var);
        if (db) {  // this block's dS′ into its rows (or the one broadcast row) of the head's slice
          const RowMajor<T>& dsb = g.bias_grad();
          const int64_t lh = p.mask_per_head ? h - hk * group : 0;
          for (int64_t i = 0; i < blk.rows; ++i) {
            const int64_t row = p.mask_per_query ? blk.r0 + i : 0;
            const size_t at = static_cast<size_t>((lh * mask_rows + row) * Sk + blk.k0);
            for (int64_t j = 0; j < blk.keys; ++j) {
              const double t = static_cast<double>(dsb(i, j));
              if (!bounds) {
                db->exact[at + j] += t;
                continue;
              }
              db->lowp[at + j] += t;
              db->floor[at + j] += static_cast<double>(db_floor(i, j));
              db->var[at + j] += static_cast<double>(db_var(i, j));
              db->sq[at + j] += static_cast<double>(rounding.sq(dsb(i, j)));
              db->terms[at + j] += t != 0;
              db->abs_sum[at + j] += std::fabs(t);
            }
          }
        }
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
  if (p.dbias) finish_dbias(p, dbias_parts, r);
  return r;
}

}  // namespace opcts::sdpa
