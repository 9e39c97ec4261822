// The atomics-based indexing families scatter_add, index_add and index_select: problems, ids, inputs, exact references
// and per-model bounds.
//
// Every tensor is the contiguous view [outer, size along dim, inner] of a PyTorch tensor whose
// middle dimension is the op's `dim` (a 1-D tensor is outer = inner = 1; dim 0 of a 2-D [N, H]
// tensor is outer = 1, inner = H). With n the size of self / input along dim and m that of
// the index (and of src / source):
//   scatter_add   out = self; out[o, index[o, j, k], k] += src[o, j, k]
//                 (self.scatter_add_(dim, index, src); index and src are [outer, m, inner])
//   index_add     out = self; out[o, index[j], k] += alpha · source[o, j, k]
//                 (self.index_add_(dim, index, source, alpha=alpha); index is [m])
//   index_select  out[o, j, k] = input[o, index[j], k]   (torch.index_select; out is [outer, m, inner])
// Value dtypes fp64, fp32, fp16, bf16, int32, int64; index dtypes int32, int64. An index value
// outside [0, n) breaks the argument contract: such a problem says `bad_index:` (one past the
// end, −1, or an int64 value 2^32 + i that a 32-bit narrowing reads as the valid i) together with
// `expect_error: index`, and every impl must refuse it with InvalidArgument("index").
//
// Inputs (TensorMap; exactly what a device uploads):
//   scatter_add   "self" [outer, n, inner], "index" [outer, m, inner], "src" [outer, m, inner]
//   index_add     "self" [outer, n, inner], "index" [m], "source" [outer, m, inner]
//   index_select  "input" [outer, n, inner], "index" [m]
// Output "out": [outer, n, inner] (scatter_add, index_add; every element written: the copy of
// self plus the sums) or [outer, m, inner] (index_select). `misalign` asks the device to place
// out at a base address that is 2-byte but not 4-byte aligned (16-bit dtypes only), where
// paired 16-bit atomics meet the first and last element (OutputSpec::misalign_bytes).
//
// Index distributions (per column (o, k) for scatter_add; the one 1-D index otherwise):
//   uniform    i.i.d. uniform over [0, n)
//   sorted     uniform, then sorted ascending along dim
//   all_first  every index 0;  all_last  every index n − 1 (one element takes every add)
//   zipf       Zipf's law over n ranks, P(rank r) ∝ 1/(r + 1) (natural-language token
//              frequencies), ranks mapped to indices by a fixed bijection r → (a·r + b) mod n
//   routed     MoE combine: m = k·n (n tokens, k slots each); every (token, slot) picks one of
//              kRoutedExperts experts (distinct per token, expert e with weight (e + 1)^-kExpertSkew),
//              and the index lists the tokens in expert order (the dispatch permutation)
//   strided    index[j] = n − 1 − (j·s mod n), s = max(1, n / m): starts at the last row, spreads
//              over the whole range, and for m > n cycles so that neighbouring lanes hit
//              neighbouring destinations
// Value fills (floats; self and src alike): normal N(0, σ²) (fp16 and bf16: RN(σ·z)'s codes with
// their exact probabilities; fp32 and fp64: a bf16 code drawn so, its lower bits uniform within
// half a bf16 spacing: families/indexing/inputs.cpp), ones (src 1, self 0: counters),
// positive (uniform (0, σ]); σ = 1 except for fp16 normal/positive fills, where σ is the power
// of two that keeps every element's |self| + Σ|src| below 2^13 (fp16 overflows past 65504).
// Integers: uniform in [−R, R] (positive: [1, R]; ones: 1, self 0), R = 2^20 for int32 and
// 2^40 for int64 (past int32's range, so 32-bit accumulation shows), lowered so that no sum
// leaves the type or, for int64, 2^53 (exact through double). index_select's input holds
// random finite codes (every bit pattern but Inf/NaN), so a copy that changes one bit shows.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"

namespace opcts::indexing {

enum class Op { scatter_add, index_add, index_select };
std::string_view to_string(Op op);

enum class Dist { uniform, sorted, all_first, all_last, zipf, routed, strided };
enum class Fill { normal, ones, positive };
/// A negative case's bad index value, placed at the middle element of the index tensor.
enum class BadIndex { none, past_end, negative, wraps32 };

/// MoE routing of `routed`: DeepSeek-V3's 256 routed experts; expert e is drawn with weight
/// (e + 1)^-kExpertSkew, so the busiest expert sees about 8× the mean load and the idlest half
/// of it (an input shape, not a measurement: routers trained without a balancing loss skew so).
constexpr int64_t kRoutedExperts = 256;
constexpr double kExpertSkew = 0.5;

struct Problem {
  Op op = Op::scatter_add;
  DType dtype = DType::fp32;
  DType index_dtype = DType::int64;
  int64_t outer = 1;
  int64_t n = 1;  // self's / input's size along dim
  int64_t m = 1;  // the index's (and src's / source's) size along dim
  int64_t inner = 1;
  Dist dist = Dist::uniform;
  Fill fill = Fill::normal;
  double alpha = 1;  // index_add only
  bool misalign = false;
  BadIndex bad_index = BadIndex::none;
  std::string expect_error;  // "index" for a negative case

  /// Elements of out.
  int64_t out_numel() const { return outer * (op == Op::index_select ? m : n) * inner; }
  /// Elements of self / input.
  int64_t self_numel() const { return outer * n * inner; }
  /// Elements of src / source (0 for index_select).
  int64_t src_numel() const { return op == Op::index_select ? 0 : outer * m * inner; }
  /// Elements of the index: outer·m·inner for scatter_add, m otherwise.
  int64_t index_numel() const { return op == Op::scatter_add ? outer * m * inner : m; }
  bool integer() const { return dtype == DType::int32 || dtype == DType::int64; }
  /// Throws std::invalid_argument naming the field for a malformed problem (sizes, dtypes,
  /// alpha, misalign, routed's m = k·n) and for a bad_index without expect_error: index.
  void validate() const;
  bool operator==(const Problem&) const = default;
};

/// The field table of each family (families/indexing/fields.cpp); every table stamps its op.
/// Ids: DTYPE_iIDX_[bOUTER_]nN_mM_[hINNER_]DIST[_ones|_positive][_alphaA][_misalign][_badB_expect_index]
/// (index_select: no fill, no alpha).
const kit::FieldTable<Problem>& fields(Op op);

/// The first break of the argument contract: {"index", why} for a bad_index, else nullopt.
std::optional<Violation> contract_violation(const Problem& p);
/// The edge classes of docs/coverage.md that apply to an op (the atomics' two not to
/// index_select), in report order, and those `p` reaches (families/indexing/coverage.cpp;
/// Family::edge_classes).
std::vector<std::string> edge_classes(Op op);
std::vector<std::string> edge_classes_of(const Problem& p);

/// The inputs (see the file comment), a pure function of (problem, seed).
TensorMap make_inputs(const Problem& p, uint64_t seed);
/// The index of make_inputs(p, seed) before any bad value is planted, in the index tensor's
/// element order ([outer, m, inner] for scatter_add, [m] otherwise) (inputs.cpp).
std::vector<int64_t> index_values(const Problem& p, uint64_t seed);

/// The largest number of adds the problem's distribution puts on one element, as far as the
/// fields say (all_first/all_last: m; zipf: m over the harmonic number of n; otherwise m / n,
/// rounded down): planted impls use it to take only the problems their bug shows on.
int64_t typical_max_adds(const Problem& p);

// ---- Accumulation models and the reference -----------------------------------------------

/// How an impl sums the terms landing on one output element (its declared accumulation model,
/// cases/tolerances.yaml `accumulation:`); the reference gives one bound per model, stored in
/// References::bound under "out@<model>" (derivations in families/indexing/bound.cpp):
///   per_add  every term is added to the element by one rounding in the element's dtype, in any
///            order, starting from self (one atomicAdd per term: cuda.atomic)
///   grouped  terms are first summed in groups (any grouping) in fp32 (fp64 for fp64), each group
///            sum rounded to the dtype and added by one rounding in the dtype (warp-aggregated
///            atomics: cuda.warp_aggregated, the MI300 opportunistic fast atomics)
///   once     self and every term summed in fp32 (fp64 for fp64) in any order, rounded once to
///            the dtype (a sorted segmented reduction, host.omp)
///   warp32   grouped, with its groups known: the terms of the element at term positions t
///            (scatter_add's src and index_add's source flattened as [outer, m, inner]) with the
///            same t / 32, one warp's lanes matched by destination (cuda.warp_aggregated's
///            kernel, families/indexing/cuda/indexing_atomic.cu)
enum class Accumulation { per_add, grouped, once, warp32 };
std::string_view to_string(Accumulation a);
const std::vector<Accumulation>& all_accumulations();
/// "out@per_add": the key of a model's bound in References::bound (core/family.hpp: bound_key).
std::string bound_key(Accumulation a);

/// exact["out"]: self + Σ terms per element (double-double sums, stored as the nearest double;
/// integers exact), and for float scatter_add / index_add per model: the bound (`bound`; the
/// side away from zero where one-signed terms stall), the side toward zero where it differs
/// (`bound_below`, the ones and positive fills) and the conservation check of the destination
/// rows out[o, r, :] (`conservation`). index_select: the gathered values, no bound (bit-exact).
References reference(const Problem& p, const TensorMap& inputs);

/// What one element's bound depends on: self's value, the terms landing on it (t = src, or
/// alpha·source, exact in double) and the dtype. `bound` gives a model's E for it.
/// `symmetric`: self and the terms are independent draws symmetric about zero (the normal
/// fill), which admits the probabilistic bound besides the worst case (families/indexing/bound.cpp).
/// `positions`: each term's position t (ascending), for warp32's groups; null: warp32 is
/// grouped's bound.
struct ElementSums {
  DType dtype;
  double self = 0;
  const double* terms = nullptr;
  int64_t count = 0;
  double exact = 0;  // s0 + Σ terms (the reference's value)
  bool symmetric = false;
  const int64_t* positions = nullptr;
};
/// Each model's bound E for one element, indexed by Accumulation (0 when every partial sum of
/// every order is exactly representable in the model's arithmetic; derivation in
/// families/indexing/bound.cpp).
std::array<double, 4> bounds(const ElementSums& e);
/// One model's bound.
double bound(Accumulation a, const ElementSums& e);

/// One model's allowance for one element, and what a group of elements sums of it for its
/// conservation check (families/indexing/bound.cpp):
///   above, below      x − below <= result <= x + above before the output's one rounding (which
///                     the `bounded` metric adds); both are the model's E except where one-signed
///                     terms stall (the stall floor): there the side toward zero is
///                     σ·x − floor <= E
///   prob, sure, var, mean  the probabilistic form where `prob` (symmetric fills): the error is
///                     within sure + Λ·√var + mean, and over independent elements within
///                     Σ(sure + mean) + Λ·√(Σ var) (Azuma–Hoeffding over all their roundings)
struct ModelBound {
  double above = 0, below = 0;
  bool prob = false;
  double sure = 0, var = 0, mean = 0;
};
/// Every model's allowance for one element, indexed by Accumulation.
std::array<ModelBound, 4> model_bounds(const ElementSums& e);

/// A group's conservation interval under one model (core/family.hpp: Conservation): each
/// element's allowance added in a fixed order (the metric's output rounding included), and the
/// probabilistic form over all the group's roundings where every element has one.
struct GroupBound {
  double worst_above = 0, worst_below = 0;  // Σ (allowance + output rounding) per side
  double sure = 0, var = 0;                 // Σ (sure + mean), Σ var
  double abs_sum = 0;                       // Σ |x| (the caller's): the stored fp64 sum's rounding
  bool prob = true;
  /// Adds element x (the reference's value in dtype d) with its allowance b (elements without
  /// terms, out = self exactly, need not be added).
  void add(const ModelBound& b, double x, DType d);
  /// Adds another group's elements (the whole output from its groups, in group order).
  void merge(const GroupBound& g);
  /// Σ got − Σ x may lie this far above / below.
  double above() const { return side(worst_above); }
  double below() const { return side(worst_below); }

 private:
  double side(double worst) const;
};

// ---- Planted bugs ---------------------------------------------------------------------------

/// The bug classes of the planted impls (host.omp_*, cuda.*):
///   pair_past_end      a 16-bit atomic done on the 32-bit pair without the ends check, so the
///                      element past the end (or before the start) takes a +0 (CUDA only)
///   unstable           declared deterministic, but the summation order changes between runs
///                      (host: flips every call; CUDA: the sorted segments summed with atomics);
///                      only `opcts run --bitwise` sees it
///   index32            index_select offsets computed in 32 bits (CUDA only)
///   drop_duplicates    out = self + the last term (or the last warp group's sum) instead of
///                      the sum (a plain store: a 16-bit atomic that loses updates)
///   dtype_accumulation a 16-bit destination accumulated in its own dtype while the impl declares
///                      fp32 accumulation (`once`)
///   vec4_tail          the terms taken four a step, with a tail written for a body of pairs: of
///                      the count % 4 terms left only the last is added, so a count of 2 or 3
///                      (mod 4) loses one or two terms (host only)
enum class PlantedBug { pair_past_end, unstable, index32, drop_duplicates, dtype_accumulation, vec4_tail };
/// The adds per element from which an unstable order surely changes some element's bits.
constexpr int64_t kPlantedManyAdds = 1024;
/// Why `bug` cannot show on this problem ("" when it can): a planted impl SKIPs those. A
/// problem is excluded only where the bug changes no output value, or where a derived reason
/// says the bound of the model the impl is judged under (`judged`) cannot surely see it (a lost
/// duplicate among random-sign terms that a 16-bit per-add bound covers with probability above
/// 1%: the reason gives it).
std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug, Accumulation judged = Accumulation::once);

/// The plugin ABI's parameter struct of the problem's family (include/opcts/plugin.h:
/// opcts_scatter_add_params, opcts_index_add_params, opcts_index_select_params), as bytes.
std::vector<unsigned char> abi_params(const Problem& p);

}  // namespace opcts::indexing

namespace opcts {
/// Registers the scatter_add, index_add and index_select families.
void register_indexing_family(Registry& reg);
}  // namespace opcts
