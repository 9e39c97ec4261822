// Where the checks of a case may not see a precision plant of host.flash (or host.normalised_p_fp8's
// fp8_p_unscaled, measured against that impl): the derivation is in
// sdpa_blind_spot.hpp; the quantities are the judge's own (the energy limit the case was judged
// by, CaseEvidence; the reference's per-element bounds).
#include "families/sdpa/host/sdpa_blind_spot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace opcts::host_sdpa {

namespace {

const std::vector<double>* found(const std::map<std::string, std::vector<double>>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// The per-element form: whether an exact kernel changed as the plant changes it passes every
// element — RN(x_i + δ_i) within e_i + s_i/2 of x_i, e_i the larger of the element's bound and
// the rule's factor times the same-precision error over its row, s_i the output's spacing at
// |x_i| + e_i (judge/compare.cpp's ref_relative rule); in a format that saturates, an x_i past
// ±max by `past` is ±max within max(0, e_i − past) and half a spacing there, as the judge takes
// it. Returns the largest |RN(x_i + δ_i) − target| ÷ that bound, or a negative number where some
// element fails it (or the reference lacks what the bound needs).
double exact_kernel_with_plant(const std::vector<double>& moved, const References& refs, const OutputSpec& spec,
                               const JudgedUnder& judged) {
  const std::vector<double>* b = found(refs.bound, judged.key);
  if (!b) b = found(refs.bound, spec.name);
  const std::vector<double>*x = found(refs.exact, spec.name), *lp = found(refs.lowp, spec.name);
  const size_t n = moved.size(), row = static_cast<size_t>(spec.row);
  if (!b || !x || !lp || row == 0 || b->size() != n || x->size() != n || lp->size() != n) return -1;
  double worst = 0;
  const double maxf = dtype_info(spec.dtype).max_finite;
  const bool saturates = default_overflow(spec.dtype) == Overflow::satfinite;
  for (size_t r0 = 0; r0 < n; r0 += row) {
    const size_t r1 = std::min(n, r0 + row);
    double row_lp = 0;
    for (size_t i = r0; i < r1; ++i)
      if (std::isfinite((*x)[i]) && std::isfinite((*lp)[i])) row_lp = std::max(row_lp, std::fabs((*lp)[i] - (*x)[i]));
    for (size_t i = r0; i < r1; ++i) {
      if (moved[i] == 0 || !std::isfinite((*x)[i])) continue;
      const double e = std::max(judged.factor * row_lp, (*b)[i]), xi = (*x)[i];
      const double past = saturates ? std::fabs(xi) - maxf : 0, target = past > 0 ? std::copysign(maxf, xi) : xi;
      double bound = e + spacing_at(spec.dtype, std::fabs(xi) + e) / 2;
      if (past > 0) {
        const double reach = std::max(0.0, e - past);
        bound = reach + (reach > 0 ? spacing_at(spec.dtype, std::fabs(maxf - reach)) / 2 : 0.0);
      }
      const double err = std::fabs(round_to(spec.dtype, xi + moved[i]) - target);
      if (!(err <= bound)) return -1;
      if (bound > 0) worst = std::max(worst, err / bound);
    }
  }
  return worst;
}

// The run a plant is measured against and its own: fp8_p_unscaled is host.normalised_p_fp8's plant,
// the others host.flash's.
bool normalised_parent(Plant plant) { return plant == Plant::fp8_p_unscaled; }
TensorMap run_as(const sdpa::Problem& p, const TensorMap& inputs, Plant parent_of, Plant run, bool unrounded) {
  return normalised_parent(parent_of) ? flash_run_normalised_p(p, inputs, run, unrounded)
                                      : flash_run(p, inputs, run, unrounded);
}
const char* parent_name(Plant plant) { return normalised_parent(plant) ? "host.normalised_p_fp8" : "host.flash"; }

}  // namespace

std::string precision_blind_spot(const sdpa::Problem& p, const CaseEvidence& evidence, Plant plant,
                                 const std::vector<OutputSpec>& outputs) {
  const TensorMap correct = run_as(p, evidence.inputs, plant, Plant::none, true),
                  planted = run_as(p, evidence.inputs, plant, plant, true);
  std::string why;
  for (const OutputSpec& spec : outputs) {
    const auto c = correct.find(spec.name), g = planted.find(spec.name);
    if (c == correct.end() || g == planted.end()) return "";
    const std::vector<double> want = c->second.to_f64();
    std::vector<double> moved = g->second.to_f64();
    if (moved.size() != want.size()) return "";
    bool same = true;
    for (size_t i = 0; i < moved.size(); ++i) {
      const double got = moved[i];
      const bool kept = got == want[i] || (std::isnan(got) && std::isnan(want[i]));  // a special both give
      if (!kept && !(std::isfinite(got) && std::isfinite(want[i]))) return "";       // a special of the plant's own
      moved[i] = kept ? 0.0 : got - want[i];
      same = same && kept;
    }
    if (same) continue;
    const auto it = evidence.judged_under.find(spec.name);
    const JudgedUnder judged = it == evidence.judged_under.end() ? JudgedUnder{spec.name, 1} : it->second;
    const std::string& key = judged.key;
    char text[360];
    if (const auto en = evidence.refs.energy.find(key);
        en != evidence.refs.energy.end() && !en->second.sources.empty() && judged.energy_limit > 0) {
      const ErrorEnergy& e = en->second;
      // ‖Δ‖_w as the check weighs errors (judge/error_energy.hpp): Σ w_i·Δ_i² in index order.
      if (!e.weight.empty() && e.weight.size() != moved.size()) return "";
      double sq = 0;
      for (size_t i = 0; i < moved.size(); ++i) sq += (e.weight.empty() ? 1.0 : e.weight[i]) * moved[i] * moved[i];
      const double norm = std::sqrt(sq), limit = judged.energy_limit;
      // sources[0]: P's and O's roundings (bound.hpp's OEnergy::rounding), charged at b = u·|x|;
      // a rounding at its binade's finest spacing has a quarter of that variance.
      const double least = e.sources[0].trace / 4, room = limit * limit - least;
      if (!(room > 0) || norm > std::sqrt(room)) return "";
      std::snprintf(text, sizeof text,
                    "%s's energy check: the plant moves it by %.3g (weighted root), within the %.3g its limit %.3g "
                    "leaves above a correct kernel's least expected error %.3g (every rounding at its binade's "
                    "finest spacing)",
                    spec.name.c_str(), norm, std::sqrt(room), limit, std::sqrt(least));
    } else {
      const double worst = exact_kernel_with_plant(moved, evidence.refs, spec, judged);
      if (worst < 0) return "";
      std::snprintf(text, sizeof text,
                    "%s, per element: an exact kernel changed as the plant changes it passes every element (at "
                    "most %.3g of its bound)",
                    spec.name.c_str(), worst);
    }
    why += (why.empty() ? "" : "; ") + std::string(text);
  }
  return why.empty() ? "" : why + " (measured against " + parent_name(plant) + " on these inputs)";
}

std::string tiles_blind_spot(const sdpa::Problem& p, const TensorMap& inputs, Plant plant) {
  if (p.paged() || p.direction != sdpa::Direction::forward || p.batch < 1) return "";
  // The small tiles over the whole case: on a varlen case packed_variant_tiles runs them (its
  // sequences are batches of one); on a dense one, host.flash's dense kernel with them.
  TensorMap tiled;
  if (p.varlen()) {
    tiled = flash_run(p, inputs, Plant::packed_variant_tiles);
  } else {
    DenseOptions small;
    small.key_tile = sdpa::kBatchVariantTile;
    tiled = flash_run_dense(p, inputs, Plant::none, small);
  }
  const TensorMap usual = flash_run(p, inputs, Plant::none);
  // The elements of batch entry 0 (batch_variant_tiles) or all of them: O leads with the entry's
  // rows in every layout, lse with them per head ([Hq, Tq]) in the varlen layout.
  const bool entry0 = plant == Plant::batch_variant_tiles;
  const int64_t rows0 = p.varlen() ? p.seqlens_q[0] : p.seq_q, Tq = p.total_q();
  for (const auto& [name, t] : usual) {
    const HostTensor& u = tiled.at(name);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (entry0) {
        const bool shared = !p.varlen()     ? i < t.numel() / p.batch
                            : name == "lse" ? i % Tq < rows0
                                            : i < rows0 * p.heads_q * p.head_dim_v;
        if (!shared) continue;
      }
      if (t.code(i) != u.code(i)) return "";
    }
  }
  return "the " + std::to_string(sdpa::kBatchVariantTile) + "-key tiles give " +
         (entry0 ? "batch entry 0" : std::string("every element")) +
         " the same bytes as 64-key tiles on this case's inputs (every row's running maximum settles where both "
         "tilings agree): the plant changes no byte the check compares";
}

std::string unchanged_blind_spot(const sdpa::Problem& p, const TensorMap& inputs, Plant plant) {
  const TensorMap planted = run_as(p, inputs, plant, plant, false),
                  usual = run_as(p, inputs, plant, Plant::none, false);
  for (const auto& [name, t] : usual) {
    const HostTensor& u = planted.at(name);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.code(i) != u.code(i)) return "";
  }
  return "on this case's inputs the plant gives every output " + std::string(parent_name(plant)) +
         "'s very bytes: it changes nothing to see";
}

}  // namespace opcts::host_sdpa
