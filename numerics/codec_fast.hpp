// Fast fp32 → fp8 (e4m3fn, e5m2) array encoders by integer bit manipulation, bit-identical to encode_format.
//
// Same semantics as encode_format(x, format, ov) from numerics/codec.hpp: round to nearest, ties
// to even; satfinite turns finite overflow and ±Inf into ±max, nonsaturating into NaN with the
// sign kept (e4m3fn 0x7F|s) or ±Inf (e5m2 0x7C|s); a NaN input keeps its sign (e4m3fn 0x7F|s,
// e5m2 quiet NaN 0x7E|s); −0 stays 0x80. No double arithmetic, no frexp; OpenMP over chunks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numerics/codec.hpp"

namespace opcts {

void encode_fp32_to_e4m3fn(const float* in, uint8_t* out, size_t n, Overflow ov);
void encode_fp32_to_e5m2(const float* in, uint8_t* out, size_t n, Overflow ov);

}  // namespace opcts
