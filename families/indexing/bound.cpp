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
// The stall floor (one-signed terms; the ones and positive fills). A per-add counter stalls:
// once ½·ulp(r) exceeds a term, adding it changes nothing, so the bounds above allow a 16-bit
// counter to lose almost all of S, and with it anything in [x − S, x + S]. But it loses no mass
// below its stall point. Let every term have the sign σ and σ·s0 >= 0, and write r for σ·r:
// RN is monotone, so r_0 <= r_1 <= ... <= r_n, and an add that rounds down loses
// ℓ_k = r_{k−1} + t̂_k − r_k <= min(t̂_k, ½·ulp_d(r_k)) <= min(|t_k| + τ_k, ½·ulp_d(r_n)) (r_k is
// the grid point below the sum, whose gap to the next is ulp_d(r_k); r_k <= r_n and ulp_d is
// monotone; an add that rounds up loses nothing). Summing, r_n >= F(r_n) with
//   F(r) = σ·x − Στ − e_ref − Σ_j min(|t_j| + τ_j, ½·ulp_d(r)),
// non-increasing in r, so r_n is at least the least r with r >= F(r): the floor, a value of d
// (r_n is one), found binade by binade (F is constant on each). A bf16 counter of 3000 ones
// has floor 256, exactly where it stalls; one that lost its duplicates (1) is far below it.
// grouped: each group's sum is rounded to d and then added, two roundings that each lose at
// most min(c·Σ_g(|t| + τ), ½·ulp_d(r_n)) (the rounded group sum is at most r_n: r_{k−1} >= 0),
// subadditive over any grouping, and its fp32 sums lose at most Σ_j min(|t_j| + τ_j,
// ½·ulp_a(r_n/(1 − u_d))) (a group's partial sums are at most its sum, which rounds to at most
// r_n): F as above with the min doubled and c inside it, less that. warp32: per_add's
// floor over its group sums wherever those are one-signed (random-sign terms included),
// lowered twice by what forming and rounding them moves them, and never below grouped's (its
// process is one of grouped's). The side toward zero of the
// element's allowance is then min(E, σ·x − floor); the other side stays E.
//
// Conservation (judge/conservation.hpp: a group's elements — a destination row — and the whole
// output summed against the fp64 sum of self and the terms). The worst case of a group's sum is
// the sum of its elements' allowances, output roundings included; for symmetric fills the sum
// of all the group's errors is one martingale over all its roundings (independent elements,
// each its own terms), so Azuma–Hoeffding bounds it by Σ(Στ + e_ref + straddle means) +
// Λ·√(Σ V), each element's parts as below (its rounding to d under `once`, which the
// martingale does not hold, summed outright as ½·ulp_d(|x| + E)): √(elements) where the
// per-element bounds add linearly, so an error common to a row's elements (a rounding direction,
// a systematic loss) that no element shows moves the row's sum out. Exact elements add RN(x) − x.
// The group's own fp64 sum, stored as a double, adds 2^-52·Σ|x|.
//
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
// judge/accumulator.cpp ASSUMES for the GEMMs, c_k² is replaced by its expectation: E r_k² <=
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
#include <optional>

#include "core/azuma.hpp"
#include "core/spellings.hpp"
#include "families/indexing/codes.hpp"
#include "families/indexing/indexing.hpp"

namespace opcts::indexing {

constexpr Spellings<Accumulation, 4> kAccumulations{{{Accumulation::per_add, "per_add"},
                                                     {Accumulation::grouped, "grouped"},
                                                     {Accumulation::once, "once"},
                                                     {Accumulation::warp32, "warp32"}}};

std::string_view to_string(Accumulation a) { return kAccumulations.of(a); }

const std::vector<Accumulation>& all_accumulations() {
  static const std::vector<Accumulation> a = kAccumulations.values();
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

// One model's E and its probabilistic parts (the file comment): E = min(worst, sure + Λ·√var +
// mean) where `prob`, else the worst case; e_ref is in `sure` and in E.
struct Parts {
  double E = 0;
  bool prob = false;
  double sure = 0, var = 0, mean = 0;
};

Parts with_prob(double worst, bool symmetric, double sure, double var, double mean, double e_ref) {
  Parts r{worst, symmetric, sure + e_ref, var, mean};
  if (symmetric) r.E = std::min(worst, sure + kAzumaSigmas * std::sqrt(var) + mean);
  r.E += e_ref;
  return r;
}

// per_add's E (the file comment), e_ref included; 0 when every partial sum is exact in d.
Parts per_add_parts(const ElementSums& s, const TermSums& v, const std::vector<double>& tau) {
  const DType d = s.dtype;
  if (v.exact_in(precision(d), dtype_info(d).max_finite)) return {};
  const double u_d = std::ldexp(1.0, -precision(d));
  double per_add = v.sum_tau + v.S + v.sum_tau;  // E⁰: every min at its first argument
  for (int it = 0; it < 3; ++it) per_add = v.sum_tau + capped(s, tau, 1, 0.5 * spacing_at(d, v.T + per_add));
  return with_prob(per_add, s.symmetric, v.sum_tau, std::min(v.term_sq, v.n * v.per_rounding),
                   kStraddleMean * u_d * v.S, v.e_ref());
}

// The stall floor (the file comment): for terms of one sign σ and σ·s0 >= 0, the least value r
// >= 0 of d with r >= y − shift − k·Σ_j min(c·(|t_j| + τ_j), ½·ulp_d(r)), y = σ·x: the
// device's σ·result is at least that. F(r), the right side, is constant on each binade of r
// and non-increasing from binade to binade, so the first binade whose top exceeds its F holds
// the answer: max(its bottom, F) rounded up to d's grid. -inf when the terms are not one-signed.
struct Floor {
  double at = -INFINITY;  // σ·result >= at; -inf: none
  bool positive = true;   // σ = +1
};

// `acc` (grouped's fp32 group sums): their own additions lose at most
// Σ_j min(|t_j| + τ_j, ½·ulp_acc(r/(1 − u_d))) too (each partial sum of a group is at most the
// group's sum, which rounds to a value of d at most r), taken at the top of r's binade.
Floor stall_floor(const ElementSums& s, const std::vector<double>& tau, double c, double k, double shift,
                  std::optional<DType> acc = std::nullopt) {
  const DType d = s.dtype;
  bool pos = true, neg = true;
  for (int64_t j = 0; j < s.count; ++j) pos = pos && s.terms[j] >= 0, neg = neg && s.terms[j] <= 0;
  if (!pos && !neg) return {};
  const double sigma = pos ? 1 : -1;
  if (sigma * s.self < 0) return {};  // self against the terms: the path crosses 0
  const double y = sigma * s.exact;
  const auto& info = dtype_info(d);
  const double u_d = std::ldexp(1.0, -precision(d));
  const double sub = info.min_normal * info.epsilon;  // the subnormal spacing
  // F on the binade of spacing `spacing` whose values lie below `top`.
  auto F = [&](double spacing, double top) {
    double f = y - shift - k * capped(s, tau, c, 0.5 * spacing);
    if (acc) f -= capped(s, tau, 1, 0.5 * spacing_at(*acc, top / (1 - u_d)));
    return f;
  };
  auto up = [](double r, double spacing) { return std::ceil(r / spacing) * spacing; };  // exact: powers of two
  if (const double f = F(sub, info.min_normal); f < info.min_normal) return {up(std::max(0.0, f), sub), pos};
  int lo = std::ilogb(info.min_normal), hi = std::max(lo, std::ilogb(std::max(y, info.min_normal)) + 1);
  // Invariant: binade hi's top exceeds its F (F <= y < 2^hi's top), binade lo − 1's does not.
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (F(info.epsilon * std::ldexp(1.0, mid), std::ldexp(1.0, mid + 1)) < std::ldexp(1.0, mid + 1)) hi = mid;
    else lo = mid + 1;
  }
  const double spacing = info.epsilon * std::ldexp(1.0, lo);
  return {up(std::max(std::ldexp(1.0, lo), F(spacing, std::ldexp(1.0, lo + 1))), spacing), pos};
}

// The below and above allowances from E and a floor of σ·result (the file comment).
ModelBound sided(const ElementSums& s, const Parts& p, const Floor& floor) {
  ModelBound b{p.E, p.E, p.prob, p.sure, p.var, p.mean};
  if (!(floor.at > -INFINITY) || p.E == 0) return b;
  const double lost = std::max(0.0, (floor.positive ? s.exact : -s.exact) - floor.at);
  (floor.positive ? b.below : b.above) = std::min(p.E, lost);
  return b;
}

// warp32's parts (the file comment): per_add's process over the group sums (only per_add's
// bound of them, not the other models'), and its floor; E < 0: no groups known (grouped's).
struct Warp32 {
  Parts parts;
  Floor floor;
};
Warp32 warp32_parts(const ElementSums& s, const Parts& per_add_of_terms) {
  if (per_add_of_terms.E == 0) return {per_add_of_terms, {}};  // exact
  if (!s.positions) return {{-1}, {}};
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
  Parts p = per_add_parts(groups, v, tau);
  const double extra = within + tau_terms + widened;
  p.E += extra, p.sure += extra;
  // The floor over the group sums (one-signed group sums suffice: the process over them is
  // per_add's): lowered twice by what forming them in fp32 and rounding them to d may move them
  // (their sum, and the first argument of each add's min).
  return {p, stall_floor(groups, tau, 1, 1, v.sum_tau + v.e_ref() + 2 * extra)};
}

struct AllModels {
  std::array<Parts, 4> parts;
  std::array<Floor, 4> floor;
};

AllModels all_models(const ElementSums& s) {
  AllModels r;
  if (s.count == 0) return r;  // out = self, copied
  const DType d = s.dtype;
  const double u_a = d == DType::fp64 ? 0x1p-53 : 0x1p-24;
  const int p_a = d == DType::fp64 ? 53 : 24;
  const double u_d = std::ldexp(1.0, -precision(d));

  thread_local std::vector<double> tau;
  const TermSums v = term_sums(s, tau);
  const double n = v.n, S = v.S, sum_tau = v.sum_tau, T = v.T;
  const double e_ref = v.e_ref();
  const double max_d = dtype_info(d).max_finite;
  auto& e = r.parts;
  constexpr auto per_add = static_cast<size_t>(Accumulation::per_add),
                 grouped = static_cast<size_t>(Accumulation::grouped), once = static_cast<size_t>(Accumulation::once),
                 warp = static_cast<size_t>(Accumulation::warp32);

  e[per_add] = per_add_parts(s, v, tau);
  if (e[per_add].E > 0) r.floor[per_add] = stall_floor(s, tau, 1, 1, sum_tau + e_ref);
  if (!v.exact_in(precision(d), max_d)) {
    const double th = theta(n - 1, u_a), c = (1 + u_d) * (1 + th);
    const double within = sum_tau + th * (S + sum_tau);
    double worst = within + 2 * c * (S + sum_tau);
    for (int it = 0; it < 3; ++it) worst = within + 2 * capped(s, tau, c, 0.5 * spacing_at(d, T + worst));
    e[grouped] = with_prob(worst, s.symmetric, within, std::min(4 * c * c * v.term_sq, (n + 1) * v.per_rounding),
                           kStraddleMean * u_d * S, e_ref);
    // The fp32 sums' loss taken at the running sum (the file comment), not as `within`'s
    // θ_{n−1}(u_a)·S, which past 2^24 one-signed terms exceeds the sum itself.
    r.floor[grouped] = stall_floor(s, tau, c, 2, sum_tau + e_ref, d == DType::fp64 ? DType::fp64 : DType::fp32);
  }
  if (v.exact_in(p_a, dtype_info(d == DType::fp64 ? DType::fp64 : DType::fp32).max_finite)) {
    // Every partial sum exact in the accumulator: the result is RN_d(x), off by that rounding only.
    const double off = std::fabs(s.exact) > max_d ? 0 : std::fabs(round_to(d, s.exact) - s.exact);
    e[once] = Parts{off, true, off, 0, 0};
  } else {
    e[once] = with_prob(sum_tau + theta(n, u_a) * (T + sum_tau), s.symmetric, sum_tau,
                        u_a * u_a * n * (s.self * s.self + v.Q + v.sum_tau2), kStraddleMean * u_a * S, e_ref);
    // The probabilistic form's group sums see the one rounding to d as well (the metric adds it
    // per element): at most half a spacing at |x| + E.
    e[once].sure += 0.5 * spacing_at(d, std::fabs(s.exact) + e[once].E);
  }
  const Warp32 w = warp32_parts(s, e[per_add]);
  if (w.parts.E < 0 || w.parts.E >= e[grouped].E) {
    e[warp] = e[grouped];
    r.floor[warp] = r.floor[grouped];
  } else {
    e[warp] = w.parts;
    // Both floors hold (the warp kernel's process is one of grouped's); grouped's exists only
    // for one-signed terms, whose group sums share their sign.
    r.floor[warp] = w.floor.at >= r.floor[grouped].at ? w.floor : r.floor[grouped];
  }
  return r;
}

}  // namespace

std::array<double, 4> bounds(const ElementSums& s) {
  const AllModels m = all_models(s);
  std::array<double, 4> e{};
  for (size_t k = 0; k < e.size(); ++k) e[k] = m.parts[k].E;
  return e;
}

std::array<ModelBound, 4> model_bounds(const ElementSums& s) {
  const AllModels m = all_models(s);
  std::array<ModelBound, 4> b{};
  for (size_t k = 0; k < b.size(); ++k) b[k] = sided(s, m.parts[k], m.floor[k]);
  return b;
}

double bound(Accumulation a, const ElementSums& s) { return bounds(s)[static_cast<size_t>(a)]; }

void GroupBound::add(const ModelBound& b, double x, DType d) {
  const double e = std::max(b.above, b.below);
  // The `bounded` metric's output rounding (judge/compare.cpp): half a spacing at |x| + E (at
  // each end where the sides differ), or RN(x)'s own distance from x where E = 0.
  if (e == 0) {
    const double rounding = std::fabs(x) > dtype_info(d).max_finite ? 0 : std::fabs(round_to(d, x) - x);
    worst_above += rounding, worst_below += rounding;
  } else if (b.above == b.below) {
    worst_above += e + 0.5 * spacing_at(d, std::fabs(x) + e), worst_below += e + 0.5 * spacing_at(d, std::fabs(x) + e);
  } else {
    worst_above += b.above + 0.5 * spacing_at(d, std::fabs(x + b.above));
    worst_below += b.below + 0.5 * spacing_at(d, std::fabs(x - b.below));
  }
  if (e == 0) sure += std::fabs(x) > dtype_info(d).max_finite ? 0 : std::fabs(round_to(d, x) - x);  // exact: RN(x)
  else if (b.prob) sure += b.sure + b.mean, var += b.var;
  else prob = false;
}

void GroupBound::merge(const GroupBound& g) {
  worst_above += g.worst_above, worst_below += g.worst_below, sure += g.sure, var += g.var, abs_sum += g.abs_sum;
  prob = prob && g.prob;
}

double GroupBound::side(double worst) const {
  // The group's fp64 sum of the exact values is stored as a double: half an ulp of it at most,
  // which 2^-52 of Σ|x| covers (the double-double sum's own error is far below it).
  const double stored = 0x1p-52 * abs_sum;
  return std::min(worst, prob ? sure + kAzumaSigmas * std::sqrt(var) : INFINITY) + stored;
}

}  // namespace opcts::indexing
