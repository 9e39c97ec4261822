// The scaled_mm family wired into the registry: YAML problems, ids, inputs, reference and negative cases; its plugin
// ABI bytes.
#include "core/abi_impl.hpp"
#include "core/wing_family.hpp"
#include "families/scaled_mm/scaled_mm.hpp"

namespace opcts {

namespace {

using scaled_mm::Problem;

class ScaledMmFamily final : public WingFamily<Problem> {
 public:
  std::vector<std::string> edge_classes() const override { return scaled_mm::edge_classes(); }
  std::vector<std::string> edge_classes_of(const opcts::Problem& p) const override {
    return scaled_mm::edge_classes_of(get(p));
  }
  std::string_view name() const override { return "scaled_mm"; }
  // The rows of A (tokens): A row-major, its scales one per tensor, per row or per (row, K block)
  // (every recipe's A is 1×128 at most; the runner checks each input's shape); MX and NVFP4
  // scales are swizzled over 128 rows, which a cut along the rows cannot follow.
  int64_t Problem::*batch_field() const override { return &Problem::m; }
  std::string batch_uncuttable(const Problem& p) const override {
    if (p.a_layout != scaled_mm::Layout::row) return "A is column-major: its rows do not lead its storage";
    if (p.block_scaled()) return "MX and NVFP4 scales are swizzled over blocks of 128 rows";
    return "";
  }
  const kit::FieldTable<Problem>& fields() const override { return scaled_mm::fields(); }
  // Bump when the reference or the inputs change: cached references are then recomputed.
  // 2: values beyond the output's range are kept unrounded for the bounded metric.
  // 3: reduction statistics instead of a bound; exact fills narrow enough for 14-bit adders.
  std::string reference_version() const override { return "scaled_mm-ref-8"; }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
    // The reference's three fp64 GEMMs (values, magnitudes and squares for the bounds) dominate.
    const double bytes = (m + n) * k * dtype_info(p.a_elem).bits / 8 + m * n * storage_bytes(p.out);
    return {6 * m * n * k, bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& p) const override {
    return {{"d", get(p).out, {get(p).m, get(p).n}}};
  }
};

}  // namespace

void register_scaled_mm_family(Registry& reg) { reg.add(std::make_unique<ScaledMmFamily>()); }

}  // namespace opcts

// The plugin ABI's parameter bytes of a problem (include/opcts/plugin.h).
namespace opcts::scaled_mm {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_scaled_mm_params c{};
  c.struct_size = sizeof c;
  c.m = p.m;
  c.n = p.n;
  c.k = p.k;
  c.a_elem = abi_dtype(p.a_elem);
  c.b_elem = abi_dtype(p.b_elem);
  c.out = abi_dtype(p.out);
  c.bias = p.bias;
  c.recipe = abi_value(p.recipe);
  c.a_row_major = p.a_layout == Layout::row;
  c.b_col_major = p.b_layout == Layout::col;
  c.lda = p.eff_lda();
  c.ldb = p.eff_ldb();
  c.scale_layout =
      p.scale_layout == quant::ScaleLayout::row_major ? OPCTS_MM_SCALES_ROW_MAJOR : OPCTS_MM_SCALES_SWIZZLED;
  c.mx_rceil = p.mx_mode == quant::MxScaleMode::rceil;
  c.fast_accum = p.fast_accum;
  return abi_bytes(c);
}

}  // namespace opcts::scaled_mm
