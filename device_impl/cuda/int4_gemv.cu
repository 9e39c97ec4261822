// cuda.int4_gemv: M <= 16 weight-only int4 matmul in one pass over the packed weight; split-K partial sums, where K is split, added in a fixed order.
//
// Grid (blocks of column units, K slices); a block of W warps holds W / wu units and wu warps
// per unit, which take the unit's items of the block's K slice in turn (int4_mm_layout.cuh's
// table: 16-byte tinygemm fragments, 16-byte rows of unpacked bytes, 32-byte runs of AWQ words,
// 128-byte runs of GPTQ words, consecutive Q4_0 blocks). A lane first loads Code::kBatch items
// (gemv_load: the packed words and their group parameters, all in flight together), then
// dequantizes them in registers and accumulates every row of x in fp32 FMA (gemv_use). Lanes
// sharing a column are summed with a butterfly over the lane bits that differ, the unit's warps
// through shared memory in warp order, and slices, when K is split, by a second kernel in slice
// order: no atomics, the same bytes on every run. Where the units alone give the GPU enough
// warps K is not split: the block writes y and there is no second kernel and no workspace.
// Portable (device_impl/portable/gpu.hpp): no inline PTX; the shuffle is the only warp primitive,
// 32 lanes wide on every target (a wave64 wavefront holds two of these warps, one per half).
#include "device_impl/portable/gpu.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "device_impl/cuda/int4_gemv_tiny.cuh"
#include "device_impl/cuda/int4_mm_args.cuh"
#include "device_impl/cuda/int4_mm_layout.cuh"

namespace opcts::cuda {

namespace {

using int4mm::Args;
using int4mm::kLanes;
using int4mm::kThreads;
using int4mm::kWarps;

static_assert(kLanes == gpu::kWarp, "the butterfly's shuffles span the fragment's lanes");

// The slot of a representative lane (Code::representative) in the shared buffer.
template <Int4Format F>
constexpr int kReps = F == Int4Format::gptq ? kLanes : F == Int4Format::tinygemm || F == Int4Format::awq ? 8 : 1;

template <Int4Format F>
__device__ __forceinline__ int rep_slot(int lane) {
  return F == Int4Format::tinygemm ? lane / 4 : F == Int4Format::awq || F == Int4Format::gptq ? lane : 0;
}

// The work split of one launch (plan()): `units` column units of `items` items each; a block
// holds ub units with wu warps each (ub·wu = W) and one of `slices` K slices of per_slice items.
struct Split {
  int64_t units, items, blocks, slices, per_slice;
  int wu, ub;
};

template <Int4Format F, class T, int MT, bool Planted, int W, int B>
__global__ void __launch_bounds__(W * kLanes) gemv_kernel(Args a, Split sp, float* ws, T* y, int64_t ldy) {
  using Code = int4mm::Code<F, T, Planted>;
  using Frag = typename Code::Frag;
  constexpr int C = Code::kCols;
  __shared__ float part[W][kReps<F>][MT][C];
  const int warp = static_cast<int>(threadIdx.x) / kLanes, lane = static_cast<int>(threadIdx.x) % kLanes;
  const int sub = warp % sp.wu;  // this warp's turn among its unit's warps
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * sp.ub + warp / sp.wu;
  const bool live = unit < sp.units;  // the last block may hold fewer units (warp-uniform)
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * sp.per_slice, i1 = i0 + sp.per_slice < sp.items ? i0 + sp.per_slice : sp.items;

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
// work): a block of kTinyWarps warps holds tb = kTinyWarps / wk n-tiles with wk warps each and
// one K slice, which it walks in chunks of super-tiles whose x fits the staging bound. Per
// chunk every lane first issues its first batch of 16-byte weight loads (warp sub of a tile
// takes batches sub, sub + wk, ... of the chunk: `batch` consecutive super-tiles, 512 bytes
// apart, with their group parameters), the block stages the chunk's x as fp32 in shared memory
// while those loads are in flight, and each warp then computes and loads its batches in turn
// (no barrier until the next chunk). Lanes of a column are summed by a butterfly over the
// quad, the tile's warps in warp order through shared memory, slices by gemv_finalize.
constexpr int kTinyWarps = 8;

// units n-tiles of items super-tiles; blocks × slices blocks of tb n-tiles with wk warps each;
// chunk: super-tiles of x staged at a time (row m of the staged x at xs + 128·chunk·m).
struct TinySplit {
  int64_t units, items, blocks, slices, per_slice, chunk;
  int wk, tb;
};

// Three blocks per SM (85 registers): 24 warps of batches in flight.
template <class T, int MT, bool OneGroup>
__global__ void OPCTS_LAUNCH_BOUNDS(kTinyWarps * kLanes, 3) tiny_kernel(Args a, TinySplit sp, float* ws, T* y, int64_t ldy) {
  constexpr int B = int4mm::tiny::batch(MT);
  extern __shared__ float xs[];  // MT rows of the chunk, 128 · sp.chunk floats apart
  __shared__ float part[kTinyWarps][MT][8];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kLanes, lane = tid % kLanes;
  const int sub = warp % sp.wk;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * sp.tb + warp / sp.wk;
  const bool live = unit < sp.units;  // warp-uniform
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * sp.per_slice, i1 = i0 + sp.per_slice < sp.items ? i0 + sp.per_slice : sp.items;
  const int64_t ld = 128 * sp.chunk, step = static_cast<int64_t>(B) * sp.wk;

  float acc[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = 0.0f;
  int4mm::tiny::Frag<OneGroup> f[B];
  const auto load = [&](int64_t ib, int64_t ie) {
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (live && ib + b < ie) f[b] = int4mm::tiny::load<OneGroup>(a, unit, ib + b, lane);
  };
  for (int64_t ic = i0; ic < i1; ic += sp.chunk) {
    const int64_t ie = ic + sp.chunk < i1 ? ic + sp.chunk : i1;
    int64_t ib = ic + static_cast<int64_t>(sub) * B;
    load(ib, ie);
    __syncthreads();  // the previous chunk's readers are done with xs
    int4mm::tiny::stage_x<T>(a, 128 * ic, 128 * (ie - ic), MT, ld, xs, tid, kTinyWarps * kLanes);
    __syncthreads();
    for (; ib < ie; ib += step) {
#pragma unroll
      for (int b = 0; b < B; ++b)
        if (live && ib + b < ie) int4mm::tiny::use<T, MT, OneGroup>(a, f[b], xs + 128 * (ib + b - ic), ld, lane, acc);
      if (ib + step < ie) load(ib + step, ie);
    }
  }

  float s[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    s[m] = acc[m][0] + acc[m][1];
    s[m] += gpu::warp_xor(s[m], 1);
    s[m] += gpu::warp_xor(s[m], 2);
  }
  if (lane % 4 == 0)
#pragma unroll
    for (int m = 0; m < MT; ++m) part[warp][m][lane / 4] = s[m];
  __syncthreads();
  if (sub != 0 || !live || lane % 4 != 0) return;
  const int64_t col = 8 * unit + lane / 4;
  for (int m = 0; m < MT && m < a.m; ++m) {
    float t = part[warp][m][lane / 4];
    for (int w = 1; w < sp.wk; ++w) t += part[warp + w][m][lane / 4];
    if (sp.slices == 1) y[m * ldy + col] = int4mm::round_to<T>(t);
    else ws[(static_cast<int64_t>(blockIdx.y) * a.m + m) * a.n + col] = t;
  }
}

// Rows of x held per thread: the next power of two >= M.
int tiny_rows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : m <= 8 ? 8 : 16; }

bool tiny_applies(const Args& a, Int4Format format, const Int4GemvTuning& t) {
  // stage_x reads x 16 bytes at a time (K % 128 == 0 at innerKTiles 8; the base must be aligned)
  return t.fast && format == Int4Format::tinygemm && a.ikt == 8 && a.plant == Int4Plant::none &&
         reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
}

int device_sms() {
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 132;
  }
  return sms;
}

// wk: the most warps per n-tile (1, 2, 4, 8) that keep the grid within warps_per_sm warps per
// SM (one wave: more warps would wait for the first ones instead of adding loads in flight);
// K is split only where the grid is short of half of that, never below one batch per warp and
// slice. A chunk is the slice, or as much of it as the staging bound lets one block hold.
TinySplit tiny_plan(const Args& a, const Int4GemvTuning& t) {
  const int mt = tiny_rows(a.m), b = int4mm::tiny::batch(mt);
  const int64_t want = static_cast<int64_t>(device_sms()) * std::max(1, t.warps_per_sm);
  TinySplit p{a.n / 8, a.k / 128, 0, 1, 0, 0, 1, kTinyWarps};
  while (p.wk < kTinyWarps && p.units * p.wk * 2 <= want) p.wk *= 2;
  p.tb = kTinyWarps / p.wk;
  p.blocks = (p.units + p.tb - 1) / p.tb;
  const int64_t have = p.units * p.wk;
  if (2 * have < want) p.slices = std::max<int64_t>(1, std::min<int64_t>({want / have, p.items / (static_cast<int64_t>(b) * p.wk), 65535}));
  p.per_slice = (p.items + p.slices - 1) / p.slices;
  p.slices = (p.items + p.per_slice - 1) / p.per_slice;
  p.chunk = std::min<int64_t>(p.per_slice, int4mm::tiny::kMaxStageBytes / (static_cast<int64_t>(mt) * 128 * 4));
  return p;
}

int tiny_smem_bytes(const Args& a, const TinySplit& sp) {
  return tiny_rows(a.m) * static_cast<int>(128 * sp.chunk * sizeof(float));
}

template <class T, bool OneGroup>
void tiny_launch_rows(const Args& a, const TinySplit& sp, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(sp.blocks), static_cast<unsigned>(sp.slices));
  const unsigned threads = kTinyWarps * kLanes;
  const size_t smem = static_cast<size_t>(tiny_smem_bytes(a, sp));
  switch (tiny_rows(a.m)) {
    case 1: tiny_kernel<T, 1, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    case 2: tiny_kernel<T, 2, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    case 4: tiny_kernel<T, 4, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    case 8: tiny_kernel<T, 8, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
    default: tiny_kernel<T, 16, OneGroup><<<grid, threads, smem, s>>>(a, sp, ws, y, ldy); break;
  }
}

template <class T>
void tiny_launch(const Args& a, const TinySplit& sp, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  if (a.group_shift >= 7) tiny_launch_rows<T, true>(a, sp, ws, y, ldy, s);  // g >= 128: one group per super-tile
  else tiny_launch_rows<T, false>(a, sp, ws, y, ldy, s);
}

// The kernel's variant for a problem and a tuning: warps per block W and items per batch B.
// Only M = 1 without a plant takes the tuning's other settings (the benchmark's case); every
// other launch runs the default, so the planted and multi-row kernels are compiled once.
struct Shape {
  int warps;
  bool batch;
};

Shape shape_of(const Args& a, const Int4GemvTuning& t) {
  if (a.m > 1 || a.plant != Int4Plant::none) return {8, true};
  return {t.warps == 4 ? 4 : 8, t.batch};
}

// The batch of format F at the row count `launch_rows` picks for M (and 1 when not batching).
template <Int4Format F>
int batch_of(const Args& a, bool batch) {
  using Code = int4mm::Code<F, __half, false>;  // the batch does not depend on T
  if (!batch) return 1;
  const int mt = a.plant != Int4Plant::none ? (a.m <= 1 ? 1 : 16) : a.m <= 1 ? 1 : a.m <= 2 ? 2 : a.m <= 4 ? 4 : a.m <= 8 ? 8 : 16;
  return int4mm::gemv_batch(Code::kLaneBytes, mt);
}

template <Int4Format F>
Split plan_format(const Args& a, int sms, const Int4GemvTuning& t) {
  using Code = int4mm::Code<F, __half, false>;  // the work split does not depend on T
  const Shape sh = shape_of(a, t);
  const int batch = batch_of<F>(a, sh.batch);
  Split p{Code::units(a), Code::items(a), 0, 1, 1, sh.warps, 1};
  // As many warps on a unit as keep a whole batch each; the block's other warps take more units.
  while (p.wu > 1 && static_cast<int64_t>(p.wu) * batch > p.items) p.wu /= 2;
  p.ub = sh.warps / p.wu;
  p.blocks = (p.units + p.ub - 1) / p.ub;
  // Split K only while the grid is short of warps_per_sm warps per SM (with a batch of loads in
  // flight each, enough for the memory system), and never below one batch per warp and slice.
  const int64_t want = static_cast<int64_t>(sms) * std::max(1, t.warps_per_sm), have = p.blocks * sh.warps;
  if (have < want)
    p.slices = std::max<int64_t>(1, std::min<int64_t>({(want + have - 1) / have, p.items / (static_cast<int64_t>(p.wu) * batch), 65535}));
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

template <Int4Format F, class T, int MT, bool Planted, int W, int B>
void launch(const Args& a, const Split& sp, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(sp.blocks), static_cast<unsigned>(sp.slices));
  gemv_kernel<F, T, MT, Planted, W, B><<<grid, W * kLanes, 0, s>>>(a, sp, ws, y, ldy);
}

template <Int4Format F, class T>
void launch_rows(const Args& a, const Split& sp, const Shape& sh, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  using Code = int4mm::Code<F, T, false>;
  // Rows of x held per thread: the next power of two >= M (rows past M are skipped). Planted
  // variants take two row counts only (1 and 16), so the real kernels carry no plant test.
  if (a.plant != Int4Plant::none) {
    if (a.m <= 1) launch<F, T, 1, true, 8, Code::template kBatch<1>>(a, sp, ws, y, ldy, s);
    else launch<F, T, 16, true, 8, Code::template kBatch<16>>(a, sp, ws, y, ldy, s);
  } else if (a.m <= 1) {
    if (sh.warps == 4 && sh.batch) launch<F, T, 1, false, 4, Code::template kBatch<1>>(a, sp, ws, y, ldy, s);
    else if (sh.warps == 4) launch<F, T, 1, false, 4, 1>(a, sp, ws, y, ldy, s);
    else if (sh.batch) launch<F, T, 1, false, 8, Code::template kBatch<1>>(a, sp, ws, y, ldy, s);
    else launch<F, T, 1, false, 8, 1>(a, sp, ws, y, ldy, s);
  } else if (a.m <= 2) launch<F, T, 2, false, 8, Code::template kBatch<2>>(a, sp, ws, y, ldy, s);
  else if (a.m <= 4) launch<F, T, 4, false, 8, Code::template kBatch<4>>(a, sp, ws, y, ldy, s);
  else if (a.m <= 8) launch<F, T, 8, false, 8, Code::template kBatch<8>>(a, sp, ws, y, ldy, s);
  else launch<F, T, 16, false, 8, Code::template kBatch<16>>(a, sp, ws, y, ldy, s);
}

template <class T>
void launch_format(Int4Format format, const Args& a, const Split& sp, const Shape& sh, float* ws, T* y, int64_t ldy, cudaStream_t s) {
  switch (format) {
    case Int4Format::tinygemm: launch_rows<Int4Format::tinygemm, T>(a, sp, sh, ws, y, ldy, s); break;
    case Int4Format::tinygemm_unpacked: launch_rows<Int4Format::tinygemm_unpacked, T>(a, sp, sh, ws, y, ldy, s); break;
    case Int4Format::awq: launch_rows<Int4Format::awq, T>(a, sp, sh, ws, y, ldy, s); break;
    case Int4Format::gptq: launch_rows<Int4Format::gptq, T>(a, sp, sh, ws, y, ldy, s); break;
    case Int4Format::q4_0: launch_rows<Int4Format::q4_0, T>(a, sp, sh, ws, y, ldy, s); break;
  }
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda.int4_gemv ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

template <class T>
void finalize(const Int4MmParams& p, int64_t slices, cudaStream_t s) {
  if (slices == 1) return;
  const int64_t total = p.m * p.n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 4096));
  gemv_finalize<T><<<blocks, 256, 0, s>>>(static_cast<const float*>(p.workspace), slices, p.m, p.n, static_cast<T*>(p.y), p.ldy);
  check_launch("finalize");
}

template <class T>
void run_typed(const Int4MmParams& p, const Args& a, const Int4GemvTuning& t, cudaStream_t s) {
  T* y = static_cast<T*>(p.y);
  auto* ws = static_cast<float*>(p.workspace);
  if (tiny_applies(a, p.format, t)) {
    const TinySplit sp = tiny_plan(a, t);
    tiny_launch<T>(a, sp, ws, y, p.ldy, s);
    check_launch("launch");
    finalize<T>(p, sp.slices, s);
    return;
  }
  const Split sp = plan(a, p.format, t);
  launch_format<T>(p.format, a, sp, shape_of(a, t), ws, y, p.ldy, s);
  check_launch("launch");
  finalize<T>(p, sp.slices, s);
}

// K slices of the launch int4_gemv makes for `a` (1: no workspace).
int64_t slices_of(const Args& a, Int4Format format, const Int4GemvTuning& t) {
  return tiny_applies(a, format, t) ? tiny_plan(a, t).slices : plan(a, format, t).slices;
}

}  // namespace

bool int4_gemv_takes(Int4Format f, int64_t group_size) { return int4mm::takes(f, group_size); }

int64_t int4_gemv_workspace_bytes(const Int4MmParams& p, const Int4GemvTuning& t) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return 0;
  const int64_t slices = slices_of(int4mm::make_args(p), p.format, t);
  return slices == 1 ? 0 : slices * p.m * p.n * static_cast<int64_t>(sizeof(float));
}

void int4_gemv(const Int4MmParams& p, CUstream_st* stream, const Int4GemvTuning& t) {
  int4mm::validate(p, "cuda.int4_gemv");
  if (p.m > kInt4GemvMaxM) throw Int4ArgumentError("M", "cuda.int4_gemv: M = " + std::to_string(p.m) + " > 16");
  if (p.m == 0 || p.n == 0) return;
  const Args a = int4mm::make_args(p);
  const int64_t need = int4_gemv_workspace_bytes(p, t);
  if (need > 0 && (!p.workspace || p.workspace_bytes < need))
    throw Int4ArgumentError("workspace", "cuda.int4_gemv: needs " + std::to_string(need) + " bytes of workspace, got " +
                                             std::to_string(p.workspace_bytes));
  if (p.act == Int4Act::bf16) run_typed<__nv_bfloat16>(p, a, t, stream);
  else run_typed<__half>(p, a, t, stream);
}

}  // namespace opcts::cuda
