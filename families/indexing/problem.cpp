// scatter_add / index_add / index_select problems: validation, the argument contract, and where each planted bug can
// show.
#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <unordered_map>

#include "families/indexing/indexing.hpp"
#include "numerics/rng.hpp"

namespace opcts::indexing {

std::string_view to_string(Op op) {
  switch (op) {
    case Op::scatter_add: return "scatter_add";
    case Op::index_add: return "index_add";
    case Op::index_select: return "index_select";
  }
  return "?";
}

namespace {

bool value_dtype(DType t) {
  return t == DType::fp64 || t == DType::fp32 || t == DType::fp16 || t == DType::bf16 || t == DType::int32 ||
         t == DType::int64;
}

bool sixteen_bit(DType t) { return t == DType::fp16 || t == DType::bf16; }

// Significant bits of |x| (x finite, non-zero): the odd part's width.
int significant_bits(double x) {
  int e = 0;
  double f = std::frexp(std::fabs(x), &e);  // f in [0.5, 1)
  int bits = 0;
  while (f != 0) {
    f = f * 2 - std::floor(f * 2);
    ++bits;
  }
  return bits;
}

}  // namespace

void Problem::validate() const {
  auto bad = [](const std::string& why) { throw std::invalid_argument(why); };
  if (!value_dtype(dtype)) bad("dtype must be fp64, fp32, fp16, bf16, int32 or int64");
  if (index_dtype != DType::int32 && index_dtype != DType::int64) bad("index must be int32 or int64");
  if (outer < 0 || n < 0 || m < 0 || inner < 0) bad("outer, n, m and inner must be >= 0");
  if (n == 0 && m > 0) bad("n = 0 leaves no valid index for m > 0 entries");
  if (index_dtype == DType::int32 && n > 2147483647) bad("n must fit an int32 index");
  if (dist == Dist::routed && (n == 0 || m % n != 0 || m / n > kRoutedExperts))
    bad("dist routed needs m = k·n with k <= " + std::to_string(kRoutedExperts) + " slots per token");
  if (op != Op::index_add && alpha != 1) bad("alpha applies to index_add only");
  if (!std::isfinite(alpha) || alpha == 0) bad("alpha must be finite and non-zero");
  if (integer() && alpha != std::nearbyint(alpha)) bad("alpha must be an integer for integer dtypes");
  // alpha·source must be exact in double (the reference's terms) and alpha exact in the dtype:
  // at most 8 significant bits (products with a 24-bit fp32 source fit 53), a power of two for
  // fp64 (a 53-bit source leaves no room).
  if (!integer()) {
    const int bits = significant_bits(alpha);
    if (bits > (dtype == DType::fp64 ? 1 : 8))
      bad(dtype == DType::fp64 ? "alpha must be a power of two for fp64 (alpha·source exact in double)"
                               : "alpha must have at most 8 significant bits (alpha·source exact in double)");
    if (round_to(dtype, alpha) != alpha) bad("alpha must be exactly representable in the dtype");
  }
  if (misalign && !sixteen_bit(dtype)) bad("misalign applies to fp16 and bf16 outputs (2-byte elements)");
  if (op == Op::index_select && fill != Fill::normal) bad("index_select's input is random codes: no fill");
  if (bad_index == BadIndex::wraps32 && index_dtype != DType::int64) bad("bad_index wraps32 needs an int64 index");
  if (bad_index != BadIndex::none && (m == 0 || n == 0 || (op == Op::scatter_add && outer * inner == 0)))
    bad("bad_index needs a non-empty index");
  const auto v = contract_violation(*this);
  if (v && expect_error != v->argument)
    bad("the problem breaks the argument contract (" + v->why + "): it needs expect_error: " + v->argument);
  if (!v && !expect_error.empty()) bad("expect_error: " + expect_error + " given, but the problem is valid");
}

std::optional<Violation> contract_violation(const Problem& p) {
  switch (p.bad_index) {
    case BadIndex::none: return std::nullopt;
    case BadIndex::past_end: return Violation{"index", "an index equal to n = " + std::to_string(p.n)};
    case BadIndex::negative: return Violation{"index", "the index -1"};
    case BadIndex::wraps32:
      return Violation{"index", "an index 2^32 + i, which a 32-bit narrowing reads as the valid i"};
  }
  return std::nullopt;
}

int64_t typical_max_adds(const Problem& p) {
  if (p.op == Op::index_select || p.m == 0 || p.n == 0) return 0;
  switch (p.dist) {
    case Dist::all_first:
    case Dist::all_last: return p.m;
    case Dist::zipf: {
      double h = 0;  // the harmonic number H_n: rank 0 takes m / H_n of the draws
      for (int64_t r = 1; r <= p.n; ++r) h += 1.0 / static_cast<double>(r);
      return static_cast<int64_t>(static_cast<double>(p.m) / h);
    }
    default: return p.m / p.n;
  }
}

namespace {

// Whether the first / last element of out surely takes an add (the distribution puts index 0 /
// n − 1 into every column; with n = 1 every index is both).
bool first_taken(const Problem& p) {
  return p.m > 0 && (p.n == 1 || p.dist == Dist::all_first || (p.dist == Dist::strided && p.m >= p.n));
}
bool last_taken(const Problem& p) {
  return p.m > 0 && (p.n == 1 || p.dist == Dist::all_last || p.dist == Dist::strided);
}

}  // namespace

namespace {

// Whether some element surely takes two or more terms (the index surely repeats a value): by
// pigeonhole (m > n), by construction (all_first/all_last, routed with k >= 2 slots), or, for
// the random distributions, with probability at least 1 − 10^-6: uniform draws repeat with
// probability 1 − exp(−m(m − 1)/(2n)) or more (the birthday bound; sorted is uniform, zipf's
// skew only adds repeats). strided with m <= n never repeats (j·s < n for j < m).
bool surely_repeated(const Problem& p) {
  if (p.m < 2) return false;
  if (p.m > p.n) return true;
  switch (p.dist) {
    case Dist::all_first:
    case Dist::all_last: return true;
    case Dist::strided: return false;
    case Dist::routed: return p.m / p.n >= 2;
    default: return static_cast<double>(p.m) * static_cast<double>(p.m - 1) / (2 * static_cast<double>(p.n)) >= 14;
  }
}

// Why a lost update of the warp kernels cannot show, or "" when it surely does. Those kernels
// (judged warp32 or grouped: families/indexing/cuda/indexing_atomic.cu, host.warp_aggregated)
// sum the terms of one destination inside each group of 32 consecutive positions (flattened
// [outer, m, inner]) and add the group's sum once; a planted lost update stores a group's sum,
// dropping the others, so it shows only where a destination takes terms from two groups. A
// column's m terms stand `inner` apart, so one group holds at most g = ⌈32/inner⌉ of them.
// Where the distribution alone does not make it sure, the case's own seeded index decides, so
// the plant runs on every problem where it loses a group.
std::string lost_group_cannot_show(const Problem& p) {
  constexpr int64_t kWarp = 32;
  const char* whole = "its sum is stored whole: nothing is lost";
  if (p.src_numel() <= kWarp) return std::string("every term is in one warp's group; ") + whole;
  if (p.dist == Dist::all_first || p.dist == Dist::all_last) {
    // Column (o, k)'s terms span positions s .. s + (m − 1)·inner, s = o·m·inner + k; s mod 32
    // repeats with o and k modulo 32.
    const int64_t span = (p.m - 1) * p.inner;
    for (int64_t o = 0; o < std::min(p.outer, kWarp); ++o)
      for (int64_t k = 0; k < std::min(p.inner, kWarp); ++k)
        if ((o * p.m * p.inner + k) % kWarp + span >= kWarp) return "";
    return std::string("each column's terms fall in one warp's group; ") + whole;
  }
  const int64_t g = (kWarp + p.inner - 1) / p.inner;
  // By pigeonhole: the column's terms spread over at least ⌈m/g⌉ groups, and more groups than
  // indices means two groups share one.
  if ((p.m + g - 1) / g > p.n) return "";
  const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), gd = static_cast<double>(g);
  double cross = 0;  // expected pairs of equal indices in different groups, in one column
  switch (p.dist) {
    case Dist::strided:
      // Past m > n the step is 1 (families/indexing/indexing.hpp): index j repeats at j + n,
      // j + 2n, ...; the first index's occurrences span ⌊(m − 1)/n⌋·n·inner positions, in two
      // groups once that reaches 32.
      return p.m > p.n && (p.m - 1) / p.n * p.n * p.inner >= kWarp
                 ? ""
                 : std::string("no index surely repeats across two warp groups; ") + whole;
    case Dist::sorted: {
      // Equal indices sit next to each other: a lost group shows where a column's terms j and
      // j + 1 lie in two groups and draw the same index, which sorted draws do with probability
      // about 1 − D/m (D ≈ n(1 − e^(−m/n)) distinct values). J counts the j whose pair straddles
      // a group boundary in some column (index_add's columns share one index); the bug then
      // hides with probability about (D/m)^J, surely shown below 10^-6.
      const double distinct = n * (1 - std::exp(-m / n));
      if (distinct >= m) return std::string("sorted draws of distinct indices; ") + whole;
      const double need = std::log(1e6) / std::log(m / distinct);
      int64_t straddled = 0;
      for (int64_t j = 0; j + 1 < p.m && straddled < need; ++j) {
        bool any = false;
        for (int64_t o = 0; o < std::min(p.outer, kWarp) && !any; ++o)
          for (int64_t k = 0; k < std::min(p.inner, kWarp) && !any; ++k) {
            const int64_t at = o * p.m * p.inner + k + j * p.inner;
            any = at / kWarp != (at + p.inner) / kWarp;
          }
        straddled += any;
      }
      if (straddled >= need) return "";
      break;
    }
    default:
      // Uniform draws (zipf's skew and routed's slots only add repeats): m(m − 1)/(2n) equal
      // pairs, of which at most m(g − 1)/2 share a group.
      cross = m * (m - gd) / (2 * n);
      break;
  }
  if (cross >= 14) return "";
  // Not sure by the distribution: the seeded index decides (make_inputs draws it from the case's
  // seed), up to 2^22 positions; past that, those estimates are far above their thresholds.
  if (p.src_numel() > (int64_t{1} << 22))
    return std::string("no index surely repeats across two warp groups; ") + whole;
  const std::vector<int64_t> idx = index_values(p, seed_of(std::string(to_string(p.op)) + "/" + fields(p.op).id(p)));
  std::unordered_map<int64_t, int64_t> group_of;  // destination → the first group adding to it
  for (int64_t t = 0; t < p.src_numel(); ++t) {
    const int64_t o = t / (p.m * p.inner), k = t % p.inner, j = (t / p.inner) % p.m;
    const int64_t dest = (o * p.n + idx[static_cast<size_t>(p.op == Op::scatter_add ? t : j)]) * p.inner + k;
    const auto [it, first] = group_of.try_emplace(dest, t / kWarp);
    if (!first && it->second != t / kWarp) return "";
  }
  return std::string("the seeded index puts each destination's terms in one warp group; ") + whole;
}

// The probability that a bug hides on every element that takes two or more adds, given the
// probability hide(k) that it hides on one element of k adds (independent per element: each has
// its own terms): all_first/all_last put m adds on one element per column, zipf's rank r takes
// m / (H_n·(r + 1)), the others about m / n each (Poisson for the random distributions; the
// elements with two or more at the typical count).
template <class Hide>
double hides_everywhere(const Problem& p, Hide hide) {
  auto all = [&](double k, double count) { return k < 2 || count <= 0 ? 1.0 : std::pow(hide(k), count); };
  const double columns = static_cast<double>(p.outer * p.inner);
  const double m = static_cast<double>(p.m), n = static_cast<double>(p.n);
  switch (p.dist) {
    case Dist::all_first:
    case Dist::all_last: return all(m, columns);
    case Dist::zipf: {
      double h = 0;  // H_n
      for (int64_t r = 1; r <= p.n; ++r) h += 1.0 / static_cast<double>(r);
      double every = 1;
      for (int64_t r = 0; r < p.n && every > 0; ++r) {
        const double k = m / (h * static_cast<double>(r + 1));
        if (k < 2) break;
        every *= all(k, columns);
      }
      return every;
    }
    default: {
      const double lambda = m / n, repeated = 1 - std::exp(-lambda) * (1 + lambda);
      return all(std::max(2.0, std::floor(lambda)), columns * n * repeated);
    }
  }
}

// A lost duplicate among random-sign terms (the normal fill) under a bound of the probabilistic
// form (families/indexing/bound.cpp): an element of k adds that keeps only its last term loses the other
// k − 1, a normal draw of deviation σ·√(k − 1), while its bound is near (Λ + 2.2·√(2/π))·u·k·σ =
// 9.3·u·k·σ (V ≈ k·u²·(k·σ²): every add one rounding of relative size u at the running sum;
// the straddle means 2.2·u·S, S ≈ k·σ·√(2/π)). It hides with probability erf(a/√2),
// a = 9.3·u·k/√(k − 1) + u_out, u_out the share of a final rounding to the dtype (`once`: at
// most 2·u_d of the lost mass, |x| + E being about as large as it).
double lost_duplicate_hides(const Problem& p, double u, double u_out) {
  return hides_everywhere(
      p, [&](double k) { return std::erf((9.3 * u * k / std::sqrt(k - 1) + u_out) / std::sqrt(2.0)); });
}

// A 16-bit running sum of k random-sign terms (the planted dtype accumulation) against `once`'s
// allowance, half an output spacing at |x| (its fp32 part is far below): each add rounds by a
// nearly uniform error within half a spacing at the running sum |r_j| ≈ σ·√j, a spacing of
// about 2·u_d·|r_j|/1.44 on average over a binade (log-uniform position), so the k roundings
// add up to a deviation of about √(Σ_j (2·u_d·σ·√j/1.44)²/12) ≈ 0.28·u_d·k·σ, against
// u_d·|x| with |x| ≈ σ·√k·|Z'|: the bug hides where |Z| < 3.6·|Z'|/√k, with probability
// (2/π)·atan(3.6/√k) for independent normals Z, Z'.
double dtype_accumulation_hides(const Problem& p) {
  return hides_everywhere(p, [](double k) { return 2 / std::numbers::pi * std::atan(3.6 / std::sqrt(k)); });
}

double unit(DType t) { return std::ldexp(1.0, -(dtype_info(t).format.mantissa_bits + 1)); }

// The judged model's rounding unit u (the destination's for the per-add models, the
// accumulator's under `once`) and u_out, the share of a final rounding to the dtype (`once`'s one
// rounding adds at most u_d·(|x| + E), about 2·u_d of a lost mass as large as |x| + E).
struct ModelUnits {
  double u, u_out;
};
ModelUnits model_units(const Problem& p, Accumulation judged) {
  if (judged != Accumulation::once) return {unit(p.dtype), 0};
  return {p.dtype == DType::fp64 ? 0x1p-53 : 0x1p-24, 2 * unit(p.dtype)};
}

}  // namespace

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug, Accumulation judged) {
  if (!p.expect_error.empty()) return "planted impls run valid problems only";
  const bool accumulates = p.op != Op::index_select;
  switch (bug) {
    case PlantedBug::pair_past_end: {
      if (!accumulates || !sixteen_bit(p.dtype)) return "the bug is in 16-bit atomics";
      // Element e sits in the low half of a 4-byte word when (e + misalign) is even; a pair
      // started at the last element reaches past the end, one ended at element 0 before it.
      const int64_t mis = p.misalign ? 1 : 0;
      const bool past_end = last_taken(p) && (p.out_numel() - 1 + mis) % 2 == 0;
      const bool before_start = first_taken(p) && mis == 1;
      return past_end || before_start ? ""
                                      : "no add surely lands on an end element whose 4-byte pair leaves the tensor";
    }
    case PlantedBug::unstable:
      if (!accumulates || p.integer()) return "integer sums do not depend on the order";
      if (sixteen_bit(p.dtype)) return "the final rounding to 16 bits hides an fp32 order's last bits";
      if (p.fill == Fill::ones) return "sums of ones below 2^24 are exact in every order";
      return typical_max_adds(p) >= kPlantedManyAdds
                 ? ""
                 : "needs elements taking at least " + std::to_string(kPlantedManyAdds) + " adds";
    case PlantedBug::index32:
      if (p.op != Op::index_select) return "the bug is in index_select's offsets";
      return p.self_numel() > (int64_t{1} << 32) && last_taken(p)
                 ? ""
                 : "needs an input past 2^32 elements whose last rows are read";
    case PlantedBug::drop_duplicates: {
      if (!accumulates) return "index_select adds nothing";
      if (p.out_numel() == 0 || !surely_repeated(p)) return "no index surely repeats: nothing is dropped";
      if (judged == Accumulation::warp32 || judged == Accumulation::grouped)
        if (std::string why = lost_group_cannot_show(p); !why.empty()) return why;
      if (p.integer()) return "";  // the exact comparison sees any lost term
      if (p.fill == Fill::normal) {
        const ModelUnits mu = model_units(p, judged);
        const double hides = lost_duplicate_hides(p, mu.u, mu.u_out);
        if (hides > 0.01) {
          char why[200];
          std::snprintf(why, sizeof why,
                        "random-sign terms: the lost mass hides within the %s bound on every element with "
                        "probability %.2g (erf of 9.3·u·k/√(2(k − 1)) per element of k adds)",
                        std::string(to_string(judged)).c_str(), hides);
          return why;
        }
        return "";
      }
      // One-signed fills: the per-add models' stall floor sees any lost term above it; `once`
      // allows θ_k(2^-24)·T ≈ k²·2^-24·t̄ against a loss of (k − 1)·t̄.
      if (judged == Accumulation::once && p.dtype != DType::fp64 &&
          static_cast<double>(typical_max_adds(p)) * 0x1p-24 > 0.5)
        return "past 2^23 fp32 adds per element the `once` bound nears the sum";
      return "";
    }
    case PlantedBug::dtype_accumulation: {
      if (!accumulates || !sixteen_bit(p.dtype)) return "the bug is in 16-bit destinations";
      if (typical_max_adds(p) < 2) return "one add per element: the dtype's rounding is the output's";
      // A counter of ones is exact in 16 bits up to 2^p (256 for bf16, 2048 for fp16): below
      // that the dtype's accumulation changes nothing. Past 2^20 adds the fp32 bound θ_n(2^-24)·T
      // nears the sum itself.
      const int64_t stall = p.dtype == DType::bf16 ? 256 : 2048;
      if (p.fill == Fill::ones && typical_max_adds(p) <= stall)
        return "a counter of ones below " + std::to_string(stall) + " is exact in the dtype";
      if (p.fill == Fill::normal)
        if (const double hides = dtype_accumulation_hides(p); hides > 0.01) {
          char why[200];
          std::snprintf(why, sizeof why,
                        "random-sign terms: the 16-bit sum's error hides within the output's half spacing on "
                        "every element with probability %.2g ((2/π)·atan(3.6/√k) per element of k adds)",
                        hides);
          return why;
        }
      if (typical_max_adds(p) > (int64_t{1} << 20)) return "past 2^20 adds per element the fp32 bound nears the sum";
      return "";
    }
    case PlantedBug::vec4_tail: {
      if (!accumulates) return "index_select adds nothing";
      if (p.src_numel() % 4 < 2) return "a count of 0 or 1 (mod 4) terms: the one-term tail adds all of them";
      if (p.op == Op::index_add && p.alpha == 0) return "alpha 0: every term adds 0";
      // The lost terms land on elements of at most m adds (a destination takes terms of one
      // column, or of the m index entries); the bug hides only where every lost term does.
      const double k = static_cast<double>(p.m);
      if (p.integer()) {
        // The exact comparison sees a lost term unless it is 0: probability 1/(2R + 1), terms
        // drawn from [−R, R] with R = min(cap, ⌊limit/(adds + 1)⌋) (families/indexing/inputs.cpp).
        const double cap = p.dtype == DType::int32 ? 0x1p20 : 0x1p40,
                     limit = p.dtype == DType::int32 ? 2147483647.0 : 0x1p53;
        const double range = std::max(1.0, std::min(cap, std::floor(limit / (k + 1))));
        return 1 / (2 * range + 1) > 0.01 ? "integer terms drawn from [−R, R] with R below 50: a lost term may be 0"
                                          : "";
      }
      if (p.fill == Fill::ones) {
        // Every partial sum of ones up to 2^p is exact in the dtype (self is 0): a lost one shows.
        const int64_t exact = int64_t{1} << std::min(53, dtype_info(p.dtype).format.mantissa_bits + 1);
        return p.m <= exact
                   ? ""
                   : "a counter of ones past " + std::to_string(exact) + " stalls: a lost one may change nothing";
      }
      if (p.fill != Fill::normal) return "one-signed random terms: no derived probability that a lost term shows";
      // One lost normal term (deviation σ) against the bound's 9.3·u·k·σ on its element
      // (lost_duplicate_hides, whose lost mass is σ·√(k − 1)): hidden with probability
      // erf((9.3·u·k + u_out)/√2).
      const ModelUnits mu = model_units(p, judged);
      const double hides = std::erf((9.3 * mu.u * k + mu.u_out) / std::sqrt(2.0));
      if (hides > 0.01) {
        char why[160];
        std::snprintf(why, sizeof why,
                      "random-sign terms: a lost term hides within the %s bound of %lld adds with probability %.2g",
                      std::string(to_string(judged)).c_str(), static_cast<long long>(p.m), hides);
        return why;
      }
      return "";
    }
  }
  return "";
}

}  // namespace opcts::indexing
