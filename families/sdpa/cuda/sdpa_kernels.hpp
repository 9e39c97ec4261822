// Launch interface of opcts's own SDPA kernels (flash and math, forward and backward); no
// harness types, so the kernels build without the harness and a HIP port can share it.
//
// Layout: Q [B, Hq, Sq, Dqk], K [B, Hkv, Sk, Dqk], V [B, Hkv, Sk, Dv], O [B, Hq, Sq, Dv]
// in the logical BHSD order; each tensor has element strides for the batch, head and
// sequence dimensions and D contiguous (stride 1), so BSHD storage is the same call with
// other strides. logsumexp [B, Hq, Sq] fp32, contiguous, the natural log of
// Σ_j exp(s_ij) over the keys row i may see, where s is the final score below (plus
// exp(sink_h) with attention sinks, SdpaParams::sinks).
//
// Scores (PyTorch's scaled_dot_product_attention docs; FlashAttention-2's flash_attn_interface.py
// flash_attn_func): s = scale · q_i·k_j; with softcap > 0, s = softcap ·
// tanh(s / softcap) (FlashAttention-2's softcap, Gemma-2); with ALiBi (SdpaParams::alibi),
// s −= slope·|i + Sk − Sq − j|; then the additive mask is added; then keys outside the causal
// mask, the window or the boolean mask get s = -inf.
// A row that sees no key (all -inf) gets O = 0 and logsumexp = -inf, never NaN (with sinks:
// O = 0 and logsumexp = sink_h).
// GQA: query head h reads KV head h / (Hq / Hkv) (PyTorch enable_gqa, FlashAttention-2).
// Causal masks: causal_upper_left keeps j <= i (PyTorch is_causal); causal_lower_right
// keeps j <= i + Sk - Sq (FlashAttention-2 causal, cuDNN BOTTOM_RIGHT).
// Window (FlashAttention-2 window_size, always bottom-right aligned): keeps
// j in [i + Sk - Sq - window_left, i + Sk - Sq + window_right], inclusive; -1 = unbounded
// on that side. It intersects with the causal mask. cuDNN's left bound is window_left + 1.
// Explicit mask [Bm, Hm, Sm, Sk] (Bm ∈ {1, B}, Hm ∈ {1, Hq}, Sm ∈ {1, Sq}; a broadcast dimension
// has stride 0, so row i is read at i · mask_strides.seq): boolean as uint8 (nonzero = attend, PyTorch's convention),
// additive in the input dtype (added to the score after the softcap; may hold -inf).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "include/opcts/plugin.h"

struct CUstream_st;

namespace opcts::cuda {

enum class SdpaDType { fp16, bf16, fp32 };
/// The mask, the mask tensor's kind and ALiBi's, spelled with the ABI's constants as sdpa::Mask,
/// sdpa::MaskTensor and sdpa::Alibi are (one vocabulary).
enum class SdpaMask : int32_t {
  none = OPCTS_SDPA_MASK_NONE,
  causal_upper_left = OPCTS_SDPA_CAUSAL_UPPER_LEFT,
  causal_lower_right = OPCTS_SDPA_CAUSAL_LOWER_RIGHT,
};
enum class SdpaMaskTensor : int32_t {
  none = OPCTS_SDPA_ATTN_MASK_NONE,
  boolean = OPCTS_SDPA_ATTN_MASK_BOOL,
  additive = OPCTS_SDPA_ATTN_MASK_ADDITIVE,
};
enum class SdpaAlibi : int32_t {
  none = OPCTS_SDPA_ALIBI_NONE,
  per_head = OPCTS_SDPA_ALIBI_PER_HEAD,
  per_batch_head = OPCTS_SDPA_ALIBI_PER_BATCH_HEAD,
};

/// Which of q, k, v hold fp8 codes (ABI 1.9), spelled with the ABI's constants as sdpa::Fp8 is.
enum class SdpaFp8 : int32_t { none = OPCTS_SDPA_FP8_NONE, qkv = OPCTS_SDPA_FP8_QKV, kv = OPCTS_SDPA_FP8_KV };

/// Deliberate bugs a planted impl asks the kernels for (each must make its cases FAIL).
enum class SdpaPlant {
  none,
  window_off_by_one,  // the left window bound keeps one key too many
  gqa_modulo,         // query head h reads KV head h % Hkv instead of h / (Hq / Hkv)
  drop_rowsum,        // backward: dS = P ⊙ dP, without subtracting rowsum(dO ⊙ O)
  masked_row_nan,     // a row that sees no key divides 0 by 0 (O = NaN) instead of O = 0
  pv_in_dtype,        // forward: the P·V accumulator is rounded to the dtype after every key tile
  rowsum_in_dtype,    // forward: the row sum l is rounded to the dtype after every key tile
  lse_plus_log2,      // forward: logsumexp = m + log(2·l), off by log 2
  // Paged (cuda.flash_decode): page j / page_size of a sequence read from the next physical
  // page; each sequence's whole last page read as keys; the splits combined in the wrong base.
  paged_page_offset,
  paged_tail_read,
  splitkv_combine_log2,
};

struct SdpaStrides {
  int64_t batch, head, seq;  // in elements; the D dimension is contiguous
};

struct SdpaParams {
  SdpaDType dtype;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k;
  int64_t head_dim;    // Dqk: Q and K
  int64_t head_dim_v;  // Dv: V and O
  float scale;         // multiplies q . k before the softcap
  float softcap;       // 0 = off
  SdpaMask mask;
  int64_t window_left, window_right;  // -1 = unbounded
  SdpaMaskTensor mask_kind;
  const void* attn_mask;     // null when mask_kind == none
  SdpaStrides mask_strides;  // 0 where broadcast (batch, head; seq: one row for every query)
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  SdpaStrides q_strides, k_strides, v_strides, o_strides;
  SdpaPlant plant;
  // Varlen (flash forward, and backward on its FMA kernel; null otherwise): sequence b is rows [cu_seqlens_q[b],
  // cu_seqlens_q[b + 1]) of Q and O and rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of K and V
  // (token-major: batch strides 0, `seq` strides step a token), with its own Sq_b and Sk_b for the
  // masks, the window and the alignment; seq_q and seq_k are the largest lengths, logsumexp is
  // [Hq, total_q]. The kernel trusts the offsets (reading them on the device, it cannot refuse
  // them without waiting on the stream), as FlashAttention's varlen kernels do.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t total_q = 0;
  int64_t total_k = 0;  // rows of K and V (keys and padding)
  bool varlen = false;  // the layout is varlen (set without the tensors too: the claims ask)
  // Varlen with padding rows (seqused_k below, ABI 1.3; null: every row of a segment is a key):
  // sequence b's keys are the first seqused_k[b] rows of its segment. The kernels clamp it to the
  // segment (reading it on the device, they cannot refuse it), never read the padding, and the
  // backward writes 0 into the padding's dK and dV rows.
  // Paged (sdpa_flash_decode_forward only; null otherwise): q, O, lse and cu_seqlens_q as varlen;
  // k and v are the caches, [num_pages, page_size, Hkv, D] (NHD) or [num_pages, Hkv, page_size,
  // D] (kv_hnd); sequence b's key j is slot j % page_size of page
  // block_table[b * max_pages_per_seq + j / page_size]; seqused_k[b] keys; seq_k the largest.
  // (seqused_k serves varlen's padding rows too, above.)
  const int32_t* block_table = nullptr;
  const int32_t* seqused_k = nullptr;
  int64_t page_size = 0, num_pages = 0, max_pages_per_seq = 0;
  bool kv_hnd = false;
  // Chunked-local attention (ABI 1.4; 0 = off; sdpa_flash_forward only): row i sees the keys of
  // the chunk [⌊a / C⌋·C, ⌊a / C⌋·C + C) holding its position a = i + Sk − Sq (per sequence),
  // within the causal mask and the window.
  int64_t chunk = 0;
  // Attention sinks (ABI 1.5; sdpa_flash_forward, sdpa_flash_decode_forward and
  // sdpa_flash_backward): sinks[h], fp32 [Hq], a logit per query head in the final scores' units
  // (natural log) that joins each row's softmax denominator and has no value: O_i = Σ_j
  // e^(s_ij)·v_j / (e^(sink_h) + Σ_j e^(s_ij)), logsumexp ln(e^(sink_h) + Σ_j e^(s_ij)); a row
  // that sees no key gets O = 0 and logsumexp = sink_h. has_sinks is set without the tensor too
  // (the supports callbacks ask).
  bool has_sinks = false;
  const float* sinks = nullptr;
  // ALiBi (ABI 1.6; sdpa_flash_forward's general variants, sdpa_flash_backward's FMA kernel and
  // sdpa_flash_decode_forward): alibi_slopes, fp32 [Hq] (per_head) or [B, Hq] (per_batch_head;
  // row b is sequence b's when packed). The score of row i and key j becomes s − slope·|i + Sk −
  // Sq − j| (FlashAttention-2's alibi_slopes; each sequence's own Sq_b and Sk_b when packed), the
  // distance exact and the product rounded once, after the scale and the softcap and before the
  // additive mask. No gradient. alibi is set without the tensor too (the supports callbacks ask).
  SdpaAlibi alibi = SdpaAlibi::none;
  const float* alibi_slopes = nullptr;
  // Block-sparse attention (ABI 1.8; dense layouts; sdpa_flash_forward's general variant and
  // sdpa_flash_backward's FMA kernel; 0 = off, else both > 0): block_mask, one byte per element
  // (nonzero = read), contiguous [B, Hq, ⌈Sq / block_q⌉, ⌈Sk / block_k⌉]: row i of (b, h) sees key j
  // only if block_mask[b][h][i / block_q][j / block_k] != 0, within every other mask. The keys of
  // blocks no query block reads may hold NaN in K and V: the kernels never let them reach a score
  // or a product. block_q and block_k are set without the tensor too (the supports callbacks ask).
  int64_t block_q = 0, block_k = 0;
  const uint8_t* block_mask = nullptr;
  // FP8 attention (ABI 1.9; sdpa_flash_forward only, forward, dense layouts): q (qkv), k and v
  // hold fp8 codes of fp8_format (OPCTS_DL_FLOAT8_E4M3FN or OPCTS_DL_FLOAT8_E5M2), one byte an
  // element at the strides above; dtype is O's (and q's under kv). Descales fp32: q_descale (qkv),
  // k_descale and v_descale, one value, or [B, Hkv] contiguous with descale_per_head (q's too per
  // KV head, FlashAttention 3's). An element's value is code·descale of its (batch, KV head). The
  // flash forward takes the codes into its products and folds the descales in (FlashAttention 3's
  // fp8 forward): s = (q·k)·(scale·q_descale·k_descale) in fp32, P rounded to e4m3fn for P·V under
  // qkv (the dtype under kv), O = (Σ P·v)·v_descale / l. fp8, fp8_format and descale_per_head are
  // set without the tensors too (the supports callbacks ask).
  SdpaFp8 fp8 = SdpaFp8::none;
  uint8_t fp8_format = OPCTS_DL_FLOAT8_E4M3FN;
  bool descale_per_head = false;
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  // An fp8 output (ABI 1.9; cuda.cudnn's fp8 graph only): O holds e4m3fn codes of O·o_scale
  // (round to nearest, saturating), o_scale fp32 [1]. Set without the tensors too.
  bool fp8_out = false;
  const float* o_scale = nullptr;
};

/// Gradients of the forward above for a given dO. `fwd` holds the forward's inputs and its
/// outputs O and logsumexp (as the forward wrote them); dQ has Q's shape, dK K's and dV V's.
/// With GQA, dK and dV sum the contributions of every query head that reads the KV head.
/// Which backward kernel sdpa_flash_backward runs: the tensor-core one where it applies (else the
/// FMA one), the FMA one always, or the tensor-core variant capped at 128 registers (two blocks
/// per SM; D = 96 and 128 — the others have one variant). cuda.flash runs them as its tactics
/// tc, fma and tc2 (sdpa_rows.cpp, sdpa_impls.cpp).
enum class SdpaBwdPath { automatic, fma, tc_two_blocks };

struct SdpaBackwardParams {
  SdpaParams fwd;
  SdpaBwdPath path = SdpaBwdPath::automatic;
  const void* d_o;
  void* d_q;
  void* d_k;
  void* d_v;
  SdpaStrides do_strides, dq_strides, dk_strides, dv_strides;
  // With sinks (fwd.has_sinks): dsinks, fp32 [Hq], every element written: dsink_h =
  // −Σ_(b,i) e^(sink_h − lse_i)·rowsum(dO_i ⊙ O_i) over every batch entry (sequence) and row of
  // query head h.
  float* d_sinks = nullptr;
  // dbias (ABI 1.7; an additive mask, the FMA kernel): d_bias in the dtype, contiguous, shaped as
  // the mask ([Bm, Hm, Sm, Sk] from fwd.mask_strides' zeros), every element written: dS' = P ⊙
  // (dP − D) before the softcap's derivative, summed in fp32 over the axes the mask broadcasts in
  // a fixed order (no atomics). dbias is set without the tensor too (the supports callbacks ask).
  bool dbias = false;
  void* d_bias = nullptr;
};

/// Contiguous BHSD strides for a [B, H, S, D] tensor.
inline SdpaStrides contiguous_bhsd(int64_t heads, int64_t seq, int64_t head_dim) {
  return {heads * seq * head_dim, seq * head_dim, head_dim};
}
/// Strides of a contiguous BSHD buffer [B, S, H, D] addressed in BHSD order.
inline SdpaStrides contiguous_bshd(int64_t heads, int64_t seq, int64_t head_dim) {
  return {seq * heads * head_dim, head_dim, heads * head_dim};
}

/// An argument the kernels (flash, math and the cuDNN adapter) refuse: `argument` names it
/// ("heads_kv", "window_left", "window_right", "softcap"). Thrown before any launch.
struct SdpaArgumentError : std::invalid_argument {
  SdpaArgumentError(std::string arg, const std::string& message)
      : std::invalid_argument(message), argument(std::move(arg)) {}
  std::string argument;
};

/// The argument checks every SDPA launcher runs first (sdpa_args.cu): heads_q a multiple of
/// heads_kv (GQA), windows >= -1 (-1 = unbounded), softcap >= 0. Throws SdpaArgumentError.
void sdpa_check_arguments(const SdpaParams& p);

/// n mask bytes (nonzero = attend) as an additive mask in `dtype` (0 or -inf), on `stream`.
void sdpa_bool_mask_to_additive(const uint8_t* in, void* out, SdpaDType dtype, size_t n, CUstream_st* stream);

/// int32 elements sdpa_cudnn_ragged_meta writes for `batch` sequences.
inline int64_t sdpa_cudnn_ragged_meta_size(int64_t batch) { return 2 * batch + 4 * (batch + 1); }

/// What cuDNN's ragged / paged SDPA graphs read per sequence (sdpa_cudnn.cpp), from p's
/// cu_seqlens_q, cu_seqlens_k (varlen) and seqused_k, written on `stream` into `out`
/// (sdpa_cudnn_ragged_meta_size(B) int32): seq_len_q [B], seq_len_kv [B] (seqused_k clamped to
/// the segment, or to the block table's capacity when paged), then the element offsets of each
/// sequence's first row in Q, K, V and O ([B + 1] each; K and V 0 when paged).
void sdpa_cudnn_ragged_meta(const SdpaParams& p, int32_t* out, CUstream_st* stream);

/// cuDNN's padded Stats [B, Hq, seq_q] (fp32) into p.lse [Hq, total_q], per cu_seqlens_q.
void sdpa_cudnn_stats_to_lse(const SdpaParams& p, const float* padded, CUstream_st* stream);
/// p.lse [Hq, total_q] into padded Stats [B, Hq, seq_q]; rows past a sequence's length are 0.
void sdpa_cudnn_lse_to_stats(const SdpaParams& p, float* padded, CUstream_st* stream);

/// Whether sdpa_flash_forward handles these parameters; when not, `why` says which one.
bool sdpa_flash_supports(const SdpaParams& p, const char** why);

/// Bytes of device scratch sdpa_flash_forward allocates on the stream: under fp8, the 16-bit
/// copies (the dtype) of the fp8 tensors (0 otherwise).
int64_t sdpa_flash_scratch_bytes(const SdpaParams& p);

/// Our tiled flash-attention forward (online softmax, fp32 accumulation on tensor cores),
/// fp16/bf16 only; fp8 codes (SdpaParams::fp8) are first copied into the dtype, exactly, on the
/// stream. Throws std::invalid_argument naming the unsupported parameter and
/// std::runtime_error carrying the CUDA error string when a launch fails.
void sdpa_flash_forward(const SdpaParams& p, CUstream_st* stream);

/// The keys per split of sdpa_flash_decode_forward: a sequence's keys [s·256, (s+1)·256) are
/// split s (the host paged impl's kPagedSplitKeys, so the planted combine shows on the same rows).
constexpr int64_t kDecodeSplitKeys = 256;

/// Whether sdpa_flash_decode_forward handles these parameters (a paged forward, fp16, bf16 or
/// fp32, Dqk <= 576, Dv <= 512, no attn_mask); when not, `why` says which one.
bool sdpa_flash_decode_supports(const SdpaParams& p, const char** why);

/// Bytes of device scratch sdpa_flash_decode_forward allocates on the stream: the splits'
/// partial O, running max and row sum (fp32) when some sequence has more than one split.
int64_t sdpa_flash_decode_scratch_bytes(const SdpaParams& p);

/// Attention over a paged KV cache by split-KV (Flash-Decoding: Dao, Haziza, Massa and Sizov,
/// 2023; FlashAttention's flash_attn_with_kvcache num_splits): one block per query token,
/// query head and split of kDecodeSplitKeys keys, a two-pass softmax inside the split (its max,
/// then e = exp2(s − m) and l = Σ e in fp32, P rounded to the dtype once for P·V in fp32), then a
/// combine of the splits' (O_s unnormalised, m_s, l_s): M = max m_s, L = Σ l_s·2^(m_s − M),
/// O = Σ O_s·2^(m_s − M) / L, lse = (M + log2 L)·ln 2; with sinks (σ = sink_h·log2 e) the
/// combine, or a sequence's one split, adds the sink once: M = max(M, σ), L += 2^(σ − M), the
/// splits' weights at that M. Only keys a row sees are read (the
/// interval of its causal mask and window, per sequence). Reads cu_seqlens_q, block_table and
/// seqused_k on the device and trusts their order, as FlashAttention does; a page index outside
/// the cache, a length past the table or a token no sequence holds is never dereferenced: that
/// row's O and lse are NaN. Throws like sdpa_flash_forward.
void sdpa_flash_decode_forward(const SdpaParams& p, CUstream_st* stream);

/// Whether sdpa_flash_backward handles these parameters; when not, `why` says which one.
bool sdpa_flash_backward_supports(const SdpaBackwardParams& p, const char** why);

/// Our flash-attention backward (FlashAttention-2, Dao 2023, Algorithm 2: recompute P from
/// logsumexp, D_i = rowsum(dO ⊙ O), dS = P ⊙ (dP − D)). With sinks the forward's logsumexp
/// holds the sink, so P, dQ, dK and dV follow from it unchanged, and dsinks is summed per head in
/// a fixed order (no atomics: reproducible); dbias likewise (sdpa_flash_dbias_scratch_bytes of
/// fp32 partials, then a fixed-order sum). Throws like sdpa_flash_forward.
void sdpa_flash_backward(const SdpaBackwardParams& p, CUstream_st* stream);

/// Bytes of device scratch sdpa_flash_backward allocates for dbias (0 without it): fp32 partials
/// per (batch entry, query head or, where the mask broadcasts over heads, KV head, mask row, key).
int64_t sdpa_flash_dbias_scratch_bytes(const SdpaBackwardParams& p);

/// Whether two runs of sdpa_flash_backward on these parameters write the same bytes. dK and
/// dV are summed inside one block, dsinks per head and dbias per element in a fixed order; dQ is added with fp32
/// atomics into a zeroed workspace by every block of keys (64 keys on the tensor-core kernel, 32
/// on the FMA kernel) holding some key of the row, in the order the blocks run. Addition is
/// commutative, so an element that gets at most two nonzero additions is reproducible (0 + a + b
/// = 0 + b + a); from three on, another order may round differently. True when every row's keys
/// (causal ∩ window) span at most two such blocks.
bool sdpa_flash_backward_deterministic(const SdpaBackwardParams& p);
/// Whether sdpa_flash_backward runs p on the tensor-core kernel: a path other than fma, fp16/bf16,
/// Dqk = Dv ∈ {32, 64, 96, 128}, dense, no softcap, ALiBi, chunk, block mask or mask tensor (the
/// top of sdpa_flash_backward.cu). Host code that reads the parameters only, never a pointer.
bool sdpa_flash_backward_takes_tc(const SdpaBackwardParams& p);

/// PyTorch's math backend as it runs by default: fp16/bf16 inputs upcast to fp32, then
/// S = scale·Q·Kᵀ and O = P·V as cuBLAS fp32 strided batched GEMMs (no TF32), softmax with
/// the masks in a CUDA kernel in fp32, O rounded to the dtype once. Scratch memory (fp32
/// copies of the inputs, S) is allocated inside. Throws like sdpa_flash_forward, and
/// std::runtime_error on a cuBLAS status other than success, naming the status.
void sdpa_math_forward(const SdpaParams& p, CUstream_st* stream);

/// Creates the current device's cuBLAS handle for the math backend now (it is made on first
/// use otherwise): cublasCreate may wait for the device, which a call on a stream its caller
/// holds must never do.
void sdpa_math_prepare();

/// The math backend's backward, in fp32 like its forward (inputs, O and dO upcast, each
/// gradient rounded once): P recomputed with cuBLAS and the softmax kernel, then
/// dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)), dQ = scale·dS·K,
/// dK = scale·dSᵀ·Q (times the softcap derivative 1 − tanh² when softcap > 0), GQA heads
/// summed into dK and dV. Throws like sdpa_math_forward.
void sdpa_math_backward(const SdpaBackwardParams& p, CUstream_st* stream);

}  // namespace opcts::cuda
