// Element types: names, storage widths and formats, and exact encode/decode through refimpl's codecs.
//
// Callers use dtype_info(), encode()/decode() and HostTensor's double accessors, whatever the
// format: fp64/fp32/fp16/bf16, the fp8 pairs (OCP e4m3fn/e5m2, AMD e4m3fnuz/e5m2fnuz), the
// scale formats e8m0fnu and ue4m3, fp6 (e2m3fn, e3m2fn; one per byte, low 6 bits), fp4
// e2m1fn, int4/uint4 (two per byte, element 2i in the low nibble; torchao pack_uint4) and the
// two's-complement int32/int64 of values and indices (exact through double up to 2^53).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "numerics/codec.hpp"

namespace opcts {

enum class DType : uint8_t {
  fp64,
  fp32,
  fp16,
  bf16,
  e4m3fn,
  e5m2,
  e4m3fnuz,
  e5m2fnuz,
  e8m0fnu,
  ue4m3,
  e2m3fn,
  e3m2fn,
  e2m1fn,
  int4,
  uint4,
  bool8,  // one byte, 0 or 1 (a boolean mask: DLPack kDLBool)
  int32,
  int64,  // two's complement; decoded exactly while |x| <= 2^53
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // the id spelling: "fp32", "e4m3fn", ...
  int bits;               // storage bits per element (8 for fp6: one element per byte)
  bool is_integer;        // int4 / uint4 / bool8 / int32 / int64
  FloatFormat format;     // floating formats only
  double epsilon;         // 2^-mantissa_bits (1 for integers)
  double max_finite;
  double min_normal;
  bool is_signed;
};

const DTypeInfo& dtype_info(DType t);
/// Every dtype, in enum order.
const std::vector<DType>& all_dtypes();
/// Names above plus common aliases ("float16", "bfloat16", "float8_e4m3fn", ...). Throws
/// std::invalid_argument quoting the text and listing the names.
DType parse_dtype(std::string_view s);
inline std::string_view name(DType t) { return dtype_info(t).name; }
/// Bytes that hold n elements (4-bit types pack two per byte).
int64_t storage_bytes_for(DType t, int64_t n);
/// Whole bytes per element (1 for 4-bit types; use storage_bytes_for for buffers).
inline int storage_bytes(DType t) { return (dtype_info(t).bits + 7) / 8; }

/// The policy encode(DType) and HostTensor::set use: IEEE overflow (to Inf) for formats with
/// Inf, satfinite for the rest, so generated inputs never become NaN codes by accident. (The
/// codecs' encode_format defaults to nonsaturating, the cast problem to satfinite: numerics/codec.hpp.)
Overflow default_overflow(DType t);

/// x rounded to dtype t with the policy (identity for fp64).
double round_to(DType t, double x, Overflow ov);
inline double round_to(DType t, double x) { return round_to(t, x, default_overflow(t)); }
/// Storage code of x in dtype t.
uint64_t encode(DType t, double x, Overflow ov);
inline uint64_t encode(DType t, double x) { return encode(t, x, default_overflow(t)); }
double decode(DType t, uint64_t bits);
/// decode(t, c) for every code c of a dtype of at most 16 bits (2^bits doubles): what decoding
/// many elements looks up. Throws std::invalid_argument for a wider dtype.
std::vector<double> decode_table(DType t);
/// The spacing of dtype t's values at magnitude y >= 0 (its subnormal spacing below the
/// smallest normal, its top binade's spacing above max_finite): one output ulp.
double spacing_at(DType t, double y);
/// The largest value of dtype t strictly below x (finite x, floating types).
double next_below(DType t, double x);

/// Convenience forms for the 16-bit formats, from fp32, used by host impls.
uint16_t fp32_to_fp16_bits(float x);
uint16_t fp32_to_bf16_bits(float x);
float fp16_bits_to_fp32(uint16_t b);
float bf16_bits_to_fp32(uint16_t b);

}  // namespace opcts
