// The per-element error bounds of the indexing families' accumulation models, derived below.
//
// One output element: the exact value x = s0 + Σ_j t_j of self's s0 (exact in the dtype d) and
// the n terms t_j landing on it (src, or alpha·source: exact in double, but a term the device
// forms in d or fp32 may round once: τ_j = ½·ulp_d(|t_j|) when RN_d(t_j) ≠ t_j, else 0). Write
// S = Σ|t_j|, T = |s0| + S, ulp_d(y) for the spacing of d at magnitude y (its subnormal spacing
// below the smallest normal; monotone in y), u_d = 2^-p_d for d's precision p_d (bf16 8, fp16
// 11, fp32 24, fp64 53 bits: RN moves y by at most ½·ulp_d(|y|) <= u_d·|y|), u_a = 2^-24 for the
// fp32 accumulator (2^-53 when d is fp64) and θ_k(u) = (1 + u)^k − 1 (Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., Lemma 3.1: a value that passes through k
// roundings of relative size <= u moves by at most θ_k(u) of itself; unlike γ_k = ku/(1 − ku) it
// stays finite for ku >= 1, where a counter past 2^24 fp32 adds lives).
//
// Two facts carry the models. (1) RN(r + t) with r representable is at most |t| from r + t
// (r itself is a candidate), and at most ½·ulp(|r + t|) from it; so one add's error is
// <= min(|t|, ½·ulp_d(M)) for any M bounding the magnitudes in play. (2) Every partial value
// an impl holds is within E of an exact partial sum, so M = T + E bounds them all, where E is
// any valid bound of the error: starting from the trivial E⁰ (each min at its first argument)
// and iterating E ← f(E) gives valid, decreasing bounds (f is monotone); three steps settle it.
//
//   per_add  r_0 = s0, r_k = RN_d(r_{k−1} + t̂_σ(k)) in any order σ:
//              E = Στ + Σ_j min(|t_j| + τ_j, ½·ulp_d(T + E)).
//            A bf16 counter of ones stops at 256 (256 + 1 rounds back to 256): the bound, about
//            S, admits it, as it must for one atomicAdd per term.
//   grouped  any partition into groups g, each summed in the accumulator (|g| − 1 additions:
//            θ_{n−1}(u_a)·Σ_g of the group), rounded to d and added to r by one rounding in d.
//            Both roundings of a group act on at most c·Σ_g(|t| + τ), c = (1 + u_d)(1 + θ), and
//            min(·, h) is subadditive in its first argument, so whatever the grouping
//              E = Στ + θ_{n−1}(u_a)·(S + Στ) + 2·Σ_j min(c·(|t_j| + τ_j), ½·ulp_d(T + E)).
//   once     v = s0 + Σ t̂_j summed in the accumulator in any order (each value passes through at
//            most n additions), then one rounding to d, which the `bounded` metric adds
//            (ulp_d(|x| + E)):  E = Στ + θ_n(u_a)·(T + Στ).
//   warp32   grouped with the groups known (the terms sharing t / 32): each group g's fp32 sum
//            Ĝ_g is within w_g = θ_{|g|−1}(u_a)·Σ_g(|t| + τ) of G_g = Σ_g t̂, then rounded to d
//            once and added by one rounding in d: per_add's process over the terms G_g (each
//            formed in fp32 and rounded once, τ_g = ½·ulp_d(|G_g| + w_g) when G_g is not a value
//            of d), so E = Σ_g w_g + Στ + per_add's E over the G_g, its probabilistic form
//            included (group sums of independent symmetric terms are independent and symmetric);
//            0 where per_add's is (every partial sum exact in d: the group sums too).
// Probabilistic, for symmetric fills (ElementSums::symmetric: self and the terms independent
// and symmetric about zero, the normal fill; never the ones or positive fills, whose absorbed
// adds — a bf16 counter at 256 — err one way). The total error is Σ_k e_k over the roundings
// (an add's e_k = RN(r + t) − (r + t), the whole of it, absorption included). For each
// rounding, flipping the sign of the term it adds maps r + t to r − t, and on a grid
// symmetric about r the error to its negative: e_k has conditional mean zero except where
// r ± t straddle a binade boundary (the grid's spacing halves below it). Azuma–Hoeffding for
// the mean-zero part: P(|Σ (e_k − E e_k)| >= Λ·√(Σ c_k²)) <= 2·exp(−Λ²/2), |e_k| <= c_k, with
// Λ = √(2·ln(2/P)) = 7.53 at P = 1e-12 per element (the scaled GEMMs' false_alarm). An add's
// c_k <= min(|t_k| + τ_k, max(u_d·|r_k|, h_sub)) (h_sub: half the subnormal spacing) and, as
// runner/accumulator.cpp ASSUMES for the GEMMs, c_k² is replaced by its expectation: E r_k² <=
// s0² + Q for Q = Σ t² whatever the order (independent zero-mean terms). So
//   per_add  V = min(Σ_j (|t_j| + τ_j)², n·(u_d²·(s0² + Q) + h_sub²));
//   grouped  V = min(4·Σ_j (c·(|t_j| + τ_j))², (n + 1)·(u_d²·(s0² + Q) + h_sub²)), the adds' and
//            the groups' roundings to d (Σ_g E G_g² = Q), the fp32 sums within groups outright;
//   once     V = n·u_a²·(s0² + Q + Στ²), then the one rounding the metric adds.
// The straddling adds' means: the straddle needs |t| above r's distance to the boundary below
// it, at most ½·ulp(r) is at stake per sign, so |E e_k| <= ¾·ulp_d(r)·P(straddle); with r's
// position log-uniform in its binade, P(straddle) <= E|t|/(|r|·ln 2) and ulp_d(r) <= 2·u_d·|r|:
// |E e_k| <= 2.2·u_d·E|t_k|, summed outright as 2.2·u_d·S (u_a for once). Each model's E is
// then min(worst case, Στ + Λ·√V + 2.2·u·S (+ grouped's fp32 sums)), never looser than the proof.
// Exact cases give E = 0 and so a bit-exact comparison: with q the smallest unit in the last
// place among s0 and the terms, every partial sum of every order is a multiple of q of
// magnitude <= T, representable in p bits when T <= 2^p·q (and T below d's overflow). per_add
// and grouped need it in p_d; once needs it in the accumulator and then is off only by the one
// rounding RN_d(x) − x (0 when x is representable; left to the metric's inf rule when x
// overflows d). The reference's own error (double-double sums, stored as the nearest double:
// Ogita, Rump and Oishi, SIAM J. Sci. Comput. 26(6), 2005, Prop. 4.5) adds
// (2^-53 + θ_n(2^-53)²)·T when the sums are not exact.
#include <array>
#include <bit>
#include <cmath>

#include "core/azuma.hpp"
#include "refimpl/indexing.hpp"
#include "refimpl/indexing_codes.hpp"

namespace opcts::indexing {

std::string_view to_string(Accumulation a) {
  switch (a) {
    case Accumulation::per_add: return "per_add";
    case Accumulation::grouped: return "grouped";
    case Accumulation::once: return "once";
    case Accumulation::warp32: return "warp32";
  }
  return "?";
}

const std::vector<Accumulation>& all_accumulations() {
  static const std::vector<Accumulation> a = {Accumulation::per_add, Accumulation::grouped, Accumulation::once,
                                              Accumulation::warp32};
  return a;
}

std::string bound_key(Accumulation a) { return opcts::bound_key("out", to_string(a)); }

namespace {

double theta(double k, double u) { return std::expm1(k * std::log1p(u)); }

// Λ at P = 1e-12 per element, √(2·ln(2e12)) = 7.5265089 (the file comment), computed once.
const double kAzumaSigmas = azuma_lambda(1e-12);
// The straddling adds' mean, per unit of u·S (the file comment).
constexpr double kStraddleMean = 2.2;

// Whether x is a value of d (the fast form of round_to(d, x) == x for the four float dtypes).
bool representable(DType d, double x) {
  if (d == DType::fp64) return true;
  const auto f = static_cast<float>(x);
  if (static_cast<double>(f) != x) return false;
  if (d == DType::fp16) return fp16_to_float(float_to_fp16(f)) == f;
  if (d == DType::bf16) return bf16_to_float(float_to_bf16(f)) == f;
  return true;
}

int precision(DType t) { return dtype_info(t).format.mantissa_bits + 1; }

// The unit in the last place of a non-zero finite x: the value of its lowest set bit.
double lowest_bit(double x) {
  int e = 0;
  const double f = std::frexp(std::fabs(x), &e);  // |x| = f·2^e, f in [0.5, 1): 53-bit mantissa
  const auto mant = static_cast<uint64_t>(std::ldexp(f, 53));
  return std::ldexp(1.0, e - 53 + std::countr_zero(mant));
}

// Σ_j min(c·(|t_j| + τ_j), h): the adds' share of per_add and grouped.
double capped(const ElementSums& s, const std::vector<double>& tau, double c, double h) {
  double acc = 0;
  for (int64_t j = 0; j < s.count; ++j) acc += std::min(c * (std::fabs(s.terms[j]) + tau[static_cast<size_t>(j)]), h);
  return acc;
}

}  // namespace

namespace {

// What every model's E reads of one element (the file comment's S, Q, Στ, Στ², Σ(|t| + τ)²,
// q, T), gathered in one pass over its terms; each τ_j is left in `tau` for capped().
struct TermSums {
  double n = 0, S = 0, Q = 0, sum_tau = 0, sum_tau2 = 0, term_sq = 0, q = INFINITY;
  double per_rounding = 0;  // the probabilistic variance proxies' factor: one rounding in d
  double T = 0;             // |s0| + S
  // Whether every partial sum of every order is exact in p bits and below max_finite.
  bool exact_in(int p, double max_finite) const {
    return sum_tau == 0 && (T == 0 || T <= std::ldexp(q, p)) && T <= max_finite;
  }
  // The reference's own error (the file comment).
  double e_ref() const { return (0x1p-53 + std::pow(theta(n, 0x1p-53), 2)) * T; }
};

TermSums term_sums(const ElementSums& s, std::vector<double>& tau) {
  const DType d = s.dtype;
  const double u_d = std::ldexp(1.0, -precision(d));
  TermSums v;
  v.n = static_cast<double>(s.count);
  tau.assign(static_cast<size_t>(s.count), 0.0);
  if (s.self != 0) v.q = lowest_bit(s.self);
  for (int64_t j = 0; j < s.count; ++j) {
    const double t = s.terms[j];
    v.S += std::fabs(t);
    v.Q += t * t;
    if (t != 0) v.q = std::min(v.q, lowest_bit(t));
    if (!representable(d, t)) v.sum_tau += tau[static_cast<size_t>(j)] = 0.5 * spacing_at(d, std::fabs(t));
    const double tj = tau[static_cast<size_t>(j)];
    v.sum_tau2 += tj * tj;
    v.term_sq += (std::fabs(t) + tj) * (std::fabs(t) + tj);
  }
  const double h_sub = 0.5 * spacing_at(d, 0);  // half the subnormal spacing
  v.per_rounding = u_d * u_d * (s.self * s.self + v.Q) + h_sub * h_sub;
  v.T = std::fabs(s.self) + v.S;
  return v;
}

// per_add's E (the file comment), e_ref included; 0 when every partial sum is exact in d.
double per_add_bound(const ElementSums& s, const TermSums& v, const std::vector<double>& tau) {
  const DType d = s.dtype;
  if (v.exact_in(precision(d), dtype_info(d).max_finite)) return 0;
  const double u_d = std::ldexp(1.0, -precision(d));
  double per_add = v.sum_tau + v.S + v.sum_tau;  // E⁰: every min at its first argument
  for (int it = 0; it < 3; ++it) per_add = v.sum_tau + capped(s, tau, 1, 0.5 * spacing_at(d, v.T + per_add));
  if (s.symmetric)
    per_add = std::min(per_add, v.sum_tau + kAzumaSigmas * std::sqrt(std::min(v.term_sq, v.n * v.per_rounding)) +
                                    kStraddleMean * u_d * v.S);
  return per_add + v.e_ref();
}

// warp32's E (the file comment) given per_add's E over the terms themselves: per_add's process
// over the group sums (only per_add's bound of them, not the other models').
double warp32_bound(const ElementSums& s, double per_add_of_terms) {
  if (per_add_of_terms == 0 || !s.positions) return -1;  // exact (0), or no groups known (-1: grouped's)
  const DType d = s.dtype;
  const double u_a = d == DType::fp64 ? 0x1p-53 : 0x1p-24;
  thread_local std::vector<double> sums, tau;
  sums.clear();
  double within = 0, tau_terms = 0, widened = 0;
  for (int64_t a = 0; a < s.count;) {
    int64_t b = a;
    double g = 0, abs_sum = 0;
    while (b < s.count && s.positions[b] / 32 == s.positions[a] / 32) {
      const double t = s.terms[b++];
      const double tau_t = representable(d, t) ? 0 : 0.5 * spacing_at(d, std::fabs(t));
      g += t, abs_sum += std::fabs(t) + tau_t, tau_terms += tau_t;
    }
    const double w = theta(static_cast<double>(b - a - 1), u_a) * abs_sum;
    within += w;
    // τ_g at |G_g| + w_g: RN_d of the fp32 sum may sit one binade above G_g's.
    if (!representable(d, g)) widened += 0.5 * (spacing_at(d, std::fabs(g) + w) - spacing_at(d, std::fabs(g)));
    sums.push_back(g);
    a = b;
  }
  ElementSums groups = s;
  groups.terms = sums.data();
  groups.count = static_cast<int64_t>(sums.size());
  groups.positions = nullptr;
  const TermSums v = term_sums(groups, tau);
  return within + tau_terms + widened + per_add_bound(groups, v, tau);
}

}  // namespace

std::array<double, 4> bounds(const ElementSums& s) {
  if (s.count == 0) return {0, 0, 0, 0};  // out = self, copied
  const DType d = s.dtype;
  const double u_a = d == DType::fp64 ? 0x1p-53 : 0x1p-24;
  const int p_a = d == DType::fp64 ? 53 : 24;
  const double u_d = std::ldexp(1.0, -precision(d));

  thread_local std::vector<double> tau;
  const TermSums v = term_sums(s, tau);
  const double n = v.n, S = v.S, sum_tau = v.sum_tau, T = v.T;
  const double e_ref = v.e_ref();
  const double max_d = dtype_info(d).max_finite;
  std::array<double, 4> e{};

  e[static_cast<size_t>(Accumulation::per_add)] = per_add_bound(s, v, tau);
  if (!v.exact_in(precision(d), max_d)) {
    const double th = theta(n - 1, u_a), c = (1 + u_d) * (1 + th);
    const double within = sum_tau + th * (S + sum_tau);
    double grouped = within + 2 * c * (S + sum_tau);
    for (int it = 0; it < 3; ++it) grouped = within + 2 * capped(s, tau, c, 0.5 * spacing_at(d, T + grouped));
    if (s.symmetric)
      grouped = std::min(grouped, within + kAzumaSigmas * std::sqrt(std::min(4 * c * c * v.term_sq, (n + 1) * v.per_rounding)) +
                                      kStraddleMean * u_d * S);
    e[static_cast<size_t>(Accumulation::grouped)] = grouped + e_ref;
  }
  double once = sum_tau + theta(n, u_a) * (T + sum_tau);
  if (s.symmetric)
    once = std::min(once, sum_tau + kAzumaSigmas * u_a * std::sqrt(n * (s.self * s.self + v.Q + v.sum_tau2)) + kStraddleMean * u_a * S);
  e[static_cast<size_t>(Accumulation::once)] =
      v.exact_in(p_a, dtype_info(d == DType::fp64 ? DType::fp64 : DType::fp32).max_finite)
          ? (std::fabs(s.exact) > max_d ? 0 : std::fabs(round_to(d, s.exact) - s.exact))
          : once + e_ref;
  const double warp = warp32_bound(s, e[static_cast<size_t>(Accumulation::per_add)]);
  e[static_cast<size_t>(Accumulation::warp32)] =
      warp < 0 ? e[static_cast<size_t>(Accumulation::grouped)] : std::min(warp, e[static_cast<size_t>(Accumulation::grouped)]);
  return e;
}

double bound(Accumulation a, const ElementSums& s) { return bounds(s)[static_cast<size_t>(a)]; }

}  // namespace opcts::indexing
