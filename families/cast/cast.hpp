// The cast family: number-format conversions, fp32/fp16/bf16 → each narrow format and back.
//
// A problem converts a vector of inputs of dtype `from` to dtype `to`. Encoding (a wide
// `from`, a narrow `to`) rounds to nearest even under an overflow policy (and, for e8m0, a
// scale rounding mode); decoding (a narrow `from`, `to` fp32) is exact. The reference is
// opcts's own codec (numerics/codec.hpp); the comparison is bit-exact up to NaN payloads.
// Inputs (docs/catalog.md, "Edge classes": conversions):
//   exhaustive  every code of a 16-bit `from` (fp16, bf16): 65536 values
//   all_codes   every code of a narrow `from` (decoding)
//   edges       fp32 values at the target's edges: every representable value and its fp32
//               neighbours, every tie between neighbours and one fp32 ulp either side,
//               subnormals, half the smallest subnormal, the overflow thresholds, ±0, ±Inf, NaN
//   random      `count` fp32 values: half random bit patterns, half log-uniform in the
//               target's range (Philox, seeded by the id); a count of 0 converts nothing
//               (an empty tensor, which a kernel must not launch a grid of 0 blocks for)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/abi_enum.hpp"
#include "core/family.hpp"
#include "core/fields.hpp"

namespace opcts {

/// The one name table of e8m0 rounding (numerics' ScaleRounding, valued by the ABI's constants).
inline constexpr std::array<EnumName<ScaleRounding>, 3> kScaleRoundingNames{{
    {ScaleRounding::floor, "floor", "floor"},
    {ScaleRounding::ceil, "ceil", "ceil"},
    {ScaleRounding::rne, "rne", "rne"},
}};
constexpr const auto& enum_names(ScaleRounding) { return kScaleRoundingNames; }
static_assert(abi_distinct<ScaleRounding>());

}  // namespace opcts

namespace opcts::cast {

enum class Input { exhaustive, all_codes, edges, random };

struct Problem {
  DType from = DType::fp32;
  DType to = DType::e4m3fn;
  Overflow overflow = Overflow::satfinite;      // unlike encode_format's default (numerics/codec.hpp)
  ScaleRounding rounding = ScaleRounding::rne;  // e8m0fnu targets only
  Input input = Input::edges;
  int64_t count = -1;  // random only: how many values (−1: not given, which random refuses)

  bool decoding() const;  // a narrow `from` decoded to fp32
  /// Throws std::invalid_argument naming the field: unsupported direction, a policy the
  /// target has no code for (finite formats and int4 only saturate), rounding off e8m0, ...
  void validate() const;
  bool operator==(const Problem&) const = default;
};

/// The field table (families/cast/fields.cpp): YAML keys from, to, overflow, rounding, input,
/// count; the id below.
const kit::FieldTable<Problem>& fields();

/// "fp16_to_e4m3fn_satfinite_exhaustive", "fp32_to_e8m0fnu_ceil_nonsaturating_edges",
/// "fp32_to_e5m2_satfinite_random4000000", "e2m1fn_to_fp32_allcodes".
std::string problem_id(const Problem& p);
Problem parse_problem_id(std::string_view id);
/// The edge classes of docs/coverage.md that apply to conversions, in report order, and those
/// `p` reaches (families/cast/coverage.cpp; Family::edge_classes).
std::vector<std::string> edge_classes();
std::vector<std::string> edge_classes_of(const Problem& p);

/// How many values the problem converts (the length of x and y).
int64_t input_count(const Problem& p);
/// The plugin ABI's opcts_cast_params for a problem, as bytes (families/cast/family.cpp).
std::vector<unsigned char> abi_params(const Problem& p);

/// The input vector of a problem (dtype `from`), a pure function of (problem, seed)
/// (families/cast/inputs.cpp).
HostTensor make_input(const Problem& p, uint64_t seed);
/// fp32 values at the edges of format `to` (see "edges" above; families/cast/inputs.cpp).
std::vector<float> edge_values(DType to);
/// The reference output (dtype `to`): opcts's codec applied to every input (families/cast/reference.cpp).
HostTensor reference_output(const Problem& p, const HostTensor& input);

}  // namespace opcts::cast

namespace opcts {
void register_cast_family(Registry& reg);
}  // namespace opcts
