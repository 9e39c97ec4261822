// The int4 kernels' per-thread work as __host__ __device__ code: reading each format, dequantizing, the gemv's share of
// one thread and the mma kernel's weight tile.
//
// Everything here is plain C++ over raw pointers, so g++ compiles it too:
// families/int4_mm/tests/cuda/test_int4_mm_layout.cpp runs every thread of every block of both kernels' addressing on
// the CPU against refimpl's packers and reference, and only the warp shuffles, barriers and mma instructions of the .cu
// files are left to the GPU. Layouts: families/int4_mm/int4_pack.hpp (with sources).
//
// Code<F, T, Planted> is one format F with activations T (__nv_bfloat16 or __half); the format
// and whether a plant may be set are template parameters, so a real kernel carries no plant
// test and no format switch in its inner loop. "Lanes" are the 32 positions of a format's
// fragment (tinygemm packs for the 32 lanes of an m16n8k16 B operand); kLanes is that width,
// not the hardware warp size, so the same code runs on 64-wide wavefronts, one lane group per half
// (gpu.hpp's kWarp; the kernels' shuffles stay inside their 32 lanes).
#pragma once

#include "gpu/portable/gpu.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "families/int4_mm/cuda/int4_mm_kernels.hpp"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define OPCTS_INT4_HD __host__ __device__ __forceinline__
#else
#define OPCTS_INT4_HD inline
#endif

namespace opcts::cuda::int4mm {

constexpr int kLanes = gpu::kWarp;  // a format's fragment lanes, 32 (see the file comment)
constexpr int kWarps = 4;           // warps per block, both kernels
constexpr int kThreads = kLanes * kWarps;
constexpr int64_t kDropTile = 128;  // the K tile of the drop_partial_k plant
// cuda.int4_mm's weight tile (Code::mm_tile_part): kTileN columns × kTileK k in shared memory,
// rows kTileLd elements apart (the padding spreads a warp's fragment loads over 32 banks).
constexpr int kTileN = 64, kTileK = 32, kTileLd = kTileK + 8;

/// What the per-thread code reads, derived from Int4MmParams by the launchers.
struct Args {
  int64_t m, n, k;
  int group_shift;  // log2 of the group size (32, 64, 128, 256)
  int ikt;
  Int4Plant plant;
  int64_t k_end;  // K, or K rounded down to kDropTile (the drop_partial_k plant)
  const void* x;
  const uint8_t* weight;
  const void* scales;
  const uint32_t* zeros;
};

inline Args make_args(const Int4MmParams& p) {
  int shift = 0;
  while ((int64_t{1} << shift) < p.group_size) ++shift;
  Args a{p.m,
         p.n,
         p.k,
         shift,
         p.inner_k_tiles,
         p.plant,
         p.k,
         p.x,
         static_cast<const uint8_t*>(p.weight),
         p.scales,
         static_cast<const uint32_t*>(p.zeros)};
  if (p.plant == Int4Plant::drop_partial_k) a.k_end = p.k / kDropTile * kDropTile;
  return a;
}

// --- 16-bit values -------------------------------------------------------------------------

template <class T>
OPCTS_INT4_HD float to_float(T v);
template <>
OPCTS_INT4_HD float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
OPCTS_INT4_HD float to_float(__half v) {
  return __half2float(v);
}

/// One rounding to T, to nearest even.
template <class T>
OPCTS_INT4_HD T round_to(float v);
template <>
OPCTS_INT4_HD __nv_bfloat16 round_to(float v) {
  return __float2bfloat16_rn(v);
}
template <>
OPCTS_INT4_HD __half round_to(float v) {
  return __float2half_rn(v);
}

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
OPCTS_INT4_HD float bits_to_float<__half>(uint16_t b) {
  return __half2float(__ushort_as_half(b));
}

/// Elements k and k + 1 of a row of T (k even: one aligned 32-bit load).
template <class T>
OPCTS_INT4_HD void load_pair(const T* row, int64_t k, float& lo, float& hi) {
  const uint32_t v = *reinterpret_cast<const uint32_t*>(row + k);
  lo = bits_to_float<T>(static_cast<uint16_t>(v & 0xFFFF));
  hi = bits_to_float<T>(static_cast<uint16_t>(v >> 16));
}

struct alignas(16) Words4 {
  uint32_t w[4];
};
struct alignas(8) Words2 {
  uint32_t w[2];
};

/// Exchanges the two nibbles of every byte (the nibble_swap plant).
OPCTS_INT4_HD uint32_t swap_nibbles(uint32_t v) { return (v & 0x0F0F0F0Fu) << 4 | (v >> 4 & 0x0F0F0F0Fu); }

/// kAwqOrder[i] (families/int4_mm/int4_pack.hpp): the column of 8 that nibble i of an AWQ word holds.
OPCTS_INT4_HD int awq_column(int i) { return static_cast<int>((0x75316420u >> (4 * i)) & 0xF); }

/// Scale and zero of (group, column) as the format stores them: tinygemm (scale, zero); awq,
/// gptq (scale, integer z with GPTQ's +1 undone); q4_0 (d). Each holds a T (d an fp16) value.
struct GroupParams {
  float scale, zero;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !OPCTS_GPU_HIP
#define OPCTS_INT4_PAIRS 1
// Two T values as one 32-bit register, for the paired dequantization (Code::dequant8).
template <class T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static constexpr uint32_t kMagic = 0x43004300u;  // {128, 128}: spacing 1 there
  static constexpr float kBias = 128.0f;
  __device__ static type of(float v) { return __float2bfloat162_rn(v); }
  __device__ static float2 floats(type v) { return __bfloat1622float2(v); }
};
template <>
struct Pair<__half> {
  using type = __half2;
  static constexpr uint32_t kMagic = 0x64006400u;  // {1024, 1024}: spacing 1 there
  static constexpr float kBias = 1024.0f;
  __device__ static type of(float v) { return __float2half2_rn(v); }
  __device__ static float2 floats(type v) { return __half22float2(v); }
};

// {B + q_i, B + q_{i+4}} from nibbles i and i + 4 of v: (v >> 4i) & 0x000F000F | magic in one
// LOP3, both constants in registers (an immediate takes one operand only, so nvcc's own code for
// the expression is two LOP3s).
template <class T>
__device__ __forceinline__ typename Pair<T>::type biased_pair(uint32_t v, int i) {
  uint32_t h;
  const uint32_t mask = 0x000F000Fu, magic = Pair<T>::kMagic;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(h) : "r"(v >> (4 * i)), "r"(mask), "r"(magic));  // (a & b) | c
  typename Pair<T>::type r;
  memcpy(&r, &h, 4);
  return r;
}

template <class T>
__device__ __forceinline__ void store_pair(float (&w)[8], int i, typename Pair<T>::type r) {
  const float2 f = Pair<T>::floats(r);
  w[i] = f.x;
  w[i + 4] = f.y;
}
#endif

/// Items a gemv lane loads before it computes any (Code::kBatch): 64 bytes of packed weight in
/// flight, at most 8 items (each holds its group's parameters in registers), a half or a
/// quarter of that as more rows of x take registers.
constexpr int gemv_batch(int lane_bytes, int mt) {
  const int b = 64 / lane_bytes / (mt <= 2 ? 1 : mt <= 4 ? 2 : 4);
  return b < 1 ? 1 : b > 8 ? 8 : b;
}

template <Int4Format F, class T, bool Planted>
struct Code {
  static constexpr bool kTinygemm = F == Int4Format::tinygemm || F == Int4Format::tinygemm_unpacked;

  OPCTS_INT4_HD static Int4Plant plant(const Args& a) { return Planted ? a.plant : Int4Plant::none; }
  OPCTS_INT4_HD static uint32_t word(const Args& a, uint32_t v) {
    return plant(a) == Int4Plant::nibble_swap ? swap_nibbles(v) : v;
  }
  // The group0_scale plant reads group (or Q4_0 block) 0's parameters at M = 1.
  OPCTS_INT4_HD static int64_t group_of(const Args& a, int64_t gi) {
    return plant(a) == Int4Plant::group0_scale && a.m == 1 ? 0 : gi;
  }

  /// The parameters of group gi (for Q4_0: block gi) of column n.
  OPCTS_INT4_HD static GroupParams params(const Args& a, int64_t gi, int64_t n) {
    gi = group_of(a, gi);
    if constexpr (F == Int4Format::q4_0) {
      const auto* d = reinterpret_cast<const uint16_t*>(a.weight + 18 * (n * (a.k / 32) + gi));
      return {__half2float(__ushort_as_half(d[0])), 8.0f};
    } else {
      const auto* s = static_cast<const uint16_t*>(a.scales);
      if constexpr (kTinygemm) {  // the (scale, zero) pair as one aligned 32-bit load
        const uint32_t sz = reinterpret_cast<const uint32_t*>(s)[gi * a.n + n];
        return {bits_to_float<T>(static_cast<uint16_t>(sz & 0xFFFF)),
                bits_to_float<T>(static_cast<uint16_t>(sz >> 16))};
      }
      const uint32_t zw = a.zeros[gi * (a.n / 8) + n / 8];
      // AWQ's qzeros interleave like its qweight: column c of 8 sits in nibble kAwqSlot[c].
      const int slot =
          F == Int4Format::awq ? static_cast<int>((0x73625140u >> (4 * (n % 8))) & 0xF) : static_cast<int>(n % 8);
      const float stored = static_cast<float>(zw >> (4 * slot) & 0xF);
      return {bits_to_float<T>(s[gi * a.n + n]),
              stored + (F == Int4Format::gptq && plant(a) != Int4Plant::gptq_z ? 1.0f : 0.0f)};
    }
  }

  /// Ŵ of code q, one rounding to T (families/int4_mm/reference.cpp's model), as a float.
  OPCTS_INT4_HD static float dequant(const Args& a, unsigned q, const GroupParams& g) {
    const float qf = static_cast<float>(q);
    if constexpr (kTinygemm) {
      if (plant(a) == Int4Plant::zero_before_scale) return to_float(round_to<T>((qf - 8.0f + g.zero) * g.scale));
#if defined(__CUDA_ARCH__)
      // (q − 8)·scale + zero fused in T: one rounding (fma.rn.bf16 / fma.rn.f16), as tinygemm.
      return to_float(__hfma(round_to<T>(qf - 8.0f), round_to<T>(g.scale), round_to<T>(g.zero)));
#else
      // The host's (and HIP's: HIP 5.2 has no bf16 fma) one rounding: the exact value in double
      // (a small integer times an 8- or 11-bit scale plus an 8- or 11-bit zero), then the
      // correctly rounded conversion (the toolkit's; under HIP gpu.hpp's).
      const double v = (static_cast<double>(qf) - 8.0) * g.scale + g.zero;
      if constexpr (std::is_same_v<T, __half>) return to_float(__double2half(v));
      else return to_float(__double2bfloat16(v));
#endif
    } else {
      // (q − z)·scale, (q − 8)·d: a 5-bit integer times an 8- or 11-bit significand is exact in
      // fp32, so the conversion to T is the one rounding.
      if (plant(a) == Int4Plant::zero_before_scale) return to_float(round_to<T>(qf * g.scale - g.zero));
      return to_float(round_to<T>((qf - g.zero) * g.scale));
    }
  }

  // Eight weights of a 32-bit word. On sm_80+ two weights per instruction, as tinygemm and the
  // AWQ kernels do: nibbles i and i + 4 are masked into the low mantissa bits of a T pair
  // {B + q_i, B + q_{i+4}} (B = 128 in bf16, 1024 in fp16, where the spacing is 1), the bias and
  // zero point come off exactly (an fma by ±1 of small integers), and the one rounding is the
  // __hfma2 / __hmul2 by the scale. Elsewhere (the host, HIP for now, the zero_before_scale
  // plant, Q4_0's fp16 d under bf16) each weight goes through `dequant`: the same one rounding
  // of the same exact value, so both paths give the same bits.

  /// w[i] = Ŵ of nibble i of v, every nibble in the group of `g` (not AWQ: dequant8_awq).
  OPCTS_INT4_HD static void dequant8(const Args& a, uint32_t v, const GroupParams& g, float (&w)[8]) {
#if defined(OPCTS_INT4_PAIRS)
    using P = Pair<T>;
    constexpr bool q4_bf16 = F == Int4Format::q4_0 && std::is_same_v<T, __nv_bfloat16>;
    if (!q4_bf16 && plant(a) != Int4Plant::zero_before_scale) {
      const auto one = P::of(1.0f), s = P::of(g.scale), z = P::of(g.zero);
      const auto minus = P::of(-(P::kBias + (kTinygemm ? 8.0f : g.zero)));  // −(B + 8) or −(B + z)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const auto qz = __hfma2(biased_pair<T>(v, i), one, minus);  // q − 8 or q − z: exact
        store_pair<T>(w, i, kTinygemm ? __hfma2(qz, s, z) : __hmul2(qz, s));
      }
      return;
    }
#endif
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = dequant(a, v >> (4 * i) & 0xF, g);
  }

  /// AWQ: the words of word column c's group gi that dequant8_awq reads: its qzeros word and
  /// the scales of its 8 columns (16 bytes: N is a multiple of 8, the scales 16-byte aligned).
  struct AwqGroup {
    uint32_t zw;
    Words4 s;
  };
  OPCTS_INT4_HD static AwqGroup awq_group(const Args& a, int64_t gi, int64_t c) {
    const int64_t g = group_of(a, gi);
    return {a.zeros[g * (a.n / 8) + c],
            *reinterpret_cast<const Words4*>(static_cast<const uint16_t*>(a.scales) + g * a.n + 8 * c)};
  }

  /// AWQ: w[i] = Ŵ of nibble i of v, word column c in group gi (its words `gw`). Nibbles i and
  /// i + 4 are the adjacent columns 8c + 2i and 8c + 2i + 1, and the qzeros word interleaves
  /// the same way.
  OPCTS_INT4_HD static void dequant8_awq(const Args& a, uint32_t v, const AwqGroup& gw, int64_t gi, int64_t c,
                                         float (&w)[8]) {
#if defined(OPCTS_INT4_PAIRS)
    using P = Pair<T>;
    if (plant(a) != Int4Plant::zero_before_scale) {
      const auto minus_one = P::of(-1.0f);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const auto qz = __hfma2(biased_pair<T>(gw.zw, i), minus_one, biased_pair<T>(v, i));  // (B + q) − (B + z): exact
        typename P::type sp;  // the scales of columns 2i, 2i + 1
        const uint32_t bits = gw.s.w[i];
        memcpy(&sp, &bits, 4);
        store_pair<T>(w, i, __hmul2(qz, sp));
      }
      return;
    }
#endif
    (void)gw;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = dequant(a, v >> (4 * i) & 0xF, params(a, gi, 8 * c + awq_column(i)));
  }

  /// Q4_0's qs bytes 4j .. 4j + 3 of a block as one word (the block is only 2-byte aligned).
  OPCTS_INT4_HD static uint32_t q4_0_word(const uint16_t* blk, int j) {
    return static_cast<uint32_t>(blk[1 + 2 * j]) | static_cast<uint32_t>(blk[2 + 2 * j]) << 16;
  }

  // --- cuda.int4_gemv: one thread's share --------------------------------------------------
  //
  // A block (kWarps warps) owns a column unit of its format and a contiguous slice of "items"
  // along K; warp w takes items slice_begin + w, + kWarps, ... Per format:
  //   format      unit (columns)   item                       a lane's share of an item
  //   tinygemm    one n-tile (8)   one k super-tile (16·ikt)  its ikt/2 words: 1 column, 8·ikt/2 k
  //   unpacked    one column       1024 k                     16 bytes: 32 consecutive k
  //   awq         8 words (64)     4 rows of K                one word: 8 columns of one k
  //   gptq        32 columns       one word row (8 k)         one word: 8 k of one column
  //   q4_0        one column       32 blocks (1024 k)         one 18-byte block: 32 k
  // acc[m][c] accumulates row m of column column(unit, lane, c).

  static constexpr int kCols = F == Int4Format::awq ? 8 : 1;
  /// Lane-index bits that differ between lanes summing into the same columns: the xor offsets
  /// of the butterfly reduction.
  static constexpr int kShareMask = F == Int4Format::tinygemm ? 0x3
                                    : F == Int4Format::awq    ? 0x18
                                    : F == Int4Format::gptq   ? 0
                                                              : 0x1F;

  OPCTS_INT4_HD static int64_t units(const Args& a) {
    if constexpr (F == Int4Format::tinygemm) return a.n / 8;
    else if constexpr (F == Int4Format::awq) return (a.n / 8 + 7) / 8;
    else if constexpr (F == Int4Format::gptq) return (a.n + kLanes - 1) / kLanes;
    else return a.n;
  }

  OPCTS_INT4_HD static int64_t items(const Args& a) {
    if constexpr (F == Int4Format::tinygemm) return a.k / (16 * a.ikt);
    else if constexpr (F == Int4Format::awq) return a.k / 4;
    else if constexpr (F == Int4Format::gptq) return a.k / 8;
    else return (a.k + 1023) / 1024;
  }

  /// The output column of acc[.][c] of `lane` in `unit`; >= N for a lane past the last column.
  OPCTS_INT4_HD static int64_t column(int64_t unit, int lane, int c) {
    if constexpr (F == Int4Format::tinygemm) return 8 * unit + lane / 4;
    else if constexpr (F == Int4Format::awq) return 64 * unit + 8 * (lane % 8) + c;
    else if constexpr (F == Int4Format::gptq) return kLanes * unit + lane;
    else return unit;
  }

  /// Whether `lane` holds its columns' sums after the butterfly over kShareMask.
  OPCTS_INT4_HD static bool representative(int lane) { return (lane & kShareMask) == 0; }

  // acc[m][0] += x[m][k]·w0 + x[m][k + 1]·w1 (k even: one 32-bit load of x per row).
  template <int MT>
  OPCTS_INT4_HD static void fma_pair(const Args& a, float (&acc)[MT][kCols], int64_t k, float w0, float w1) {
    const T* x = static_cast<const T*>(a.x);
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (m < a.m) {
        float x0, x1;
        load_pair(x + m * a.k, k, x0, x1);
        acc[m][0] = fmaf(x0, w0, acc[m][0]);
        acc[m][0] = fmaf(x1, w1, acc[m][0]);
      }
  }

  // What a lane reads of one item (the table above): its packed words and their group
  // parameters. gemv_load issues every load of an item and gemv_use only computes, so the gemv
  // kernel keeps kBatch items' loads of a lane in flight before it uses the first (a lane's
  // loads past N or past K are skipped and use skips the same lanes).
  struct TinyFrag {
    Words4 v;
    GroupParams g[4];  // per word (one load when a super-tile lies in one group)
  };
  struct UnpackedFrag {
    Words4 v;
    GroupParams g;
  };
  struct AwqFrag {
    uint32_t v;
    AwqGroup g;
  };
  struct GptqFrag {
    uint32_t v;
    GroupParams g;
  };
  struct Q4Frag {
    uint16_t q[8];  // qs as 8 halfwords (the block is only 2-byte aligned)
    GroupParams g;
  };
  using Frag = std::conditional_t<
      F == Int4Format::tinygemm, TinyFrag,
      std::conditional_t<F == Int4Format::tinygemm_unpacked, UnpackedFrag,
                         std::conditional_t<F == Int4Format::awq, AwqFrag,
                                            std::conditional_t<F == Int4Format::gptq, GptqFrag, Q4Frag>>>>;

  /// Bytes of packed weight a lane reads per item (tinygemm: at innerKTiles 8; 4 and 2 read 8
  /// and 4), and the items a gemv lane loads before it computes any.
  static constexpr int kLaneBytes = F == Int4Format::tinygemm || F == Int4Format::tinygemm_unpacked ? 16
                                    : F == Int4Format::q4_0                                         ? 18
                                                                                                    : 4;
  template <int MT>
  static constexpr int kBatch = gemv_batch(kLaneBytes, MT);

  // The tinygemm k of word w of super-tile `item` (two k-tiles, 32 k, one group).
  OPCTS_INT4_HD static int64_t tiny_k0(const Args& a, int64_t item, int w) { return 16 * (item * a.ikt + 2 * w); }

  OPCTS_INT4_HD static Frag gemv_load(const Args& a, int64_t unit, int64_t item, int lane) {
    Frag f{};
    const int gs = a.group_shift;
    if constexpr (F == Int4Format::tinygemm) {
      const int half = a.ikt / 2;  // words per lane and super-tile: 1, 2 or 4
      const uint32_t* p =
          reinterpret_cast<const uint32_t*>(a.weight) + ((unit * (a.k / (16 * a.ikt)) + item) * kLanes + lane) * half;
      if (tiny_k0(a, item, 0) >= a.k_end) return f;
      if (half == 4) f.v = *reinterpret_cast<const Words4*>(p);  // one 16-byte load
      else if (half == 2) {                                      // one 8-byte load
        const Words2 t = *reinterpret_cast<const Words2*>(p);
        f.v.w[0] = t.w[0];
        f.v.w[1] = t.w[1];
      } else f.v.w[0] = p[0];
      const int64_t n = 8 * unit + lane / 4;
      const bool one_group = 16 * a.ikt <= (int64_t{1} << gs);
#pragma unroll
      for (int w = 0; w < 4; ++w)
        if (w < half) f.g[w] = w > 0 && one_group ? f.g[0] : params(a, tiny_k0(a, item, w) >> gs, n);
    } else if constexpr (F == Int4Format::tinygemm_unpacked) {
      const int64_t k0 = 1024 * item + 32 * lane;
      if (k0 >= a.k_end) return f;
      f.v = *reinterpret_cast<const Words4*>(a.weight + unit * (a.k / 2) + k0 / 2);  // 16 bytes, 32 k
      f.g = params(a, k0 >> gs, unit);
    } else if constexpr (F == Int4Format::awq) {
      const int64_t c = 8 * unit + lane % 8, k = 4 * item + lane / 8;
      if (c >= a.n / 8 || k >= a.k_end) return f;
      f.v = reinterpret_cast<const uint32_t*>(a.weight)[k * (a.n / 8) + c];
      f.g = awq_group(a, k >> gs, c);
    } else if constexpr (F == Int4Format::gptq) {
      const int64_t n = kLanes * unit + lane, k0 = 8 * item;
      if (n >= a.n || k0 >= a.k_end) return f;
      f.v = reinterpret_cast<const uint32_t*>(a.weight)[item * a.n + n];
      f.g = params(a, k0 >> gs, n);
    } else {
      const int64_t blocks = a.k / 32, b = 32 * item + lane;
      if (b >= blocks || 32 * b >= a.k_end) return f;
      const auto* blk = reinterpret_cast<const uint16_t*>(a.weight + 18 * (unit * blocks + b));  // 2-byte aligned
#pragma unroll
      for (int j = 0; j < 8; ++j) f.q[j] = blk[1 + j];
      f.g = params(a, b, unit);
    }
    return f;
  }

  /// One thread's contribution of one item (the table above) from what gemv_load read.
  template <int MT>
  OPCTS_INT4_HD static void gemv_use(const Args& a, const Frag& f, int64_t unit, int64_t item, int lane,
                                     float (&acc)[MT][kCols]) {
    if constexpr (F == Int4Format::tinygemm) {
      const int half = a.ikt / 2;
#pragma unroll
      for (int w = 0; w < 4; ++w) {  // unrolled with a guard, so the words stay in registers
        const int64_t k0 = tiny_k0(a, item, w);
        if (w >= half || k0 >= a.k_end) continue;
        float wt[8];
        dequant8(a, word(a, f.v.w[w]), f.g[w], wt);
        // nibble i: k = k0 + 16·((i % 4) / 2) + 8·(i % 2) + 2·(lane % 4) + i / 4: nibbles i and
        // i + 4 are the pair (k, k + 1).
#pragma unroll
        for (int i = 0; i < 4; ++i)
          fma_pair<MT>(a, acc, k0 + 16 * (i / 2) + 8 * (i % 2) + 2 * (lane % 4), wt[i], wt[i + 4]);
      }
    } else if constexpr (F == Int4Format::tinygemm_unpacked) {
      const int64_t k0 = 1024 * item + 32 * lane;
      if (k0 >= a.k_end) return;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float wt[8];
        dequant8(a, word(a, f.v.w[w]), f.g, wt);
        // byte b of the word: k = k0 + 8w + 2b in its high nibble (2b + 1), k + 1 in its low one
#pragma unroll
        for (int b = 0; b < 4; ++b) fma_pair<MT>(a, acc, k0 + 8 * w + 2 * b, wt[2 * b + 1], wt[2 * b]);
      }
    } else if constexpr (F == Int4Format::awq) {
      const int64_t c = 8 * unit + lane % 8, k = 4 * item + lane / 8;
      if (c >= a.n / 8 || k >= a.k_end) return;
      float wt[8];
      dequant8_awq(a, word(a, f.v), f.g, k >> a.group_shift, c, wt);
      const T* x = static_cast<const T*>(a.x);
#pragma unroll
      for (int m = 0; m < MT; ++m)
        if (m < a.m) {
          const float xv = to_float(x[m * a.k + k]);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[m][awq_column(i)] = fmaf(xv, wt[i], acc[m][awq_column(i)]);
        }
    } else if constexpr (F == Int4Format::gptq) {
      const int64_t n = kLanes * unit + lane, k0 = 8 * item;
      if (n >= a.n || k0 >= a.k_end) return;
      float wt[8];
      dequant8(a, word(a, f.v), f.g, wt);
#pragma unroll
      for (int i = 0; i < 8; i += 2) fma_pair<MT>(a, acc, k0 + i, wt[i], wt[i + 1]);  // nibble i: k0 + i
    } else {
      const int64_t blocks = a.k / 32, b = 32 * item + lane;
      if (b >= blocks || 32 * b >= a.k_end) return;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float wt[8];
        dequant8(a, word(a, static_cast<uint32_t>(f.q[2 * j]) | static_cast<uint32_t>(f.q[2 * j + 1]) << 16), f.g, wt);
        // byte e of the word is qs[4j + e]: code 4j + e in its low nibble (2e), 4j + e + 16 in its high one
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          fma_pair<MT>(a, acc, 32 * b + 4 * j + e, wt[2 * e], wt[2 * e + 2]);
          fma_pair<MT>(a, acc, 32 * b + 4 * j + e + 16, wt[2 * e + 1], wt[2 * e + 3]);
        }
      }
    }
  }

  /// One thread's contribution of one item: gemv_use of gemv_load.
  template <int MT>
  OPCTS_INT4_HD static void gemv_item(const Args& a, int64_t unit, int64_t item, int lane, float (&acc)[MT][kCols]) {
    gemv_use<MT>(a, gemv_load(a, unit, item, lane), unit, item, lane, acc);
  }

  // --- cuda.int4_mm: the dequantized weight tile ---------------------------------------------
  //
  // A block of kThreads threads fills Bs[n][k] (kTileN columns × kTileK k, K contiguous, as the
  // mma B operand reads it) from the packed weight at (n0, k0), n0 a multiple of kTileN and k0
  // of kTileK; kTileK = 32 lies inside one group (every group size is a multiple of 32). Each
  // thread dequantizes two of the tile's 256 words; columns past N are written as 0.

  OPCTS_INT4_HD static void put(T* tile, int64_t nl, int64_t kl, float w) {
    tile[nl * kTileLd + kl] = round_to<T>(w);  // w already holds a T value: exact
  }

  // A thread's share of the tile is split like the gemv's: mm_load reads its word r (0 or 1)
  // and the word's group parameters, mm_store dequantizes it into the tile, so the mma kernel
  // can read the next slice's words while it multiplies the current one.
  struct MmWord {
    uint32_t v;
    std::conditional_t<F == Int4Format::awq, AwqGroup, GroupParams> g;
    bool in;  // a column inside N (the others are written as 0)
  };

  OPCTS_INT4_HD static MmWord mm_load(const Args& a, int64_t n0, int64_t k0, int tid, int r) {
    const int64_t gi = k0 >> a.group_shift;
    const int id = tid + kThreads * r;  // this thread's r-th word of the tile's 256
    MmWord f{};
    if constexpr (F == Int4Format::tinygemm) {  // 8 n-tiles × 32 lanes, one word each (the k-tile pair at k0)
      const int ntl = id / kLanes, lane = id % kLanes;
      const int64_t n = n0 + 8 * ntl + lane / 4, kt = k0 / 16;
      if (!(f.in = n < a.n)) return f;
      f.v = reinterpret_cast<const uint32_t*>(
          a.weight)[((n / 8 * (a.k / (16 * a.ikt)) + kt / a.ikt) * kLanes + lane) * (a.ikt / 2) + (kt % a.ikt) / 2];
      f.g = params(a, gi, n);
    } else if constexpr (F == Int4Format::tinygemm_unpacked) {  // 64 rows × 4 words (32 k = 16 bytes)
      const int64_t n = n0 + id / 4, w = id % 4;
      if (!(f.in = n < a.n)) return f;
      f.v = reinterpret_cast<const uint32_t*>(a.weight + n * (a.k / 2) + k0 / 2)[w];
      f.g = params(a, gi, n);
    } else if constexpr (F == Int4Format::awq) {  // 32 rows × 8 words
      const int64_t kl = id / 8, c = n0 / 8 + id % 8;
      if (!(f.in = c < a.n / 8)) return f;
      f.v = reinterpret_cast<const uint32_t*>(a.weight)[(k0 + kl) * (a.n / 8) + c];
      f.g = awq_group(a, gi, c);
    } else if constexpr (F == Int4Format::gptq) {  // 4 word rows × 64 columns
      const int64_t kr = id / kTileN, n = n0 + id % kTileN;
      if (!(f.in = n < a.n)) return f;
      f.v = reinterpret_cast<const uint32_t*>(a.weight)[(k0 / 8 + kr) * a.n + n];
      f.g = params(a, gi, n);
    } else {  // q4_0: 64 columns × 4 words of qs (the block at k0)
      const int64_t n = n0 + id / 4, j = id % 4;
      if (!(f.in = n < a.n)) return f;
      f.v =
          q4_0_word(reinterpret_cast<const uint16_t*>(a.weight + 18 * (n * (a.k / 32) + k0 / 32)), static_cast<int>(j));
      f.g = params(a, k0 / 32, n);
    }
    return f;
  }

  OPCTS_INT4_HD static void mm_store(const Args& a, const MmWord& f, int64_t n0, int64_t k0, int tid, int r, T* tile) {
    const int id = tid + kThreads * r;
    float wt[8] = {};
    if constexpr (F == Int4Format::tinygemm) {
      const int ntl = id / kLanes, lane = id % kLanes;
      if (f.in) dequant8(a, word(a, f.v), f.g, wt);
      for (int i = 0; i < 8; ++i)
        put(tile, 8 * ntl + lane / 4, 16 * ((i % 4) / 2) + 8 * (i % 2) + 2 * (lane % 4) + i / 4, wt[i]);
    } else if constexpr (F == Int4Format::tinygemm_unpacked) {
      const int w = id % 4;
      if (f.in) dequant8(a, word(a, f.v), f.g, wt);
      for (int b = 0; b < 4; ++b) {
        put(tile, id / 4, 8 * w + 2 * b, wt[2 * b + 1]);  // high nibble: the even k
        put(tile, id / 4, 8 * w + 2 * b + 1, wt[2 * b]);
      }
    } else if constexpr (F == Int4Format::awq) {
      const int64_t kl = id / 8, c = n0 / 8 + id % 8;
      if (f.in) dequant8_awq(a, word(a, f.v), f.g, k0 >> a.group_shift, c, wt);
      for (int i = 0; i < 8; ++i) put(tile, 8 * (id % 8) + awq_column(i), kl, wt[i]);
    } else if constexpr (F == Int4Format::gptq) {
      const int kr = id / kTileN;
      if (f.in) dequant8(a, word(a, f.v), f.g, wt);
      for (int i = 0; i < 8; ++i) put(tile, id % kTileN, 8 * kr + i, wt[i]);
    } else {
      const int j = id % 4;
      if (f.in) dequant8(a, word(a, f.v), f.g, wt);
      for (int b = 0; b < 4; ++b) {
        put(tile, id / 4, 4 * j + b, wt[2 * b]);
        put(tile, id / 4, 4 * j + b + 16, wt[2 * b + 1]);
      }
    }
  }

  /// The thread's two words of the tile at (n0, k0): mm_store of mm_load.
  OPCTS_INT4_HD static void mm_tile_part(const Args& a, int64_t n0, int64_t k0, int tid, T* tile) {
    for (int r = 0; r < 2; ++r) mm_store(a, mm_load(a, n0, k0, tid, r), n0, k0, tid, r, tile);
  }
};

}  // namespace opcts::cuda::int4mm
