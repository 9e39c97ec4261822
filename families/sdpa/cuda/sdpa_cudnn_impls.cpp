// The cuda.cudnn row's callbacks: the ABI's tensors onto the cuDNN 9 backend-graph SDPA
// (sdpa_cudnn.hpp), forward, or forward then backward, on the stream handed in.
//
// Errors: SdpaArgumentError / SdpaCudnnArgumentError (the adapter refused an argument) become
// OPCTS_INVALID_ARGUMENT naming it; SdpaCudnnRefusal (cuDNN said NOT_SUPPORTED, or no engine
// config finalized) becomes OPCTS_UNSUPPORTED with the cuDNN version, an ERROR of the case unless a
// manifest expects it. What the adapter cannot express at all (version gates, bottom-right masks
// with Sq > Sk, softcap with masks, ...) is a SKIP from the supports callback, with the reason.
//
// Packed layouts (varlen THD with padding rows, paged KV caches; ABI 1.3): cuDNN's ragged and
// paged graphs (sdpa_cudnn.hpp), forward and varlen backward.
//
// Tactics (ABI 1.11; sdpa_rows.cpp's cudnn_tactics): c<i> runs the plan of the engine config of
// rank i among those of cuDNN's heuristics whose plan finalizes (the backward graph's, for a
// backward problem); a rank the device's heuristics do not offer (RankAbsent) is
// OPCTS_TACTIC_UNAVAILABLE, a SKIP.
//
// A boolean mask becomes an additive 0 / -inf mask in the input dtype on the device (exact:
// s + 0 = s, s + -inf = -inf for finite s), which is what PyTorch hands cuDNN.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "families/sdpa/cuda/sdpa_cudnn.hpp"
#include "families/sdpa/cuda/sdpa_launch.hpp"
#include "gpu/cuda/device_memory.hpp"
#include "gpu/cuda/rows.hpp"
#include "gpu/cuda/stream_scratch.cuh"

namespace opcts::cuda {

namespace {

std::string version_text() {
  const int64_t v = sdpa_cudnn_version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

bool backward(const opcts_sdpa_params& c) { return sdpa_backward(c); }

// The kernel parameters as the adapter sees them: a boolean mask arrives additive.
SdpaBackwardParams cudnn_params_of(const opcts_sdpa_params& c, const opcts_tensor* t = nullptr, int32_t n = 0) {
  SdpaBackwardParams bp = sdpa_backward_params_of(c, t, n);
  if (bp.fwd.mask_kind == SdpaMaskTensor::boolean) bp.fwd.mask_kind = SdpaMaskTensor::additive;
  return bp;
}

double mask_elems(const opcts_sdpa_params& c) {
  if (c.attn_mask == OPCTS_SDPA_ATTN_MASK_NONE) return 0;
  return static_cast<double>(c.mask_per_batch ? c.batch : 1) * (c.mask_per_head ? c.heads_q : 1) * c.seq_q * c.seq_k;
}

// The engine config rank the case's tactic names: "c<rank>" (sdpa_rows.cpp's cudnn_tactics); 0
// where the case has none (a NULL tactic: a problem the row lists no tactics for, or an args
// struct older than ABI 1.11, which has no tactic field). opcts hands only listed tactics, so
// another name is an internal error, thrown naming it.
int config_rank(const char* t) {
  static_assert(kMaxCudnnEngineConfigs <= 10, "tactic names c0..c9: one digit");
  return tactic_rank(t, 'c', kMaxCudnnEngineConfigs, "cuda.cudnn");
}

}  // namespace

// cuDNN's SDPA backward adds dQ with atomics unless the frontend's deterministic algorithm is
// asked for (off by default since cuDNN frontend 1.5; karpathy/llm.c#652 saw it differ at
// large batch sizes): measured on an H100 (sm90, cuDNN 9.14, 2026-12-05, --bitwise), dQ
// differed between two runs on 178 of 914 backward cases. The forward of one query row (decode)
// is not reproducible either: bf16_b1_hq32_hkv8_sq1_sk4096_d128_nomask gave lse one bit apart
// on two H100s (2026-12-05, two --bitwise tier runs: 8.78748894 then 8.78748798, both times;
// docs/status/sm90.md), a split of the keys whose partial results are combined in no fixed
// order. Other forwards are declared reproducible: none differed in about 1,000 cases.
int32_t sdpa_cudnn_row_deterministic(const void*, const void* params) {
  const auto& c = *static_cast<const opcts_sdpa_params*>(params);
  return backward(c) || c.seq_q == 1 ? 0 : 1;
}

int32_t sdpa_cudnn_row_supports(const void*, const void* params, const opcts_arch* arch, char* reason, size_t size) {
  const auto& c = *static_cast<const opcts_sdpa_params*>(params);
  auto no = [&](const std::string& why) {
    std::snprintf(reason, size, "%s", why.c_str());
    return 0;
  };
  SdpaBackwardParams bp;
  try {
    bp = cudnn_params_of(c);
  } catch (const AbiValueError& e) {
    return no(e.what());  // a later version's value, or a corrupted struct
  }
  // A negative case runs, so that the adapter refuses it naming the argument.
  try {
    sdpa_check_arguments(bp.fwd);
  } catch (const SdpaArgumentError&) {
    return 1;
  }
  if (c.dtype.bits != 16) return no("cuDNN SDPA takes fp16/bf16 only");
  // cuDNN's tensor descriptors need positive dimensions (CUDNN_STATUS_BAD_PARAM otherwise);
  // PyTorch returns empty outputs before it calls cuDNN. The result of an empty problem is
  // then not cuDNN's, so the case does not run here (cuda.flash and cuda.math run it).
  if (c.batch == 0 || c.seq_q == 0 || c.seq_k == 0)
    return no("cuDNN descriptors take no zero-size dimension (B, Sq or Sk = 0)");
  if (arch->compute_major > 0 && arch->compute_major < 8) return no("cuDNN fp16/bf16 SDPA needs sm80+");
  if (c.fp8 != OPCTS_SDPA_FP8_NONE && arch->compute_major > 0 && arch->compute_major < 9)
    return no("cuDNN's fp8 SDPA needs sm90+ (frontend support surface)");
  std::string why;
  if (!sdpa_cudnn_supports(bp.fwd, backward(c), &why, bp.dbias)) return no("cuDNN " + version_text() + ": " + why);
  const bool packed = bp.fwd.varlen || bp.fwd.page_size > 0;
  if (packed && arch->compute_major > 0 && arch->compute_major < 9 && sdpa_cudnn_version() < 91801)
    return no("cuDNN " + version_text() + ": ragged (THD) SDPA needs sm90+ before 9.18.1 (frontend support surface)");
  // The adapter's ragged offsets are int32 element offsets; B · Sq bounds the query rows.
  if (packed && static_cast<double>(c.batch) * c.seq_q * c.heads_q * std::max(c.head_dim, c.head_dim_v) > INT32_MAX)
    return no("the packed tensors' element offsets exceed the adapter's int32 ragged offsets");
  // The handle is made now, not under the backend's stream gate (cudnnCreate may wait).
  sdpa_cudnn_prepare();
  // Scratch: the additive mask, and for the backward the forward's O and lse, softmax_sum and
  // dQ_accum (fp32).
  double extra = c.attn_mask == OPCTS_SDPA_ATTN_MASK_BOOL ? 2 * mask_elems(c) : 0;
  if (packed) extra += 4.0 * c.batch * c.heads_q * c.seq_q + 4.0 * sdpa_cudnn_ragged_meta_size(c.batch);  // Stats
  if (backward(c))
    extra +=
        4.0 * c.batch * c.heads_q * c.seq_q * (2 + c.head_dim) + 2.0 * c.batch * c.heads_q * c.seq_q * c.head_dim_v;
  const Support s = fits_device_memory(extra, "scratch");
  return s.ok ? 1 : no(s.reason);
}

void sdpa_cudnn_row_prepare(const void*, const void* params, const char* tactic) {
  const auto& c = *static_cast<const opcts_sdpa_params*>(params);
  // The plans run will execute (the backward runs cuDNN's forward first), built while the
  // stream is free: the same parameters as run's, whose pointers the plans do not depend on, and
  // the case's tactic's rank (an unknown tactic: left to run, which reports it).
  int rank = 0;
  try {
    rank = config_rank(tactic);
  } catch (const std::exception&) {
    return;
  }
  sdpa_cudnn_prepare_plans(cudnn_params_of(c), backward(c), rank);
}

opcts_status sdpa_cudnn_row_run(const void*, const opcts_run_args* a, opcts_report* r) {
  const auto& c = *static_cast<const opcts_sdpa_params*>(a->params);
  auto* stream = static_cast<cudaStream_t>(a->stream);
  try {
    const int rank = config_rank(tactic_of(a));
    SdpaBackwardParams bp = cudnn_params_of(c, a->tensors, a->n_tensors);
    StreamScratch scratch(stream);
    if (c.attn_mask == OPCTS_SDPA_ATTN_MASK_BOOL && bp.fwd.attn_mask) {
      const double n = mask_elems(c);
      void* additive = scratch.alloc(static_cast<size_t>(2 * n), "additive attn_mask");
      sdpa_bool_mask_to_additive(static_cast<const uint8_t*>(bp.fwd.attn_mask), additive, bp.fwd.dtype,
                                 static_cast<size_t>(n), stream);
      bp.fwd.attn_mask = additive;
    }
    if (!backward(c)) {
      sdpa_cudnn_forward(bp.fwd, stream, rank);
      return OPCTS_OK;
    }
    // The backward needs the forward's O and lse: cuDNN's own forward computes them, with its
    // first config whatever the tactic, which picks the backward's (the graph the case judges).
    sdpa_check_arguments(bp.fwd);
    const double rows = static_cast<double>(c.batch) * c.heads_q * c.seq_q;
    bp.fwd.o = scratch.alloc(static_cast<size_t>(2 * rows * c.head_dim_v), "forward O");
    bp.fwd.lse = scratch.alloc_n<float>(static_cast<size_t>(rows), "forward lse");
    sdpa_cudnn_forward(bp.fwd, stream, 0);
    sdpa_cudnn_backward(bp, stream, rank);
  } catch (const SdpaArgumentError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const SdpaCudnnArgumentError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const AbiValueError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.field);
  } catch (const SdpaCudnnRefusal& e) {
    return report_status(r, OPCTS_UNSUPPORTED, std::string(e.what()) + " [cuDNN " + version_text() + "]");
  } catch (const RankAbsent& e) {
    return report_status(r, OPCTS_TACTIC_UNAVAILABLE, e.what());
  } catch (const std::exception& e) {
    return report_status(r, OPCTS_INTERNAL, e.what());
  }
  return OPCTS_OK;
}

}  // namespace opcts::cuda
