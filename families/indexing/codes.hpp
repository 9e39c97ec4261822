// Exact element access of contiguous fp64/fp32/fp16/bf16/int32/int64 tensors for the indexing families' inputs and
// references.
//
// HostTensor::get and set go through the generic codecs (about 25 and 80 ns an element); the
// indexing families touch up to 10^9 elements a case, so they read and write these dtypes'
// codes directly: decoding is exact, encoding rounds an fp32 value to nearest even (fp16: the
// IEEE binary16 rules, overflow to ±Inf; bf16: the top half of fp32 with RNE).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "numerics/tensor.hpp"

namespace opcts::indexing {

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t e = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (e == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;  // mant·2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (mant << 13));
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return static_cast<uint16_t>(sign | (ax > 0x7F800000 ? 0x7E00 : 0x7C00));
  if (ax >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // >= 65520 rounds to Inf
  if (ax < 0x38800000) {                                              // below 2^-14: subnormal
    const float scaled = std::bit_cast<float>(ax) * 16777216.0f;      // ·2^24, exact
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t r = ax - 0x38000000;  // rebias 127 → 15
  return static_cast<uint16_t>(sign | ((r + 0xFFF + ((r >> 13) & 1)) >> 13));
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

/// Element i of a contiguous tensor of one of the six value dtypes, exactly.
inline double load(const HostTensor& t, int64_t i) {
  const std::byte* p = t.data();
  switch (t.dtype()) {
    case DType::fp64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case DType::fp32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::fp16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return fp16_to_float(v);
    }
    case DType::bf16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return bf16_to_float(v);
    }
    case DType::int32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::int64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);
    }
    default: throw std::invalid_argument("indexing: not a value dtype");
  }
}

/// Stores x (an fp32 value for the float dtypes, rounded once to fp16 / bf16; an integer for
/// int32 / int64) at element i of a contiguous tensor.
inline void store(HostTensor& t, int64_t i, double x) {
  std::byte* p = t.data();
  switch (t.dtype()) {
    case DType::fp64: std::memcpy(p + 8 * i, &x, 8); return;
    case DType::fp32: {
      const float v = static_cast<float>(x);
      std::memcpy(p + 4 * i, &v, 4);
      return;
    }
    case DType::fp16: {
      const uint16_t v = float_to_fp16(static_cast<float>(x));
      std::memcpy(p + 2 * i, &v, 2);
      return;
    }
    case DType::bf16: {
      const uint16_t v = float_to_bf16(static_cast<float>(x));
      std::memcpy(p + 2 * i, &v, 2);
      return;
    }
    case DType::int32: {
      const auto v = static_cast<int32_t>(x);
      std::memcpy(p + 4 * i, &v, 4);
      return;
    }
    case DType::int64: {
      const auto v = static_cast<int64_t>(x);
      std::memcpy(p + 8 * i, &v, 8);
      return;
    }
    default: throw std::invalid_argument("indexing: not a value dtype");
  }
}

/// Index element i (int32 or int64 tensor) as int64.
inline int64_t load_index(const HostTensor& t, int64_t i) {
  if (t.dtype() == DType::int32) {
    int32_t v;
    std::memcpy(&v, t.data() + 4 * i, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, t.data() + 8 * i, 8);
  return v;
}

}  // namespace opcts::indexing
