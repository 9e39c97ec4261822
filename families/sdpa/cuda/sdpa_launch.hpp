// The CUDA sdpa rows: the ABI's opcts_sdpa_params and tensors as the kernels' SdpaParams, and the
// rows' callbacks (families/sdpa/cuda/sdpa_impls.cpp, sdpa_cudnn_impls.cpp; CUDA builds only).
#pragma once

#include <cstring>

#include "core/abi_enum.hpp"
#include "families/sdpa/cuda/sdpa_kernels.hpp"
#include "families/sdpa/sdpa.hpp"
#include "include/opcts/plugin.h"

namespace opcts::cuda {

/// flash_decode: the paged layout's split-KV kernel (sdpa_flash_decode.cu).
enum class SdpaKernel { flash, math, cudnn, flash_decode };

/// What an sdpa row runs (its impl_data): the kernel and a planted bug. The flash backward's
/// kernel is cuda.flash's tactic (sdpa_impls.cpp: sdpa_bwd_path_of).
struct SdpaRow {
  SdpaKernel kernel;
  SdpaPlant plant = SdpaPlant::none;
};

/// The tensor named `name` among `n` descriptors, or nullptr.
inline const opcts_tensor* sdpa_tensor(const opcts_tensor* t, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i)
    if (std::strcmp(t[i].name, name) == 0) return &t[i];
  return nullptr;
}
inline void* sdpa_tensor_data(const opcts_tensor* t, int32_t n, const char* name) {
  const opcts_tensor* d = sdpa_tensor(t, n, name);
  return d ? d->data : nullptr;
}

/// Whether the struct asks for the backward; throws AbiValueError naming "direction" for a value
/// the ABI does not name.
inline bool sdpa_backward(const opcts_sdpa_params& c) {
  return from_abi<sdpa::Direction>(c.direction, "direction") == sdpa::Direction::backward;
}

/// The kernels' parameters of an ABI call: sizes, scale, masks, window, softcap, the strides of
/// the layout (BHSD, BSHD, or THD for varlen: token-major, batch strides 0, with the cu_seqlens
/// tensors and Tq from q's rows; paged: q and O as THD, k and v the caches, the block table,
/// seqused_k and the page geometry), the chunk, the sinks, ALiBi, block masks and fp8, and — when
/// `tensors` are given — the tensors' pointers (the descales' with fp8).
inline SdpaParams sdpa_params_of(const opcts_sdpa_params& c, const opcts_tensor* tensors = nullptr, int32_t n = 0,
                                 SdpaPlant plant = SdpaPlant::none) {
  SdpaParams k{};
  k.dtype = c.dtype.code == OPCTS_DL_BFLOAT ? SdpaDType::bf16 : c.dtype.bits == 16 ? SdpaDType::fp16 : SdpaDType::fp32;
  k.batch = c.batch;
  k.heads_q = c.heads_q;
  k.heads_kv = c.heads_kv;
  k.seq_q = c.seq_q;
  k.seq_k = c.seq_k;
  k.head_dim = c.head_dim;
  k.head_dim_v = c.head_dim_v;
  k.scale = static_cast<float>(c.scale);
  k.softcap = static_cast<float>(c.softcap);
  k.mask = as_kernel<SdpaMask>(from_abi<sdpa::Mask>(c.mask, "mask"));
  k.window_left = c.window_left;
  k.window_right = c.window_right;
  k.mask_kind = as_kernel<SdpaMaskTensor>(from_abi<sdpa::MaskTensor>(c.attn_mask, "attn_mask"));
  const sdpa::Layout layout = from_abi<sdpa::Layout>(c.layout, "layout");
  const bool bshd = layout == sdpa::Layout::bshd, paged = layout == sdpa::Layout::paged;
  const bool thd = layout == sdpa::Layout::varlen || paged;
  sdpa_backward(c);  // checks the direction too
  auto strides = [&](int64_t heads, int64_t seq, int64_t d) {
    if (thd) return SdpaStrides{0, d, heads * d};
    return bshd ? contiguous_bshd(heads, seq, d) : contiguous_bhsd(heads, seq, d);
  };
  k.q_strides = strides(c.heads_q, c.seq_q, c.head_dim);
  k.k_strides = strides(c.heads_kv, c.seq_k, c.head_dim);
  k.v_strides = strides(c.heads_kv, c.seq_k, c.head_dim_v);
  k.o_strides = strides(c.heads_q, c.seq_q, c.head_dim_v);
  // attn_mask [B or 1, Hq or 1, Sq or 1, Sk], contiguous; one row (ABI 1.7) has seq stride 0.
  const bool one_row = c.mask_query_broadcast != 0;
  const int64_t mhs = (one_row ? 1 : c.seq_q) * c.seq_k;
  k.mask_strides = k.mask_kind == SdpaMaskTensor::none
                       ? SdpaStrides{0, 0, 0}
                       : SdpaStrides{c.mask_per_batch ? (c.mask_per_head ? c.heads_q : 1) * mhs : 0,
                                     c.mask_per_head ? mhs : 0, one_row ? 0 : c.seq_k};
  k.plant = plant;
  k.varlen = layout == sdpa::Layout::varlen;
  k.chunk = c.attention_chunk;
  k.has_sinks = c.sinks != 0;
  k.alibi = as_kernel<SdpaAlibi>(from_abi<sdpa::Alibi>(c.alibi, "alibi"));
  k.block_q = c.block_mask_q;
  k.block_k = c.block_mask_k;
  k.fp8 = as_kernel<SdpaFp8>(from_abi<sdpa::Fp8>(c.fp8, "fp8"));
  if (k.fp8 != SdpaFp8::none) {
    k.fp8_format = c.fp8_format.code;
    k.descale_per_head = from_abi<sdpa::Descale>(c.descale, "descale") == sdpa::Descale::per_head;
  }
  k.fp8_out = c.fp8_out != 0;
  if (paged) {
    k.page_size = c.page_size;
    k.num_pages = c.num_pages;
    k.max_pages_per_seq = c.max_pages_per_seq;
    k.kv_hnd = from_abi<sdpa::KvLayout>(c.kv_layout, "kv_layout") == sdpa::KvLayout::hnd;
  }
  if (tensors) {
    k.q = sdpa_tensor_data(tensors, n, "q");
    k.k = sdpa_tensor_data(tensors, n, paged ? "k_cache" : "k");
    k.v = sdpa_tensor_data(tensors, n, paged ? "v_cache" : "v");
    k.o = sdpa_tensor_data(tensors, n, "O");
    k.lse = static_cast<float*>(sdpa_tensor_data(tensors, n, "lse"));
    k.attn_mask = sdpa_tensor_data(tensors, n, "attn_mask");
    if (k.has_sinks) k.sinks = static_cast<const float*>(sdpa_tensor_data(tensors, n, "sinks"));
    if (k.alibi != SdpaAlibi::none)
      k.alibi_slopes = static_cast<const float*>(sdpa_tensor_data(tensors, n, "alibi_slopes"));
    if (k.block_q > 0) k.block_mask = static_cast<const uint8_t*>(sdpa_tensor_data(tensors, n, "block_mask"));
    if (k.fp8 != SdpaFp8::none) {
      if (k.fp8 == SdpaFp8::qkv) k.q_descale = static_cast<const float*>(sdpa_tensor_data(tensors, n, "q_descale"));
      k.k_descale = static_cast<const float*>(sdpa_tensor_data(tensors, n, "k_descale"));
      k.v_descale = static_cast<const float*>(sdpa_tensor_data(tensors, n, "v_descale"));
    }
    if (k.fp8_out) k.o_scale = static_cast<const float*>(sdpa_tensor_data(tensors, n, "o_scale"));
    if (thd) {
      k.cu_seqlens_q = static_cast<const int32_t*>(sdpa_tensor_data(tensors, n, "cu_seqlens_q"));
      k.cu_seqlens_k = static_cast<const int32_t*>(sdpa_tensor_data(tensors, n, "cu_seqlens_k"));
      k.block_table = static_cast<const int32_t*>(sdpa_tensor_data(tensors, n, "block_table"));
      k.seqused_k = static_cast<const int32_t*>(sdpa_tensor_data(tensors, n, "seqused_k"));
      const opcts_tensor* q = sdpa_tensor(tensors, n, "q");
      k.total_q = q && q->ndim > 0 ? q->shape[0] : 0;
      const opcts_tensor* kt = sdpa_tensor(tensors, n, "k");
      k.total_k = kt && kt->ndim > 0 ? kt->shape[0] : 0;
    }
  }
  return k;
}

/// The backward's parameters: the forward's, with dO, dQ, dK, dV in the layouts of O, Q, K, V
/// (and dsinks with sinks, dbias with dbias).
inline SdpaBackwardParams sdpa_backward_params_of(const opcts_sdpa_params& c, const opcts_tensor* tensors = nullptr,
                                                  int32_t n = 0, SdpaPlant plant = SdpaPlant::none,
                                                  SdpaBwdPath path = SdpaBwdPath::automatic) {
  SdpaBackwardParams b{};
  b.fwd = sdpa_params_of(c, tensors, n, plant);
  b.path = path;
  b.do_strides = b.fwd.o_strides;
  b.dq_strides = b.fwd.q_strides;
  b.dk_strides = b.fwd.k_strides;
  b.dv_strides = b.fwd.v_strides;
  b.dbias = c.dbias != 0;
  if (tensors) {
    b.d_o = sdpa_tensor_data(tensors, n, "dO");
    b.d_q = sdpa_tensor_data(tensors, n, "dQ");
    b.d_k = sdpa_tensor_data(tensors, n, "dK");
    b.d_v = sdpa_tensor_data(tensors, n, "dV");
    if (b.fwd.has_sinks) b.d_sinks = static_cast<float*>(sdpa_tensor_data(tensors, n, "dsinks"));
    if (b.dbias) b.d_bias = sdpa_tensor_data(tensors, n, "dbias");
  }
  return b;
}

int32_t sdpa_kernel_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason, size_t size);
opcts_status sdpa_kernel_run(const void* impl, const opcts_run_args* args, opcts_report* report);
void sdpa_kernel_prepare(const void* impl, const void* params,
                         const char* tactic);  // rows.hpp PrepareFn: cuda.math's cuBLAS handle
/// The kernel rows' determinism claim for a case's tactic (rows.hpp Row::deterministic_tactic;
/// their opcts_impl_desc.deterministic stays null, so this is the one claim): the flash backward's
/// kernel named by cuda.flash's tactic (tc, tc2, fma; null: the one it picks) decides the key
/// block over which dQ's atomics land (sdpa_flash_backward_deterministic).
int32_t sdpa_kernel_deterministic_tactic(const void* impl, const void* params, const char* tactic);
/// The row's invariance contracts (opcts_impl_desc.invariance): cuda.flash's forward on dense
/// layouts is invariant over the batch's size and an entry's position (one thread block per
/// kBlockM rows of one (batch entry, head), the variant chosen by the problem's features, never
/// by its batch); every other row declares none.
uint32_t sdpa_kernel_invariance(const void* impl, const void* params);
int32_t sdpa_cudnn_row_supports(const void* impl, const void* params, const opcts_arch* arch, char* reason,
                                size_t size);
opcts_status sdpa_cudnn_row_run(const void* impl, const opcts_run_args* args, opcts_report* report);
/// 0 for a backward problem (cuDNN's dQ is summed with atomics), 1 for a forward one.
int32_t sdpa_cudnn_row_deterministic(const void* impl, const void* params);
void sdpa_cudnn_row_prepare(const void* impl, const void* params,
                            const char* tactic);  // rows.hpp PrepareFn: the cuDNN plans

}  // namespace opcts::cuda
