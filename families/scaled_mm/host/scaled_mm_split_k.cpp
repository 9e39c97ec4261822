// host.emulated_split_k: scaled_mm on the CPU with split-K as its tactics (Impl::tactics), and a
// planted tactic that loses K's remainder.
//
// K is cut into units — its scale blocks for the blockwise, MX and NVFP4 recipes, its elements
// for tensorwise and rowwise, whose one scale along K makes any cut a unit boundary — and the
// units into S consecutive slices (tactic split_k<S>, S in 1, 2, 4; slice s holds units
// [s·U/S, (s+1)·U/S)), as a split-K GEMM hands each slice to another CTA: each slice's fp32 sum
// (each block's sum times its a and then its b scale, as host.emulated does, or the raw code
// products where the scale is one along K) is made on its own and the S partial sums are added in slice order, then
// tensorwise and rowwise scale once and the fp32 epilogue follows (scaled_mm_emulation.hpp). Every
// partial sum is an fp32 sum of the same terms in another association, so the default IEEE fp32
// accumulator model bounds each tactic (judge/accumulator.hpp: its worst case holds for any
// order of the additions, and a sum cut in S has fewer roundings in each term's path, not more).
// split_k1 is host.emulated's own arithmetic and comes first: the tactic a heuristic picks.
//
// Planted (must FAIL): host.emulated_split_k_drops_tail — its slices are floor(U/S) units each
// and the U mod S units after the last slice are dropped, as a split-K kernel that rounds the
// slice length down would ("a fast-but-wrong tactic": only a run of that tactic shows it). It
// lists only the tactics that leave a remainder (S in 2, 4 with U mod S != 0), so each of its
// cases probes the bug; none where no split leaves one (a SKIP saying so).
//
// Planted: host.emulated_split_k_count_variant — host.emulated_split_k's own arithmetic, every
// split count within its bound, while it declares the tactic invariance axis (the bytes the same
// whatever the split count), which the slices' other association breaks: only `opcts run
// --invariance` sees it, comparing a case's tactic with the others on the same inputs (a split
// count chosen per problem size or per batch, where a batch-invariant kernel must fix it).
#include <string>
#include <vector>

#include "families/scaled_mm/host/scaled_mm_emulation.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_mm::MatF;
using scaled_mm::Problem;

constexpr int64_t kSplits[] = {1, 2, 4};

// K's units: its scale blocks, or its elements where the scale is one along K.
int64_t k_units(const Problem& p) {
  const int64_t blk = scaled_mm::scale_block_k(p);
  return blk ? (p.k + blk - 1) / blk : p.k;
}

std::string tactic_of(int64_t s) { return "split_k" + std::to_string(s); }

// The split count a tactic names ("split_k4" → 4); throws std::invalid_argument for another name.
int64_t splits_of(std::string_view tactic, std::string_view impl) {
  for (int64_t s : kSplits)
    if (tactic == tactic_of(s)) return s;
  throw std::invalid_argument(std::string(impl) + ": unknown tactic '" + std::string(tactic) + "'");
}

enum class SplitPlant { none, drops_tail, count_variant };

class HostScaledMmSplitK final : public Impl {
 public:
  explicit HostScaledMmSplitK(SplitPlant plant) : drops_tail_(plant == SplitPlant::drops_tail), plant_(plant) {}
  std::string_view family() const override { return "scaled_mm"; }
  std::string_view name() const override {
    switch (plant_) {
      case SplitPlant::drops_tail: return "host.emulated_split_k_drops_tail";
      case SplitPlant::count_variant: return "host.emulated_split_k_count_variant";
      case SplitPlant::none: break;
    }
    return "host.emulated_split_k";
  }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return plant_ != SplitPlant::none; }

  std::vector<InvarianceAxis> invariant_axes(const opcts::Problem&) const override {
    if (plant_ == SplitPlant::count_variant) return {InvarianceAxis::tactic};
    return {};
  }
  bool bug_needs_invariance() const override { return plant_ == SplitPlant::count_variant; }
  // Where every split count gives the very bytes of every other on this case's inputs (the
  // partial sums' differences rounded away in d's dtype, or sums exact in fp32), the check
  // compares equal bytes.
  std::string blind_spot(const opcts::Problem& p, const CaseEvidence& evidence) const override {
    if (plant_ != SplitPlant::count_variant) return "";
    ArchInfo host;
    host.name = host.backend = "host";
    RunContext ctx;
    ctx.arch = &host;
    TensorMap first;
    for (const std::string& t : tactics(p)) {
      ctx.tactic = t;
      TensorMap out = run(p, evidence.inputs, ctx);
      if (first.empty()) {
        first = std::move(out);
        continue;
      }
      for (const auto& [name, tensor] : first)
        for (int64_t i = 0; i < tensor.numel(); ++i)
          if (tensor.code(i) != out.at(name).code(i)) return "";
    }
    return "every split count gives the same output bytes on this case's inputs: the tactic check compares equal "
           "bytes";
  }

  // Problem-only: S slices need S units; the plant lists the splits that leave a remainder. A
  // negative problem is refused before any split, so it has none.
  std::vector<std::string> tactics(const opcts::Problem& pp) const override {
    const auto& p = pp.as<Problem>();
    std::vector<std::string> out;
    if (!p.expect_error.empty() || p.m * p.n == 0) return out;
    const int64_t units = k_units(p);
    for (int64_t s : kSplits)
      if (s <= units && (!drops_tail_ || (s > 1 && units % s != 0))) out.push_back(tactic_of(s));
    return out;
  }

  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    if (plant_ == SplitPlant::none) return Support::yes();
    if (!pp.as<Problem>().expect_error.empty())
      return Support::no(std::string(name()) + ": planted impls run valid problems only");
    if (drops_tail_ && tactics(pp).empty())
      return Support::no(std::string(name()) + ": no split of K into 2 or 4 slices leaves a remainder to drop");
    if (plant_ == SplitPlant::count_variant && tactics(pp).size() < 2)
      return Support::no(std::string(name()) + ": K has one unit: no split count but 1 to compare");
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext& ctx) const override {
    const auto& p = pp.as<Problem>();
    host_mm::check_arguments(p, in);
    const int64_t S = ctx.tactic.empty() ? 1 : splits_of(ctx.tactic, name());
    const MatF a = host_mm::code_values(in.at("a"), p.m, p.k);
    const MatF bt = host_mm::code_values(in.at("b"), p.n, p.k);
    const int64_t units = k_units(p);
    MatF acc = MatF::Zero(p.m, p.n);
    for (int64_t s = 0; s < S; ++s) {
      const int64_t u0 = drops_tail_ ? s * (units / S) : s * units / S;
      const int64_t u1 = drops_tail_ ? (s + 1) * (units / S) : (s + 1) * units / S;
      acc += slice_sum(p, in, a, bt, u0, u1);  // the partials added in slice order
    }
    if (!scaled_mm::scale_block_k(p))  // one scale along K: applied once, after the sum
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j)
          acc(i, j) = acc(i, j) * host_mm::scale(p, in, 'a', i, 0) * host_mm::scale(p, in, 'b', j, 0);
    return host_mm::epilogue(p, in, acc);
  }

 private:
  bool drops_tail_;
  SplitPlant plant_;

  // One slice's fp32 sum over K units [u0, u1): per scale block, the block's fp32 code-product sum
  // times its scales (host.emulated's order); for one scale along K, the raw products' sum.
  static MatF slice_sum(const Problem& p, const TensorMap& in, const MatF& a, const MatF& bt, int64_t u0, int64_t u1) {
    const int64_t blk = scaled_mm::scale_block_k(p);
    MatF sum = MatF::Zero(p.m, p.n);
    if (!blk) {
      if (u1 > u0) sum.noalias() = a.middleCols(u0, u1 - u0) * bt.middleCols(u0, u1 - u0).transpose();
      return sum;
    }
    MatF part(p.m, p.n);
    std::vector<float> sb(static_cast<size_t>(p.n));
    for (int64_t kb = u0; kb < u1; ++kb) {
      const int64_t k0 = kb * blk, len = std::min(blk, p.k - k0);
      part.noalias() = a.middleCols(k0, len) * bt.middleCols(k0, len).transpose();
      for (int64_t j = 0; j < p.n; ++j) sb[j] = host_mm::scale(p, in, 'b', j, kb);
      for (int64_t i = 0; i < p.m; ++i) {
        const float sa = host_mm::scale(p, in, 'a', i, kb);
        for (int64_t j = 0; j < p.n; ++j) sum(i, j) += part(i, j) * sa * sb[j];
      }
    }
    return sum;
  }
};

}  // namespace

void register_host_scaled_mm_split_k(Registry& reg) {
  for (const SplitPlant plant : {SplitPlant::none, SplitPlant::drops_tail, SplitPlant::count_variant})
    reg.add(std::make_unique<HostScaledMmSplitK>(plant));
}

}  // namespace opcts
