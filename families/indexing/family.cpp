// The scatter_add, index_add and index_select families wired into the registry: one family class, its op fixed per
// instance; their plugin ABI bytes.
#include "core/abi_impl.hpp"
#include "core/wing_family.hpp"
#include "families/indexing/indexing.hpp"

namespace opcts {

namespace {

using indexing::Op;
using indexing::Problem;

// Element counts in double (Problem's numel helpers in int64 would overflow on absurd sizes).
double out_elems(const Problem& p) {
  return static_cast<double>(p.outer) * static_cast<double>(p.op == Op::index_select ? p.m : p.n) *
         static_cast<double>(p.inner);
}
double self_elems(const Problem& p) {
  return static_cast<double>(p.outer) * static_cast<double>(p.n) * static_cast<double>(p.inner);
}
double src_elems(const Problem& p) {
  return p.op == Op::index_select
             ? 0
             : static_cast<double>(p.outer) * static_cast<double>(p.m) * static_cast<double>(p.inner);
}
double index_elems(const Problem& p) { return p.op == Op::scatter_add ? src_elems(p) : static_cast<double>(p.m); }

class IndexingFamily final : public WingFamily<Problem> {
 public:
  explicit IndexingFamily(Op op) : op_(op) {}
  std::string_view name() const override { return indexing::to_string(op_); }
  const kit::FieldTable<Problem>& fields() const override { return indexing::fields(op_); }
  std::vector<std::string> edge_classes() const override { return indexing::edge_classes(op_); }
  std::vector<std::string> edge_classes_of(const opcts::Problem& p) const override {
    return indexing::edge_classes_of(get(p));
  }
  // Bump when the reference, its bounds or the inputs change: cached references are recomputed.
  std::string reference_version() const override { return "indexing-ref-5"; }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    // In double from the sizes: a catalog's sizes whose product overflows int64 (the numel
    // helpers) must still give a huge size for the catalog's size check (runner/catalog.hpp).
    const double bytes = static_cast<double>(storage_bytes(p.dtype)) * (self_elems(p) + src_elems(p) + out_elems(p)) +
                         static_cast<double>(storage_bytes(p.index_dtype)) * index_elems(p);
    // The reference's work: a double-double add and three bounds' passes per term (about 40
    // flops), a load per element.
    return {40 * src_elems(p) + 2 * out_elems(p), bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    OutputSpec o{"out", p.dtype, {p.outer, p.op == Op::index_select ? p.m : p.n, p.inner}};
    o.misalign_bytes = p.misalign ? 2 : 0;  // 2-byte elements: a 2- but not 4-byte aligned base
    return {o};
  }

  // Inputs and out, plus the sorted impls' scratch: 64-bit keys and 32-bit positions, both
  // double-buffered by the radix sort, the gathered terms in the accumulator type and the
  // chunk sums (about 40 bytes per term).
  double device_bytes(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    return cost(pp).bytes + 40 * src_elems(p);
  }

 private:
  Op op_;
};

}  // namespace

void register_indexing_family(Registry& reg) {
  for (Op op : {Op::scatter_add, Op::index_add, Op::index_select}) reg.add(std::make_unique<IndexingFamily>(op));
}

}  // namespace opcts

// The plugin ABI's parameter bytes of a problem (include/opcts/plugin.h).
namespace opcts::indexing {

namespace {

template <class C>
C common(const Problem& p) {
  C c{};
  c.struct_size = sizeof c;
  c.dtype = abi_dtype(p.dtype);
  c.index = abi_dtype(p.index_dtype);
  c.outer = p.outer;
  c.n = p.n;
  c.m = p.m;
  c.inner = p.inner;
  return c;
}

}  // namespace

std::vector<unsigned char> abi_params(const Problem& p) {
  switch (p.op) {
    case Op::scatter_add: return abi_bytes(common<opcts_scatter_add_params>(p));
    case Op::index_add: {
      auto c = common<opcts_index_add_params>(p);
      c.alpha = p.alpha;
      return abi_bytes(c);
    }
    case Op::index_select: return abi_bytes(common<opcts_index_select_params>(p));
  }
  return {};
}

}  // namespace opcts::indexing
