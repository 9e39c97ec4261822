// scatter_add / index_add / index_select problems: validation, the argument contract, and where each planted bug can show.
#include <cmath>
#include <stdexcept>

#include "refimpl/indexing.hpp"

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
bool last_taken(const Problem& p) { return p.m > 0 && (p.n == 1 || p.dist == Dist::all_last || p.dist == Dist::strided); }

}  // namespace

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug) {
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
      return typical_max_adds(p) >= kPlantedManyAdds ? ""
                                                     : "needs elements taking at least " + std::to_string(kPlantedManyAdds) + " adds";
    case PlantedBug::index32:
      if (p.op != Op::index_select) return "the bug is in index_select's offsets";
      return p.self_numel() > (int64_t{1} << 32) && last_taken(p)
                 ? ""
                 : "needs an input past 2^32 elements whose last rows are read";
    case PlantedBug::drop_duplicates:
      if (!accumulates) return "index_select adds nothing";
      if (p.m <= p.n) return "m <= n: no index is surely repeated";
      // 16-bit per-add bounds may cover a dropped term under heavy contention. fp32's bounds
      // grow as n²·2^-24·σ while n random-sign terms dropped weigh about √n·σ: far apart up to
      // 4096 adds per element (positive and unit terms weigh n/2 and n: always).
      if (sixteen_bit(p.dtype)) return "a 16-bit destination's bound may cover a dropped term";
      if (p.dtype == DType::fp32 && p.fill == Fill::normal && typical_max_adds(p) > 4096)
        return "more than 4096 random-sign fp32 terms per element: the bound nears their sum";
      if (p.dtype == DType::fp32 && typical_max_adds(p) > (int64_t{1} << 20))
        return "past 2^20 fp32 adds per element the bound nears the sum";
      return "";
    case PlantedBug::dtype_accumulation: {
      if (!accumulates || !sixteen_bit(p.dtype)) return "the bug is in 16-bit destinations";
      // Sums of non-negative terms stall in 16 bits once the running value's half ulp passes
      // the terms: a counter of ones past 2^p (256 for bf16, 2048 for fp16), uniform (0, σ)
      // terms from about 2^p adds on, far outside the fp32 bound. Random-sign terms only err by
      // about √n/4 times the bound per element: not sure to show on a few elements.
      // Past 2^20 adds the fp32 bound θ_n(2^-24)·T nears the sum itself.
      const int64_t stall = p.dtype == DType::bf16 ? 256 : 2048;
      if (p.fill == Fill::normal) return "random-sign terms need not leave the bound on every problem";
      if (typical_max_adds(p) > (int64_t{1} << 20)) return "past 2^20 adds per element the fp32 bound nears the sum";
      return typical_max_adds(p) > stall ? "" : "needs elements taking more than " + std::to_string(stall) + " adds";
    }
  }
  return "";
}

}  // namespace opcts::indexing
