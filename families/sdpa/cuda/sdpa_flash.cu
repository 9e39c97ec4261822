// Tiled flash-attention-2 style SDPA forward for fp16/bf16 on tensor cores (mma.sync m16n8k16).
//
// One thread block owns kBlockM query rows of one (batch, query head); each of its 4 warps
// owns 16 or 32 of those rows (one or two m16 tiles, per head dim). Key/value tiles of kBlockN rows stream through
// shared memory with cp.async (K and V in separate buffers so the V load overlaps Q·Kᵀ and the next K load overlaps
// P·V). Scores stay in registers: the S accumulator fragment of m16n8k16 is re-packed as the A operand of the P·V
// product, so no score ever touches shared memory. The softmax is the online (running max / running sum) form in fp32,
// in the log2 domain with the softmax scale folded into log2(e) so each probability costs one ex2.approx.
//
// Masks (sdpa_kernels.hpp): the causal mask and the window are one key interval per row
// (flash::KeyInterval); a block loads only the key tiles that some of its rows may see, and
// tiles crossing an interval bound, Sk or holding a mask tensor are masked per element.
// Softcap, ALiBi and the additive mask take a general score path (natural domain, then log2).
//
// Attention sinks (SdpaParams::sinks) change no score, only each row's epilogue, in every
// variant: the head's logit (times log2 e) joins the row sum once the row's max is final.
// ALiBi (SdpaParams::alibi) changes every score, so it runs in the kGeneral variants only, on the
// general path: −slope·|i + Sk − Sq − j| joins the natural-domain score after the softcap.
//
// NaN in K/V rows that are masked (the guarantee): key rows outside the block's visible
// range [k0, k1) are zero-filled on load (never read from memory), so they cannot reach
// the tensor cores; inside it, masked scores are replaced (not added) by -inf, so a NaN
// K row never reaches the softmax; with a mask tensor, V rows of a tile that no row of the
// block sees (every score -inf) are zeroed in shared memory before P·V, so a NaN V row
// under P = 0 gives 0, not 0·NaN. A NaN in a K/V row that some row of the block sees is a
// genuine NaN of those rows' outputs.
//
// Block masks (SdpaParams::block_mask; the kBlocks variant, general and dense): a key tile that
// no pair of the block's rows and the tile's keys reads is skipped before its K and V are loaded
// (FlexAttention's kv_num_blocks, found per tile with a block-wide vote); in a tile that is read
// in part, a key of a block the row's query block does not read is masked per element as above
// (its NaN score selected to -inf before the max), and V rows no row of the block sees are zeroed
// as for a mask tensor, so the NaN of an unread block reaches neither a probability nor the P·V
// product.
//
// FP8 (SdpaParams::fp8; the kFp8 variant, general and dense): the launcher first copies the fp8
// codes into the dtype on the stream (exact: every e4m3fn and e5m2 value is a bf16 and an fp16
// value), so the tile loads and the 16-bit MMAs take them unchanged, as an fp8 MMA would. The
// descales of the block's (batch, KV head) fold into the score's factor (scale·q_descale·k_descale,
// FlashAttention 3's softmax_scale, in fp32) and v's onto O in the epilogue; under fp8 q, k, v, P is
// rounded to e4m3fn before P·V (the operand of FlashAttention 3's fp8 P·V; exact once widened),
// after the row sum has taken it unrounded. A variant of its own, so that the others keep their
// registers.
//
// Planted bugs (SdpaPlant, for the cuda.flash_* planted impls): gqa_modulo and masked_row_nan
// in every variant; the precision bugs (the P·V accumulator or the row sum rounded to the
// dtype after every key tile, lse off by log 2) only in the kGeneral variant, which a planted
// launch always takes, so the plain kernel keeps its registers.
#include "gpu/cuda/stream_scratch.cuh"
#include "sdpa_flash_common.cuh"
#include "sdpa_fp8.cuh"
#include "sdpa_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace opcts::cuda {
namespace {

// Inline-PTX building blocks (sm_80+), shared with the tensor-core backward.
using namespace flash::ptx;

// 1/x without the IEEE-division slow-path subroutine, whose call makes ptxas spill around
// it; x is a softmax denominator >= 1, far from the range where the approximation differs.
// (HIP: v_rcp_f32, 1 ulp.)
__device__ __forceinline__ float fast_rcp(float x) {
#if OPCTS_GPU_HIP
  return __builtin_amdgcn_rcpf(x);
#else
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

// ---------------------------------------------------------------------------------------
// Tile configuration per head dimension pair. Shared memory rows are padded by 8 elements
// (16 bytes): with a row pitch of D+8 halves, the 8 row addresses of one ldmatrix 8x8 land
// in 8 distinct 4-bank groups for every D that is a multiple of 16, so no bank conflicts
// without a swizzle.

template <int DQK, int DV>
struct Cfg {
  static constexpr int kWarps = 4;
  static constexpr int kDMax = DQK > DV ? DQK : DV;
  // m16 tiles per warp. Two tiles (32 query rows per warp) let every K/V fragment read
  // from shared memory feed twice as many MMAs, which is what bounds mma.sync attention;
  // the cost is a second O accumulator, which D=256 cannot afford. Measured on H200
  // (bf16, S=4096, causal): D=128 242 vs 217 TFLOP/s, D=96 216 vs 211; at D<=64 one tile
  // with kBlockN=64 was as fast or faster (D=64 225 vs 216).
  static constexpr int kMT = (DQK == DV && (DQK == 96 || DQK == 128)) ? 2 : 1;
  static constexpr int kBlockM = 16 * kMT * kWarps;
  // Two m-tiles need kBlockN=32 to keep S and O within 255 registers without spills.
  // D=256 also keeps kBlockN at 32 so Q+K+V fit in 99 KiB (sm_86/sm_89 opt-in limit) and
  // the 16x256 fp32 O accumulator plus the S tile still fit in the register file.
  static constexpr int kBlockN = kDMax <= 64 ? 64 : 32;
  // With one m-tile and D <= 128 the Q fragments live in registers for the whole key loop;
  // otherwise they would crowd out the accumulators, so Q is re-read from shared memory.
  static constexpr bool kQInRegs = kMT == 1 && DQK <= 128;
  static constexpr int kPitchQK = DQK + 8;
  static constexpr int kPitchV = DV + 8;
  static constexpr int kPitchMax = kDMax + 8;  // the Q region also stages O (pitch DV + 8)
  static constexpr int kThreads = 32 * kWarps;
  static constexpr size_t kSmemBytes =
      (size_t(kBlockM) * kPitchMax + size_t(kBlockN) * kPitchQK + size_t(kBlockN) * kPitchV) * 2;
};

struct KernelArgs {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  SdpaStrides qs, ks, vs, os;
  int64_t heads_q, heads_kv, group;  // group = Hq / Hkv
  int64_t seq_q, seq_k;
  int64_t num_q_tiles, num_bh;
  flash::KeyInterval iv;  // causal mask and window
  bool interval;          // iv bounded on some side
  // Varlen (null for the dense layouts): each block's sequence from the offsets, its interval
  // placed at its own Sk_b − Sq_b from `rel`; lse [Hq, total_q].
  const int32_t* cu_q;
  const int32_t* cu_k;
  const int32_t* used_k;  // seqused_k: each segment's keys (null: the whole segment)
  int64_t total_q;
  flash::RelInterval rel;
  SdpaMaskTensor mask_kind;
  const void* mask;
  SdpaStrides ms;
  float scale, scale_log2, softcap;
  bool general;     // softcap, ALiBi or additive mask: scores take the natural-domain path
  int64_t chunk;    // chunked-local attention (0 = off; the kGeneral variant only)
  bool gqa_modulo;  // planted
  bool nan_rows;    // planted masked_row_nan
  // Attention sinks [Hq] (null = off; every variant, in the epilogue).
  const float* sinks;
  // ALiBi slopes (null = off; the kGeneral variants only): entry b·alibi_bs + h for batch entry
  // (sequence) b and query head h.
  const float* alibi;
  int64_t alibi_bs;
  // Planted precision bugs (SdpaPlant), compiled into the kGeneral variant only, so that the
  // plain kernel the real impl runs carries none of their code.
  bool pv_in_dtype, rowsum_in_dtype, lse_plus_log2;
  // Block-sparse attention (null = off; the dense kGeneral variant only): (b, h)'s mask at
  // block_mask + bh·block_hs, rows of block_nk bytes; block_q and block_k clamped to the lengths.
  const uint8_t* block_mask;
  int64_t block_hs, block_nk;
  int block_q, block_k;
  // FP8 (the kFp8 variant only; q, k, v then point at the 16-bit copies): the descales, entry
  // b·heads_kv + hk where per (batch, KV head), else entry 0; q_descale null under an fp8 KV cache.
  // p_e4m3: P rounded to e4m3fn for P·V (fp8 q, k, v).
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  bool descale_per_head, p_e4m3;
};

// x rounded to T (round to nearest even) and back: what a T register would hold.
template <typename T>
__device__ __forceinline__ float round_to_t(float x) {
  return flash::to_f32(T(x));
}

// Copies rows [row0, row0 + kRows) of D elements into a padded smem tile; rows outside
// [lo, hi) are zero-filled without reading global memory.
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(T* smem, const T* gbase, int64_t row_stride, int64_t row0, int64_t lo,
                                          int64_t hi, int tid) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
  constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int chunk = it * kThreads + tid;
    if (kChunks % kThreads != 0 && chunk >= kChunks) break;
    const int r = chunk / kChunksPerRow;
    const int c = chunk % kChunksPerRow;
    const int64_t grow = row0 + r;
    const bool in = grow >= lo && grow < hi;
    const T* src = in ? gbase + grow * row_stride + c * 8 : gbase;
    cp_async_16(smem_addr(smem + r * (D + 8) + c * 8), src, in ? 16 : 0);
  }
}

// kGeneral: the problem has a mask tensor, a softcap or ALiBi. The plain variant (causal, window
// or no mask) compiles without that per-score code: as one kernel with runtime branches
// the extra registers spilled at D = 128 and cost ~2.6x (H200, bf16 S=4096 causal: 93 vs
// 242 TFLOP/s).
//
// kVarlen: the block's sequence comes from the offsets (KernelArgs::cu_q). A variant of its own,
// so that the dense kernels keep their lengths and interval in the parameter space rather than
// in registers live across the key loop (D = 128 has none to spare); packed batches run it with
// kGeneral, whose per-element path covers every mask.
//
// kBlocks (with kGeneral, dense): a block mask (KernelArgs::block_mask). A variant of its own, so
// that the general variant keeps its registers (ptxas 13.0, sm_90: with the block code in it, its
// spill loads grew by up to 192 bytes at fp16 D = 128).
//
// kFp8 (with kGeneral, dense): fp8 inputs (KernelArgs::k_descale), whose factors and P's rounding
// stay out of the other variants (ptxas 13.0, sm_90: the other 64 kernels' registers and spills
// unchanged; against the general variant its spill loads grow by 24 to 32 bytes at D = 128, 40 at
// D = 96, 16 at D = 192 and 8 at D = 256, none at D <= 80 nor 192 × 128).
template <typename T, int DQK, int DV, bool kGeneral, bool kVarlen, bool kBlocks = false, bool kFp8 = false>
__global__ void __launch_bounds__((Cfg<DQK, DV>::kThreads)) flash_fwd_kernel(const KernelArgs a) {
  using C = Cfg<DQK, DV>;
  constexpr int BM = C::kBlockM, BN = C::kBlockN, PQ = C::kPitchQK, PV = C::kPitchV, MT = C::kMT;
  constexpr int kWarpRows = 16 * MT;
  constexpr int kDT = DV / 8;    // 8-wide n-tiles of the O accumulator
  constexpr int kNT = BN / 8;    // 8-wide n-tiles of the S accumulator
  constexpr int kDK = DQK / 16;  // k-steps of Q·Kᵀ
  constexpr int kNK = BN / 16;   // k-steps of P·V
  constexpr float kLog2e = 1.44269504088896340736f;
  static_assert(!kBlocks || (kGeneral && !kVarlen), "block masks: the dense general variant only");
  static_assert(!kFp8 || (kGeneral && !kVarlen && !kBlocks), "fp8: the dense general variant only");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * C::kPitchMax;
  T* sV = sK + BN * PQ;
  __shared__ uint32_t sSeen[2];  // keys of the tile some row of the block sees (mask tensor)

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane >> 2;  // fragment row within the 8-row group
  const int t = lane & 3;   // fragment column pair

  // Heaviest (last, for causal) query tiles first for better tail balance; (b, h) on the
  // fast axis so that consecutive blocks share K/V of one head group in L2.
  const int64_t bid = blockIdx.x;
  const int64_t bh = bid % a.num_bh;
  const int64_t q_tile = a.num_q_tiles - 1 - bid / a.num_bh;
  const int64_t b = bh / a.heads_q;
  const int64_t h = bh % a.heads_q;
  const int64_t hk = a.gqa_modulo ? h % a.heads_kv : h / a.group;
  const int64_t m0 = q_tile * BM;
  // The head's sink (log2 domain) for the epilogue. The general variants read it here and hold one
  // register across their key loop, not the head index and the pointer (ptxas 13.0, sm_90: their
  // spills grew by 4 bytes, not 16 to 48); the plain variant reads it in the epilogue, as holding
  // it made D = 256 spill, which it does not otherwise.
  float sink = -INFINITY;
  if constexpr (kGeneral) sink = a.sinks ? a.sinks[h] * kLog2e : -INFINITY;
  // The ALiBi slope of (b, h) (b: the sequence in the varlen variant), read once per tile from
  // shared memory rather than held in a register across the key loop (ptxas 13.0, sm_90: with the
  // 32-bit distance below, the general variants' spill stores grew by at most 28 bytes, D = 96,
  // against 36 held); the plain variant has no bias. Written before the loop's first barrier, read
  // after it.
  __shared__ float sSlope;
  if (kGeneral && tid == 0) sSlope = a.alibi ? a.alibi[b * a.alibi_bs + h] : 0.f;
  // FP8: the score's factor scale·q_descale·k_descale (in this order, in fp32, as the host's) and
  // v's descale, of (b, hk); in shared memory as the slope, read per tile and in the epilogue (after
  // the barrier that ends the key loop).
  __shared__ float sFp8[2];
  if constexpr (kFp8) {
    if (tid == 0) {
      const int64_t di = a.descale_per_head ? b * a.heads_kv + hk : 0;
      float f = a.scale;
      if (a.q_descale) f *= a.q_descale[di];
      sFp8[0] = f * a.k_descale[di];
      sFp8[1] = a.v_descale[di];
    }
  }

  // The block's sequence: the problem's (dense), or sequence b of a packed batch, whose rows
  // start at its offsets (batch strides are 0 there) and whose lengths set its alignment. The
  // dense variant reads the parameters themselves (the references below bind to them), so its
  // code is the kernel's as it was before packed batches.
  int64_t vq = 0, vk = 0, q_row0 = 0, k_row0 = 0;
  flash::KeyInterval viv{};
  bool vinterval = false;
  if constexpr (kVarlen) {
    q_row0 = a.cu_q[b];
    k_row0 = a.cu_k[b];
    vq = a.cu_q[b + 1] - q_row0;
    vk = a.cu_k[b + 1] - k_row0;
    if (a.used_k) {  // clamped to the segment: the padding is never read
      const int64_t used = a.used_k[b];
      vk = used < 0 ? 0 : used < vk ? used : vk;
    }
    if (m0 >= vq) return;  // a query tile past this sequence's end (the grid has max_seqlen_q's)
    viv = flash::at_offset(a.rel, vk - vq);
    vinterval = viv.lo_off != -flash::kUnbounded || viv.hi_off != flash::kUnbounded;
  }
  const int64_t& seq_q = kVarlen ? vq : a.seq_q;
  const int64_t& seq_k = kVarlen ? vk : a.seq_k;
  const flash::KeyInterval& iv = kVarlen ? viv : a.iv;
  const bool& interval = kVarlen ? vinterval : a.interval;
  const T* qg = static_cast<const T*>(a.q) + b * a.qs.batch + h * a.qs.head;
  const T* kg = static_cast<const T*>(a.k) + b * a.ks.batch + hk * a.ks.head;
  const T* vg = static_cast<const T*>(a.v) + b * a.vs.batch + hk * a.vs.head;
  T* og = static_cast<T*>(a.o) + b * a.os.batch + h * a.os.head;
  float* lseg = a.lse + bh * a.seq_q;
  if constexpr (kVarlen) {
    qg += q_row0 * a.qs.seq;
    kg += k_row0 * a.ks.seq;
    vg += k_row0 * a.vs.seq;
    og += q_row0 * a.os.seq;
    lseg = a.lse + h * a.total_q + q_row0;
  }
  const int64_t mask_off = b * a.ms.batch + h * a.ms.head;
  const uint8_t* mbool = static_cast<const uint8_t*>(a.mask) + mask_off;
  const T* madd = static_cast<const T*>(a.mask) + mask_off;
  const bool has_mt = kGeneral && a.mask_kind != SdpaMaskTensor::none;
  // V rows of a tile that no row of the block sees are zeroed before P·V (sSeen): with a mask
  // tensor, and with a block mask, whose unread blocks hold NaN in K and V.
  const bool zero_unseen = has_mt || (kBlocks && a.block_mask);

  // Keys some row of this block may see: [k0, k1). Tiles outside it are skipped (both
  // ends); rows outside it inside a loaded tile are zero-filled.
  const int64_t m_last = m0 + BM - 1 < seq_q - 1 ? m0 + BM - 1 : seq_q - 1;
  int64_t k0, k1;
  flash::keys_of_rows(iv, m0, m_last, seq_k, &k0, &k1);
  // Chunks: a row's first and last keys never decrease with the row, so the block's rows see
  // keys from the chunk of its first row's position to the end of its last row's chunk.
  if (kGeneral && a.chunk > 0 && k0 < k1) {
    const int64_t c0 = flash::chunk_first(m0 + seq_k - seq_q, a.chunk),
                  c1 = flash::chunk_first(m_last + seq_k - seq_q, a.chunk) + a.chunk;
    if (c0 > k0) k0 = c0;
    if (c1 < k1) k1 = c1;
  }
  int nt_begin = k0 < k1 ? static_cast<int>(k0 / BN) : 0;
  const int nt_end = k0 < k1 ? static_cast<int>((k1 + BN - 1) / BN) : 0;
  // Block masks: the first tile from nt on that some pair of the block's rows and the tile's keys
  // reads (a tile of unread block pairs only is never loaded); nt_end when none. A barrier per
  // tile asked, on every thread alike.
  auto next_tile = [&](int nt) {
    if constexpr (kBlocks) {
      if (a.block_mask) {
        const uint8_t* bm = a.block_mask + bh * a.block_hs;
        for (; nt < nt_end; ++nt) {
          const int64_t c0 = int64_t(nt) * BN, c1 = c0 + BN - 1 < seq_k - 1 ? c0 + BN - 1 : seq_k - 1;
          if (flash::block_tile_reads(bm, a.block_nk, a.block_q, a.block_k, m0, m_last, c0, c1)) break;
        }
      }
    }
    return nt;
  };
  nt_begin = next_tile(nt_begin);

  float o_acc[MT][kDT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < kDT; ++i) o_acc[mt][i][0] = o_acc[mt][i][1] = o_acc[mt][i][2] = o_acc[mt][i][3] = 0.f;
  // Running max (log2 domain, scaled) and partial row sums for rows g and g+8 of each m-tile.
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  // Row of this thread's fragment row g in m-tile 0; m-tile mt adds 16*mt, the second
  // half of a fragment adds 8.
  const int64_t row_g = m0 + warp * kWarpRows + g;

  if (tid == 0) sSeen[0] = sSeen[1] = 0u;  // ordered before use by the loop's first barrier
  load_tile<T, DQK, BM, C::kThreads>(sQ, qg, a.qs.seq, m0, 0, seq_q, tid);
  if (nt_begin < nt_end) load_tile<T, DQK, BN, C::kThreads>(sK, kg, a.ks.seq, int64_t(nt_begin) * BN, k0, k1, tid);
  cp_async_commit();

  uint32_t q_frag[C::kQInRegs ? kDK : 1][4];
  T* sQw = sQ + warp * kWarpRows * PQ;  // this warp's Q rows, read by it only
  // ldmatrix lane -> address maps (see the fragment layouts of m16n8k16 in the PTX ISA).
  const int a_row = lane & 15, a_col = (lane >> 4) * 8;                                // A, Q
  const int kb_row = (lane & 7) + ((lane >> 4) << 3), kb_col = ((lane >> 3) & 1) * 8;  // B, K
  const int vb_row = (lane & 7) + (((lane >> 3) & 1) << 3), vb_col = (lane >> 4) * 8;  // B, V

  for (int nt = nt_begin; nt < nt_end; ++nt) {
    const int64_t n0 = int64_t(nt) * BN;
    cp_async_wait_all();
    __syncthreads();  // K(nt) visible to all; every warp has finished reading V(nt-1)
    load_tile<T, DV, BN, C::kThreads>(sV, vg, a.vs.seq, n0, k0, k1, tid);
    cp_async_commit();

    if constexpr (C::kQInRegs) {
      if (nt == nt_begin) {
#pragma unroll
        for (int kk = 0; kk < kDK; ++kk) ldmatrix_x4(q_frag[kk], smem_addr(sQw + a_row * PQ + kk * 16 + a_col));
      }
    }

    float s[MT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kNT; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kDK; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (C::kQInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qa[mt][i] = q_frag[kk][i];
        } else {
          ldmatrix_x4(qa[mt], smem_addr(sQw + (mt * 16 + a_row) * PQ + kk * 16 + a_col));
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        uint32_t kb[4];
        ldmatrix_x4(kb, smem_addr(sK + (np * 16 + kb_row) * PQ + kk * 16 + kb_col));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(s[mt][2 * np], qa[mt], kb[0], kb[1]);
          Mma<T>::run(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    // Scale into the log2 domain; the interval and Sk are tested only on tiles that cross
    // them (for any row of the block), a mask tensor on every tile.
    const bool need_mask = n0 + BN > seq_k ||
                           (interval && (n0 < m0 + BM - 1 + iv.lo_off || n0 + BN - 1 > m0 + iv.hi_off)) ||
                           (kGeneral && a.chunk > 0);
    // Tile-relative 32-bit limits (clamped, so they fit an int): column c of the tile is
    // kept for the element at row offset ro of this thread's rows when c < kv_lim,
    // c >= lo_lim + ro and c <= hi_lim + ro.
    int kv_lim = BN, lo_lim = -kWarpRows - 1, hi_lim = BN;
    if (need_mask) {
      const int64_t kv_left = seq_k - n0;
      kv_lim = kv_left < BN ? static_cast<int>(kv_left) : BN;
      int64_t d = row_g + iv.lo_off - n0;
      d = d < -kWarpRows - 1 ? -kWarpRows - 1 : (d > BN ? BN : d);
      lo_lim = static_cast<int>(d);
      d = row_g + iv.hi_off - n0;
      d = d < -kWarpRows - 1 ? -kWarpRows - 1 : (d > BN ? BN : d);
      hi_lim = static_cast<int>(d);
    }
    // ALiBi: the distance i + Sk − Sq − j of this thread's row g and the tile's column 0, 32-bit
    // (sdpa_flash_supports bounds Sq and Sk), so that each element adds only its constant offset.
    const int dist0 = kGeneral ? static_cast<int>(row_g + seq_k - seq_q - n0) : 0;
    const float slope = kGeneral ? sSlope : 0.f;
    // The score's factor: the softmax scale, or under fp8 with the descales folded in.
    const float qk_scale = kFp8 ? sFp8[0] : a.scale;
    const float qk_scale_log2 = kFp8 ? qk_scale * kLog2e : a.scale_log2;
    uint64_t seen = 0;  // columns of this thread that a valid row sees (mask tensor only)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < kNT; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = i * 8 + 2 * t + (e & 1);
          const int ro = mt * 16 + ((e >> 1) << 3);
          bool vis = true;
          if (need_mask) vis = col < kv_lim && col >= lo_lim + ro && col <= hi_lim + ro;
          if (kGeneral && a.chunk > 0 && vis) {  // the row's chunk, from its position
            const int64_t first = flash::chunk_first(row_g + ro + seq_k - seq_q, a.chunk), j = n0 + col;
            vis = j >= first && j < first + a.chunk;
          }
          if (kBlocks && a.block_mask && vis) {  // the key blocks the row's query block reads
            const int64_t row = row_g + ro;
            vis = row < seq_q &&
                  flash::block_reads(a.block_mask + bh * a.block_hs, a.block_nk, a.block_q, a.block_k, row, n0 + col);
          }
          float add = 0.f;
          if (has_mt) {
            const int64_t row = row_g + ro;
            if (vis && row < seq_q) {
              const int64_t j = n0 + col;
              if (a.mask_kind == SdpaMaskTensor::boolean) {
                vis = mbool[row * a.ms.seq + j] != 0;
              } else {
                add = flash::to_f32(madd[row * a.ms.seq + j]);
                if (add == -INFINITY) vis = false;
              }
            }
          }
          float x;
          if (kGeneral && a.general) {
            x = s[mt][i][e] * qk_scale;
            if (a.softcap > 0.f) x = a.softcap * tanhf(x / a.softcap);
            // ALiBi at the row's lower-right distance (the sequence's own lengths when packed).
            if (a.alibi) x -= flash::alibi_bias(slope, dist0 + ro - col);
            x = (x + add) * kLog2e;
          } else {
            x = s[mt][i][e] * qk_scale_log2;
          }
          if (!vis) x = -INFINITY;
          if (zero_unseen && vis && row_g + ro < seq_q) seen |= uint64_t(1) << col;
          s[mt][i][e] = x;
        }
      }
    }
    if (zero_unseen) {
      const uint32_t lo_bits = gpu::warp_or(static_cast<uint32_t>(seen));
      const uint32_t hi_bits = gpu::warp_or(static_cast<uint32_t>(seen >> 32));
      if (lane == 0) {
        atomicOr(&sSeen[0], lo_bits);
        if (BN > 32) atomicOr(&sSeen[1], hi_bits);
      }
    }

    // Online softmax update for rows g (r=0) and g+8 (r=1) of every m-tile.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = row_max[mt][r];
#pragma unroll
        for (int i = 0; i < kNT; ++i) mx = fmaxf(mx, fmaxf(s[mt][i][2 * r], s[mt][i][2 * r + 1]));
        mx = fmaxf(mx, gpu::warp_xor(mx, 1));
        mx = fmaxf(mx, gpu::warp_xor(mx, 2));
        // A row with nothing visible yet keeps max -inf; subtracting 0 instead keeps
        // exp2(-inf - base) = 0 rather than NaN (-inf - -inf) for a wholly masked tile.
        const float base = mx == -INFINITY ? 0.f : mx;
        const float alpha = fast_exp2(row_max[mt][r] - base);
        row_max[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int i = 0; i < kNT; ++i) {
          s[mt][i][2 * r] = fast_exp2(s[mt][i][2 * r] - base);
          s[mt][i][2 * r + 1] = fast_exp2(s[mt][i][2 * r + 1] - base);
          sum += s[mt][i][2 * r] + s[mt][i][2 * r + 1];
        }
        row_sum[mt][r] = row_sum[mt][r] * alpha + sum;
        if constexpr (kGeneral) {
          if (a.rowsum_in_dtype) row_sum[mt][r] = round_to_t<T>(row_sum[mt][r]);
        }
#pragma unroll
        for (int i = 0; i < kDT; ++i) {
          o_acc[mt][i][2 * r] *= alpha;
          o_acc[mt][i][2 * r + 1] *= alpha;
        }
      }
    }

    cp_async_wait_all();
    __syncthreads();  // V(nt) visible to all; every warp has finished reading K(nt)
    // Block masks: the next tile some pair reads (the loop's ++nt lands on it), else the next.
    int nt_next = nt + 1;
    if constexpr (kBlocks) nt_next = next_tile(nt + 1);
    if (nt_next < nt_end) {
      load_tile<T, DQK, BN, C::kThreads>(sK, kg, a.ks.seq, kBlocks ? int64_t(nt_next) * BN : n0 + BN, k0, k1, tid);
      cp_async_commit();
    }
    if (zero_unseen) {
      // V rows that no row of the block sees get P = 0 everywhere: zero them so that a NaN
      // there cannot turn 0·NaN into NaN on the tensor cores.
      const uint64_t all = uint64_t(sSeen[0]) | (uint64_t(sSeen[1]) << 32);
      constexpr int kChunksPerRow = DV / 8;
      for (int chunk = tid; chunk < BN * kChunksPerRow; chunk += C::kThreads) {
        const int r = chunk / kChunksPerRow;
        if (!((all >> r) & 1u))
          *reinterpret_cast<uint4*>(sV + r * PV + (chunk % kChunksPerRow) * 8) = make_uint4(0u, 0u, 0u, 0u);
      }
      __syncthreads();
      if (tid == 0) sSeen[0] = sSeen[1] = 0u;  // every thread has read it
    }

    // P as P·V takes it: under fp8 q, k, v rounded to e4m3fn (an fp8 MMA's operand, exact in T),
    // the row sums having taken it unrounded; else as it is (T's rounding is the pack's).
    const auto p_in = [&](float x) {
      if constexpr (kFp8) return a.p_e4m3 ? sdpa_round_p_e4m3fn(x) : x;
      return x;
    };

    // O += P·V: the S accumulator of n-tiles (2kk, 2kk+1) is exactly the A fragment of
    // k-step kk once packed to 16-bit pairs.
#pragma unroll
    for (int kk = 0; kk < kNK; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = Mma<T>::pack(p_in(s[mt][2 * kk][0]), p_in(s[mt][2 * kk][1]));
        pa[mt][1] = Mma<T>::pack(p_in(s[mt][2 * kk][2]), p_in(s[mt][2 * kk][3]));
        pa[mt][2] = Mma<T>::pack(p_in(s[mt][2 * kk + 1][0]), p_in(s[mt][2 * kk + 1][1]));
        pa[mt][3] = Mma<T>::pack(p_in(s[mt][2 * kk + 1][2]), p_in(s[mt][2 * kk + 1][3]));
      }
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, smem_addr(sV + (kk * 16 + vb_row) * PV + dp * 16 + vb_col));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(o_acc[mt][2 * dp], pa[mt], vb[0], vb[1]);
          Mma<T>::run(o_acc[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
    if constexpr (kGeneral) {
      if (a.pv_in_dtype) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int i = 0; i < kDT; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) o_acc[mt][i][e] = round_to_t<T>(o_acc[mt][i][e]);
      }
    }
    if constexpr (kBlocks) nt = nt_next - 1;
  }
  // With no key tile at all, the Q load above is still in flight, and cp.async.wait_group
  // only covers this thread's own copies: the barrier makes sure no other thread's Q copy
  // lands in the rows this warp is about to overwrite with O (compute-sanitizer racecheck
  // flagged it). With key tiles it also orders the last P·V (and Q) reads before the
  // epilogue, which stages O over the Q region with another pitch.
  cp_async_wait_all();
  __syncthreads();

  // Finish the row sums across the quad and normalise. A row with no visible key has sum 0:
  // it writes O = 0 and lse = -inf. The normalised O goes to this warp's rows of the Q
  // region (pitch DV + 8) so that the global stores are full 16-byte rows.
  // A sink σ (log2 domain) is one more term of the sum: with the max raised to M = max(m, σ),
  // sum' = sum·2^(m − M) + 2^(σ − M) and O's factor 2^(m − M) (0 for a row with no key, whose
  // sum' is then 1 at M = σ: O = 0, lse = the sink).
  if constexpr (!kGeneral) sink = a.sinks ? a.sinks[h] * kLog2e : -INFINITY;
  // FP8: v's descale multiplies O (the codes of V went into P·V), after the normalisation's factor.
  float o_descale = 1.f;
  if constexpr (kFp8) o_descale = sFp8[1];
  T* sOw = sQ + warp * kWarpRows * PV;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = row_sum[mt][r];
      sum += gpu::warp_xor(sum, 1);
      sum += gpu::warp_xor(sum, 2);
      float mx = row_max[mt][r], o_scale = 1.f;
      if (a.sinks) {
        const float m_new = fmaxf(mx, sink);
        const float base = m_new == -INFINITY ? 0.f : m_new;  // a -inf sink on a row with no key
        o_scale = fast_exp2(mx - base);
        sum = sum * o_scale + fast_exp2(sink - base);
        mx = m_new;
      }
      const bool empty = !(sum > 0.f);
      inv[r] = empty ? (a.nan_rows ? __int_as_float(0x7fc00000) : 0.f) : o_scale * fast_rcp(sum);
      if constexpr (kFp8) inv[r] *= o_descale;
      const int64_t row = row_g + mt * 16 + 8 * r;
      float log2_sum = log2f(sum);
      if constexpr (kGeneral) {
        if (a.lse_plus_log2) log2_sum += 1.f;  // log2(2·sum)
      }
      if (t == 0 && row < seq_q) lseg[row] = empty ? -INFINITY : (mx + log2_sum) * 0.69314718055994530942f;
    }
#pragma unroll
    for (int i = 0; i < kDT; ++i) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint32_t packed = Mma<T>::pack(o_acc[mt][i][2 * r] * inv[r], o_acc[mt][i][2 * r + 1] * inv[r]);
        *reinterpret_cast<uint32_t*>(sOw + (mt * 16 + g + 8 * r) * PV + i * 8 + 2 * t) = packed;
      }
    }
  }
  gpu::syncwarp();
  constexpr int kChunksPerRow = DV / 8;
#pragma unroll
  for (int it = 0; it < kWarpRows * kChunksPerRow / 32; ++it) {
    const int chunk = it * 32 + lane;
    const int r = chunk / kChunksPerRow;
    const int c = chunk % kChunksPerRow;
    const int64_t row = m0 + warp * kWarpRows + r;
    if (row < seq_q)
      *reinterpret_cast<uint4*>(og + row * a.os.seq + c * 8) = *reinterpret_cast<const uint4*>(sOw + r * PV + c * 8);
  }
}

// Sk = 0: every row sees no key (lse = -inf, or its head's sink).
template <typename T>
__global__ void empty_rows_kernel(void* o, float* lse, SdpaStrides os, int64_t heads_q, int64_t seq_q,
                                  int64_t head_dim_v, int64_t rows, bool nan_rows, const float* sinks) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const int64_t b = row / (heads_q * seq_q);
  const int64_t h = (row / seq_q) % heads_q;
  const int64_t i = row % seq_q;
  T* dst = static_cast<T*>(o) + b * os.batch + h * os.head + i * os.seq;
  const float z = nan_rows ? __int_as_float(0x7fc00000) : 0.f;
  for (int64_t d = threadIdx.x; d < head_dim_v; d += blockDim.x) dst[d] = T(z);
  if (threadIdx.x == 0) lse[row] = sinks ? sinks[h] : -INFINITY;
}

// FP8: n codes (E5M2 where e5m2, else E4M3FN) into T, exactly; 8 consecutive elements a thread,
// over a grid-stride loop.
template <typename T>
__global__ void fp8_to_dtype_kernel(const uint8_t* in, T* out, int64_t n, bool e5m2) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * 8;
  for (int64_t i0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8; i0 < n; i0 += stride) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (i0 + j < n) out[i0 + j] = T(sdpa_fp8_to_f32(in[i0 + j], e5m2));
  }
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("sdpa_flash_forward: ") + what + ": " + cudaGetErrorString(err));
}

template <typename T, int DQK, int DV, bool kGeneral, bool kVarlen = false, bool kBlocks = false, bool kFp8 = false>
void launch_variant(const KernelArgs& a, int64_t blocks, cudaStream_t stream) {
  using C = Cfg<DQK, DV>;
  // The opt-in for more than 48 KiB of dynamic shared memory is per kernel and per device;
  // setting it every call is cheap and keeps multi-device processes correct.
  if (C::kSmemBytes > 48 * 1024) {
    const cudaError_t err = gpu::set_max_dynamic_smem(flash_fwd_kernel<T, DQK, DV, kGeneral, kVarlen, kBlocks, kFp8>,
                                                      static_cast<int>(C::kSmemBytes));
    if (err != cudaSuccess)
      throw std::runtime_error(std::string("sdpa_flash_forward: cudaFuncSetAttribute: ") + cudaGetErrorString(err));
  }
  flash_fwd_kernel<T, DQK, DV, kGeneral, kVarlen, kBlocks, kFp8>
      <<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, stream>>>(a);
  check_launch("flash_fwd_kernel launch");
}

template <typename T, int DQK, int DV>
void launch(const SdpaParams& p, cudaStream_t stream) {
  using C = Cfg<DQK, DV>;
  const int64_t num_q_tiles = (p.seq_q + C::kBlockM - 1) / C::kBlockM;
  const int64_t num_bh = p.batch * p.heads_q;
  const int64_t blocks = num_q_tiles * num_bh;
  if (blocks > 0x7fffffffLL)
    throw std::invalid_argument("sdpa_flash_forward: B*Hq*ceil(Sq/block_m) exceeds the grid limit");

  KernelArgs a;
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.o = p.o;
  a.lse = p.lse;
  a.qs = p.q_strides;
  a.ks = p.k_strides;
  a.vs = p.v_strides;
  a.os = p.o_strides;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.group = p.heads_q / p.heads_kv;
  a.seq_q = p.seq_q;
  a.seq_k = p.seq_k;
  a.num_q_tiles = num_q_tiles;
  a.num_bh = num_bh;
  a.iv = flash::key_interval(p);
  a.interval = a.iv.lo_off != -flash::kUnbounded || a.iv.hi_off != flash::kUnbounded;
  a.cu_q = p.cu_seqlens_q;
  a.cu_k = p.cu_seqlens_k;
  a.used_k = p.cu_seqlens_q ? p.seqused_k : nullptr;
  a.total_q = p.total_q;
  a.rel = flash::rel_interval(p);
  a.mask_kind = p.attn_mask ? p.mask_kind : SdpaMaskTensor::none;
  a.mask = p.attn_mask;
  a.ms = p.mask_strides;
  a.scale = p.scale;
  a.scale_log2 = p.scale * 1.44269504088896340736f;
  a.softcap = p.softcap;
  a.alibi = p.alibi != SdpaAlibi::none ? p.alibi_slopes : nullptr;
  a.alibi_bs = flash::alibi_batch_stride(p);
  a.general = p.softcap > 0.f || a.mask_kind == SdpaMaskTensor::additive || a.alibi != nullptr;
  a.chunk = p.chunk;
  a.sinks = p.has_sinks ? p.sinks : nullptr;
  a.gqa_modulo = p.plant == SdpaPlant::gqa_modulo;
  a.nan_rows = p.plant == SdpaPlant::masked_row_nan;
  a.pv_in_dtype = p.plant == SdpaPlant::pv_in_dtype;
  a.rowsum_in_dtype = p.plant == SdpaPlant::rowsum_in_dtype;
  a.lse_plus_log2 = p.plant == SdpaPlant::lse_plus_log2;
  const bool precision_plant = a.pv_in_dtype || a.rowsum_in_dtype || a.lse_plus_log2;
  flash::set_block_mask(a, p);
  const bool fp8 = p.fp8 != SdpaFp8::none;
  a.q_descale = p.fp8 == SdpaFp8::qkv ? p.q_descale : nullptr;
  a.k_descale = p.k_descale;
  a.v_descale = p.v_descale;
  a.descale_per_head = p.descale_per_head;
  a.p_e4m3 = p.fp8 == SdpaFp8::qkv;

  // fp8 is dense and without block masks (sdpa_flash_supports); its variant is a general one.
  if (fp8) launch_variant<T, DQK, DV, true, false, false, true>(a, blocks, stream);
  else if (a.cu_q) launch_variant<T, DQK, DV, true, true>(a, blocks, stream);
  else if (a.block_mask) launch_variant<T, DQK, DV, true, false, true>(a, blocks, stream);
  else if (a.general || a.mask_kind != SdpaMaskTensor::none || precision_plant || a.chunk > 0)
    launch_variant<T, DQK, DV, true>(a, blocks, stream);
  else launch_variant<T, DQK, DV, false>(a, blocks, stream);
}

template <typename T>
void dispatch_head_dim(const SdpaParams& p, cudaStream_t stream) {
  const int64_t dqk = p.head_dim, dv = p.head_dim_v;
  if (dqk == 192 && dv == 128) return launch<T, 192, 128>(p, stream);
  if (dqk != dv) throw std::invalid_argument(flash::kHeadDimsWhy);
  switch (dqk) {
    case 32: return launch<T, 32, 32>(p, stream);
    case 64: return launch<T, 64, 64>(p, stream);
    case 80: return launch<T, 80, 80>(p, stream);
    case 96: return launch<T, 96, 96>(p, stream);
    case 128: return launch<T, 128, 128>(p, stream);
    case 192: return launch<T, 192, 192>(p, stream);
    case 256: return launch<T, 256, 256>(p, stream);
    default: throw std::invalid_argument(flash::kHeadDimsWhy);
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// FP8: the elements a dense tensor of `heads` heads, `seq` rows and `d` columns spans at strides s
// (its last element's offset + 1; the whole tensor where contiguous), 0 when empty.
int64_t span(const SdpaStrides& s, int64_t batch, int64_t heads, int64_t seq, int64_t d) {
  if (batch <= 0 || heads <= 0 || seq <= 0 || d <= 0) return 0;
  return (batch - 1) * s.batch + (heads - 1) * s.head + (seq - 1) * s.seq + d;
}
int64_t fp8_q_span(const SdpaParams& p) {
  return p.fp8 == SdpaFp8::qkv ? span(p.q_strides, p.batch, p.heads_q, p.seq_q, p.head_dim) : 0;
}
int64_t fp8_k_span(const SdpaParams& p) { return span(p.k_strides, p.batch, p.heads_kv, p.seq_k, p.head_dim); }
int64_t fp8_v_span(const SdpaParams& p) { return span(p.v_strides, p.batch, p.heads_kv, p.seq_k, p.head_dim_v); }

// What the flash forward refuses of fp8 (SdpaParams::fp8), or null.
const char* fp8_why(const SdpaParams& p) {
  if (p.fp8 == SdpaFp8::none) return nullptr;
  if (p.fp8 != SdpaFp8::qkv && p.fp8 != SdpaFp8::kv) return "flash kernel: unknown fp8 tensors";
  if (p.fp8_format != OPCTS_DL_FLOAT8_E4M3FN && p.fp8_format != OPCTS_DL_FLOAT8_E5M2)
    return "flash kernel: fp8 codes are e4m3fn or e5m2";
  if (p.varlen || p.cu_seqlens_q) return "flash kernel: fp8 takes the dense layouts (bhsd, bshd) only";
  if (p.block_q != 0 || p.block_k != 0)
    return "flash kernel: fp8 with a block mask is not implemented (the block-mask variant has no fp8 path)";
  if (p.q && (!p.k_descale || !p.v_descale || (p.fp8 == SdpaFp8::qkv && !p.q_descale)) && p.batch > 0 &&
      p.heads_q > 0 && p.seq_q > 0 && p.seq_k > 0)
    return "flash kernel: fp8 set without its descale tensors (q_descale with fp8 q, k_descale, v_descale)";
  return nullptr;
}

// FP8: n codes at `in` copied into T at `out` on the stream.
template <typename T>
void fp8_to_dtype(const void* in, void* out, int64_t n, bool e5m2, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int64_t want = (n + 8 * kThreads - 1) / (8 * kThreads);
  const unsigned blocks = static_cast<unsigned>(want < 65535 ? want : 65535);
  fp8_to_dtype_kernel<T>
      <<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(in), static_cast<T*>(out), n, e5m2);
  check_launch("fp8_to_dtype_kernel launch");
}

// Every row start must be 16-byte aligned for cp.async/vector stores: base pointer aligned
// and every stride a multiple of 8 elements (2-byte dtypes).
bool strides_ok(const SdpaStrides& s) { return s.batch % 8 == 0 && s.head % 8 == 0 && s.seq % 8 == 0; }

// What the flash kernels refuse of a block mask (SdpaParams::block_q), or null.
const char* block_mask_why(const SdpaParams& p) {
  if (p.block_q == 0 && p.block_k == 0) return nullptr;
  if (p.block_q <= 0 || p.block_k <= 0) return "flash kernel: block_q and block_k must both be > 0 (or both 0)";
  if (p.varlen || p.cu_seqlens_q) return "flash kernel: block masks take the dense layouts (bhsd, bshd) only";
  if (p.seq_q > INT32_MAX || p.seq_k > INT32_MAX)
    return "flash kernel: block masks index rows and keys in 32 bits (Sq and Sk below 2^31)";
  if (p.q && !p.block_mask && p.batch > 0 && p.heads_q > 0 && p.seq_q > 0 && p.seq_k > 0)
    return "flash kernel: block_q set without a block_mask tensor";
  return nullptr;
}

}  // namespace

bool sdpa_flash_supports(const SdpaParams& p, const char** why) {
  const char* reason = nullptr;
  if (p.dtype == SdpaDType::fp32) reason = "flash kernel supports fp16 and bf16 only, not fp32";
  else if (p.dtype != SdpaDType::fp16 && p.dtype != SdpaDType::bf16) reason = "flash kernel: unknown dtype";
  else if (!flash::is_supported_head_dims(p.head_dim, p.head_dim_v)) reason = flash::kHeadDimsWhy;
  else if (p.batch < 0 || p.heads_q < 0 || p.heads_kv < 0 || p.seq_q < 0 || p.seq_k < 0)
    reason = "flash kernel: negative dimension";
  else if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    reason = "flash kernel needs heads_q to be a multiple of heads_kv (heads_kv > 0)";
  else if (p.window_left < -1 || p.window_right < -1) reason = "flash kernel: window bounds must be >= -1";
  else if (!(p.softcap >= 0.f) || p.softcap == INFINITY) reason = "flash kernel: softcap must be finite and >= 0";
  else if (p.mask_kind != SdpaMaskTensor::none && p.q && !p.attn_mask && p.batch > 0 && p.seq_q > 0 &&
           p.seq_k > 0)  // an empty mask has no storage
    reason = "flash kernel: mask_kind set without an attn_mask pointer";
  else if (!strides_ok(p.q_strides) || !strides_ok(p.k_strides) || !strides_ok(p.v_strides) || !strides_ok(p.o_strides))
    reason = "flash kernel needs batch/head/seq strides that are multiples of 8 elements";
  else if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.o))
    reason = "flash kernel needs 16-byte aligned q, k, v and o pointers";
  else if (p.block_table || (p.cu_seqlens_q && !p.cu_seqlens_k))  // a paged problem's tensors
    reason = "flash kernel takes the dense and varlen layouts; the paged KV cache is cuda.flash_decode's";
  else if (p.has_sinks && p.q && !p.sinks && p.heads_q > 0) reason = "flash kernel: sinks set without a sinks tensor";
  else if (p.alibi != SdpaAlibi::none && p.q && !p.alibi_slopes && p.batch > 0 && p.heads_q > 0)
    reason = "flash kernel: alibi set without an alibi_slopes tensor";
  else if (p.alibi != SdpaAlibi::none && (p.seq_q > flash::kAlibiMaxSeq || p.seq_k > flash::kAlibiMaxSeq))
    reason = "flash kernel: ALiBi's distances are 32-bit (Sq and Sk below 2^31 - 4096)";
  else if (!(reason = block_mask_why(p))) reason = fp8_why(p);
  if (why) *why = reason;
  return reason == nullptr;
}

void sdpa_flash_forward(const SdpaParams& p, CUstream_st* stream) {
  sdpa_check_arguments(p);
  const char* why = nullptr;
  if (!sdpa_flash_supports(p, &why)) throw std::invalid_argument(why);
  if (p.batch == 0 || p.heads_q == 0 || p.seq_q == 0) return;
  const cudaStream_t s = stream;
  // Sk = 0 everywhere: no key to load. A packed batch's rows are its sequences', which the main
  // kernel places (a sequence of no key writes O = 0 and lse = -inf there).
  if (p.seq_k == 0 && !p.cu_seqlens_q) {
    const int64_t rows = p.batch * p.heads_q * p.seq_q;
    const dim3 block(32, 8);
    const int64_t blocks = (rows + block.y - 1) / block.y;
    if (blocks > 0x7fffffffLL) throw std::invalid_argument("sdpa_flash_forward: too many rows for one grid");
    const bool nan_rows = p.plant == SdpaPlant::masked_row_nan;
    const float* sinks = p.has_sinks ? p.sinks : nullptr;
    if (p.dtype == SdpaDType::fp16)
      empty_rows_kernel<__half><<<static_cast<unsigned>(blocks), block, 0, s>>>(
          p.o, p.lse, p.o_strides, p.heads_q, p.seq_q, p.head_dim_v, rows, nan_rows, sinks);
    else
      empty_rows_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), block, 0, s>>>(
          p.o, p.lse, p.o_strides, p.heads_q, p.seq_q, p.head_dim_v, rows, nan_rows, sinks);
    check_launch("empty_rows_kernel launch");
    return;
  }
  if (p.fp8 == SdpaFp8::none) {
    if (p.dtype == SdpaDType::fp16) dispatch_head_dim<__half>(p, s);
    else dispatch_head_dim<__nv_bfloat16>(p, s);
    return;
  }
  // FP8: the codes copied into the dtype (freed on the stream after the kernel), the kernel run on
  // the copies at the same strides.
  StreamScratch scratch(s);
  SdpaParams c = p;
  const bool e5m2 = p.fp8_format == OPCTS_DL_FLOAT8_E5M2, fp16 = p.dtype == SdpaDType::fp16;
  const auto copy = [&](const void* codes, int64_t n, const char* what) -> const void* {
    void* out = scratch.alloc(static_cast<size_t>(n) * 2, what);
    fp16 ? fp8_to_dtype<__half>(codes, out, n, e5m2, s) : fp8_to_dtype<__nv_bfloat16>(codes, out, n, e5m2, s);
    return out;
  };
  if (p.fp8 == SdpaFp8::qkv) c.q = copy(p.q, fp8_q_span(p), "fp8 q in the dtype");
  c.k = copy(p.k, fp8_k_span(p), "fp8 k in the dtype");
  c.v = copy(p.v, fp8_v_span(p), "fp8 v in the dtype");
  if (fp16) dispatch_head_dim<__half>(c, s);
  else dispatch_head_dim<__nv_bfloat16>(c, s);
}

int64_t sdpa_flash_scratch_bytes(const SdpaParams& p) {
  if (p.fp8 == SdpaFp8::none) return 0;
  return 2 * (fp8_q_span(p) + fp8_k_span(p) + fp8_v_span(p));  // 16-bit copies
}

}  // namespace opcts::cuda
