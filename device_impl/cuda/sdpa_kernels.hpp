// Launch interface of opcts's own SDPA forward kernels (flash and math); no harness types.
//
// Layout: Q [B, Hq, Sq, D], K and V [B, Hkv, Sk, D], O [B, Hq, Sq, D], each with element
// strides for the batch, head and sequence dimensions and D contiguous (stride 1).
// logsumexp [B, Hq, Sq] fp32, contiguous, natural log of sum_j exp(scale * q_i . k_j) over
// the keys row i may see; a row that sees no key gets O = 0 and logsumexp = -inf.
// GQA: query head h reads KV head h / (Hq / Hkv) (PyTorch enable_gqa, FlashAttention-2).
// Masks (spec/numerics.md §5): causal_upper_left keeps j <= i (PyTorch is_causal);
// causal_lower_right keeps j <= i + Sk - Sq (FlashAttention-2 causal, cuDNN BOTTOM_RIGHT).
#pragma once

#include <cstdint>

struct CUstream_st;

namespace opcts::cuda {

enum class SdpaDType { fp16, bf16, fp32 };
enum class SdpaMask { none, causal_upper_left, causal_lower_right };

struct SdpaStrides {
  int64_t batch, head, seq;  // in elements; the D dimension is contiguous
};

struct SdpaParams {
  SdpaDType dtype;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
  float scale;  // multiplies q . k before the softmax
  SdpaMask mask;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  SdpaStrides q_strides, k_strides, v_strides, o_strides;
};

/// Contiguous BHSD strides for a [B, H, S, D] tensor.
inline SdpaStrides contiguous_bhsd(int64_t heads, int64_t seq, int64_t head_dim) {
  return {heads * seq * head_dim, seq * head_dim, head_dim};
}

/// Whether sdpa_flash_forward handles these parameters; when not, `why` says which one.
bool sdpa_flash_supports(const SdpaParams& p, const char** why);

/// Our tiled flash-attention forward (online softmax, fp32 accumulation on tensor cores),
/// fp16/bf16 only. Throws std::invalid_argument naming the unsupported parameter and
/// std::runtime_error carrying the CUDA error string when a launch fails.
void sdpa_flash_forward(const SdpaParams& p, CUstream_st* stream);

/// PyTorch-math-backend-style forward: S = scale·Q·Kᵀ and O = P·V as cuBLAS strided
/// batched GEMMs (S and P stored in the input dtype, fp32 accumulation), softmax with the
/// mask in a CUDA kernel in fp32. Needs contiguous BHSD tensors. Scratch memory for S is
/// allocated inside. Throws like sdpa_flash_forward, and std::runtime_error on a cuBLAS
/// status other than success, naming the status.
void sdpa_math_forward(const SdpaParams& p, CUstream_st* stream);

}  // namespace opcts::cuda
