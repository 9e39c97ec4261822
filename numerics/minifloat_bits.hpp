// Integer (bit-manipulation) conversions between fp32 and the narrow formats, for host and device.
//
// An implementation independent of numerics/codec.cpp's double arithmetic: host.cvt runs it on
// the CPU, and the planted-bug CUDA impl runs it on the GPU with ties rounded up. Targets are
// the 4/6/8-bit formats (exponent bias < 126); semantics as numerics/codec.hpp documents:
// RNE, satfinite or nonsaturating overflow, the NaN/−0 rules of ieee, fn, fnuz and finite
// formats. No harness headers: kernels include this.
#pragma once

#include <cstdint>

#include "include/opcts/plugin.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define OPCTS_HD __host__ __device__ __forceinline__
#else
#define OPCTS_HD inline
#endif

namespace opcts::bits {

enum Kind : uint32_t { kIeee = 0, kFn = 1, kFnuz = 2, kFinite = 3 };

struct MiniFormat {
  uint32_t ebits, mbits;
  int32_t bias;
  Kind kind;
  bool is_signed;
};

// The formats device kernels name (fp8: OCP's E4M3FN and E5M2, AMD's FNUZ variants; OCP MX's fp6
// and fp4), the same layouts numerics/minifloat_formats.hpp derives from the DType table.
constexpr MiniFormat kE4m3fn{4, 3, 7, kFn, true};
constexpr MiniFormat kE5m2{5, 2, 15, kIeee, true};
constexpr MiniFormat kE4m3fnuz{4, 3, 8, kFnuz, true};
constexpr MiniFormat kE5m2fnuz{5, 2, 16, kFnuz, true};
constexpr MiniFormat kE2m3{2, 3, 1, kFinite, true};
constexpr MiniFormat kE3m2{3, 2, 3, kFinite, true};
constexpr MiniFormat kE2m1{2, 1, 1, kFinite, true};

OPCTS_HD uint32_t max_code(MiniFormat f) {
  const uint32_t all = (1u << f.ebits) - 1, mask = (1u << f.mbits) - 1;
  switch (f.kind) {
    case kIeee: return ((all - 1) << f.mbits) | mask;
    case kFn: return (all << f.mbits) | (mask - 1);
    default: return (all << f.mbits) | mask;
  }
}

OPCTS_HD uint32_t sign_bit(MiniFormat f) { return f.is_signed ? 1u << (f.ebits + f.mbits) : 0u; }

// The code of a NaN input (finite formats have none: +max, as CUDA's fp4/fp6 conversions do).
OPCTS_HD uint32_t nan_code(MiniFormat f, uint32_t s) {
  const uint32_t all = (1u << f.ebits) - 1, mask = (1u << f.mbits) - 1;
  switch (f.kind) {
    case kIeee: return s | (all << f.mbits) | (1u << (f.mbits - 1));
    case kFn: return s | (all << f.mbits) | mask;
    case kFnuz: return sign_bit(f);
    default: return max_code(f);
  }
}

// The code of an overflow (finite beyond max, or ±Inf) with sign s.
OPCTS_HD uint32_t overflow_code(MiniFormat f, uint32_t s, bool satfinite) {
  if (satfinite || f.kind == kFinite) return s | max_code(f);
  const uint32_t all = (1u << f.ebits) - 1;
  switch (f.kind) {
    case kIeee: return s | (all << f.mbits);
    case kFn: return s | (all << f.mbits) | ((1u << f.mbits) - 1);
    default: return sign_bit(f);  // fnuz
  }
}

/// fp32 bits → code. `ties_up` rounds ties away from zero instead of to even (a planted bug).
OPCTS_HD uint32_t encode_fp32(uint32_t u, MiniFormat f, bool satfinite, bool ties_up = false) {
  const uint32_t e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
  const uint32_t s = (f.is_signed && (u >> 31)) ? sign_bit(f) : 0u;  // unsigned formats take |x|
  if (e == 0xFFu) return m ? nan_code(f, s) : overflow_code(f, s, satfinite);
  if (e == 0 && m == 0) return f.kind == kFnuz ? 0u : s;
  // x = sig · 2^(exp − 23) with sig the 24-bit significand (fp32 subnormals: exp −126, no
  // implicit bit).
  const int32_t exp = e ? static_cast<int32_t>(e) - 127 : -126;
  const uint64_t sig = e ? (m | 0x800000u) : m;
  int32_t te = exp + f.bias;  // biased target exponent if x is normal there
  int32_t shift = 23 - static_cast<int32_t>(f.mbits);
  if (te < 1) {  // subnormal in the target: fewer mantissa bits survive
    shift += 1 - te;
    te = 0;
  }
  uint64_t q = 0;
  if (shift < 40) {
    q = sig >> shift;
    const uint64_t rem = sig & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (ties_up || (q & 1)))) ++q;
  }
  // For normal targets q counts the implicit bit: q − 2^mbits is the mantissa, and a carry
  // to 2^(mbits+1) moves into the exponent field by itself.
  const uint64_t code = te >= 1 ? (static_cast<uint64_t>(te) << f.mbits) + q - (uint64_t{1} << f.mbits) : q;
  if (code > max_code(f)) return overflow_code(f, s, satfinite);
  if (code == 0) return f.kind == kFnuz ? 0u : s;
  return s | static_cast<uint32_t>(code);
}

/// code → fp32 bits (exact: every narrow value is an fp32 value).
OPCTS_HD uint32_t decode_to_fp32(uint32_t code, MiniFormat f) {
  const uint32_t all = (1u << f.ebits) - 1, mask = (1u << f.mbits) - 1;
  const uint32_t width = f.ebits + f.mbits + (f.is_signed ? 1 : 0);
  code &= (1u << width) - 1;
  const uint32_t neg = f.is_signed ? (code >> (f.ebits + f.mbits)) & 1u : 0u;
  const uint32_t E = (code >> f.mbits) & all, M = code & mask;
  const uint32_t sign = neg << 31;
  if (f.kind == kFnuz && code == sign_bit(f)) return 0x7FC00000u;
  if (f.kind == kFn && E == all && M == mask) return sign | 0x7FC00000u;
  if (f.kind == kIeee && E == all) return sign | (M ? 0x7FC00000u : 0x7F800000u);
  if (E == 0) {
    if (M == 0) return sign;
    uint32_t p = 0;  // top set bit of M: value = M · 2^(1 − bias − mbits)
    while ((M >> (p + 1)) != 0) ++p;
    const int32_t fexp = static_cast<int32_t>(p) + 1 - f.bias - static_cast<int32_t>(f.mbits) + 127;
    return sign | (static_cast<uint32_t>(fexp) << 23) | ((M - (1u << p)) << (23 - p));
  }
  return sign | (static_cast<uint32_t>(static_cast<int32_t>(E) - f.bias + 127) << 23) | (M << (23 - f.mbits));
}

/// e8m0 rounding, valued by the ABI's constants as opcts::ScaleRounding is (one vocabulary).
enum ScaleRound : uint32_t { kFloor = OPCTS_E8M0_FLOOR, kCeil = OPCTS_E8M0_CEIL, kRne = OPCTS_E8M0_RNE };

/// fp32 bits → e8m0 code (|x| to a power of two; 0 and below 2^-127 → 0x00).
OPCTS_HD uint32_t encode_e8m0_fp32(uint32_t u, ScaleRound r, bool satfinite) {
  const uint32_t e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
  if (e == 0xFFu) return m ? 0xFFu : (satfinite ? 0xFEu : 0xFFu);
  if (e == 0 && m == 0) return 0;
  int32_t fl;       // floor(log2 |x|)
  bool frac, half;  // |x| is not a power of two; |x|/2^fl >= 1.5
  if (e) {
    fl = static_cast<int32_t>(e) - 127;
    frac = m != 0;
    half = m >= 0x400000u;
  } else {  // fp32 subnormal: |x| = m · 2^-149
    uint32_t p = 0;
    while ((m >> (p + 1)) != 0) ++p;
    fl = static_cast<int32_t>(p) - 149;
    frac = m != (1u << p);
    half = p > 0 && (m - (1u << p)) >= (1u << (p - 1));
  }
  const int32_t ex = fl + (r == kCeil ? (frac ? 1 : 0) : r == kRne ? (half ? 1 : 0) : 0);
  if (ex < -127) return 0;
  if (ex > 127) return satfinite ? 0xFEu : 0xFFu;
  return static_cast<uint32_t>(ex + 127);
}

/// e8m0 code → fp32 bits (0x00 is 2^-127, an fp32 subnormal; 0xFF is NaN).
OPCTS_HD uint32_t decode_e8m0_to_fp32(uint32_t c) {
  c &= 0xFFu;
  if (c == 0xFFu) return 0x7FC00000u;
  return c ? c << 23 : 0x00400000u;
}

}  // namespace opcts::bits
