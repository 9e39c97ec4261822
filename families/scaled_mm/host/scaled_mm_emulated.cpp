// host.emulated: scaled_mm on the CPU accumulating in fp32 per K block, plus three planted bugs.
//
// Per K block — the whole K for tensorwise and rowwise (one scale along K), 128 for the
// blockwise recipes, 32 for MX, 16 for NVFP4 — an fp32 partial sum of code-value products
// (Eigen fp32 GEMM over the block's codes), multiplied in fp32 by the A and B block scales and
// added to an fp32 accumulator; then the fp32 epilogue (scaled_mm_emulation.hpp). Its
// accumulator is the default IEEE fp32 model (judge/accumulator.hpp). The emulation of
// Hopper's 14-bit accumulator is host.emulated_hopper (scaled_mm_hopper.cpp).
//
// Planted (Impl::planted, must FAIL):
//   host.emulated_no_out_scale       ignores the output scale of an e4m3fn output
//   host.emulated_scale_transposed   reads block scales with the layout's row and column roles
//                                    exchanged (column-major read as row-major and back,
//                                    swizzled read as plain row-major)
//   host.emulated_drop_partial_k     drops the last K tile when it is partial (tile 128 for fp32
//                                    recipes, 32 for MX, 16 for NVFP4), as a kernel that rounds
//                                    the tile count down would
#include "core/spellings.hpp"
#include "families/scaled_mm/host/scaled_mm_emulation.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_mm::MatF;
using scaled_mm::Problem;

enum class Bug { none, no_out_scale, scale_transposed, drop_partial_k };
// Each impl's name; register_host_scaled_mm adds one impl per row.
constexpr Spellings<Bug, 4> kImpls{{{Bug::none, "host.emulated"},
                                    {Bug::no_out_scale, "host.emulated_no_out_scale"},
                                    {Bug::scale_transposed, "host.emulated_scale_transposed"},
                                    {Bug::drop_partial_k, "host.emulated_drop_partial_k"}}};

class HostScaledMm final : public Impl {
 public:
  explicit HostScaledMm(Bug bug) : bug_(bug) {}
  std::string_view family() const override { return "scaled_mm"; }
  std::string_view name() const override { return kImpls.of(bug_); }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return bug_ != Bug::none; }
  // A planted impl runs only problems that probe its bug, so each of its cases must FAIL
  // (its cases are implied strict xfails: a PASS is the bug going unnoticed).
  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    if (bug_ == Bug::none) return Support::yes();
    const auto& p = pp.as<Problem>();
    if (!p.expect_error.empty()) return Support::no(std::string(name()) + ": planted impls run valid problems only");
    const int64_t blk = scaled_mm::scale_block_k(p);
    switch (bug_) {
      case Bug::no_out_scale:
        if (p.out == DType::e4m3fn && p.out_scale != 1.0) return Support::yes();
        return Support::no(std::string(name()) + ": no output scale other than 1 to ignore");
      case Bug::scale_transposed:
        // Left out only where the transposed read reads what the right one does: every scale
        // the same (an exact fill over a long unpromoted K has one exponent only), or every
        // (row, K block) at the same storage position either way (one K block, one row).
        if (p.fill == scaled_mm::Fill::exact && scaled_mm::exact_ranges(p).exp_span == 0)
          return Support::no(std::string(name()) + ": every scale of this exact fill is the same");
        if (host_mm::transposed_read_differs(p)) return Support::yes();
        return Support::no(std::string(name()) + ": every scale sits where the transposed read looks for it");
      case Bug::drop_partial_k:
        if (p.k % (blk ? blk : 128) != 0 && p.m * p.n > 1) return Support::yes();
        return Support::no(std::string(name()) + ": K has no partial last block to drop");
      case Bug::none: break;
    }
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& in, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    host_mm::check_arguments(p, in);
    const int64_t M = p.m, N = p.n, K = p.k;
    const MatF a = host_mm::code_values(in.at("a"), M, K);
    const MatF bt = host_mm::code_values(in.at("b"), N, K);
    const bool tr = bug_ == Bug::scale_transposed;

    const int64_t blk = scaled_mm::scale_block_k(p);
    const int64_t L = blk ? blk : std::max<int64_t>(K, 1);
    int64_t nblocks = blk ? (K + blk - 1) / blk : 1;
    int64_t k_end = K;
    if (bug_ == Bug::drop_partial_k) {
      const int64_t tile = blk ? blk : 128;
      k_end = K / tile * tile;
      nblocks = blk ? k_end / blk : 1;
    }

    MatF acc = MatF::Zero(M, N);
    MatF part(M, N);
    std::vector<float> sa(static_cast<size_t>(M)), sb(static_cast<size_t>(N));
    for (int64_t kb = 0; kb < nblocks; ++kb) {
      const int64_t k0 = kb * L, len = std::min(L, k_end - k0);
      if (len <= 0) break;
      part.noalias() = a.middleCols(k0, len) * bt.middleCols(k0, len).transpose();  // fp32 partial sums
      for (int64_t i = 0; i < M; ++i) sa[i] = host_mm::scale(p, in, 'a', i, kb, tr);
      for (int64_t j = 0; j < N; ++j) sb[j] = host_mm::scale(p, in, 'b', j, kb, tr);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) acc(i, j) += part(i, j) * sa[i] * sb[j];
    }
    return host_mm::epilogue(p, in, acc, bug_ != Bug::no_out_scale);
  }

 private:
  Bug bug_;
};

}  // namespace

void register_host_scaled_mm(Registry& reg) {
  for (Bug b : kImpls.values()) reg.add(std::make_unique<HostScaledMm>(b));
  register_host_scaled_mm_hopper(reg);
}

}  // namespace opcts
