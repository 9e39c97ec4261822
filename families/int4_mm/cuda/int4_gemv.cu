// cuda.int4_gemv: M <= 16 weight-only int4 matmul in one pass over the packed weight; split-K partial sums, where K is
// split, added in a fixed order.
//
// Grid (blocks of column units, K slices); a block of kGenericWarps warps holds kGenericWarps / wu
// units and wu warps per unit, which take the unit's items of the block's K slice in turn
// (int4_mm_layout.cuh's table: 16-byte tinygemm fragments, 16-byte rows of unpacked bytes,
// 32-byte runs of AWQ words, 128-byte runs of GPTQ words, consecutive Q4_0 blocks). A lane first
// loads Code::kBatch items (gemv_load: the packed words and their group parameters, all in flight
// together), then dequantizes them in registers and accumulates every row of x in fp32 FMA
// (gemv_use). Lanes sharing a column are summed with a butterfly over the lane bits that differ,
// the unit's warps through shared memory in warp order, and slices, when K is split, by a second
// kernel in slice order: no atomics, the same bytes on every run. Where the units alone give the
// GPU enough warps K is not split: the block writes y and there is no second kernel and no
// workspace.
// Portable (gpu/portable/gpu.hpp): no inline PTX; the shuffle is the only warp primitive,
// 32 lanes wide on every target (a wave64 wavefront holds two of these warps, one per half).
#include "gpu/portable/gpu.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "families/int4_mm/cuda/int4_gemv_tiny.cuh"
#include "families/int4_mm/cuda/int4_mm_args.cuh"
#include "families/int4_mm/cuda/int4_mm_layout.cuh"
#include "gpu/cuda/cp_async.cuh"

namespace opcts::cuda {

namespace {

using int4mm::Args;
using int4mm::kLanes;
using int4mm::kThreads;
using int4mm::kWarps;

static_assert(kLanes == gpu::kWarp, "the butterfly's shuffles span the fragment's lanes");

// The slot of a representative lane (Code::representative) in the shared buffer.
template <Int4Format F>
constexpr int kReps = F == Int4Format::gptq                               ? kLanes
                      : F == Int4Format::tinygemm || F == Int4Format::awq ? 8
                                                                          : 1;

template <Int4Format F>
__device__ __forceinline__ int rep_slot(int lane) {
  return F == Int4Format::tinygemm ? lane / 4 : F == Int4Format::awq || F == Int4Format::gptq ? lane : 0;
}

// The generic kernel's blocks: 8 warps. A 4-warp variant at M = 1 was a benchmark column
// until docs/status/data/sm90_int4_mm_bench_2026-12-01b.txt (there: gptq 0.16 against 0.10 of
// the copy on the large shapes, tinygemm 0.02 lower); nothing selected it since, and its 20
// kernels cost every CUDA and -O3 HIP build seconds of CPU (HIP at -O3: ~2.5 s a target), so it
// went. gptq's lead there is still to be taken up by the planner.
constexpr int kGenericWarps = 8;

// The work split of one launch (plan()): `units` column units of `items` items each; a block
// holds ub units with wu warps each (ub·wu = kGenericWarps) and one of `slices` K slices of
// per_slice items.
struct Split {
  int64_t units, items, blocks, slices, per_slice;
  int wu, ub;
};

template <Int4Format F, class T, int MT, bool Planted, int B>
__global__ void __launch_bounds__(kGenericWarps* kLanes) gemv_kernel(Args a, Split sp, float* ws, T* y, int64_t ldy) {
  using Code = int4mm::Code<F, T, Planted>;
  using Frag = typename Code::Frag;
  constexpr int C = Code::kCols;
  __shared__ float part[kGenericWarps][kReps<F>][MT][C];
  const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
  const int sub = warp % sp.wu;  // this warp's turn among its unit's warps
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * sp.ub + warp / sp.wu;
  const bool live = unit < sp.units;  // the last block may hold fewer units (warp-uniform)
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * sp.per_slice,
                i1 = i0 + sp.per_slice < sp.items ? i0 + sp.per_slice : sp.items;

  float acc[MT][C];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int c = 0; c < C; ++c) acc[m][c] = 0.0f;
  if (live)
    for (int64_t item = i0 + sub; item < i1; item += static_cast<int64_t>(sp.wu) * B) {
      Frag f[B];
#pragma unroll
      for (int b = 0; b < B; ++b)
        if (item + b * sp.wu < i1) f[b] = Code::gemv_load(a, unit, item + b * sp.wu, lane);
#pragma unroll
      for (int b = 0; b < B; ++b)
        if (item + b * sp.wu < i1) Code::template gemv_use<MT>(a, f[b], unit, item + b * sp.wu, lane, acc);
    }

#pragma unroll
  for (int off = 1; off < kLanes; off <<= 1)
    if (Code::kShareMask & off)
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[m][c] += gpu::warp_xor(acc[m][c], off);

  if (Code::representative(lane))
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int c = 0; c < C; ++c) part[warp][rep_slot<F>(lane)][m][c] = acc[m][c];
  __syncthreads();
  if (sub != 0 || !live || !Code::representative(lane)) return;
  for (int m = 0; m < MT && m < a.m; ++m)
    for (int c = 0; c < C; ++c) {
      const int64_t col = Code::column(unit, lane, c);
      if (col >= a.n) continue;
      float s = part[warp][rep_slot<F>(lane)][m][c];
      for (int w = 1; w < sp.wu; ++w) s += part[warp + w][rep_slot<F>(lane)][m][c];
      if (sp.slices == 1) y[m * ldy + col] = int4mm::round_to<T>(s);
      else ws[(static_cast<int64_t>(blockIdx.y) * a.m + m) * a.n + col] = s;
    }
}

template <class T>
__global__ void gemv_finalize(const float* ws, int64_t slices, int64_t m, int64_t n, T* y, int64_t ldy) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = ws[i];
    for (int64_t sl = 1; sl < slices; ++sl) s += ws[sl * m * n + i];
    y[(i / n) * ldy + i % n] = int4mm::round_to<T>(s);
  }
}

// The fast path (tinygemm, innerKTiles 8, no plant; int4_gemv_tiny.cuh for the per-thread
// work): a block of bw = tb·wk warps holds tb units with wk warps each and one K slice (the fma
// kernel: bw = kTinyWarps), which it walks in chunks of super-tiles whose x fits the staging
// bound; warp sub of a unit takes its items sub, sub + wk, ... of the chunk (fma: batches of
// them). Two kernels:
//  - tiny_mma_kernel (CUDA): a unit is a pair of n-tiles and an item one super-tile of both
//    (1 KiB); each warp streams its items through a ring of S slots in shared memory with
//    cp.async (S − 1 in flight), the block staging the chunk's x while the first ones load; the
//    m16n8k16 products sum each warp's k, y[2t + e][column g] in lane (g, t).
//  - tiny_kernel (fp32 FMA; HIP): a unit is one n-tile and an item one super-tile (512 bytes); a
//    lane loads a batch of items into registers before it uses them, the next batch after; the
//    quad's lanes are summed by a butterfly.
// The unit's warps are added in warp order through shared memory, slices by gemv_finalize.
constexpr int kTinyWarps = 8;
// The mma kernel's largest block (its launch bounds; the registers of one SM at 80 a thread):
// 24 warps, 16 at M > 8.
constexpr int kTinyMmaMaxWarps = 24, kTinyMmaMaxWarps16 = 16;

// units (n-tiles, or pairs of them) of items super-tiles; blocks × slices blocks of tb units with
// wk warps each (bw = tb·wk warps); chunk: super-tiles of x staged at a time (row m of the staged
// x at xs + 128·chunk·m).
struct TinySplit {
  int64_t units, items, blocks, slices, per_slice, chunk;
  int wk, tb, bw;
};

// Where a warp of the fast path stands: its `unit` (live: < units; warp-uniform), its turn `sub`
// among the unit's warps, the block's K slice [i0, i1) of super-tiles.
struct TinyWarp {
  int tid, warp, lane, sub;
  int64_t unit, i0, i1;
  bool live;
};

__device__ __forceinline__ TinyWarp tiny_warp(const TinySplit& sp) {
  TinyWarp w;
  w.tid = static_cast<int>(threadIdx.x);
  w.warp = w.tid / kLanes;
  w.lane = w.tid % kLanes;
  w.sub = w.warp % sp.wk;
  w.unit = static_cast<int64_t>(blockIdx.x) * sp.tb + w.warp / sp.wk;
  w.live = w.unit < sp.units;
  w.i0 = static_cast<int64_t>(blockIdx.y) * sp.per_slice;
  w.i1 = w.i0 + sp.per_slice < sp.items ? w.i0 + sp.per_slice : sp.items;
  return w;
}

// The fma kernel's walk: per chunk, this warp's first batch of B items is loaded by fetch(item),
// stage(ic, ie) stages x[:, 128·ic .. 128·ie) (the block's barriers around it), then use(frag,
// item) runs for each of this warp's items in order, the next batch loaded after the current one
// is used (its accumulators leave no registers for a second batch).
template <int B, class Frag, class Fetch, class Stage, class Use>
__device__ __forceinline__ void tiny_walk(const TinySplit& sp, const TinyWarp& w, Fetch fetch, Stage stage, Use use) {
  const int64_t step = static_cast<int64_t>(B) * sp.wk;
  Frag f[B];
  for (int64_t ic = w.i0; ic < w.i1; ic += sp.chunk) {
    const int64_t ie = ic + sp.chunk < w.i1 ? ic + sp.chunk : w.i1;
    int64_t ib = w.live ? ic + static_cast<int64_t>(w.sub) * B : ie;  // a warp past the last tile takes none
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (ib + b < ie) f[b] = fetch(ib + b);
    __syncthreads();  // the previous chunk's readers are done with the staging
    stage(ic, ie);
    __syncthreads();
    for (; ib < ie; ib += step) {
#pragma unroll
      for (int b = 0; b < B; ++b)
        if (ib + b < ie) use(f[b], ib + b);
#pragma unroll
      for (int b = 0; b < B; ++b)
        if (ib + step + b < ie) f[b] = fetch(ib + step + b);
    }
  }
}

// tiny_kernel (fp32 FMA, MT rows of x per thread). Three blocks per SM (85 registers): 24 warps
// of batches in flight.
template <class T, int MT, bool OneGroup>
__global__ void OPCTS_LAUNCH_BOUNDS(kTinyWarps* kLanes, 3)
    tiny_kernel(Args a, TinySplit sp, float* ws, T* y, int64_t ldy) {
  constexpr int B = int4mm::tiny::batch(MT);
  extern __shared__ float xs[];  // MT rows of the chunk, 128 · sp.chunk floats apart
  __shared__ float part[kTinyWarps][MT][8];
  const TinyWarp w = tiny_warp(sp);
  const int64_t ld = 128 * sp.chunk;

  float acc[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = 0.0f;
  int64_t ic = 0;
  const int4mm::tiny::Source src = int4mm::tiny::source(a, w.unit, w.lane);
  tiny_walk<B, int4mm::tiny::Frag<OneGroup>>(
      sp, w, [&](int64_t item) { return int4mm::tiny::load<OneGroup>(src, item); },
      [&](int64_t c0, int64_t c1) {
        ic = c0;
        int4mm::tiny::stage_x<T>(a, 128 * c0, 128 * (c1 - c0), MT, ld, xs, w.tid, kTinyWarps * kLanes);
      },
      [&](const int4mm::tiny::Frag<OneGroup>& f, int64_t item) {
        int4mm::tiny::use<T, MT, OneGroup>(a, f, xs + 128 * (item - ic), ld, w.lane, acc);
      });

  float s[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    s[m] = acc[m][0] + acc[m][1];
    s[m] += gpu::warp_xor(s[m], 1);
    s[m] += gpu::warp_xor(s[m], 2);
  }
  if (w.lane % 4 == 0)
#pragma unroll
    for (int m = 0; m < MT; ++m) part[w.warp][m][w.lane / 4] = s[m];
  __syncthreads();
  if (w.sub != 0 || !w.live || w.lane % 4 != 0) return;
  const int64_t col = 8 * w.unit + w.lane / 4;
  for (int m = 0; m < MT && m < a.m; ++m) {
    float t = part[w.warp][m][w.lane / 4];
    for (int k = 1; k < sp.wk; ++k) t += part[w.warp + k][m][w.lane / 4];
    if (sp.slices == 1) y[m * ldy + col] = int4mm::round_to<T>(t);
    else ws[(static_cast<int64_t>(blockIdx.y) * a.m + m) * a.n + col] = t;
  }
}

#if !OPCTS_GPU_HIP
using async::cp_async_16;
using async::cp_async_4;
using async::cp_async_commit;
using async::cp_async_wait;

// One item's slot of a warp's ring (the pair's two n-tiles): words[tile][lane], sz[tile][w][lane]
// (G group words a super-tile: 1 when g >= 128, else 4), lane-contiguous so that each lane's
// shared loads of its own copies hit distinct banks.
template <int G>
struct RingSlot {
  int4mm::Words4 words[2][kLanes];
  uint32_t sz[2][G][kLanes];
};

// tiny_mma_kernel (tensor cores; a warp's unit is a pair of n-tiles, int4_gemv_tiny.cuh; every
// M <= 16 in one or two products per k-tile, Rows16: M > 8). Each warp streams its items
// through a ring of S slots in shared memory with cp.async: S − 1 items (1 KiB of weight each)
// in flight while it multiplies one, no registers held for them and no barrier (a lane reads
// only what it copied). A block has bw = tb·wk warps (tiny_plan_mma), up to 24 an SM at 80
// registers (16 at M > 8, 106 registers: its second set of accumulators); four blocks of 64
// registers spilled and were no faster (docs/status/sm90.md). Probe (the benchmark's): loads_only
// loads without multiplying, math_only multiplies without loading past the first S − 1 items.
template <class T, bool Rows16, bool OneGroup, int S, Int4GemvProbe Probe = Int4GemvProbe::none>
__global__ void OPCTS_LAUNCH_BOUNDS((Rows16 ? kTinyMmaMaxWarps16 : kTinyMmaMaxWarps) * kLanes, 1)
    tiny_mma_kernel(Args a, TinySplit sp, float* ws, T* y, int64_t ldy) {
  constexpr int R = Rows16 ? 16 : 8, G = OneGroup ? 1 : 4;
  using Slot = RingSlot<G>;
  // [bw][S] slots, the partial sums [bw][R][16], then min(M, 16) rows of the chunk as T
  extern __shared__ __align__(16) unsigned char dyn[];
  Slot* ring = reinterpret_cast<Slot*>(dyn);
  auto* part = reinterpret_cast<float(*)[R][16]>(dyn + sizeof(Slot) * S * sp.bw);
  T* xs = reinterpret_cast<T*>(part + sp.bw);
  __shared__ __align__(16) uint32_t zeros[64];  // the B columns past M (x_rows)
  uint32_t probe_bits = 0;                      // loads_only: what the loads brought, kept live
  const TinyWarp w = tiny_warp(sp);
  const int64_t ld = 128 * sp.chunk;
  if (w.tid < 64) zeros[w.tid] = 0;  // before the first barrier
  const int4mm::tiny::XRows<T> x = int4mm::tiny::x_rows<T>(a, xs, ld, reinterpret_cast<const T*>(zeros), w.lane);
  const int4mm::tiny::PairSource src = int4mm::tiny::pair_source(a, w.unit, w.lane);
  Slot* mine = ring + S * w.warp;

  // Copies the warp's item first + k·wk into slot `s` (a lane its own 16 bytes of each tile and
  // their group words). Offsets past the warp's bases in 32 bits: a warp's items are < K / 128.
  const auto issue = [&](const int4mm::Words4* const(&wbase)[2], uint32_t first, uint32_t k, int s) {
    const uint32_t item = first + k * static_cast<uint32_t>(sp.wk);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      cp_async_16(&mine[s].words[h][w.lane], wbase[h] + k * static_cast<uint32_t>(sp.wk * kLanes));
#pragma unroll
      for (int q = 0; q < G; ++q) {
        const uint32_t gi = ((item << 7) + 32 * q) >> src.s[h].group_shift;  // the group of word q
        cp_async_4(&mine[s].sz[h][q][w.lane], src.s[h].sz + static_cast<uint64_t>(gi) * static_cast<uint64_t>(a.n));
      }
    }
  };
  const auto read = [&](int s) {
    int4mm::tiny::PairFrag<OneGroup> f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      f.f[h].v = mine[s].words[h][w.lane];
#pragma unroll
      for (int q = 0; q < G; ++q) f.f[h].sz[q] = mine[s].sz[h][q][w.lane];
    }
    return f;
  };

  float c[2][4] = {}, c16[2][4] = {};
  for (int64_t ic = w.i0; ic < w.i1; ic += sp.chunk) {
    const int64_t ie = ic + sp.chunk < w.i1 ? ic + sp.chunk : w.i1;
    // This warp's items of the chunk: first, first + wk, ... (n of them).
    const int64_t first = ic + w.sub;
    const int n = w.live && first < ie ? static_cast<int>((ie - first + sp.wk - 1) / sp.wk) : 0;
    const int4mm::Words4* const wbase[2] = {src.s[0].words + first * kLanes, src.s[1].words + first * kLanes};
    const uint32_t f32 = static_cast<uint32_t>(first),
                   at = static_cast<uint32_t>(first - ic);  // first's place in the chunk
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < n) issue(wbase, f32, s, s);
      cp_async_commit();
    }
    __syncthreads();  // the previous chunk's readers are done with the staging
    int4mm::tiny::stage_x_mma<T>(a, 128 * ic, 128 * (ie - ic), ld, xs, w.tid, sp.bw * kLanes);
    __syncthreads();
    for (int i = 0; i < n; ++i) {
      cp_async_wait<S - 2>();  // item i's group has landed (S − 2 younger ones may still fly)
      const auto f = read(i % S);
      // Its slot's previous item was used in the last iteration: refill it S − 1 items ahead.
      if (Probe != Int4GemvProbe::math_only && i + S - 1 < n) issue(wbase, f32, i + S - 1, (i + S - 1) % S);
      cp_async_commit();
      if constexpr (Probe == Int4GemvProbe::loads_only) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
          probe_bits ^= f.f[h].v.w[0] ^ f.f[h].v.w[1] ^ f.f[h].v.w[2] ^ f.f[h].v.w[3] ^ f.f[h].sz[0];
      } else int4mm::tiny::use_mma<T, Rows16, OneGroup>(a, f, x, at + static_cast<uint32_t>(i * sp.wk), c, c16);
    }
  }
  if (Probe == Int4GemvProbe::loads_only && probe_bits == 0x9e3779b9u) c[0][0] += 1.0f;

  // Lane (g, t): y[2t + e][column g of the pair's first n-tile] in c[.][e], of its second in
  // c[.][2 + e]; rows 8 + 2t + e in c16.
  const int g = w.lane / 4, t = w.lane % 4;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    part[w.warp][2 * t + e][g] = c[0][e] + c[1][e];
    part[w.warp][2 * t + e][8 + g] = c[0][2 + e] + c[1][2 + e];
    if (Rows16) {
      part[w.warp][8 + 2 * t + e][g] = c16[0][e] + c16[1][e];
      part[w.warp][8 + 2 * t + e][8 + g] = c16[0][2 + e] + c16[1][2 + e];
    }
  }
  __syncthreads();
  if (w.sub != 0 || !w.live) return;
  const int64_t cols = int4mm::tiny::pair_columns(a, w.unit);
  for (int r = w.lane; r < R * 16; r += kLanes) {  // row r / 16, column r % 16 of the pair
    const int64_t m = r / 16, col = 16 * w.unit + r % 16;
    if (m >= a.m) break;
    if (r % 16 >= cols) continue;
    float s = part[w.warp][m][r % 16];
    for (int k = 1; k < sp.wk; ++k) s += part[w.warp + k][m][r % 16];
    if (sp.slices == 1) y[m * ldy + col] = int4mm::round_to<T>(s);
    else ws[(static_cast<int64_t>(blockIdx.y) * a.m + m) * a.n + col] = s;
  }
}
#endif

// Whether the fast path runs on tensor cores for this tuning (kTinyMma: CUDA; the tuning's mma).
bool tiny_mma(const Int4GemvTuning& t) { return int4mm::tiny::kTinyMma && t.mma; }

// Rows of x the fma path holds per thread: the next power of two >= M.
int tiny_rows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16; }

bool tiny_applies(const Args& a, Int4Format format, const Int4GemvTuning& t) {
  // the staging reads x 16 bytes at a time (K % 128 == 0 at innerKTiles 8; the base must be
  // aligned); the mma kernel counts k in 32 bits
  return t.fast && format == Int4Format::tinygemm && a.ikt == 8 && a.plant == Int4Plant::none &&
         reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.k < (int64_t{1} << 31);
}

int device_sms() {
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 132;
  }
  return sms;
}

#if !OPCTS_GPU_HIP
// The mma kernel's ring depth: the tuning's stages where the kernel has it (M <= 8, g >= 128;
// a probe's kernel has 2 only), else 4.
int tiny_stages(const Args& a, const Int4GemvTuning& t) {
  if (a.m > 8 || a.group_shift < 7) return 4;
  if (t.probe != Int4GemvProbe::none) return 2;
  return t.stages == 3 || t.stages == 4 ? t.stages : 2;
}
#endif

// Blocks per SM the fma kernel is built for (its launch bounds): 3.
constexpr int kTinyFmaBlocks = 3;

// Bytes of staged x per row and super-tile: fp32 (fma) or T (mma).
int64_t tiny_stage_bytes(const Args& a, const Int4GemvTuning& t) {
  return tiny_mma(t) ? std::min<int64_t>(a.m, 16) * 128 * 2 : static_cast<int64_t>(tiny_rows(a.m)) * 128 * 4;
}

// The mma kernel's ring and partial sums for a block of bw warps (dynamic shared memory ahead of
// the staged x); the fma kernel has neither there.
int64_t tiny_ring_bytes(const Args& a, const Int4GemvTuning& t, int bw) {
#if OPCTS_GPU_HIP
  (void)a, (void)t, (void)bw;
  return 0;
#else
  if (!tiny_mma(t)) return 0;
  const int64_t slot = a.group_shift >= 7 ? sizeof(RingSlot<1>) : sizeof(RingSlot<4>);
  return (slot * tiny_stages(a, t) + (a.m > 8 ? 16 : 8) * 16 * 4) * bw;
#endif
}

// Shared memory of an SM a kernel's blocks may take (sm_90: 227 KiB), and what the runtime keeps
// per block beside them (1 KiB; CUDA C++ Programming Guide, "Shared Memory" of compute
// capability 9.0).
constexpr int64_t kSmemPerSm = 227 * 1024, kSmemReservedPerBlock = 1024;

// A fast-path block's static shared memory: the zero area of x_rows (mma), the partial sums
// ([kTinyWarps][rows][8] floats, fma).
int64_t tiny_static_smem(const Args& a, const Int4GemvTuning& t) {
  if (tiny_mma(t)) return 256;
  return tiny_rows(a.m) * 8 * kTinyWarps * 4;
}

// Bound of a block's staged x when `blocks` blocks of bw warps share an SM: what their ring,
// partial sums and static shared memory leave, within [4 KiB, kMaxStageBytes].
int64_t tiny_stage_bound(const Args& a, const Int4GemvTuning& t, int bw, int blocks) {
  const int64_t per_block = kSmemPerSm / blocks - kSmemReservedPerBlock;
  return std::clamp<int64_t>(per_block - tiny_static_smem(a, t) - tiny_ring_bytes(a, t, bw), 4 * 1024,
                             int4mm::tiny::kMaxStageBytes);
}

// Items a warp of the fast path keeps in flight per batch (the split's smallest share).
int tiny_batch(const Args& a, const Int4GemvTuning& t) { return tiny_mma(t) ? 1 : int4mm::tiny::batch(tiny_rows(a.m)); }

// Dynamic shared memory of a launch: the ring and partial sums, and the chunk of x.
int64_t tiny_smem(const Args& a, const Int4GemvTuning& t, const TinySplit& sp) {
  return tiny_ring_bytes(a, t, sp.bw) + tiny_stage_bytes(a, t) * sp.chunk;
}

// Whether `blocks` blocks of split p fit one SM's shared memory.
bool tiny_fits(const Args& a, const Int4GemvTuning& t, const TinySplit& p, int blocks) {
  return blocks * (tiny_smem(a, t, p) + tiny_static_smem(a, t) + kSmemReservedPerBlock) <= kSmemPerSm;
}

// The K split and the chunk of a split whose units, wk, tb and bw are set, for a grid of `fill`
// warps per SM at most resident: K is split only where the grid is short of half of that, never
// below one batch per warp and slice. A chunk is the slice, or as much of it as the staging
// bound lets one block hold.
void tiny_finish(const Args& a, const Int4GemvTuning& t, int sms, int fill, int resident_blocks, TinySplit& p) {
  const int64_t want = static_cast<int64_t>(sms) * fill, have = p.units * p.wk;
  p.blocks = (p.units + p.tb - 1) / p.tb;
  p.slices = 1;
  if (2 * have < want)
    p.slices = std::max<int64_t>(
        1, std::min<int64_t>({want / have, p.items / (static_cast<int64_t>(tiny_batch(a, t)) * p.wk), 65535}));
  p.per_slice = (p.items + p.slices - 1) / p.slices;
  p.slices = (p.items + p.per_slice - 1) / p.per_slice;
  p.chunk = std::min<int64_t>(
      p.per_slice, std::max<int64_t>(1, tiny_stage_bound(a, t, p.bw, resident_blocks) / tiny_stage_bytes(a, t)));
}

// Blocks of kTinyWarps warps: wk the most warps per unit of 1, 2, 4, 8 that keep the grid within
// `fill` warps per SM, at most what the kernel holds (one wave: more warps would wait for the
// first ones instead of adding loads in flight), or the tuning's tiny_wk; `resident` such blocks
// share an SM.
TinySplit tiny_plan_8warp(const Args& a, const Int4GemvTuning& t, TinySplit p, int sms, int fill, int resident) {
  const int64_t want = static_cast<int64_t>(sms) * fill;
  p.bw = kTinyWarps;
  p.wk = 1;
  if (t.tiny_wk > 0) p.wk = std::clamp(t.tiny_wk, 1, kTinyWarps);
  else
    while (p.wk < kTinyWarps && p.units * p.wk * 2 <= want) p.wk *= 2;
  p.tb = kTinyWarps / p.wk;
  tiny_finish(a, t, sms, fill, resident, p);
  return p;
}

// The fma kernel's split: 8-warp blocks, as many an SM (up to its launch bounds' 3) as the
// shared memory holds.
TinySplit tiny_plan_fma(const Args& a, const Int4GemvTuning& t) {
  TinySplit p{a.n / 8, a.k / 128, 0, 1, 0, 0, 1, kTinyWarps, kTinyWarps};
  p.chunk = std::min<int64_t>(p.items, int4mm::tiny::kMaxStageBytes / tiny_stage_bytes(a, t));
  int resident = kTinyFmaBlocks;
  while (resident > 1 && !tiny_fits(a, t, p, resident)) --resident;
  return tiny_plan_8warp(a, t, p, device_sms(), std::clamp(t.warps_per_sm, 1, kTinyWarps * resident), resident);
}

// The mma kernel's split: blocks of any bw = tb·wk warps up to what its registers allow on one
// SM (24; 16 at M > 8). With one wave of blocks spread breadth first, the busiest SM holds
// ceil(blocks / SMs) blocks: the split that gives it the fewest units (pairs) of work, then the
// most warps (loads in flight), then the fewest blocks, within warps_per_sm. 8-warp blocks gave
// gate/up (896 pairs: 224 blocks of 4 pairs) two blocks on 92 SMs and one on 40; 128 blocks of
// 7 pairs × 3 warps give each SM one. down_proj (256 pairs) gets 128 blocks of 2 pairs × 12
// warps, 22 warps an SM instead of 15.5 (docs/status/sm90.md, 2026-12-02: 0.42 -> 0.46 of the
// copy; gate/up unchanged). Grids too small to fill the SMs (fewer units than a wave's warps)
// keep 8-warp blocks and split K (tiny_finish).
TinySplit tiny_plan_mma(const Args& a, const Int4GemvTuning& t) {
  const int sms = device_sms(), maxw = a.m > 8 ? kTinyMmaMaxWarps16 : kTinyMmaMaxWarps;
  const int fill = std::clamp(t.warps_per_sm, 1, maxw);
  const int64_t tiles = a.n / 8;
  TinySplit best{(tiles + 1) / 2, a.k / 128, 0, 1, 0, 0, 0, 0, 0};
  int64_t best_load = 0;
  int best_warps = 0;
  if (!t.fixed_blocks && best.units * maxw >= static_cast<int64_t>(sms) * fill)
    for (int tb = 1; tb <= maxw; ++tb)
      for (int wk = 1; tb * wk <= maxw; ++wk) {
        if ((t.tiny_wk > 0 && wk != t.tiny_wk) || wk > best.items) continue;
        TinySplit p = best;
        p.tb = tb, p.wk = wk, p.bw = tb * wk;
        const int64_t blocks = (p.units + tb - 1) / tb, per_sm = (blocks + sms - 1) / sms;
        if (per_sm * p.bw > fill) continue;  // more than one wave, or past the fill target
        tiny_finish(a, t, sms, fill, static_cast<int>(per_sm), p);
        if (p.slices != 1 || !tiny_fits(a, t, p, static_cast<int>(per_sm))) continue;
        const int64_t load = per_sm * tb;
        const int warps = static_cast<int>(per_sm) * p.bw;
        // Ties: fewer, larger blocks (each block stages the chunk of x: gate/up in 896 blocks
        // of 3 warps ran at 0.41 of the copy, in 128 blocks of 21 warps at 0.45).
        const bool better = best.bw == 0 || load < best_load || (load == best_load && warps > best_warps) ||
                            (load == best_load && warps == best_warps && p.blocks < best.blocks);
        if (better) best = p, best_load = load, best_warps = warps;
      }
  if (best.bw != 0) return best;
  // Few units (or a forced wk that fits no wave): 8-warp blocks, the fma kernel's rule for wk.
  return tiny_plan_8warp(a, t, best, sms, fill, std::max(1, fill / kTinyWarps));
}

TinySplit tiny_plan(const Args& a, const Int4GemvTuning& t) {
  return tiny_mma(t) ? tiny_plan_mma(a, t) : tiny_plan_fma(a, t);
}

#if !OPCTS_GPU_HIP
template <class T, bool Rows16, bool OneGroup, int S, Int4GemvProbe Probe = Int4GemvProbe::none>
void tiny_mma_launch(const Args& a, const TinySplit& sp, dim3 grid, size_t smem, float* ws, T* y, int64_t ldy,
                     cudaStream_t s) {
  const auto kernel = tiny_mma_kernel<T, Rows16, OneGroup, S, Probe>;
  gpu::set_max_dynamic_smem(kernel, static_cast<int>(smem));  // beyond 48 KiB needs the opt-in
  kernel<<<grid, sp.bw * kLanes, smem, s>>>(a, sp, ws, y, ldy);
}
#endif

template <class T, bool OneGroup>
void tiny_launch_rows(const Args& a, const Int4GemvTuning& t, const TinySplit& sp, float* ws, T* y, int64_t ldy,
                      cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(sp.blocks), static_cast<unsigned>(sp.slices));
  const unsigned threads = kTinyWarps * kLanes;
  const size_t smem = static_cast<size_t>(tiny_smem(a, t, sp));
#if !OPCTS_GPU_HIP
  if (tiny_mma(t)) {
    if (a.m > 8) tiny_mma_launch<T, true, OneGroup, 4>(a, sp, grid, smem, ws, y, ldy, s);
    else if constexpr (OneGroup) {
      if (t.probe == Int4GemvProbe::loads_only)
        tiny_mma_launch<T, false, true, 2, Int4GemvProbe::loads_only>(a, sp, grid, smem, ws, y, ldy, s);
      else if (t.probe == Int4GemvProbe::math_only)
        tiny_mma_launch<T, false, true, 2, Int4GemvProbe::math_only>(a, sp, grid, smem, ws, y, ldy, s);
      else switch (tiny_stages(a, t)) {
          case 3: tiny_mma_launch<T, false, true, 3>(a, sp, grid, smem, ws, y, ldy, s); break;
          case 4: tiny_mma_launch<T, false, true, 4>(a, sp, grid, smem, ws, y, ldy, s); break;
          default: tiny_mma_launch<T, false, true, 2>(a, sp, grid, smem, ws, y, ldy, s); break;
        }
    } else tiny_mma_launch<T, false, false, 4>(a, sp, grid, smem, ws, y, ldy, s);
    return;
  }
#endif
  switch (tiny_rows(a.m)) {
    case 1: tiny_kernel<T, 1, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    case 2: tiny_kernel<T, 2, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    case 4: tiny_kernel<T, 4, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    case 8: tiny_kernel<T, 8, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    default: tiny_kernel<T, 16, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
  }
}

template <class T>
void tiny_launch(const Args& a, const Int4GemvTuning& t, const TinySplit& sp, float* ws, T* y, int64_t ldy,
                 cudaStream_t s) {
  if (a.group_shift >= 7) tiny_launch_rows<T, true>(a, t, sp, ws, y, ldy, s);  // g >= 128: one group per super-tile
  else tiny_launch_rows<T, false>(a, t, sp, ws, y, ldy, s);
}

// Whether a lane batches its items, for a problem and a tuning. Only M = 1 without a plant takes
// the tuning's setting (the benchmark's case); every other launch batches, so the planted and
// multi-row kernels are compiled once.
bool batching(const Args& a, const Int4GemvTuning& t) { return a.m > 1 || a.plant != Int4Plant::none || t.batch; }

// The batch of format F at the row count `launch_rows` picks for M (and 1 when not batching).
template <Int4Format F>
int batch_of(const Args& a, bool batch) {
  using Code = int4mm::Code<F, __half, false>;  // the batch does not depend on T
  if (!batch) return 1;
  const int mt = a.plant != Int4Plant::none ? (a.m <= 1 ? 1 : 16)
                 : a.m <= 1                 ? 1
                 : a.m <= 2                 ? 2
                 : a.m <= 4                 ? 4
                 : a.m <= 8                 ? 8
                                            : 16;
  return int4mm::gemv_batch(Code::kLaneBytes, mt);
}

template <Int4Format F>
Split plan_format(const Args& a, int sms, const Int4GemvTuning& t) {
  using Code = int4mm::Code<F, __half, false>;  // the work split does not depend on T
  const int batch = batch_of<F>(a, batching(a, t));
  Split p{Code::units(a), Code::items(a), 0, 1, 1, kGenericWarps, 1};
  // As many warps on a unit as keep a whole batch each; the block's other warps take more units.
  while (p.wu > 1 && static_cast<int64_t>(p.wu) * batch > p.items) p.wu /= 2;
  p.ub = kGenericWarps / p.wu;
  p.blocks = (p.units + p.ub - 1) / p.ub;
  // Split K only while the grid is short of warps_per_sm warps per SM (with a batch of loads in
  // flight each, enough for the memory system), and never below one batch per warp and slice.
  const int64_t want = static_cast<int64_t>(sms) * std::max(1, t.warps_per_sm), have = p.blocks * kGenericWarps;
  if (have < want)
    p.slices = std::max<int64_t>(
        1, std::min<int64_t>({(want + have - 1) / have, p.items / (static_cast<int64_t>(p.wu) * batch), 65535}));
  p.per_slice = (p.items + p.slices - 1) / p.slices;
  p.slices = (p.items + p.per_slice - 1) / p.per_slice;
  return p;
}

Split plan(const Args& a, Int4Format format, const Int4GemvTuning& t) {
  const int sms = device_sms();
  switch (format) {
    case Int4Format::tinygemm: return plan_format<Int4Format::tinygemm>(a, sms, t);
    case Int4Format::tinygemm_unpacked: return plan_format<Int4Format::tinygemm_unpacked>(a, sms, t);
    case Int4Format::awq: return plan_format<Int4Format::awq>(a, sms, t);
    case Int4Format::gptq: return plan_format<Int4Format::gptq>(a, sms, t);
    case Int4Format::q4_0: return plan_format<Int4Format::q4_0>(a, sms, t);
  }
  return {};
}

template <Int4Format F, class T, int MT, bool Planted, int B>
void launch(const Args& a, const Split& sp, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(sp.blocks), static_cast<unsigned>(sp.slices));
  gemv_kernel<F, T, MT, Planted, B><<<grid, kGenericWarps * kLanes, 0, s>>>(a, sp, ws, y, ldy);
}

template <Int4Format F, class T>
void launch_rows(const Args& a, const Split& sp, bool batch, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  using Code = int4mm::Code<F, T, false>;
  // Rows of x held per thread: the next power of two >= M (rows past M are skipped). Planted
  // variants take two row counts only (1 and 16), so the real kernels carry no plant test.
  if (a.plant != Int4Plant::none) {
    if (a.m <= 1) launch<F, T, 1, true, Code::template kBatch<1>>(a, sp, ws, y, ldy, s);
    else launch<F, T, 16, true, Code::template kBatch<16>>(a, sp, ws, y, ldy, s);
  } else if (a.m <= 1) {
    if (batch) launch<F, T, 1, false, Code::template kBatch<1>>(a, sp, ws, y, ldy, s);
    else launch<F, T, 1, false, 1>(a, sp, ws, y, ldy, s);
  } else if (a.m <= 2) launch<F, T, 2, false, Code::template kBatch<2>>(a, sp, ws, y, ldy, s);
  else if (a.m <= 4) launch<F, T, 4, false, Code::template kBatch<4>>(a, sp, ws, y, ldy, s);
  else if (a.m <= 8) launch<F, T, 8, false, Code::template kBatch<8>>(a, sp, ws, y, ldy, s);
  else launch<F, T, 16, false, Code::template kBatch<16>>(a, sp, ws, y, ldy, s);
}

template <class T>
void launch_format(Int4Format format, const Args& a, const Split& sp, bool batch, float* ws, T* y, int64_t ldy,
                   cudaStream_t s) {
  switch (format) {
    case Int4Format::tinygemm: launch_rows<Int4Format::tinygemm, T>(a, sp, batch, ws, y, ldy, s); break;
    case Int4Format::tinygemm_unpacked:
      launch_rows<Int4Format::tinygemm_unpacked, T>(a, sp, batch, ws, y, ldy, s);
      break;
    case Int4Format::awq: launch_rows<Int4Format::awq, T>(a, sp, batch, ws, y, ldy, s); break;
    case Int4Format::gptq: launch_rows<Int4Format::gptq, T>(a, sp, batch, ws, y, ldy, s); break;
    case Int4Format::q4_0: launch_rows<Int4Format::q4_0, T>(a, sp, batch, ws, y, ldy, s); break;
  }
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda.int4_gemv ") + what + ": " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

template <class T>
void finalize(const Int4MmParams& p, int64_t slices, cudaStream_t s) {
  if (slices == 1) return;
  const int64_t total = p.m * p.n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 4096));
  gemv_finalize<T>
      <<<blocks, 256, 0, s>>>(static_cast<const float*>(p.workspace), slices, p.m, p.n, static_cast<T*>(p.y), p.ldy);
  check_launch("finalize");
}

// The launch int4_gemv makes for `a`: the fast path's split or the generic kernel's, planned
// once per call (the workspace check and the launch read the same plan).
struct Launch {
  bool tiny;
  TinySplit tiny_split;
  Split split;
  int64_t slices() const { return tiny ? tiny_split.slices : split.slices; }
};

Launch launch_of(const Args& a, Int4Format format, const Int4GemvTuning& t) {
  Launch l{tiny_applies(a, format, t), {}, {}};
  if (l.tiny) l.tiny_split = tiny_plan(a, t);
  else l.split = plan(a, format, t);
  return l;
}

// Bytes of fp32 partial sums a launch of `slices` K slices needs (0 for one slice).
int64_t workspace_for(const Int4MmParams& p, int64_t slices) {
  return slices == 1 ? 0 : slices * p.m * p.n * static_cast<int64_t>(sizeof(float));
}

template <class T>
void run_typed(const Int4MmParams& p, const Args& a, const Int4GemvTuning& t, const Launch& l, cudaStream_t s) {
  T* y = static_cast<T*>(p.y);
  auto* ws = static_cast<float*>(p.workspace);
  if (l.tiny) tiny_launch<T>(a, t, l.tiny_split, ws, y, p.ldy, s);
  else launch_format<T>(p.format, a, l.split, batching(a, t), ws, y, p.ldy, s);
  check_launch("launch");
  finalize<T>(p, l.slices(), s);
}

}  // namespace

bool int4_gemv_takes(Int4Format f, int64_t group_size) { return int4mm::takes(f, group_size); }

int64_t int4_gemv_workspace_bytes(const Int4MmParams& p, const Int4GemvTuning& t) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return 0;
  return workspace_for(p, launch_of(int4mm::make_args(p), p.format, t).slices());
}

void int4_gemv(const Int4MmParams& p, CUstream_st* stream, const Int4GemvTuning& t) {
  int4mm::validate(p, "cuda.int4_gemv");
  if (p.m > kInt4GemvMaxM) throw Int4ArgumentError("M", "cuda.int4_gemv: M = " + std::to_string(p.m) + " > 16");
  if (p.m == 0 || p.n == 0) return;
  const Args a = int4mm::make_args(p);
  const Launch l = launch_of(a, p.format, t);
  const int64_t need = workspace_for(p, l.slices());
  if (need > 0 && (!p.workspace || p.workspace_bytes < need))
    throw Int4ArgumentError("workspace", "cuda.int4_gemv: needs " + std::to_string(need) + " bytes of workspace, got " +
                                             std::to_string(p.workspace_bytes));
  if (p.act == Int4Act::bf16) run_typed<__nv_bfloat16>(p, a, t, l, stream);
  else run_typed<__half>(p, a, t, l, stream);
}

}  // namespace opcts::cuda
