// The dtype table and its bridge to refimpl's codecs.
#include "numerics/dtype.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace opcts {

namespace {

constexpr FloatFormat kFp64{11, 52, 1023, Specials::ieee};
constexpr FloatFormat kFp32{8, 23, 127, Specials::ieee};
constexpr FloatFormat kFp16{5, 10, 15, Specials::ieee};
constexpr FloatFormat kBf16{8, 7, 127, Specials::ieee};
constexpr FloatFormat kE4m3fn{4, 3, 7, Specials::fn};
constexpr FloatFormat kE5m2{5, 2, 15, Specials::ieee};
constexpr FloatFormat kE4m3fnuz{4, 3, 8, Specials::fnuz};
constexpr FloatFormat kE5m2fnuz{5, 2, 16, Specials::fnuz};
constexpr FloatFormat kE8m0{8, 0, 127, Specials::e8m0, false};
constexpr FloatFormat kUe4m3{4, 3, 7, Specials::fn, false};
constexpr FloatFormat kE2m3{2, 3, 1, Specials::finite};
constexpr FloatFormat kE3m2{3, 2, 3, Specials::finite};
constexpr FloatFormat kE2m1{2, 1, 1, Specials::finite};

DTypeInfo flt(DType t, std::string_view n, int bits, FloatFormat f) {
  return {t, n, bits, false, f, std::ldexp(1.0, -f.mantissa_bits), max_finite(f), min_normal(f), f.is_signed};
}

DTypeInfo integer(DType t, std::string_view n, bool is_signed) {
  return {t, n, 4, true, {}, 1.0, is_signed ? 7.0 : 15.0, 1.0, is_signed};
}

const std::array<DTypeInfo, 18>& table() {
  static const std::array<DTypeInfo, 18> t{
      flt(DType::fp64, "fp64", 64, kFp64),
      flt(DType::fp32, "fp32", 32, kFp32),
      flt(DType::fp16, "fp16", 16, kFp16),
      flt(DType::bf16, "bf16", 16, kBf16),
      flt(DType::e4m3fn, "e4m3fn", 8, kE4m3fn),
      flt(DType::e5m2, "e5m2", 8, kE5m2),
      flt(DType::e4m3fnuz, "e4m3fnuz", 8, kE4m3fnuz),
      flt(DType::e5m2fnuz, "e5m2fnuz", 8, kE5m2fnuz),
      flt(DType::e8m0fnu, "e8m0fnu", 8, kE8m0),
      flt(DType::ue4m3, "ue4m3", 8, kUe4m3),
      flt(DType::e2m3fn, "e2m3fn", 8, kE2m3),
      flt(DType::e3m2fn, "e3m2fn", 8, kE3m2),
      flt(DType::e2m1fn, "e2m1fn", 4, kE2m1),
      integer(DType::int4, "int4", true),
      integer(DType::uint4, "uint4", false),
      {DType::bool8, "bool", 8, true, {}, 1.0, 1.0, 1.0, false},
      {DType::int32, "int32", 32, true, {}, 1.0, 2147483647.0, 1.0, true},
      {DType::int64, "int64", 64, true, {}, 1.0, 9223372036854775807.0, 1.0, true},
  };
  return t;
}

bool wide_integer(DType t) { return t == DType::int32 || t == DType::int64; }

// Round to nearest even, saturated to the type's range (NaN → 0, as for int4).
int64_t to_wide_integer(DType t, double x) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(x);
  if (t == DType::int32) return static_cast<int64_t>(std::clamp(r, -2147483648.0, 2147483647.0));
  if (r >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (r <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(r);
}

double from_wide_integer(DType t, uint64_t bits) {
  return t == DType::int32 ? static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(bits)))
                           : static_cast<double>(static_cast<int64_t>(bits));
}

}  // namespace

const DTypeInfo& dtype_info(DType t) { return table()[static_cast<size_t>(t)]; }

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = [] {
    std::vector<DType> out;
    for (const auto& i : table()) out.push_back(i.dtype);
    return out;
  }();
  return v;
}

DType parse_dtype(std::string_view s) {
  for (const auto& i : table())
    if (i.name == s) return i.dtype;
  struct Alias {
    std::string_view alias;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"float16", DType::fp16},
      {"half", DType::fp16},
      {"bfloat16", DType::bf16},
      {"float32", DType::fp32},
      {"float", DType::fp32},
      {"float64", DType::fp64},
      {"double", DType::fp64},
      {"float8_e4m3fn", DType::e4m3fn},
      {"float8_e5m2", DType::e5m2},
      {"float8_e4m3fnuz", DType::e4m3fnuz},
      {"float8_e5m2fnuz", DType::e5m2fnuz},
      {"float8_e8m0fnu", DType::e8m0fnu},
      {"e8m0", DType::e8m0fnu},
      {"float4_e2m1fn", DType::e2m1fn},
      {"float6_e2m3fn", DType::e2m3fn},
      {"float6_e3m2fn", DType::e3m2fn},
      {"bool8", DType::bool8},
      {"int", DType::int32},
      {"long", DType::int64},
  };
  for (const auto& a : kAliases)
    if (a.alias == s) return a.t;
  std::string names;
  for (const auto& i : table()) names += (names.empty() ? "" : ", ") + std::string(i.name);
  throw std::invalid_argument("unknown dtype '" + std::string(s) + "' (expected one of: " + names + ")");
}

int64_t storage_bytes_for(DType t, int64_t n) {
  const int bits = dtype_info(t).bits;
  return bits == 4 ? (n + 1) / 2 : n * (bits / 8);
}

Overflow default_overflow(DType t) {
  const auto& i = dtype_info(t);
  return !i.is_integer && i.format.specials == Specials::ieee ? Overflow::nonsaturating : Overflow::satfinite;
}

double round_to(DType t, double x, Overflow ov) {
  if (t == DType::bool8) return x != 0 ? 1.0 : 0.0;
  if (wide_integer(t)) return static_cast<double>(to_wide_integer(t, x));
  const auto& i = dtype_info(t);
  if (i.is_integer) return decode_int4(encode_int4(x, i.is_signed), i.is_signed);
  switch (t) {
    case DType::fp64: return x;
    case DType::fp32:
      if (ov == Overflow::satfinite && std::isinf(static_cast<float>(x)) && !std::isinf(x))
        return std::copysign(static_cast<double>(std::numeric_limits<float>::max()), x);
      return static_cast<double>(static_cast<float>(x));  // one IEEE rounding
    default: return round_to_format(x, i.format, ov);
  }
}

uint64_t encode(DType t, double x, Overflow ov) {
  if (t == DType::bool8) return x != 0 ? 1 : 0;
  if (t == DType::int32) return static_cast<uint32_t>(static_cast<int32_t>(to_wide_integer(t, x)));
  if (t == DType::int64) return static_cast<uint64_t>(to_wide_integer(t, x));
  const auto& i = dtype_info(t);
  if (i.is_integer) return encode_int4(x, i.is_signed);
  switch (t) {
    case DType::fp64: return std::bit_cast<uint64_t>(x);
    case DType::fp32: return std::bit_cast<uint32_t>(static_cast<float>(round_to(t, x, ov)));
    default: return encode_format(x, i.format, ov);
  }
}

double decode(DType t, uint64_t bits) {
  if (t == DType::bool8) return bits != 0 ? 1.0 : 0.0;
  if (wide_integer(t)) return from_wide_integer(t, bits);
  const auto& i = dtype_info(t);
  if (i.is_integer) return decode_int4(static_cast<uint8_t>(bits), i.is_signed);
  switch (t) {
    case DType::fp64: return std::bit_cast<double>(bits);
    case DType::fp32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    default: return decode_format(bits, i.format);
  }
}

std::vector<double> decode_table(DType t) {
  const int bits = dtype_info(t).bits;
  if (bits > 16) throw std::invalid_argument("decode_table: " + std::string(name(t)) + " has more than 16 bits");
  std::vector<double> v(size_t{1} << bits);
  for (size_t c = 0; c < v.size(); ++c) v[c] = decode(t, c);
  return v;
}

double spacing_at(DType t, double y) {
  const auto& info = dtype_info(t);
  y = std::min(y, info.max_finite);
  if (!(y >= info.min_normal)) return info.min_normal * info.epsilon;
  // y is a normal double here (every min_normal is >= 2^-1022), so its binade's start
  // 2^floor(log2 y) is its exponent field alone; epsilon is a power of two too, so the product
  // is exact (what frexp and ldexp give, at a fraction of the cost: the comparison calls this
  // for every element).
  const double binade = std::bit_cast<double>(std::bit_cast<uint64_t>(y) & 0x7ff0000000000000ull);
  return info.epsilon * binade;
}

double next_below(DType t, double x) {
  switch (t) {
    case DType::fp64: return std::nextafter(x, -INFINITY);
    case DType::fp32: return std::nextafter(static_cast<float>(x), -INFINITY);
    default: break;
  }
  const auto& i = dtype_info(t);
  if (i.is_integer) return std::ceil(x) - 1;
  const FloatFormat& f = i.format;
  const double r = round_to_format(x, f, Overflow::satfinite);
  if (r < x) return r;
  const uint64_t bits = encode_format(r, f, Overflow::satfinite);
  const uint64_t sign_bit = uint64_t{1} << (f.exponent_bits + f.mantissa_bits);
  if (r > 0) return decode_format(bits - 1, f);
  if (r == 0) return f.is_signed ? decode_format(sign_bit | 1, f) : 0.0;  // the smallest negative subnormal
  return decode_format(bits + 1, f);                                      // more negative: the magnitude grows
}

// The 16-bit forms run per element in references' inner loops (the SDPA same-precision
// pipeline rounds every P and dS), so they work on the bits; NaN takes encode_format, whose
// NaN code they keep. tests/test_dtype.cpp checks them against formulas of its own.
uint16_t fp32_to_fp16_bits(float x) {
  // Round to nearest even by fp32 arithmetic and integer rounding bias (the classic
  // float-to-half of F. Giesen, "float->half variants", 2016, variant fast3_rtne).
  uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t h;
  if (u > 0x7F800000u) return static_cast<uint16_t>(encode_format(x, kFp16));  // NaN
  if (u >= (127u + 16) << 23) {
    h = 0x7C00u;  // 2^16 and up (and Inf): Inf
  } else if (u < 113u << 23) {
    // Below fp16's smallest normal 2^-14: adding 0.5 (2^-1, whose ulp is 2^-24, fp16's
    // subnormal quantum) makes the fp32 adder round the value to a multiple of 2^-24, to
    // nearest even; the low bits of the sum are the subnormal code.
    constexpr uint32_t kMagic = ((127u - 15) + (23 - 10) + 1) << 23;
    const float sum = std::bit_cast<float>(u) + std::bit_cast<float>(kMagic);
    h = std::bit_cast<uint32_t>(sum) - kMagic;
  } else {
    // Rebias the exponent and drop 13 bits, ties to even; a carry out of the significand
    // steps the exponent (65520 and up become Inf).
    const uint32_t odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + odd;
    h = u >> 13;
  }
  return static_cast<uint16_t>(h | (sign >> 16));
}
uint16_t fp32_to_bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>(encode_format(x, kBf16));  // NaN
  // Drop 16 bits, ties to even; a carry steps the exponent (and overflows into Inf).
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float fp16_bits_to_fp32(uint16_t b) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t c = 0; c < t.size(); ++c) t[c] = static_cast<float>(decode_format(c, kFp16));
    return t;
  }();
  return table[b];
}
float bf16_bits_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace opcts
