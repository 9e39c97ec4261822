// The fp8 arithmetic of cuda.flash's forward (sdpa_flash.cu), for host and device: the codes widened
// to fp32 (exact; then to the 16-bit MMA type, exact too: every e4m3fn and e5m2 value is a bf16 and
// an fp16 value) and P rounded to e4m3fn as an fp8 MMA operand takes it (FlashAttention 3's fp8
// forward). No harness headers: the kernel includes this, and the CUDA glue tests check it on the
// CPU against numerics/minifloat_bits.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "numerics/minifloat_bits.hpp"

namespace opcts::cuda {

/// The fp32 value of fp8 code c, E5M2 where e5m2, else E4M3FN (NaN codes as NaN, E5M2's ±Inf).
OPCTS_HD float sdpa_fp8_to_f32(uint32_t c, bool e5m2) {
  const uint32_t u = e5m2 ? bits::decode_to_fp32(c, bits::kE5m2) : bits::decode_to_fp32(c, bits::kE4m3fn);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// x rounded to e4m3fn (to nearest even, saturating at 448) and back, for x >= 0 or NaN (a
/// probability of the softmax: NaN stays NaN). Below e4m3fn's smallest normal 2^-6 the spacing is
/// its subnormals' 2^-9; above, 3 fraction bits. Cheaper than bits::encode_fp32 on the key loop's
/// every probability, and the same value there (the glue tests compare them).
OPCTS_HD float sdpa_round_p_e4m3fn(float x) {
  if (x < 0x1p-6f) return rintf(x * 512.f) * 0x1p-9f;  // x·2^9 is exact; rintf rounds ties to even
  if (!(x <= 448.f)) return x > 448.f ? 448.f : x;     // satfinite; NaN kept
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7FFFFu + ((u >> 20) & 1u);  // to nearest even at bit 20 (a carry moves into the exponent)
  u &= 0xFFF00000u;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

}  // namespace opcts::cuda
