// Flash-attention backward (FlashAttention-2, Dao 2023, Algorithm 2) for fp16/bf16.
//
// Kernels on the caller's stream:
//   1. bwd_rowsum_kernel: D_i = rowsum(dO ⊙ O) in fp32, one warp per query row.
//   2. The main kernel, one of two:
//      a. tc::bwd_tc_kernel (tensor cores, mma.sync m16n8k16, fp32 accumulation), taken for
//         fp16/bf16 with Dqk == Dv ∈ {32, 64, 96, 128}, no softcap, ALiBi or mask tensor; any
//         causal mask (upper-left, lower-right) or window, any GQA ratio, any strides that
//         sdpa_flash_backward_supports accepts (BSHD included), and the plants.
//      b. bwd_kernel (fp32 FMA on shared-memory tiles, no tensor cores): everything else
//         that sdpa_flash_backward_supports accepts, i.e. softcap > 0, a boolean or additive
//         mask tensor, ALiBi, chunks, varlen, Dqk != Dv (192/128) and head dims 80, 192, 256;
//         and every problem when SdpaBackwardParams::path is SdpaBwdPath::fma (cuda.flash's
//         tactic fma). ALiBi's bias joins the recomputed score after the softcap as
//         in the forward (so P = exp(s − lse) is the forward's); it has no gradient, and the
//         softcap's derivative is the score's before the bias.
//      Both: one thread block per (batch, KV head, block of keys). It keeps dK and dV of its
//      keys in fp32 registers and loops over every query head of the GQA group and every
//      block of query rows that may see its keys: P is recomputed from the forward's
//      logsumexp, dP = dO·Vᵀ, dS = P ⊙ (dP − D) (⊙ the softcap derivative 1 − tanh², FMA
//      kernel only); dV += Pᵀ·dO, dK += dSᵀ·Q, and dQ += dS·K is added with atomicAdd into
//      an fp32 workspace. The GQA group is summed inside the block, so dK/dV need no atomics.
//   3. bwd_convert_kernel: the fp32 dQ workspace (times the scale) into dQ's dtype/strides.
//   4. With attention sinks, bwd_dsinks_kernel: dsink_h = −Σ e^(sink_h − lse_i)·D_i over the
//      rows of query head h, one block per head. Nothing else changes: the forward's lse holds
//      the sink, so P = exp(s − lse) is the probability of a key beside the sink, and dS = P ⊙
//      (dP − D) is exact since the sink has no value (its dP is 0); a row with no key has O = 0,
//      so D = 0 and its masked P = 0 (its lse, the sink, is finite: the masks alone zero P).
//   5. With dbias (an additive mask, so the FMA kernel), bwd_dbias_kernel: the FMA kernel writes
//      fp32 partials of dS' = P ⊙ (dP − D) (before the softcap's derivative: the mask is added
//      after the softcap) per (batch entry, head slot, mask row, key), a head slot being the query
//      head, or the KV head when the mask broadcasts over heads (its GQA group summed in the
//      block, in order); with one mask row for every query the block also sums its rows in order
//      (a shared-memory tile of dS'). The kernel then sums the partials over the broadcast batch
//      entries and KV heads in order, one thread per element of dbias, and rounds once.
// Varlen (THD, cu_seqlens): the FMA kernel, one block per (sequence, KV head, block of that
// sequence's keys), its pointers at the sequence's offsets and its interval at Sk_b − Sq_b;
// lse, D and the dQ workspace are [Hq, total_q], which the row-wise kernels 1 and 3 read as one
// batch entry of total_q rows.
// dQ's fp32 atomics make dQ's bits depend on the order blocks finish (not bitwise
// reproducible run to run); dK and dV are.
//
// Masked keys and NaN: a key that no query row may see under the causal mask / window
// has its K and V rows zero-filled in shared memory (never read), so a NaN there cannot
// reach any product. Scores of masked (i, j) are replaced, not multiplied: P and dS are
// selected as 0, so a NaN in a masked K row (S) or V row (dP) does not leak. The FMA
// kernel's dQ sum over keys skips the keys that no row of the query block sees (a
// block-uniform bit mask), so dS = 0 never multiplies a NaN K row; the tensor-core kernel
// multiplies the whole 64-key tile (dS = 0 there), so a NaN in a K row that some query row
// sees also reaches the dQ of the rows of that query tile that do not see it (like the
// forward, where such a NaN is a genuine NaN of the block's rows).
// Block masks (SdpaParams::block_mask) run on the FMA kernel: a key of a block the row's query
// block does not read is masked per element (P and dS selected as 0), dQ's sum skips the keys no
// row of the step sees (the keys of unread blocks among them, whose K rows may be NaN), and a step
// of (query head, query rows) none of whose pairs with the block's keys is read is skipped.
#include "sdpa_flash_common.cuh"
#include "sdpa_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace opcts::cuda {
namespace {

constexpr int kBN = 32;        // keys per block
constexpr int kBM = 32;        // query rows per step
constexpr int kThreads = 256;  // thread t owns row t / 8 and column group t % 8

template <int DQK, int DV>
struct BwdCfg {
  // Pitches in 32-bit words (two elements): odd, so the 8 rows one warp reads at one
  // column land in 8 distinct banks.
  static constexpr int kWQ = DQK / 2 + 1;
  static constexpr int kWV = DV / 2 + 1;
  static constexpr int kPS = kBN + 1;  // fp32 P and dS tiles
  static constexpr size_t kSmemWords = size_t(2) * kBN * kWQ + size_t(2) * kBN * kWV + size_t(2) * kBM * kPS + 2 * kBM;
  static constexpr size_t kSmemBytes = kSmemWords * 4;
  static constexpr size_t kDbTileBytes = size_t(kBM) * kPS * 4;  // dS' for dbias's row sums
};

// The FMA kernel's dynamic shared memory: a dS' tile more when dbias sums the rows.
template <int DQK, int DV>
size_t bwd_smem_bytes(bool db_rows) {
  return BwdCfg<DQK, DV>::kSmemBytes + (db_rows ? BwdCfg<DQK, DV>::kDbTileBytes : 0);
}

// What both backward kernels (FMA and tensor-core) read: tensors, strides, sizes, masks.
struct BwdTensors {
  const void* q;
  const void* k;
  const void* v;
  const void* d_o;
  const float* lse;  // [B, Hq, Sq]
  const float* dl;   // [B, Hq, Sq]: rowsum(dO ⊙ O)
  float* dq_acc;     // [B, Hq, Sq, DQK] contiguous fp32
  void* d_k;
  void* d_v;
  SdpaStrides qs, ks, vs, dos, dks, dvs;
  int64_t heads_q, heads_kv, group, seq_q, seq_k;
  flash::KeyInterval iv;
  float scale;
  // Varlen (the FMA kernel only; null otherwise): sequence b is rows [cu_q[b], cu_q[b + 1]) of Q,
  // dO, dQ and [cu_k[b], cu_k[b + 1]) of K, V, dK, dV (token-major, batch strides 0); lse, D and
  // the dQ workspace are [Hq, total_q]; the interval is placed per sequence from `rel`.
  const int32_t* cu_q;
  const int32_t* cu_k;
  const int32_t* used_k;  // seqused_k: each segment's keys (null: the whole segment)
  int64_t total_q;
  flash::RelInterval rel;
  int64_t chunk;  // chunked-local attention (0 = off; the FMA kernel only): each row's chunk
  // ALiBi slopes (null = off; the FMA kernel only): entry b·alibi_bs + h for batch entry
  // (sequence) b and query head h.
  const float* alibi;
  int64_t alibi_bs;
};

BwdTensors bwd_tensors(const SdpaBackwardParams& bp, const float* dl, float* dq_acc) {
  const SdpaParams& p = bp.fwd;
  BwdTensors t;
  t.q = p.q;
  t.k = p.k;
  t.v = p.v;
  t.d_o = bp.d_o;
  t.lse = p.lse;
  t.dl = dl;
  t.dq_acc = dq_acc;
  t.d_k = bp.d_k;
  t.d_v = bp.d_v;
  t.qs = p.q_strides;
  t.ks = p.k_strides;
  t.vs = p.v_strides;
  t.dos = bp.do_strides;
  t.dks = bp.dk_strides;
  t.dvs = bp.dv_strides;
  t.heads_q = p.heads_q;
  t.heads_kv = p.heads_kv;
  t.group = p.heads_q / p.heads_kv;
  t.seq_q = p.seq_q;
  t.seq_k = p.seq_k;
  t.iv = flash::key_interval(p);
  t.scale = p.scale;
  t.cu_q = p.cu_seqlens_q;
  t.cu_k = p.cu_seqlens_k;
  t.used_k = p.cu_seqlens_q ? p.seqused_k : nullptr;
  t.total_q = p.total_q;
  t.rel = flash::rel_interval(p);
  t.chunk = p.chunk;
  t.alibi = p.alibi != SdpaAlibi::none ? p.alibi_slopes : nullptr;
  t.alibi_bs = flash::alibi_batch_stride(p);
  return t;
}

// The FMA kernel's arguments.
struct BwdArgs : BwdTensors {
  int64_t num_k_tiles;
  SdpaMaskTensor mask_kind;
  const void* mask;
  SdpaStrides ms;
  float softcap;
  // dbias's fp32 partials [B, db_heads, Sq or 1, Sk] (null = no dbias; zeroed before): head slot
  // h (db_per_head) or the KV head; db_rows: one mask row, the block's rows summed into it.
  float* db_part;
  int64_t db_heads;
  bool db_per_head, db_rows;
  // Block-sparse attention (null = off): as the forward's KernelArgs (sdpa_flash.cu), query head
  // h's mask at block_mask + (b·Hq + h)·block_hs, rows of block_nk bytes; sizes clamped to the lengths.
  const uint8_t* block_mask;
  int64_t block_hs, block_nk;
  int block_q, block_k;
};

// Rows [row0, row0 + 32) of D elements (D/2 words) into a word-pitched smem tile; rows for
// which keep(row) is false are zero-filled without reading global memory.
template <int D, typename Keep>
__device__ __forceinline__ void load_rows(uint32_t* smem, const void* gbase, int64_t stride, int64_t row0, Keep keep,
                                          int tid) {
  constexpr int kW = D / 2;
  for (int idx = tid; idx < 32 * kW; idx += kThreads) {
    const int r = idx / kW, c = idx % kW;
    const int64_t row = row0 + r;
    uint32_t w = 0u;
    if (keep(row)) w = *(reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(gbase) + row * stride) + c);
    smem[r * (kW + 1) + c] = w;
  }
}

// The dot product of two rows of kWords packed pairs of T (PT unpacks them), fp32 FMAs in order.
template <typename PT, int kWords>
__device__ __forceinline__ float dot_pairs(const uint32_t* a, const uint32_t* b) {
  float acc = 0.f;
#pragma unroll 8
  for (int w = 0; w < kWords; ++w) {
    const float2 x = PT::unpack(a[w]);
    const float2 y = PT::unpack(b[w]);
    acc = fmaf(x.x, y.x, acc);
    acc = fmaf(x.y, y.y, acc);
  }
  return acc;
}

// Whether some pair of query rows [m0, m0 + kBM) and keys [n0, n_last] of (b, h) lies in a block
// pair the block mask reads; every thread of the block calls it alike (a barrier).
__device__ __forceinline__ bool block_step_reads(const BwdArgs& a, int64_t b, int64_t h, int64_t m0, int64_t seq_q,
                                                 int64_t n0, int64_t n_last) {
  const int64_t m_last = m0 + kBM - 1 < seq_q - 1 ? m0 + kBM - 1 : seq_q - 1;
  return flash::block_tile_reads(a.block_mask + (b * a.heads_q + h) * a.block_hs, a.block_nk, a.block_q, a.block_k, m0,
                                 m_last, n0, n_last);
}

// kDbias: the variant that writes dbias's partials (a.db_part), apart so that the others keep
// their registers (ptxas 13.0, sm_90: one kernel for both spilled up to 104 bytes at D = 96,
// where the kernel without dbias spills none; the dbias variant spills up to 60 bytes).
template <typename T, int DQK, int DV, bool kDbias>
__global__ void __launch_bounds__(kThreads) bwd_kernel(const BwdArgs a) {
  using C = BwdCfg<DQK, DV>;
  using PT = flash::ptx::Mma<T>;  // the packing of two T in a 32-bit word
  constexpr int kWQ = C::kWQ, kWV = C::kWV, kPS = C::kPS;
  constexpr int kUQ = DQK / 16;  // column pairs of Q/K per thread
  constexpr int kUV = DV / 16;   // column pairs of V/dO per thread

  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint32_t* sK = reinterpret_cast<uint32_t*>(smem_raw);
  uint32_t* sQ = sK + kBN * kWQ;
  uint32_t* sV = sQ + kBM * kWQ;
  uint32_t* sdO = sV + kBN * kWV;
  float* sP = reinterpret_cast<float*>(sdO + kBM * kWV);
  float* sdS = sP + kBM * kPS;
  float* sLse = sdS + kBM * kPS;
  float* sDl = sLse + kBM;
  float* sdB = sDl + kBM;       // dS' [kBM][kPS] for dbias's row sums (db_rows only)
  __shared__ uint32_t sActive;  // keys of the tile some row of the query block sees

  const int tid = threadIdx.x;
  const int tr = tid >> 3, tc = tid & 7;
  const int64_t kt = blockIdx.x % a.num_k_tiles;
  const int64_t bhk = blockIdx.x / a.num_k_tiles;
  const int64_t b = bhk / a.heads_kv, hk = bhk % a.heads_kv;
  const int64_t n0 = kt * kBN;
  // The block's sequence: the whole batch entry, or (varlen) sequence b at its offsets, with its
  // own lengths and its interval placed at its own Sk_b − Sq_b.
  int64_t q_off = 0, k_off = 0, seq_q = a.seq_q, seq_k = a.seq_k;
  flash::KeyInterval iv = a.iv;
  if (a.cu_q) {
    q_off = a.cu_q[b];
    k_off = a.cu_k[b];
    seq_q = a.cu_q[b + 1] - q_off;
    seq_k = a.cu_k[b + 1] - k_off;
    if (a.used_k) {  // clamped to the segment: the padding is never read
      const int64_t used = a.used_k[b];
      seq_k = used < 0 ? 0 : used < seq_k ? used : seq_k;
    }
    iv = flash::at_offset(a.rel, seq_k - seq_q);
    if (n0 >= seq_k) return;  // the grid spans the longest sequence's key tiles
  }
  // Row (b, h, i) of lse, D and the dQ workspace is row_base(h) + i.
  auto row_base = [&](int64_t h) { return a.cu_q ? h * a.total_q + q_off : (b * a.heads_q + h) * seq_q; };
  const int64_t n_last = n0 + kBN - 1 < seq_k - 1 ? n0 + kBN - 1 : seq_k - 1;

  const uint16_t* kg = static_cast<const uint16_t*>(a.k) + b * a.ks.batch + hk * a.ks.head + k_off * a.ks.seq;
  const uint16_t* vg = static_cast<const uint16_t*>(a.v) + b * a.vs.batch + hk * a.vs.head + k_off * a.vs.seq;
  // A key row is loaded only when some query row may see it under the interval.
  auto key_seen = [&](int64_t j) {
    if (j >= seq_k) return false;
    int64_t q0, q1;
    flash::rows_of_keys(iv, j, j, seq_q, &q0, &q1);
    return q0 < q1;
  };
  load_rows<DQK>(sK, kg, a.ks.seq, n0, key_seen, tid);
  load_rows<DV>(sV, vg, a.vs.seq, n0, key_seen, tid);

  float dk[kUQ][2], dv[kUV][2];
#pragma unroll
  for (int u = 0; u < kUQ; ++u) dk[u][0] = dk[u][1] = 0.f;
#pragma unroll
  for (int u = 0; u < kUV; ++u) dv[u][0] = dv[u][1] = 0.f;

  int64_t q0, q1;
  flash::rows_of_keys(iv, n0, n_last, seq_q, &q0, &q1);
  const int64_t qt_begin = q0 / kBM, qt_end = q0 < q1 ? (q1 + kBM - 1) / kBM : qt_begin;
  const bool has_mt = a.mask_kind != SdpaMaskTensor::none;
  const bool db_rows = kDbias && a.db_rows;
  // dbias with one mask row: thread tid < 32 sums key n0 + tid's dS' over the rows (and the
  // group's heads where the mask broadcasts over heads), in order, then stores it as its partial.
  float db = 0.f;
  auto store_db = [&](int64_t slot) {
    if (tid < kBN && n0 + tid < seq_k) a.db_part[(b * a.db_heads + slot) * seq_k + n0 + tid] = db;
    db = 0.f;
  };

  for (int64_t gi = 0; gi < a.group; ++gi) {
    const int64_t h = hk * a.group + gi;
    const int64_t rb = row_base(h);
    const uint16_t* qg = static_cast<const uint16_t*>(a.q) + b * a.qs.batch + h * a.qs.head + q_off * a.qs.seq;
    const uint16_t* dog = static_cast<const uint16_t*>(a.d_o) + b * a.dos.batch + h * a.dos.head + q_off * a.dos.seq;
    const int64_t mask_off = b * a.ms.batch + h * a.ms.head;
    const uint8_t* mbool = static_cast<const uint8_t*>(a.mask) + mask_off;
    const T* madd = static_cast<const T*>(a.mask) + mask_off;

    for (int64_t qt = qt_begin; qt < qt_end; ++qt) {
      const int64_t m0 = qt * kBM;
      // Block masks: a step none of whose (row, key) pairs is read is skipped (a block-wide vote).
      if (a.block_mask && !block_step_reads(a, b, h, m0, seq_q, n0, n_last)) continue;
      __syncthreads();  // the previous step's reads of sQ, sdO, sP, sdS are done
      auto row_in = [&](int64_t i) { return i < seq_q; };
      load_rows<DQK>(sQ, qg, a.qs.seq, m0, row_in, tid);
      load_rows<DV>(sdO, dog, a.dos.seq, m0, row_in, tid);
      if (tid < kBM) {
        const int64_t i = m0 + tid;
        sLse[tid] = i < seq_q ? a.lse[rb + i] : -INFINITY;
        sDl[tid] = i < seq_q ? a.dl[rb + i] : 0.f;
      }
      if (tid == 0) sActive = 0u;
      __syncthreads();

      // P and dS for (i = tr, j = tc + 8u).
      const int i = tr;
      const int64_t ig = m0 + i;
      const float lse_i = sLse[i], dl_i = sDl[i];
      uint32_t active = 0u;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = tc + 8 * u;
        const int64_t jg = n0 + j;
        const float s = dot_pairs<PT, DQK / 2>(sQ + i * kWQ, sK + j * kWQ);
        const float dp = dot_pairs<PT, DV / 2>(sdO + i * kWV, sV + j * kWV);
        bool vis = ig < seq_q && jg < seq_k && jg >= ig + iv.lo_off && jg <= ig + iv.hi_off;
        if (vis && a.chunk > 0) {  // the chunk of the row's lower-right position
          const int64_t first = flash::chunk_first(ig + seq_k - seq_q, a.chunk);
          vis = jg >= first && jg < first + a.chunk;
        }
        if (vis && a.block_mask)  // the key blocks the row's query block reads (selects below)
          vis = flash::block_reads(a.block_mask + (b * a.heads_q + h) * a.block_hs, a.block_nk, a.block_q, a.block_k,
                                   ig, jg);
        float x = s * a.scale, deriv = 1.f;
        if (a.softcap > 0.f) {
          const float th = tanhf(x / a.softcap);
          x = a.softcap * th;
          deriv = 1.f - th * th;
        }
        // ALiBi at the row's lower-right distance, as the forward adds it (a constant: deriv stays).
        // The slope of (b, h) (b: the sequence when packed) is read where it is used, a cached load,
        // not held across the loops (ptxas 13.0, sm_90: held, the kernel spilled up to 64 bytes at
        // D = 80 and 96, where it did not; read here, 8 bytes at fp16 D = 192 only).
        if (a.alibi) x -= flash::alibi_bias(__ldg(a.alibi + (b * a.alibi_bs + h)), ig + seq_k - seq_q - jg);
        if (vis && has_mt) {
          if (a.mask_kind == SdpaMaskTensor::boolean) {
            vis = mbool[ig * a.ms.seq + jg] != 0;
          } else {
            const float add = flash::to_f32(madd[ig * a.ms.seq + jg]);
            if (add == -INFINITY) vis = false;
            else x += add;
          }
        }
        vis = vis && lse_i != -INFINITY;
        const float p = vis ? expf(x - lse_i) : 0.f;
        const float dsb = vis ? p * (dp - dl_i) : 0.f;  // dS', dbias's term
        const float ds = vis ? dsb * deriv : 0.f;
        sP[i * kPS + j] = p;
        sdS[i * kPS + j] = ds;
        // dbias per mask row: element (i, j) of the head slot's partial, which only this thread
        // adds to (its address formed here: a pointer held across the loops cost registers).
        if (db_rows) sdB[i * kPS + j] = dsb;
        else if (kDbias && vis)
          a.db_part[((b * a.db_heads + (a.db_per_head ? h : hk)) * seq_q + ig) * seq_k + jg] += dsb;
        if (vis) active |= 1u << j;
      }
      active = gpu::warp_or(active);
      if ((tid & 31) == 0 && active) atomicOr(&sActive, active);
      __syncthreads();

      // dV += Pᵀ·dO and dK += dSᵀ·Q for key j = tr; column pairs 2·tc + 16u.
      {
        const int j = tr;
#pragma unroll 4
        for (int ii = 0; ii < kBM; ++ii) {
          const float p = sP[ii * kPS + j], ds = sdS[ii * kPS + j];
#pragma unroll
          for (int u = 0; u < kUV; ++u) {
            const float2 y = PT::unpack(sdO[ii * kWV + tc + 8 * u]);
            dv[u][0] = fmaf(p, y.x, dv[u][0]);
            dv[u][1] = fmaf(p, y.y, dv[u][1]);
          }
#pragma unroll
          for (int u = 0; u < kUQ; ++u) {
            const float2 y = PT::unpack(sQ[ii * kWQ + tc + 8 * u]);
            dk[u][0] = fmaf(ds, y.x, dk[u][0]);
            dk[u][1] = fmaf(ds, y.y, dk[u][1]);
          }
        }
      }
      if (db_rows && tid < kBN)  // dbias's row sum for key tid, in row order
        for (int ii = 0; ii < kBM; ++ii) db += sdB[ii * kPS + tid];
      // dQ += dS·K for query row i = tr over the keys some row of this block sees.
      if (ig < seq_q) {
        const uint32_t act = sActive;
        float dq[kUQ][2];
#pragma unroll
        for (int u = 0; u < kUQ; ++u) dq[u][0] = dq[u][1] = 0.f;
        for (int j = 0; j < kBN; ++j) {
          if (!((act >> j) & 1u)) continue;
          const float ds = sdS[i * kPS + j];
#pragma unroll
          for (int u = 0; u < kUQ; ++u) {
            const float2 y = PT::unpack(sK[j * kWQ + tc + 8 * u]);
            dq[u][0] = fmaf(ds, y.x, dq[u][0]);
            dq[u][1] = fmaf(ds, y.y, dq[u][1]);
          }
        }
        if (act) {
          float* dst = a.dq_acc + (rb + ig) * DQK;
#pragma unroll
          for (int u = 0; u < kUQ; ++u) {
            const int c = 2 * (tc + 8 * u);
            atomicAdd(dst + c, dq[u][0]);
            atomicAdd(dst + c + 1, dq[u][1]);
          }
        }
      }
    }
    if (db_rows && a.db_per_head) store_db(h);
  }
  if (db_rows && !a.db_per_head) store_db(hk);

  // dK = scale · Σ dSᵀ·Q, dV = Σ Pᵀ·dO for key j = n0 + tr.
  const int64_t jg = n0 + tr;
  if (jg < seq_k) {
    uint32_t* dkg = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(a.d_k) + b * a.dks.batch + hk * a.dks.head +
                                                (k_off + jg) * a.dks.seq);
    uint32_t* dvg = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(a.d_v) + b * a.dvs.batch + hk * a.dvs.head +
                                                (k_off + jg) * a.dvs.seq);
#pragma unroll
    for (int u = 0; u < kUQ; ++u) dkg[tc + 8 * u] = PT::pack(dk[u][0] * a.scale, dk[u][1] * a.scale);
#pragma unroll
    for (int u = 0; u < kUV; ++u) dvg[tc + 8 * u] = PT::pack(dv[u][0], dv[u][1]);
  }
}

// ---------------------------------------------------------------------------------------
// Tensor-core kernel (mma.sync m16n8k16, fp16/bf16 operands, fp32 accumulation).
//
// Block: 64 keys (K_j, V_j resident in shared memory), 8 warps; steps over (query head of
// the group, block of 64 query rows) with Q_i, dO_i, lse_i, D_i loaded by cp.async. Warp
// w = 4·hf + kg:
//   phase 1: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for keys 16kg..16kg+15 and queries 32hf..32hf+31 of
//            the tile (accumulator rows = keys, columns = queries); P = exp2(S·scale·log2e −
//            lse·log2e) (lse = -inf → P = 0), dS = P ⊙ (dP − D), masked elements selected
//            as 0. Pᵀ and dSᵀ go to shared memory as 16-bit [key][query] tiles and dS as a
//            [query][key] tile, so every later A operand is a plain row-major ldmatrix.
//   phase 2: dV += Pᵀ·dO and dK += dSᵀ·Q for keys 16kg.. and head-dim columns
//            hf·D/2..(hf+1)·D/2 (the accumulators stay in registers over all steps);
//   phase 3: dQ(queries 16kg.., columns hf·D/2..) = dS·K, added into the fp32 workspace
//            with atomics, while the next step's Q/dO load is in flight.
// Shared memory: K, V, Q, dO (64 x (D+8) each) + Pᵀ, dSᵀ, dS (64 x 72 each) + lse, D:
// 97,792 B at D = 128 (within sm_86/sm_89's 99 KiB), 48,640 B at D = 32.
namespace tc {

namespace ptx = flash::ptx;

constexpr int kBN = 64;  // keys per block
constexpr int kBM = 64;  // query rows per step
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kPS = 64 + 8;  // pitch (elements) of the 64x64 16-bit P/dS tiles

template <int D>
struct Cfg {
  static constexpr int kP = D + 8;  // padded row pitch: conflict-free ldmatrix (see sdpa_flash.cu)
  static constexpr size_t kTile = size_t(64) * kP;
  static constexpr size_t kSmemBytes = (4 * kTile + 3 * size_t(64) * kPS) * 2 + 2 * size_t(kBM) * sizeof(float);
};

inline bool head_dim_ok(int64_t d) { return d == 32 || d == 64 || d == 96 || d == 128; }

// The tensor-core kernel's arguments.
struct Args : BwdTensors {
  int64_t num_bhk;
  int64_t key_lo, key_hi;  // the keys some query row may see: [key_lo, key_hi)
  float scale_log2;
};

// Rows [row0, row0 + 64) of D elements into a padded smem tile (pitch D + 8); rows outside
// [lo, hi) are zero-filled without reading global memory.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* smem, const T* gbase, int64_t row_stride, int64_t row0, int64_t lo,
                                          int64_t hi, int tid) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = 64 * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile chunks must divide evenly");
#pragma unroll
  for (int it = 0; it < kChunks / kThreads; ++it) {
    const int chunk = it * kThreads + tid;
    const int r = chunk / kChunksPerRow;
    const int c = chunk % kChunksPerRow;
    const int64_t grow = row0 + r;
    const bool in = grow >= lo && grow < hi;
    const T* src = in ? gbase + grow * row_stride + c * 8 : gbase;
    ptx::cp_async_16(ptx::smem_addr(smem + r * (D + 8) + c * 8), src, in ? 16 : 0);
  }
}

__device__ __forceinline__ void add_dq(float* dst, float x0, float x1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x0, x1));
#else
  atomicAdd(dst, x0);
  atomicAdd(dst + 1, x1);
#endif
}

// kMinBlocks = 0 (no minimum, the default): no spills; registers (sm_90, ptxas 13.0)
// D = 32: 116, 64: 128 (two blocks of 8 warps per SM), 96: 162, 128: 174 (one block per
// SM). kMinBlocks = 2 (D = 96 and 128 only, for SdpaBwdPath::tc_two_blocks, see launch_tc)
// caps them at 128 for two blocks per SM, at the price of small spills (12 bytes at
// D = 128, 8 at D = 96).
template <typename T, int D, int kMinBlocks>
__global__ void OPCTS_LAUNCH_BOUNDS(kThreads, kMinBlocks) bwd_tc_kernel(const Args a) {
  using C = Cfg<D>;
  using M = ptx::Mma<T>;
  constexpr int P = C::kP;
  constexpr int kDK = D / 16;   // k-steps over the head dim (phase 1)
  constexpr int kDH = D / 2;    // head-dim columns per warp (phases 2 and 3)
  constexpr int kNH = kDH / 8;  // 8-wide n-tiles per warp (phases 2 and 3)
  static_assert(kNH % 2 == 0, "phase 2/3 load n-tiles in pairs");
  constexpr float kLog2e = 1.44269504088896340736f;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + C::kTile;
  T* sQ = sV + C::kTile;
  T* sdO = sQ + C::kTile;
  T* sPT = sdO + C::kTile;   // Pᵀ  [key][query], pitch kPS
  T* sdST = sPT + 64 * kPS;  // dSᵀ [key][query]
  T* sdS = sdST + 64 * kPS;  // dS  [query][key]
  float* sLse = reinterpret_cast<float*>(sdS + 64 * kPS);
  float* sDl = sLse + kBM;
  uint16_t* sdS16 = reinterpret_cast<uint16_t*>(sdS);

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2;   // fragment row within the 8-row group
  const int t = lane & 3;    // fragment column pair
  const int kg = warp & 3;   // 16-row group: keys (phases 1, 2), query rows (phase 3)
  const int hf = warp >> 2;  // half: queries (phase 1), head-dim columns (phases 2, 3)
  const int kw0 = kg * 16;
  const int qw0 = hf * 32;
  const int c0 = hf * kDH;

  // (b, KV head) on the fast axis; key tiles in ascending order, the heaviest first under
  // a causal mask (the first keys are seen by the most query rows).
  const int64_t bhk = blockIdx.x % a.num_bhk;
  const int64_t kt = blockIdx.x / a.num_bhk;
  const int64_t b = bhk / a.heads_kv, hk = bhk % a.heads_kv;
  const int64_t n0 = kt * kBN;
  const int64_t seq_q = a.seq_q, seq_k = a.seq_k;
  const int64_t n_last = n0 + kBN - 1 < seq_k - 1 ? n0 + kBN - 1 : seq_k - 1;

  int64_t q0, q1;
  flash::rows_of_keys(a.iv, n0, n_last, seq_q, &q0, &q1);
  // Steps: query heads h_begin.. (the GQA group of hk) x query tiles [qt_begin, qt_end).
  const int64_t qt_begin = q0 / kBM;
  const int64_t qt_end = q0 < q1 ? (q1 + kBM - 1) / kBM : qt_begin;
  const int64_t h_begin = hk * a.group, h_end = h_begin + a.group;

  // ldmatrix lane -> address maps, as in sdpa_flash.cu: A row-major [m][k] (a_*), B stored
  // [n][k] (kb_*, non-transposed), B stored [k][n] (vb_*, .trans).
  const int a_row = lane & 15, a_col = (lane >> 4) * 8;
  const int kb_row = (lane & 7) + ((lane >> 4) << 3), kb_col = ((lane >> 3) & 1) * 8;
  const int vb_row = (lane & 7) + (((lane >> 3) & 1) << 3), vb_col = (lane >> 4) * 8;

  auto issue_q = [&](int64_t h, int64_t qt) {
    const int64_t bh = b * a.heads_q + h;
    const int64_t m0 = qt * kBM;
    const T* qg = static_cast<const T*>(a.q) + b * a.qs.batch + h * a.qs.head;
    const T* dog = static_cast<const T*>(a.d_o) + b * a.dos.batch + h * a.dos.head;
    load_tile<T, D>(sQ, qg, a.qs.seq, m0, 0, seq_q, tid);
    load_tile<T, D>(sdO, dog, a.dos.seq, m0, 0, seq_q, tid);
    if (tid < kBM) {
      const int64_t i = m0 + tid;
      const bool in = i < seq_q;
      ptx::cp_async_4(ptx::smem_addr(sLse + tid), in ? a.lse + bh * seq_q + i : a.lse, in ? 4 : 0);
    } else if (tid < 2 * kBM) {
      const int64_t i = m0 + tid - kBM;
      const bool in = i < seq_q;
      ptx::cp_async_4(ptx::smem_addr(sDl + tid - kBM), in ? a.dl + bh * seq_q + i : a.dl, in ? 4 : 0);
    }
    ptx::cp_async_commit();
  };

  float dk[kNH][4], dv[kNH][4];
#pragma unroll
  for (int i = 0; i < kNH; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  if (qt_begin < qt_end) {
    const T* kgp = static_cast<const T*>(a.k) + b * a.ks.batch + hk * a.ks.head;
    const T* vgp = static_cast<const T*>(a.v) + b * a.vs.batch + hk * a.vs.head;
    load_tile<T, D>(sK, kgp, a.ks.seq, n0, a.key_lo, a.key_hi, tid);
    load_tile<T, D>(sV, vgp, a.vs.seq, n0, a.key_lo, a.key_hi, tid);
    issue_q(h_begin, qt_begin);  // one commit group: K, V and the first Q, dO, lse, D
  }

  for (int64_t h = h_begin, qt = qt_begin; qt < qt_end && h < h_end;) {
    const int64_t bh = b * a.heads_q + h;
    const int64_t m0 = qt * kBM;
    ptx::cp_async_wait_all();
    __syncthreads();  // this step's tiles visible; every warp is done with the last dS reads

    // ---- Phase 1: Sᵀ and dPᵀ, keys kw0 + [0, 16), queries qw0 + [0, 32).
    float s[4][4], dp[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = dp[i][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kDK; ++kk) {
      uint32_t ka[4], va[4];
      ptx::ldmatrix_x4(ka, ptx::smem_addr(sK + (kw0 + a_row) * P + kk * 16 + a_col));
      ptx::ldmatrix_x4(va, ptx::smem_addr(sV + (kw0 + a_row) * P + kk * 16 + a_col));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t qb[4], ob[4];
        ptx::ldmatrix_x4(qb, ptx::smem_addr(sQ + (qw0 + np * 16 + kb_row) * P + kk * 16 + kb_col));
        M::run(s[2 * np], ka, qb[0], qb[1]);
        M::run(s[2 * np + 1], ka, qb[2], qb[3]);
        ptx::ldmatrix_x4(ob, ptx::smem_addr(sdO + (qw0 + np * 16 + kb_row) * P + kk * 16 + kb_col));
        M::run(dp[2 * np], va, ob[0], ob[1]);
        M::run(dp[2 * np + 1], va, ob[2], ob[3]);
      }
    }

    // Masking only on tiles that cross Sk, Sq or an interval bound. Tile-relative limits:
    // key row kr (of 64) and query column qc (of 64) are visible iff kr < k_lim,
    // qc < q_lim and lo_c <= kr - qc <= hi_c (clamped to [-64, 64], so they fit an int).
    const bool need_mask =
        n0 + kBN > seq_k || m0 + kBM > seq_q || m0 + kBM - 1 + a.iv.lo_off > n0 || n0 + kBN - 1 > m0 + a.iv.hi_off;
    int k_lim = kBN, q_lim = kBM, lo_c = -64, hi_c = 64;
    if (need_mask) {
      k_lim = seq_k - n0 < kBN ? static_cast<int>(seq_k - n0) : kBN;
      q_lim = seq_q - m0 < kBM ? static_cast<int>(seq_q - m0) : kBM;
      const int64_t delta = n0 - m0;
      int64_t d = a.iv.lo_off - delta;
      lo_c = static_cast<int>(d < -64 ? -64 : (d > 64 ? 64 : d));
      d = a.iv.hi_off - delta;
      hi_c = static_cast<int>(d < -64 ? -64 : (d > 64 ? 64 : d));
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int qc = qw0 + nt * 8 + 2 * t + c;
        const float lse = sLse[qc];
        // A row that sees no key has lse = -inf: exp2(x - inf) = 0 instead of inf.
        const float lse2 = lse == -INFINITY ? INFINITY : lse * kLog2e;
        const float dl = sDl[qc];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int e = 2 * r + c;
          const int kr = kw0 + g + 8 * r;
          bool vis = true;
          if (need_mask) vis = kr < k_lim && qc < q_lim && kr - qc >= lo_c && kr - qc <= hi_c;
          const float p = vis ? ptx::fast_exp2(s[nt][e] * a.scale_log2 - lse2) : 0.f;
          const float ds = vis ? p * (dp[nt][e] - dl) : 0.f;
          s[nt][e] = p;
          dp[nt][e] = ds;
        }
      }
    }
    // Stage Pᵀ, dSᵀ ([key][query], packed pairs along the query) and dS ([query][key]).
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int kr = kw0 + g + 8 * r;
        const int qc = qw0 + nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(sPT + kr * kPS + qc) = M::pack(s[nt][2 * r], s[nt][2 * r + 1]);
        *reinterpret_cast<uint32_t*>(sdST + kr * kPS + qc) = M::pack(dp[nt][2 * r], dp[nt][2 * r + 1]);
        sdS16[qc * kPS + kr] = M::one(dp[nt][2 * r]);
        sdS16[(qc + 1) * kPS + kr] = M::one(dp[nt][2 * r + 1]);
      }
    }
    __syncthreads();  // Pᵀ, dSᵀ, dS complete

    // ---- Phase 2: dV += Pᵀ·dO, dK += dSᵀ·Q; keys kw0 + [0, 16), columns c0 + [0, D/2).
#pragma unroll
    for (int kk = 0; kk < kBM / 16; ++kk) {
      uint32_t pa[4], sa[4];
      ptx::ldmatrix_x4(pa, ptx::smem_addr(sPT + (kw0 + a_row) * kPS + kk * 16 + a_col));
      ptx::ldmatrix_x4(sa, ptx::smem_addr(sdST + (kw0 + a_row) * kPS + kk * 16 + a_col));
#pragma unroll
      for (int np = 0; np < kNH / 2; ++np) {
        uint32_t ob[4], qb[4];
        ptx::ldmatrix_x4_trans(ob, ptx::smem_addr(sdO + (kk * 16 + vb_row) * P + c0 + np * 16 + vb_col));
        M::run(dv[2 * np], pa, ob[0], ob[1]);
        M::run(dv[2 * np + 1], pa, ob[2], ob[3]);
        ptx::ldmatrix_x4_trans(qb, ptx::smem_addr(sQ + (kk * 16 + vb_row) * P + c0 + np * 16 + vb_col));
        M::run(dk[2 * np], sa, qb[0], qb[1]);
        M::run(dk[2 * np + 1], sa, qb[2], qb[3]);
      }
    }
    __syncthreads();  // every warp is done with Q, dO, lse, D: the next step may load them
    // Advance to the next step (tiles of this head, then the next head of the group).
    if (++qt == qt_end) {
      qt = qt_begin;
      ++h;
    }
    if (h < h_end) issue_q(h, qt);

    // ---- Phase 3: dQ (query rows kw0 + [0, 16), columns c0 + [0, D/2)) += dS·K.
    {
      uint32_t da[kBN / 16][4];
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk)
        ptx::ldmatrix_x4(da[kk], ptx::smem_addr(sdS + (kw0 + a_row) * kPS + kk * 16 + a_col));
      const int64_t row0 = m0 + kw0 + g;
      float* dq_row0 = a.dq_acc + (bh * seq_q + row0) * D + c0 + 2 * t;
#pragma unroll
      for (int np = 0; np < kNH / 2; ++np) {
        float acc[2][4];
#pragma unroll
        for (int j = 0; j < 2; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) {
          uint32_t kb[4];
          ptx::ldmatrix_x4_trans(kb, ptx::smem_addr(sK + (kk * 16 + vb_row) * P + c0 + np * 16 + vb_col));
          M::run(acc[0], da[kk], kb[0], kb[1]);
          M::run(acc[1], da[kk], kb[2], kb[3]);
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            if (row0 + 8 * r < seq_q) add_dq(dq_row0 + 8 * r * D + np * 16 + j * 8, acc[j][2 * r], acc[j][2 * r + 1]);
          }
        }
      }
    }
  }
  ptx::cp_async_wait_all();  // nothing is in flight here; kept so no copy can outlive the block

  // dK = scale · Σ dSᵀ·Q, dV = Σ Pᵀ·dO; every key of the tile is written (0 when unseen).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t j = n0 + kw0 + g + 8 * r;
    if (j >= seq_k) continue;
    T* dkg = static_cast<T*>(a.d_k) + b * a.dks.batch + hk * a.dks.head + j * a.dks.seq + c0 + 2 * t;
    T* dvg = static_cast<T*>(a.d_v) + b * a.dvs.batch + hk * a.dvs.head + j * a.dvs.seq + c0 + 2 * t;
#pragma unroll
    for (int nt = 0; nt < kNH; ++nt) {
      *reinterpret_cast<uint32_t*>(dkg + nt * 8) = M::pack(dk[nt][2 * r] * a.scale, dk[nt][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(dvg + nt * 8) = M::pack(dv[nt][2 * r], dv[nt][2 * r + 1]);
    }
  }
}

}  // namespace tc

// D_i = rowsum(dO ⊙ O) in fp32 (0 under the drop_rowsum plant), one warp per row.
template <typename T>
__global__ void bwd_rowsum_kernel(const T* o, const T* d_o, SdpaStrides os, SdpaStrides dos, int64_t heads_q,
                                  int64_t seq_q, int64_t dv, int64_t rows, float* dl, bool drop) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const int64_t b = row / (heads_q * seq_q), h = (row / seq_q) % heads_q, i = row % seq_q;
  const T* orow = o + b * os.batch + h * os.head + i * os.seq;
  const T* drow = d_o + b * dos.batch + h * dos.head + i * dos.seq;
  float acc = 0.f;
  for (int64_t d = threadIdx.x; d < dv; d += 32)
    acc = fmaf(static_cast<float>(orow[d]), static_cast<float>(drow[d]), acc);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += gpu::warp_xor(acc, off);
  if (threadIdx.x == 0) dl[row] = drop ? 0.f : acc;
}

// dsink_h = −Σ_(b,i) e^(sink_h − lse_i)·D_i, the sink's probability times D (the gradient of a
// logit with no value), one block per query head over its rows — every batch entry's, or the
// rows [cu_q[0], cu_q[B]) of a packed batch, whose offsets are trusted for their order as the
// kernels' are (clipped to q's rows). Each thread sums its rows in order, then a shuffle tree and
// the warps in order: the same bits every run (no atomics), and every head written (0 with no row).
constexpr int kSinkThreads = 256;

__global__ void __launch_bounds__(kSinkThreads)
    bwd_dsinks_kernel(const float* lse, const float* dl, const float* sinks, float* d_sinks, int64_t batch,
                      int64_t heads_q, int64_t seq_q, const int32_t* cu_q, int64_t total_q) {
  __shared__ float red[kSinkThreads / gpu::kWarp];
  const int64_t h = blockIdx.x;
  const float sink = sinks[h];
  float acc = 0.f;
  if (cu_q) {
    int64_t r0 = cu_q[0], r1 = cu_q[batch];
    r0 = r0 < 0 ? 0 : r0 > total_q ? total_q : r0;
    r1 = r1 < r0 ? r0 : r1 > total_q ? total_q : r1;
    const float* lh = lse + h * total_q;
    const float* dh = dl + h * total_q;
    for (int64_t i = r0 + threadIdx.x; i < r1; i += kSinkThreads) acc = fmaf(expf(sink - lh[i]), dh[i], acc);
  } else {
    for (int64_t idx = threadIdx.x; idx < batch * seq_q; idx += kSinkThreads) {
      const int64_t row = (idx / seq_q * heads_q + h) * seq_q + idx % seq_q;
      acc = fmaf(expf(sink - lse[row]), dl[row], acc);
    }
  }
  for (int off = gpu::kWarp / 2; off > 0; off >>= 1) acc += gpu::warp_xor(acc, off);
  if (threadIdx.x % gpu::kWarp == 0) red[threadIdx.x / gpu::kWarp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int w = 0; w < kSinkThreads / gpu::kWarp; ++w) sum += red[w];
    d_sinks[h] = -sum;
  }
}

// dbias's shape [bm, hm, rows, Sk] (the mask's, from its strides' zeros) and its partials'
// head slots: the query heads, or the KV heads (each group summed in its block) where the mask
// broadcasts over heads.
struct DbiasGeom {
  bool per_batch, per_head;
  int64_t bm, hm, rows, heads;
  int64_t elems() const { return bm * hm * rows; }  // times Sk
};
DbiasGeom dbias_geom(const SdpaParams& p) {
  DbiasGeom g;
  g.per_batch = p.mask_strides.batch != 0;
  g.per_head = p.mask_strides.head != 0;
  g.bm = g.per_batch ? p.batch : 1;
  g.hm = g.per_head ? p.heads_q : 1;
  g.rows = p.mask_strides.seq != 0 ? p.seq_q : 1;
  g.heads = g.per_head ? p.heads_q : p.heads_kv;
  return g;
}

// dbias = Σ of the partials [B, heads, rows·Sk] over the batch entries and head slots that
// broadcast onto each element, b then the slot in order, rounded once (the same bits every run).
template <typename T>
__global__ void bwd_dbias_kernel(const float* part, T* dbias, int64_t n, int64_t slice, int64_t batch, DbiasGeom g) {
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = idx % slice, bh = idx / slice;
    const int64_t b0 = g.per_batch ? bh / g.hm : 0, b1 = g.per_batch ? b0 + 1 : batch;
    const int64_t h0 = g.per_head ? bh % g.hm : 0, h1 = g.per_head ? h0 + 1 : g.heads;
    float acc = 0.f;
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t h = h0; h < h1; ++h) acc += part[(b * g.heads + h) * slice + e];
    dbias[idx] = T(acc);
  }
}

// dQ = scale · workspace, in dQ's dtype and strides.
template <typename T>
__global__ void bwd_convert_kernel(const float* acc, T* dq, SdpaStrides dqs, int64_t heads_q, int64_t seq_q,
                                   int64_t dqk, int64_t total, float scale) {
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = idx % dqk, row = idx / dqk;
    const int64_t b = row / (heads_q * seq_q), h = (row / seq_q) % heads_q, i = row % seq_q;
    dq[b * dqs.batch + h * dqs.head + i * dqs.seq + d] = T(acc[idx] * scale);
  }
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("sdpa_flash_backward: ") + what + ": " + cudaGetErrorString(err));
}

// Stream-ordered scratch: allocated and freed on the stream of the call, so the backward never
// waits for the device (the caller's stream may be held until the call returns).
struct DeviceScratch {
  void* ptr = nullptr;
  cudaStream_t s;
  DeviceScratch(size_t bytes, cudaStream_t stream) : s(stream) {
    if (bytes) check(cudaMallocAsync(&ptr, bytes, s), "cudaMallocAsync");
  }
  ~DeviceScratch() {
    if (ptr) (void)cudaFreeAsync(ptr, s);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
};

template <typename T, int DQK, int DV, bool kDbias>
void launch_variant(const BwdArgs& a, int64_t blocks, cudaStream_t stream) {
  const auto kernel = bwd_kernel<T, DQK, DV, kDbias>;
  const size_t smem = bwd_smem_bytes<DQK, DV>(kDbias && a.db_rows);
  if (smem > 48 * 1024) check(gpu::set_max_dynamic_smem(kernel, static_cast<int>(smem)), "cudaFuncSetAttribute");
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream>>>(a);
  check(cudaGetLastError(), "bwd_kernel launch");
}

template <typename T, int DQK, int DV>
void launch_main(const BwdArgs& a, int64_t blocks, cudaStream_t stream) {
  if (a.db_part) launch_variant<T, DQK, DV, true>(a, blocks, stream);
  else launch_variant<T, DQK, DV, false>(a, blocks, stream);
}

template <typename T>
void dispatch_main(const BwdArgs& a, int64_t dqk, int64_t dv, int64_t blocks, cudaStream_t s) {
  if (dqk == 192 && dv == 128) return launch_main<T, 192, 128>(a, blocks, s);
  if (dqk != dv) throw std::invalid_argument(flash::kHeadDimsWhy);
  switch (dqk) {
    case 32: return launch_main<T, 32, 32>(a, blocks, s);
    case 64: return launch_main<T, 64, 64>(a, blocks, s);
    case 80: return launch_main<T, 80, 80>(a, blocks, s);
    case 96: return launch_main<T, 96, 96>(a, blocks, s);
    case 128: return launch_main<T, 128, 128>(a, blocks, s);
    case 192: return launch_main<T, 192, 192>(a, blocks, s);
    case 256: return launch_main<T, 256, 256>(a, blocks, s);
    default: throw std::invalid_argument(flash::kHeadDimsWhy);
  }
}

template <typename T, int D, int kMinBlocks>
void launch_tc_variant(const tc::Args& a, int64_t blocks, cudaStream_t stream) {
  using C = tc::Cfg<D>;
  const auto kernel = tc::bwd_tc_kernel<T, D, kMinBlocks>;
  if (C::kSmemBytes > 48 * 1024)
    check(gpu::set_max_dynamic_smem(kernel, static_cast<int>(C::kSmemBytes)), "cudaFuncSetAttribute");
  kernel<<<static_cast<unsigned>(blocks), tc::kThreads, C::kSmemBytes, stream>>>(a);
  check(cudaGetLastError(), "bwd_tc_kernel launch");
}

// SdpaBwdPath::tc_two_blocks: D = 96 and 128 take the variant capped at 128 registers (two
// blocks per SM; small spills) instead of the default one block per SM. D = 32 and 64 fit 128
// registers either way and have one variant (cuda.flash lists its tactic tc2 at D = 96 and 128 only).
template <typename T, int D>
void launch_tc(const tc::Args& a, int64_t blocks, bool two_blocks, cudaStream_t stream) {
  if constexpr (D >= 96) {
    if (two_blocks) return launch_tc_variant<T, D, 2>(a, blocks, stream);
  }
  launch_tc_variant<T, D, 0>(a, blocks, stream);
}

template <typename T>
void dispatch_tc(const tc::Args& a, int64_t d, int64_t blocks, bool two_blocks, cudaStream_t s) {
  switch (d) {
    case 32: return launch_tc<T, 32>(a, blocks, two_blocks, s);
    case 64: return launch_tc<T, 64>(a, blocks, two_blocks, s);
    case 96: return launch_tc<T, 96>(a, blocks, two_blocks, s);
    case 128: return launch_tc<T, 128>(a, blocks, two_blocks, s);
    default: throw std::logic_error("sdpa_flash_backward: tensor-core kernel given an unsupported head_dim");
  }
}

// The problems the tensor-core kernel takes (see the top of this file); the rest of what
// sdpa_flash_backward_supports accepts goes to the FMA kernel.
bool tc_takes(const SdpaBackwardParams& bp) {
  const SdpaParams& p = bp.fwd;
  // By the problem's mask kind, not its pointer: sdpa_flash_backward_deterministic asks this of
  // parameters without pointers, and must see the kernel (and key block) the run will take. With
  // the pointer, a masked problem looked like the tensor-core kernel's (64 keys a block) there
  // while the run took the FMA kernel's (32): Sk 77 then spans three blocks of dQ atomics, and an
  // H100 --bitwise smoke run saw dQ differ (fp16 hq4 hkv2 Sq 40 Sk 77 d64 amask, 2026-12-05).
  const bool has_mask_tensor = p.mask_kind != SdpaMaskTensor::none;
  // Varlen runs on the FMA kernel, which places each block at its sequence's offsets; chunks on
  // it too, which masks each element to its row's chunk, and ALiBi, a per-score bias the
  // tensor-core kernel has no path for (as it has none for softcap or an additive mask). Block
  // masks too: the tensor-core kernel multiplies whole tiles, 0 by a NaN key of an unread block.
  return bp.path != SdpaBwdPath::fma && !p.varlen && p.chunk == 0 && p.alibi == SdpaAlibi::none && p.block_q == 0 &&
         (p.dtype == SdpaDType::fp16 || p.dtype == SdpaDType::bf16) && p.head_dim == p.head_dim_v &&
         tc::head_dim_ok(p.head_dim) && p.softcap == 0.f && !has_mask_tensor;
}

template <typename T>
void run_backward(const SdpaBackwardParams& bp, cudaStream_t s) {
  const SdpaParams& p = bp.fwd;
  // Varlen: the rows are [Hq, total_q], which the row-wise kernels below (rowsum, convert) read as
  // one batch entry of total_q rows (THD strides: batch strides 0).
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t row_batch = varlen ? 1 : p.batch, row_seq = varlen ? p.total_q : p.seq_q;
  const int64_t rows = row_batch * p.heads_q * row_seq;
  DeviceScratch dl(size_t(rows) * sizeof(float), s);
  DeviceScratch dq_acc(size_t(rows) * size_t(p.head_dim) * sizeof(float), s);
  const DbiasGeom dg = dbias_geom(p);
  const size_t db_bytes = size_t(sdpa_flash_dbias_scratch_bytes(bp));
  DeviceScratch db_part(db_bytes, s);
  if (db_bytes) check(cudaMemsetAsync(db_part.ptr, 0, db_bytes, s), "cudaMemsetAsync dbias partials");
  if (rows > 0) {
    check(cudaMemsetAsync(dq_acc.ptr, 0, size_t(rows) * size_t(p.head_dim) * sizeof(float), s), "cudaMemsetAsync");
    const dim3 block(32, 8);
    const int64_t blocks = (rows + block.y - 1) / block.y;
    if (blocks > 0x7fffffffLL) throw std::invalid_argument("sdpa_flash_backward: too many rows");
    bwd_rowsum_kernel<T><<<static_cast<unsigned>(blocks), block, 0, s>>>(
        static_cast<const T*>(p.o), static_cast<const T*>(bp.d_o), p.o_strides, bp.do_strides, p.heads_q, row_seq,
        p.head_dim_v, rows, static_cast<float*>(dl.ptr), p.plant == SdpaPlant::drop_rowsum);
    check(cudaGetLastError(), "bwd_rowsum_kernel launch");
  }
  if (p.has_sinks) {  // after D; every head, rows or none
    bwd_dsinks_kernel<<<static_cast<unsigned>(p.heads_q), kSinkThreads, 0, s>>>(
        p.lse, static_cast<const float*>(dl.ptr), p.sinks, bp.d_sinks, p.batch, p.heads_q, p.seq_q,
        varlen ? p.cu_seqlens_q : nullptr, p.total_q);
    check(cudaGetLastError(), "bwd_dsinks_kernel launch");
  }
  // Padding rows of a varlen batch (seqused_k): no output depends on them, so their dK and dV are 0;
  // the kernels write the keys' rows only.
  if (varlen && p.seqused_k && p.total_k > 0) {
    check(cudaMemsetAsync(bp.d_k, 0, size_t(p.total_k * p.heads_kv * p.head_dim) * sizeof(T), s), "cudaMemsetAsync dK");
    check(cudaMemsetAsync(bp.d_v, 0, size_t(p.total_k * p.heads_kv * p.head_dim_v) * sizeof(T), s),
          "cudaMemsetAsync dV");
  }
  const bool any_key = p.seq_k > 0 && p.heads_kv > 0;
  const BwdTensors tensors =
      any_key ? bwd_tensors(bp, static_cast<const float*>(dl.ptr), static_cast<float*>(dq_acc.ptr)) : BwdTensors{};
  if (any_key && tc_takes(bp)) {
    tc::Args a;
    static_cast<BwdTensors&>(a) = tensors;
    a.num_bhk = p.batch * p.heads_kv;
    flash::keys_of_rows(a.iv, 0, p.seq_q - 1, p.seq_k, &a.key_lo, &a.key_hi);
    a.scale_log2 = p.scale * 1.44269504088896340736f;
    const int64_t blocks = (p.seq_k + tc::kBN - 1) / tc::kBN * a.num_bhk;
    if (blocks > 0x7fffffffLL)
      throw std::invalid_argument("sdpa_flash_backward: B*Hkv*ceil(Sk/64) exceeds the grid limit");
    dispatch_tc<T>(a, p.head_dim, blocks, bp.path == SdpaBwdPath::tc_two_blocks, s);
  } else if (any_key) {
    BwdArgs a;
    static_cast<BwdTensors&>(a) = tensors;
    a.num_k_tiles = (p.seq_k + kBN - 1) / kBN;
    a.mask_kind = p.attn_mask ? p.mask_kind : SdpaMaskTensor::none;
    a.mask = p.attn_mask;
    a.ms = p.mask_strides;
    a.softcap = p.softcap;
    a.db_part = db_bytes ? static_cast<float*>(db_part.ptr) : nullptr;
    a.db_heads = dg.heads;
    a.db_per_head = dg.per_head;
    a.db_rows = a.db_part && p.mask_strides.seq == 0;
    flash::set_block_mask(a, p);
    const int64_t blocks = a.num_k_tiles * p.batch * p.heads_kv;
    if (blocks > 0x7fffffffLL)
      throw std::invalid_argument("sdpa_flash_backward: B*Hkv*ceil(Sk/32) exceeds the grid limit");
    dispatch_main<T>(a, p.head_dim, p.head_dim_v, blocks, s);
  }
  if (db_bytes) {  // after the main kernel's partials
    const int64_t n = dg.elems() * p.seq_k;
    const int64_t blocks = (n + 255) / 256 < 65536 ? (n + 255) / 256 : 65536;
    bwd_dbias_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
        static_cast<const float*>(db_part.ptr), static_cast<T*>(bp.d_bias), n, dg.rows * p.seq_k, p.batch, dg);
    check(cudaGetLastError(), "bwd_dbias_kernel launch");
  }
  if (rows > 0) {
    const int64_t total = rows * p.head_dim;
    const int64_t blocks = (total + 255) / 256 < 65536 ? (total + 255) / 256 : 65536;
    bwd_convert_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, s>>>(static_cast<const float*>(dq_acc.ptr),
                                                                        static_cast<T*>(bp.d_q), bp.dq_strides,
                                                                        p.heads_q, row_seq, p.head_dim, total, p.scale);
    check(cudaGetLastError(), "bwd_convert_kernel launch");
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
bool strides_ok(const SdpaStrides& s) { return s.batch % 8 == 0 && s.head % 8 == 0 && s.seq % 8 == 0; }

}  // namespace

bool sdpa_flash_backward_supports(const SdpaBackwardParams& p, const char** why) {
  const char* reason = nullptr;
  if (!sdpa_flash_supports(p.fwd, &reason)) {
  } else if (!strides_ok(p.do_strides) || !strides_ok(p.dq_strides) || !strides_ok(p.dk_strides) ||
             !strides_ok(p.dv_strides)) {
    reason = "flash backward needs dO/dQ/dK/dV strides that are multiples of 8 elements";
  } else if (!aligned16(p.d_o) || !aligned16(p.d_q) || !aligned16(p.d_k) || !aligned16(p.d_v)) {
    reason = "flash backward needs 16-byte aligned dO, dQ, dK and dV pointers";
  } else if (p.fwd.has_sinks && p.fwd.q && !p.d_sinks && p.fwd.heads_q > 0) {
    reason = "flash backward: sinks set without a dsinks tensor";
  } else if (p.dbias && p.fwd.mask_kind != SdpaMaskTensor::additive) {
    reason = "flash backward: dbias is the gradient of an additive attn_mask, which the problem lacks";
  } else if (p.dbias && p.path == SdpaBwdPath::tc_two_blocks) {
    reason = "flash backward: dbias runs on the FMA kernel, not the two-blocks-per-SM tensor-core one";
  } else if (p.dbias && p.fwd.q && !p.d_bias && dbias_geom(p.fwd).elems() * p.fwd.seq_k > 0) {
    reason = "flash backward: dbias set without a dbias tensor";
  }
  if (why) *why = reason;
  return reason == nullptr;
}

// Not in sdpa_kernels.hpp: for bench/sdpa_flash_check.cpp, which declares it itself.
// Whether sdpa_flash_backward would run the tensor-core main kernel for these parameters
// now (false when it would run the FMA kernel, or no main kernel at all).
bool sdpa_flash_backward_uses_tensor_cores(const SdpaBackwardParams& p) {
  return sdpa_flash_backward_supports(p, nullptr) && p.fwd.batch > 0 && p.fwd.heads_q > 0 && p.fwd.seq_k > 0 &&
         tc_takes(p);
}

int64_t sdpa_flash_dbias_scratch_bytes(const SdpaBackwardParams& bp) {
  if (!bp.dbias || bp.fwd.mask_kind != SdpaMaskTensor::additive) return 0;
  const DbiasGeom g = dbias_geom(bp.fwd);
  return int64_t(sizeof(float)) * bp.fwd.batch * g.heads * g.rows * bp.fwd.seq_k;
}

bool sdpa_flash_backward_takes_tc(const SdpaBackwardParams& bp) { return tc_takes(bp); }

bool sdpa_flash_backward_deterministic(const SdpaBackwardParams& bp) {
  const SdpaParams& p = bp.fwd;
  if (p.batch <= 0 || p.heads_q <= 0 || p.seq_q <= 0 || p.seq_k <= 0) return true;
  const int64_t block_keys = tc_takes(bp) ? tc::kBN : kBN;
  // Varlen: only the longest lengths are known here, and a sequence's key blocks start at its
  // own first key; no sequence's row spans more than ceil(max Sk_b / 32) blocks.
  if (p.varlen) return p.seq_k <= 2 * block_keys;
  const flash::KeyInterval iv = flash::key_interval(p);
  for (int64_t i = 0; i < p.seq_q; ++i) {
    int64_t lo = 0, hi = 0;
    flash::keys_of_rows(iv, i, i, p.seq_k, &lo, &hi);  // the row's keys: [lo, hi)
    if (hi > lo && (hi - 1) / block_keys - lo / block_keys + 1 > 2) return false;
  }
  return true;
}

void sdpa_flash_backward(const SdpaBackwardParams& p, CUstream_st* stream) {
  sdpa_check_arguments(p.fwd);
  const char* why = nullptr;
  if (!sdpa_flash_backward_supports(p, &why)) throw std::invalid_argument(why);
  // No batch entry: no row adds to any head's dsink, which must still be written.
  if (p.fwd.has_sinks && p.fwd.batch == 0 && p.fwd.heads_q > 0 && p.d_sinks)
    check(cudaMemsetAsync(p.d_sinks, 0, size_t(p.fwd.heads_q) * sizeof(float), stream), "cudaMemsetAsync dsinks");
  // Nor to dbias, whose mask may broadcast over the batch: [1, Hm, rows, Sk] of zeros.
  if (p.fwd.batch == 0 && p.dbias && p.d_bias)  // 16-bit elements
    check(cudaMemsetAsync(p.d_bias, 0, size_t(dbias_geom(p.fwd).elems() * p.fwd.seq_k) * 2, stream),
          "cudaMemsetAsync dbias");
  if (p.fwd.batch == 0 || p.fwd.heads_q == 0) return;
  if (p.fwd.dtype == SdpaDType::fp16) run_backward<__half>(p, stream);
  else run_backward<__nv_bfloat16>(p, stream);
}

}  // namespace opcts::cuda
