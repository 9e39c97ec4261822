// cuda.int4_gemv's fast path for tinygemm at innerKTiles 8 as __host__ __device__ code: the staged, permuted copy of x and one lane's use of one super-tile.
//
// The generic gemv (int4_mm_layout.cuh's gemv_use) reads x from global memory one 32-bit pair
// per two weights and runs one fp32 FMA chain per lane. Here the block first copies its chunk
// of x, converted to fp32, into shared memory in the order a lane consumes it, so each packed
// word (8 weights) costs two 16-byte shared loads per row of x, and the products go into two
// independent fp32 accumulators per row (even and odd k). The weight words, their group
// parameters and the dequantization are Code<tinygemm>'s (gemv_load, dequant8: the same one
// rounding of each weight to T), so the arithmetic the impl declares is unchanged: products of
// T values exact in fp32, summed in fp32 (in another order, which the bound allows: any order).
//
// Layout of a lane's share (int4_mm_layout.cuh, Code::gemv_use): in super-tile `item` (128 k),
// word w of lane l covers k0 = 128·item + 32w, and its nibble i holds
// k = k0 + 8·(i % 4) + 2·(l % 4) + i / 4. The staged chunk stores x[m][kc + kk] at
// x_slot(kk) = 32·(kk / 32) + 8·q + 2·j + e for kk % 32 = 8j + 2q + e, so the eight x values
// of (word, quad q = l % 4) are contiguous: slot 2j + e pairs with nibble j + 4e.
#pragma once

#include "device_impl/cuda/int4_mm_layout.cuh"

namespace opcts::cuda::int4mm::tiny {

/// Super-tiles a lane loads before it uses the first, for MT rows of x held per thread
/// (16 KiB of weight per 8-warp block in flight at M = 1, within the 85 registers of three
/// blocks per SM; fewer as the accumulators grow).
OPCTS_INT4_HD constexpr int batch(int mt) { return mt <= 1 ? 4 : mt <= 4 ? 2 : 1; }
/// Shared memory bound of a block's staged x (fp32, MT rows of a chunk of super-tiles): three
/// blocks per SM in 96 KiB.
constexpr int64_t kMaxStageBytes = 32 * 1024;

/// The slot of chunk offset kk in the staged x (the file comment).
OPCTS_INT4_HD int64_t x_slot(int64_t kk) {
  const int64_t r = kk & 31;
  return (kk & ~int64_t{31}) + 8 * ((r >> 1) & 3) + 2 * (r >> 3) + (r & 1);
}

/// Thread `tid` of `threads`' share of staging rows 0 .. min(M, mt) − 1 of x[:, kc .. kc + ck)
/// (ck a multiple of 32, kc + ck <= K) into xs (row m at xs + m·ld), as fp32: 8 k per step.
template <class T>
OPCTS_INT4_HD void stage_x(const Args& a, int64_t kc, int64_t ck, int mt, int64_t ld, float* xs, int tid, int threads) {
  const T* x = static_cast<const T*>(a.x);
  const int64_t rows = a.m < mt ? a.m : mt, per_row = ck / 8;
  for (int64_t s = tid; s < rows * per_row; s += threads) {
    const int64_t m = s / per_row, kk = 8 * (s % per_row);
    const Words4 v = *reinterpret_cast<const Words4*>(x + m * a.k + kc + kk);  // 8 k, 16-byte aligned (K % 128 == 0)
    float* row = xs + m * ld;
#pragma unroll
    for (int p = 0; p < 4; ++p) {  // k pair kk + 2p, kk + 2p + 1: adjacent slots
      float lo, hi;
      load_pair(reinterpret_cast<const T*>(&v.w[p]), 0, lo, hi);
      const int64_t at = x_slot(kk + 2 * p);
      row[at] = lo;
      row[at + 1] = hi;
    }
  }
}

struct alignas(16) Floats4 {
  float v[4];
};

/// What a lane loads of one super-tile: its four words (16 bytes) and the raw (scale, zero)
/// words of their groups, converted only when used, so a batch of loads in flight holds 5
/// (OneGroup: the super-tile's 128 k lie in one group, g >= 128) or 8 registers each.
template <bool OneGroup>
struct Frag {
  Words4 v;
  uint32_t sz[OneGroup ? 1 : 4];
};

/// Lane `lane`'s Frag of super-tile `item` of n-tile `unit` (the words Code<tinygemm>::gemv_load
/// reads, at innerKTiles 8).
template <bool OneGroup>
OPCTS_INT4_HD Frag<OneGroup> load(const Args& a, int64_t unit, int64_t item, int lane) {
  Frag<OneGroup> f;
  const int64_t items = a.k / 128, n = 8 * unit + lane / 4;
  f.v = *reinterpret_cast<const Words4*>(reinterpret_cast<const uint32_t*>(a.weight) + ((unit * items + item) * kLanes + lane) * 4);
  const auto* sz = static_cast<const uint32_t*>(a.scales);  // [G][N] (scale, zero) pairs
#pragma unroll
  for (int w = 0; w < (OneGroup ? 1 : 4); ++w) f.sz[w] = sz[((128 * item + 32 * w) >> a.group_shift) * a.n + n];
  return f;
}

/// One lane's products of one super-tile (f = load of it): acc[m][e] += x[m][k]·Ŵ[n][k] over
/// the lane's k of parity e; xs is the staged chunk at the super-tile (row m at xs + m·ld).
/// The dequantization is Code<tinygemm>::dequant8's.
template <class T, int MT, bool OneGroup>
OPCTS_INT4_HD void use(const Args& a, const Frag<OneGroup>& f, const float* xs, int64_t ld, int lane, float (&acc)[MT][2]) {
  using C = Code<Int4Format::tinygemm, T, false>;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t sz = f.sz[OneGroup ? 0 : w];
    const GroupParams g{bits_to_float<T>(static_cast<uint16_t>(sz & 0xFFFF)), bits_to_float<T>(static_cast<uint16_t>(sz >> 16))};
    float wt[8];
    C::dequant8(a, f.v.w[w], g, wt);
    const float* xw = xs + 32 * w + 8 * (lane & 3);
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (m < a.m) {
        const Floats4 x0 = *reinterpret_cast<const Floats4*>(xw + m * ld);
        const Floats4 x1 = *reinterpret_cast<const Floats4*>(xw + m * ld + 4);
#pragma unroll
        for (int j = 0; j < 2; ++j) {  // slots 2j, 2j + 1 of each half: nibbles j, j + 4 and j + 2, j + 6
          acc[m][0] = fmaf(x0.v[2 * j], wt[j], acc[m][0]);
          acc[m][1] = fmaf(x0.v[2 * j + 1], wt[j + 4], acc[m][1]);
          acc[m][0] = fmaf(x1.v[2 * j], wt[j + 2], acc[m][0]);
          acc[m][1] = fmaf(x1.v[2 * j + 1], wt[j + 6], acc[m][1]);
        }
      }
  }
}

}  // namespace opcts::cuda::int4mm::tiny
