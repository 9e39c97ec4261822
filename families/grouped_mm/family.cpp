// The grouped_mm family wired into the registry: YAML problems, ids, inputs, reference and negative cases; its plugin
// ABI bytes.
#include "core/abi_impl.hpp"
#include "core/wing_family.hpp"
#include "families/grouped_mm/grouped_mm.hpp"

namespace opcts {

namespace {

using grouped_mm::Problem;

class GroupedMmFamily final : public WingFamily<Problem> {
 public:
  std::vector<std::string> edge_classes() const override { return grouped_mm::edge_classes(); }
  std::vector<std::string> edge_classes_of(const opcts::Problem& p) const override {
    return grouped_mm::edge_classes_of(get(p));
  }
  std::string_view name() const override { return "grouped_mm"; }
  const kit::FieldTable<Problem>& fields() const override { return grouped_mm::fields(); }
  // Bump when the reference or the inputs change: cached references are then recomputed.
  std::string reference_version() const override { return "grouped_mm-ref-5"; }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    double flops = 0;
    for (int64_t g = 0; g < p.groups; ++g) {
      const grouped_mm::GroupView v = grouped_mm::group_view(p, g);
      flops += 2.0 * static_cast<double>(v.rows) * static_cast<double>(v.cols) * static_cast<double>(v.depth);
    }
    auto numel = [](const std::vector<int64_t>& s) {
      double n = 1;
      for (int64_t d : s) n *= static_cast<double>(d);
      return n;
    };
    const double elem = p.recipe == grouped_mm::Recipe::bf16 ? 2 : 1;
    const double bytes =
        elem * (numel(grouped_mm::a_shape(p)) + numel(grouped_mm::b_shape(p))) + 2 * numel(grouped_mm::out_shape(p));
    // The reference's three fp64 GEMMs and the dequantization of both operands dominate.
    return {3 * flops + 8 * numel(grouped_mm::b_shape(p)), bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override {
    return {{"out", DType::bf16, grouped_mm::out_shape(get(p))}};
  }
};

}  // namespace

void register_grouped_mm_family(Registry& reg) { reg.add(std::make_unique<GroupedMmFamily>()); }

}  // namespace opcts

// The plugin ABI's parameter bytes of a problem (include/opcts/plugin.h).
namespace opcts::grouped_mm {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_grouped_mm_params c{};
  c.struct_size = sizeof c;
  c.mode = abi_value(p.mode);
  c.recipe = abi_value(p.recipe);
  c.groups = p.groups;
  // The tensors' extents: the split dimension's includes the rows past the last offset.
  c.m = p.mode == Mode::m2d_3d ? p.m + p.tail : p.m;
  c.n = p.mode == Mode::m3d_2d ? p.n + p.tail : p.n;
  c.k = p.mode == Mode::m2d_2d ? p.k + p.tail : p.k;
  return abi_bytes(c);
}

}  // namespace opcts::grouped_mm
