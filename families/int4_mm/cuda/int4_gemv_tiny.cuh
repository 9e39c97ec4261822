// cuda.int4_gemv's fast path for tinygemm at innerKTiles 8 as __host__ __device__ code: the staged, permuted copy of x
// and one lane's use of one super-tile, on tensor cores (CUDA) or in fp32 FMA (HIP).
//
// The generic gemv (int4_mm_layout.cuh's gemv_use) reads x from global memory one 32-bit pair
// per two weights and runs one fp32 FMA chain per lane. Here the block first copies its chunk
// of x into shared memory in the order a lane consumes it. The weight words, their group
// parameters and the dequantization are Code<tinygemm>'s (gemv_load, dequant8: the same one
// rounding of each weight to T), so the arithmetic the impl declares is unchanged: products of
// T values exact in fp32, summed in fp32 (in another order, which the bound allows: any order,
// tensor-core truncation included).
//
// Two ways to use a super-tile, the same weights and the same model:
//  - mma (CUDA, sm_80+; kTinyMma): tinygemm packs each lane's words as the B fragments of
//    m16n8k16 products (PyTorch's int4mm.cu): a word's four nibble pairs, dequantized two at a
//    time into T pairs (__hfma2), are the k-pairs (2t, 2t + 1) and (2t + 8, 2t + 9) of column
//    n = l / 4 for two k-tiles. A warp takes two n-tiles (a pair) and makes Ŵ the A operand
//    (rows g: the first tile's column g, g + 8: the second's) and x the B operand (columns: the
//    rows of x, M <= 8 per product; M > 8 takes a second product), so every A register holds
//    weights and the staged x loads straight into B's registers. About 2 instructions a weight
//    against 4 in FMA: the dequantization's, no conversion to fp32, no FMA.
//  - fma (HIP, where the m16n8k16 product would be emulated by shuffles): x staged as fp32, each
//    word's eight weights converted to fp32 and multiplied in two FMA chains per row.
//
// Layout of a lane's share (int4_mm_layout.cuh, Code::gemv_use): in super-tile `item` (128 k),
// word w of lane l covers k0 = 128·item + 32w, and its nibble i holds
// k = k0 + 8·(i % 4) + 2·(l % 4) + i / 4: pair (i, i + 4) is (k, k + 1) at k = k0 + 8i + 2(l % 4),
// i.e. k-pairs 2t and 2t + 8 (i = 0, 1) of k-tile 2w and (i = 2, 3) of k-tile 2w + 1, for the
// column n = 8·unit + l / 4 (mma_tile.cuh's fragment table, g = l / 4, t = l % 4): as A's rows,
// a[0], a[2] of row g and a[1], a[3] of row g + 8; as B's column, b[0], b[1].
// The fma staging stores x[m][kc + kk] at x_slot(kk) = 32·(kk / 32) + 8·q + 2·j + e for
// kk % 32 = 8j + 2q + e, so the eight x values of (word, quad q = l % 4) are contiguous: slot
// 2j + e pairs with nibble j + 4e. The mma staging stores it at mma_slot(kk) = 128·(kk / 128) +
// 32·t + 8·(w ^ (t / 2)) + 4·j + 2·h + e for kk % 128 = 16·(2w + j) + 8·h + 2·t + e, so lane
// (g, t)'s B registers of word w (b[0], b[1] of k-tiles 2w and 2w + 1: x row g at k 2t and
// 2t + 8) are the 16 bytes at row g, slot 32t + 8·(w ^ (t / 2)) (the xor keeps lanes t and t + 2
// off each other's banks).
#pragma once

#include "families/int4_mm/cuda/int4_mm_layout.cuh"
#include "gpu/portable/mma_tile.cuh"

namespace opcts::cuda::int4mm::tiny {

/// Whether the fast path multiplies on tensor cores (mma.sync): CUDA builds; HIP takes fma (the
/// m16n8k16 product would be emulated there, at several times the instructions).
constexpr bool kTinyMma = !OPCTS_GPU_HIP;

/// Super-tiles a lane of the fma path loads before it uses the first, for MT rows of x held per
/// thread (16 KiB of weight per 8-warp block in flight at M = 1, within the 85 registers of three
/// blocks per SM; fewer as the accumulators grow). The mma path's batch: int4_gemv.cu.
OPCTS_INT4_HD constexpr int batch(int mt) { return mt <= 1 ? 4 : mt <= 4 ? 2 : 1; }
/// Shared memory bound of a block's staged x (fp32 or T, M rows of a chunk of super-tiles):
/// three blocks per SM in 96 KiB.
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

/// Where lane `lane` of n-tile `unit` reads (load): its 16 bytes of super-tile 0 (super-tile
/// i's are i·kLanes Words4 further: the words Code<tinygemm>::gemv_load reads, at innerKTiles 8)
/// and its column's (scale, zero) word of group 0 (group gi's is gi·N words further). Computed
/// once per warp, so a load is two address offsets.
struct Source {
  const Words4* words;
  const uint32_t* sz;
  int64_t n;
  int group_shift;
};
OPCTS_INT4_HD Source source(const Args& a, int64_t unit, int lane) {
  return {reinterpret_cast<const Words4*>(a.weight) + unit * (a.k / 128) * kLanes + lane,
          static_cast<const uint32_t*>(a.scales) + 8 * unit + lane / 4, a.n, a.group_shift};
}

/// The lane's Frag of super-tile `item` (s = its source()).
template <bool OneGroup>
OPCTS_INT4_HD Frag<OneGroup> load(const Source& s, int64_t item) {
  Frag<OneGroup> f;
  f.v = s.words[item * kLanes];
#pragma unroll
  for (int w = 0; w < (OneGroup ? 1 : 4); ++w) f.sz[w] = s.sz[((128 * item + 32 * w) >> s.group_shift) * s.n];
  return f;
}

/// One lane's products of one super-tile (f = load of it): acc[m][e] += x[m][k]·Ŵ[n][k] over
/// the lane's k of parity e; xs is the staged chunk at the super-tile (row m at xs + m·ld).
/// The dequantization is Code<tinygemm>::dequant8's.
template <class T, int MT, bool OneGroup>
OPCTS_INT4_HD void use(const Args& a, const Frag<OneGroup>& f, const float* xs, int64_t ld, int lane,
                       float (&acc)[MT][2]) {
  using C = Code<Int4Format::tinygemm, T, false>;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t sz = f.sz[OneGroup ? 0 : w];
    const GroupParams g{bits_to_float<T>(static_cast<uint16_t>(sz & 0xFFFF)),
                        bits_to_float<T>(static_cast<uint16_t>(sz >> 16))};
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

// --- the mma path -----------------------------------------------------------------------------

/// The slot of chunk offset kk in the mma staging (the file comment), with word w's 16 bytes of
/// lane t at 8·(w ^ (t >> 1)) within its 64: lanes t and t + 2 of one row, 128 bytes apart,
/// would otherwise read the same banks in one 16-byte shared load.
OPCTS_INT4_HD int64_t mma_slot(int64_t kk) {
  const int64_t r = kk & 127, kt = r >> 4, h = (r >> 3) & 1, t = (r >> 1) & 3;
  return (kk & ~int64_t{127}) + 32 * t + 8 * ((kt >> 1) ^ (t >> 1)) + 4 * (kt & 1) + 2 * h + (r & 1);
}

/// Thread `tid` of `threads`' share of staging rows 0 .. min(M, 16) − 1 of x[:, kc .. kc + ck)
/// (ck a multiple of 128, kc + ck <= K) into xs (row m at xs + m·ld, T values at mma_slot): 8 k
/// per step, one 16-byte load and four 4-byte stores (pairs of k stay pairs).
template <class T>
OPCTS_INT4_HD void stage_x_mma(const Args& a, int64_t kc, int64_t ck, int64_t ld, T* xs, int tid, int threads) {
  const T* x = static_cast<const T*>(a.x);
  const int64_t rows = a.m < 16 ? a.m : 16, per_row = ck / 8;
  for (int64_t s = tid; s < rows * per_row; s += threads) {
    const int64_t m = s / per_row, kk = 8 * (s % per_row);
    const Words4 v = *reinterpret_cast<const Words4*>(x + m * a.k + kc + kk);  // 8 k, 16-byte aligned (K % 128 == 0)
    auto* row = reinterpret_cast<uint32_t*>(xs + m * ld);
#pragma unroll
    for (int p = 0; p < 4; ++p) row[mma_slot(kk + 2 * p) / 2] = v.w[p];
  }
}

/// One m16n8k16 product's operands (mma_tile.cuh's fragments): A = Ŵ of a pair of n-tiles, B = xᵀ.
struct MmaOperands {
  uint32_t a[4], b[2];
};

/// What a lane of the mma path loads of one item: super-tile `item` of both n-tiles of its pair.
template <bool OneGroup>
struct PairFrag {
  Frag<OneGroup> f[2];
};
/// The sources of pair p's two n-tiles (2p, 2p + 1) for lane `lane`; where N / 8 is odd the last
/// pair's second tile is its first again (read, multiplied, never written: pair_columns).
struct PairSource {
  Source s[2];
};
OPCTS_INT4_HD PairSource pair_source(const Args& a, int64_t pair, int lane) {
  const int64_t tiles = a.n / 8, second = 2 * pair + 1 < tiles ? 2 * pair + 1 : 2 * pair;
  return {{source(a, 2 * pair, lane), source(a, second, lane)}};
}
template <bool OneGroup>
OPCTS_INT4_HD PairFrag<OneGroup> load(const PairSource& s, int64_t item) {
  return {{load<OneGroup>(s.s[0], item), load<OneGroup>(s.s[1], item)}};
}
/// Columns of y pair p covers: 8·(2p) .. + 16, those < N written.
OPCTS_INT4_HD int64_t pair_columns(const Args& a, int64_t pair) { return a.n - 16 * pair < 16 ? a.n - 16 * pair : 16; }

/// b[i] = {Ŵ of nibble i, Ŵ of nibble i + 4} of word v as a T pair, the word's group parameters
/// in `sz` (scale, zero as T bits): Code<tinygemm>::dequant8's arithmetic, (q − 8)·scale + zero
/// rounded once to T (on sm_80+ biased_pair's magic-number pair and __hfma2; elsewhere
/// Code::dequant).
template <class T>
OPCTS_INT4_HD void dequant_pairs(const Args& a, uint32_t v, uint32_t sz, uint32_t (&b)[4]) {
#if defined(OPCTS_INT4_PAIRS)
  (void)a;
  using P = Pair<T>;
  using V = typename P::type;
  // −(B + 8) in both halves, as bits: bf16 −136 = 0xC308, fp16 −1032 = 0xE408.
  constexpr uint32_t kMinus = std::is_same_v<T, __half> ? 0xE408E408u : 0xC308C308u;
  const uint32_t s_bits = __byte_perm(sz, 0, 0x1010), z_bits = __byte_perm(sz, 0, 0x3232);
  V s, z, minus;
  memcpy(&s, &s_bits, 4);
  memcpy(&z, &z_bits, 4);
  memcpy(&minus, &kMinus, 4);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const V w = __hfma2(__hadd2(biased_pair<T>(v, i), minus), s, z);  // q − 8 exact, then the one rounding
    memcpy(&b[i], &w, 4);
  }
#else
  using C = Code<Int4Format::tinygemm, T, false>;
  const GroupParams g{bits_to_float<T>(static_cast<uint16_t>(sz & 0xFFFF)),
                      bits_to_float<T>(static_cast<uint16_t>(sz >> 16))};
  const auto bits = [](float f) {  // f is a T value: exact
    const T t = round_to<T>(f);
    uint16_t u;
    memcpy(&u, &t, 2);
    return static_cast<uint32_t>(u);
  };
  for (int i = 0; i < 4; ++i)
    b[i] = bits(C::dequant(a, v >> (4 * i) & 0xF, g)) | bits(C::dequant(a, v >> (4 * (i + 4)) & 0xF, g)) << 16;
#endif
}

/// Where lane (g, t) reads its B registers (x) in the mma staging: row g (and g + 8: hi) of a
/// super-tile at lo[w % 2] + 8w + step·i (i: the super-tile's place in the chunk; lo[0], lo[1]
/// fold mma_slot's 8·(w ^ (t >> 1)) in), or, for rows past M, a zeroed area of 128 T values
/// (step 0), so the loads need no branch and those rows are 0.
template <class T>
struct XRows {
  const T* lo[2];
  const T* hi[2];
  uint32_t lo_step, hi_step;
};
/// xs: the staging (row m at xs + m·ld); zeros: 128 zero T values.
template <class T>
OPCTS_INT4_HD XRows<T> x_rows(const Args& a, const T* xs, int64_t ld, const T* zeros, int lane) {
  const int g = lane / 4, t = lane % 4, sw = 8 * (t >> 1);  // 8·(w ^ s) = 8w + sw (w even), 8w − sw (w odd)
  const T* lo = (g < a.m ? xs + g * ld : zeros) + 32 * t;
  const T* hi = (g + 8 < a.m ? xs + (g + 8) * ld : zeros) + 32 * t;
  return {{lo + sw, lo - sw}, {hi + sw, hi - sw}, g < a.m ? 128u : 0u, g + 8 < a.m ? 128u : 0u};
}

/// Lane `lane`'s operands of the two k-tiles of word w (2w, 2w + 1) of the super-tile at place i
/// of the chunk, op[j] for k-tile 2w + j: f the pair's load, x the lane's rows of x (x_rows); hi
/// (Rows16: M > 8) the B operands of rows 8..15 of x.
template <class T, bool Rows16, bool OneGroup>
OPCTS_INT4_HD void mma_operands(const Args& a, const PairFrag<OneGroup>& f, const XRows<T>& x, uint32_t i, int w,
                                MmaOperands (&op)[2], uint32_t (&hi)[2][2]) {
  uint32_t u[4], v[4];
  dequant_pairs<T>(a, f.f[0].v.w[w], f.f[0].sz[OneGroup ? 0 : w], u);
  dequant_pairs<T>(a, f.f[1].v.w[w], f.f[1].sz[OneGroup ? 0 : w], v);
  const Words4 lo = *reinterpret_cast<const Words4*>(x.lo[w % 2] + x.lo_step * i + 8 * w);
  Words4 up{};
  if constexpr (Rows16) up = *reinterpret_cast<const Words4*>(x.hi[w % 2] + x.hi_step * i + 8 * w);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    op[j] = {{u[2 * j], v[2 * j], u[2 * j + 1], v[2 * j + 1]}, {lo.w[2 * j], lo.w[2 * j + 1]}};
    hi[j][0] = up.w[2 * j];
    hi[j][1] = up.w[2 * j + 1];
  }
}

#if defined(__CUDACC__) && !OPCTS_GPU_HIP
/// One lane's products of the pair's super-tiles at place i of the chunk (f = load of them) on
/// tensor cores: c[j] += k-tile 2w + j's product (rows 0..7 of x; c16 rows 8..15 when Rows16),
/// two independent chains. Lane (g, t): c[.][e] is y[2t + e][n-tile 2p, column g], c[.][2 + e]
/// the same of n-tile 2p + 1.
template <class T, bool Rows16, bool OneGroup>
__device__ __forceinline__ void use_mma(const Args& a, const PairFrag<OneGroup>& f, const XRows<T>& x, uint32_t i,
                                        float (&c)[2][4], float (&c16)[2][4]) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    MmaOperands op[2];
    uint32_t hi[2][2];
    mma_operands<T, Rows16, OneGroup>(a, f, x, i, w, op, hi);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      gpu::mma::mma_m16n8k16<T>(c[j], op[j].a, op[j].b[0], op[j].b[1]);
      if constexpr (Rows16) gpu::mma::mma_m16n8k16<T>(c16[j], op[j].a, hi[j][0], hi[j][1]);
    }
  }
}
#endif

}  // namespace opcts::cuda::int4mm::tiny
