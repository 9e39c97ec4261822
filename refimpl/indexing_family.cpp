// The scatter_add, index_add and index_select families wired into the registry: one family class, its op fixed per instance.
#include "core/kit_family.hpp"
#include "refimpl/indexing.hpp"

namespace opcts {

namespace {

using indexing::Op;
using indexing::Problem;

class IndexingFamily final : public KitFamily<Problem> {
 public:
  explicit IndexingFamily(Op op) : op_(op) {}
  std::string_view name() const override { return indexing::to_string(op_); }
  const kit::FieldTable<Problem>& fields() const override { return indexing::fields(op_); }
  // Bump when the reference, its bounds or the inputs change: cached references are recomputed.
  std::string reference_version() const override { return "indexing-ref-5"; }

  Cost cost(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    const double bytes = static_cast<double>(storage_bytes(p.dtype)) *
                             static_cast<double>(p.self_numel() + p.src_numel() + p.out_numel()) +
                         static_cast<double>(storage_bytes(p.index_dtype)) * static_cast<double>(p.index_numel());
    // The reference's work: a double-double add and three bounds' passes per term (about 40
    // flops), a load per element.
    return {40 * static_cast<double>(p.src_numel()) + 2 * static_cast<double>(p.out_numel()), bytes};
  }

  std::vector<OutputSpec> outputs(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    OutputSpec o{"out", p.dtype, {p.outer, p.op == Op::index_select ? p.m : p.n, p.inner}};
    o.misalign_bytes = p.misalign ? 2 : 0;  // 2-byte elements: a 2- but not 4-byte aligned base
    return {o};
  }

  TensorMap make_inputs(const opcts::Problem& p, uint64_t seed) const override { return indexing::make_inputs(get(p), seed); }
  References reference(const opcts::Problem& p, const TensorMap& inputs) const override {
    return indexing::reference(get(p), inputs);
  }
  std::string expected_error(const opcts::Problem& p) const override { return get(p).expect_error; }
  std::vector<unsigned char> abi_params(const opcts::Problem& p) const override { return indexing::abi_params(get(p)); }

  // Inputs and out, plus the sorted impls' scratch: 64-bit keys and 32-bit positions, both
  // double-buffered by the radix sort, the gathered terms in the accumulator type and the
  // chunk sums (about 40 bytes per term).
  double device_bytes(const opcts::Problem& pp) const override {
    const auto& p = get(pp);
    return cost(pp).bytes + 40 * static_cast<double>(p.src_numel());
  }

 private:
  Op op_;
};

}  // namespace

void register_indexing_family(Registry& reg) {
  for (Op op : {Op::scatter_add, Op::index_add, Op::index_select}) reg.add(std::make_unique<IndexingFamily>(op));
}

}  // namespace opcts
