// host.omp (scatter_add), host.omp_rows (index_add) and host.gather (index_select): the indexing families on the CPU,
// with the planted variants.
//
// The index is checked first (InvalidArgument "index" naming the first bad position). Sums run
// in an accumulator copy of self — fp32 for fp32/fp16/bf16, fp64 for fp64, int64 for integers —
// in index order, each element's terms in order (OpenMP splits the columns, never an element),
// and out is rounded from it once: the `once` accumulation model, deterministic. Planted
// variants (index_add's carry _rows): host.omp_drop_dups stores self + the term instead of
// adding (the last term wins), host.omp_dtype_acc accumulates in the destination's own dtype
// while declaring `once`, host.omp_unstable (scatter_add) reverses its order on every other call
// while declaring itself deterministic (only `opcts run --bitwise` sees it). The emulations of
// the CUDA kernels' arithmetic are in indexing_atomic.cpp.
#include <atomic>

#include "core/threads.hpp"
#include "families/indexing/host/indexing_host.hpp"
#include "families/indexing/indexing.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using indexing::Op;
using indexing::PlantedBug;
using indexing::Problem;

enum class Variant { correct, drop_dups, dtype_acc, unstable };

std::optional<PlantedBug> bug_of(Variant v) {
  switch (v) {
    case Variant::correct: return std::nullopt;
    case Variant::drop_dups: return PlantedBug::drop_duplicates;
    case Variant::dtype_acc: return PlantedBug::dtype_accumulation;
    case Variant::unstable: return PlantedBug::unstable;
  }
  return std::nullopt;
}

using host_indexing::check_index;
using host_indexing::index_at;

// out from the accumulator: integers exactly, floats rounded once to the dtype.
template <class Acc>
void store_all(HostTensor& out, const std::vector<Acc>& acc) {
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t e = 0; e < n; ++e) out.set(e, static_cast<double>(acc[static_cast<size_t>(e)]));
}

// The arithmetic of one variant on one destination: acc ← acc + t, with the planted twists.
template <class Acc>
struct Adder {
  DType dtype;
  Variant variant;
  const HostTensor* self;
  void operator()(std::vector<Acc>& acc, int64_t e, Acc t) const {
    Acc& a = acc[static_cast<size_t>(e)];
    switch (variant) {
      case Variant::drop_dups: a = static_cast<Acc>(self->get(e)) + t; return;
      case Variant::dtype_acc: a = static_cast<Acc>(round_to(dtype, static_cast<double>(a + t))); return;
      default: a += t; return;
    }
  }
};

template <class Acc>
TensorMap accumulate(const Problem& p, const TensorMap& in, Variant variant, bool reversed) {
  const HostTensor& self = in.at("self");
  const HostTensor& index = in.at("index");
  const HostTensor& terms = in.at(p.op == Op::scatter_add ? "src" : "source");
  check_index(index, p.n);
  std::vector<Acc> acc(static_cast<size_t>(self.numel()));
  for (int64_t e = 0; e < self.numel(); ++e) acc[static_cast<size_t>(e)] = static_cast<Acc>(self.get(e));
  const Adder<Acc> add{p.dtype, variant, &self};
  const auto alpha = static_cast<Acc>(p.alpha);
  // Each (o, k) column owns its destinations (o, *, k): columns run in parallel, j in order.
  const int64_t columns = p.outer * p.inner;
#pragma omp parallel for schedule(static) if (columns >= 2 * max_threads() && p.src_numel() > 4096)
  for (int64_t c = 0; c < columns; ++c) {
    const int64_t o = c / p.inner, k = c % p.inner;
    for (int64_t step = 0; step < p.m; ++step) {
      const int64_t j = reversed ? p.m - 1 - step : step;
      const int64_t s = (o * p.m + j) * p.inner + k;
      const int64_t row = index_at(index, p.op == Op::scatter_add ? s : j);
      const auto t = static_cast<Acc>(terms.get(s));
      add(acc, (o * p.n + row) * p.inner + k, p.op == Op::index_add ? static_cast<Acc>(alpha * t) : t);
    }
  }
  TensorMap out;
  store_all(out.emplace("out", HostTensor(p.dtype, {p.outer, p.n, p.inner})).first->second, acc);
  return out;
}

class HostIndexing final : public Impl {
 public:
  HostIndexing(Op op, Variant v, std::string name) : op_(op), variant_(v), name_(std::move(name)) {}
  std::string_view family() const override { return indexing::to_string(op_); }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return variant_ != Variant::correct; }
  bool bug_needs_bitwise() const override { return variant_ == Variant::unstable; }

  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    if (const auto bug = bug_of(variant_))
      if (const std::string why = indexing::planted_bug_cannot_show(pp.as<Problem>(), *bug); !why.empty())
        return Support::no(name_ + ": " + why);
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    if (op_ == Op::index_select) return gather(p, in);
    const bool reversed = variant_ == Variant::unstable && calls_.fetch_add(1) % 2 == 1;
    switch (p.dtype) {
      case DType::fp64: return accumulate<double>(p, in, variant_, reversed);
      case DType::int32:
      case DType::int64: return accumulate<int64_t>(p, in, variant_, reversed);
      default: return accumulate<float>(p, in, variant_, reversed);
    }
  }

 private:
  // index_select: whole rows of inner elements copied byte for byte.
  static TensorMap gather(const Problem& p, const TensorMap& in) {
    const HostTensor& input = in.at("input");
    const HostTensor& index = in.at("index");
    check_index(index, p.n);
    TensorMap out;
    HostTensor& o = out.emplace("out", HostTensor(p.dtype, {p.outer, p.m, p.inner})).first->second;
    const auto row_bytes = static_cast<size_t>(p.inner * storage_bytes(p.dtype));
#pragma omp parallel for schedule(static) if (p.outer * p.m * p.inner > (1 << 16))
    for (int64_t oj = 0; oj < p.outer * p.m; ++oj) {
      const int64_t outer = oj / p.m, row = index_at(index, oj % p.m);
      std::memcpy(o.data() + oj * row_bytes, input.data() + (outer * p.n + row) * row_bytes, row_bytes);
    }
    return out;
  }

  Op op_;
  Variant variant_;
  std::string name_;
  mutable std::atomic<int64_t> calls_{0};
};

}  // namespace

void register_host_indexing(Registry& reg) {
  reg.add(std::make_unique<HostIndexing>(Op::scatter_add, Variant::correct, "host.omp"));
  reg.add(std::make_unique<HostIndexing>(Op::index_add, Variant::correct, "host.omp_rows"));
  reg.add(std::make_unique<HostIndexing>(Op::index_select, Variant::correct, "host.gather"));
  reg.add(std::make_unique<HostIndexing>(Op::scatter_add, Variant::drop_dups, "host.omp_drop_dups"));
  reg.add(std::make_unique<HostIndexing>(Op::index_add, Variant::drop_dups, "host.omp_rows_drop_dups"));
  reg.add(std::make_unique<HostIndexing>(Op::scatter_add, Variant::dtype_acc, "host.omp_dtype_acc"));
  reg.add(std::make_unique<HostIndexing>(Op::index_add, Variant::dtype_acc, "host.omp_rows_dtype_acc"));
  reg.add(std::make_unique<HostIndexing>(Op::scatter_add, Variant::unstable, "host.omp_unstable"));
  register_host_indexing_atomics(reg);
}

}  // namespace opcts
