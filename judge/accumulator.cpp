// Accumulator models: parsing, and the worst-case, probabilistic and bias-check bounds they give (derived below).
//
// Notation: an output element is x = os·(g·Σ_k t_k + bias) over K products t_k (references
// give them in output units: S = Σ|t|, Q = Σt², X = |x|-ish, ReductionStats). The model sums
// chunks of n = promote_every consecutive products (n = K when 0) in a p-bit adder, adds the
// c = ceil(K/n) chunk sums in IEEE fp32 (u32 = 2^-24) and applies the epilogue in fp32.
// u_p = 2^-p for rne, 2^(1-p) for truncate (a truncation loses less than one unit of the last
// place, a rounding to nearest at most half of it). γ_k(u) = k·u / (1 − k·u) (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1).
//
// Worst case (a proof; any data, any summation order):
//   Within a chunk of n products with Σ|t| = S_c:
//     rne       n − 1 additions, each one rounding relative to its result: |ĉ − c| <= γ_{n−1}(u_p)·S_c
//               (Higham §4.2, recursive summation in any order).
//     truncate  an MMA step aligns its g products and the incoming sum to the step's largest
//               exponent E and truncates each there (< 2^(E−p+1) <= u_p·max term), then
//               normalizes the sum by truncation (< u_p·|sum|); every magnitude involved is at
//               most the running Σ|t| (times 1 + O(u) for the computed sum). A chunk has at most
//               n products and at most n steps: 2n losses, |ĉ − c| <= γ_{2n}(u_p)·S_c, whatever
//               the hardware's step width g (the probe, docs/status/data/, cannot see g).
//   A chunk sum (p <= 24 bits) is exact in fp32. Outside the chunk every path passes through
//   at most 2 block-scale roundings and c − 1 fp32 additions: γ_{c+1}(u32). Composing,
//     E_acc = (γ_in + γ_out + γ_in·γ_out)·S.
//   The epilogue's roundings — fl(s_a·s_b) and its product when the scales are applied after
//   the sum, the global scale, the bias add, the output scale: 5 — act on values of at most
//   X + E_acc:   E = E_acc + γ_5(u32)·(X + E_acc).
//   For the default model {24, rne, whole K} this is (K + 1)·u32·S + 5·u32·X to first order:
//   the γ_{K+5}·S the scaled_mm reference used to bake in, with the epilogue's 4 roundings on
//   the value X instead of on Σ|t|.
//
// Probabilistic (zero-mean fills; false-alarm probability P per element):
//   Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019, "A new approach to probabilistic rounding
//   error analysis") treat relative rounding errors as mean-independent, mean-zero random
//   variables and replace γ_n by λ·√n·u (Azuma–Hoeffding). Taken as is it fits neither a
//   truncating adder (its relative errors are never of mean zero) nor zero-mean products (it
//   keeps Σ|t|, which is √K times the typical partial sum). So we apply Azuma–Hoeffding to
//   the absolute errors: the error is Σ_j e_j with |e_j| <= u_p·m_j, m_j the magnitude the
//   j-th rounding acts on, and P(|Σ e_j| >= λ·√(Σ c_j²)) <= 2·exp(−λ²/2) for mean-zero e_j
//   with |e_j| <= c_j. Our fills make the products independent and symmetric about zero, so
//   flipping the sign of the term a rounding acts on flips its error: the errors of products
//   (and rne's of the sum) have conditional mean zero. ASSUMPTION: each c_j² is replaced by its
//   expectation, u_p²·E[m_j²], with E[s²] = Σ t² over the terms a partial sum holds (<= Q_c)
//   and E[max(|C|, |t_i|)²] <= E[C²] + Σ_step t² <= Q_c for an MMA step. Counting the roundings
//   as above (A = n − 1 for rne, 2n for truncate, per chunk; Σ_c Q_c = Q; outside, c − 1 adds
//   and 2 scale roundings per chunk, each on E[s²] <= Q_c or Q):
//     V = (A·u_p² + (c + 1)·u32²)·Q.
//   A truncating adder's losses of the SUM point toward zero of the sum and do not cancel
//   within a chunk (drift). They happen when the sum's exponent rises: a rise through level
//   L = 2^j loses < u_p·L; the expected number of rises through L in one step is at most
//   E|G|·f(L), G the step's sum of products and f the density of |C|, which for a near-normal
//   partial sum (ASSUMPTION: central limit) is <= (2/σ_C)·φ(L/σ_C); Σ_j L_j·(2/σ)·φ(L_j/σ)
//   <= 2·0.723 (the largest Σ_j t_j·φ(t_j) over grids t_j = 2^j·t_0). So a step drifts by at
//   most 1.45·u_p·√Q_step in expectation, plus u_p·√Q_step where the sum is aligned to a
//   larger product; over a chunk's m <= n steps Σ √Q_step <= √(m·Q_c) (Cauchy–Schwarz):
//     drift <= 2.45·√n·u_p·√Q_c;
//   the chunks' drifts follow the signs of their own sums, which are independent, so their
//   total is <= 2.45·√n·u_p·√Q at its root mean square. It is added outside the square root:
//     E_acc = λ·√V + 2.45·√n·u_p·√Q (truncate only),  E = E_acc + γ_5·(X + E_acc),
//   λ = √(2·ln(2/P)): 7.53 for P = 1e-12. The bound used is min(worst case, probabilistic), so
//   it is never looser than the proof. A simulation of the Hopper model on i.i.d. normal
//   products (tests/test_accumulator.cpp) keeps every element below a fifth of it.
//
// Known offsets and what no model covers (ReductionStats::offset, extra_rel, extra_abs): E adds
//   |offset_i| + extra_rel·S + extra_abs (int4_mm: the weights' one rounding Δ, computed exactly
//   by the reference, and its own fp64 roundings), whatever the model; a reduction without an
//   epilogue (an empty magnitude) has c_epi = 0.
//
// Bias check (aggregate, per output):
//   β = Σ w·e / Σ w² (w = want, e = got − want) is the relative error common to all elements:
//   a scale off by δ gives β ≈ δ, while the per-element bound grows with √Q. Noise: e_i has
//   variance proxy v_i = V_i + s_i²/4 (s_i the output's spacing at |w_i|: RN(v) and RN(x) of
//   nearby v, x differ by 0 or s, with mean v − x and variance <= s²/4), so σ_β² =
//   Σ w_i²·v_i / (Σ w_i²)² and |β − E β| <= λ·σ_β. A correct device's E β:
//     - fp32 roundings common to every element (fl(s_a·s_b) of a tensorwise GEMM, the global
//       scale): |β| <= ε = γ_5(u32) (0 without an epilogue);
//     - rne adders: 0 (their errors are symmetric and uncorrelated with the value);
//     - a known offset o_i (int4_mm's Δ) that a device carries all of or none of: between 0 and
//       O/Σw², O = Σ o_i·w_i;
//     - truncating adders shrink: E β lies in [−D_hi, −D_lo], derived below, and the interval
//       is centred on that prediction, not stretched from 0 to the worst drift.
//   A correct device's β lies in [−D_hi + min(0, O)/Σw² − ε − λσ_β, −D_lo + max(0, O)/Σw² + ε
//   + λσ_β]; outside it is a FAIL. The drift enters as the w²-weighted mean of each element's
//   D (w² in place of its expectation Q: the comparison checks only the elements its output's
//   range holds, a selection by |w| under which Q would overstate the expected err·w).
//
// The drift of a truncating adder (bias check). Per chunk of n products in steps of g (the
// hardware's MMA step: unknown, 1 <= g <= 32, the K of one Hopper FP8 wgmma or more than an
// m16n8k16 mma.sync takes; m = ceil(n/g) steps), to first order in u_p:
//   E[e·x] = E[e·x_c] (the other chunks are independent and symmetric) = −Σ_l E[r_l·|v_l|],
//   each loss r_l >= 0 truncating v_l (a product, the incoming sum, or the step's sum) toward
//   zero, since what is not yet summed is independent and symmetric: every term points toward
//   zero. ASSUMPTIONS, the standard ones of probabilistic rounding analysis (Higham & Mary
//   2019 §2) made explicit: (A2) the bits a truncation drops are uniform, so E[r] is half the
//   range dropped; (A3) the binade boundaries 2^j fall at a uniform phase relative to the data
//   (log2 of the magnitudes mod 1 uniform: the fills' scales and codes spread over binades), so
//   E[2^⌊log2 M⌋] = M/(2 ln 2) = c·M, c = 0.7213, and the expected sum of the levels 2^j in an
//   interval (a, b] is (b − a)/ln 2. With M = max(|C|, M_t) (C the incoming sum, M_t the step's
//   largest |t|), γ = u_p·2^⌊log2 M⌋ the step's grid, Q_< the variance of C, Q_s the step's
//   Σ E t², S_c and Q_c the chunk's Σ|t| and Σ t²:
//   (a) a product truncated to γ loses r <= γ/2 in expectation (A2), and nothing when its last
//       bit lies on the grid: b-bit products (ReductionStats::term_bits) with |t| >= 2^-δ·M,
//       δ = p − b. So E[r·|t|] <= ½c·u_p·E[M·min(|t|, 2^-δ·M)] (A3). With M <= |C| + M_t,
//       E|C| <= √Q_< and E[M_t·|t_j|] <= √(Q_s·E t_j²), summed over the chunk (Cauchy–Schwarz)
//       <= ½c·u_p·(S_c/√Q_c + √g)·Q_c; with min <= 2^-δ·M and E M² <= 2(Q_< + Q_s) <= 2Q_c,
//       <= ½c·u_p·2^(1−δ)·n·Q_c. S_c/√Q_c = ĉ·√n with ĉ = E|t|/√(E t²) <= 1: the element's
//       own S/√(K·Q) when K is one chunk (fast_accum), else 1 (chunks may differ).
//   (b) the incoming sum aligned to a step whose largest product lies in a higher binade: it
//       loses r < γ, γ/2 in expectation, with |C| < 2^⌊log2 M_t⌋ <= M_t: E[r·|C|] <= ½u_p·E M_t²
//       <= ½u_p·Q_s, summed <= ½u_p·Q_c.
//   (c) the step's sum s normalized when it rises past 2^(⌊log2 M⌋+1): crossing the level L
//       drops the bit between the grids u_p·L/2 and u_p·L, u_p·L/4 in expectation (A2), so
//       E[r·|s|] = ¼u_p·E[|s|·Σ_{L in (|C|, |s|]} L] = (u_p/(4 ln 2))·E[|s|·(|s| − |C|)⁺] (A3),
//       and (|s| − |C|)⁺ <= |G|·1{G points away from zero}, |s| <= |C| + |G| (G = s − C,
//       symmetric, independent of C): <= ¼c·u_p·(E|C|·E|G| + E G²) <= ¼c·u_p·(√(Q_<·Q_s) + Q_s),
//       summed over the m steps (Cauchy–Schwarz) <= ¼c·u_p·(√m + 1)·Q_c.
//   Hence, per unit of Q and maximized over g (min(A + B, C) <= min(A, C) + B):
//     D_hi = u_p·[½c·min(ĉ·√n, 2^(1−δ)·n) + max_g (½c·√g + ¼c·√ceil(n/g)) + ½ + ¼c]
//   (shorter chunks drift less: n bounds the last one too). A lower bound counts (c) alone, at
//   leading order for a chunk of identically distributed products whose partial sums are
//   near-normal (central limit, as for the per-element drift above): E|C_s| = √(2/π)·√(s·g·q),
//   E|G| = √(2/π)·√(g·q), the rises of step s at least (u_p/(8 ln 2))·E|C_s|·E|G|, and none of
//   the other losses (all toward zero) subtracts from it; the widest step g = min(n, 32) gives
//   the least:
//     D_lo = u_p·(1/(4π ln 2))·(g/n)·Σ_{s=1}^{m−1} √s,
//   chunks weighted by their length. For Hopper's model (14 bits, promotion every 128, e4m3
//   products, δ = 6) D_hi = 4.5·u_p = 5.5e-4 and D_lo = 0.12·u_p = 1.4e-5; for FAST_ACCUM at
//   K = 4096 with ĉ = 0.5, D_hi = 24·u_p = 2.9e-3 and D_lo = 0.86·u_p = 1.1e-4 — where the
//   previous one-sided interval allowed (4.33·√n + 1)·u_p = 6.1e-3 and 3.4e-2. A product
//   2^-8 low (−32·u_p) and the last 32 of 4096 K elements dropped (−64·u_p) lie outside; the
//   emulation's measured drift (host default tier, 177 random-fill cases) is −0.1..−0.45·u_p
//   at promotion every 128 and −0.9..−1.25·u_p under FAST_ACCUM at K = 4096, inside both.
#include "judge/accumulator.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

#include "core/azuma.hpp"
#include "core/yaml_util.hpp"

namespace opcts {

std::string_view to_string(AccRounding r) { return r == AccRounding::rne ? "rne" : "truncate"; }

std::string to_string(const AccumulatorModel& m) {
  return "{bits: " + std::to_string(m.bits) + ", rounding: " + std::string(to_string(m.rounding)) +
         ", promote_every: " + std::to_string(m.promote_every) + "}";
}

AccumulatorModel parse_accumulator(const std::string& path, const YAML::Node& n) {
  if (!n.IsMap()) yaml_fail(path, n, "'accumulator' must be a map {bits, rounding, promote_every}");
  check_keys(path, n, {"bits", "rounding", "promote_every"});
  AccumulatorModel m;
  try {
    if (n["bits"]) m.bits = n["bits"].as<int>();
    if (n["promote_every"]) m.promote_every = n["promote_every"].as<int64_t>();
    if (n["rounding"]) {
      const auto r = n["rounding"].as<std::string>();
      if (r == "rne") m.rounding = AccRounding::rne;
      else if (r == "truncate") m.rounding = AccRounding::truncate;
      else yaml_fail(path, n["rounding"], "'rounding': '" + r + "' (expected rne or truncate)");
    }
  } catch (const YAML::Exception& e) {
    yaml_fail(path, n, e.msg);
  }
  if (m.bits < 2 || m.bits > 24)
    yaml_fail(path, n["bits"], "'bits' must lie in 2..24 (chunk sums are promoted to fp32)");
  if (m.promote_every < 0) yaml_fail(path, n["promote_every"], "'promote_every' must be >= 0 (0: never promoted)");
  return m;
}

namespace {

constexpr double kU32 = 0x1p-24;
// The constant of the per-element drift derivation above (largest Σ_j t_j·φ(t_j) over
// geometric grids t_j = 2^j·t_0, rounded up).
constexpr double kRisesPerLevel = 2 * 0.723;
// The bias check's drift (derivation above): c = 1/(2 ln 2), the mean of 2^⌊log2 M⌋/M at a
// uniform phase (A3); the widest MMA step a truncating adder's model allows; the leading
// order of the rises' drift, 1/(4π ln 2).
const double kPhase = 1 / (2 * std::log(2.0));
constexpr int64_t kMaxStep = 32;
const double kRiseLeading = 1 / (4 * M_PI * std::log(2.0));

// γ_k(u) = k·u/(1 − k·u); +inf once k·u reaches 1 (the worst case says nothing then).
double gamma(double k, double u) {
  const double ku = std::max(0.0, k) * u;
  return ku < 1 ? ku / (1 - ku) : INFINITY;
}

int ceil_log2(int64_t n) {
  int b = 0;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}

// D_hi of a chunk of n products without its ĉ term, per unit of u_p: the larger over the step
// widths g of (a)'s largest product and (c)'s rises, plus (b) and (c)'s step sums.
double drift_hi_steps(int64_t n) {
  double worst = 0;
  for (int64_t g = 1; g <= std::min(n, kMaxStep); ++g) {
    const double steps = static_cast<double>((n + g - 1) / g);
    worst = std::max(worst, kPhase / 2 * std::sqrt(static_cast<double>(g)) + kPhase / 4 * std::sqrt(steps));
  }
  return worst + 0.5 + kPhase / 4;
}

// D_lo of a chunk of n products per unit of u_p: the rises' leading order at the widest step.
double drift_lo_chunk(int64_t n) {
  const int64_t g = std::min(n, kMaxStep), steps = (n + g - 1) / g;
  double sum = 0;
  for (int64_t s = 1; s < steps; ++s) sum += std::sqrt(static_cast<double>(s));
  return kRiseLeading * static_cast<double>(g) / static_cast<double>(n) * sum;
}

}  // namespace

AccumulationBound accumulation_bound(const AccumulatorModel& m, const ReductionStats& st, double false_alarm) {
  AccumulationBound b;
  const int64_t K = st.terms;
  const int64_t n = m.promote_every > 0 && m.promote_every < K ? m.promote_every : K;
  const int64_t chunks = n > 0 ? (K + n - 1) / n : 0;
  const bool trunc = m.rounding == AccRounding::truncate;
  const double up = std::ldexp(1.0, trunc ? 1 - m.bits : -m.bits);
  // Exact fills: every partial sum of at most n terms is below 2^(p-1) quanta (p bits, no
  // alignment loss: the step's grid is at most one quantum) and the whole sum below 2^23 (fp32).
  b.exact = st.exact_term_bits >= 0 && ceil_log2(n) + st.exact_term_bits <= m.bits - 1 &&
            ceil_log2(K) + st.exact_term_bits <= 23;
  const double roundings = trunc ? 2.0 * static_cast<double>(n) : static_cast<double>(n - 1);
  const double g_in = gamma(roundings, up), g_out = gamma(static_cast<double>(chunks + 1), kU32);
  b.c_wc = g_in + g_out + g_in * g_out;
  b.c_epi = st.magnitude.empty() ? 0.0 : gamma(5, kU32);  // no epilogue, no epilogue rounding
  if (st.zero_mean && false_alarm > 0) {
    b.lambda = azuma_lambda(false_alarm);
    b.c_var = std::max(0.0, roundings) * up * up + static_cast<double>(chunks + 1) * kU32 * kU32;
    if (trunc && K > 0) {
      const double rn = std::sqrt(static_cast<double>(n));
      b.c_drift = (kRisesPerLevel + 1) * rn * up;
      // The bias check's [D_lo, D_hi] (derivation above): (a)'s ĉ term capped by the product
      // bits where they are known; ĉ = 1 unless K is one chunk.
      const double cap = st.term_bits >= 0 && st.term_bits < m.bits
                             ? std::ldexp(static_cast<double>(n), 1 - (m.bits - st.term_bits))
                             : INFINITY;
      b.drift_hi_ct = kPhase / 2 * rn * up;
      b.drift_ct_cap = kPhase / 2 * cap * up;
      b.drift_ct_terms = chunks == 1 && !st.ragged ? K : 0;  // S/√(K·Q) is ĉ only where every element sums K
      b.drift_hi = drift_hi_steps(n) * up;
      const int64_t full = K / n, rest = K % n;
      b.drift_lo = (static_cast<double>(full * n) * drift_lo_chunk(n) +
                    (rest ? static_cast<double>(rest) * drift_lo_chunk(rest) : 0.0)) /
                   static_cast<double>(K) * up;
    }
  }
  return b;
}

double AccumulationBound::element(const ReductionStats& st, size_t i) const {
  // What no model covers: the known offset and the reference's own allowance.
  const double fixed =
      (st.offset.empty() ? 0.0 : std::fabs(st.offset[i])) + st.extra_rel * st.abs_sum[i] + st.extra_abs;
  if (exact) return fixed;
  const double s = st.abs_sum[i], x = st.magnitude.empty() ? 0.0 : st.magnitude[i];
  double acc = s > 0 ? c_wc * s : 0.0;  // c_wc may be +inf (k·u >= 1): no worst case, but 0·inf is not 0
  if (c_var > 0) {
    const double q = st.sq_sum[i];
    acc = std::min(acc, lambda * std::sqrt(c_var * q) + c_drift * std::sqrt(q));
  }
  return fixed + acc + c_epi * (x + acc);
}

double AccumulationBound::variance(const ReductionStats& st, size_t i) const {
  return exact ? 0 : c_var * st.sq_sum[i];
}

double AccumulationBound::drift_hi_of(const ReductionStats& st, size_t i) const {
  double ct = 1;  // ĉ = E|t|/√(E t²) <= 1; the element's own when K is one chunk
  if (drift_ct_terms > 0 && st.sq_sum[i] > 0)
    ct = std::min(1.0, st.abs_sum[i] / std::sqrt(static_cast<double>(drift_ct_terms) * st.sq_sum[i]));
  return drift_hi + std::min(drift_hi_ct * ct, drift_ct_cap);
}

AccumulationBound::Expected AccumulationBound::expected(const ReductionStats& st, size_t i, double want) const {
  Expected e;
  // E[err·x] = −D·E[x²] per element; weighted by the element's own want² (not by Q, its
  // expectation), so that a check over a subset of elements (the ones the output's range
  // holds, which the comparison selects by |want|) keeps the relative drift D.
  if (!exact && drift_hi > 0) {
    e.drift_lo = -drift_hi_of(st, i) * want * want;
    e.drift_hi = -drift_lo * want * want;
  }
  if (!st.offset.empty()) e.offset = st.offset[i];
  return e;
}

void SlopeAccumulator::add(double want, double err, double noise_variance, const AccumulationBound::Expected& e) {
  sww_ += want * want;
  swe_ += want * err;
  sw2v_ += want * want * noise_variance;
  lo_ += e.drift_lo;
  hi_ += e.drift_hi;
  swo_ += want * e.offset;
}

void SlopeAccumulator::merge(const SlopeAccumulator& o) {
  sww_ += o.sww_;
  swe_ += o.swe_;
  sw2v_ += o.sw2v_;
  lo_ += o.lo_;
  hi_ += o.hi_;
  swo_ += o.swo_;
}

SlopeCheck SlopeAccumulator::finish(const AccumulationBound& b) const {
  SlopeCheck c;
  if (!(sww_ > 0) || !(b.c_var > 0) || !std::isfinite(sww_)) return c;
  c.slope = swe_ / sww_;
  const double noise = b.lambda * std::sqrt(sw2v_) / sww_;
  c.lo = (lo_ + std::min(0.0, swo_)) / sww_ - b.c_epi - noise;
  c.hi = (hi_ + std::max(0.0, swo_)) / sww_ + b.c_epi + noise;
  return c;
}

}  // namespace opcts
