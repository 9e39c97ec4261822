// grouped_mm problems: names, group sizes, validation, the argument contract and the planted bugs' reach.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "families/grouped_mm/grouped_mm.hpp"
#include "numerics/rng.hpp"

namespace opcts::grouped_mm {

DType element_dtype(Recipe r) {
  switch (r) {
    case Recipe::bf16: return DType::bf16;
    case Recipe::rowwise_fnuz: return DType::e4m3fnuz;
    case Recipe::rowwise:
    case Recipe::mxfp8: return DType::e4m3fn;
  }
  return DType::e4m3fn;
}

std::string_view to_string(Defect d) {
  switch (d) {
    case Defect::none: return "none";
    case Defect::offs_decreasing: return "offs_decreasing";
    case Defect::offs_out_of_range: return "offs_out_of_range";
    case Defect::offs_count: return "offs_count";
    case Defect::a_scale_count: return "a_scale_count";
    case Defect::b_scale_count: return "b_scale_count";
  }
  return "?";
}

int64_t Problem::split_total() const {
  switch (mode) {
    case Mode::m2d_3d: return m;
    case Mode::m2d_2d: return k;
    case Mode::m3d_2d: return n;
    case Mode::m3d_3d: return 0;
  }
  return 0;
}

int64_t k_multiple(const Problem& p) {
  switch (p.recipe) {
    case Recipe::bf16: return 1;
    case Recipe::rowwise:
    case Recipe::rowwise_fnuz: return 16;
    case Recipe::mxfp8: return 32;
  }
  return 1;
}

int64_t n_multiple(const Problem& p) { return p.scaled() ? 16 : 1; }

int64_t offset_multiple(const Problem& p) {
  if (p.mode == Mode::m3d_3d) return 1;
  if (p.recipe == Recipe::mxfp8) return 32;
  return is_rowwise(p.recipe) && p.mode == Mode::m2d_2d ? 16 : 1;
}

namespace {

// Top-k routing skew: expert loads proportional to exp(σ·z_g), z_g standard normal from a
// Philox stream of its own (the problem alone fixes it), σ = 0.7, which puts the busiest of 256
// experts at about 4× the mean load and the idlest near a tenth of it — the imbalance an
// auxiliary-loss-free balancer leaves within a batch (a catalog choice, not a measurement).
constexpr double kSkewSigma = 0.7;
constexpr uint32_t kSkewStream = 0x5EED;

std::vector<int64_t> skewed_units(int64_t units, int64_t groups) {
  const uint64_t seed = seed_of("grouped_mm.skewed");
  std::vector<double> w(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    const double u1 = std::max(uniform01(seed, kSkewStream, static_cast<uint64_t>(2 * g)), 1e-300);
    const double u2 = uniform01(seed, kSkewStream, static_cast<uint64_t>(2 * g + 1));
    w[static_cast<size_t>(g)] = std::exp(kSkewSigma * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
  }
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  // Largest remainder: floors first, then one more unit to the largest fractions (ties: lower g).
  std::vector<int64_t> out(w.size());
  std::vector<std::pair<double, int64_t>> frac;
  int64_t given = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const double share = static_cast<double>(units) * w[static_cast<size_t>(g)] / total;
    out[static_cast<size_t>(g)] = static_cast<int64_t>(std::floor(share));
    given += out[static_cast<size_t>(g)];
    frac.push_back({share - std::floor(share), g});
  }
  std::sort(frac.begin(), frac.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (int64_t i = 0; i < units - given; ++i) ++out[static_cast<size_t>(frac[static_cast<size_t>(i % groups)].second)];
  return out;
}

}  // namespace

std::vector<int64_t> group_sizes(const Problem& p) {
  const int64_t G = p.groups;
  if (p.mode == Mode::m3d_3d) return std::vector<int64_t>(static_cast<size_t>(G), p.m);
  if (p.split == Split::sizes) return p.sizes;
  const int64_t a = offset_multiple(p), units = p.split_total() / a;
  std::vector<int64_t> s(static_cast<size_t>(G), 0);
  switch (p.split) {
    case Split::uniform:
      for (int64_t g = 0; g < G; ++g) s[static_cast<size_t>(g)] = units / G + (g < units % G ? 1 : 0);
      break;
    case Split::skewed: s = skewed_units(units, G); break;
    case Split::single: s[static_cast<size_t>(G / 2)] = units; break;
    case Split::sizes: break;
  }
  for (auto& v : s) v *= a;
  return s;
}

std::vector<int64_t> group_ends(const Problem& p) {
  std::vector<int64_t> e = group_sizes(p);
  std::partial_sum(e.begin(), e.end(), e.begin());
  return e;
}

std::vector<int64_t> a_shape(const Problem& p) {
  switch (p.mode) {
    case Mode::m2d_3d: return {p.m + p.tail, p.k};
    case Mode::m2d_2d: return {p.m, p.k + p.tail};
    default: return {p.groups, p.m, p.k};
  }
}

std::vector<int64_t> b_shape(const Problem& p) {
  switch (p.mode) {
    case Mode::m2d_3d:
    case Mode::m3d_3d: return {p.groups, p.n, p.k};
    case Mode::m2d_2d: return {p.n, p.k + p.tail};
    case Mode::m3d_2d: return {p.n + p.tail, p.k};
  }
  return {};
}

std::vector<int64_t> out_shape(const Problem& p) {
  switch (p.mode) {
    case Mode::m2d_3d: return {p.m + p.tail, p.n};
    case Mode::m3d_2d: return {p.m, p.n + p.tail};
    default: return {p.groups, p.m, p.n};
  }
}

GroupView group_view(const Problem& p, int64_t g) {
  const std::vector<int64_t> s = group_sizes(p);
  const int64_t start = std::accumulate(s.begin(), s.begin() + g, int64_t{0}), size = s[static_cast<size_t>(g)];
  GroupView v;
  switch (p.mode) {
    case Mode::m2d_3d: v = {size, p.n, p.k, 0, start, 0, g, 0, start * p.n, p.n}; break;
    case Mode::m3d_3d: v = {p.m, p.n, p.k, g, 0, 0, g, 0, g * p.m * p.n, p.n}; break;
    case Mode::m2d_2d: v = {p.m, p.n, size, 0, 0, start, 0, 0, g * p.m * p.n, p.n}; break;
    case Mode::m3d_2d: v = {p.m, size, p.k, g, 0, 0, 0, start, start, p.n + p.tail}; break;
  }
  return v;
}

std::optional<Violation> contract_violation(const Problem& p) {
  const int64_t km = k_multiple(p), nm = n_multiple(p);
  if (p.mode != Mode::m2d_2d && p.k % km != 0)
    return Violation{"K", "K = " + std::to_string(p.k) + " is not a multiple of " + std::to_string(km) + " (" +
                              std::string(to_string(p.recipe)) + ")"};
  if (p.mode != Mode::m3d_2d && p.n % nm != 0)
    return Violation{
        "N", "N = " + std::to_string(p.n) + " is not a multiple of " + std::to_string(nm) + " (fp8 rows of Bᵀ)"};
  const int64_t a = offset_multiple(p);
  for (int64_t s : group_sizes(p))
    if (s % a != 0)
      return Violation{"offs", "a group size " + std::to_string(s) + " is not a multiple of " + std::to_string(a)};
  switch (p.defect) {
    case Defect::none: break;
    case Defect::offs_decreasing: return Violation{"offs", "the offsets decrease"};
    case Defect::offs_out_of_range: return Violation{"offs", "the last offset lies past the tensor's extent"};
    case Defect::offs_count: return Violation{"offs", "offs holds G - 1 entries while the 3-D operand holds G groups"};
    case Defect::a_scale_count: return Violation{"scale_a", "the A scale tensor holds one scale too few"};
    case Defect::b_scale_count: return Violation{"scale_b", "the B scale tensor holds one scale too few"};
  }
  return std::nullopt;
}

void Problem::validate() const {
  auto bad = [](const std::string& why) { throw std::invalid_argument(why); };
  if (groups < 1 || groups > 4096) bad("groups must lie in [1, 4096]");
  if (m < 0 || n < 0 || k < 0) bad("m, n and k must be >= 0");
  if (tail < 0) bad("tail must be >= 0");
  if (mode == Mode::m3d_3d && (split != Split::uniform || tail != 0))
    bad("3d_3d has no offsets: no split, sizes or tail");
  if ((split == Split::sizes) != !sizes.empty()) bad("sizes: [...] goes with split: sizes (given as the sizes alone)");
  const int64_t a = offset_multiple(*this);
  if (split == Split::sizes) {
    if (static_cast<int64_t>(sizes.size()) != groups) bad("sizes must hold one size per group");
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) bad("sizes must be >= 0");
      sum += s;
    }
    if (sum != split_total())
      bad("sizes sum to " + std::to_string(sum) + ", not the split dimension's " + std::to_string(split_total()));
  } else if (mode != Mode::m3d_3d && split_total() % a != 0) {
    bad("the split dimension's total " + std::to_string(split_total()) + " is not a multiple of " + std::to_string(a) +
        ": give explicit sizes to probe unaligned offsets");
  }
  if (tail % a != 0) bad("tail must be a multiple of " + std::to_string(a));
  const std::vector<int64_t> s = has_offs() ? group_sizes(*this) : std::vector<int64_t>{};
  switch (defect) {
    case Defect::none: break;
    case Defect::offs_decreasing: {
      bool any = false;
      for (size_t g = 1; g < s.size(); ++g) any = any || s[g] > 0;
      if (!has_offs() || !any) bad("offs_decreasing needs offsets and a non-empty group after the first");
      break;
    }
    case Defect::offs_out_of_range:
      if (!has_offs()) bad("offs_out_of_range needs offsets");
      break;
    case Defect::offs_count:
      if ((mode != Mode::m2d_3d && mode != Mode::m3d_2d) || groups < 2)
        bad("offs_count needs a 3-D operand that fixes G (2d_3d, 3d_2d) and G >= 2");
      break;
    case Defect::a_scale_count:
    case Defect::b_scale_count:
      if (!scaled()) bad("scale defects need a scaled recipe (rowwise, mxfp8)");
      if (m == 0 || n == 0 || k == 0) bad("scale defects need scales: m, n and k > 0");
      break;
  }
  const auto v = contract_violation(*this);
  if (v && expect_error != v->argument)
    bad("the problem breaks the argument contract (" + v->why + "): it needs expect_error: " + v->argument);
  if (!v && !expect_error.empty()) bad("expect_error: " + expect_error + " given, but the problem is valid");
}

const std::vector<PlantedBug>& planted_bugs() {
  static const std::vector<PlantedBug> b = {PlantedBug::stale_empty_group, PlantedBug::tail_overwritten,
                                            PlantedBug::offs_as_starts, PlantedBug::next_group_scales,
                                            PlantedBug::spill_past_n};
  return b;
}

std::string_view to_string(PlantedBug b) {
  switch (b) {
    case PlantedBug::stale_empty_group: return "stale_empty_group";
    case PlantedBug::tail_overwritten: return "tail_overwritten";
    case PlantedBug::offs_as_starts: return "offs_as_starts";
    case PlantedBug::next_group_scales: return "next_group_scales";
    case PlantedBug::spill_past_n: return "spill_past_n";
  }
  return "?";
}

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug) {
  if (!p.expect_error.empty()) return "planted impls run valid problems only";
  const std::vector<int64_t> s = group_sizes(p);
  const bool output = p.m > 0 && p.n > 0;
  switch (bug) {
    case PlantedBug::stale_empty_group: {
      // 2d_2d: a group of zero K after a group whose product is not zero.
      bool seen = false;
      for (int64_t sz : s) {
        if (sz == 0 && seen) return output && p.mode == Mode::m2d_2d ? "" : "needs 2d_2d with M, N > 0";
        seen = seen || sz > 0;
      }
      return "needs an empty group after a non-empty one in 2d_2d";
    }
    case PlantedBug::tail_overwritten:
      return p.tail > 0 && (p.mode == Mode::m2d_3d ? p.n > 0 : p.mode == Mode::m3d_2d && p.m > 0)
                 ? ""
                 : "needs rows (2d_3d) or columns (3d_2d) past the last offset";
    case PlantedBug::offs_as_starts: {
      if (!p.has_offs()) return "3d_3d has no offsets";
      // mxfp8's scale layout follows the offsets: misread ones would read past the scales.
      if (p.recipe == Recipe::mxfp8) return "mxfp8 scales are laid out by the offsets";
      if (!output && p.mode != Mode::m2d_2d) return "needs M, N > 0";
      // Read as starts, group g spans [offs[g], offs[g+1]): wrong unless every group is empty.
      for (int64_t sz : s)
        if (sz > 0) return p.mode == Mode::m2d_2d && !output ? "needs M, N > 0" : "";
      return "needs a non-empty group";
    }
    case PlantedBug::next_group_scales: {
      if (!p.scaled()) return "bf16 has no scales";
      if (p.mode != Mode::m2d_3d && p.mode != Mode::m3d_3d && !(p.mode == Mode::m2d_2d && is_rowwise(p.recipe)))
        return "needs one B scale set per group of equal shape (2d_3d, 3d_3d, rowwise 2d_2d)";
      for (int64_t g = 0; g + 1 < p.groups; ++g)
        if (s[static_cast<size_t>(g)] > 0 && output) return "";
      return "needs a non-empty group before the last";
    }
    case PlantedBug::spill_past_n: {
      if (!output) return "needs M, N > 0";
      if (p.mode == Mode::m3d_2d) {
        for (size_t g = 0; g < s.size(); ++g)
          if (s[g] % kPlantedNTile != 0) return "";
        return "every group's N is a multiple of " + std::to_string(kPlantedNTile);
      }
      if (p.n % kPlantedNTile == 0) return "N is a multiple of " + std::to_string(kPlantedNTile);
      for (int64_t sz : s)
        if (sz > 0 || p.mode == Mode::m2d_2d) return "";
      return "needs a non-empty group";
    }
  }
  return "";
}

}  // namespace opcts::grouped_mm
