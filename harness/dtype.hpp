// Element types and their exact round-to-nearest-even encodings (fp64, fp32, fp16, bf16).
//
// Every format is described by a FloatFormat (sign/exponent/mantissa widths, bias, which
// special values exist), and encode/decode work from that description, so the narrow
// formats (fp8 e4m3fn/e5m2 and their FNUZ twins, e8m0, fp6, fp4, int4) slot in as new
// DType members with a FloatFormat or integer codec, without changing any caller:
// callers only use dtype_info(), encode()/decode() and HostTensor's double accessors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace opcts {

enum class DType : uint8_t { fp64, fp32, fp16, bf16 };

/// A binary floating-point format. IEEE 754 semantics when has_inf: the all-ones exponent
/// holds Inf (mantissa 0) and NaN; gradual underflow through subnormals.
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;  // explicit fraction bits
  int bias;
  bool has_inf;
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;   // the id spelling: "fp32", "bf16", ...
  int bits;                // storage bits per element
  FloatFormat format;
  double epsilon;          // 2^-mantissa_bits: the gap between 1 and the next value
  double max_finite;
  double min_normal;
};

const DTypeInfo& dtype_info(DType t);
/// "fp16", "bf16", "fp32", "fp64" (also "float16", "bfloat16", "float32", "float64").
/// Throws std::invalid_argument quoting the text.
DType parse_dtype(std::string_view s);
inline std::string_view name(DType t) { return dtype_info(t).name; }
inline int storage_bytes(DType t) { return (dtype_info(t).bits + 7) / 8; }

/// x rounded to the nearest value of format f, ties to even, overflow to ±Inf (IEEE).
/// Exact for any f narrower than fp64: one rounding, never two.
double round_to_format(double x, const FloatFormat& f);
/// Bits of x in format f after round_to_format (NaN → canonical quiet NaN, sign kept).
uint64_t encode_format(double x, const FloatFormat& f);
/// The value of a code of format f.
double decode_format(uint64_t bits, const FloatFormat& f);

/// x rounded to dtype t (identity for fp64).
double round_to(DType t, double x);
/// Storage bits of x in dtype t (fp64 and fp32 use the machine's own encoding).
uint64_t encode(DType t, double x);
double decode(DType t, uint64_t bits);

/// The largest value of dtype t strictly below x (finite x).
double next_below(DType t, double x);

/// Convenience forms for the 16-bit formats, from fp32, used by host impls.
uint16_t fp32_to_fp16_bits(float x);
uint16_t fp32_to_bf16_bits(float x);
float fp16_bits_to_fp32(uint16_t b);
float bf16_bits_to_fp32(uint16_t b);

}  // namespace opcts
