// cuda.flash_decode: SDPA over a paged KV cache by split-KV (Flash-Decoding: Dao, Haziza, Massa
// and Sizov, "Flash-Decoding for long-context inference", 2023; FlashAttention's
// flash_attn_with_kvcache with num_splits, FlashInfer's split-k decode). Decode batches have one
// to a few query tokens per sequence and thousands of keys, so the parallelism is in the keys: each
// sequence's keys are cut into splits of kDecodeSplitKeys, one thread block per (query token,
// query head, split), and a second kernel combines the splits of sequences that have several.
//
// Arithmetic (the bounds' model, cases/tolerances.yaml "cuda.flash_decode*"): scores s = q·k in
// fp32 FMAs (lanes over D, a shuffle tree), times the scale, the softcap, minus ALiBi's
// slope·|i + Sk_b − Sq_b − j| (SdpaParams::alibi; sequence b's row of the slopes when per batch
// entry), times log2(e); per split two passes — its max m_s, then e_j = 2^(s_j − m_s)
// (ex2.approx), l_s = Σ e_j in fp32 and P_j = e_j rounded to the dtype once for P·V, summed in
// fp32 per output element in key order.
// A sequence of one split writes O = acc / l and lse = (m + log2 l)·ln 2 there. Otherwise the
// combine takes the partials (acc_s unnormalised, m_s, l_s): M = max m_s, w_s = 2^(m_s − M),
// L = Σ w_s·l_s, O = Σ w_s·acc_s / L, lse = (M + log2 L)·ln 2 — each split's sum is rescaled once,
// by a weight whose shares sum to at most 1 (lse's `split_kv` structure, families/sdpa/lse_floor.hpp).
// Attention sinks (SdpaParams::sinks) enter once per row, where the row's sum is final: the
// combine, or a sequence's one split, raises M to max(M, σ) with σ = sink·log2(e) and adds
// 2^(σ − M) to L.
//
// Only the keys a row sees are read: its causal mask and window reduced to one interval per
// sequence (flash::at_offset with Sk_b − Sq_b), so NaN in the slots past a sequence's last key, in
// pages no sequence owns or in keys left of a window never reaches an output. The index inputs are
// read on the device and trusted for their order, as FlashAttention's kernels do (a run must not
// wait on its stream to check them on the host); what would be dereferenced out of bounds — a page
// index outside the cache, seqused_k past the block table's row, a token that cu_seqlens_q gives to
// no sequence — is not read, and that row's O and lse are NaN.
//
// Planted bugs (SdpaPlant, the cuda.flash_decode_* impls): paged_page_offset reads page
// block_table[..] + 1; paged_tail_read takes ceil(Sk_b / page_size)·page_size keys;
// splitkv_combine_log2 combines with e^x and ln where the maxima are in the log2 domain.
#include "sdpa_flash_common.cuh"
#include "sdpa_kernels.hpp"

#include "gpu/cuda/stream_scratch.cuh"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace opcts::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / gpu::kWarp;
constexpr int64_t kMaxDqk = 576;  // DeepSeek's MLA absorbed decode: 512 latent + 64 rope
constexpr int64_t kMaxDv = 512;
constexpr int kDvPerThread = static_cast<int>(kMaxDv / kThreads);
constexpr int64_t kSplit = kDecodeSplitKeys;
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;

struct DecodeArgs {
  const void* q;
  void* o;
  float* lse;
  const void* k_cache;
  const void* v_cache;
  const int32_t* cu_q;
  const int32_t* table;
  const int32_t* used;
  int64_t batch, total_q, heads_q, group, heads_kv, dqk, dv, page_size, num_pages, width, splits;
  bool hnd;
  float scale, softcap;
  flash::RelInterval rel;
  SdpaPlant plant;
  float* part_o;  // [splits, Tq, Hq, Dv]: each split's P·V, not divided by its row sum
  float* part_m;  // [splits, Tq, Hq]: its max (log2 domain; -inf when it sees no key)
  float* part_l;  // [splits, Tq, Hq]: its row sum
  // Attention sinks [Hq] (null = off).
  const float* sinks;
  // ALiBi slopes (null = off): entry b·alibi_bs + h for sequence b and query head h.
  const float* alibi;
  int64_t alibi_bs;
};

// Element offset of (page, slot, KV head) in a cache of `dim` per head, int64 throughout (a cache
// may pass 2^31 elements).
__device__ __forceinline__ int64_t cache_row(const DecodeArgs& a, int64_t page, int64_t slot, int64_t hk, int64_t dim) {
  return a.hnd ? ((page * a.heads_kv + hk) * a.page_size + slot) * dim
               : ((page * a.page_size + slot) * a.heads_kv + hk) * dim;
}

// Query token t's place: its sequence b, its row i there, the sequence's lengths, the keys the row
// sees [k0, k1) and the sequence's number of splits. valid is false where the offsets or the
// length cannot hold the token (the row is then written NaN by split 0).
struct RowSeq {
  bool valid;
  int64_t b, i, lq, lk, k0, k1, splits;
};

__device__ RowSeq locate(const DecodeArgs& a, int64_t t) {
  RowSeq r{false, 0, 0, 0, 0, 0, 0, 1};
  if (a.cu_q[0] != 0 || a.cu_q[a.batch] != a.total_q) return r;
  int64_t lo = 0, hi = a.batch - 1;  // the last b with cu_q[b] <= t (empty sequences before it skipped)
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (a.cu_q[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  const int64_t q0 = a.cu_q[lo], q1 = a.cu_q[lo + 1];
  if (!(q0 <= t && t < q1)) return r;
  int64_t lk = a.used[lo];
  if (lk < 0 || lk > a.width * a.page_size) return r;
  if (a.plant == SdpaPlant::paged_tail_read) lk = (lk + a.page_size - 1) / a.page_size * a.page_size;
  const int64_t splits = lk > kSplit ? (lk + kSplit - 1) / kSplit : 1;
  if (splits > a.splits) return r;  // seq_k below a sequence's length: the grid lacks its splits
  r.valid = true;
  r.b = lo;
  r.i = t - q0;
  r.lq = q1 - q0;
  r.lk = lk;
  r.splits = splits;
  flash::keys_of_rows(flash::at_offset(a.rel, lk - r.lq), r.i, r.i, lk, &r.k0, &r.k1);
  return r;
}

struct MaxOp {
  __device__ float operator()(float x, float y) const { return fmaxf(x, y); }
};
struct SumOp {
  __device__ float operator()(float x, float y) const { return x + y; }
};

// v reduced over the block by op (a shuffle tree per warp, then the warps in order), in every thread.
template <class Op>
__device__ float block_reduce(float v, float* red, Op op) {
  for (int off = gpu::kWarp / 2; off > 0; off >>= 1) v = op(v, gpu::warp_xor(v, off));
  __syncthreads();  // red's previous use is over
  if (threadIdx.x % gpu::kWarp == 0) red[threadIdx.x / gpu::kWarp] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, red[w]);
  return v;
}

template <typename T>
__device__ __forceinline__ float rounded(float x) {
  return static_cast<float>(T(x));
}

__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

template <typename T>
__global__ void __launch_bounds__(kThreads) decode_split_kernel(const DecodeArgs a) {
  __shared__ float qs[kMaxDqk];
  __shared__ float ps[kSplit];      // scores (log2 domain), then P rounded to the dtype
  __shared__ int64_t vrow[kSplit];  // each key's V row offset
  __shared__ float red[kWarps];
  __shared__ int bad;
  const int64_t t = blockIdx.x, h = blockIdx.y, s = blockIdx.z;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % gpu::kWarp, warp = tid / gpu::kWarp;
  const RowSeq r = locate(a, t);
  if (s >= r.splits) return;
  const int64_t j0 = r.k0 > s * kSplit ? r.k0 : s * kSplit;
  const int64_t j1 = r.k1 < (s + 1) * kSplit ? r.k1 : (s + 1) * kSplit;
  const int64_t n = r.valid && j1 > j0 ? j1 - j0 : 0;
  const int64_t hk = h / a.group;
  if (tid == 0) bad = r.valid ? 0 : 1;
  const T* q = static_cast<const T*>(a.q) + (t * a.heads_q + h) * a.dqk;
  for (int64_t d = tid; d < a.dqk; d += kThreads) qs[d] = n > 0 ? static_cast<float>(q[d]) : 0.f;
  __syncthreads();

  // Scores: warp w takes keys j0 + w, j0 + w + kWarps, ...; its lanes split D.
  const T* kc = static_cast<const T*>(a.k_cache);
  const float slope = a.alibi ? a.alibi[r.b * a.alibi_bs + h] : 0.f;
  for (int64_t jj = warp; jj < n; jj += kWarps) {
    const int64_t j = j0 + jj, slot = j % a.page_size;
    int64_t page = a.table[r.b * a.width + j / a.page_size];
    if (a.plant == SdpaPlant::paged_page_offset) page = (page + 1) % a.num_pages;
    const bool ok = page >= 0 && page < a.num_pages;  // the same in every lane
    float dot = 0.f;
    if (ok) {
      const T* kr = kc + cache_row(a, page, slot, hk, a.dqk);
      for (int64_t d = lane; d < a.dqk; d += gpu::kWarp) dot = fmaf(qs[d], static_cast<float>(kr[d]), dot);
    }
    for (int off = gpu::kWarp / 2; off > 0; off >>= 1) dot += gpu::warp_xor(dot, off);
    if (lane == 0) {
      if (!ok) bad = 1;
      float x = dot * a.scale;
      if (a.softcap > 0.f) x = a.softcap * tanhf(x / a.softcap);
      if (a.alibi) x -= flash::alibi_bias(slope, r.i + r.lk - r.lq - j);  // the row's lower-right distance
      ps[jj] = x * kLog2e;
      vrow[jj] = ok ? cache_row(a, page, slot, hk, a.dv) : 0;
    }
  }
  __syncthreads();

  // Two passes over the split: its max, then the exponentials, their sum and P in the dtype.
  float m = -INFINITY;
  for (int64_t jj = tid; jj < n; jj += kThreads) m = fmaxf(m, ps[jj]);
  m = block_reduce(m, red, MaxOp());
  float l = 0.f;
  for (int64_t jj = tid; jj < n; jj += kThreads) {
    const float e = flash::ptx::fast_exp2(ps[jj] - m);
    l += e;
    ps[jj] = rounded<T>(e);
  }
  l = block_reduce(l, red, SumOp());  // its barriers also publish ps
  const bool poisoned = bad != 0;

  float acc[kDvPerThread];
#pragma unroll
  for (int c = 0; c < kDvPerThread; ++c) acc[c] = 0.f;
  const T* vc = static_cast<const T*>(a.v_cache);
  if (!poisoned)
    for (int64_t jj = 0; jj < n; ++jj) {
      const float p = ps[jj];
      const T* vr = vc + vrow[jj];
#pragma unroll
      for (int c = 0; c < kDvPerThread; ++c) {
        const int64_t d = tid + c * kThreads;
        if (d < a.dv) acc[c] = fmaf(p, static_cast<float>(vr[d]), acc[c]);
      }
    }

  const int64_t row = t * a.heads_q + h;
  if (r.splits == 1) {  // the whole row: normalise here, no combine
    // The sink's term, at the larger max (a row with no key: O = 0, lse = the sink).
    if (a.sinks) {
      const float sink = a.sinks[h] * kLog2e, big_m = fmaxf(m, sink);
      const float base = big_m == -INFINITY ? 0.f : big_m;  // a -inf sink on a row with no key
      const float w = flash::ptx::fast_exp2(m - base);
      l = l * w + flash::ptx::fast_exp2(sink - base);
      m = big_m;
#pragma unroll
      for (int c = 0; c < kDvPerThread; ++c) acc[c] *= w;
    }
    T* o = static_cast<T*>(a.o) + row * a.dv;
#pragma unroll
    for (int c = 0; c < kDvPerThread; ++c) {
      const int64_t d = tid + c * kThreads;
      if (d < a.dv) o[d] = T(poisoned ? quiet_nan() : l > 0.f ? acc[c] / l : 0.f);
    }
    if (tid == 0) a.lse[h * a.total_q + t] = poisoned ? quiet_nan() : l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY;
    return;
  }
  const int64_t at = (s * a.total_q + t) * a.heads_q + h;
  float* po = a.part_o + at * a.dv;
#pragma unroll
  for (int c = 0; c < kDvPerThread; ++c) {
    const int64_t d = tid + c * kThreads;
    if (d < a.dv) po[d] = poisoned ? quiet_nan() : acc[c];
  }
  if (tid == 0) {
    a.part_m[at] = poisoned ? quiet_nan() : m;  // -inf when the split holds none of the row's keys
    a.part_l[at] = poisoned ? quiet_nan() : l;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) decode_combine_kernel(const DecodeArgs a) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const RowSeq r = locate(a, t);
  if (r.splits == 1) return;  // split 0 wrote the row
  const bool log2_slip = a.plant == SdpaPlant::splitkv_combine_log2;
  const int64_t stride = a.total_q * a.heads_q, row = t * a.heads_q + h;
  float big_m = -INFINITY;
  bool nan = false;
  for (int64_t s = 0; s < r.splits; ++s) {
    const float ms = a.part_m[s * stride + row];
    nan = nan || ms != ms;
    big_m = fmaxf(big_m, ms);
  }
  // A sink joins the row's max and, below, its sum (a row with no key: O = 0, lse = the sink).
  const float sink = a.sinks ? a.sinks[h] * kLog2e : -INFINITY;
  big_m = fmaxf(big_m, sink);
  T* o = static_cast<T*>(a.o) + row * a.dv;
  float* lse = a.lse + h * a.total_q + t;
  if (nan || big_m == -INFINITY) {  // a poisoned split, or no key in any: O = 0, lse = -inf
    for (int64_t d = threadIdx.x; d < a.dv; d += kThreads) o[d] = T(nan ? quiet_nan() : 0.f);
    if (threadIdx.x == 0) *lse = nan ? quiet_nan() : -INFINITY;
    return;
  }
  float big_l = a.sinks ? flash::ptx::fast_exp2(sink - big_m) : 0.f;
  for (int64_t s = 0; s < r.splits; ++s) {
    const float x = a.part_m[s * stride + row] - big_m;
    big_l += (log2_slip ? expf(x) : flash::ptx::fast_exp2(x)) * a.part_l[s * stride + row];
  }
  for (int64_t d = threadIdx.x; d < a.dv; d += kThreads) {
    float acc = 0.f;
    for (int64_t s = 0; s < r.splits; ++s) {
      const float x = a.part_m[s * stride + row] - big_m;
      acc = fmaf(log2_slip ? expf(x) : flash::ptx::fast_exp2(x), a.part_o[(s * stride + row) * a.dv + d], acc);
    }
    o[d] = T(acc / big_l);
  }
  if (threadIdx.x == 0) *lse = (big_m + (log2_slip ? logf(big_l) : log2f(big_l))) * kLn2;
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("sdpa_flash_decode_forward: ") + what + ": " + cudaGetErrorString(err));
}

// Splits of the longest sequence (the grid's third dimension).
int64_t splits_of(const SdpaParams& p) {
  int64_t lk = p.seq_k;
  if (p.plant == SdpaPlant::paged_tail_read && p.page_size > 0) lk = (lk + p.page_size - 1) / p.page_size * p.page_size;
  return lk > kSplit ? (lk + kSplit - 1) / kSplit : 1;
}

// Query tokens: q's rows when the tensors are known, else the most the batch can hold.
int64_t tokens_of(const SdpaParams& p) { return p.q ? p.total_q : p.batch * p.seq_q; }

template <typename T>
void launch(const DecodeArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.total_q), static_cast<unsigned>(a.heads_q), static_cast<unsigned>(a.splits));
  decode_split_kernel<T><<<grid, kThreads, 0, stream>>>(a);
  check_launch("decode_split_kernel launch");
  if (a.splits == 1) return;
  decode_combine_kernel<T><<<dim3(grid.x, grid.y), kThreads, 0, stream>>>(a);
  check_launch("decode_combine_kernel launch");
}

}  // namespace

bool sdpa_flash_decode_supports(const SdpaParams& p, const char** why) {
  const char* reason = nullptr;
  if (p.dtype != SdpaDType::fp16 && p.dtype != SdpaDType::bf16 && p.dtype != SdpaDType::fp32)
    reason = "flash_decode: unknown dtype";
  else if (p.head_dim < 1 || p.head_dim > kMaxDqk || p.head_dim_v < 1 || p.head_dim_v > kMaxDv)
    reason = "flash_decode takes head dims Dqk 1..576 and Dv 1..512";
  else if (p.mask_kind != SdpaMaskTensor::none) reason = "flash_decode takes no attn_mask (the paged layout has none)";
  else if (p.batch < 0 || p.seq_q < 0 || p.seq_k < 0 || p.heads_q < 0) reason = "flash_decode: negative dimension";
  else if (!(p.softcap >= 0.f) || p.softcap == INFINITY) reason = "flash_decode: softcap must be finite and >= 0";
  else if (tokens_of(p) > 0x7fffffffLL || p.heads_q > 65535 || splits_of(p) > 65535)
    reason = "flash_decode: more query tokens (2^31), heads (65,535) or splits (65,535) than one grid holds";
  else if (p.has_sinks && p.q && !p.sinks && p.heads_q > 0) reason = "flash_decode: sinks set without a sinks tensor";
  else if (p.alibi != SdpaAlibi::none && p.q && !p.alibi_slopes && p.batch > 0 && p.heads_q > 0)
    reason = "flash_decode: alibi set without an alibi_slopes tensor";
  if (why) *why = reason;
  return reason == nullptr;
}

int64_t sdpa_flash_decode_scratch_bytes(const SdpaParams& p) {
  const int64_t splits = splits_of(p);
  if (splits == 1) return 0;
  return static_cast<int64_t>(sizeof(float)) * splits * tokens_of(p) * p.heads_q * (p.head_dim_v + 2);
}

void sdpa_flash_decode_forward(const SdpaParams& p, CUstream_st* stream) {
  sdpa_check_arguments(p);
  if (p.page_size < 1)
    throw SdpaArgumentError("page_size", "page_size = " + std::to_string(p.page_size) + " (a page holds >= 1 token)");
  const char* why = nullptr;
  if (!sdpa_flash_decode_supports(p, &why)) throw std::invalid_argument(why);
  if (p.batch == 0 || p.total_q == 0 || p.heads_q == 0) return;
  if (!p.cu_seqlens_q || !p.block_table || !p.seqused_k)
    throw std::invalid_argument("flash_decode: cu_seqlens_q, block_table and seqused_k are required");
  DecodeArgs a{};
  a.q = p.q;
  a.o = p.o;
  a.lse = p.lse;
  a.k_cache = p.k;
  a.v_cache = p.v;
  a.cu_q = p.cu_seqlens_q;
  a.table = p.block_table;
  a.used = p.seqused_k;
  a.batch = p.batch;
  a.total_q = p.total_q;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.group = p.heads_q / p.heads_kv;
  a.dqk = p.head_dim;
  a.dv = p.head_dim_v;
  a.page_size = p.page_size;
  a.num_pages = p.num_pages;
  a.width = p.max_pages_per_seq;
  a.splits = splits_of(p);
  a.hnd = p.kv_hnd;
  a.scale = p.scale;
  a.softcap = p.softcap;
  a.rel = flash::rel_interval(p);
  a.plant = p.plant;
  a.sinks = p.has_sinks ? p.sinks : nullptr;
  a.alibi = p.alibi != SdpaAlibi::none ? p.alibi_slopes : nullptr;
  a.alibi_bs = flash::alibi_batch_stride(p);
  StreamScratch scratch(stream);  // freed on the stream after the kernels
  if (a.splits > 1) {
    const auto rows = static_cast<size_t>(a.splits * a.total_q * a.heads_q);
    a.part_o = scratch.alloc_n<float>(rows * static_cast<size_t>(a.dv), "split-KV partial O");
    a.part_m = scratch.alloc_n<float>(rows, "split-KV partial max");
    a.part_l = scratch.alloc_n<float>(rows, "split-KV partial row sum");
  }
  const cudaStream_t s = stream;
  if (p.dtype == SdpaDType::fp16) launch<__half>(a, s);
  else if (p.dtype == SdpaDType::bf16) launch<__nv_bfloat16>(a, s);
  else launch<float>(a, s);
}

}  // namespace opcts::cuda
