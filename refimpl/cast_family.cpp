// The cast family wired into the registry: YAML problems, ids, inputs and the codec reference.
#include <yaml-cpp/yaml.h>

#include "core/yaml_util.hpp"
#include "refimpl/cast.hpp"

namespace opcts {

namespace {

using cast::Problem;

class CastFamily final : public Family {
 public:
  std::string_view name() const override { return "cast"; }

  ProblemPtr parse(const YAML::Node& n) const override {
    if (!n.IsMap()) throw std::runtime_error("a cast problem must be a map");
    for (const auto& kv : n) {
      const auto k = kv.first.as<std::string>();
      if (k != "from" && k != "to" && k != "overflow" && k != "rounding" && k != "input" && k != "count")
        throw std::runtime_error("unknown cast field '" + k + "' (expected from, to, overflow, rounding, input, count)");
    }
    auto p = std::make_shared<Problem>();
    if (!n["from"] || !n["to"] || !n["input"]) throw std::runtime_error("a cast problem needs from, to and input");
    p->from = parse_dtype(field_as<std::string>(n, "from"));
    p->to = parse_dtype(field_as<std::string>(n, "to"));
    p->input = cast::parse_input(field_as<std::string>(n, "input"));
    if (n["overflow"]) {
      const auto o = field_as<std::string>(n, "overflow");
      if (o == "satfinite") p->overflow = Overflow::satfinite;
      else if (o == "nonsaturating") p->overflow = Overflow::nonsaturating;
      else throw std::runtime_error("overflow '" + o + "': expected satfinite or nonsaturating");
    }
    if (n["rounding"]) {
      const auto r = field_as<std::string>(n, "rounding");
      if (r == "floor") p->rounding = ScaleRounding::floor;
      else if (r == "ceil") p->rounding = ScaleRounding::ceil;
      else if (r == "rne") p->rounding = ScaleRounding::rne;
      else throw std::runtime_error("rounding '" + r + "': expected floor, ceil or rne");
    }
    if (n["count"]) p->count = field_as<int64_t>(n, "count");
    p->validate();
    return p;
  }

  std::string problem_id(const opcts::Problem& p) const override { return cast::problem_id(get(p)); }
  ProblemPtr parse_id(std::string_view id) const override {
    return std::make_shared<Problem>(cast::parse_problem_id(id));
  }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    double n = 0;
    switch (p.input) {
      case cast::Input::exhaustive:
      case cast::Input::all_codes: n = std::ldexp(1.0, dtype_info(p.from).bits); break;
      case cast::Input::edges: n = 4096; break;
      case cast::Input::random: n = static_cast<double>(p.count); break;
    }
    // The codec reference costs about 50 conversions' worth of arithmetic per value.
    return {50 * n, 8 * n};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override { return {{"y", get(p).to}}; }

  TensorMap make_inputs(const opcts::Problem& p, uint64_t seed) const override {
    TensorMap in;
    in.emplace("x", cast::make_input(get(p), seed));
    return in;
  }

  References reference(const opcts::Problem& p, const TensorMap& inputs) const override {
    References r;
    r.exact["y"] = cast::reference_output(get(p), inputs.at("x")).to_f64();
    return r;
  }

  // Bump when the codecs (reference_output) or make_input change.
  std::string reference_version() const override { return "cast-ref-1"; }

  // Conversions to narrow formats flush small inputs to zero legitimately: allow exactly the
  // zeros the reference holds (the trust check's max(this, reference) + margin), no more.
  double max_zero_fraction(const opcts::Problem&, const std::string&) const override { return 0; }

  // One input and one output element per value, each at most 4 bytes on the device.
  double device_bytes(const opcts::Problem& p) const override { return cost(p).bytes; }

 private:
  static const Problem& get(const opcts::Problem& p) { return dynamic_cast<const Problem&>(p); }
};

}  // namespace

void register_cast_family(Registry& reg) { reg.add(std::make_unique<CastFamily>()); }

}  // namespace opcts
