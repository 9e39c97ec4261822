// The floor of each lse_i (refimpl only): what a correct kernel's fp32 arithmetic may move
// lse = m + ln Σ_j exp(s_j − m) by, at a false-alarm probability P = 2·e^-24 per element for
// its probabilistic parts. lse has no rounding to the dtype: the floor is its whole bound
// (families/sdpa/bound.hpp bounds O and the gradients; P's relative error there includes it).
//
// lse moves by Σ_j p_j·δs_j to first order (∂lse/∂s_j = p_j) and by δl/l through l. Errors
// modelled as independent and mean-zero (fp32 ops that round to nearest: h = 2^-24 of the
// value; a tensor core's truncations in the dot product are made mean-zero by the fill:
// flipping k_j flips s_j's partial sums and their losses) are added in the Azuma–Hoeffding
// form Λ·√(Σ c²), Λ = √(2·ln(2/P)) (bounded, not uniform, errors); the rest outright. In
// units of u = 2^-23 (h = u/2):
//   - s_j, an fp32 dot product of D exact products (3·D roundings for fp32 inputs, whose
//     products round too), summed by a truncating adder: 2·D losses each below u times a
//     magnitude whose square is at most Q_j = scale²·Σ_d (q_id·k_jd)² in expectation, plus the
//     adder's drift toward zero 2.45·√D·u·√Q_j (outright: judge/accumulator.cpp derives both
//     for the scaled GEMMs' `truncate` model); then the scale, log2(e) and the mask's addition
//     (3 roundings of |s_j|; 5 with a softcap's division and product, whose tanh adds 2 ulp of
//     |s_j| outright: CUDA's tanhf, CUDA C Programming Guide, "Mathematical Functions"; ALiBi's
//     product slope·distance and its addition, one rounding of |bias_j| and one of |s_j| more);
//   - e_j = exp(s_j − m): the subtraction and the product by log2(e) (2 roundings of
//     |s_j − m|), exp's 2 ulp (ex2.approx.f32, PTX ISA: outright, Σ_j p_j·2u = 2u);
//   - l: the sum of the positive e_j by additions in any order (FADD, as FlashAttention-2's
//     softmax keeps it; a row sum on a truncating tensor core would be one-sided and is not
//     this model), a binary tree whatever the order: each addition rounds by at most h times
//     the partial it produces, and the k-th largest partial of any tree is at most P_{n−k+1},
//     the sum of the n − k + 1 largest terms (take the k largest partials, closed upward: the
//     least of them has two children outside the set and k − 1 more subtrees outside it, each
//     holding a term of its own), so the relative errors' Σ c² <= h²·Σ_{m=2..n} (P_m/l)²
//     (n − 1 for equal terms, far less for a sharp row); P_m is bounded from a histogram of the
//     e_j by binade (TopMass);
//   - the running max's rescales l·exp(m_old − m_new): 2.5u each (exp's 2 ulp and the
//     product) of the partial sum they scale, which is at most P_{k−1} when the key at position
//     k (in the order the kernel reads keys) set the record, in the final max's units; and 2
//     roundings of each |Δm|, Σ|Δm| <= m − min_j s_j, outright once any rescale can happen.
//     The records of n exchangeable scores (i.i.d. q, k and mask values in any data-independent
//     order) are independent Bernoulli(1/k), k = 2..n (Rényi, 1962), so W = Σ_k B_k·P_{k−1}/l
//     is bounded at P by Chernoff's bound, E e^{θW} <= Π_k (1 + (e^{θ·w_k} − 1)/k) (k one by one
//     up to 16, then in ranges growing by a quarter, each at its largest weight, the sum of
//     ln(1 + y/k) over a range bounded by its integral), at the θ in [0.05, 100] where the
//     bound's derivative vanishes, found by a bracketed Newton search (any θ gives a valid
//     bound), and by the
//     unweighted bound on the number of records (all weights 1) where that is smaller; a
//     simulation of 20,000 key orders per row stays below it (families/sdpa/tests/test_sdpa_lse_floor.cpp).
//     A kernel whose running max steps over blocks of B keys rescales only at the records of its block
//     maxima, a subset of the records of its keys read in order, so W bounds it too, and it
//     rescales at most ceil((span − 1)/B) times, span = last − first + 1 over the row's keys
//     (blocks of any alignment); an impl declares B (cases/tolerances.yaml `accumulation:`
//     on lse, kSoftmaxStructures); a two-pass softmax (the max first, then the sum) has none;
//     split-KV (two passes per split, then a combine of the splits' m_s and l_s) rescales each
//     split's sum once, its shares of l summing to at most 1: 2.5u and the Δm term, outright
//     (kSplitKvBlock); an undeclared impl is judged per key (B = 1);
//   - lse = m + ln l: log's 2 ulp of log2 l (l in [1, n]: the row's max term is 1) plus 2u,
//     and 3 roundings to fp32, each of half its value's own spacing (hs): m's conversion to the
//     log2 domain, the sum and the product by ln 2 — at the larger of the log2 and natural
//     domains' spacings, so a kernel in either is covered (`either` below).
// A sink (its logit given in fp32) is one more term of l: e_s = exp(sink − m) with the
// roundings of sink·log2(e) and of the subtraction (p_s²·h²·(sink² + 2·(sink − m)²) in the
// variance, at the larger of the two frames' shifts below), one more weight in the tops and the tree, no score error
// and no record (it sits outside the keys' running max). A kernel may keep m the keys' max and add e_s > 1 at the end
// (FlashAttention 4's epilogue): its l and m are then l·e^(m − m_keys) and m_keys, so log's and
// m's terms are taken at the larger of the two; or raise its max to the sink at the end, one more
// rescale of l (2.5u, and 2 roundings of |sink − m_keys| in the exponent), added outright. A row of the sink alone has
// lse = sink: three conversions of it (either(sink) + hs(sink)). The drift of s_j points toward zero of s_j, so the
// keys of each sign move lse one way: the larger of the two signs' sums is added. So lse_i's floor, in units of u =
//   Λ·√(Σ_j p_j²·(2D·Q_j + h²/u²·(k_s·s_j² + 2·(s_j − m)²)) + h²/u²·Σ_m (P_m/l)²)
//   + max_± Σ_{±s_j >= 0} p_j·2.45·√D·√Q_j + 2 + 2·Σ_j p_j·|s_j| (softcap) + 4·hs(log2 l) + 2
//   + either(m) + either(lse) + hs(lse)
//   + [2.5·min(W, ceil((span − 1)/B)) + (m − min_j s_j) where the kernel rescales].
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "core/azuma.hpp"
#include "families/sdpa/detail.hpp"

namespace opcts::sdpa::detail {

/// The false-alarm probability per element of the lse floor: 2·e^-24 (Λ's).
constexpr double kLseFalseAlarm = 7.550269088558195e-11;

/// Λ of the lse floor's mean-zero fp32 errors (the file comment): √(2·ln(2/P)) at the
/// roundings' P = kLseFalseAlarm, i.e. √48 = 6.928203230275509 (core/azuma.hpp), computed once.
inline const double kAzumaSigmas = azuma_lambda(kLseFalseAlarm);

/// The block of split-KV (Flash-Decoding): two passes inside each split of the keys, then a
/// combine that rescales each split's row sum once, l_s·exp(m_s − M), by weights whose shares
/// of l sum to at most 1 — at most 2.5u of l in all (exp's 2 ulp and the product), plus the
/// roundings of each m_s − M, at most (m − min_j s_j) as a weighted mean. A row whose keys lie in
/// one split is not moved by it (its weight is 2^0 = 1 and the others' sums are 0), so the term
/// applies from two keys on, whatever the split size.
inline constexpr int64_t kSplitKvBlock = -1;

/// An online softmax an impl may declare for its lse (`accumulation:` on output lse in
/// cases/tolerances.yaml; the reference's bound "lse@<name>"): keys per step of its running
/// max (0: two passes, no rescale; kSplitKvBlock: split-KV). The plain bound "lse" is the
/// per-key running max (B = 1), which holds for any online softmax.
struct SoftmaxStructure {
  std::string_view name;
  int64_t block;
};
inline constexpr std::array<SoftmaxStructure, 6> kSoftmaxStructures{{{"online_block16", 16},
                                                                     {"online_block32", 32},
                                                                     {"online_block64", 64},
                                                                     {"online_block128", 128},
                                                                     {"two_pass", 0},
                                                                     {"split_kv", kSplitKvBlock}}};

/// The records past the first that a running max of n exchangeable scores sets, bounded at
/// kLseFalseAlarm by Chernoff's tail of a sum of independent Bernoulli(1/k) (the file comment).
inline double running_max_records(int64_t n) {
  double mu = 0;
  for (int64_t k = 2; k <= n; ++k) mu += 1.0 / static_cast<double>(k);
  if (mu == 0) return 0;
  const double log_p = std::log(kLseFalseAlarm);
  for (int64_t r = 1; r < n; ++r) {
    const double ratio = static_cast<double>(r) / mu;  // 1 + δ
    if (ratio > 1 && mu * (ratio - 1 - ratio * std::log(ratio)) <= log_p) return static_cast<double>(r);
  }
  return static_cast<double>(n - 1);
}

/// Upper bounds of a row's top masses P_m (the sum of its m largest weights e_j in (0, 1])
/// from a histogram by eighths of a binade (of the significand's range [1/2, 1)): whole bins
/// by their exact sums, part of one by r times its top (a bin's weights are each below its
/// top, and larger than every later bin's), so each bound is within 9/8 of P_m. Only the bins
/// from the first to the last filled one are walked (the others are empty: they add nothing),
/// so a row of few keys costs little.
class TopMass {
 public:
  void add(double e) {
    // e = f·2^x with f in [0.5, 1) (frexp's), read from the bits of a normal double (every
    // fp32 weight is one): x = E − 1022 for the biased exponent E, and f's eighth of [1/2, 1)
    // is the significand's top 3 bits. A call to frexp per key cost 4% of a reference.
    uint64_t bits = 0;
    std::memcpy(&bits, &e, sizeof bits);
    const int biased = static_cast<int>((bits >> 52) & 0x7ff), eighth = static_cast<int>((bits >> 49) & 7);
    const int bin = std::clamp((1023 - biased) * kSub + (kSub - 1 - eighth), 0, kBins - 1);
    ++count_[bin];
    sum_[bin] += e;
    ++n_;
    lo_ = std::min(lo_, bin);
    hi_ = std::max(hi_, bin + 1);
  }
  /// Empties it for the next row (zeroing the filled range only).
  void clear() {
    for (int bin = lo_; bin < hi_; ++bin) count_[bin] = 0, sum_[bin] = 0;
    n_ = 0, lo_ = kBins, hi_ = 0;
  }
  int64_t count() const { return n_; }
  /// P_m for every m in `ms` (ascending), in one walk over the binades.
  void top(const std::vector<int64_t>& ms, std::vector<double>& out) const {
    out.assign(ms.size(), 0.0);
    int bin = lo_;
    int64_t before = 0;  // weights in the binades before `bin`
    double mass = 0;     // their sum
    for (size_t q = 0; q < ms.size(); ++q) {
      while (bin < hi_ && before + count_[bin] <= ms[q]) mass += sum_[bin], before += count_[bin++];
      const int64_t r = ms[q] - before;
      out[q] = mass + (r > 0 && bin < hi_ ? std::min(sum_[bin], static_cast<double>(r) * bin_top(bin)) : 0.0);
    }
  }
  /// Σ_{m=2..n} P_m² (bounded as `top`).
  double sum_sq_tops() const {
    double s = 0, mass = 0;
    int64_t m = 0;
    for (int bin = lo_; bin < hi_; ++bin) {
      const double top = bin_top(bin);  // an ldexp: once per bin, not per weight
      for (int64_t r = 1; r <= count_[bin]; ++r) {
        const double pm = mass + std::min(sum_[bin], static_cast<double>(r) * top);
        if (++m >= 2) s += pm * pm;
      }
      mass += sum_[bin];
    }
    return s;
  }

 private:
  static constexpr int kSub = 8;
  static constexpr int kBins = 152 * kSub;  // fp32's subnormals reach 2^-149
  static double bin_top(int bin) {          // f < 0.5 + (eighth + 1)/16 in binade x
    const int x = 1 - bin / kSub, eighth = kSub - 1 - bin % kSub;
    return std::ldexp(0.5 + (eighth + 1) / (2.0 * kSub), x);
  }
  std::array<int64_t, kBins> count_{};
  std::array<double, kBins> sum_{};
  int64_t n_ = 0;
  int lo_ = kBins, hi_ = 0;  // the filled bins lie in [lo_, hi_)
};

/// W of the file comment: the rescaled partial sums, in units of l, that the running max's
/// records scale, bounded at kLseFalseAlarm for weights P_{k−1}/l (k = 2..n).
inline double weighted_records(const TopMass& tops, double l) {
  const int64_t n = tops.count();
  if (n < 2) return 0;
  // Ranges [a, b] of positions: one each up to 16, then growing by a quarter.
  thread_local std::vector<int64_t> lo, hi, ms;
  thread_local std::vector<double> w;
  lo.clear(), hi.clear();
  for (int64_t a = 2; a <= n;) {
    const int64_t b = a < 16 ? a : std::min(n, a + a / 4);
    lo.push_back(a), hi.push_back(b);
    a = b + 1;
  }
  ms.resize(hi.size());
  for (size_t r = 0; r < hi.size(); ++r) ms[r] = hi[r] - 1;
  tops.top(ms, w);
  for (double& x : w) x = std::min(1.0, x / l);
  const double log_inv_p = -std::log(kLseFalseAlarm);
  // Λ(θ) = Σ over the ranges of Σ_{k=a..b} ln(1 + y/k), y = e^{θ·w} − 1: a single position
  // (a = b, k < 16) exactly; a range by ∫_{a−½}^{b+½} ln(1 + y/x) dx (convex in x: the
  // midpoint rule underestimates) = G(b + ½) − G(a − ½), G(x) = x·ln(1 + y/x) + y·ln(x + y),
  // written without the difference of two large y·ln terms. Its derivatives need no other
  // transcendental: with y' = w·(1 + y), a position's term has ∂/∂θ = y'/(k + y) and
  // ∂²/∂θ² = w·y'·(k − 1)/(k + y)²; a range's, y'·q with q = ln((b + y)/(a + y)) (G's
  // derivative in y is 1 + ln(x + y)), and w·y'·q + y'²·(1/(b + y) − 1/(a + y)).
  struct Point {
    double t;      // Chernoff's bound (Λ + ln 1/P)/θ: valid at every θ > 0
    double h, dh;  // h = θ·Λ' − Λ − ln 1/P, whose sign is t's slope, and dh/d(ln θ) = θ²·Λ''
  };
  const auto at = [&](double u) {
    const double theta = std::exp(u);
    double lam = 0, d1 = 0, d2 = 0;
    for (size_t r = 0; r < w.size(); ++r) {
      const double y = std::expm1(theta * w[r]);
      if (!(y > 0)) continue;
      const double dy = w[r] * (1 + y);
      if (lo[r] == hi[r]) {
        const auto k = static_cast<double>(lo[r]);
        const double inv = 1 / (k + y);
        lam += std::log1p(y / k), d1 += dy * inv, d2 += w[r] * dy * (k - 1) * inv * inv;
      } else {
        const double a = static_cast<double>(lo[r]) - 0.5, b = static_cast<double>(hi[r]) + 0.5;
        const double q = std::log1p((b - a) / (a + y));
        lam += b * std::log1p(y / b) - a * std::log1p(y / a) + y * q;
        d1 += q * dy, d2 += w[r] * dy * q - dy * dy * (b - a) / ((a + y) * (b + y));  // 1/(b+y) − 1/(a+y), uncancelled
      }
    }
    return Point{(lam + log_inv_p) / theta, theta * d1 - lam - log_inv_p, theta * theta * d2};
  };
  // t's slope in ln θ is h/θ, and h is increasing (Λ is convex: a sum of logs of moment
  // generating functions and integrals of them), so t's least value over θ in [0.05, 100] lies
  // at the root of h, or at the end past which h keeps its sign. The root is found on ln θ by
  // Newton's method kept to the bracket, halving it wherever a step would leave it or would not
  // halve h (rtsafe: Press et al., Numerical Recipes, 3rd ed., §9.4), to a step below 10^-4,
  // where t is flat to ~10^-8. It evaluates about half as often as the 16-point golden-section
  // search it replaced, whose values it stays below (families/sdpa/tests/test_sdpa_lse_floor.cpp). Every t
  // computed is a valid bound: the least one is kept.
  const double u_lo = std::log(0.05), u_hi = std::log(100.0);
  const Point p_lo = at(u_lo), p_hi = at(u_hi);
  double best = std::min({static_cast<double>(n - 1), p_lo.t, p_hi.t});
  if (p_lo.h >= 0 || p_hi.h <= 0) return best;  // t rises, or falls, over the whole range
  double a = u_lo, b = u_hi, u = 0.5 * (a + b), step = b - a, last_step = step;
  Point pt = at(u);
  best = std::min(best, pt.t);
  for (int it = 0; it < 40 && pt.h != 0; ++it) {
    if (pt.h < 0) a = u;
    else b = u;
    const bool leaves = ((u - b) * pt.dh - pt.h) * ((u - a) * pt.dh - pt.h) > 0;
    if (leaves || std::fabs(2 * pt.h) > std::fabs(last_step * pt.dh)) {
      last_step = step, step = 0.5 * (b - a), u = a + step;
    } else {
      last_step = step, step = pt.h / pt.dh, u -= step;
    }
    if (std::fabs(step) < 1e-4) break;
    pt = at(u);
    best = std::min(best, pt.t);
  }
  return best;
}

/// Half the fp32 spacing at |x| in units of u = 2^-23 (the largest error of rounding x to
/// nearest), taken 2^-20 above |x| so that a kernel's value in the next binade is covered.
inline double half_spacing_units(double x) {
  const double a = std::fabs(x) * (1 + 0x1p-20);
  if (a == 0) return 0;
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e−1), 2^e): spacing 2^(e−1)·u
  return std::ldexp(1.0, e - 2);
}

/// One lse_i's floor, split by what an impl's softmax structure changes (the file comment).
struct LseFloor {
  double base = 0;      // every term but the rescales', absolute
  double rescales = 0;  // W's bound (per-key records weighted by the partial sums they scale)
  int64_t span = 0;     // last − first + 1 over the row's keys of weight > 0
  double shift = 0;     // the rescales' Δm roundings, absolute, once any rescale can happen
  /// The floor under a running max stepping over blocks of `block` keys (0: none; kSplitKvBlock:
  /// split-KV's one rescale of each split).
  double under(int64_t block) const {
    if (block == 0 || span < 2) return base;
    if (block == kSplitKvBlock) return base + kAccUnit * 2.5 + shift;
    const double cap = std::ceil(static_cast<double>(span - 1) / static_cast<double>(block));
    const double records = std::min(rescales, cap);
    return base + (records > 0 ? kAccUnit * 2.5 * records + shift : 0.0);
  }
};

/// The floor of each lse_i of a row block of a head (the file comment) from the fp32
/// pipeline's forward `f` of that block and its q and k slices.
template <typename T>
std::vector<LseFloor> lse_floors(const Problem& p, const ForwardHead<T>& f, const RowMajor<T>& qh,
                                 const RowMajor<T>& kh) {
  if (f.shift.rows() != f.e.rows()) throw std::logic_error("lse_floors: a forward without s − m (an fp64 one)");
  const RowMajor<T> qk2 = mul<T>(qh.cwiseAbs2(), false, kh.cwiseAbs2(), true);  // Σ_d (q_id·k_jd)²
  const double d = static_cast<double>(p.head_dim), scale = p.effective_scale();
  const double dot_losses = (p.dtype == DType::fp32 ? 3 : 2) * d;
  // fp8: the descales folded into the scale, two roundings of the factor (detail.hpp).
  const double score_roundings = (p.softcap > 0 ? 5 : 3) + (p.fp8 != Fp8::none ? 2 : 0);
  const double hh = 0.25;  // (h/u)²: a rounding to nearest costs half the unit u
  const double drift = 2.45 * std::sqrt(d);
  std::vector<LseFloor> floor(f.l.size());
  int64_t records_n = -1;
  double records = 0;
  TopMass tops;  // one histogram for every row, cleared per row (its bins are 19 KB)
  for (size_t i = 0; i < floor.size(); ++i) {
    const double log2e = 1.4426950408889634, ln2 = 0.6931471805599453;
    const auto either = [&](double x) { return std::max(half_spacing_units(x), ln2 * half_spacing_units(x * log2e)); };
    if (f.keys[i] == 0) {
      if (f.sink_e[i] > 0) floor[i].base = kAccUnit * (either(f.lse[i]) + half_spacing_units(f.lse[i]));
      continue;
    }
    const auto r = static_cast<Eigen::Index>(i);
    const double l = static_cast<double>(f.l[i]);
    const double m = static_cast<double>(f.lse[i]) - std::log(l);
    double var = 0, drift_pos = 0, drift_neg = 0, tanh_ulps = 0, min_s = m, m_keys = -HUGE_VAL;
    int64_t first = -1, last = -1;
    tops.clear();
    for (Eigen::Index j = 0; j < f.e.cols(); ++j) {
      const double e = static_cast<double>(f.e(r, j));
      if (e == 0) continue;  // a masked key, or one whose weight underflows fp32
      if (first < 0) first = j;
      last = j;
      tops.add(e);
      const double pj = e / l, sm = static_cast<double>(f.shift(r, j)), s = sm + m;
      const double q2 = scale * scale * static_cast<double>(qk2(r, j));
      min_s = std::min(min_s, s);
      m_keys = std::max(m_keys, s);
      const double bias = static_cast<double>(alibi_bias(f, r, j));
      var += pj * pj *
             (dot_losses * q2 +
              hh * ((score_roundings + (f.bias.size() > 0 ? 1 : 0)) * s * s + 2 * sm * sm + bias * bias));
      // The drift points toward zero of s_j: keys of each sign move lse one way.
      if (s >= 0) drift_pos += pj * drift * std::sqrt(q2);
      if (s <= 0) drift_neg += pj * drift * std::sqrt(q2);
      tanh_ulps += pj * std::fabs(s);
    }
    const int64_t key_weights = tops.count();         // the records are the keys' only
    double l_kernel = l, m_kernel = m, epilogue = 0;  // the sink's epilogue forms (the file comment)
    if (f.sink_e[i] > 0) {
      const double e_s = static_cast<double>(f.sink_e[i]), sink = static_cast<double>(f.sink), ps = e_s / l;
      tops.add(e_s);
      const double shift = std::max(std::fabs(sink - m), std::fabs(sink - m_keys));  // either frame
      var += ps * ps * hh * (sink * sink + 2 * shift * shift);
      l_kernel = std::max(l, l * std::exp(m - m_keys));
      m_kernel = m_keys;
      epilogue = 2.5 + std::fabs(sink - m_keys);
    }
    var += hh * tops.sum_sq_tops() / (l * l);
    // exp's 2 ulp; log's 2 ulp of log2 l and 2u; three roundings to fp32: m's to the log2 domain,
    // the sum, the product by ln 2 (a kernel in the natural domain: m's and the sum's), each at
    // the larger of its two domains' spacings.
    const double lse = static_cast<double>(f.lse[i]);
    double outright = std::max(drift_pos, drift_neg) + 2 + 4 * half_spacing_units(std::log2(std::max(l_kernel, 1.0))) +
                      2 + std::max(either(m), either(m_kernel)) + either(lse) + half_spacing_units(lse) + epilogue;
    if (p.softcap > 0) outright += 2 * tanh_ulps;
    if (key_weights != records_n) records = running_max_records(records_n = key_weights);
    LseFloor& fl = floor[i];
    fl.base = kAccUnit * (kAzumaSigmas * std::sqrt(var) + outright);
    fl.rescales = std::min(records, weighted_records(tops, l));
    fl.span = first < 0 ? 0 : last - first + 1;
    fl.shift = kAccUnit * (m - min_s);
  }
  return floor;
}

}  // namespace opcts::sdpa::detail
