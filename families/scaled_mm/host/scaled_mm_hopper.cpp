// host.emulated_hopper: scaled_mm on the CPU accumulating as cuBLASLt's FP8 path does on Hopper (14 bits, truncation,
// promotion every 128), plus its planted bugs.
//
// The model, as measured on the H200 (docs/status/data/sm90_scaled_mm_accum_probe.txt) and
// reported by DeepSeek-V3 (arXiv 2412.19437 §3.3.2):
//   - K is cut into chunks of 128 consecutive elements aligned to k = 0 (the whole K with
//     fast_accum, which never promotes); each chunk starts from zero;
//   - within a chunk, each MMA step (32 products: one FP8 wgmma's K) aligns its products and
//     the incoming sum to the step's largest exponent E and truncates each to the grid
//     2^(E-13) (14 significant bits), sums them exactly, and truncates the sum to 14 bits
//     (the probe: 256 + 2^-6 loses the 2^-6 within a chunk, 31 such products in one MMA are
//     all lost, 256 + f·2^-5 keeps floor(f)·2^-5);
//   - chunk sums are promoted to fp32: blockwise recipes multiply each by fl(s_a·s_b) of its
//     128-block and add it with an fp32 FMA; tensorwise and rowwise add the chunk sums in fp32
//     and multiply once by fl(s_a·s_b);
//   - then the fp32 epilogue (scaled_mm_emulation.hpp).
// The step width 32 is this emulation's choice; the bound (judge/accumulator.hpp) holds for
// any width. FP8 recipes only: Hopper has no block-scaled (MX / NVFP4) MMA.
//
// Planted (host.emulated_hopper_<bug>, must FAIL under the sm90 model; families/scaled_mm/planted.hpp):
// block_scale_doubled, k_block_scale_zeroed, no_out_scale, scale_error, no_bias, half_k,
// out_times_2, product_low, product_high (every product 2^-8 off: the bias check's two sides),
// drop_last_k_step (the last 32 K elements: a FAST_ACCUM step) — the same bugs
// cuda.cublaslt_<bug> plants into cuBLASLt's inputs. And host.emulated_hopper_small_m_steps: a
// problem of at most kSmallM rows runs MMA steps of kSmallMStep products (a narrower instruction
// chosen for small batches, as GEMM libraries choose kernels by M), so each step truncates at
// other places, while it declares batch_size invariance: only `opcts run --invariance` sees it.
// (Splitting K in two instead changes nothing here: the chunk sums keep 14 bits, so their fp32
// sum is exact in any order.)
#include <bit>
#include <cmath>
#include <cstdint>

#include "families/scaled_mm/host/scaled_mm_emulation.hpp"
#include "families/scaled_mm/planted.hpp"
#include "gpu/host/host_impls.hpp"

namespace opcts {

namespace {

using host_mm::MatF;
using scaled_mm::PlantedBug;
using scaled_mm::Problem;
using scaled_mm::Recipe;

constexpr int kBits = 14;            // significant bits within a chunk (the probe)
constexpr int64_t kPromote = 128;    // K elements per chunk (the probe; DeepSeek-V3's N_C)
constexpr int64_t kStep = 32;        // products per MMA step (an FP8 wgmma's K)
constexpr int64_t kSmallM = 16;      // small_m_steps: problems of this many rows or fewer ...
constexpr int64_t kSmallMStep = 16;  // ... run MMA steps of this many products

// The largest power of two <= |x| (x a normal float or 0).
float binade(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7F800000u); }

// x truncated toward zero to a multiple of grid, given inv = 1/grid (both powers of two) and
// |x|·inv < 2^31.
float truncate_to(float x, float inv, float grid) { return static_cast<float>(static_cast<int32_t>(x * inv)) * grid; }

// One row of A against every column: the 14-bit truncating chunks, promoted to fp32 (the file comment).
class RowEmulator {
 public:
  RowEmulator(const Problem& p, const MatF& bkn, const std::vector<float>& sb_blocks)
      : p_(p), bkn_(bkn), sb_(sb_blocks), n_(bkn.cols()), c_(n_), mx_(n_), inv_(n_), grid_(n_), s_(n_) {}

  // acc[j] for row `a` (code values [K]) with A's scales `sa` (one per chunk, or one), in MMA
  // steps of `width` products.
  void run(const float* a, const std::vector<float>& sa, float* acc, int64_t width = kStep) {
    const int64_t K = p_.k;
    const int64_t chunk = p_.fast_accum ? std::max<int64_t>(K, 1) : kPromote;
    const bool blockwise = scaled_mm::scale_block_k(p_) > 0;
    std::fill(acc, acc + n_, 0.0f);
    for (int64_t c0 = 0; c0 < K; c0 += chunk) {
      std::fill(c_.begin(), c_.end(), 0.0f);
      const int64_t cend = std::min(K, c0 + chunk);
      for (int64_t g0 = c0; g0 < cend; g0 += width) step(a, g0, std::min(cend, g0 + width));
      if (blockwise) {
        const int64_t kb = c0 / kPromote;
        const float* sb = &sb_[static_cast<size_t>(kb * n_)];
        for (int64_t j = 0; j < n_; ++j) acc[j] = std::fma(c_[j], sa[kb] * sb[j], acc[j]);
      } else {
        for (int64_t j = 0; j < n_; ++j) acc[j] += c_[j];
      }
    }
    if (!blockwise)
      for (int64_t j = 0; j < n_; ++j) acc[j] *= sa[0] * sb_[j];
  }

 private:
  // One MMA step over products k in [k0, k1): align to the step's largest magnitude,
  // truncate each term to 14 bits there, sum exactly, truncate the sum to 14 bits.
  void step(const float* a, int64_t k0, int64_t k1) {
    constexpr float kUlp = 0x1p-13f;  // 2^(1-14): the grid below a binade's power of two
    for (int64_t j = 0; j < n_; ++j) mx_[j] = std::fabs(c_[j]);
    for (int64_t k = k0; k < k1; ++k) {
      const float av = a[k];
      if (av == 0) continue;
      const float* b = &bkn_(k, 0);
      for (int64_t j = 0; j < n_; ++j) mx_[j] = std::max(mx_[j], std::fabs(av * b[j]));
    }
    for (int64_t j = 0; j < n_; ++j) {
      const float e = binade(mx_[j]);
      grid_[j] = e > 0 ? e * kUlp : 1.0f;
      inv_[j] = 1.0f / grid_[j];  // exact: a power of two
      s_[j] = truncate_to(c_[j], inv_[j], 1.0f);
    }
    for (int64_t k = k0; k < k1; ++k) {
      const float av = a[k];
      if (av == 0) continue;
      const float* b = &bkn_(k, 0);
      // Each product is exact in fp32 (two fp8 values) and below 2^14 grid units.
      for (int64_t j = 0; j < n_; ++j) s_[j] += truncate_to(av * b[j], inv_[j], 1.0f);
    }
    for (int64_t j = 0; j < n_; ++j) {
      const float v = s_[j] * grid_[j];  // exact: fewer than 2^20 grid units
      const float e = binade(std::fabs(v));
      c_[j] = e > 0 ? truncate_to(v, 1.0f / (e * kUlp), e * kUlp) : 0.0f;
    }
  }

  const Problem& p_;
  const MatF& bkn_;
  const std::vector<float>& sb_;  // B's scales: [chunk][N] (blockwise) or [N]
  int64_t n_;
  std::vector<float> c_, mx_, inv_, grid_, s_;
};

class HopperScaledMm final : public Impl {
 public:
  /// `small_m_steps`: the batch-variant plant (the file comment), with bug none.
  explicit HopperScaledMm(PlantedBug bug, bool small_m_steps = false)
      : bug_(bug),
        narrow_(small_m_steps),
        name_(small_m_steps             ? "host.emulated_hopper_small_m_steps"
              : bug == PlantedBug::none ? "host.emulated_hopper"
                                        : "host.emulated_hopper_" + std::string(scaled_mm::to_string(bug))) {}
  std::string_view family() const override { return "scaled_mm"; }
  std::string_view name() const override { return name_; }
  std::string_view backend() const override { return "host"; }
  bool planted() const override { return bug_ != PlantedBug::none || narrow_; }
  // Each row of A runs alone through the same chunks (RowEmulator), whatever M is; the planted
  // impls' bugs are about their bounds and claim nothing, except small_m_steps, which breaks it.
  std::vector<InvarianceAxis> invariant_axes(const opcts::Problem&) const override {
    if (narrow_) return {InvarianceAxis::batch_size};
    if (bug_ != PlantedBug::none) return {};
    return {InvarianceAxis::batch_size, InvarianceAxis::batch_position};
  }
  bool bug_needs_invariance() const override { return narrow_; }
  std::string blind_spot(const opcts::Problem& pp, const CaseEvidence& evidence) const override {
    if (narrow_) return narrow_blind_spot(pp.as<Problem>(), evidence.inputs);
    return bug_ == PlantedBug::none ? std::string() : scaled_mm::planted_bug_blind_spot(pp.as<Problem>(), bug_);
  }

  Support supports(const opcts::Problem& pp, const ArchInfo&) const override {
    const auto& p = pp.as<Problem>();
    if (p.block_scaled())
      return Support::no(name_ + ": Hopper has no block-scaled (MX / NVFP4) MMA; host.emulated covers those recipes");
    for (DType t : {p.a_elem, p.b_elem})
      if (t != DType::e4m3fn && t != DType::e5m2)
        return Support::no(name_ + ": " + std::string(opcts::name(t)) + " is an AMD format; Hopper multiplies OCP fp8");
    if (bug_ != PlantedBug::none)
      if (const std::string why = scaled_mm::planted_bug_cannot_show(p, bug_); !why.empty())
        return Support::no(name_ + ": " + why);
    if (narrow_)
      if (const std::string why = narrow_cannot_show(p); !why.empty()) return Support::no(name_ + ": " + why);
    return Support::yes();
  }

  TensorMap run(const opcts::Problem& pp, const TensorMap& given, const RunContext&) const override {
    const auto& p = pp.as<Problem>();
    return compute(p, given, narrow_ && p.m <= kSmallM ? kSmallMStep : kStep);
  }

 private:
  // Where the narrow steps cannot change what --invariance compares: structurally (the batch of
  // one takes the same path, or no step holds more products than a narrow one); a case's data
  // that hides it is narrow_blind_spot's.
  static std::string narrow_cannot_show(const Problem& p) {
    if (!p.expect_error.empty()) return "planted impls run valid problems only";
    if (p.a_layout != scaled_mm::Layout::row) return "--invariance cuts row-major A only";
    if (p.m <= kSmallM) return "M <= " + std::to_string(kSmallM) + ": the whole batch runs the narrow steps too";
    if (p.k <= kSmallMStep) return "K fits one narrow step: both widths take the same products";
    return "";
  }

  // Row 0 (the row the batch_size check runs alone) of the outputs with either step width, on the
  // case's own inputs: where they hold the same bytes, the plant changes nothing it compares.
  std::string narrow_blind_spot(const Problem& p, const TensorMap& inputs) const {
    const TensorMap narrow = compute(p, inputs, kSmallMStep), usual = compute(p, inputs, kStep);
    for (const auto& [name, t] : usual) {
      const HostTensor& u = narrow.at(name);
      const int64_t row0 = p.m ? t.numel() / p.m : 0;
      for (int64_t i = 0; i < row0; ++i)
        if (t.code(i) != u.code(i)) return "";
    }
    return "row 0's outputs hold the same bytes with " + std::to_string(kSmallMStep) + "-product MMA steps as with " +
           std::to_string(kStep) +
           " on this case's inputs (no step's truncation moved, or the output rounding "
           "hides it): the plant changes no byte the check compares";
  }

  TensorMap compute(const Problem& p, const TensorMap& given, int64_t width) const {
    const TensorMap planted = bug_ == PlantedBug::none ? TensorMap{} : scaled_mm::planted_inputs(p, given, bug_);
    const TensorMap& in = bug_ == PlantedBug::none ? given : planted;
    host_mm::check_arguments(p, in);
    const int64_t M = p.m, N = p.n, K = p.k;
    const MatF a = host_mm::code_values(in.at("a"), M, K);
    const MatF bkn = host_mm::code_values(in.at("b"), N, K).transpose();
    const bool blockwise = scaled_mm::scale_block_k(p) > 0;
    const int64_t blocks = blockwise ? (K + kPromote - 1) / kPromote : 1;
    std::vector<float> sb(static_cast<size_t>(blocks * N));
    for (int64_t kb = 0; kb < blocks; ++kb)
      for (int64_t j = 0; j < N; ++j) sb[static_cast<size_t>(kb * N + j)] = host_mm::scale(p, in, 'b', j, kb);
    MatF acc(M, N);
#pragma omp parallel
    {
      RowEmulator row(p, bkn, sb);
      std::vector<float> sa(static_cast<size_t>(blocks));
#pragma omp for schedule(dynamic)
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t kb = 0; kb < blocks; ++kb) sa[static_cast<size_t>(kb)] = host_mm::scale(p, in, 'a', i, kb);
        row.run(&a(i, 0), sa, &acc(i, 0), width);
      }
    }
    return scaled_mm::planted_outputs(p, host_mm::epilogue(p, in, acc), bug_);
  }

  PlantedBug bug_;
  bool narrow_;
  std::string name_;
};

}  // namespace

void register_host_scaled_mm_hopper(Registry& reg) {
  reg.add(std::make_unique<HopperScaledMm>(PlantedBug::none));
  for (PlantedBug b : scaled_mm::planted_bugs()) reg.add(std::make_unique<HopperScaledMm>(b));
  reg.add(std::make_unique<HopperScaledMm>(PlantedBug::none, true));
}

}  // namespace opcts
