// Integer RNE fp32 → e4m3fn / e5m2, one value per fp32 bit pattern, parallel over chunks.
#include "numerics/codec_fast.hpp"

#include <algorithm>
#include <cstring>

namespace opcts {

namespace {

// Chunks large enough that OpenMP's per-chunk overhead is noise; short arrays stay serial.
constexpr size_t kChunk = size_t{1} << 16;

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Right shift of v by s (1..31), rounding to nearest with ties to even.
uint32_t rne_shift(uint32_t v, uint32_t s) {
  const uint32_t q = v >> s;
  const uint32_t rem = v & ((1u << s) - 1);
  const uint32_t half = 1u << (s - 1);
  return q + ((rem > half) | ((rem == half) & q & 1u));
}

// A target format with `mb` mantissa bits and bias `bias`, as seen from fp32 fields: normals
// rebias the exponent (127 − bias) and drop 23 − mb bits with RNE, which carries into the
// exponent exactly when the mantissa rounds up to 2.0; subnormals count quanta of
// 2^(1 − bias − mb): mant·2^(e − 150) / 2^(1 − bias − mb) = mant >> (151 − bias − mb − e).
template <uint32_t kMb, uint32_t kBias>
uint32_t magnitude_code(uint32_t a) {
  constexpr uint32_t kMinNormal = (127 - kBias + 1) << 23;  // 2^(1 − bias) as fp32 bits
  if (a >= kMinNormal) return rne_shift(a - ((127 - kBias) << 23), 23 - kMb);
  const uint32_t e = a >> 23;
  const uint32_t shift = std::min<uint32_t>(151 - kBias - kMb - e, 31);  // ≥ 24 − mb here; 31 → 0
  return rne_shift((a & 0x7FFFFFu) | 0x800000u, shift);
}

// |x| > 464 (0x43E80000) overflows: 464 is the tie between 448 (even) and 480.
uint8_t e4m3fn_code(uint32_t u, bool sat) {
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  if (a > 0x43E80000u) return static_cast<uint8_t>(sign | (sat ? 0x7Eu : 0x7Fu));
  return static_cast<uint8_t>(sign | magnitude_code<3, 7>(a));
}

// |x| ≥ 61440 (0x47700000) overflows: 61440 is the tie between 57344 (odd) and 65536.
uint8_t e5m2_code(uint32_t u, bool sat) {
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Eu);
  if (a >= 0x47700000u) return static_cast<uint8_t>(sign | (sat ? 0x7Bu : 0x7Cu));
  return static_cast<uint8_t>(sign | magnitude_code<2, 15>(a));
}

template <uint8_t (*Code)(uint32_t, bool)>
void encode_array(const float* in, uint8_t* out, size_t n, Overflow ov) {
  const bool sat = ov == Overflow::satfinite;
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kChunk;
    const size_t end = std::min(n, begin + kChunk);
    for (size_t i = begin; i < end; ++i) out[i] = Code(bits_of(in[i]), sat);
  }
}

}  // namespace

void encode_fp32_to_e4m3fn(const float* in, uint8_t* out, size_t n, Overflow ov) {
  encode_array<e4m3fn_code>(in, out, n, ov);
}

void encode_fp32_to_e5m2(const float* in, uint8_t* out, size_t n, Overflow ov) {
  encode_array<e5m2_code>(in, out, n, ov);
}

}  // namespace opcts
