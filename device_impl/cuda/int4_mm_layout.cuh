// The int4 kernels' per-thread work as __host__ __device__ code: reading each format, dequantizing, the gemv's share of one thread and the mma kernel's weight tile.
//
// Everything here is plain C++ over raw pointers, so g++ compiles it too: tests/test_int4_mm_layout.cpp
// runs every thread of every block of both kernels' addressing on the CPU against refimpl's
// packers and reference, and only the warp shuffles, barriers and mma instructions of the .cu
// files are left to the GPU. Layouts: refimpl/int4_pack.hpp (with sources).
//
// "Lanes" below are the 32 positions of a format's fragment (tinygemm packs for the 32 lanes of
// an m16n8k16 B operand); kLanes is that width, not the hardware warp size, so the same code
// runs on 64-wide wavefronts by treating each half as a lane group.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "device_impl/cuda/int4_mm_kernels.hpp"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define OPCTS_INT4_HD __host__ __device__ __forceinline__
#else
#define OPCTS_INT4_HD inline
#endif

namespace opcts::cuda::int4mm {

constexpr int kLanes = 32;      // a format's fragment lanes (see the file comment)
constexpr int kWarps = 4;       // warps per gemv block
constexpr int kThreads = kLanes * kWarps;
constexpr int64_t kDropTile = 128;  // the K tile of the drop_partial_k plant

/// What the per-thread code reads, derived from Int4MmParams by the launchers.
struct Args {
  int64_t m, n, k, group;
  int ikt;
  Int4Format format;
  Int4Plant plant;
  int64_t k_end;  // K, or K rounded down to kDropTile (the drop_partial_k plant)
  const void* x;
  const uint8_t* weight;
  const void* scales;
  const uint32_t* zeros;
};

inline Args make_args(const Int4MmParams& p) {
  Args a{p.m, p.n, p.k, p.group_size, p.inner_k_tiles, p.format, p.plant, p.k, p.x,
         static_cast<const uint8_t*>(p.weight), p.scales, static_cast<const uint32_t*>(p.zeros)};
  if (p.plant == Int4Plant::drop_partial_k) a.k_end = p.k / kDropTile * kDropTile;
  return a;
}

// --- 16-bit values -------------------------------------------------------------------------

template <class T>
OPCTS_INT4_HD float to_float(T v);
template <>
OPCTS_INT4_HD float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
OPCTS_INT4_HD float to_float(__half v) { return __half2float(v); }

/// One rounding to T, to nearest even.
template <class T>
OPCTS_INT4_HD T round_to(float v);
template <>
OPCTS_INT4_HD __nv_bfloat16 round_to(float v) { return __float2bfloat16_rn(v); }
template <>
OPCTS_INT4_HD __half round_to(float v) { return __float2half_rn(v); }

template <class T>
OPCTS_INT4_HD float bits_to_float(uint16_t b);
template <>
OPCTS_INT4_HD float bits_to_float<__nv_bfloat16>(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
template <>
OPCTS_INT4_HD float bits_to_float<__half>(uint16_t b) { return __half2float(__ushort_as_half(b)); }

/// Elements k and k + 1 of a row of T (k even: one aligned 32-bit load).
template <class T>
OPCTS_INT4_HD void load_pair(const T* row, int64_t k, float& lo, float& hi) {
  const uint32_t v = *reinterpret_cast<const uint32_t*>(row + k);
  lo = bits_to_float<T>(static_cast<uint16_t>(v & 0xFFFF));
  hi = bits_to_float<T>(static_cast<uint16_t>(v >> 16));
}

/// Exchanges the two nibbles of every byte (the nibble_swap plant).
OPCTS_INT4_HD uint32_t swap_nibbles(uint32_t v) { return (v & 0x0F0F0F0Fu) << 4 | (v >> 4 & 0x0F0F0F0Fu); }

OPCTS_INT4_HD uint32_t weight_word(const Args& a, uint32_t v) {
  return a.plant == Int4Plant::nibble_swap ? swap_nibbles(v) : v;
}

// --- Dequantization: one rounding to T per weight (int4_mm_reference.cpp's model) -----------

/// Scale and zero of (group, column) as the format stores them: tinygemm (scale, zero);
/// awq/gptq (scale, integer z, GPTQ's +1 undone); q4_0 reads d from its block instead.
struct GroupParams {
  float scale, zero;  // each holds a T value (q4_0's d an fp16 value) exactly
};

template <class T>
OPCTS_INT4_HD GroupParams group_params(const Args& a, int64_t gi, int64_t n) {
  if (a.plant == Int4Plant::group0_scale && a.m == 1) gi = 0;
  const auto* s = static_cast<const uint16_t*>(a.scales);
  GroupParams g{};
  if (a.format == Int4Format::tinygemm || a.format == Int4Format::tinygemm_unpacked) {
    g.scale = bits_to_float<T>(s[2 * (gi * a.n + n)]);
    g.zero = bits_to_float<T>(s[2 * (gi * a.n + n) + 1]);
    return g;
  }
  g.scale = bits_to_float<T>(s[gi * a.n + n]);
  const uint32_t zw = a.zeros[gi * (a.n / 8) + n / 8];
  // AWQ's qzeros interleave like its qweight: column c of 8 sits in nibble kAwqSlot[c].
  const int slot = a.format == Int4Format::awq ? static_cast<int>((0x73625140u >> (4 * (n % 8))) & 0xF) : static_cast<int>(n % 8);
  const uint32_t stored = zw >> (4 * slot) & 0xF;
  g.zero = static_cast<float>(stored) + (a.format == Int4Format::gptq && a.plant != Int4Plant::gptq_z ? 1.0f : 0.0f);
  return g;
}

/// Q4_0's d of block b of row n (its scale; the group0_scale plant reads block 0's at M = 1).
OPCTS_INT4_HD GroupParams q4_0_params(const Args& a, int64_t n, int64_t b) {
  if (a.plant == Int4Plant::group0_scale && a.m == 1) b = 0;
  const auto* d = reinterpret_cast<const uint16_t*>(a.weight + 18 * (n * (a.k / 32) + b));
  GroupParams g{};
  g.scale = __half2float(__ushort_as_half(d[0]));
  return g;
}

/// Ŵ of code q, as a float holding a T value.
template <class T>
OPCTS_INT4_HD float dequant(const Args& a, unsigned q, const GroupParams& g) {
  const float qf = static_cast<float>(q);
  switch (a.format) {
    case Int4Format::tinygemm:
    case Int4Format::tinygemm_unpacked:
      if (a.plant == Int4Plant::zero_before_scale) return to_float(round_to<T>((qf - 8.0f + g.zero) * g.scale));
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
      // (q − 8)·scale + zero fused in T: one rounding (fma.rn.bf16 / fma.rn.f16), as tinygemm.
      return to_float(__hfma(round_to<T>(qf - 8.0f), round_to<T>(g.scale), round_to<T>(g.zero)));
#else
      // The host's one rounding: the exact value in double (an 8- or 11-bit scale times a small
      // integer plus an 8- or 11-bit zero), then the toolkit's correctly rounded conversion.
      if constexpr (std::is_same_v<T, __half>)
        return to_float(__double2half((static_cast<double>(qf) - 8.0) * g.scale + g.zero));
      else
        return to_float(__double2bfloat16((static_cast<double>(qf) - 8.0) * g.scale + g.zero));
#endif
    case Int4Format::awq:
    case Int4Format::gptq:
      // (q − z)·scale: a 5-bit integer times an 8- or 11-bit significand is exact in fp32.
      if (a.plant == Int4Plant::zero_before_scale) return to_float(round_to<T>(qf * g.scale - g.zero));
      return to_float(round_to<T>((qf - g.zero) * g.scale));
    case Int4Format::q4_0: return to_float(round_to<T>((qf - 8.0f) * g.scale));
  }
  return 0.0f;
}

// --- cuda.int4_gemv: one thread's share ----------------------------------------------------
//
// A block (kWarps warps) owns a column unit of its format and a contiguous slice of "items"
// along K; warp w takes items slice_begin + w, + kWarps, ... Per format:
//   format      unit (columns)   item                       a lane's share of an item
//   tinygemm    one n-tile (8)   one k super-tile (16·ikt)  its ikt/2 words: 1 column, 8·ikt/2 k
//   unpacked    one column       1024 k                     16 bytes: 32 consecutive k
//   awq         8 words (64)     4 rows of K                one word: 8 columns of one k
//   gptq        32 columns       one word row (8 k)         one word: 8 k of one column
//   q4_0        one column       32 blocks (1024 k)         one 18-byte block: 32 k
// acc[m][c] accumulates row m of column gemv_column(F, unit, lane, c).

template <Int4Format F>
constexpr int kGemvCols = F == Int4Format::awq ? 8 : 1;

template <Int4Format F>
OPCTS_INT4_HD int64_t gemv_units(const Args& a) {
  switch (F) {
    case Int4Format::tinygemm: return a.n / 8;
    case Int4Format::awq: return (a.n / 8 + 7) / 8;
    case Int4Format::gptq: return (a.n + kLanes - 1) / kLanes;
    default: return a.n;
  }
}

template <Int4Format F>
OPCTS_INT4_HD int64_t gemv_items(const Args& a) {
  switch (F) {
    case Int4Format::tinygemm: return a.k / (16 * a.ikt);
    case Int4Format::awq: return a.k / 4;
    case Int4Format::gptq: return a.k / 8;
    default: return (a.k + 1023) / 1024;
  }
}

/// The output column of acc[.][c] of `lane` in `unit`; >= N for a lane past the last column.
template <Int4Format F>
OPCTS_INT4_HD int64_t gemv_column(int64_t unit, int lane, int c) {
  switch (F) {
    case Int4Format::tinygemm: return 8 * unit + lane / 4;
    case Int4Format::awq: return 64 * unit + 8 * (lane % 8) + c;
    case Int4Format::gptq: return kLanes * unit + lane;
    default: return unit;
  }
}

/// Whether `lane` is the one that holds its column's sum after the lanes sharing the column
/// were reduced (the reduction offsets of gemv_share_offsets).
template <Int4Format F>
OPCTS_INT4_HD bool gemv_representative(int lane) {
  switch (F) {
    case Int4Format::tinygemm: return lane % 4 == 0;
    case Int4Format::awq: return lane < 8;
    case Int4Format::gptq: return true;
    default: return lane == 0;
  }
}

/// Lane-index bits that differ between lanes summing into the same columns: the xor offsets
/// of the butterfly reduction (a mask over 1, 2, 4, 8, 16).
template <Int4Format F>
constexpr int kGemvShareMask = F == Int4Format::tinygemm ? 0x3 : F == Int4Format::awq ? 0x18 : F == Int4Format::gptq ? 0 : 0x1F;

struct alignas(16) Words4 {
  uint32_t w[4];
};

// acc[m][c] += x[m][k] · ŵ for one code (rows m < a.m).
template <class T, int MT, int C>
OPCTS_INT4_HD void fma_rows(const Args& a, float (&acc)[MT][C], int c, int64_t k, float w) {
  const T* x = static_cast<const T*>(a.x);
#pragma unroll
  for (int m = 0; m < MT; ++m)
    if (m < a.m) acc[m][c] += to_float(x[m * a.k + k]) * w;
}

// acc[m][0] += x[m][k]·w0 + x[m][k + 1]·w1 (k even), two products per pair load.
template <class T, int MT, int C>
OPCTS_INT4_HD void fma_rows_pair(const Args& a, float (&acc)[MT][C], int64_t k, float w0, float w1) {
  const T* x = static_cast<const T*>(a.x);
#pragma unroll
  for (int m = 0; m < MT; ++m)
    if (m < a.m) {
      float x0, x1;
      load_pair(x + m * a.k, k, x0, x1);
      acc[m][0] += x0 * w0;
      acc[m][0] += x1 * w1;
    }
}

template <class T, int MT>
OPCTS_INT4_HD void gemv_tinygemm(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][1]) {
  const int half = a.ikt / 2;
  const int64_t k_outer = a.k / (16 * a.ikt);
  const uint32_t* p = reinterpret_cast<const uint32_t*>(a.weight) + ((unit * k_outer + item) * kLanes + lane) * half;
  uint32_t words[4];
  if (half == 4) {
    const Words4 v = *reinterpret_cast<const Words4*>(p);  // one 16-byte load
    for (int w = 0; w < 4; ++w) words[w] = v.w[w];
  } else {
    for (int w = 0; w < half; ++w) words[w] = p[w];
  }
  const int64_t n = 8 * unit + lane / 4;
  for (int w = 0; w < half; ++w) {
    const int64_t k0 = 16 * (item * a.ikt + 2 * w);  // two k-tiles, 32 k, one group
    if (k0 >= a.k_end) continue;
    const GroupParams g = group_params<T>(a, k0 / a.group, n);
    const uint32_t v = weight_word(a, words[w]);
    // nibble i: k = k0 + 16·((i % 4) / 2) + 8·(i % 2) + 2·(lane % 4) + i / 4; nibbles i and
    // i + 4 are the pair (k, k + 1).
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t k = k0 + 16 * (i / 2) + 8 * (i % 2) + 2 * (lane % 4);
      fma_rows_pair<T>(a, acc, k, dequant<T>(a, v >> (4 * i) & 0xF, g), dequant<T>(a, v >> (4 * (i + 4)) & 0xF, g));
    }
  }
}

template <class T, int MT>
OPCTS_INT4_HD void gemv_unpacked(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][1]) {
  const int64_t k0 = 1024 * item + 32 * lane;
  if (k0 >= a.k_end) return;
  const Words4 v = *reinterpret_cast<const Words4*>(a.weight + unit * (a.k / 2) + k0 / 2);  // 16 bytes, 32 k
  const GroupParams g = group_params<T>(a, k0 / a.group, unit);
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t word = weight_word(a, v.w[w]);
#pragma unroll
    for (int b = 0; b < 4; ++b) {  // byte 4w + b: k = k0 + 2(4w + b) high nibble, + 1 low nibble
      const unsigned byte = word >> (8 * b) & 0xFF;
      fma_rows_pair<T>(a, acc, k0 + 2 * (4 * w + b), dequant<T>(a, byte >> 4, g), dequant<T>(a, byte & 0xF, g));
    }
  }
}

template <class T, int MT>
OPCTS_INT4_HD void gemv_awq(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][8]) {
  const int64_t words_per_row = a.n / 8;
  const int64_t c = 8 * unit + lane % 8, k = 4 * item + lane / 8;
  if (c >= words_per_row || k >= a.k_end) return;
  const uint32_t v = weight_word(a, reinterpret_cast<const uint32_t*>(a.weight)[k * words_per_row + c]);
  const int64_t gi = k / a.group;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int col = static_cast<int>((0x75316420u >> (4 * i)) & 0xF);  // kAwqOrder[i]: nibble i's column
    const GroupParams g = group_params<T>(a, gi, 8 * c + col);
    fma_rows<T>(a, acc, col, k, dequant<T>(a, v >> (4 * i) & 0xF, g));
  }
}

template <class T, int MT>
OPCTS_INT4_HD void gemv_gptq(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][1]) {
  const int64_t n = kLanes * unit + lane, k0 = 8 * item;
  if (n >= a.n || k0 >= a.k_end) return;
  const uint32_t v = weight_word(a, reinterpret_cast<const uint32_t*>(a.weight)[item * a.n + n]);
  const GroupParams g = group_params<T>(a, k0 / a.group, n);
#pragma unroll
  for (int i = 0; i < 8; i += 2)
    fma_rows_pair<T>(a, acc, k0 + i, dequant<T>(a, v >> (4 * i) & 0xF, g), dequant<T>(a, v >> (4 * i + 4) & 0xF, g));
}

template <class T, int MT>
OPCTS_INT4_HD void gemv_q4_0(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][1]) {
  const int64_t blocks = a.k / 32, b = 32 * item + lane;
  if (b >= blocks || 32 * b >= a.k_end) return;
  const auto* blk = reinterpret_cast<const uint16_t*>(a.weight + 18 * (unit * blocks + b));  // 2-byte aligned
  const GroupParams g = q4_0_params(a, unit, b);
#pragma unroll
  for (int h = 0; h < 8; ++h) {  // qs bytes 2h, 2h + 1: codes j and j + 16 for j = 2h, 2h + 1
    const uint32_t two = weight_word(a, blk[1 + h]);
    const int64_t j = 32 * b + 2 * h;
    fma_rows_pair<T>(a, acc, j, dequant<T>(a, two & 0xF, g), dequant<T>(a, two >> 8 & 0xF, g));
    fma_rows_pair<T>(a, acc, j + 16, dequant<T>(a, two >> 4 & 0xF, g), dequant<T>(a, two >> 12 & 0xF, g));
  }
}

/// One thread's contribution of one item (see the table above).
template <Int4Format F, class T, int MT>
OPCTS_INT4_HD void gemv_item(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][kGemvCols<F>]) {
  if constexpr (F == Int4Format::tinygemm) gemv_tinygemm<T>(a, unit, item, lane, acc);
  else if constexpr (F == Int4Format::tinygemm_unpacked) gemv_unpacked<T>(a, unit, item, lane, acc);
  else if constexpr (F == Int4Format::awq) gemv_awq<T>(a, unit, item, lane, acc);
  else if constexpr (F == Int4Format::gptq) gemv_gptq<T>(a, unit, item, lane, acc);
  else gemv_q4_0<T>(a, unit, item, lane, acc);
}

// --- cuda.int4_mm: the dequantized weight tile -----------------------------------------------
//
// A block of kThreads threads fills Bs[n][k] (kTileN columns × kTileK k, K contiguous, as the
// mma B operand reads it) from the packed weight at (n0, k0), n0 a multiple of kTileN and k0 of
// kTileK; kTileK = 32 lies inside one group (every group size is a multiple of 32). Thread tid
// handles two words (tinygemm, awq, gptq), 8 bytes of a row (unpacked) or half of a block's qs
// (q4_0); columns past N are written as 0.

constexpr int kTileN = 64, kTileK = 32, kTilePad = 8;
constexpr int kTileLd = kTileK + kTilePad;  // row stride of the shared tiles (elements)

template <class T>
OPCTS_INT4_HD void put(T* tile, int64_t nl, int64_t kl, float w) {
  tile[nl * kTileLd + kl] = round_to<T>(w);  // w already holds a T value: exact
}

template <class T>
OPCTS_INT4_HD void mm_tile_part(const Args& a, int64_t n0, int64_t k0, int tid, T* tile) {
  const int64_t gi = k0 / a.group;
  switch (a.format) {
    case Int4Format::tinygemm: {
      const int half = a.ikt / 2;
      const int64_t k_outer = a.k / (16 * a.ikt), kt = k0 / 16;
      for (int r = 0; r < 2; ++r) {
        const int word = tid + kThreads * r;  // 8 n-tiles × 32 lanes
        const int ntl = word / kLanes, lane = word % kLanes;
        const int64_t n = n0 + 8 * ntl + lane / 4;
        const int64_t nt = n / 8;
        if (n >= a.n) {
          for (int i = 0; i < 8; ++i) put(tile, 8 * ntl + lane / 4, 16 * ((i % 4) / 2) + 8 * (i % 2) + 2 * (lane % 4) + i / 4, 0.0f);
          continue;
        }
        const uint32_t* p = reinterpret_cast<const uint32_t*>(a.weight);
        const uint32_t v = weight_word(a, p[((nt * k_outer + kt / a.ikt) * kLanes + lane) * half + (kt % a.ikt) / 2]);
        const GroupParams g = group_params<T>(a, gi, n);
        for (int i = 0; i < 8; ++i)
          put(tile, n - n0, 16 * ((i % 4) / 2) + 8 * (i % 2) + 2 * (lane % 4) + i / 4, dequant<T>(a, v >> (4 * i) & 0xF, g));
      }
      break;
    }
    case Int4Format::tinygemm_unpacked: {
      const int64_t n = n0 + tid / 2, kl0 = 16 * (tid % 2);
      const bool in = n < a.n;
      const uint32_t* p = reinterpret_cast<const uint32_t*>(a.weight + (in ? n * (a.k / 2) + (k0 + kl0) / 2 : 0));
      const GroupParams g = in ? group_params<T>(a, gi, n) : GroupParams{};
      for (int w = 0; w < 2; ++w) {
        const uint32_t word = in ? weight_word(a, p[w]) : 0;
        for (int b = 0; b < 4; ++b) {
          const unsigned byte = word >> (8 * b) & 0xFF;
          const int64_t kl = kl0 + 2 * (4 * w + b);
          put(tile, tid / 2, kl, in ? dequant<T>(a, byte >> 4, g) : 0.0f);
          put(tile, tid / 2, kl + 1, in ? dequant<T>(a, byte & 0xF, g) : 0.0f);
        }
      }
      break;
    }
    case Int4Format::awq: {
      const int64_t words_per_row = a.n / 8;
      for (int r = 0; r < 2; ++r) {
        const int word = tid + kThreads * r;  // 32 rows × 8 words
        const int64_t kl = word / 8, c = n0 / 8 + word % 8;
        const bool in = c < words_per_row;
        const uint32_t v = in ? weight_word(a, reinterpret_cast<const uint32_t*>(a.weight)[(k0 + kl) * words_per_row + c]) : 0;
        for (int i = 0; i < 8; ++i) {
          const int col = static_cast<int>((0x75316420u >> (4 * i)) & 0xF);
          put(tile, 8 * (word % 8) + col, kl, in ? dequant<T>(a, v >> (4 * i) & 0xF, group_params<T>(a, gi, 8 * c + col)) : 0.0f);
        }
      }
      break;
    }
    case Int4Format::gptq: {
      for (int r = 0; r < 2; ++r) {
        const int word = tid + kThreads * r;  // 4 word rows × 64 columns
        const int64_t kr = word / kTileN, n = n0 + word % kTileN;
        const bool in = n < a.n;
        const uint32_t v = in ? weight_word(a, reinterpret_cast<const uint32_t*>(a.weight)[(k0 / 8 + kr) * a.n + n]) : 0;
        const GroupParams g = in ? group_params<T>(a, gi, n) : GroupParams{};
        for (int i = 0; i < 8; ++i) put(tile, word % kTileN, 8 * kr + i, in ? dequant<T>(a, v >> (4 * i) & 0xF, g) : 0.0f);
      }
      break;
    }
    case Int4Format::q4_0: {
      const int64_t n = n0 + tid / 2, h = tid % 2;  // qs bytes 8h .. 8h + 7
      const bool in = n < a.n;
      const auto* blk = reinterpret_cast<const uint16_t*>(a.weight + (in ? 18 * (n * (a.k / 32) + k0 / 32) : 0));
      const GroupParams g = in ? q4_0_params(a, n, k0 / 32) : GroupParams{};
      for (int j2 = 0; j2 < 4; ++j2) {
        const uint32_t two = in ? weight_word(a, blk[1 + 4 * h + j2]) : 0;
        const int64_t j = 8 * h + 2 * j2;
        put(tile, tid / 2, j, in ? dequant<T>(a, two & 0xF, g) : 0.0f);
        put(tile, tid / 2, j + 1, in ? dequant<T>(a, two >> 8 & 0xF, g) : 0.0f);
        put(tile, tid / 2, j + 16, in ? dequant<T>(a, two >> 4 & 0xF, g) : 0.0f);
        put(tile, tid / 2, j + 17, in ? dequant<T>(a, two >> 12 & 0xF, g) : 0.0f);
      }
      break;
    }
  }
}

}  // namespace opcts::cuda::int4mm
