// The scaled_mm family wired into the registry: YAML problems, ids, inputs, reference and negative cases.
#include <yaml-cpp/yaml.h>

#include "core/yaml_util.hpp"
#include "refimpl/scaled_mm.hpp"

namespace opcts {

namespace {

using scaled_mm::Problem;

constexpr const char* kFields[] = {"m", "n", "k", "nk", "layout", "lda", "ldb", "recipe", "elem", "mx_mode",
                                   "scale_layout", "out", "out_scale", "bias", "fast_accum", "fill", "scale_exp",
                                   "defect", "expect_error"};

class ScaledMmFamily final : public Family {
 public:
  std::string_view name() const override { return "scaled_mm"; }
  // Bump when the reference or the inputs change: cached references are then recomputed.
  // 2: values beyond the output's range are kept unrounded for the bounded metric.
  std::string reference_version() const override { return "scaled_mm-ref-2"; }

  // Fields: m, n, k (or nk: {n, k}); recipe; elem (one dtype for both, or {a, b}; default
  // e4m3fn, e2m1fn for fp4 recipes); layout tn | nn | nt | tt (default tn); lda, ldb;
  // mx_mode floor | rceil; scale_layout swizzled | row_major; out; out_scale; bias;
  // fast_accum; fill random | exact; scale_exp; defect; expect_error.
  ProblemPtr parse(const YAML::Node& n) const override {
    if (!n.IsMap()) throw std::runtime_error("a scaled_mm problem must be a map");
    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>();
      bool ok = false;
      for (const char* f : kFields) ok = ok || key == f;
      if (!ok)
        throw std::runtime_error("unknown scaled_mm field '" + key +
                                 "' (expected m, n, k, nk, layout, lda, ldb, recipe, elem, mx_mode, scale_layout, out, "
                                 "out_scale, bias, fast_accum, fill, scale_exp, defect, expect_error)");
    }
    auto p = std::make_shared<Problem>();
    if (!n["recipe"]) throw std::runtime_error("missing field 'recipe'");
    p->recipe = scaled_mm::parse_recipe(field_as<std::string>(n, "recipe"));
    if (!n["m"]) throw std::runtime_error("missing field 'm'");
    p->m = field_as<int64_t>(n, "m");
    if (n["nk"]) {
      const YAML::Node nk = n["nk"];
      if (!nk.IsMap() || !nk["n"] || !nk["k"] || n["n"] || n["k"])
        throw std::runtime_error("field 'nk' must be {n: N, k: K} (and replaces fields n and k)");
      p->n = field_as<int64_t>(nk, "n");
      p->k = field_as<int64_t>(nk, "k");
    } else {
      if (!n["n"] || !n["k"]) throw std::runtime_error("missing field 'n' or 'k' (or give nk: {n, k})");
      p->n = field_as<int64_t>(n, "n");
      p->k = field_as<int64_t>(n, "k");
    }
    const DType def = p->is_fp4() ? DType::e2m1fn : DType::e4m3fn;
    p->a_elem = p->b_elem = def;
    if (const YAML::Node e = n["elem"]) {
      if (e.IsMap()) {
        if (!e["a"] || !e["b"]) throw std::runtime_error("field 'elem' must be a dtype or {a: DTYPE, b: DTYPE}");
        p->a_elem = parse_dtype(field_as<std::string>(e, "a"));
        p->b_elem = parse_dtype(field_as<std::string>(e, "b"));
      } else {
        p->a_elem = p->b_elem = parse_dtype(field_as<std::string>(n, "elem"));
      }
    }
    if (n["layout"]) {
      const auto l = field_as<std::string>(n, "layout");
      if (l != "tn" && l != "nn" && l != "nt" && l != "tt")
        throw std::runtime_error("field 'layout': '" + l + "' (expected tn, nn, nt or tt: cuBLAS letters, A then B)");
      p->a_layout = l[0] == 't' ? scaled_mm::Layout::row : scaled_mm::Layout::col;
      p->b_layout = l[1] == 'n' ? scaled_mm::Layout::col : scaled_mm::Layout::row;
    }
    if (n["lda"]) p->lda = field_as<int64_t>(n, "lda");
    if (n["ldb"]) p->ldb = field_as<int64_t>(n, "ldb");
    if (n["mx_mode"]) {
      const auto s = field_as<std::string>(n, "mx_mode");
      if (s == "floor") p->mx_mode = quant::MxScaleMode::floor;
      else if (s == "rceil") p->mx_mode = quant::MxScaleMode::rceil;
      else throw std::runtime_error("field 'mx_mode': '" + s + "' (expected floor or rceil)");
    }
    if (n["scale_layout"]) p->scale_layout = quant::parse_scale_layout(field_as<std::string>(n, "scale_layout"));
    if (const YAML::Node o = n["out"]; o && o.IsMap()) {  // out: {dtype: e4m3fn, scale: 0.25} (a grid axis value)
      if (!o["dtype"] || n["out_scale"]) throw std::runtime_error("field 'out' as a map is {dtype: DTYPE, scale: S} (and replaces out_scale)");
      p->out = parse_dtype(field_as<std::string>(o, "dtype"));
      if (o["scale"]) p->out_scale = field_as<double>(o, "scale");
    } else if (o) {
      p->out = parse_dtype(field_as<std::string>(n, "out"));
    }
    if (n["out_scale"]) p->out_scale = field_as<double>(n, "out_scale");
    if (n["bias"]) p->bias = field_as<bool>(n, "bias");
    if (n["fast_accum"]) p->fast_accum = field_as<bool>(n, "fast_accum");
    if (n["fill"]) {
      const auto f = field_as<std::string>(n, "fill");
      if (f == "random") p->fill = scaled_mm::Fill::random;
      else if (f == "exact") p->fill = scaled_mm::Fill::exact;
      else throw std::runtime_error("field 'fill': '" + f + "' (expected random or exact)");
    }
    if (n["scale_exp"]) p->scale_exp = field_as<int>(n, "scale_exp");
    if (n["defect"]) p->defect = scaled_mm::parse_defect(field_as<std::string>(n, "defect"));
    if (n["expect_error"]) p->expect_error = field_as<std::string>(n, "expect_error");
    p->validate();
    return p;
  }

  std::string problem_id(const opcts::Problem& p) const override { return scaled_mm::problem_id(get(p)); }
  ProblemPtr parse_id(std::string_view id) const override {
    return std::make_shared<Problem>(scaled_mm::parse_problem_id(id));
  }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
    // The reference's two fp64 GEMMs (values and magnitudes for the bound) dominate.
    const double bytes = (m + n) * k * dtype_info(p.a_elem).bits / 8 + m * n * storage_bytes(p.out);
    return {4 * m * n * k, bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override { return {{"d", get(p).out}}; }

  TensorMap make_inputs(const opcts::Problem& p, uint64_t seed) const override {
    return scaled_mm::make_inputs(get(p), seed);
  }

  References reference(const opcts::Problem& p, const TensorMap& inputs) const override {
    return scaled_mm::reference(get(p), inputs);
  }

  std::string expected_error(const opcts::Problem& p) const override { return get(p).expect_error; }

 private:
  static const Problem& get(const opcts::Problem& p) { return dynamic_cast<const Problem&>(p); }
};

}  // namespace

void register_scaled_mm_family(Registry& reg) { reg.add(std::make_unique<ScaledMmFamily>()); }

}  // namespace opcts
