// The int4_mm family: weight-only int4 matmul y = x·Wᵀ — problem, id, inputs, exact fp64 reference and error bound.
//
// x is [M, K] in bf16 or fp16 (the activation dtype), W [N, K] quantized along K in groups of
// g ∈ {32, 64, 128, 256} (Q4_0: 32) and packed in one of the formats of families/int4_mm/int4_pack.hpp;
// y is [M, N] in the activation dtype. Dequantization per format (w of code q in group k / g):
//   tinygemm, tinygemm_unpacked   w = (q − 8)·scale + zero       scale, zero in the dtype
//   awq                           w = (q − z)·scale, z ∈ [0, 15]  scale in the dtype
//   gptq                          w = (q − z)·scale, z = stored + 1 ∈ [1, 16]
//   q4_0                          w = (q − 8)·d                   d fp16 (may be negative)
//
// Inputs (TensorMap), exactly the buffers a device uploads:
//   "x"               [M, K] dtype, row-major
//   "weight"          uint4, the packed weight in the format's shape (int4_pack.hpp)
//   "scale_and_zero"  [K/g, N, 2] dtype (tinygemm formats)
//   "scales"          [K/g, N] dtype, "qzeros" uint4 [K/g, N/8, 8] (awq, gptq)
// Output "y": [M, N] dtype, row-major.
//
// Fills are drawn in the code domain (random codes, scales and zero points, never a quantized
// float weight), so a 14336 × 4096 weight costs one Philox block per 32 codes and one per
// (group, column) for its scale and zero point. Codes of the random fill at the packing's own
// shape are the packed weight's bytes themselves (every nibble of a packed format is a code, so
// uniform bytes are uniform codes in the format's order; Q4_0's d written over them); the
// all_codes fill and padded negative cases draw codes per (n, k) and pack them:
//   scales  m·2^(e + b(K) + scale_exp), m ∈ [1, 2), e ∈ {−3, ..., 0} per (group, column),
//           b(K) = −2 − ⌈log2(K)/2⌉ so that |y| is O(1); Q4_0's d gets a random sign
//   zeros   tinygemm: zero = (8 − p)·scale with p ∈ [0, 15] uniform (p is the integer zero
//           point the float zero stands for); awq: z uniform in [0, 15]; gptq: stored uniform
//   fill    random: codes uniform in [0, 15]; extreme_zeros: every zero point is 0 or 15
//           (tinygemm p ∈ {0, 15}, i.e. zero ∈ {8·scale, −7·scale}; awq z; gptq's stored code,
//           i.e. z ∈ {1, 16}, 16 being the wrap of a true 0); all_codes: the first 16 codes of
//           every group of every column are a permutation of 0..15
//   x       N(0, 1) rounded to the dtype
//
// Negative cases: the operator's argument contract (g ∈ {32, 64, 128, 256}, 32 for Q4_0; K a
// multiple of g and of the packing's K tile; N a multiple of 8 where the packing needs it; scale
// and zero tensors with K/g groups) may be broken only with `expect_error: <argument>`; a
// `defect` hands the impl a scale or zero tensor packed at group size 4g while the problem says g.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/abi_enum.hpp"
#include "core/errors.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"
#include "include/opcts/plugin.h"

namespace opcts::int4_mm {

/// The packing, valued by the ABI's constants (opcts_int4_mm_params::format); the kernels'
/// Int4Format is spelled with the same constants.
enum class Format : int32_t {
  tinygemm = OPCTS_INT4_TINYGEMM,
  tinygemm_unpacked = OPCTS_INT4_TINYGEMM_UNPACKED,
  awq = OPCTS_INT4_AWQ,
  gptq = OPCTS_INT4_GPTQ,
  q4_0 = OPCTS_INT4_Q4_0,
};
/// The one name table of Format: YAML name and id token alike.
inline constexpr std::array<EnumName<Format>, 5> kFormatNames{{
    {Format::tinygemm, "tinygemm", "tinygemm"},
    {Format::tinygemm_unpacked, "tinygemm_unpacked", "tinygemm_unpacked"},
    {Format::awq, "awq", "awq"},
    {Format::gptq, "gptq", "gptq"},
    {Format::q4_0, "q4_0", "q4_0"},
}};
constexpr const auto& enum_names(Format) { return kFormatNames; }
static_assert(abi_distinct<Format>());
constexpr std::string_view to_string(Format f) { return enum_name(f); }
const std::vector<Format>& all_formats();

enum class Fill { random, extreme_zeros, all_codes };
/// A deliberately wrong input for a negative case: the scale (or zero) tensor holds the groups
/// of a 4× larger group size than the problem states.
enum class Defect { none, scale_groups, zero_groups };

struct Problem {
  Format format = Format::tinygemm;
  DType dtype = DType::bf16;
  int64_t m = 1, n = 8, k = 256;
  int64_t group = 128;
  int inner_k_tiles = 8;  // tiled tinygemm only
  Fill fill = Fill::random;
  int scale_exp = 0;
  Defect defect = Defect::none;
  std::string expect_error;  // the argument a negative case's impls must refuse; "" otherwise

  bool has_zeros() const { return format != Format::q4_0; }
  bool tinygemm() const { return format == Format::tinygemm || format == Format::tinygemm_unpacked; }
  /// K / g, rounded up (the group count of the inputs; exact for valid problems).
  int64_t groups() const { return (k + group - 1) / group; }
  /// The DType of the scales: fp16 for Q4_0, the activation dtype otherwise.
  DType scale_dtype() const { return format == Format::q4_0 ? DType::fp16 : dtype; }
  /// Throws std::invalid_argument naming the field for a malformed problem, and for a contract
  /// violation whose expect_error does not name it.
  void validate() const;
  bool operator==(const Problem&) const = default;
};

/// The plugin ABI's opcts_int4_mm_params for a problem, as bytes (families/int4_mm/family.cpp).
std::vector<unsigned char> abi_params(const Problem& p);

/// The field table (families/int4_mm/fields.cpp): YAML keys format, dtype, m, n, k (or nk),
/// group, inner_k_tiles, fill, scale_exp, defect, expect_error.
/// Id: FORMAT_DTYPE_mM_nN_kK_gG, then ikt<I> (tiled tinygemm), zeroext | allcodes, sexp<E>,
/// defect_<d>, expect_<argument>.
const kit::FieldTable<Problem>& fields();

/// The first break of the argument contract: {argument, why}, or nullopt. Arguments: "group_size",
/// "K", "N", "inner_k_tiles", "scale_and_zero", "scales", "qzeros".
using opcts::Violation;
std::optional<Violation> contract_violation(const Problem& p);
/// The K multiple the packing needs besides g: 16·inner_k_tiles (tiled tinygemm), 8 (gptq), 32
/// (q4_0), 2 (unpacked tinygemm), 1 (awq).
int64_t packing_k_tile(const Problem& p);
/// The N multiple the packing needs: 8 (tiled tinygemm, awq, gptq), 1 otherwise.
int64_t packing_n_tile(const Problem& p);

/// The bug classes of the planted impls (host.int4_*, cuda.int4_*): group 0's scale and zero
/// used for every group when M = 1; the two nibbles of every weight byte exchanged; the zero
/// point on the wrong side of the scale; GPTQ's stored z − 1 taken as z; K walked in tiles of
/// kPlantedKTile with a partial last tile dropped; and the precision bugs of real kernels: the
/// last K element dropped (an off-by-one loop bound); an fp16 problem computed in bf16 (x and
/// ŵ rounded to bf16: a kernel instantiated for the wrong 16-bit type); the running sum
/// rounded to the dtype every kPlantedSumEvery K elements (a 16-bit accumulator register);
/// split-K over kPlantedSplits slices whose partial sums are stored in the dtype.
enum class PlantedBug {
  group0_scale,
  nibble_swap,
  zero_before_scale,
  gptq_z,
  drop_partial_k,
  drop_last_k,
  fp16_as_bf16,
  sum_in_dtype_64,
  split_k4_in_dtype,
};
constexpr int64_t kPlantedKTile = 128;
constexpr int64_t kPlantedSumEvery = 64;
constexpr int64_t kPlantedSplits = 4;
constexpr int64_t kPlantedSplitElements = 64;  // outputs below this may hide split_k4_in_dtype (problem.cpp)
/// Why `bug` cannot change this problem's result ("" when it can): a planted impl SKIPs those
/// problems, so every case it runs is one it must fail. Only where the bug changes no output
/// value (or does not exist in the problem: a format without its zero point), or, for
/// split_k4_in_dtype, where an output of fewer than kPlantedSplitElements elements may hide its
/// four roundings in every element (derived in families/int4_mm/problem.cpp), is a problem left out; a
/// bound that cannot see the bug elsewhere is the bound's defect.
std::string planted_bug_cannot_show(const Problem& p, PlantedBug bug);

/// The inputs (see the file comment), a pure function of (problem, seed) (families/int4_mm/inputs.cpp).
TensorMap make_inputs(const Problem& p, uint64_t seed);

/// The fp64 reference ("y": the exact value, unrounded) and its reduction statistics
/// (References::reduction["y"]: S, Q, the dequantization's known offset Δ, no epilogue), from
/// which the `bounded` metric derives the bound under the impl's accumulator model (derivation
/// in families/int4_mm/reference.cpp and judge/accumulator.cpp).
References reference(const Problem& p, const TensorMap& inputs);

/// The edge classes of docs/coverage.md that apply to this family, in report order, and those
/// `p` reaches (families/int4_mm/coverage.cpp; Family::edge_classes).
std::vector<std::string> edge_classes();
std::vector<std::string> edge_classes_of(const Problem& p);

}  // namespace opcts::int4_mm

namespace opcts {
/// Registers the int4_mm family.
void register_int4_mm_family(Registry& reg);
}  // namespace opcts
