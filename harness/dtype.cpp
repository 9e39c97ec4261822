// Exact RNE encoding and decoding of the formats in dtype.hpp.
#include "harness/dtype.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace opcts {

namespace {

constexpr FloatFormat kFp64{11, 52, 1023, true};
constexpr FloatFormat kFp32{8, 23, 127, true};
constexpr FloatFormat kFp16{5, 10, 15, true};
constexpr FloatFormat kBf16{8, 7, 127, true};

DTypeInfo make(DType t, std::string_view n, int bits, FloatFormat f) {
  const int emax = (1 << f.exponent_bits) - 2 - f.bias;  // largest finite exponent (IEEE)
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -f.mantissa_bits), emax);
  return {t, n, bits, f, std::ldexp(1.0, -f.mantissa_bits), max_finite, std::ldexp(1.0, 1 - f.bias)};
}

const std::array<DTypeInfo, 4>& table() {
  static const std::array<DTypeInfo, 4> t{
      make(DType::fp64, "fp64", 64, kFp64),
      make(DType::fp32, "fp32", 32, kFp32),
      make(DType::fp16, "fp16", 16, kFp16),
      make(DType::bf16, "bf16", 16, kBf16),
  };
  return t;
}

}  // namespace

const DTypeInfo& dtype_info(DType t) { return table()[static_cast<size_t>(t)]; }

DType parse_dtype(std::string_view s) {
  for (const auto& i : table())
    if (i.name == s) return i.dtype;
  if (s == "float16" || s == "half") return DType::fp16;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float32" || s == "float") return DType::fp32;
  if (s == "float64" || s == "double") return DType::fp64;
  throw std::invalid_argument("unknown dtype '" + std::string(s) + "' (expected fp16, bf16, fp32 or fp64)");
}

double round_to_format(double x, const FloatFormat& f) {
  if (!std::isfinite(x) || x == 0) return x;
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  const int emax = (1 << f.exponent_bits) - 2 - f.bias;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int exp = std::max(e - 1, emin);
  // The quantum at x's binade; scaling by a power of two is exact in double, and
  // nearbyint rounds half to even in the default rounding mode.
  const double quantum = std::ldexp(1.0, exp - f.mantissa_bits);
  const double r = std::nearbyint(x / quantum) * quantum;
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -f.mantissa_bits), emax);
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

uint64_t encode_format(double x, const FloatFormat& f) {
  const uint64_t sign = std::signbit(x) ? 1 : 0;
  const int ebits = f.exponent_bits, mbits = f.mantissa_bits;
  const uint64_t sign_bit = sign << (ebits + mbits);
  const uint64_t exp_all = (uint64_t{1} << ebits) - 1;
  if (std::isnan(x)) return sign_bit | (exp_all << mbits) | (uint64_t{1} << (mbits - 1));
  const double r = round_to_format(x, f);
  if (std::isinf(r)) return sign_bit | (exp_all << mbits);
  if (r == 0) return sign_bit;
  const double a = std::fabs(r);
  int e;
  std::frexp(a, &e);
  int exp = e - 1;
  const int emin = 1 - f.bias;
  if (exp < emin) {  // subnormal: mantissa counts quanta of 2^(emin - mbits)
    return sign_bit | static_cast<uint64_t>(std::ldexp(a, f.bias - 1 + mbits));
  }
  const uint64_t mant = static_cast<uint64_t>(std::ldexp(a, mbits - exp)) - (uint64_t{1} << mbits);
  return sign_bit | (static_cast<uint64_t>(exp + f.bias) << mbits) | mant;
}

double decode_format(uint64_t bits, const FloatFormat& f) {
  const int ebits = f.exponent_bits, mbits = f.mantissa_bits;
  const bool neg = (bits >> (ebits + mbits)) & 1;
  const uint64_t exp = (bits >> mbits) & ((uint64_t{1} << ebits) - 1);
  const uint64_t mant = bits & ((uint64_t{1} << mbits) - 1);
  double v;
  if (f.has_inf && exp == (uint64_t{1} << ebits) - 1) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias - mbits);
  } else {
    v = std::ldexp(static_cast<double>(mant + (uint64_t{1} << mbits)), static_cast<int>(exp) - f.bias - mbits);
  }
  return neg ? -v : v;
}

double round_to(DType t, double x) {
  switch (t) {
    case DType::fp64: return x;
    case DType::fp32: return static_cast<double>(static_cast<float>(x));  // one IEEE rounding
    default: return round_to_format(x, dtype_info(t).format);
  }
}

uint64_t encode(DType t, double x) {
  switch (t) {
    case DType::fp64: return std::bit_cast<uint64_t>(x);
    case DType::fp32: return std::bit_cast<uint32_t>(static_cast<float>(x));
    default: return encode_format(x, dtype_info(t).format);
  }
}

double decode(DType t, uint64_t bits) {
  switch (t) {
    case DType::fp64: return std::bit_cast<double>(bits);
    case DType::fp32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    default: return decode_format(bits, dtype_info(t).format);
  }
}

double next_below(DType t, double x) {
  switch (t) {
    case DType::fp64: return std::nextafter(x, -INFINITY);
    case DType::fp32: return std::nextafter(static_cast<float>(x), -INFINITY);
    default: break;
  }
  const FloatFormat& f = dtype_info(t).format;
  const double r = round_to_format(x, f);
  if (r < x) return r;
  const uint64_t bits = encode_format(r, f);
  const uint64_t sign_bit = uint64_t{1} << (f.exponent_bits + f.mantissa_bits);
  if (r > 0) return decode_format(bits - 1, f);
  if (r == 0) return decode_format(sign_bit | 1, f);  // the smallest negative subnormal
  return decode_format(bits + 1, f);                    // more negative: the magnitude grows
}

uint16_t fp32_to_fp16_bits(float x) { return static_cast<uint16_t>(encode_format(x, kFp16)); }
uint16_t fp32_to_bf16_bits(float x) { return static_cast<uint16_t>(encode_format(x, kBf16)); }
float fp16_bits_to_fp32(uint16_t b) { return static_cast<float>(decode_format(b, kFp16)); }
float bf16_bits_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace opcts
