// The per-sequence tensors cuDNN's ragged (varlen) and paged SDPA graphs read, and the moves of
// logsumexp between cuDNN's padded Stats and the ABI's [Hq, total_q] layout (sdpa_kernels.hpp),
// computed on the stream from the ABI's cu_seqlens and seqused_k: the adapter never waits on the
// device to read them.
#include "gpu/portable/gpu.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "families/sdpa/cuda/sdpa_kernels.hpp"

namespace opcts::cuda {

namespace {

struct MetaArgs {
  const int32_t *cu_q, *cu_k, *seqused_k;
  int32_t* out;
  int64_t batch, heads_q, heads_kv, head_dim, head_dim_v;
  int64_t kv_capacity;  // paged: max_pages_per_seq · page_size (0: varlen, the segment bounds)
};

__global__ void ragged_meta(MetaArgs a) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (b >= a.batch) return;
  const int64_t B = a.batch;
  int32_t* seq_len_q = a.out;
  int32_t* seq_len_kv = a.out + B;
  int32_t* off_q = a.out + 2 * B;
  int32_t* off_k = off_q + (B + 1);
  int32_t* off_v = off_k + (B + 1);
  int32_t* off_o = off_v + (B + 1);
  seq_len_q[b] = a.cu_q[b + 1] - a.cu_q[b];
  // Keys: the segment of cu_seqlens_k (varlen) or the table's capacity (paged), cut to
  // seqused_k where given, as cuda.flash and cuda.flash_decode clamp it: a length past the
  // bound must not make cuDNN read a neighbour's rows or past the block table.
  const int32_t bound = a.kv_capacity ? static_cast<int32_t>(a.kv_capacity) : a.cu_k[b + 1] - a.cu_k[b];
  int32_t kv = bound;
  if (a.seqused_k) kv = min(max(a.seqused_k[b], 0), bound);
  seq_len_kv[b] = kv;
  // Element offsets of each sequence's first row (THD: a token is heads · D elements).
  for (int64_t at = b; at <= b + (b == B - 1 ? 1 : 0); ++at) {
    off_q[at] = static_cast<int32_t>(a.cu_q[at] * a.heads_q * a.head_dim);
    off_o[at] = static_cast<int32_t>(a.cu_q[at] * a.heads_q * a.head_dim_v);
    off_k[at] = a.cu_k ? static_cast<int32_t>(a.cu_k[at] * a.heads_kv * a.head_dim) : 0;
    off_v[at] = a.cu_k ? static_cast<int32_t>(a.cu_k[at] * a.heads_kv * a.head_dim_v) : 0;
  }
}

// padded [B, Hq, Sq] ↔ lse [Hq, total_q]; rows past a sequence's length are 0 in `padded`.
__global__ void move_stats(const int32_t* cu_q, float* padded, float* lse, int64_t batch, int64_t heads, int64_t seq_q,
                           int64_t total_q, bool to_lse) {
  const int64_t n = batch * heads * seq_q;
  for (int64_t x = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = x % seq_q, h = x / seq_q % heads, b = x / (seq_q * heads);
    const int64_t len = cu_q[b + 1] - cu_q[b];
    if (i >= len) {
      if (!to_lse) padded[x] = 0.0f;
      continue;
    }
    float& l = lse[h * total_q + cu_q[b] + i];
    if (to_lse) l = padded[x];
    else padded[x] = l;
  }
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535)); }

}  // namespace

void sdpa_cudnn_ragged_meta(const SdpaParams& p, int32_t* out, CUstream_st* stream) {
  if (p.batch == 0) return;
  const bool paged = p.block_table != nullptr;
  MetaArgs a{p.cu_seqlens_q, paged ? nullptr : p.cu_seqlens_k,
             p.seqused_k,    out,
             p.batch,        p.heads_q,
             p.heads_kv,     p.head_dim,
             p.head_dim_v,   paged ? p.max_pages_per_seq * p.page_size : 0};
  ragged_meta<<<blocks_for(p.batch), 256, 0, stream>>>(a);
  check_launch("sdpa_cudnn_ragged_meta");
}

void sdpa_cudnn_stats_to_lse(const SdpaParams& p, const float* padded, CUstream_st* stream) {
  const int64_t n = p.batch * p.heads_q * p.seq_q;
  if (n == 0) return;
  move_stats<<<blocks_for(n), 256, 0, stream>>>(p.cu_seqlens_q, const_cast<float*>(padded), p.lse, p.batch, p.heads_q,
                                                p.seq_q, p.total_q, true);
  check_launch("sdpa_cudnn_stats_to_lse");
}

void sdpa_cudnn_lse_to_stats(const SdpaParams& p, float* padded, CUstream_st* stream) {
  const int64_t n = p.batch * p.heads_q * p.seq_q;
  if (n == 0) return;
  move_stats<<<blocks_for(n), 256, 0, stream>>>(p.cu_seqlens_q, padded, p.lse, p.batch, p.heads_q, p.seq_q, p.total_q,
                                                false);
  check_launch("sdpa_cudnn_lse_to_stats");
}

}  // namespace opcts::cuda
