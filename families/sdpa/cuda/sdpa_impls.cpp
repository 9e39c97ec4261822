// The CUDA sdpa rows' callbacks for opcts's own kernels (cuda.flash with its backward's kernels as
// tactics, cuda.math, cuda.flash_decode and the planted cuda.flash_*): the ABI's tensors onto the
// kernels, launched on the stream handed in (forward, or forward then backward).
//
// Thin on purpose: the launchers check the operator's arguments (sdpa_args.cu) and refuse a
// negative case with SdpaArgumentError, which becomes OPCTS_INVALID_ARGUMENT naming the argument;
// the backend (abi_backend.cpp) uploads, poisons and guards the outputs and downloads them.
#include "gpu/portable/runtime.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "families/sdpa/cuda/sdpa_launch.hpp"
#include "gpu/cuda/device_memory.hpp"
#include "gpu/cuda/rows.hpp"
#include "gpu/cuda/stream_scratch.cuh"

namespace opcts::cuda {

namespace {

bool backward(const opcts_sdpa_params& c) { return sdpa_backward(c); }

// Elements of the forward's outputs: O [B, Hq, Sq, Dv] and lse [B, Hq, Sq].
double o_elems(const opcts_sdpa_params& c) { return static_cast<double>(c.batch) * c.heads_q * c.seq_q * c.head_dim_v; }
double lse_elems(const opcts_sdpa_params& c) { return static_cast<double>(c.batch) * c.heads_q * c.seq_q; }

// Bytes of the device memory a run needs beyond the ABI's tensors (which the backend counts).
double scratch_bytes(const SdpaRow& row, const opcts_sdpa_params& c) {
  constexpr double f32 = 4;
  const bool bwd = backward(c);
  double scratch = 0;
  if (row.kernel == SdpaKernel::flash_decode) {
    // The splits' partial O, max and row sum (sdpa_flash_decode.cu); forward only.
    return static_cast<double>(sdpa_flash_decode_scratch_bytes(sdpa_params_of(c, nullptr, 0, row.plant)));
  }
  if (row.kernel == SdpaKernel::math) {
    // math runs in fp32 (sdpa_math.cu): S (P in place); the backward also dP and, with a
    // softcap, P apart from S: up to 3 score matrices. Plus the fp32 copies of q, k, v, O
    // (and dO, dQ, dK, dV), the fp32 dK/dV sums and the copies of K and V with unseen rows
    // zeroed.
    const double kv = static_cast<double>(c.batch) * c.heads_kv * c.seq_k * (c.head_dim + c.head_dim_v);
    const double qo = static_cast<double>(c.batch) * c.heads_q * c.seq_q * (c.head_dim + c.head_dim_v);
    scratch = f32 * static_cast<double>(c.batch) * c.heads_q * c.seq_q * c.seq_k * (bwd ? 3 : 1) +
              f32 * (qo + kv) * (bwd ? 2 : 1) + (bwd ? f32 * kv : 0.0) + 2 * f32 * kv;
  } else if (!bwd) {
    // fp8: the flash forward's 16-bit copies of the codes (sdpa_flash.cu).
    scratch = static_cast<double>(sdpa_flash_scratch_bytes(sdpa_params_of(c, nullptr, 0, row.plant)));
  } else {
    // The flash backward's fp32 dQ workspace and rowsum(dO ⊙ O), and dbias's fp32 partials.
    scratch = f32 * static_cast<double>(c.batch) * c.heads_q * c.seq_q * (c.head_dim + 1) +
              static_cast<double>(sdpa_flash_dbias_scratch_bytes(sdpa_backward_params_of(c, nullptr, 0, row.plant)));
  }
  // The forward's O and lse stay on the device for the backward.
  if (bwd) scratch += o_elems(c) * c.dtype.bits / 8 + f32 * lse_elems(c);
  return scratch;
}

// Why a row refuses a block-sparse problem (ABI 1.8), or null. Block masks run on cuda.flash's
// forward (its general variant: per-element masks, unread key tiles skipped) and its backward's
// FMA kernel (per-element selects; the tensor-core backward multiplies whole key tiles, so a NaN
// key of an unread block would reach dQ as 0·NaN: its tactics are not listed there);
// cuda.math and cuda.flash_decode have no block mask.
const char* block_mask_refusal(const SdpaRow& row, const SdpaParams& k) {
  if (k.block_q == 0 && k.block_k == 0) return nullptr;
  if (row.kernel != SdpaKernel::flash)
    return "block-sparse attention (block_mask) runs on cuda.flash (its backward on the FMA kernel), not on "
           "cuda.math or cuda.flash_decode";
  return nullptr;
}

// Why a row does not implement a problem's (valid) features — its layout, fp8, chunks, sinks,
// ALiBi, dbias, a block mask — or null. supports() declines these, and run() refuses them again
// (OPCTS_UNSUPPORTED) before a kernel starts: a negative case runs whatever supports() says
// (runner/execute.cpp: judge_refusal), and a kernel handed a layout it does not read computes
// something from the wrong tensors and so "accepts" the problem (cuda.math on a paged KV cache:
// docs/status/sm90.md, 2026-12-06 (g)).
const char* feature_refusal(const SdpaRow& row, const opcts_sdpa_params& c, const SdpaBackwardParams& bp) {
  // Packed layouts: cuda.flash's forward takes varlen (cu_seqlens); cuda.flash_decode takes the
  // paged KV cache, and only it.
  const sdpa::Layout layout = from_abi<sdpa::Layout>(c.layout, "layout");
  const bool decode = row.kernel == SdpaKernel::flash_decode;
  if ((layout == sdpa::Layout::paged) != decode) {
    return decode ? "cuda.flash_decode runs the paged layout only (dense and varlen are cuda.flash's)"
                  : "the paged KV cache runs on cuda.flash_decode (this kernel takes the dense and varlen "
                    "layouts)";
  }
  if (decode && backward(c)) {
    return "cuda.flash_decode is a forward kernel (the paged layout is forward only)";
  }
  // FP8 (ABI 1.9) runs on cuda.flash's forward (its fp8 variant, over 16-bit copies of the codes);
  // the other kernels would read the codes as the dtype.
  if (bp.fwd.fp8 != SdpaFp8::none && (row.kernel != SdpaKernel::flash || backward(c))) {
    return "fp8 attention runs on cuda.flash's forward; cuda.math, cuda.flash_decode and the flash backward's "
           "kernels take no fp8 codes";
  }
  // An fp8 output (O·o_scale as e4m3fn codes) needs an epilogue the kernels do not have.
  if (c.fp8_out) {
    return "cuda.flash writes O in the dtype: an fp8 output with o_scale is not implemented";
  }
  if (c.attention_chunk != 0 && row.kernel != SdpaKernel::flash) {
    return "chunked-local attention runs on cuda.flash (its backward on the FMA kernel)";
  }
  // Sinks change each row's epilogue only: cuda.flash's forward adds them in every variant and its
  // backward on every kernel (P comes from the forward's lse, which holds the sink; dsinks is a pass
  // of its own), cuda.flash_decode in its combine; cuda.math's softmax has no sink term.
  if (c.sinks != 0 && row.kernel != SdpaKernel::flash && !decode) {
    return "attention sinks run on cuda.flash (forward and backward) and cuda.flash_decode, not on cuda.math";
  }
  // ALiBi is a per-score bias: cuda.flash's forward adds it on its general path, its backward on
  // the FMA kernel (the tensor-core kernel has no per-score term, as for softcap and attn_mask),
  // cuda.flash_decode in its scores; cuda.math's softmax has no bias.
  if (bp.fwd.alibi != SdpaAlibi::none && row.kernel != SdpaKernel::flash && !decode) {
    return "ALiBi runs on cuda.flash (its backward on the FMA kernel) and cuda.flash_decode, not on "
           "cuda.math";
  }
  // dbias (ABI 1.7) is summed by cuda.flash's FMA backward (the kernel of every additive mask);
  // cuda.math's backward does not write it. Its query-broadcast masks run on both.
  if (c.dbias != 0 && row.kernel != SdpaKernel::flash) {
    return "dbias (the additive attn_mask's gradient) runs on cuda.flash's backward (its FMA kernel); "
           "cuda.math's backward does not write it";
  }
  if (layout == sdpa::Layout::varlen && row.kernel != SdpaKernel::flash) {
    return "the varlen layout runs on cuda.flash (its backward on the FMA kernel)";
  }
  if (const char* why = block_mask_refusal(row, bp.fwd)) return why;
  return nullptr;
}

// The flash backward's kernel for cuda.flash's tactic (sdpa_rows.cpp flash_backward_tactics):
// tc the tensor-core kernel (its default variant), tc2 its two-blocks-per-SM variant, fma the FMA
// kernel; none (a forward, or a run without a tactic) the kernel the backward picks itself.
// Throws std::invalid_argument for another name.
SdpaBwdPath sdpa_bwd_path_of(const char* tactic) {
  if (!tactic) return SdpaBwdPath::automatic;
  const std::string t(tactic);
  if (t == "tc") return SdpaBwdPath::automatic;
  if (t == "tc2") return SdpaBwdPath::tc_two_blocks;
  if (t == "fma") return SdpaBwdPath::fma;
  throw std::invalid_argument("cuda.flash: no backward kernel is named by the tactic '" + t + "'");
}

// Why a tactic cannot run the problem, or null: tc and tc2 name the tensor-core kernel, so the
// backward must take it there (its dispatch, tc_takes, agrees with the tactics listed for the
// problem: test_sdpa_glue.cpp checks every catalog problem), and tc2 exists at D = 96 and 128.
// A disagreement is the harness's bug, not the kernel's: run reports it as an internal error.
const char* tactic_refusal(const char* tactic, const SdpaBackwardParams& bp) {
  if (!tactic || bp.path == SdpaBwdPath::fma) return nullptr;
  if (!sdpa_flash_backward_takes_tc(bp))
    return "the tensor-core backward does not take this problem, yet the tactic names it (the tactics listed and "
           "the kernel's dispatch disagree)";
  if (bp.path == SdpaBwdPath::tc_two_blocks && bp.fwd.head_dim != 96 && bp.fwd.head_dim != 128)
    return "the two-blocks-per-SM variant exists at D = 96 and 128 only, yet the tactic tc2 names it";
  return nullptr;
}

bool invalid_arguments(const SdpaParams& k) {
  try {
    sdpa_check_arguments(k);
    return false;
  } catch (const SdpaArgumentError&) {
    return true;
  }
}

}  // namespace

int32_t sdpa_kernel_supports(const void* impl, const void* params, const opcts_arch*, char* reason, size_t size) {
  const auto& row = *static_cast<const SdpaRow*>(impl);
  const auto& c = *static_cast<const opcts_sdpa_params*>(params);
  SdpaBackwardParams bp;
  try {
    bp = sdpa_backward_params_of(c, nullptr, 0, row.plant);
  } catch (const AbiValueError& e) {
    std::snprintf(reason, size, "%s", e.what());  // a later version's value, or a corrupted struct
    return 0;
  }
  if (const char* why = feature_refusal(row, c, bp)) {
    std::snprintf(reason, size, "%s", why);
    return 0;
  }
  // A negative case runs, so that the launcher refuses it naming the argument (or, for what only
  // the device reads, the judge sees it accepted).
  if (invalid_arguments(bp.fwd)) return 1;
  const bool decode = row.kernel == SdpaKernel::flash_decode;
  if (row.kernel == SdpaKernel::flash || decode) {
    const char* why = nullptr;
    const bool ok = decode        ? sdpa_flash_decode_supports(bp.fwd, &why)
                    : backward(c) ? sdpa_flash_backward_supports(bp, &why)
                                  : sdpa_flash_supports(bp.fwd, &why);
    if (!ok) {
      std::snprintf(reason, size, "%s", why);
      return 0;
    }
  } else {
    // cuBLAS's handle is made now, not under the backend's stream gate (cublasCreate may wait).
    OPCTS_CUDA_VENDOR(sdpa_math_prepare());
  }
  const Support s = fits_device_memory(scratch_bytes(row, c), "scratch");
  if (!s.ok) {
    std::snprintf(reason, size, "%s", s.reason.c_str());
    return 0;
  }
  return 1;
}

void sdpa_kernel_prepare(const void* impl, const void*, const char*) {
  // cuda.math's cuBLAS handle, in the process that runs the case (supports ran in another).
  if (static_cast<const SdpaRow*>(impl)->kernel != SdpaKernel::math) return;
  try {
    OPCTS_CUDA_VENDOR(sdpa_math_prepare());
  } catch (...) {
    // The run makes the handle again and reports what failed.
  }
}

opcts_status sdpa_kernel_run(const void* impl, const opcts_run_args* a, opcts_report* r) {
  const auto& row = *static_cast<const SdpaRow*>(impl);
  const auto& c = *static_cast<const opcts_sdpa_params*>(a->params);
  auto* stream = static_cast<cudaStream_t>(a->stream);
  const bool flash = row.kernel == SdpaKernel::flash;
  const char* tactic = tactic_of(a);
  try {
    SdpaBackwardParams bp = sdpa_backward_params_of(c, a->tensors, a->n_tensors, row.plant, sdpa_bwd_path_of(tactic));
    if (const char* why = feature_refusal(row, c, bp)) return report_status(r, OPCTS_UNSUPPORTED, why);
    if (const char* why = tactic_refusal(tactic, bp)) return report_status(r, OPCTS_INTERNAL, why);
    if (row.kernel == SdpaKernel::flash_decode) {
      sdpa_flash_decode_forward(bp.fwd, stream);
      return OPCTS_OK;
    }
    if (!backward(c)) {
      flash ? sdpa_flash_forward(bp.fwd, stream) : OPCTS_CUDA_VENDOR(sdpa_math_forward(bp.fwd, stream));
      return OPCTS_OK;
    }
    // The backward needs the forward's O and lse: computed here, by the same kernel.
    sdpa_check_arguments(bp.fwd);
    StreamScratch scratch(stream);
    bp.fwd.o = scratch.alloc(static_cast<size_t>(o_elems(c) * c.dtype.bits / 8), "forward O");
    bp.fwd.lse = scratch.alloc_n<float>(static_cast<size_t>(lse_elems(c)), "forward lse");
    flash ? sdpa_flash_forward(bp.fwd, stream) : OPCTS_CUDA_VENDOR(sdpa_math_forward(bp.fwd, stream));
    flash ? sdpa_flash_backward(bp, stream) : OPCTS_CUDA_VENDOR(sdpa_math_backward(bp, stream));
  } catch (const SdpaArgumentError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.argument);
  } catch (const AbiValueError& e) {
    return report_status(r, OPCTS_INVALID_ARGUMENT, e.what(), e.field);
  } catch (const std::exception& e) {
    return report_status(r, OPCTS_INTERNAL, e.what());
  }
  return OPCTS_OK;
}

int32_t sdpa_kernel_deterministic_tactic(const void* impl, const void* params, const char* tactic) {
  const auto& row = *static_cast<const SdpaRow*>(impl);
  const auto& c = *static_cast<const opcts_sdpa_params*>(params);
  // The flash forward and the math backend (cuBLAS on one GPU and toolkit, fixed-order GQA
  // sums) are reproducible. The flash backward adds dQ with fp32 atomics: reproducible while
  // each row's keys span at most two key blocks (sdpa_flash_backward_deterministic). Measured
  // on the H200 (smoke tier, --bitwise with every impl declared deterministic): no differing
  // byte in any passing case, backward included, where Sk <= 300 keeps most rows within two
  // blocks of 64 keys. flash_decode has no atomics: each split and the combine sum in a fixed order.
  if (row.kernel != SdpaKernel::flash || !backward(c)) return 1;
  SdpaBackwardParams bp;
  try {
    bp = sdpa_backward_params_of(c, nullptr, 0, row.plant, sdpa_bwd_path_of(tactic));
  } catch (const std::invalid_argument&) {
    return 0;  // not a kernel's tactic: run refuses it, and no claim is made
  }
  if (invalid_arguments(bp.fwd)) return 1;
  return sdpa_flash_backward_deterministic(bp) ? 1 : 0;
}

uint32_t sdpa_kernel_invariance(const void* impl, const void* params) {
  const auto& row = *static_cast<const SdpaRow*>(impl);
  const auto& c = *static_cast<const opcts_sdpa_params*>(params);
  if (row.kernel != SdpaKernel::flash || row.plant != SdpaPlant::none || backward(c)) return 0;
  if (c.layout != OPCTS_SDPA_BHSD && c.layout != OPCTS_SDPA_BSHD && c.layout != OPCTS_SDPA_THD) return 0;
  // One thread block per query tile of one (sequence, head), its keys in the same tiles whatever
  // the batch around it or its layout; fp8 runs the dense layouts only, so it has no varlen twin.
  const uint32_t batch = OPCTS_INVARIANT_BATCH_SIZE | OPCTS_INVARIANT_BATCH_POSITION;
  return c.fp8 != OPCTS_SDPA_FP8_NONE ? batch : batch | OPCTS_INVARIANT_PACKING;
}

}  // namespace opcts::cuda
