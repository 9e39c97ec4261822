// Philox4x32-10 over runs of consecutive counters, 8 or 16 blocks at a time in SIMD lanes.
//
// Why: inputs of hundreds of millions of codes spend most of their time in Philox (perf,
// 2026-12-02: 31% of a 235 M-code scaled_mm operand in the scalar Random123 call, one block at a
// time). The round function is integer arithmetic, so a lane-parallel version gives exactly
// Random123's bits; tests/test_rng.cpp compares every path the CPU has against random_block.
//
// The round (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11, Sec. 3.3;
// Random123's philox.h): (hi0, lo0) = M0·c0, (hi1, lo1) = M1·c2;
// c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the key is bumped by the Weyl constants between
// rounds. 32×32→64 products come from vpmuludq on the even lanes and on the odd lanes shifted
// down.
#include "numerics/philox_blocks.hpp"

#include "numerics/x86_intrinsics.hpp"  // OPCTS_X86: the SIMD paths; other processors take the scalar one

#include <cstring>

#include "numerics/rng.hpp"

namespace opcts::detail {

namespace {

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // Philox4x32 multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
constexpr int kRounds = 10;

void blocks_scalar(uint64_t seed, uint32_t stream, uint64_t first, int64_t count, uint32_t* out) {
  for (int64_t b = 0; b < count; ++b) {
    const std::array<uint32_t, 4> r = random_block(seed, stream, first + static_cast<uint64_t>(b));
    std::memcpy(out + 4 * b, r.data(), 16);
  }
}

#if OPCTS_X86
// The last, partial group of a run goes through a buffer (and lanes past the run are dropped).
template <int W>
void store_partial(const uint32_t* full, int n, uint32_t* out) {
  std::memcpy(out, full, static_cast<size_t>(16 * n));
}

__attribute__((target("avx2"))) void blocks_avx2(uint64_t seed, uint32_t stream, uint64_t first, int64_t count,
                                                 uint32_t* out) {
  constexpr int W = 8;
  const __m256i m0 = _mm256_set1_epi64x(kM0), m1 = _mm256_set1_epi64x(kM1);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  for (int64_t b0 = 0; b0 < count; b0 += W) {
    const uint64_t base = first + static_cast<uint64_t>(b0);
    // Counter words: low = base + l (mod 2^32), high = base's high word + the carry, which is
    // where low < base's low word (unsigned compare as signed, both sides' sign bit flipped).
    const __m256i lo_base = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(base)));
    __m256i x0 = _mm256_add_epi32(lo_base, iota);
    const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(lo_base, sign), _mm256_xor_si256(x0, sign));
    __m256i x1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(base >> 32))), carry);
    __m256i x2 = _mm256_set1_epi32(static_cast<int>(stream));
    __m256i x3 = _mm256_setzero_si256();
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < kRounds; ++r) {
      if (r) k0 += kW0, k1 += kW1;
      // Products of the even lanes (in place) and the odd lanes (shifted down to even).
      const __m256i p0e = _mm256_mul_epu32(x0, m0), p0o = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
      const __m256i p1e = _mm256_mul_epu32(x2, m1), p1o = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
      const __m256i lo0 = _mm256_blend_epi32(p0e, _mm256_slli_epi64(p0o, 32), 0xAA);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(p0e, 32), p0o, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(p1e, _mm256_slli_epi64(p1o, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(p1e, 32), p1o, 0xAA);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32(static_cast<int>(k0)));
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32(static_cast<int>(k1)));
      x0 = n0, x1 = lo1, x2 = n2, x3 = lo0;
    }
    // Lanes → blocks: a 4×4 transpose in each 128-bit half gives blocks (l, l + 4)...
    const __m256i t0 = _mm256_unpacklo_epi32(x0, x1), t1 = _mm256_unpackhi_epi32(x0, x1);
    const __m256i t2 = _mm256_unpacklo_epi32(x2, x3), t3 = _mm256_unpackhi_epi32(x2, x3);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    // ... and the halves are put in block order 0-1, 2-3, 4-5, 6-7.
    alignas(32) uint32_t buf[4 * W];
    const bool whole = count - b0 >= W;
    uint32_t* dst = whole ? out + 4 * b0 : buf;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8), _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 24), _mm256_permute2x128_si256(u2, u3, 0x31));
    if (!whole) store_partial<W>(buf, static_cast<int>(count - b0), out + 4 * b0);
  }
}

// One 16-lane group's counters (AVX-512): low = base + l (mod 2^32), high = base's high word
// plus the carry where the low word wrapped.
__attribute__((target("avx512f"))) inline void counters16(uint64_t base, __m512i& x0, __m512i& x1) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lo_base = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base)));
  x0 = _mm512_add_epi32(lo_base, iota);
  const __mmask16 carry = _mm512_cmplt_epu32_mask(x0, lo_base);
  const __m512i hi_base = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base >> 32)));
  x1 = _mm512_mask_add_epi32(hi_base, carry, hi_base, _mm512_set1_epi32(1));
}

// 16 lanes' words → 16 blocks at dst (64 words): a 4×4 transpose in each 128-bit quarter q gives
// blocks 4q .. 4q + 3 in u0 .. u3; two rounds of quarter shuffles put them in order.
__attribute__((target("avx512f"))) inline void store16(__m512i x0, __m512i x1, __m512i x2, __m512i x3, uint32_t* dst) {
  const __m512i t0 = _mm512_unpacklo_epi32(x0, x1), t1 = _mm512_unpackhi_epi32(x0, x1);
  const __m512i t2 = _mm512_unpacklo_epi32(x2, x3), t3 = _mm512_unpackhi_epi32(x2, x3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(dst, _mm512_shuffle_i32x4(v0, v1, 0x88));       // blocks 0-3
  _mm512_storeu_si512(dst + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));  // 4-7
  _mm512_storeu_si512(dst + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));  // 8-11
  _mm512_storeu_si512(dst + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));  // 12-15
}

// G groups of 16 lanes at once: a round is a chain of multiply, blend and xor (about 8 cycles),
// so one group leaves the multipliers idle most of the time; four independent ones fill them.
__attribute__((target("avx512f"))) void blocks_avx512(uint64_t seed, uint32_t stream, uint64_t first, int64_t count,
                                                      uint32_t* out) {
  constexpr int G = 4, W = 16 * G;
  const __m512i m0 = _mm512_set1_epi64(kM0), m1 = _mm512_set1_epi64(kM1);
  constexpr __mmask16 kOdd = 0xAAAA;
  for (int64_t b0 = 0; b0 < count; b0 += W) {
    __m512i x0[G], x1[G], x2[G], x3[G];
    for (int g = 0; g < G; ++g) {
      counters16(first + static_cast<uint64_t>(b0 + 16 * g), x0[g], x1[g]);
      x2[g] = _mm512_set1_epi32(static_cast<int>(stream));
      x3[g] = _mm512_setzero_si512();
    }
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < kRounds; ++r) {
      if (r) k0 += kW0, k1 += kW1;
      const __m512i key0 = _mm512_set1_epi32(static_cast<int>(k0)), key1 = _mm512_set1_epi32(static_cast<int>(k1));
      for (int g = 0; g < G; ++g) {
        const __m512i p0e = _mm512_mul_epu32(x0[g], m0), p0o = _mm512_mul_epu32(_mm512_srli_epi64(x0[g], 32), m0);
        const __m512i p1e = _mm512_mul_epu32(x2[g], m1), p1o = _mm512_mul_epu32(_mm512_srli_epi64(x2[g], 32), m1);
        const __m512i lo0 = _mm512_mask_blend_epi32(kOdd, p0e, _mm512_slli_epi64(p0o, 32));
        const __m512i hi0 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p0e, 32), p0o);
        const __m512i lo1 = _mm512_mask_blend_epi32(kOdd, p1e, _mm512_slli_epi64(p1o, 32));
        const __m512i hi1 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(p1e, 32), p1o);
        // a ^ b ^ c in one instruction (truth table 0x96).
        x0[g] = _mm512_ternarylogic_epi32(hi1, x1[g], key0, 0x96);
        x2[g] = _mm512_ternarylogic_epi32(hi0, x3[g], key1, 0x96);
        x1[g] = lo1;
        x3[g] = lo0;
      }
    }
    alignas(64) uint32_t buf[4 * W];
    const bool whole = count - b0 >= W;
    uint32_t* dst = whole ? out + 4 * b0 : buf;
    for (int g = 0; g < G; ++g) store16(x0[g], x1[g], x2[g], x3[g], dst + 64 * g);
    if (!whole) store_partial<W>(buf, static_cast<int>(count - b0), out + 4 * b0);
  }
}

#endif  // OPCTS_X86

PhiloxPath best_path() {
#if OPCTS_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2")) return PhiloxPath::avx512;
  if (__builtin_cpu_supports("avx2")) return PhiloxPath::avx2;
#endif
  return PhiloxPath::scalar;
}

}  // namespace

std::vector<PhiloxPath> supported_philox_paths() {
  std::vector<PhiloxPath> paths{PhiloxPath::scalar};
  const PhiloxPath best = best_path();
  if (best != PhiloxPath::scalar) paths.push_back(PhiloxPath::avx2);
  if (best == PhiloxPath::avx512) paths.push_back(PhiloxPath::avx512);
  return paths;
}

void random_blocks_on(PhiloxPath path, uint64_t seed, uint32_t stream, uint64_t first, int64_t count, uint32_t* out) {
  switch (path) {
#if OPCTS_X86
    case PhiloxPath::avx512: return blocks_avx512(seed, stream, first, count, out);
    case PhiloxPath::avx2: return blocks_avx2(seed, stream, first, count, out);
#else
    case PhiloxPath::avx512:
    case PhiloxPath::avx2: break;  // not in supported_philox_paths() here
#endif
    case PhiloxPath::scalar: return blocks_scalar(seed, stream, first, count, out);
  }
  blocks_scalar(seed, stream, first, count, out);
}

}  // namespace opcts::detail

namespace opcts {

void random_blocks(uint64_t seed, uint32_t stream, uint64_t first, int64_t count, uint32_t* out) {
  static const detail::PhiloxPath path = detail::best_path();
  detail::random_blocks_on(path, seed, stream, first, count, out);
}

}  // namespace opcts
