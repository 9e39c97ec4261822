// The scaled_mm problem's field table: YAML keys, id tokens and their order.
//
// Ids (scaled_mm.hpp, problem_id): RECIPE_AELEM_BELEM_LAYOUT_mM_nN_kK, then, when they apply,
// ldaN ldbN, floor|rceil (MX), scalerm (row-major MX/NVFP4 scales), out_DTYPE, osX (e4m3fn
// output), bias, fastacc, sexpE, random|exact, defect_D, expect_ARGUMENT.
#include "families/scaled_mm/scaled_mm.hpp"

namespace opcts::scaled_mm {

namespace {

using kit::Choice;
using kit::Field;

// `elem: e4m3fn` (both operands) or `elem: {a: e4m3fn, b: e5m2}`; the default follows the
// recipe (e2m1fn for the fp4 recipes, e4m3fn otherwise), so the recipe row comes first.
Field<Problem> elem_field() {
  Field<Problem> f;
  f.key = "elem";
  f.doc = "DTYPE for both operands, or {a: DTYPE, b: DTYPE} (default e4m3fn; e2m1fn for mxfp4, nvfp4)";
  f.id = "AELEM_BELEM";
  f.read = [](Problem& p, const YAML::Node& m) {
    p.a_elem = p.b_elem = p.is_fp4() ? DType::e2m1fn : DType::e4m3fn;
    const YAML::Node e = m["elem"];
    if (!e) return;
    if (e.IsMap()) {
      if (!e["a"] || !e["b"] || e.size() != 2) throw std::invalid_argument("expected a dtype or {a: DTYPE, b: DTYPE}");
      p.a_elem = parse_dtype(kit::field_as_scalar(e["a"], "a"));
      p.b_elem = parse_dtype(kit::field_as_scalar(e["b"], "b"));
    } else {
      p.a_elem = p.b_elem = parse_dtype(kit::field_as_scalar(e));
    }
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    t.emplace_back(name(p.a_elem));
    t.emplace_back(name(p.b_elem));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    p.a_elem = parse_dtype(in.take("the A element"));
    p.b_elem = parse_dtype(in.take("the B element"));
  };
  return f;
}

// cuBLAS letters, A then B: t = K contiguous for A (row-major), n = K contiguous for B.
Field<Problem> layout_field() {
  Field<Problem> f;
  f.key = "layout";
  f.doc = "tn | nn | nt | tt (cuBLAS letters, A then B; default tn)";
  f.id = "{tn|nn|nt|tt}";
  auto set = [](Problem& p, const std::string& l) {
    if (l.size() != 2 || (l[0] != 't' && l[0] != 'n') || (l[1] != 't' && l[1] != 'n'))
      throw std::invalid_argument("'" + l + "': expected tn, nn, nt or tt");
    p.a_layout = l[0] == 't' ? Layout::row : Layout::col;
    p.b_layout = l[1] == 'n' ? Layout::col : Layout::row;
  };
  f.read = [set](Problem& p, const YAML::Node& m) {
    if (const YAML::Node v = m["layout"]) set(p, kit::field_as_scalar(v));
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    t.push_back(std::string(1, p.a_layout == Layout::row ? 't' : 'n') + (p.b_layout == Layout::col ? 'n' : 't'));
  };
  f.scan = [set](Problem& p, kit::IdReader& in) { set(p, in.take("the layout")); };
  return f;
}

// MX scale rounding, in the id of MX recipes only (written there even at its default).
Field<Problem> mx_mode_field() {
  Field<Problem> f = kit::choice<Problem>(
      "mx_mode", &Problem::mx_mode,
      {{quant::MxScaleMode::floor, "floor", "floor"}, {quant::MxScaleMode::rceil, "rceil", "rceil"}});
  f.doc += " (mxfp8, mxfp4; default floor)";
  f.write = [w = f.write](const Problem& p, std::vector<std::string>& t) {
    if (p.is_mx()) w(p, t);
  };
  f.scan = [s = f.scan](Problem& p, kit::IdReader& in) {
    if (p.is_mx()) s(p, in);
  };
  return f;
}

Field<Problem> scale_layout_field() {
  Field<Problem> f;
  f.key = "scale_layout";
  f.doc = "swizzled | row_major (MX / NVFP4 scales; default swizzled)";
  f.id = "[scalerm]";
  f.read = [](Problem& p, const YAML::Node& m) {
    if (const YAML::Node v = m["scale_layout"]) p.scale_layout = quant::parse_scale_layout(kit::field_as_scalar(v));
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    if (p.block_scaled() && p.scale_layout == quant::ScaleLayout::row_major) t.emplace_back("scalerm");
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (in.take_seq("scalerm")) p.scale_layout = quant::ScaleLayout::row_major;
  };
  return f;
}

// `out: bf16`, or `out: {dtype: e4m3fn, scale: 0.25}` (a grid axis value that sets out_scale).
Field<Problem> out_field() {
  Field<Problem> f;
  f.key = "out";
  f.doc = "bf16 | fp16 | fp32 | e4m3fn, or {dtype: DTYPE, scale: S} (default bf16)";
  f.id = "out_DTYPE";
  f.read = [](Problem& p, const YAML::Node& m) {
    const YAML::Node o = m["out"];
    if (!o) return;
    if (o.IsMap()) {
      if (!o["dtype"] || m["out_scale"])
        throw std::invalid_argument("as a map it is {dtype: DTYPE, scale: S} (and replaces out_scale)");
      for (const auto& kv : o)
        if (kv.first.as<std::string>() != "dtype" && kv.first.as<std::string>() != "scale")
          throw std::invalid_argument("unknown key '" + kv.first.as<std::string>() + "' (expected dtype, scale)");
      p.out = parse_dtype(kit::field_as_scalar(o["dtype"], "dtype"));
      if (o["scale"]) p.out_scale = kit::field_as_value<double>(o["scale"], "scale");
    } else {
      p.out = parse_dtype(kit::field_as_scalar(o));
    }
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    t.emplace_back("out");
    t.emplace_back(name(p.out));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (!in.take_seq("out")) throw std::invalid_argument("token '" + in.peek() + "': expected out_<dtype>");
    p.out = parse_dtype(in.take("the output dtype"));
  };
  return f;
}

// The output scale, in the id of every e4m3fn output (1 included) and of no other.
Field<Problem> out_scale_field() {
  return kit::num_when<Problem>("out_scale", &Problem::out_scale, "os", "S", "S > 0 (e4m3fn output only; default 1)",
                                [](const Problem& p) { return p.out == DType::e4m3fn; });
}

Field<Problem> defect_field() {
  std::vector<Choice<Defect>> cs;
  for (Defect d :
       {Defect::none, Defect::a_scale_shape, Defect::b_scale_shape, Defect::a_scale_dtype, Defect::b_scale_dtype})
    cs.push_back({d, std::string(to_string(d)), d == Defect::none ? "" : std::string(to_string(d))});
  return kit::defect_choice<Problem>(&Problem::defect, cs);
}

}  // namespace

const kit::FieldTable<Problem>& fields() {
  static const kit::FieldTable<Problem> table(
      "scaled_mm",
      {kit::enum_choice<Problem>("recipe", &Problem::recipe, true), elem_field(), layout_field(),
       kit::int_always<Problem>("m", &Problem::m, "m", "M", true),
       kit::int_paired<Problem>("n", &Problem::n, "nk", "k"), kit::int_paired<Problem>("k", &Problem::k, "nk", "n"),
       kit::pair_alias<Problem>("nk", "n", &Problem::n, "k", &Problem::k),
       kit::int_unless<Problem, int64_t>("lda", &Problem::lda, 0, "lda",
                                         "leading dimension of A in elements (0 = tight)"),
       kit::int_unless<Problem, int64_t>("ldb", &Problem::ldb, 0, "ldb",
                                         "leading dimension of B in elements (0 = tight)"),
       mx_mode_field(), scale_layout_field(), out_field(), out_scale_field(),
       kit::flag<Problem>("bias", &Problem::bias, "bias"),
       kit::flag<Problem>("fast_accum", &Problem::fast_accum, "fastacc"),
       kit::int_unless<Problem, int>("scale_exp", &Problem::scale_exp, 0, "sexp",
                                     "E: data (random) or scale exponents (exact) shifted by 2^E"),
       kit::choice<Problem>("fill", &Problem::fill,
                            {{Fill::random, "random", "random"}, {Fill::exact, "exact", "exact"}}, false),
       defect_field(), kit::expect_argument<Problem>(&Problem::expect_error, "K, lda, ldb, layout, a_scale, b_scale")},
      [](const Problem& p) { p.validate(); });
  return table;
}

}  // namespace opcts::scaled_mm
