// cuda.grouped_kernel: every grouped-GEMM mode and recipe on tensor cores (mma.sync m16n8k16, fp32 accumulation),
// groups found on the device from the offsets.
//
// A block of 4 warps computes a 64×64 tile of one group's output. Which group: 3d_3d and 2d_2d
// put the group on grid.z; 2d_3d (rows split) and 3d_2d (columns split) give each block a tile
// number along the split dimension, and the block finds its group by a block-wide scan of the
// per-group tile counts ceil(size_g / 64) read from `offs` (the grid holds ceil(split/64) + G
// tile slots, an upper bound of Σ ceil(size_g / 64); blocks past the last tile exit). No host
// copy of the offsets is made.
// Per 32-deep K slice the block stages A[64][32] and Bᵀ[64][32] in shared memory as bf16 (bf16
// recipe) or fp16 (fp8 recipes: every e4m3fn code is exact in fp16, so products are exact and
// the mma's fp32 sums are the only roundings), the next slice fetched into registers while the
// current one is multiplied. fp8_rowwise scales the fp32 sum once per output in the epilogue,
// (acc·scale_a)·scale_b; mxfp8 sums each 32-deep slice (one MX block) in a fresh fp32
// accumulator and adds it times 2^(ea+eb−254) (exact unless the product leaves fp32's normal
// range) to the running sum. Out is one round-to-nearest-even of the fp32 value to bf16; stores
// are masked at the group's rows and columns.
#include "gpu/portable/gpu.hpp"
#if !OPCTS_GPU_HIP
#include <cuda_fp8.h>
#endif

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "families/grouped_mm/cuda/grouped_mm_args.cuh"
#include "gpu/portable/mma_tile.cuh"
#include "numerics/minifloat_bits.hpp"

namespace opcts::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kTile = 64, kTileK = 32, kThreads = 128, kWarpSize = 32;
constexpr int kLd = kTileK + 8;  // 80-byte rows: a warp's fragment loads hit 32 distinct banks

struct Args {
  GroupedMode mode;
  GroupedPlant plant;
  int64_t groups, m, n, k, split;
  const void* a;
  int64_t lda, a_bs;
  const void* b;
  int64_t ldb, b_bs;
  const int32_t* offs;
  const void* sa;
  const void* sb;
  int64_t sb_count;
  bf16* out;
  int64_t ldo, o_bs, out_extent;  // out_extent: elements from `out` to the tensor's end
  int64_t mx_cols, mx_width;
};

// Where group g's MX scales sit: element (r, c) of its blocked matrix of `cols` columns at
// base + f (width 0), or at base + (f / cols)·width + f % cols (the K-split slabs), f being the
// blocked offset (grouped_mm_kernels.hpp).
struct MxLoc {
  int64_t base = 0, cols = 0, width = 0;
};

__device__ int64_t mx_byte(const MxLoc& l, int64_t r, int64_t c) {
  const int64_t f = 512 * ((r / 128) * (l.cols / 4) + c / 4) + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
  if (!l.width) return l.base + f;
  return l.cols ? l.base + (f / l.cols) * l.width + f % l.cols
                : INT64_MAX;  // an empty slab: only a planted read lands here
}

// The tile a block computes, in its group's local coordinates.
struct Tile {
  int64_t g = 0, sg = 0;  // the group, and the group whose per-group scales it reads
  int64_t rows = 0, cols = 0, kg = 0;
  int64_t tm = 0, tn = 0;                   // the tile's origin
  int64_t a_off = 0, b_off = 0, o_off = 0;  // elements to the group's A(0, 0), Bᵀ(0, 0), out(0, 0)
  int64_t sa_base = 0, sb_base = 0;         // rowwise: scale index of local row / column 0
  MxLoc mxa, mxb;
};

struct Found {
  int64_t g, start, end, tile, pad_before;
  int hit;
};

// A group's extent along the split dimension as offs says, or as a planted variant misreads it.
__device__ void group_range(const Args& a, int64_t h, int64_t& start, int64_t& end) {
  if (a.plant == GroupedPlant::offsets_as_starts) {
    start = a.offs[h];
    end = h + 1 < a.groups ? a.offs[h + 1] : a.split;
  } else {
    start = h ? a.offs[h - 1] : 0;
    end = a.offs[h];
    if (a.plant == GroupedPlant::write_past_last_offset && h == a.groups - 1) end = a.split;
  }
  if (end < start) end = start;
}

// What a group's MX scales occupy in a split operand's scale matrix: rows padded to 128 (M/N
// split), or scale columns padded to 4 (K split).
__device__ int64_t mx_pad(const Args& a, int64_t size) {
  return a.mode == GroupedMode::m2d_2d ? (size / 32 + 3) / 4 * 4 : (size + 127) / 128 * 128;
}

// Exclusive prefix sum of v over the block's threads; `total` gets the block's sum.
__device__ int64_t block_exclusive_scan(int64_t v, int64_t* warp_sums, int64_t& total) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  int64_t x = v;
#pragma unroll
  for (int d = 1; d < kWarpSize; d <<= 1) {
    const int64_t y = gpu::warp_up(x, d);
    if (lane >= d) x += y;
  }
  if (lane == kWarpSize - 1) warp_sums[warp] = x;
  __syncthreads();
  int64_t before = 0;
  total = 0;
  for (int w = 0; w < kThreads / kWarpSize; ++w) {
    if (w < warp) before += warp_sums[w];
    total += warp_sums[w];
  }
  __syncthreads();
  return before + x - v;
}

// The group holding split-dimension tile t (f.hit = 0 when t is past the last tile), with the
// MX scale rows the groups before it occupy.
__device__ void find_tile(const Args& a, int64_t t, Found& f, int64_t* scratch) {
  if (threadIdx.x == 0) f.hit = 0;
  int64_t tiles_before = 0, pad_before = 0;
  for (int64_t c = 0; c < a.groups; c += kThreads) {
    const int64_t h = c + threadIdx.x;
    int64_t start = 0, end = 0;
    if (h < a.groups) group_range(a, h, start, end);
    const int64_t tiles = (end - start + kTile - 1) / kTile, pad = mx_pad(a, end - start);
    int64_t tiles_total = 0, pad_total = 0;
    const int64_t t0 = tiles_before + block_exclusive_scan(tiles, scratch, tiles_total);
    const int64_t p0 = pad_before + block_exclusive_scan(pad, scratch, pad_total);
    if (h < a.groups && t >= t0 && t < t0 + tiles) f = Found{h, start, end, t - t0, p0, 1};
    __syncthreads();
    if (f.hit) return;
    tiles_before += tiles_total;
    pad_before += pad_total;
  }
}

// Σ mx_pad over the groups before g (the K-split scale columns in front of group g's slab).
__device__ int64_t pad_before_group(const Args& a, int64_t g, int64_t* scratch) {
  int64_t before = 0;
  for (int64_t c = 0; c < g; c += kThreads) {
    const int64_t h = c + threadIdx.x;
    int64_t start = 0, end = 0;
    if (h < g) group_range(a, h, start, end);
    int64_t total = 0;
    block_exclusive_scan(mx_pad(a, end - start), scratch, total);
    before += total;
  }
  return before;
}

// The block's tile; false when the block has none (a tile slot past the last tile).
template <GroupedRecipe R>
__device__ bool tile_of_block(const Args& a, Tile& t, Found& f, int64_t* scratch) {
  const bool mx = R == GroupedRecipe::mxfp8;
  const auto next = [&](int64_t g) { return a.plant == GroupedPlant::next_group_scales ? (g + 1) % a.groups : g; };
  const int64_t pad_m = (a.m + 127) / 128 * 128, pad_n = (a.n + 127) / 128 * 128;
  switch (a.mode) {
    case GroupedMode::m2d_3d:
      find_tile(a, blockIdx.y, f, scratch);
      if (!f.hit) return false;
      t.g = f.g, t.sg = next(f.g);
      t.rows = f.end - f.start, t.cols = a.n, t.kg = a.k;
      t.tm = f.tile * kTile, t.tn = static_cast<int64_t>(blockIdx.x) * kTile;
      t.a_off = f.start * a.lda, t.b_off = t.g * a.b_bs, t.o_off = f.start * a.ldo;
      t.sa_base = f.start, t.sb_base = t.sg * a.n;
      t.mxa = MxLoc{f.pad_before * a.mx_cols, a.mx_cols, 0};
      t.mxb = MxLoc{t.sg * pad_n * a.mx_cols, a.mx_cols, 0};
      return true;
    case GroupedMode::m3d_2d:
      find_tile(a, blockIdx.x, f, scratch);
      if (!f.hit) return false;
      t.g = f.g, t.sg = next(f.g);
      t.rows = a.m, t.cols = f.end - f.start, t.kg = a.k;
      t.tm = static_cast<int64_t>(blockIdx.y) * kTile, t.tn = f.tile * kTile;
      t.a_off = t.g * a.a_bs, t.b_off = f.start * a.ldb, t.o_off = f.start;
      t.sa_base = t.sg * a.m, t.sb_base = f.start;
      t.mxa = MxLoc{t.sg * pad_m * a.mx_cols, a.mx_cols, 0};
      t.mxb = MxLoc{f.pad_before * a.mx_cols, a.mx_cols, 0};
      return true;
    case GroupedMode::m3d_3d:
      t.g = blockIdx.z, t.sg = next(t.g);
      t.rows = a.m, t.cols = a.n, t.kg = a.k;
      t.a_off = t.g * a.a_bs, t.b_off = t.g * a.b_bs, t.o_off = t.g * a.o_bs;
      t.mxa = MxLoc{t.g * pad_m * a.mx_cols, a.mx_cols, 0};
      t.mxb = MxLoc{t.sg * pad_n * a.mx_cols, a.mx_cols, 0};
      break;
    case GroupedMode::m2d_2d: {
      t.g = blockIdx.z, t.sg = next(t.g);
      int64_t k0 = 0, k1 = 0;
      group_range(a, t.g, k0, k1);
      t.rows = a.m, t.cols = a.n, t.kg = k1 - k0;
      t.a_off = k0, t.b_off = k0, t.o_off = t.g * a.o_bs;
      if (mx) {
        int64_t s0 = 0, s1 = 0;
        group_range(a, t.sg, s0, s1);
        t.mxa = MxLoc{pad_before_group(a, t.g, scratch), mx_pad(a, t.kg), a.mx_width};
        t.mxb = MxLoc{pad_before_group(a, t.sg, scratch), mx_pad(a, s1 - s0), a.mx_width};
      }
      break;
    }
  }
  t.tm = static_cast<int64_t>(blockIdx.y) * kTile, t.tn = static_cast<int64_t>(blockIdx.x) * kTile;
  t.sa_base = t.g * a.m, t.sb_base = t.sg * a.n;
  return true;
}

// e4m3fn codes to fp16, exact (every e4m3fn value is an fp16 value): CUDA's conversion, or under
// HIP (5.2 has no fp8 type) numerics/minifloat_bits.hpp's decode to fp32 and one exact narrowing.
__device__ __forceinline__ __half e4m3_to_half(uint8_t code) {
#if OPCTS_GPU_HIP
  return __float2half_rn(__uint_as_float(bits::decode_to_fp32(code, bits::kE4m3fn)));
#else
  return __half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3));
#endif
}

// Two e4m3fn codes (low byte first) as the bits of an fp16 pair (low half first).
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits(uint16_t pair) {
#if OPCTS_GPU_HIP
  return static_cast<uint32_t>(__half_as_ushort(e4m3_to_half(static_cast<uint8_t>(pair)))) |
         (static_cast<uint32_t>(__half_as_ushort(e4m3_to_half(static_cast<uint8_t>(pair >> 8)))) << 16);
#else
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
#endif
}

// 16 consecutive elements of one operand row (A row or Bᵀ row), converted to the shared-memory
// type T and packed in two 16-byte words; elements past `rows` or past K are zero.
template <class In, class T>
__device__ void fetch16(const In* base, int64_t ld, int64_t row, int64_t rows, int64_t k0, int64_t kg, uint4 (&v)[2]) {
  T e[16];
  const In* p = base + row * ld + k0;
  const bool inside = row < rows;
  if (inside && k0 + 16 <= kg && reinterpret_cast<uintptr_t>(p) % 16 == 0) {
    if constexpr (std::is_same_v<In, bf16>) {
      v[0] = __ldg(reinterpret_cast<const uint4*>(p));
      v[1] = __ldg(reinterpret_cast<const uint4*>(p) + 1);
      return;
    } else {
      const uint4 w = __ldg(reinterpret_cast<const uint4*>(p));
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
      uint32_t out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = e4m3x2_to_half2_bits(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
      v[0] = make_uint4(out[0], out[1], out[2], out[3]);
      v[1] = make_uint4(out[4], out[5], out[6], out[7]);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    if constexpr (std::is_same_v<In, bf16>) {
      e[i] = inside && k0 + i < kg ? p[i] : __float2bfloat16_rn(0.0f);
    } else {
      e[i] = e4m3_to_half(inside && k0 + i < kg ? p[i] : 0);
    }
  }
  memcpy(v, e, sizeof e);
}

using gpu::mma::each_acc;

// C[32×32 warp quarter] += A[wr.., 0..32) · Bᵀ[wc.., 0..32)ᵀ from shared memory. Each 16-deep
// step loads the warp's A fragments (two m16 blocks) and B fragments (four n8 blocks) once, by
// 32-bit loads, and issues 8 MMAs (gpu/portable/mma_tile.cuh: the fragment layout, and
// the emulated MMAs where mma.sync is missing).
template <class T>
__device__ void warp_mma(float (&c)[2][4][4], const T* As, const T* Bs, int wr, int wc, int lane) {
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += 16) {
    uint32_t af[2][4], bfr[4][2];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) gpu::mma::load_a_words<kLd>(af[mi], As, wr + 16 * mi, kk, lane);
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) gpu::mma::load_b_words<kLd>(bfr[ni], Bs, wc + 8 * ni, kk, lane);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) gpu::mma::mma_m16n8k16<T>(c[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
  }
}

// part · 2^(ea−127) · 2^(eb−127): one rounding at most (none while the result is a normal fp32);
// a 0xFF (NaN) scale makes the block NaN.
__device__ float mx_scaled(float part, int ea, int eb) {
  if (ea == 255 || eb == 255) return __int_as_float(0x7fc00000);
  const int s = ea + eb - 254;
  if (s >= -126 && s <= 127) return part * __int_as_float((s + 127) << 23);
  return ldexpf(part, s);
}

template <GroupedRecipe R>
__global__ void __launch_bounds__(kThreads) grouped_kernel(Args a) {
  using In = std::conditional_t<R == GroupedRecipe::bf16, bf16, uint8_t>;
  using T = std::conditional_t<R == GroupedRecipe::bf16, bf16, __half>;
  constexpr bool kMx = R == GroupedRecipe::mxfp8;
  __shared__ __align__(16) T As[kTile * kLd];
  __shared__ __align__(16) T Bs[kTile * kLd];
  __shared__ int Ea[kTile], Eb[kTile];  // mxfp8: the current block's e8m0 exponents per row / column
  __shared__ Found found;
  __shared__ int64_t scratch[kThreads / kWarpSize];

  Tile t;
  if (!tile_of_block<R>(a, t, found, scratch)) return;
  if (a.plant == GroupedPlant::stale_empty_group && t.kg == 0)
    return;  // planted: the empty group's tile is never written
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int wr = 32 * (warp / 2), wc = 32 * (warp % 2);
  const int fr = tid / 2, fc = 16 * (tid % 2);  // the 16 elements of A and Bᵀ this thread stages
  const In* ap = static_cast<const In*>(a.a) + t.a_off;
  const In* bp = static_cast<const In*>(a.b) + t.b_off;
  const auto* sa8 = static_cast<const uint8_t*>(a.sa);
  const auto* sb8 = static_cast<const uint8_t*>(a.sb);

  uint4 ra[2], rb[2];
  int e_next = 127;
  const auto fetch = [&](int64_t k0) {
    fetch16<In, T>(ap, a.lda, t.tm + fr, t.rows, k0 + fc, t.kg, ra);
    fetch16<In, T>(bp, a.ldb, t.tn + fr, t.cols, k0 + fc, t.kg, rb);
    if constexpr (kMx) {
      // Threads 0..63 fetch A's exponent of row tm + tid, 64..127 B's of column tn + tid − 64;
      // rows and columns outside the group get 2^0 (their products are zero anyway).
      const int64_t kb = k0 / 32, i = tid % kTile;
      if (tid < kTile) e_next = t.tm + i < t.rows ? sa8[mx_byte(t.mxa, t.tm + i, kb)] : 127;
      else if (t.tn + i < t.cols) {
        // next_group_scales on 2d_2d may read group g+1's slab past its own columns: bounded by
        // the buffer, not by the slab (a planted read only).
        const int64_t at = mx_byte(t.mxb, t.tn + i, kb);
        e_next = at < a.sb_count ? sb8[at] : 127;
      } else {
        e_next = 127;
      }
    }
  };

  float acc[2][4][4] = {};
  const int64_t ktiles = (t.kg + kTileK - 1) / kTileK;
  if (ktiles) fetch(0);
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    __syncthreads();  // the previous slice's MMAs are done with As, Bs, Ea, Eb
    auto* da = reinterpret_cast<uint4*>(As + fr * kLd + fc);
    auto* db = reinterpret_cast<uint4*>(Bs + fr * kLd + fc);
    da[0] = ra[0], da[1] = ra[1], db[0] = rb[0], db[1] = rb[1];
    if constexpr (kMx) (tid < kTile ? Ea : Eb)[tid % kTile] = e_next;
    __syncthreads();
    if (kt + 1 < ktiles) fetch((kt + 1) * kTileK);
    if constexpr (kMx) {
      float part[2][4][4] = {};
      warp_mma(part, As, Bs, wr, wc, lane);
      each_acc(wr, wc, lane, [&](int mi, int ni, int e, int r, int c) {
        acc[mi][ni][e] += mx_scaled(part[mi][ni][e], Ea[r], Eb[c]);
      });
    } else {
      warp_mma(acc, As, Bs, wr, wc, lane);
    }
  }

  // Epilogue: rowwise scales, one rounding to bf16, stores masked at the group's rows and columns.
  const int g = lane / 4, q = lane % 4;
  const auto* saf = static_cast<const float*>(a.sa);
  const auto* sbf = static_cast<const float*>(a.sb);
  bf16* const out = a.out + t.o_off;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = t.tm + wr + 16 * mi + g + 8 * h, c = t.tn + wc + 8 * ni + 2 * q;
        if (r >= t.rows || c >= t.cols) continue;
        float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
        const bool two = c + 1 < t.cols;
        if constexpr (R == GroupedRecipe::fp8_rowwise) {
          const float s = saf[t.sa_base + r];
          v0 = v0 * s * sbf[t.sb_base + c];
          if (two) v1 = v1 * s * sbf[t.sb_base + c + 1];
        }
        bf16* o = out + r * a.ldo + c;
        if (two && reinterpret_cast<uintptr_t>(o) % 4 == 0) {
          *reinterpret_cast<__nv_bfloat162*>(o) = __floats2bfloat162_rn(v0, v1);
        } else {
          o[0] = __float2bfloat16_rn(v0);
          if (two) o[1] = __float2bfloat16_rn(v1);
        }
      }
  if (a.plant == GroupedPlant::spill_past_n) {
    // Planted: the tile's columns past the group's last column are stored too (their sums are 0),
    // landing on the next row (or the next group's columns), bounded by the output tensor's end.
    __syncthreads();
    each_acc(wr, wc, lane, [&](int, int, int, int lr, int lc) {
      const int64_t r = t.tm + lr, c = t.tn + lc, at = t.o_off + r * a.ldo + c;
      if (r < t.rows && c >= t.cols && at < a.out_extent) a.out[at] = __float2bfloat16_rn(0.0f);
    });
  }
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda.grouped_kernel ") + what + ": " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

}  // namespace

bool grouped_kernel_takes(GroupedMode, GroupedRecipe) { return true; }

void grouped_mm_kernel(const GroupedMmParams& p, CUstream_st* stream) {
  const char* who = "cuda.grouped_kernel";
  const grouped::Shape s = grouped::validate(p, who);
  if (p.mode != GroupedMode::m3d_3d && p.groups > 0) {
    const int64_t multiple = grouped_offs_multiple(p.mode, p.recipe);
    grouped::refuse_offs(grouped::find_offs_fault_device(p, s.split, multiple), s.split, multiple, who);
  }
  const bool out_3d = p.mode == GroupedMode::m3d_3d || p.mode == GroupedMode::m2d_2d;
  if (p.groups == 0 || s.m == 0 || s.n == 0) return;

  Args a{};
  a.mode = p.mode, a.plant = p.plant;
  a.groups = p.groups, a.m = s.m, a.n = s.n, a.k = s.k, a.split = s.split;
  a.a = p.a, a.lda = s.lda, a.a_bs = s.a_bs;
  a.b = p.b, a.ldb = s.ldb, a.b_bs = s.b_bs;
  a.offs = p.offs;
  a.sa = p.a_scale, a.sb = p.b_scale, a.sb_count = p.b_scale_count;
  a.out = static_cast<bf16*>(p.out), a.ldo = s.ldo, a.o_bs = s.o_bs;
  a.out_extent = out_3d ? (p.groups - 1) * s.o_bs + (s.m - 1) * s.ldo + s.n : (s.m - 1) * s.ldo + s.n;
  a.mx_cols = s.mx_cols, a.mx_width = s.mx_width;

  const auto tiles = [](int64_t v) { return (v + kTile - 1) / kTile; };
  dim3 grid;
  switch (p.mode) {
    case GroupedMode::m2d_3d: grid = dim3(tiles(s.n), tiles(s.split) + p.groups, 1); break;
    case GroupedMode::m3d_2d: grid = dim3(tiles(s.split) + p.groups, tiles(s.m), 1); break;
    default: grid = dim3(tiles(s.n), tiles(s.m), p.groups); break;
  }
  const int64_t gy = p.mode == GroupedMode::m2d_3d ? tiles(s.split) + p.groups : tiles(s.m);
  if (gy > 65535)
    throw GroupedArgumentError("mat_a",
                               std::string(who) + ": " + std::to_string(gy) + " row tiles exceed the grid's 65535");
  if (out_3d && p.groups > 65535) throw GroupedArgumentError("groups", std::string(who) + ": more than 65535 groups");
  switch (p.recipe) {
    case GroupedRecipe::bf16: grouped_kernel<GroupedRecipe::bf16><<<grid, kThreads, 0, stream>>>(a); break;
    case GroupedRecipe::fp8_rowwise:
      grouped_kernel<GroupedRecipe::fp8_rowwise><<<grid, kThreads, 0, stream>>>(a);
      break;
    case GroupedRecipe::mxfp8: grouped_kernel<GroupedRecipe::mxfp8><<<grid, kThreads, 0, stream>>>(a); break;
  }
  check_launch("launch");
}

}  // namespace opcts::cuda
