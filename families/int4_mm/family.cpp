// The int4_mm family wired into the registry: YAML problems, ids, inputs, reference and negative cases; its plugin ABI
// bytes.
#include "core/abi_impl.hpp"
#include "core/wing_family.hpp"
#include "families/int4_mm/int4_mm.hpp"

namespace opcts {

namespace {

using int4_mm::Problem;

class Int4MmFamily final : public WingFamily<Problem> {
 public:
  std::vector<std::string> edge_classes() const override { return int4_mm::edge_classes(); }
  std::vector<std::string> edge_classes_of(const opcts::Problem& p) const override {
    return int4_mm::edge_classes_of(get(p));
  }
  std::string_view name() const override { return "int4_mm"; }
  const kit::FieldTable<Problem>& fields() const override { return int4_mm::fields(); }
  // Bump when the reference or the inputs change: cached references are then recomputed.
  std::string reference_version() const override { return "int4_mm-ref-4"; }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
    // The reference's four fp64 GEMMs (value, Δ, magnitudes, squares) and its dequantization of
    // N·K weights (counted as a few flops each) dominate; bytes are what a device moves.
    const double bytes = n * k / 2 + m * k * 2 + m * n * 2 + n * static_cast<double>(p.groups()) * 4;
    return {8 * m * n * k + 16 * n * k, bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override {
    return {{"y", get(p).dtype, {get(p).m, get(p).n}}};
  }
};

}  // namespace

void register_int4_mm_family(Registry& reg) { reg.add(std::make_unique<Int4MmFamily>()); }

}  // namespace opcts

// The plugin ABI's parameter bytes of a problem (include/opcts/plugin.h).
namespace opcts::int4_mm {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_int4_mm_params c{};
  c.struct_size = sizeof c;
  c.dtype = abi_dtype(p.dtype);
  c.m = p.m;
  c.n = p.n;
  c.k = p.k;
  c.group_size = p.group;
  c.format = abi_value(p.format);
  c.inner_k_tiles = p.inner_k_tiles;
  return abi_bytes(c);
}

}  // namespace opcts::int4_mm
