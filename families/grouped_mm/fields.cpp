// The grouped_mm problem's field table: YAML keys, id tokens and their order.
//
// Id: MODE_RECIPE_gG_mM_nN_kK, then, when they apply, skew | single | s<S>x<S>... (the split;
// uniform is left out), tailT, defect_D, expect_ARGUMENT.
#include "families/grouped_mm/grouped_mm.hpp"

namespace opcts::grouped_mm {

namespace {

using kit::Choice;
using kit::Field;

Field<Problem> split_field() {
  Field<Problem> f = kit::choice<Problem>(
      "split", &Problem::split,
      {{Split::uniform, "uniform", ""}, {Split::skewed, "skewed", "skew"}, {Split::single, "single", "single"}});
  f.doc += " (how offs cuts the split dimension; default uniform; or give sizes)";
  return f;
}

// `sizes: [162, 0, 2577]`: explicit group sizes (split: sizes), in the id as s162x0x2577.
Field<Problem> sizes_field() {
  Field<Problem> f;
  f.key = "sizes";
  f.doc = "[S, ...]: one size per group along the split dimension (in place of split)";
  f.id = "[sSxS...]";
  f.read = [](Problem& p, const YAML::Node& m) {
    const YAML::Node v = m["sizes"];
    if (!v) return;
    if (m["split"]) throw std::invalid_argument("give split or sizes, not both");
    if (!v.IsSequence() || v.size() == 0) throw std::invalid_argument("expected a list of group sizes");
    p.split = Split::sizes;
    for (const auto& s : v) p.sizes.push_back(kit::field_as_value<int64_t>(s));
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    if (p.split != Split::sizes) return;
    std::string s = "s";
    for (size_t i = 0; i < p.sizes.size(); ++i) s += (i ? "x" : "") + kit::int_token(p.sizes[i]);
    t.push_back(s);
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (p.split != Split::uniform) return;
    const auto rest = in.take_prefixed("s");
    if (!rest) return;
    p.split = Split::sizes;
    size_t at = 0;
    while (at <= rest->size()) {
      const size_t x = rest->find('x', at);
      p.sizes.push_back(kit::parse_int_token(rest->substr(at, x == std::string::npos ? std::string::npos : x - at)));
      if (x == std::string::npos) break;
      at = x + 1;
    }
  };
  return f;
}

Field<Problem> defect_field() {
  std::vector<Choice<Defect>> cs;
  for (Defect d : {Defect::none, Defect::offs_decreasing, Defect::offs_out_of_range, Defect::offs_count,
                   Defect::a_scale_count, Defect::b_scale_count}) {
    std::string token(to_string(d));
    std::erase(token, '_');
    cs.push_back({d, std::string(to_string(d)), d == Defect::none ? "" : token});
  }
  return kit::defect_choice<Problem>(&Problem::defect, cs);
}

}  // namespace

const kit::FieldTable<Problem>& fields() {
  static const kit::FieldTable<Problem> table(
      "grouped_mm",
      {kit::enum_choice<Problem>("mode", &Problem::mode, true),
       kit::enum_choice<Problem>("recipe", &Problem::recipe, true),
       kit::int_always<Problem>("groups", &Problem::groups, "g", "G (experts)", true),
       kit::int_always<Problem>("m", &Problem::m, "m", "M (2d_3d: the rows of all groups, the sum of their sizes)",
                                true),
       kit::int_always<Problem>("n", &Problem::n, "n", "N (3d_2d: the columns of all groups)", true),
       kit::int_always<Problem>("k", &Problem::k, "k", "K (2d_2d: the K of all groups)", true), split_field(),
       sizes_field(),
       kit::int_unless<Problem, int64_t>("tail", &Problem::tail, 0, "tail",
                                         "T: rows (2d_3d), K (2d_2d) or columns (3d_2d) past the last offset"),
       defect_field(), kit::expect_argument<Problem>(&Problem::expect_error, "K, N, offs, scale_a, scale_b")},
      [](const Problem& p) { p.validate(); });
  return table;
}

}  // namespace opcts::grouped_mm
