// The toy family wired into the registry: one input x, one output y judged bit for bit.
#include "core/kit_family.hpp"
#include "families/toy/toy.hpp"

namespace opcts {

namespace {

class ToyFamily final : public KitFamily<toy::Problem> {
 public:
  std::string_view name() const override { return "toy"; }
  const kit::FieldTable<toy::Problem>& fields() const override { return toy::fields(); }
  Cost cost(const opcts::Problem& p) const override {
    const double n = static_cast<double>(get(p).n);
    return {n, 8 * n};
  }
  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override { return {{"y", DType::fp32, {get(p).n}}}; }
  TensorMap make_inputs(const opcts::Problem& p, uint64_t seed) const override {
    TensorMap in;
    in.emplace("x", toy::make_input(get(p), seed));
    return in;
  }
  References reference(const opcts::Problem& p, const TensorMap& inputs) const override {
    References r;
    r.exact["y"] = toy::reference_output(get(p), inputs.at("x"));
    return r;
  }
};

}  // namespace

void register_toy_family(Registry& reg) { reg.add(std::make_unique<ToyFamily>()); }

}  // namespace opcts
