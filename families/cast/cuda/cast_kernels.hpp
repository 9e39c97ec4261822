// Launch interface of the CUDA conversion kernels (CUDA's own cvt intrinsics); no harness types.
//
// Codes travel one per byte (fp4 and fp6 in the low bits); the glue packs them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/opcts/plugin.h"

struct CUstream_st;

namespace opcts::cuda {

enum class CvtWide { fp32, fp16, bf16 };
enum class CvtNarrow { e4m3, e5m2, e8m0, e2m3, e3m2, e2m1 };
/// e8m0 rounding, spelled with the ABI's constants: cudaRoundZero and cudaRoundPosInf, CUDA's
/// only two (no round to nearest: the rows SKIP rne).
enum class CvtScaleRound : int32_t { floor = OPCTS_E8M0_FLOOR, ceil = OPCTS_E8M0_CEIL };

/// Encodes n wide values (fp32 or fp16/bf16 bits, device pointer `in`) to narrow codes (`out`,
/// one byte each) with CUDA's conversion intrinsics (__nv_cvt_*: hardware cvt on sm_89+ for
/// fp8, on sm_100 for fp4/fp6/e8m0, CUDA's software path elsewhere). `satfinite` picks
/// __NV_SATFINITE over __NV_NOSAT (fp8, e8m0; fp4/fp6 always saturate).
void cvt_encode(CvtWide from, CvtNarrow to, bool satfinite, CvtScaleRound rounding, const void* in, uint8_t* out,
                size_t n, CUstream_st* stream);

/// Decodes n narrow codes (one byte each) to fp32 with CUDA's intrinsics (fp8/fp6/fp4 through
/// __half, e8m0 through __nv_bfloat16: both exact).
void cvt_decode(CvtNarrow from, const uint8_t* in, float* out, size_t n, CUstream_st* stream);

/// A planted bug for the suite to catch: fp32 → fp8/fp6/fp4 by opcts's integer encoder
/// (numerics/minifloat_bits.hpp) with ties rounded away from zero.
void cvt_encode_ties_up(CvtNarrow to, bool satfinite, const float* in, uint8_t* out, size_t n, CUstream_st* stream);

/// n 4-bit codes, one a byte, packed two a byte (element 2i in the low nibble), and back.
void cvt_pack_nibbles(const uint8_t* in, uint8_t* out, size_t n, CUstream_st* stream);
void cvt_unpack_nibbles(const uint8_t* in, uint8_t* out, size_t n, CUstream_st* stream);

}  // namespace opcts::cuda
