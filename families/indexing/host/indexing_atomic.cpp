// host.atomic and host.warp_aggregated (index_add: _rows): the arithmetic of the CUDA kernels cuda.atomic and
// cuda.warp_aggregated emulated in order, with their planted lost-duplicate variants.
//
// These impls prove the bounds the CUDA rows are judged under (cases/tolerances.yaml: per_add,
// warp32, grouped) against the very arithmetic of families/indexing/cuda/indexing_atomic.cu, on the
// host device: a correct one must pass them, a planted one fail them.
//   host.atomic            out = self, then for every term t in position order (t flattened as
//                          [outer, m, inner]) out[e] ← RN_d(out[e] + RN_d(v_t)), v_t = alpha·source
//                          formed in the accumulator type (fp32; fp64 for fp64): one atomicAdd
//                          of the destination's dtype per term (per_add)
//   host.warp_aggregated   the positions in steps of 32 (one warp's lanes): the lanes sharing a
//                          destination sum their v_t in the accumulator type in lane order, and
//                          the sum, rounded once to d, is added with one rounding in d (warp32)
// Planted (a lost duplicate, the class of 16-bit atomics that drop updates under contention):
//   *_drop_dups            stores instead of adding: out[e] ← RN_d(self[e] + RN_d(v)), the last
//                          term (or group sum) wins, as cuda.atomic_store does
//   host.grouped_drop_dups the warp kernel's lost group, judged under `grouped` (the model of
//                          undeclared impls)
// Planted (a short tail, the class of loops widened without their remainder; scatter_add only):
//   host.atomic_vec4_tail  the terms four a step (one 16-byte load of int32 indices), then a tail
//                          written when the body took pairs: `if (count % 4) add(count − 1)`, so
//                          of two or three terms left only the last is added. The hand-written
//                          catalog holds no count of 2 or 3 (mod 4); seeded samples do.
// Deterministic (one order); integers add exactly.
#include <cmath>

#include "core/threads.hpp"
#include "families/indexing/codes.hpp"
#include "families/indexing/host/indexing_host.hpp"
#include "families/indexing/indexing.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_indexing::check_index;
using host_indexing::index_at;
using indexing::Accumulation;
using indexing::Op;
using indexing::PlantedBug;
using indexing::Problem;

enum class Kernel { atomic, warp_aggregated };
// What an impl plants: nothing, a lost duplicate (a store for an add) or the short vec4 tail.
enum class Plant { none, drop_dups, vec4_tail };

// RN_d(x) for a sum x of two values of d, or of an accumulator value and a value of d, held in
// double: exact in double there (x has at most 53 significant bits whenever it can round to
// anything but the larger operand), and in fp32 whenever a 16-bit rounding of it can differ
// from the larger operand's (their exponents then differ by at most 16), so the fp32 step
// never rounds what the 16-bit step decides.
double rn(DType d, double x) {
  switch (d) {
    case DType::fp64: return x;
    case DType::fp32: return static_cast<float>(x);
    case DType::fp16: return indexing::fp16_to_float(indexing::float_to_fp16(static_cast<float>(x)));
    case DType::bf16: return indexing::bf16_to_float(indexing::float_to_bf16(static_cast<float>(x)));
    default: return x;  // integers: exact
  }
}

// The accumulator type's rounding: fp32 for the 16-bit dtypes and fp32, fp64 for fp64.
double rn_acc(DType d, double x) {
  return d == DType::fp64 || d == DType::int32 || d == DType::int64 ? x : static_cast<float>(x);
}

class HostAtomic final : public Impl {
 public:
  HostAtomic(Op op, Kernel k, Plant plant, std::string name, Accumulation judged)
      : op_(op), kernel_(k), plant_(plant), name_(std::move(name)), judged_(judged) {}
  std::string_view family() const override { return indexing::to_string(op_); }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return plant_ != Plant::none; }

  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    if (plant_ == Plant::none) return Support::yes();
    const PlantedBug bug = plant_ == Plant::drop_dups ? PlantedBug::drop_duplicates : PlantedBug::vec4_tail;
    if (const std::string why = indexing::planted_bug_cannot_show(pp.as<Problem>(), bug, judged_); !why.empty())
      return Support::no(name_ + ": " + why);
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    const HostTensor& self = in.at("self");
    const HostTensor& index = in.at("index");
    const HostTensor& terms = in.at(p.op == Op::scatter_add ? "src" : "source");
    check_index(index, p.n);
    const DType d = p.dtype;
    std::vector<double> out(static_cast<size_t>(self.numel()));
    for (int64_t e = 0; e < self.numel(); ++e) out[static_cast<size_t>(e)] = indexing::load(self, e);
    const int64_t count = p.src_numel();
    // Term t's destination and its value in the accumulator type.
    auto dest = [&](int64_t t) {
      const int64_t o = t / (p.m * p.inner), k = t % p.inner, j = (t / p.inner) % p.m;
      return (o * p.n + index_at(index, p.op == Op::scatter_add ? t : j)) * p.inner + k;
    };
    auto value = [&](int64_t t) {
      const double v = indexing::load(terms, t);
      return p.op == Op::index_add && p.alpha != 1 ? rn_acc(d, v * rn_acc(d, p.alpha)) : v;
    };
    // One atomic add (or, planted, a store) of a value already in d.
    auto add = [&](int64_t e, double v) {
      double& r = out[static_cast<size_t>(e)];
      r = rn(d, (plant_ == Plant::drop_dups ? indexing::load(self, e) : r) + v);
    };
    if (kernel_ == Kernel::atomic) {
      // The planted vec4 body ends at the last multiple of 4; its tail adds only the last term.
      const int64_t body = plant_ == Plant::vec4_tail ? count / 4 * 4 : count;
      for (int64_t t = 0; t < body; ++t) add(dest(t), rn(d, value(t)));
      if (body < count) add(dest(count - 1), rn(d, value(count - 1)));
    } else {
      int64_t keys[32];
      double vals[32];
      for (int64_t base = 0; base < count; base += 32) {
        const int lanes = static_cast<int>(std::min<int64_t>(32, count - base));
        for (int l = 0; l < lanes; ++l) keys[l] = dest(base + l), vals[l] = value(base + l);
        bool done[32] = {};
        for (int leader = 0; leader < lanes; ++leader) {
          if (done[leader]) continue;
          double sum = 0;  // the group's values in lane order, in the accumulator type
          for (int l = leader; l < lanes; ++l)
            if (!done[l] && keys[l] == keys[leader]) sum = rn_acc(d, sum + vals[l]), done[l] = true;
          add(keys[leader], rn(d, sum));
        }
      }
    }
    TensorMap result;
    HostTensor& o = result.emplace("out", HostTensor(d, {p.outer, p.n, p.inner})).first->second;
#pragma omp parallel for schedule(static) if (o.numel() > (1 << 16))
    for (int64_t e = 0; e < o.numel(); ++e) indexing::store(o, e, out[static_cast<size_t>(e)]);
    return result;
  }

 private:
  Op op_;
  Kernel kernel_;
  Plant plant_;
  std::string name_;
  Accumulation judged_;
};

}  // namespace

void register_host_indexing_atomics(Registry& reg) {
  struct Spec {
    Kernel kernel;
    Plant plant;
    const char* scatter_add;
    const char* index_add;  // impl names are unique over all families: index_add's carry _rows (none: scatter_add only)
    Accumulation judged;    // the model its tolerance rule declares (cases/tolerances.yaml)
  };
  const Spec specs[] = {
      {Kernel::atomic, Plant::none, "host.atomic", "host.atomic_rows", Accumulation::per_add},
      {Kernel::warp_aggregated, Plant::none, "host.warp_aggregated", "host.warp_aggregated_rows", Accumulation::warp32},
      {Kernel::atomic, Plant::drop_dups, "host.atomic_drop_dups", "host.atomic_rows_drop_dups", Accumulation::per_add},
      {Kernel::warp_aggregated, Plant::drop_dups, "host.warp_aggregated_drop_dups",
       "host.warp_aggregated_rows_drop_dups", Accumulation::warp32},
      {Kernel::warp_aggregated, Plant::drop_dups, "host.grouped_drop_dups", "host.grouped_rows_drop_dups",
       Accumulation::grouped},
      {Kernel::atomic, Plant::vec4_tail, "host.atomic_vec4_tail", nullptr, Accumulation::per_add}};
  for (const Spec& s : specs) {
    reg.add(std::make_unique<HostAtomic>(Op::scatter_add, s.kernel, s.plant, s.scatter_add, s.judged));
    if (s.index_add) reg.add(std::make_unique<HostAtomic>(Op::index_add, s.kernel, s.plant, s.index_add, s.judged));
  }
}

}  // namespace opcts
