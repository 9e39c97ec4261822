// Launch interface of the scaled GEMMs (cuBLASLt adapter and opcts's own mx kernel); no harness types.
//
// D[M, N] = act( Σ_k deq(A)[m, k] · deq(B)[k, n] · global_scale ) (+ bias[n]), where deq applies
// each operand's dequant scales (x ≈ q · scale: torch._scaled_mm and cuBLASLt A/B_SCALE
// semantics). For an e4m3 output, D = satfinite_e4m3(d_scale · (...)) (cuBLASLt D_SCALE, a
// multiplier). Operands (cuBLASLt docs: cublasLtMatmul, cublasLtMatmulMatrixScale_t):
//   A codes: M rows of K; element (m, k) at byte a + m·lda + k when a_k_major (A row-major,
//            "T" for cuBLASLt), else at a + k·lda + m (A column-major).
//   B codes: given as Bᵀ, N rows of K; element (k, n) at b + n·ldb + k when b_k_major (B
//            column-major), else at b + k·ldb + n (B row-major).
//   e2m1 packs two codes per byte along the contiguous dimension, element 2i in the low
//   nibble; lda/ldb count elements, so e2m1 leading dims are even.
// Scale buffers per mode, for an operand of R rows (M for A, N for B) and K columns:
//   scalar_f32      1 fp32
//   outer_vec_f32   R fp32 (one per row of A / column of B; cuBLASLt OUTER_VEC_32F)
//   vec128_f32      fp32 [R, ceil(K/128)] with strides (1, R) (cuBLASLt VEC128_32F, 1×128 blocks)
//   blk128x128_f32  fp32 [ceil(R/128), ceil(K/128)] row-major (cuBLASLt BLK128x128_32F)
//   vec32_ue8m0     e8m0 codes, 1×32 blocks, cuBLAS swizzled layout (128×4 tiles, R padded to
//                   128 and ceil(K/32) to 4) (cuBLASLt VEC32_UE8M0; MX)
//   vec16_ue4m3     ue4m3 codes, 1×16 blocks, same swizzled layout (cuBLASLt VEC16_UE4M3; NVFP4)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

struct CUstream_st;

namespace opcts::cuda {

enum class MmElem { e4m3, e5m2, e2m1 };
enum class MmScaleMode { scalar_f32, outer_vec_f32, vec128_f32, blk128x128_f32, vec32_ue8m0, vec16_ue4m3 };
enum class MmOut { bf16, fp16, fp32, e4m3 };

struct ScaledMmParams {
  int64_t m = 0, n = 0, k = 0;
  MmElem a_elem = MmElem::e4m3, b_elem = MmElem::e4m3;
  const void* a = nullptr;
  const void* b = nullptr;
  int64_t lda = 0, ldb = 0;
  bool a_k_major = true, b_k_major = true;
  MmScaleMode a_scale_mode = MmScaleMode::scalar_f32, b_scale_mode = MmScaleMode::scalar_f32;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  float global_scale = 1.0f;  // NVFP4: g_A · g_B (cuBLASLt alpha); 1 otherwise
  // NVFP4 on the device (the global_scale tensor): the MX kernel reads it there, so a launch
  // recorded into a CUDA graph reads the replay's value; null: global_scale above.
  const float* global_scale_dev = nullptr;
  MmOut out = MmOut::bf16;
  void* d = nullptr;  // D [M, N] row-major, leading dim ldd (elements)
  int64_t ldd = 0;
  const float* d_scale = nullptr;  // e4m3 output only (device pointer)
  const void* bias = nullptr;      // [N] in the output dtype (bf16/fp16 outputs), or null
  bool fast_accum = false;         // cuBLASLt FAST_ACCUM (no periodic promotion); sm90 tensorwise/rowwise
  /// cuBLASLt only: which of the heuristic's algorithms to run, by rank in the list
  /// cublasLtMatmulAlgoGetHeuristic returns (0: its first choice; < kMaxHeuristicTactics). The
  /// cuda.cublaslt row's tactic h<rank> sets it.
  int32_t heuristic_rank = 0;
};

/// How many of cuBLASLt's heuristic algorithms the cuda.cublaslt row runs, one tactic each
/// (h0..h7): the list cublasLtMatmulAlgoGetHeuristic is asked for. The tactic names are fixed by
/// the problem alone; how many of them a device offers is known only when it is asked.
inline constexpr int kMaxHeuristicTactics = 8;

/// An argument the implementation refuses: `argument` names it ("K", "lda", "layout",
/// "a_scale_mode", "out", ...). Thrown before any launch.
struct MmArgumentError : std::invalid_argument {
  MmArgumentError(std::string arg, const std::string& message)
      : std::invalid_argument(message), argument(std::move(arg)) {}
  std::string argument;
};

/// cuBLASLt refused the combination: status 15 (NOT_SUPPORTED) or 7 (INVALID_VALUE) from
/// the heuristic or the matmul; `status` holds it and the message names the call and the
/// combination.
struct MmLibraryRefusal : std::runtime_error {
  MmLibraryRefusal(int status_code, const std::string& message) : std::runtime_error(message), status(status_code) {}
  int status;
};

/// cuBLASLt (13.x) FP8 / block-scaled matmul: one descriptor per call, scale modes set
/// per operand, the heuristic's algorithm of rank p.heuristic_rank, a 32 MiB workspace. Throws
/// MmArgumentError for arguments cuBLASLt documents as invalid (K % 16, leading-dim alignment,
/// layout), MmLibraryRefusal for its status 15 / 7, and RankAbsent (tactic_rank.hpp) for a rank the
/// heuristic did not return.
void scaled_mm_cublaslt(const ScaledMmParams& p, CUstream_st* stream);

/// Creates the current device's cuBLASLt handle and workspace now (they are made on first use
/// otherwise): cudaMalloc may wait for the device, which a call on a stream its caller holds
/// must never do.
void scaled_mm_cublaslt_prepare();

/// scaled_mm_cublaslt_prepare, and cuBLASLt's heuristic query for calls shaped as `shape` (its
/// pointers are not looked at; `bias` and `d_scale` say whether the call will pass them), into
/// a per-process cache that scaled_mm_cublaslt reads, then one call of each algorithm it
/// returned (every rank a tactic may ask for): the query and a kernel's first use may wait for
/// the device, so a caller that holds the stream it will hand to the matmul does both first.
/// `shape.heuristic_rank` is not looked at. Never throws: a query that fails is asked again,
/// and its error reported, by the call.
void scaled_mm_cublaslt_plan(const ScaledMmParams& shape, bool bias, bool d_scale) noexcept;

/// opcts's own portable kernel for every recipe on sm_80+: dequantizes A and B tiles in
/// registers (codes × scales) and accumulates in fp32 with FMA; written so hipcc can build it.
/// Throws MmArgumentError for what it does not handle.
void scaled_mm_mx_kernel(const ScaledMmParams& p, CUstream_st* stream);

}  // namespace opcts::cuda
