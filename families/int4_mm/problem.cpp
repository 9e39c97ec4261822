// int4_mm problems: names, validation, the argument contract and the bugs a planted impl can show.
#include <stdexcept>
#include <string>

#include "families/int4_mm/int4_mm.hpp"

namespace opcts::int4_mm {

const std::vector<Format>& all_formats() {
  static const std::vector<Format> f = [] {
    std::vector<Format> all;
    for (const auto& n : kFormatNames) all.push_back(n.value);
    return all;
  }();
  return f;
}

int64_t packing_k_tile(const Problem& p) {
  switch (p.format) {
    case Format::tinygemm: return 16 * p.inner_k_tiles;
    case Format::tinygemm_unpacked: return 2;
    case Format::awq: return 1;
    case Format::gptq: return 8;
    case Format::q4_0: return 32;
  }
  return 1;
}

int64_t packing_n_tile(const Problem& p) {
  return p.format == Format::tinygemm || p.format == Format::awq || p.format == Format::gptq ? 8 : 1;
}

std::optional<Violation> contract_violation(const Problem& p) {
  const bool q4 = p.format == Format::q4_0;
  if (q4 ? p.group != 32 : !(p.group == 32 || p.group == 64 || p.group == 128 || p.group == 256))
    return Violation{"group_size", "group size " + std::to_string(p.group) +
                                       (q4 ? " (Q4_0 blocks are 32)" : " is not 32, 64, 128 or 256")};
  if (p.k % p.group != 0)
    return Violation{"K",
                     "K = " + std::to_string(p.k) + " is not a multiple of the group size " + std::to_string(p.group)};
  if (p.k % packing_k_tile(p) != 0)
    return Violation{"K", "K = " + std::to_string(p.k) + " is not a multiple of the packing's K tile " +
                              std::to_string(packing_k_tile(p))};
  if (p.n % packing_n_tile(p) != 0)
    return Violation{"N", "N = " + std::to_string(p.n) + " is not a multiple of the packing's N tile " +
                              std::to_string(packing_n_tile(p))};
  switch (p.defect) {
    case Defect::none: break;
    case Defect::scale_groups:
      return Violation{p.tinygemm() ? "scale_and_zero" : "scales",
                       "the scales hold the groups of group size 4g, not K/g"};
    case Defect::zero_groups: return Violation{"qzeros", "the zero points hold the groups of group size 4g, not K/g"};
  }
  return std::nullopt;
}

void Problem::validate() const {
  auto bad = [](const std::string& why) { throw std::invalid_argument(why); };
  if (m < 1 || n < 1 || k < 1) bad("m, n and k must be >= 1");
  if (dtype != DType::bf16 && dtype != DType::fp16) bad("dtype must be bf16 or fp16");
  if (group < 1) bad("group must be >= 1");
  if (format == Format::tinygemm && inner_k_tiles != 2 && inner_k_tiles != 4 && inner_k_tiles != 8)
    bad("inner_k_tiles must be 2, 4 or 8");
  if (format != Format::tinygemm && inner_k_tiles != 8) bad("inner_k_tiles applies to the tiled tinygemm format only");
  if (fill == Fill::extreme_zeros && !has_zeros()) bad("q4_0 has no zero points for fill: extreme_zeros");
  // Scales are at most 2^(scale_exp + 1 + b(K)) and |w| <= 16·scale: keep both finite (and
  // normal-ish) in fp16; bf16 has fp32's exponent range.
  const int lim = dtype == DType::fp16 || format == Format::q4_0 ? 8 : 24;
  if (scale_exp < -lim || scale_exp > lim)
    bad("scale_exp must lie in [-" + std::to_string(lim) + ", " + std::to_string(lim) + "] for " +
        (format == Format::q4_0 ? "q4_0's fp16 scales" : std::string(name(dtype)) + " scales"));
  if (defect == Defect::scale_groups && format == Format::q4_0)
    bad("q4_0 keeps its scales inside the blocks: no scale_groups defect");
  if (defect == Defect::zero_groups && format != Format::awq && format != Format::gptq)
    bad("defect zero_groups applies to awq and gptq (the formats with a qzeros tensor)");
  const auto v = contract_violation(*this);
  if (v && expect_error != v->argument)
    bad("the problem breaks the argument contract (" + v->why + "): it needs expect_error: " + v->argument);
  if (!v && !expect_error.empty()) bad("expect_error: " + expect_error + " given, but the problem is valid");
}

std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug) {
  if (!p.expect_error.empty()) return "planted impls run valid problems only";
  switch (bug) {
    case PlantedBug::group0_scale:
      return p.m == 1 && p.k / p.group >= 2 ? "" : "needs M = 1 and at least two groups along K";
    case PlantedBug::nibble_swap: return "";
    case PlantedBug::zero_before_scale: return p.has_zeros() ? "" : "q4_0 has no zero point";
    case PlantedBug::gptq_z: return p.format == Format::gptq ? "" : "only GPTQ stores z - 1";
    case PlantedBug::drop_partial_k:
      return p.k % kPlantedKTile != 0
                 ? ""
                 : "K = " + std::to_string(p.k) + " has no partial " + std::to_string(kPlantedKTile) + "-tile";
    case PlantedBug::drop_last_k: return "";
    case PlantedBug::fp16_as_bf16: return p.dtype == DType::fp16 ? "" : "x and the weights are bf16 already";
    case PlantedBug::sum_in_dtype_64:
      // K <= 64: the one rounding of the whole sum is the output's own, RN(RN(v)) = RN(v).
      return p.k > kPlantedSumEvery
                 ? ""
                 : "K <= " + std::to_string(kPlantedSumEvery) + ": the sum is rounded once, as the output is";
    case PlantedBug::split_k4_in_dtype:
      // Four roundings of partial sums P_q ≈ y/4 ± √(Q/4) are about the output's own half
      // spacing unless |y| is small against √Q, where the partials' spacings dwarf y's: for a
      // near-normal y (independent symmetric terms) |y| < √Q/4 with probability erf(1/(4√2)) =
      // 0.197, so every element of an output of E elements hides the bug with probability about
      // 0.8^E, below 1e-6 only from E = 62 on.
      return p.m * p.n >= kPlantedSplitElements
                 ? ""
                 : std::to_string(p.m * p.n) + " elements: four partial roundings can hide in every one of them";
  }
  return "";
}

}  // namespace opcts::int4_mm
