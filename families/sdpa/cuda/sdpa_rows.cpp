// The CUDA sdpa rows: cuda.flash, cuda.math, cuda.cudnn, cuda.flash_decode and the planted
// cuda.flash_* variants (every build; rows.hpp). cuda.flash runs its backward's kernels as tactics
// (tc, tc2, fma: flash_backward_tactics below), cuda.cudnn each engine config of cuDNN's
// heuristics, c0..c3 (cudnn_tactics).
#include "families/sdpa/cuda/sdpa_cudnn.hpp"
#include "families/sdpa/cuda/sdpa_launch.hpp"
#include "families/sdpa/sdpa.hpp"
#include "gpu/cuda/rows.hpp"
#include "gpu/cuda/tactic_rank.hpp"

namespace opcts {

namespace {

using cuda::SdpaKernel;
using cuda::SdpaPlant;
using cuda::SdpaRow;

struct Planted {
  const char* name;
  SdpaRow row;
  sdpa::PlantedBug bug;
};

// Each planted row SKIPs the problems its bug cannot show on, so each of its cases must FAIL.
std::function<std::string(const Problem&)> cannot_show(sdpa::PlantedBug bug) {
  return [bug](const Problem& pp) -> std::string {
    const auto& p = pp.as<sdpa::Problem>();
    // The backward kernel does not plant it (sdpa_flash_backward.cu).
    if (bug == sdpa::PlantedBug::gqa_modulo && p.direction == sdpa::Direction::backward)
      return "the bug is planted in the forward only";
    return sdpa::planted_bug_cannot_show(p, bug);
  };
}

// Whether sdpa_cudnn_row_supports refuses a valid problem on every device and library: tensors
// cuDNN's graphs never take (fp16 or bf16 throughout, or the adapter's one fp8 graph: q, k, v fp8
// with per-tensor descales and an e4m3 O), chunks and block masks (no graph of the adapter's has
// them), or a zero-size dimension (cuDNN's descriptors take none).
bool cudnn_never_runs(const sdpa::Problem& p) {
  const bool fp8_graph = p.fp8 == sdpa::Fp8::qkv && p.descale == sdpa::Descale::per_tensor && p.fp8_out &&
                         p.direction == sdpa::Direction::forward;
  const bool dtypes =
      (p.dtype == DType::bf16 || p.dtype == DType::fp16) && ((p.fp8 == sdpa::Fp8::none && !p.fp8_out) || fp8_graph);
  return !dtypes || p.chunk > 0 || p.block_q > 0 || p.batch == 0 || p.seq_q == 0 || p.seq_k == 0;
}

// cuda.cudnn's tactics (Row::tactics): c<i> runs the engine config of rank i among those of
// cuDNN's heuristics (mode A) whose plan finalizes for the problem's graph (the backward's for a
// backward problem), c0 the first, which the row ran before it had tactics. Every rank up to
// kMaxCudnnEngineConfigs whatever the device, so that ids are stable: a rank this device's
// heuristics do not offer is a SKIP (OPCTS_TACTIC_UNAVAILABLE). None where no plan is ever
// built: one the row never runs (cudnn_never_runs); a negative problem gets none from the runner
// (tactics_of). Reads the problem only: this file builds without CUDA or
// cuDNN.
std::vector<std::string> cudnn_tactics(const Problem& problem) {
  const auto& p = problem.as<sdpa::Problem>();
  if (cudnn_never_runs(p)) return {};
  return cuda::rank_tactics('c', cuda::kMaxCudnnEngineConfigs);
}

// cuda.flash's tactics (Row::tactics) on a backward problem: the flash backward's kernels that take
// it, the one the backward picks first. tc is the tensor-core kernel (one block per SM), tc2 its
// variant capped at 128 registers (two blocks per SM; at D = 96 and 128 only, where the two
// differ), fma the FMA kernel, which takes everything the backward runs. Where the tensor-core
// kernel does not take the problem (sdpa_flash_backward.cu's tc_takes, which test_sdpa_glue.cpp
// holds this to on every catalog problem), fma alone. None for a forward problem, nor for one the
// backward never runs (fp32, fp8, an fp8 output, the paged layout: its supports refuses them).
// Reads the problem only: this file builds without CUDA.
std::vector<std::string> flash_backward_tactics(const Problem& problem) {
  const auto& p = problem.as<sdpa::Problem>();
  if (p.direction != sdpa::Direction::backward) return {};
  if ((p.dtype != DType::fp16 && p.dtype != DType::bf16) || p.fp8 != sdpa::Fp8::none || p.fp8_out || p.paged())
    return {};
  const bool tc_head_dim = p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 96 || p.head_dim == 128;
  const bool tc = !p.varlen() && p.chunk == 0 && p.alibi == sdpa::Alibi::none && p.block_q == 0 &&
                  p.head_dim == p.head_dim_v && tc_head_dim && p.softcap == 0 &&
                  p.mask_tensor == sdpa::MaskTensor::none;
  if (!tc) return {"fma"};
  if (p.head_dim == 96 || p.head_dim == 128) return {"tc", "tc2", "fma"};
  return {"tc", "fma"};
}

}  // namespace

void register_cuda_sdpa(Registry& reg) {
  using namespace cuda;
  static constexpr SdpaRow kFlash{SdpaKernel::flash}, kMath{SdpaKernel::math};
  static constexpr Planted kPlanted[] = {
      {"cuda.flash_window_off_by_one",
       {SdpaKernel::flash, SdpaPlant::window_off_by_one},
       sdpa::PlantedBug::window_off_by_one},
      {"cuda.flash_gqa_modulo", {SdpaKernel::flash, SdpaPlant::gqa_modulo}, sdpa::PlantedBug::gqa_modulo},
      {"cuda.flash_drop_rowsum", {SdpaKernel::flash, SdpaPlant::drop_rowsum}, sdpa::PlantedBug::drop_rowsum},
      {"cuda.flash_masked_row_nan", {SdpaKernel::flash, SdpaPlant::masked_row_nan}, sdpa::PlantedBug::masked_row_nan},
      {"cuda.flash_pv_in_dtype", {SdpaKernel::flash, SdpaPlant::pv_in_dtype}, sdpa::PlantedBug::pv_in_dtype},
      {"cuda.flash_rowsum_in_dtype",
       {SdpaKernel::flash, SdpaPlant::rowsum_in_dtype},
       sdpa::PlantedBug::rowsum_in_dtype},
      {"cuda.flash_lse_plus_log2", {SdpaKernel::flash, SdpaPlant::lse_plus_log2}, sdpa::PlantedBug::lse_plus_log2},
  };
  // The paged split-KV kernel and its planted twins (sdpa_flash_decode.cu), on the host impl's
  // split size so that each plant shows on the rows planted_bug_cannot_show names.
  static_assert(kDecodeSplitKeys == sdpa::kPagedSplitKeys);
  static constexpr SdpaRow kDecode{SdpaKernel::flash_decode};
  static constexpr Planted kDecodePlanted[] = {
      {"cuda.flash_decode_page_offset",
       {SdpaKernel::flash_decode, SdpaPlant::paged_page_offset},
       sdpa::PlantedBug::paged_page_offset},
      {"cuda.flash_decode_tail_read",
       {SdpaKernel::flash_decode, SdpaPlant::paged_tail_read},
       sdpa::PlantedBug::paged_tail_read},
      {"cuda.flash_decode_combine_log2",
       {SdpaKernel::flash_decode, SdpaPlant::splitkv_combine_log2},
       sdpa::PlantedBug::splitkv_combine_log2},
  };

  std::vector<Row> rows;
  auto kernel_row = [&](const char* name, const SdpaRow* data, std::vector<std::string> caps) {
    rows.push_back(
        row("sdpa", name, OPCTS_CUDA_ONLY(sdpa_kernel_supports), OPCTS_CUDA_ONLY(sdpa_kernel_run), nullptr, data));
    rows.back().caps = std::move(caps);
    rows.back().prepare = OPCTS_CUDA_ONLY(sdpa_kernel_prepare);
    rows.back().deterministic_tactic = OPCTS_CUDA_ONLY(sdpa_kernel_deterministic_tactic);
  };
  // flash uses mma.sync m16n8k16 with bf16 operands (sm_80+); math needs only cuBLAS.
  kernel_row("cuda.flash", &kFlash, {"mma_sync_bf16"});
  // Each of the backward's kernels is judged: the tensor-core one, its two-blocks-per-SM variant
  // and the FMA one it falls back to, each a tactic (before tactics, the rows cuda.flash_bwd_occ2
  // and cuda.flash_bwd_fma).
  rows.back().tactics = flash_backward_tactics;
  rows.back() = with_hip_twin(std::move(rows.back()));  // hip.flash: the same kernels, mma emulated
  // ABI 1.3: varlen (the forward's kVarlen variant, the backward's FMA kernel) with padding rows
  // (seqused_k); its supports refuses the paged layout (1.2), cuda.flash_decode's. 1.4: chunked-
  // local attention in the forward's general variant and the backward's FMA kernel. 1.5: attention
  // sinks in every forward variant's epilogue, and the backward's dsinks pass (every kernel). 1.6:
  // ALiBi in the forward's general variant and the backward's FMA kernel. 1.7: query-broadcast
  // masks (every kernel reads row i at i · mask_strides.seq) and dbias (the FMA kernel's fp32
  // partials, summed in a fixed order). 1.8: block masks in the forward's general variant and the
  // backward's FMA kernel. 1.9: fp8 q, k, v and fp8 KV caches in the forward (its fp8 variant over
  // 16-bit copies of the codes; dense layouts, no block mask).
  rows.back().desc.abi_minor = 9;
  rows.back().desc.invariance = OPCTS_CUDA_ONLY(sdpa_kernel_invariance);  // its forward, dense and varlen
  kernel_row("cuda.math", &kMath, {});
  // 1.7 for query-broadcast masks (its softmax reads rows through the seq stride); its supports
  // refuses dbias and everything of 1.1 to 1.6 (varlen, paged, chunks, sinks, ALiBi).
  rows.back().desc.abi_minor = 7;
  for (const Planted& p : kPlanted) {
    kernel_row(p.name, &p.row, {"mma_sync_bf16"});
    rows.back().desc.abi_minor = 3;  // cuda.flash's kernels: their bugs show on varlen too
    rows.back().cannot_show = cannot_show(p.bug);
  }
  // FMA only (no tensor cores): any arch the CUDA build targets. ABI 1.2: the paged layout. 1.5:
  // attention sinks in the split combine (its supports refuses varlen, 1.1 and 1.3, and chunks,
  // 1.4). 1.6: ALiBi in its scores. The planted twins stay at 1.2.
  kernel_row("cuda.flash_decode", &kDecode, {});
  rows.back().desc.abi_minor = 6;
  for (const Planted& p : kDecodePlanted) {
    kernel_row(p.name, &p.row, {});
    rows.back().desc.abi_minor = 2;
    rows.back().cannot_show = cannot_show(p.bug);
  }
  add_rows(reg, std::move(rows));

  // cuDNN's fp16/bf16 SDPA needs sm_80+, as mma_sync_bf16 says.
  static constexpr SdpaRow kCudnn{SdpaKernel::cudnn};
#if OPCTS_HAVE_CUDNN
  Row cudnn = row("sdpa", "cuda.cudnn", OPCTS_CUDA_ONLY(sdpa_cudnn_row_supports), OPCTS_CUDA_ONLY(sdpa_cudnn_row_run),
                  OPCTS_CUDA_ONLY(sdpa_cudnn_row_deterministic), &kCudnn);
  cudnn.prepare = OPCTS_CUDA_ONLY(sdpa_cudnn_row_prepare);
  const std::string missing;
#else
  Row cudnn = row("sdpa", "cuda.cudnn", nullptr, nullptr, nullptr, &kCudnn);
  const std::string missing =
      OPCTS_HAVE_CUDA ? "this opcts was built without cuDNN (no cudnn_graph.h / libcudnn found)" : "";
#endif
  cudnn.caps = {"mma_sync_bf16"};
  // ragged and paged graphs (1.3), sinks (1.5), ALiBi (1.6), dbias and one-row masks (1.7), fp8 (1.9)
  cudnn.desc.abi_minor = 9;
  cudnn.tactics = cudnn_tactics;  // in every build, with cuDNN or not: ids never depend on it
  add_rows(reg, {cudnn}, missing);
}

}  // namespace opcts
