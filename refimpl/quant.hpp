// Quantizers for the scaled-GEMM family: fp32 [R, K] → element codes plus dequant scales, bit-exact.
//
// Conventions (OCP MX v1.0; torchao mx_formats; cuBLASLt docs, cublasLtMatmulMatrixScale_t; PyTorch's
// test/test_scaled_matmul_cuda.py and torch/testing/_internal/common_quantized.py):
//   * The source is a 2-D tensor x [R, K] (fp32; bf16/fp16 accepted, their values are exact in
//     fp32), read through its strides. R is the outer dimension (M for A, N for B given as Bᵀ),
//     K the reduction dimension. Blocks run along K (and along R for 128×128).
//   * Scales are DEQUANT scales: x ≈ q · scale (· global_scale for NVFP4), the convention of
//     torch._scaled_mm and cuBLASLt's A/B_SCALE_POINTER.
//   * amax of a block is max |x| over the block, NaN-propagating (torch.amax): one NaN makes it NaN.
//   * The data tensor is always [R, K] row-major in the element dtype; fp6 takes the low 6 bits of a
//     byte; e2m1 packs two per byte, element 2i (even k) in the low nibble (HostTensor's packing,
//     torchao pack_uint4).
//
// Recipes and their exact rules:
//   fp32-scale recipes (tensorwise, rowwise, blockwise_1x128, blockwise_128x128), elements e4m3fn,
//   e5m2, e4m3fnuz, e5m2fnuz; blocks: the whole tensor, 1×K, 1×128, 128×128 (partial blocks at
//   the right and bottom edges cover what is left):
//     scale d = fp32(amax / max_elem), the IEEE fp32 quotient, correctly rounded (max_elem: 448,
//     57344, 240, 57344); amax = 0 → d = 1; a d that underflows to 0 becomes 2^-149 (the
//     smallest fp32), so d is never 0. q = encode(x / d, satfinite), the exact quotient rounded
//     once to nearest-even (the double quotient of two fp32 values never lies close enough to a
//     tie of an 8-bit format to round differently), overflow clamped to ±max.
//     Non-finite blocks: a NaN anywhere in the block → d = NaN (fp32 0x7FC00000); otherwise an
//     Inf → d = +Inf. Elements are still encoded from x / d: a finite x gives ±0 (the code of
//     ±0; FNUZ has only +0), ±Inf and NaN give the format's +NaN code (e4m3fn 0x7F, e5m2 0x7E,
//     FNUZ 0x80). Every element of such a block dequantizes to NaN (0·Inf and q·NaN are NaN).
//     This is what torch's x·(max/amax) followed by the cast gives.
//   mx (OCP MX v1.0 §5.3, torchao to_mx), block 1×32, e8m0 scale 2^e, elements e4m3fn, e5m2,
//   e2m3fn, e3m2fn, e2m1fn with emax_elem 8, 15, 2, 4, 2:
//     floor: e = floor(log2 amax) − emax_elem, clamped to [−127, 127]. amax/2^e lies in
//            [2^emax, 2^(emax+1)), so the largest element can exceed max_elem and is clamped.
//     rceil: e = ceil(log2(amax / max_elem)) exactly, clamped to [−127, 127]; |x|/2^e ≤ max_elem,
//            so it never saturates. (torchao computes the quotient as fp32(amax·fp32(1/max));
//            that gives the same e for every fp32 amax except one per element type, where
//            fp32 rounding underflows the quotient to 2^-127: e4m3 amax = 0x1.c00002p-119 →
//            torchao −127, exact −126; likewise 0x1.c00002p-112 (e5m2), 0x1.e00002p-125 (e2m3),
//            0x1.c00002p-123 (e3m2), 0x1.800002p-125 (e2m1); checked over every positive
//            finite fp32.)
//     q = encode(x · 2^-e, satfinite): exact scaling, round to nearest-even, clamp to ±max.
//     Zero block (amax = 0): e = −127 under both modes, scale code 0x00 (2^-127), data ±0.
//     Non-finite amax (any NaN or Inf in the block): scale code 0xFF (NaN), and every element is
//     encoded from x·NaN = NaN: e4m3fn 0x7F, e5m2 0x7E, and +max for fp6/fp4 (0x1F, 0x1F, 0x7:
//     those formats have no NaN; CUDA's cvt rule, numerics/codec.hpp). The 0xFF scale makes the
//     whole block NaN on decode (OCP MX §5.3), so these codes carry no value; torchao's eager
//     fp4/fp6 cast has no NaN case and yields other codes there.
//   nvfp4 (torchao nvfp4_tensor.py nvfp4_quantize), block 1×16, e2m1 elements, ue4m3 block
//   scale s, optional fp32 global scale g. Every step is fp32 arithmetic, as in torchao:
//     g = fp32(amax_tensor / 2688) (2688 = 448·6), raised to 2^-126 if smaller; amax_tensor = 0
//       gives g = 1; without a global scale g = 1. NaN / Inf amax_tensor gives g = NaN / +Inf.
//     s = ue4m3(clamp(fp32(fp32(amax_blk / 6) / g), 2^-6, 448)), clamp propagating NaN;
//     q = e2m1(clamp(fp32(x / fp32(g·s)), −6, 6)), round to nearest-even.
//     Zero block → s = 2^-6 (code 0x08), data ±0. NaN in a block → s = NaN (code 0x7F), data
//     +6 (0x7, codec NaN rule). An Inf in a block (no NaN) → s clamps to 448 (code 0x7E, ue4m3
//     has no Inf) and Inf elements clamp to ±6: the block stays finite, as in torchao. A NaN
//     anywhere makes g NaN when the global scale is on, hence every s NaN; an Inf makes g = +Inf,
//     every finite block s = 2^-6 with data ±0 and the Inf blocks s = NaN: all of it dequantizes
//     to NaN.
//
// Dequantization: element_value() is q · scale (· g) in double, exact (the factors' significands hold
// at most 4 + 4 + 24 bits); dequantize() rounds it once to fp32 (nearest-even, overflow to ±Inf).
//
// Scale layouts (cuBLASLt docs, cublasLtMatmulMatrixScale_t and "1D Block Scaling Factors Layout"):
//   row_major     [scale_rows, scale_cols] contiguous, every recipe.
//   column_major  [scale_rows, scale_cols] with strides (1, scale_rows): cuBLASLt VEC128_32F and
//                 PyTorch's BlockWise1x128 (outer-dim-major); fp32 recipes only.
//   swizzled      cuBLAS "1D block scaling factors layout" = torchao/PyTorch to_blocked, mx and
//                 nvfp4 only: a 1-D tensor of R'·S' codes, R' = roundup(R, 128), S' =
//                 roundup(scale_cols, 4); 128×4 tiles of 512 contiguous bytes; padding codes
//                 are 0x00 (e8m0 2^-127, ue4m3 +0: valid, finite scales; torch's F.pad zeros).
// Not covered: PyTorch's padded BlockWise128x128 layout ([L4, ceil(R/128)], stride [1, L4]) and
// ROCm's (32, 8) MX tiling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "numerics/tensor.hpp"

namespace opcts::quant {

enum class Recipe { tensorwise, rowwise, blockwise_1x128, blockwise_128x128, mx, nvfp4 };
enum class MxScaleMode { floor, rceil };
enum class ScaleLayout { row_major, column_major, swizzled };

/// A quantization scheme: recipe, element type and the recipe's knobs.
struct Scheme {
  Recipe recipe = Recipe::tensorwise;
  DType element = DType::e4m3fn;
  MxScaleMode mx_mode = MxScaleMode::floor;  // mx only
  bool global_scale = true;                  // nvfp4 only
  /// Throws std::invalid_argument for an element type the recipe does not take (fp32 recipes:
  /// e4m3fn e5m2 e4m3fnuz e5m2fnuz; mx: e4m3fn e5m2 e2m3fn e3m2fn e2m1fn; nvfp4: e2m1fn).
  void validate() const;
  bool operator==(const Scheme&) const = default;
};

/// Canonical names:
///   tensorwise | rowwise | blockwise_1x128 | blockwise_128x128, then "_e5m2", "_e4m3fnuz" or
///     "_e5m2fnuz" unless the element is e4m3fn ("_e4m3fn" is accepted on input);
///   mxfp8_e4m3 | mxfp8_e5m2 | mxfp6_e2m3 | mxfp6_e3m2 | mxfp4, then "_rceil" for RCEIL
///     (floor is the default; "_floor" is accepted on input);
///   nvfp4 (with the global scale) | nvfp4_noglobal.
/// Valid gtest name pieces. parse_scheme throws std::invalid_argument quoting the text.
std::string to_string(const Scheme& s);
Scheme parse_scheme(std::string_view text);
/// Every canonical scheme (for catalogs and tests).
const std::vector<Scheme>& all_schemes();

std::string_view to_string(ScaleLayout l);
/// "row_major", "column_major", "swizzled"; throws std::invalid_argument.
ScaleLayout parse_scale_layout(std::string_view text);
/// Whether quantize() accepts the layout for the scheme.
bool layout_supported(const Scheme& s, ScaleLayout l);

/// The dtype of the scales: fp32, e8m0fnu (mx) or ue4m3 (nvfp4).
DType scale_dtype(const Scheme& s);
/// emax_elem of an MX element type (OCP MX v1.0): e4m3fn 8, e5m2 15, e2m3fn 2, e3m2fn 4, e2m1fn 2.
int mx_emax(DType element);

/// Block and scale-grid shape for x [R, K]. tensorwise: one block of the whole tensor, grid 1×1
/// (also when R or K is 0); rowwise: blocks 1×K, grid R×1; otherwise grid
/// ceil(R/block_rows) × ceil(K/block_cols) with blocks 1×128, 128×128, 1×32, 1×16.
struct ScaleGrid {
  int64_t block_rows = 1, block_cols = 1;
  int64_t rows = 0, cols = 0;
};
ScaleGrid scale_grid(const Scheme& s, int64_t R, int64_t K);

struct Quantized {
  Scheme scheme;
  ScaleLayout layout = ScaleLayout::row_major;
  int64_t rows = 0, cols = 0;  // R, K of the source
  ScaleGrid grid;
  HostTensor data;            // element dtype, [R, K] row-major (e2m1 packed, 2i low nibble)
  HostTensor scale;           // scale_dtype(scheme), in `layout` (see the file comment)
  double global_scale = 1.0;  // nvfp4's fp32 g (1 when disabled); 1 for every other recipe
};

/// Quantizes x [R, K] (fp32/bf16/fp16, any strides). Throws std::invalid_argument for a bad
/// scheme, a non-2-D or non-float input, or a layout the scheme does not support.
Quantized quantize(const HostTensor& x, const Scheme& s, ScaleLayout layout = ScaleLayout::row_major);

/// The code and the decoded value of block (br, bc)'s scale, whatever the layout (NaN for NaN
/// codes; the nvfp4 global scale is not included).
uint64_t scale_code(const Quantized& q, int64_t br, int64_t bc);
double scale_value(const Quantized& q, int64_t br, int64_t bc);
/// The value element (r, k) stands for: decode(q) · scale · global_scale, exact in double.
double element_value(const Quantized& q, int64_t r, int64_t k);
/// fp32 [R, K]: element_value rounded once to fp32.
HostTensor dequantize(const Quantized& q);

/// The scale rules on their own (the amax is a block's NaN-propagating max |x|):
/// fp32 recipes: d as above (NaN / +Inf for non-finite amax).
float fp32_recipe_scale(float amax, DType element);
/// mx: the e8m0 code (0xFF for non-finite amax).
uint8_t mx_scale_code(float amax, DType element, MxScaleMode mode);
/// nvfp4: the global scale g from the tensor's amax, and a block's ue4m3 code under g.
float nvfp4_global_scale(float amax_tensor);
uint8_t nvfp4_block_scale_code(float amax_block, float g);

// Codes of a float element type drawn as RN_satfinite(z·sigma) from a uniform: numerics/normal_codes.hpp
// (NormalCodeSampler, shared with the 16-bit activations' fills). Quantized operands made in the
// code domain draw their codes there and set their scales directly, so no float tensor is
// quantized (issue 16).

/// Byte offset of scale (r, c) in the swizzled layout (cuBLAS, torchao to_blocked):
/// ((r/128)·(S'/4) + c/4)·512 + (r%32)·16 + ((r%128)/32)·4 + c%4, S' = roundup(scale_cols, 4).
size_t swizzled_offset(size_t r, size_t c, size_t scale_cols);
/// Codes in a swizzled buffer: roundup(rows, 128) · roundup(scale_cols, 4).
size_t swizzled_size(size_t rows, size_t scale_cols);
/// [rows, scale_cols] scales (any dtype, any strides) → 1-D swizzled tensor, padding codes 0.
HostTensor swizzle(const HostTensor& row_major_scales);
/// Inverse: 1-D swizzled tensor of swizzled_size(rows, scale_cols) codes → [rows, scale_cols]
/// contiguous (padding dropped). Throws std::invalid_argument on a size mismatch.
HostTensor unswizzle(const HostTensor& swizzled, size_t rows, size_t scale_cols);

}  // namespace opcts::quant
