// The cast family wired into the registry: outputs and costs, the inputs (inputs.cpp) and the codec reference
// (reference.cpp) behind make_inputs and reference; its plugin ABI bytes.
#include <cmath>

#include "core/abi_impl.hpp"
#include "core/kit_family.hpp"
#include "families/cast/cast.hpp"

namespace opcts {

namespace {

using cast::Problem;

class CastFamily final : public KitFamily<Problem> {
 public:
  std::string_view name() const override { return "cast"; }
  const kit::FieldTable<Problem>& fields() const override { return cast::fields(); }
  std::vector<std::string> edge_classes() const override { return cast::edge_classes(); }
  std::vector<std::string> edge_classes_of(const opcts::Problem& p) const override {
    return cast::edge_classes_of(get(p));
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

  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override {
    return {{"y", get(p).to, {cast::input_count(get(p))}}};
  }

  std::vector<unsigned char> abi_params(const opcts::Problem& p) const override { return cast::abi_params(get(p)); }

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

  // One input and one output element per value, each at most 4 bytes on the device.
  double device_bytes(const opcts::Problem& p) const override { return cost(p).bytes; }
};

}  // namespace

void register_cast_family(Registry& reg) { reg.add(std::make_unique<CastFamily>()); }

}  // namespace opcts

// The plugin ABI's parameter bytes of a problem (include/opcts/plugin.h).
namespace opcts::cast {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_cast_params c{};
  c.struct_size = sizeof c;
  c.from = abi_dtype(p.from);
  c.to = abi_dtype(p.to);
  c.satfinite = p.overflow == Overflow::satfinite;
  c.e8m0_rounding = abi_value(p.rounding);
  c.n = input_count(p);
  return abi_bytes(c);
}

}  // namespace opcts::cast
