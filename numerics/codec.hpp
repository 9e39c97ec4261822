// Bit-exact codecs of every number format opcts handles, with explicit overflow and rounding policies.
//
// Formats (OCP 8-bit FP (OFP8) spec v1.0; OCP MX v1.0; ml_dtypes float8.h; IEEE 754-2019):
//   ieee   fp64, fp32, fp16, bf16, e5m2: all-ones exponent holds ±Inf (mantissa 0) and NaN
//   fn     e4m3fn, ue4m3: no Inf; NaN only where exponent and mantissa are all ones
//   fnuz   e4m3fnuz, e5m2fnuz: no Inf, no −0; the code 0x80 (sign bit alone) is the one NaN
//   finite e2m1fn, e2m3fn, e3m2fn: every code is a finite number
//   e8m0   e8m0fnu: unsigned powers of two 2^(c−127), c = 0..254; 0xFF is NaN; no zero
// Encoding rounds to nearest, ties to even, from a double (exact for fp32/fp16/bf16 inputs, so
// a 16-bit input is rounded once, never twice). Overflow policies:
//   satfinite      finite overflow and ±Inf become ±max finite
//   nonsaturating  OCP/ml_dtypes semantics: ieee → ±Inf, fn → NaN (sign kept), fnuz → NaN
//                  (0x80); finite formats have no such code and saturate under both policies
// NaN inputs: ieee/fn keep the sign on a NaN code, fnuz → 0x80, e8m0 → 0xFF, and the finite
// formats (no NaN) give +max as CUDA does (cuda_fp4.h, cuda_fp6.h). Unsigned formats (ue4m3,
// e8m0) encode |x|. FNUZ has no −0: anything that rounds to zero encodes as +0 (0x00).
// Decoding a NaN code gives +NaN whatever its sign bit (ml_dtypes keeps the sign); the codes
// themselves keep it, so bit-exact comparisons see it.
// Default policies differ by entry point: encode_format and round_to_format default to
// nonsaturating; encode(DType) and HostTensor::set use default_overflow (numerics/dtype.hpp:
// nonsaturating for the ieee formats, satfinite for fn, fnuz, e8m0 and the finite formats);
// encode_e8m0 and the cast problem (families/cast/cast.hpp) default to satfinite.
// Against ml_dtypes 0.6 and torch 2.11 tables the codecs give the same value for every code and
// for 200k fp32 encodes per format (as reported in issue 18; not a test of this tree), except
// where the note on ScaleRounding::rne says.
#pragma once

#include <cstdint>

#include "include/opcts/plugin.h"

namespace opcts {

enum class Specials { ieee, fn, fnuz, finite, e8m0 };

/// A binary floating-point format: field widths, bias, which special codes exist, and whether
/// a sign bit precedes the exponent (the codes occupy 1 + exponent_bits + mantissa_bits bits,
/// or exponent_bits + mantissa_bits when unsigned).
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Specials specials;
  bool is_signed = true;
};

enum class Overflow { satfinite, nonsaturating };

/// How e8m0 scales round a positive value to a power of two (OCP MX v1.0; torchao to_mx, ScaleCalculationMode):
/// floor = truncate the exponent (OCP MX v1.0's shared_exp, CUDA cudaRoundZero), ceil = next
/// power of two up (RCEIL; cuBLAS/cuDNN "UE8M0", CUDA cudaRoundPosInf), rne = nearest power
/// of two with ties (1.5·2^e) up to 2^(e+1). rne is PyTorch's float8_e8m0fnu conversion (c10's
/// fp8e8m0fnu_from_fp32_value) for normal inputs but not at the edges: torch rounds an fp32
/// subnormal's mantissa as if it were normal, giving 0x01 (2^-126) for 0x00400001–0x005FFFFF
/// where rne gives 0x00 (2^-127) (measured through aten.cast on the H200: bf16 subnormals alike),
/// and it gives NaN (0xFF) on overflow where rne under satfinite gives 0xFE.
/// Valued by the ABI's constants (opcts_cast_params::e8m0_rounding); its name table is cast's
/// (families/cast/cast.hpp), bits::ScaleRound holds the same values.
enum class ScaleRounding : int32_t { floor = OPCTS_E8M0_FLOOR, ceil = OPCTS_E8M0_CEIL, rne = OPCTS_E8M0_RNE };

/// Largest finite value of the format.
double max_finite(const FloatFormat& f);
/// Smallest positive normal value (for e8m0, the smallest value 2^-127).
double min_normal(const FloatFormat& f);
/// Smallest positive subnormal value (min_normal for formats without subnormals).
double min_subnormal(const FloatFormat& f);

/// The value x encodes to (NaN and ±Inf where the code is one); ties to even. Defaults to
/// nonsaturating, unlike encode(DType) and the cast problem (the file comment).
double round_to_format(double x, const FloatFormat& f, Overflow ov = Overflow::nonsaturating);
/// The code of x: round_to_format plus the format's sign and special-code rules above; defaults
/// to nonsaturating, like round_to_format.
uint64_t encode_format(double x, const FloatFormat& f, Overflow ov = Overflow::nonsaturating);
/// The value of a code (bits above the format's width are ignored); every NaN code decodes to +NaN.
double decode_format(uint64_t bits, const FloatFormat& f);
/// True when the code is a NaN of the format.
bool is_nan_code(uint64_t bits, const FloatFormat& f);

/// e8m0 code of a scale: |x| rounded to a power of two by `r`, clamped below to 2^-127 (code
/// 0x00, also for 0), above 2^127 per `ov` (satfinite 0xFE, nonsaturating 0xFF); NaN → 0xFF.
uint8_t encode_e8m0(double x, ScaleRounding r, Overflow ov = Overflow::satfinite);

/// 4-bit integers: round to nearest even, saturate to [-8, 7] (int4) or [0, 15] (uint4);
/// NaN → 0. Codes are the low 4 bits (two's complement for int4).
uint8_t encode_int4(double x, bool is_signed);
double decode_int4(uint8_t code, bool is_signed);

}  // namespace opcts
