// Fast encoders by integer bit manipulation, bit-identical to encode_format: fp32 → fp8 (e4m3fn, e5m2) arrays, and one double → bf16 / fp16 in the normal range.
//
// Same semantics as encode_format(x, format, ov) from core/codec.hpp: round to nearest, ties
// to even; satfinite turns finite overflow and ±Inf into ±max, nonsaturating into NaN with the
// sign kept (e4m3fn 0x7F|s) or ±Inf (e5m2 0x7C|s); a NaN input keeps its sign (e4m3fn 0x7F|s,
// e5m2 quiet NaN 0x7E|s); −0 stays 0x80. No double arithmetic, no frexp; OpenMP over chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/codec.hpp"

namespace opcts {

void encode_fp32_to_e4m3fn(const float* in, uint8_t* out, size_t n, Overflow ov);
void encode_fp32_to_e5m2(const float* in, uint8_t* out, size_t n, Overflow ov);

/// The code of v in a binary format of E exponent bits and M mantissa bits (bf16: 8, 7; fp16:
/// 5, 10), rounded to nearest, ties to even, from v's own bits (one rounding, as encode_format):
/// for 2^(2 − 2^(E−1)) <= |v| < 2^(2^(E−1) − 2), the normal binades below the top one, where a
/// rounding can carry into the next binade but never overflows. Returns false (code untouched)
/// for every other v — zero, subnormal results, the top binade, Inf, NaN — which the caller
/// encodes with encode().
template <int E, int M>
inline bool encode_normal_from_double(double v, uint16_t& code) {
  static_assert(E >= 2 && M >= 1 && 1 + E + M <= 16, "a 16-bit or narrower binary format");
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  constexpr int bias = (1 << (E - 1)) - 1;
  const int e = static_cast<int>((b >> 52) & 0x7FF) - 1023;
  if (e < 1 - bias || e >= bias - 1) return false;
  constexpr int drop = 52 - M;
  const uint64_t mant = b & ((uint64_t{1} << 52) - 1), keep = mant >> drop;
  const uint64_t rest = mant & ((uint64_t{1} << drop) - 1), half = uint64_t{1} << (drop - 1);
  uint32_t c = (static_cast<uint32_t>(e + bias) << M) | static_cast<uint32_t>(keep);
  if (rest > half || (rest == half && (keep & 1))) ++c;  // a carry into the exponent is the rounding up
  code = static_cast<uint16_t>((static_cast<uint32_t>(b >> 63) << (E + M)) | c);
  return true;
}

}  // namespace opcts
