// SDPA forward and backward through the cuDNN 9 backend graph API (cudnnBackendCreateDescriptor /
// SetAttribute / Finalize / Execute; cudnn-frontend is not used). No harness types: the glue in
// sdpa_cudnn_impls.cpp maps the errors below onto opcts::InvalidArgument / opcts::Unsupported.
//
// Semantics are those of sdpa_kernels.hpp (the contract); this file says how they map onto cuDNN.
//
// Why a composite graph. The fused CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR ops (≥ 9.13.1 /
// 9.17) cannot express causal or sliding-window bounds or a bias before 9.21 (cudnn-frontend sdpa_support_surface.h),
// so this adapter builds the graph cudnn-frontend 1.x builds for its non-unified ("composite") path,
// which cuDNN's fused flash-attention engines pattern-match:
//   forward:  MATMUL Q·Kᵀ → MUL scale → [softcap: DIV cap, TANH_FWD, MUL cap] → [ADD bias] →
//             [band mask] → softmax (REDUCTION MAX, SUB, EXP, REDUCTION ADD, LOG, ADD → Stats;
//             DIV → P, cast to the input dtype) → MATMUL P·V = O.
//   backward: softmax_sum = REDUCTION ADD(dO ⊙ O) · 1 (fp32, in memory); recompute
//             S = Q·Kᵀ · scale [softcap] [+ bias] − Stats, [padding mask], [band mask], EXP = P;
//             dV = RESHAPE(P)ᵀ·dO; dP = dO·Vᵀ; dS = (dP − softmax_sum) ⊙ P [softcap bprop] · scale;
//             dK = RESHAPE(dS)ᵀ·Q; dQ_accum (fp32, in memory) = dS·K, dQ = IDENTITY(dQ_accum).
//             GQA: dK, dV computed per query head [B, Hq, Sk, D] and summed by REDUCTION ADD.
//   (frontend: node/scaled_dot_product_flash_attention.h CompositeSDPANode /
//    CompositeSDPABackwardNode, node/softmax.h CompositeSoftmaxNode, node/diagonal_band_mask.h
//    CompositeDiagonalBandMaskNode, utils/attn_score_modifiers.h.)
//
// Band masks (CompositeDiagonalBandMaskNode): row = GEN_INDEX axis 2, col = GEN_INDEX axis 3 (INT32).
//   right bound r:  keep  row [+ s_kv − s_q when BOTTOM_RIGHT] [+ r]  CMP_GE  col   (j ≤ i + r)
//   left bound L:   keep  col + L [− s_kv + s_q when BOTTOM_RIGHT]  CMP_GT  row   (j > i − L)
//   then BINARY_SELECT(score, −inf, keep). cuDNN's left bound is EXCLUSIVE: L = window_left + 1
//   gives FlashAttention-2's inclusive j ≥ i + Sk − Sq − window_left. The right bound is inclusive:
//   r = window_right (and r = 0 for causal; min of the two when both apply).
//   Alignment: when Sq == Sk both alignments coincide and the graph uses TOP_LEFT (which the
//   frontend's support surface allows with a bias); otherwise causal_upper_left is TOP_LEFT and
//   causal_lower_right / a window is BOTTOM_RIGHT. A window together with causal_upper_left and
//   Sq != Sk needs two alignments and is not expressible (sdpa_cudnn_supports says so).
//
// Version gates (cudnnGetVersion() at run time; cudnn-frontend docs "Attention", "Support Matrix";
// include/cudnn_frontend/node/sdpa_support_surface.h):
//   < 9.0        refused here (this adapter uses cuDNN 9 descriptors and −inf masking, ≥ 9.10).
//   9.10.0/9.10.1  fp16/bf16 SDPA forward blocked by the frontend (known bugs): refused.
//   < 9.6.0      bottom-right masks need s_q, s_kv multiples of 64; window + bottom-right needs
//                s_q == s_kv: refused.
//   9.14.0       known sliding-window bug (non-causal, s_kv > 1024, left bound): the frontend
//                refuses; this adapter RUNS it, so the suite records what cuDNN does (a finding).
//                Measured on an H200 with 9.14.0 (2026-11-30, the since retired bench/sdpa_cudnn_check.cpp): window
//                (128, -1) at s = 2048 and (128, 128) at s = 1280, bf16 D=64, forward and backward
//                matched the fp64 reference (max err ≤ 4.6e-3 of max |ref|): not reproduced there.
//   ≤ 9.15       backward with s_kv % 128 != 0: the frontend adds a "workaround padding mask"
//                (seq_len tensors = full lengths, matmul M/N/K overrides); mirrored here.
// Engines seen on sm90 (heuristics mode A, first config finalized): 9.14.0 fwd and bwd engine 2;
// 9.19.0 fwd engine 2, bwd engine 6. A row that sees no key (additive −inf row) gives O = 0 and
// Stats = −inf on both, as the contract wants.
//   ≥ 9.21       fused SDPA op can express masks (not used here).
// Support surface also enforced (frontend): h_q % h_k == 0; d_qk, d_v multiples of 8 and ≤ 256
// (sm90; ≤ 128 on sm80 before 9.9 is not checked — the glue requires sm80+ and d ≤ 256);
// bottom-right masks need s_q ≤ s_kv and no bias; a score modifier (softcap) excludes every
// other mask ("Attention score mod enabled and hence other subgraphs are disabled").
//
// Packed layouts (SdpaParams::varlen, or a paged KV cache), as the frontend builds them
// (samples/cpp/sdpa: THD with ragged offsets; fp16_fwd_with_paged_caches.cpp):
//   Q, O (and dQ, dO) are [B, H, max Sq, D] with THD strides and CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC
//   = int32 [B + 1] element offsets (cu_seqlens · H · D); varlen K, V (dK, dV) likewise from
//   cu_seqlens_k. A padding mask (seq_len_q [B], seq_len_kv [B] = seqused_k clamped to its segment,
//   or the segment) sets rows and columns past them to −inf, the GEMMs take them as M/N/K overrides
//   and bmm1 pads with 0; bottom-right masks align per sequence on those lengths (so the dense
//   Sq ≤ Sk limit does not apply). These tensors are computed on the stream per run
//   (sdpa_cudnn_ragged_meta). Stats stay padded [B, Hq, max Sq] in scratch and are moved to or
//   from the ABI's lse [Hq, total_q]; the varlen backward zeroes dK and dV first, so the padding
//   rows seqused_k leaves out get 0.
//   Paged: OPERATION_PAGED_CACHE_LOAD gathers K (as Kᵀ) and V from the caches as containers
//   [num_pages, Hkv, page_size, D] (NHD storage by its strides) through block_table
//   [B, 1, max_pages_per_seq, 1]; the graph's s_kv is the table's capacity. Forward only.
//   Gates (frontend): ragged needs the padding mask, so no softcap; ragged THD on sm90+ before
//   9.18.1; GQA with ragged backward ≥ 9.6.0 (the adapter asks 9.6.0 for every packed graph);
//   paged with ragged offsets ≥ 9.7.0, head dims > 128 paged after 9.9; page sizes powers of two
//   (cuDNN 9.14.0's paged cache load op refuses others: CUDNN_STATUS_BAD_PARAM).
//   Measured on an H200 with cuDNN 9.14.0 (2026-12-06, docs/status/sm90.md): a sequence with no
//   key (seq_len_kv 0) gets no O rows written at all — the contract's O = 0 is not there.
//
// Sinks (cuDNN >= 9.13.0; frontend softmax.h with a SINK_TOKEN): the row max is MAX(reduce_max(S),
// sink_h) and the sum adds exp(sink_h − max); the backward's dSink [1, H, 1, 1] is the reduction of
// exp(sink − Stats) ⊙ rowsum(dO ⊙ O) over batch and rows, as the frontend builds it (its tests
// compare it with autograd's gradient). Dense layouts and s_q > 1 only.
// ALiBi (utils/attn_score_modifiers.h alibi_mask): S + (col − row)·slope_h with the case's slopes
// as the [1, H, 1, 1] tensor the frontend fills itself; the frontend allows it under a top-left
// causal mask only, where it is FlashAttention-2's −slope·|i + Sk − Sq − j| when Sq = Sk.
// dBias (cuDNN >= 9.5.0): the reduction of dS′ = P ⊙ (dP − softmax_sum), before the softcap's bprop
// and the scale, onto the mask's dims (broadcast axes 1); with it dQ comes straight from its
// matmul (the frontend's dP-workspace implementation, without dQ_accum). Measured on an H200 with
// 9.14.0 (2026-12-07, docs/status/sm90.md (p)): the default tier's dbias cases pass.
// A bias of one row for every query ([.., 1, Sk]) is a dimension of 1 in the forward (passed on an
// H100, (o)) and Sq rows at a query stride of 0 in the backward graph (as torch's expand() passes
// it): as a dimension of 1 the backward's gradients were wrong (H100 and H200, 9.14.0); as Sq rows
// they passed (H200, 3 of 3). Its dBias (reduced over the queries) is not built: cuDNN wrote
// outside its outputs and lost the device (docs/status/sm90.md (p)).
//
// FP8 (SdpaParams::fp8 qkv; the frontend's per-tensor fp8 forward, node/scaled_dot_product_flash_attention.h
// with matmul_fp8.h): Q, K, V as FP8_E4M3 or FP8_E5M2 codes; S = Q·Kᵀ · scale · descale_q ·
// descale_k; the softmax as above; P = DIV → AMAX (Amax_S) → MUL scale_s, cast to Q's fp8 type →
// MATMUL P·V (fp32) · descale_s · descale_v (AMAX: Amax_O) · scale_o → O as FP8_E4M3 codes. The
// adapter gives scale_s = 2^8 and descale_s = 2^-8 (device constants of the plan; the judged model,
// families/sdpa/bound.hpp kFp8PNormalised), the problem's o_scale as scale_o, and the two amax
// outputs to scratch. Gates (sdpa_support_surface.h): >= 9.1.0, not 9.10.0; per-tensor descales;
// no bias; head dims multiples of 16; before Blackwell an fp8 O and top-left masks only. Forward
// only (the frontend's sdpa_fp8_backward is not built), dense layouts, no sinks, ALiBi or softcap.
//
// Explicit masks: additive only (the SdpaParams::attn_mask in the input dtype, added after the
// softcap like the frontend's bias). A boolean mask is refused here; the glue converts it to an
// additive 0 / −inf mask (what PyTorch does before calling cuDNN), which is exact.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include "gpu/cuda/tactic_rank.hpp"

#include "families/sdpa/cuda/sdpa_kernels.hpp"

namespace opcts::cuda {

/// The scale_s the fp8 graph gives P before its cast to Q's fp8 type: 2^8, its descale exact.
/// O's model for it (cases/tolerances.yaml, fp8_p_normalised) takes families/sdpa/sdpa.hpp's
/// kFp8ScaleS, which this header cannot include; test_sdpa_glue.cpp asserts the two are equal.
constexpr float kCudnnFp8ScaleS = 256.f;

/// The caller's arguments are wrong (null pointer, negative size, Hq % Hkv != 0, ...);
/// `argument` names the one at fault.
struct SdpaCudnnArgumentError : std::invalid_argument {
  SdpaCudnnArgumentError(std::string arg, const std::string& msg)
      : std::invalid_argument(msg), argument(std::move(arg)) {}
  std::string argument;
};

/// cuDNN refused the graph (CUDNN_STATUS_NOT_SUPPORTED family, no engine config finalized, or
/// no heuristic result); the message carries cudnnGetErrorString and cudnnGetLastErrorString.
struct SdpaCudnnRefusal : std::runtime_error {
  SdpaCudnnRefusal(int st, const std::string& msg) : std::runtime_error(msg), status(st) {}
  int status;
};

/// How many engine configs of cuDNN's heuristics the cuda.cudnn row runs, one tactic each (c0..c3):
/// rank i is the i-th config, in the heuristics' (mode A) order, whose execution plan finalizes; c0
/// is the one the row ran before it had tactics. On the H200, 9.14.0 gave 2 configs for the
/// Llama-3-8B prefill graphs, forward and backward, with and without a causal mask
/// (docs/status/data/sm90_sdpa_bench_pre_post_hip.txt, "config 1 of 2"): four leaves room for a
/// library or arch that offers more, while bounding what the preparation does for every problem,
/// whatever tactics its run will ask for: it builds (graph, heuristics, up to rank + 1
/// finalizations each) and warms the plan of every rank, and keeps them all in the plan cache. The
/// tactic names are fixed by the problem alone; how many configs a device offers is known only when
/// its heuristics are asked.
inline constexpr int kMaxCudnnEngineConfigs = 4;

/// cudnnGetVersion() of the library loaded at run time (e.g. 91400 for 9.14.0).
int64_t sdpa_cudnn_version();

/// Whether the adapter can express the problem on the loaded cuDNN (pointers are not looked at);
/// when not, `why` says which parameter or version gate. `backward` selects the backward graph,
/// `dbias` its dBias output.
bool sdpa_cudnn_supports(const SdpaParams& p, bool backward, std::string* why, bool dbias = false);

/// A finalized cuDNN execution plan for one problem shape (pointers are bound at run time), with
/// its workspace and the backward's fp32 scratch tensors (softmax_sum, dQ_accum) allocated.
/// Building it (graph, heuristics, plan finalization) costs milliseconds; running it does not.
/// `rank` picks the engine config: the rank-th (from 0) of the heuristics' configs whose plan
/// finalizes, < kMaxCudnnEngineConfigs; fewer throws RankAbsent (gpu/cuda/tactic_rank.hpp:
/// `count` how many did; none is a refusal, SdpaCudnnRefusal, whatever the rank).
class SdpaCudnnPlan {
 public:
  /// Builds the forward graph: outputs O and logsumexp (fp32 [B, Hq, Sq], contiguous).
  static std::unique_ptr<SdpaCudnnPlan> forward(const SdpaParams& p, int rank = 0);
  /// Builds the backward graph: inputs Q, K, V, O, logsumexp, dO; outputs dQ, dK, dV.
  static std::unique_ptr<SdpaCudnnPlan> backward(const SdpaBackwardParams& p, int rank = 0);
  ~SdpaCudnnPlan();
  SdpaCudnnPlan(const SdpaCudnnPlan&) = delete;
  SdpaCudnnPlan& operator=(const SdpaCudnnPlan&) = delete;

  /// Runs on `stream` with the pointers of `p` (same shapes and strides as at build time).
  void run(const SdpaParams& p, CUstream_st* stream);
  void run(const SdpaBackwardParams& p, CUstream_st* stream);

  /// "engine 8 (config 2 of 3, rank 1), workspace 0 B": which heuristic result finalized, and
  /// its rank among those that did.
  const std::string& description() const;

  struct Impl;

 private:
  explicit SdpaCudnnPlan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Creates this device's cuDNN handle now (it is made on first use otherwise): cudnnCreate may
/// wait for the device, which a call on a stream its caller holds must never do.
void sdpa_cudnn_prepare();

/// Builds the plan of `rank` sdpa_cudnn_forward will run for problems shaped as `p` (its pointers
/// are not looked at) — with `backward`, sdpa_cudnn_backward's so, and the forward's of rank 0
/// (the one a backward's O and lse come from) — runs each new one once, and makes this device's
/// handle, into a per-process cache of the most recent plans: building and a plan's first run may
/// wait for the device, so a caller that holds the stream it will hand to the run calls this
/// first. Drops the oldest plans. Never throws: a build that fails is done again, and its error
/// reported, by the run.
void sdpa_cudnn_prepare_plans(const SdpaBackwardParams& p, bool backward, int rank) noexcept;

/// Forward: runs the cached plan of p's shape and `rank` (built now when sdpa_cudnn_prepare_plans
/// did not) on `stream`, without waiting (its scratch is stream-ordered). Throws
/// SdpaArgumentError, SdpaCudnnArgumentError, SdpaCudnnRefusal, RankAbsent (before
/// the plan is launched), or std::runtime_error (a cuDNN or CUDA failure other than a refusal).
void sdpa_cudnn_forward(const SdpaParams& p, CUstream_st* stream, int rank);
/// Backward, likewise; `p.fwd.o` and `p.fwd.lse` must hold the forward's outputs.
void sdpa_cudnn_backward(const SdpaBackwardParams& p, CUstream_st* stream, int rank);

}  // namespace opcts::cuda
