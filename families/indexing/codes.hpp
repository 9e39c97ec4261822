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

/// Element i of a contiguous array of T at p (the tensors' bytes need not be aligned to T).
template <class T>
T element_at(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + sizeof(T) * i, sizeof(T));
  return v;
}

/// Writes v as element i of a contiguous array of T at p.
template <class T>
void set_element_at(std::byte* p, int64_t i, T v) {
  std::memcpy(p + sizeof(T) * i, &v, sizeof(T));
}

/// Element i of a contiguous tensor of one of the six value dtypes, exactly.
inline double load(const HostTensor& t, int64_t i) {
  const std::byte* p = t.data();
  switch (t.dtype()) {
    case DType::fp64: return element_at<double>(p, i);
    case DType::fp32: return element_at<float>(p, i);
    case DType::fp16: return fp16_to_float(element_at<uint16_t>(p, i));
    case DType::bf16: return bf16_to_float(element_at<uint16_t>(p, i));
    case DType::int32: return element_at<int32_t>(p, i);
    case DType::int64: return static_cast<double>(element_at<int64_t>(p, i));
    default: throw std::invalid_argument("indexing: not a value dtype");
  }
}

/// Stores x (an fp32 value for the float dtypes, rounded once to fp16 / bf16; an integer for
/// int32 / int64) at element i of a contiguous tensor.
inline void store(HostTensor& t, int64_t i, double x) {
  std::byte* p = t.data();
  switch (t.dtype()) {
    case DType::fp64: return set_element_at(p, i, x);
    case DType::fp32: return set_element_at(p, i, static_cast<float>(x));
    case DType::fp16: return set_element_at(p, i, float_to_fp16(static_cast<float>(x)));
    case DType::bf16: return set_element_at(p, i, float_to_bf16(static_cast<float>(x)));
    case DType::int32: return set_element_at(p, i, static_cast<int32_t>(x));
    case DType::int64: return set_element_at(p, i, static_cast<int64_t>(x));
    default: throw std::invalid_argument("indexing: not a value dtype");
  }
}

/// Index element i (int32 or int64 tensor) as int64.
inline int64_t load_index(const HostTensor& t, int64_t i) {
  return t.dtype() == DType::int32 ? element_at<int32_t>(t.data(), i) : element_at<int64_t>(t.data(), i);
}

}  // namespace opcts::indexing
