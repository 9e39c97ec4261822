// SDPA forward references for every variant (GQA, Dqk ≠ Dv, causal masks, windows, softcap,
// boolean and additive attn_mask, BSHD storage): the fp64 values, the same-precision reference
// of the ref_relative metric and its per-element bounds. Masked keys are masked explicitly
// (-inf before the softmax, P = 0 after it) and K/V rows that no query row sees are zeroed
// before the GEMMs, so poison (NaN) in them cannot leak through 0·NaN.
//
// Both run per (batch, query head), OpenMP over the pairs, each head by blocks of 128 query rows
// and the keys they see (families/sdpa/detail.hpp RowBlock).
//
// fp64: families/sdpa/detail.hpp's pipeline in double without rounding, on the inputs' values.
//
// Same precision (`lowp`): the ideal low-precision flash kernel, the same pipeline in fp32
// keeping the one rounding of an intermediate that a flash kernel cannot avoid:
//   - inputs in the dtype (their stored values), scores s = scale·q·k (softcap, additive mask)
//     computed and kept in fp32: a flash kernel holds S in fp32 registers and never stores it;
//   - the softmax against the row's final max in fp32: e_ij = exp(s_ij − m_i), l_i = Σ_j e_ij,
//     lse_i = m_i + log l_i (fp32, the lse output itself);
//   - e rounded to the dtype once, for the P·V product (a tensor-core MMA takes P in the input
//     dtype; FlashAttention-2 packs it so, as cuda.flash and host.flash do); under fp8 qkv to
//     e4m3fn (Problem::p_dtype: an fp8 MMA's operand, FlashAttention 3's; cuDNN's graph rounds
//     the normalised P to Q's type, bound.hpp kFp8PNormalised);
//   - fp8 inputs dequantized, codes times descales (exact in fp32 for the catalog's descales);
//   - O = (Σ_j RN(e_ij)·v_j) / l_i accumulated in fp32, stored before its rounding to the
//     dtype: the ref_relative bound takes factor × this accumulation error (or the bound below,
//     if larger) and adds the one output rounding as half an output spacing per element
//     (judge/compare.hpp), so that where a kernel's value lands on the other side of a
//     rounding midpoint it is not charged a whole spacing the reference happened not to pay.
// It does not round S (PyTorch's math backend in the dtype does; the default math backend
// and cuda.math compute in fp32), does not round l, and normalises once at the end. A kernel
// rounds P relative to its running max instead of the final one and sums in another order:
// another sample of the same roundings, which factor 2 and tiles of 16 rows cover
// (cases/tolerances.yaml, SdpaFamily::outputs).
//
// Bounds (`bound`): families/sdpa/bound.hpp (O) and lse_floor.hpp (lse, one bound per
// softmax structure: "lse" per key, "lse@<structure>"), from the same-precision pipeline's own P.
// "O@flash_fp32" repeats O's bound for the flash kernels that declare the bound's model, with
// O's error-energy check (`energy`, bound.hpp's OEnergy summed over heads in order);
// "O@flash_fp32_rn" likewise for those whose fp32 sums round to nearest. Under fp8 qkv,
// "O@fp8_p_normalised" is O's bound for a graph that rounds the normalised P (cuDNN's).
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "families/sdpa/bound.hpp"
#include "families/sdpa/detail.hpp"
#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

using detail::RowMajor;

References reference(const Problem& p, const TensorMap& inputs) { return reference(p, inputs, p.p_dtype()); }

namespace {

// An fp8 output stores O·o_scale (sdpa.hpp, Problem::fp8_out): O's references and bounds in those
// units, the output's own rounding then e4m3fn's half spacing at |O·o_scale| (the judge's). The
// energy check's form, whose output rounding o_bound took at e4m3fn's spacing in O's units,
// scales with its errors: x → s·x takes C to s²·C (tr C by s², tr C² by s⁴, ‖C‖ by s²) and the
// outright part by s; the weights stay. Where an element may saturate (s·(|O| + bound) reaches
// e4m3fn's largest finite value) its error is no rounding: its weight becomes 0, so the check
// leaves it to the per-element comparison (which takes ±448 there, judge/compare.cpp). The form's
// sources keep its terms: the form without them, C' = P·C·P with P the diagonal projection onto
// the kept elements, is C's principal submatrix, whose eigenvalues interlace C's (Cauchy), so
// tr C', tr C'² and ‖C'‖ are no larger and the limit from C is sound for the rest, and looser.
void scale_fp8_output(const TensorMap& inputs, References& r) {
  const double s = inputs.at("o_scale").get(0);
  const std::vector<double>&o = r.exact.at("O"), &b = r.bound.at("O");
  std::vector<char> saturates(o.size(), 0);
  // A row whose bound is unbounded weighs 0 in the form (o_bound): its elements are not in it.
  for (size_t i = 0; i < o.size(); ++i)
    saturates[i] = std::isfinite(b[i]) && !(s * (std::fabs(o[i]) + b[i]) < dtype_info(DType::e4m3fn).max_finite);
  for (auto* refs : {&r.exact, &r.lowp, &r.bound})
    for (auto& [key, values] : *refs)
      if (key == "O" || key.rfind("O@", 0) == 0)
        for (double& x : values) x *= s;
  for (auto it = r.energy.begin(); it != r.energy.end(); ++it) {
    if (it->first.rfind("O@", 0) != 0) continue;
    std::vector<double>& w = it->second.weight;
    for (size_t i = 0; i < saturates.size(); ++i)
      if (saturates[i]) {
        if (w.empty()) w.assign(o.size(), 1.0);
        w[i] = 0;
      }
    for (ErrorEnergy::Source& src : it->second.sources) {
      src.trace *= s * s;
      src.trace_sq *= s * s * s * s;
      src.spectral *= s * s;
    }
    it->second.fixed *= s;
  }
}

}  // namespace

References reference(const Problem& p, const TensorMap& inputs, DType p_round) {
  const int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, Sq = p.seq_q, Sk = p.seq_k;
  const int64_t D = p.head_dim, Dv = p.head_dim_v;
  const int64_t group = Hq / Hkv;
  // fp8 codes times their descales: exact in double, and in fp32 for the same-precision pipeline.
  const std::vector<double> q = detail::dequantized(p, inputs, 'q'), k = detail::dequantized(p, inputs, 'k'),
                            v = detail::dequantized(p, inputs, 'v');
  const detail::MaskView mask = detail::mask_view(p, inputs);
  const std::vector<char> unseen = unseen_keys(p);
  const Strides qs = q_strides(p), ks = k_strides(p), vs = v_strides(p), os = o_strides(p);
  const detail::ToDtype to_dtype{p_round};
  const double o_scale = p.fp8_out ? inputs.at("o_scale").get(0) : 1;  // O's energy form takes e4m3fn's spacing

  References r;
  for (auto* refs : {&r.exact, &r.lowp, &r.bound}) {
    (*refs)["O"].assign(B * Hq * Sq * Dv, 0.0);
    (*refs)["lse"].assign(B * Hq * Sq, 0.0);
  }
  auto &o = r.exact.at("O"), &lse = r.exact.at("lse");
  auto &o_lp = r.lowp.at("O"), &lse_lp = r.lowp.at("lse");
  auto &o_bd = r.bound.at("O"), &lse_bd = r.bound.at("lse");
  // lse's floor under each softmax structure an impl may declare (families/sdpa/lse_floor.hpp).
  std::array<std::vector<double>*, detail::kSoftmaxStructures.size()> lse_declared{};
  for (size_t s = 0; s < lse_declared.size(); ++s) {
    lse_declared[s] = &r.bound[bound_key("lse", detail::kSoftmaxStructures[s].name)];
    lse_declared[s]->assign(B * Hq * Sq, 0.0);
  }

  // "O@fp8_p_normalised" (bound.hpp kFp8PNormalised): P normalised, times scale_s, rounded to
  // the inputs' fp8 format; a per-element bound without an energy check.
  const bool fp8_normalised = p.fp8 == Fp8::qkv;
  std::vector<double>* o_normalised = nullptr;
  if (fp8_normalised) {
    o_normalised = &r.bound[bound_key("O", detail::kFp8PNormalised)];
    o_normalised->assign(B * Hq * Sq * Dv, 0.0);
  }
  const std::vector<detail::RowBlock> blocks = detail::row_blocks(p);
  std::vector<detail::OEnergy> energy(static_cast<size_t>(B * Hq));  // per (batch, head), summed in order below
  std::vector<double> weight(B * Hq * Sq * Dv, 0.0);                 // the energy check's, in O's storage order

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;  // GQA: consecutive query heads share a KV head
      const int64_t row0 = (b * Hq + h) * Sq;
      RowMajor<double> oh(Sq, Dv);  // fp64's O, also the centre of the lowp bound's score term
      {
        const auto kh = detail::gather<double>(k, ks, b, hk, Sk, D, &unseen);
        const auto vh = detail::gather<double>(v, vs, b, hk, Sk, Dv, &unseen);
        const auto qh = detail::gather<double>(q, qs, b, h, Sq, D);
        for (const detail::RowBlock& blk : blocks) {
          const auto f = detail::forward_head<double>(p, mask, b, h, blk, qh.middleRows(blk.r0, blk.rows),
                                                      kh.middleRows(blk.k0, blk.keys), vh.middleRows(blk.k0, blk.keys),
                                                      false, detail::Exact{});
          oh.middleRows(blk.r0, blk.rows) = f.o;
          for (int64_t i = 0; i < blk.rows; ++i) lse[row0 + blk.r0 + i] = f.lse[i];
        }
        detail::scatter(o, os, b, h, oh, detail::Exact{});
      }
      {
        const auto kh = detail::gather<float>(k, ks, b, hk, Sk, D, &unseen);
        const auto vh = detail::gather<float>(v, vs, b, hk, Sk, Dv, &unseen);
        const auto qh = detail::gather<float>(q, qs, b, h, Sq, D);
        const RowMajor<float> o_exact = oh.cast<float>();
        RowMajor<float> oh_lp(Sq, Dv), bh(Sq, Dv), wh(Sq, Dv), wb, nh(Sq, Dv);
        for (const detail::RowBlock& blk : blocks) {
          const RowMajor<float> qb = qh.middleRows(blk.r0, blk.rows), kb = kh.middleRows(blk.k0, blk.keys),
                                vb = vh.middleRows(blk.k0, blk.keys);
          const auto f = detail::forward_head(p, mask, b, h, blk, qb, kb, vb, false, to_dtype);
          oh_lp.middleRows(blk.r0, blk.rows) = f.o;  // before the output rounding
          const std::vector<detail::LseFloor> lf = detail::lse_floors(p, f, qb, kb);
          for (int64_t i = 0; i < blk.rows; ++i) {
            const int64_t row = row0 + blk.r0 + i;
            lse_lp[row] = f.lse[i];
            lse_bd[row] = lf[i].under(1);
            for (size_t s = 0; s < detail::kSoftmaxStructures.size(); ++s)
              (*lse_declared[s])[row] = lf[i].under(detail::kSoftmaxStructures[s].block);
          }
          bh.middleRows(blk.r0, blk.rows) =
              detail::o_bound<float>(p, f, qb, kb, vb, o_exact.middleRows(blk.r0, blk.rows), p_round,
                                     &energy[static_cast<size_t>(b * Hq + h)], &wb, o_scale);
          wh.middleRows(blk.r0, blk.rows) = wb;
          if (fp8_normalised)
            nh.middleRows(blk.r0, blk.rows) =
                detail::o_bound<float>(p, f, qb, kb, vb, o_exact.middleRows(blk.r0, blk.rows), p.q_dtype(), nullptr,
                                       nullptr, o_scale, kFp8ScaleS);
        }
        if (fp8_normalised) detail::scatter(*o_normalised, os, b, h, nh, detail::Exact{});
        detail::scatter(o_lp, os, b, h, oh_lp, detail::Exact{});
        detail::scatter(o_bd, os, b, h, bh, detail::Exact{});
        detail::scatter(weight, os, b, h, wh, detail::Exact{});
      }
    }
  }
  detail::OEnergy total;
  for (const detail::OEnergy& e : energy) total.add(e);
  const std::string flash = bound_key("O", detail::kFlashModel), flash_rn = bound_key("O", detail::kFlashModelRn);
  r.bound[flash] = o_bd;
  r.bound[flash_rn] = o_bd;
  r.energy[flash] = total.energy(weight);
  r.energy[flash_rn] = total.energy_rn(std::move(weight));
  if (p.fp8_out) scale_fp8_output(inputs, r);
  return r;
}

}  // namespace opcts::sdpa
