// The int4_mm problem's field table: YAML keys, id tokens and their order.
//
// Id: FORMAT_DTYPE_mM_nN_kK_gG, then, when they apply, iktI (tiled tinygemm), zeroext | allcodes
// (fill), sexpE, defect_D, expect_ARGUMENT.
#include "families/int4_mm/int4_mm.hpp"

namespace opcts::int4_mm {

namespace {

using kit::Choice;
using kit::Field;

// The group size: default 128, 32 for Q4_0 (so the format row comes first); always in the id.
Field<Problem> group_field() {
  Field<Problem> f =
      kit::int_always<Problem>("group", &Problem::group, "g", "G: 32 | 64 | 128 | 256 (default 128; q4_0: 32)", false);
  f.read = [](Problem& p, const YAML::Node& m) {
    p.group = p.format == Format::q4_0 ? 32 : 128;
    if (const YAML::Node v = m["group"]) p.group = kit::field_as_value<int64_t>(v);
  };
  return f;
}

// innerKTiles of the tiled tinygemm packing, in the id of that format only (written there even
// at its default, so an id always says which packing it tests).
Field<Problem> inner_k_tiles_field() {
  Field<Problem> f = kit::int_unless<Problem, int>("inner_k_tiles", &Problem::inner_k_tiles, 8, "ikt",
                                                   "2 | 4 | 8 (tiled tinygemm; default 8)");
  f.id = "[iktI]";
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    if (p.format == Format::tinygemm) t.push_back("ikt" + std::to_string(p.inner_k_tiles));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (p.format != Format::tinygemm) return;
    const auto v = in.take_prefixed("ikt");
    if (!v) throw std::invalid_argument("token '" + in.peek() + "': expected iktI for tinygemm");
    p.inner_k_tiles = static_cast<int>(kit::parse_int_token(*v));
  };
  return f;
}

}  // namespace

const kit::FieldTable<Problem>& fields() {
  static const kit::FieldTable<Problem> table(
      "int4_mm",
      {kit::enum_choice<Problem>("format", &Problem::format, true),
       kit::dtype_bare<Problem>("dtype", &Problem::dtype,
                                "bf16 | fp16 (activations, output and, but for q4_0, scales)"),
       kit::int_always<Problem>("m", &Problem::m, "m", "M (rows of x)", true),
       kit::int_paired<Problem>("n", &Problem::n, "nk", "k"), kit::int_paired<Problem>("k", &Problem::k, "nk", "n"),
       kit::pair_alias<Problem>("nk", "n", &Problem::n, "k", &Problem::k), group_field(), inner_k_tiles_field(),
       kit::choice<Problem>("fill", &Problem::fill,
                            {{Fill::random, "random", ""},
                             {Fill::extreme_zeros, "extreme_zeros", "zeroext"},
                             {Fill::all_codes, "all_codes", "allcodes"}}),
       kit::int_unless<Problem, int>("scale_exp", &Problem::scale_exp, 0, "sexp", "E: scales shifted by 2^E"),
       kit::defect_choice<Problem>(&Problem::defect, {{Defect::none, "none", ""},
                                                      {Defect::scale_groups, "scale_groups", "scalegroups"},
                                                      {Defect::zero_groups, "zero_groups", "zerogroups"}}),
       kit::expect_argument<Problem>(&Problem::expect_error, "group_size, K, N, scale_and_zero, scales, qzeros")},
      [](const Problem& p) { p.validate(); });
  return table;
}

}  // namespace opcts::int4_mm
