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
// Bias check (aggregate, per output):
//   β = Σ w·e / Σ w² (w = want, e = got − want) is the relative error common to all elements:
//   a scale off by δ gives β ≈ δ, while the per-element bound grows with √Q. Noise: e_i has
//   variance proxy v_i = V_i + s_i²/4 (s_i the output's spacing at |w_i|: RN(v) and RN(x) of
//   nearby v, x differ by 0 or s, with mean v − x and variance <= s²/4), so σ_β² =
//   Σ w_i²·v_i / (Σ w_i²)² and |β − E β| <= λ·σ_β. A correct device's E β:
//     - fp32 roundings common to every element (fl(s_a·s_b) of a tensorwise GEMM, the global
//       scale): |β| <= ε = γ_5(u32);
//     - rne adders: 0 (their errors are symmetric and uncorrelated with the value);
//     - truncating adders shrink, β in [−D, 0]. Per chunk E[e·x] is the sum of (1) products
//       truncated toward zero: E[e_i·x] = E[e_i·t_i] (the other terms are independent and
//       symmetric) = −E[δ_i·|t_i|], δ_i < u_p·(|C| + max_step|t|), and by Cauchy–Schwarz
//       Σ_i E[(|C| + max|t|)·|t_i|] <= (√n + √g)·Q_c <= 2√n·Q_c; (2) rises of the sum through a
//       level L: E[e·x] = −E[loss·|S|] >= −u_p·L·2L per rise, Σ_j 2L_j²·(2/σ)φ(L_j/σ)·E|G| <=
//       4·0.581·σ_C·E|G| (0.581: the largest Σ_j t_j²·φ(t_j)), summed <= 2.33·√m·Q_c; (3) the sum
//       aligned to a larger product: <= u_p·Q_step each, <= u_p·Q_c. Hence
//       D = (4.33·√n + 1)·u_p (the chunks combine with weights Q_c/Q).
//   A correct device's β lies in [−D − ε − λσ_β, ε + λσ_β]; outside it is a FAIL.
#include "runner/accumulator.hpp"

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
// The constants of the drift derivation above (largest Σ_j t_j·φ(t_j) and Σ_j t_j²·φ(t_j)
// over geometric grids t_j = 2^j·t_0, rounded up).
constexpr double kRisesPerLevel = 2 * 0.723;
constexpr double kRiseWeight = 4 * 0.581;

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
  b.c_epi = gamma(5, kU32);
  if (st.zero_mean && false_alarm > 0) {
    b.lambda = azuma_lambda(false_alarm);
    b.c_var = std::max(0.0, roundings) * up * up + static_cast<double>(chunks + 1) * kU32 * kU32;
    if (trunc) {
      const double rn = std::sqrt(static_cast<double>(n));
      b.c_drift = (kRisesPerLevel + 1) * rn * up;
      b.slope_drift = ((2 + kRiseWeight) * rn + 1) * up;
    }
  }
  return b;
}

double AccumulationBound::element(const ReductionStats& st, size_t i) const {
  if (exact) return 0;
  const double s = st.abs_sum[i], x = st.magnitude[i];
  double acc = s > 0 ? c_wc * s : 0.0;  // c_wc may be +inf (k·u >= 1): no worst case, but 0·inf is not 0
  if (c_var > 0) {
    const double q = st.sq_sum[i];
    acc = std::min(acc, lambda * std::sqrt(c_var * q) + c_drift * std::sqrt(q));
  }
  return acc + c_epi * (x + acc);
}

double AccumulationBound::variance(const ReductionStats& st, size_t i) const {
  return exact ? 0 : c_var * st.sq_sum[i];
}

void SlopeAccumulator::add(double want, double err, double noise_variance) {
  sww_ += want * want;
  swe_ += want * err;
  sw2v_ += want * want * noise_variance;
}

void SlopeAccumulator::merge(const SlopeAccumulator& o) {
  sww_ += o.sww_;
  swe_ += o.swe_;
  sw2v_ += o.sw2v_;
}

SlopeCheck SlopeAccumulator::finish(const AccumulationBound& b) const {
  SlopeCheck c;
  if (!(sww_ > 0) || !(b.c_var > 0) || !std::isfinite(sww_)) return c;
  c.slope = swe_ / sww_;
  const double noise = b.lambda * std::sqrt(sw2v_) / sww_;
  c.lo = -(b.slope_drift + b.c_epi + noise);
  c.hi = b.c_epi + noise;
  return c;
}

}  // namespace opcts
