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
//   host.emulated_scales_at_capture  keeps the a_scale and b_scale it read at its first call on a
//                                    pair of scale buffers (keyed on the problem and the buffers'
//                                    addresses) and uses them on every later call there: the value
//                                    a CUDA graph bakes in when a launcher reads a scale on the host
//                                    while its run is captured. Every plain run gets buffers of its
//                                    own, so only `opcts run --capture` (the same buffers refilled
//                                    with the case's inputs) shows it (bug_needs_capture)
#include <mutex>
#include <optional>

#include "core/spellings.hpp"
#include "families/scaled_mm/host/scaled_mm_emulation.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_mm::MatF;
using scaled_mm::Problem;

enum class Bug { none, no_out_scale, scale_transposed, drop_partial_k, scales_at_capture };
// Each impl's name; register_host_scaled_mm adds one impl per row.
constexpr Spellings<Bug, 5> kImpls{{{Bug::none, "host.emulated"},
                                    {Bug::no_out_scale, "host.emulated_no_out_scale"},
                                    {Bug::scale_transposed, "host.emulated_scale_transposed"},
                                    {Bug::drop_partial_k, "host.emulated_drop_partial_k"},
                                    {Bug::scales_at_capture, "host.emulated_scales_at_capture"}}};

// scales_at_capture's one kept entry: the scales it read first on these buffers of this problem.
struct KeptScales {
  std::mutex mu;
  std::optional<Problem> problem;
  const std::byte *a_at = nullptr, *b_at = nullptr;
  HostTensor a, b;
};

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
      case Bug::scales_at_capture:
        // An exact fill without an exponent span has one scale, 2^lo, on every seed: the kept
        // scales are the case's own.
        if (p.fill == scaled_mm::Fill::exact && scaled_mm::exact_ranges(p).exp_span == 0)
          return Support::no(std::string(name()) + ": every scale of this exact fill is the same on every seed");
        return Support::yes();
      case Bug::none: break;
    }
    return Support::yes();
  }

  bool bug_needs_capture() const override { return bug_ == Bug::scales_at_capture; }

  // Where the scales kept from capture change nothing, derived from the case's inputs and the
  // capture-time inputs `opcts run --capture` records with (capture_seed): the same scale bytes,
  // or a correct run (host.emulated's arithmetic) given the capture-time scales with the case's
  // codes returns the case's very output bytes.
  std::string blind_spot(const opcts::Problem& pp, const CaseEvidence& e) const override {
    if (bug_ != Bug::scales_at_capture) return {};
    const TensorMap at = family_def().make_inputs(pp, capture_seed(family_def(), pp));
    TensorMap kept = e.inputs;
    bool same = true;
    for (const char* s : {"a_scale", "b_scale"}) {
      same = same && fingerprint(at.at(s)) == fingerprint(e.inputs.at(s));
      kept.at(s) = at.at(s);
    }
    if (same)
      return "the capture-time inputs hold the case's very a_scale and b_scale bytes: the scales kept from capture "
             "are the right ones";
    const HostScaledMm right(Bug::none);
    const TensorMap want = right.run(pp, e.inputs, {}), got = right.run(pp, kept, {});
    for (const auto& [name, t] : want)
      if (fingerprint(t) != fingerprint(got.at(name))) return {};
    return "a correct run given the capture-time a_scale and b_scale with the case's codes returns the case's very "
           "output bytes: the scales kept from capture change nothing here";
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& given, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    const TensorMap& in = bug_ == Bug::scales_at_capture ? with_kept_scales(p, given) : given;
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
  mutable KeptScales kept_;
  mutable TensorMap kept_inputs_;  // the last call's inputs with the kept scales (scales_at_capture)

  // `in` with the scales kept for its scale buffers (the first read of them, kept now).
  const TensorMap& with_kept_scales(const Problem& p, const TensorMap& in) const {
    std::lock_guard<std::mutex> lock(kept_.mu);
    const HostTensor &a = in.at("a_scale"), &b = in.at("b_scale");
    if (!(kept_.problem == p && kept_.a_at == a.data() && kept_.b_at == b.data())) {
      kept_.problem = p;
      kept_.a_at = a.data();
      kept_.b_at = b.data();
      kept_.a = a;
      kept_.b = b;
    }
    kept_inputs_ = in;
    kept_inputs_.at("a_scale") = kept_.a;
    kept_inputs_.at("b_scale") = kept_.b;
    return kept_inputs_;
  }
};

}  // namespace

void register_host_scaled_mm(Registry& reg) {
  for (Bug b : kImpls.values()) reg.add(std::make_unique<HostScaledMm>(b));
  register_host_scaled_mm_hopper(reg);
  register_host_scaled_mm_split_k(reg);
}

}  // namespace opcts
