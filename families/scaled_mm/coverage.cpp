// The edge classes of docs/coverage.md that scaled_mm's problems reach (`opcts list --coverage`).
#include <string>
#include <vector>

#include "families/scaled_mm/scaled_mm.hpp"

namespace opcts::scaled_mm {

std::vector<std::string> edge_classes() {
  return {"partial tiles",         "zero-size dimensions",
          "strides and alignment", "overflow and saturation",
          "scale layout",          "K and group divisibility",
          "M = 1 decode",          "epilogue scales and bias",
          "accumulator range",     "exact fills"};
}

std::vector<std::string> edge_classes_of(const Problem& p) {
  std::vector<std::string> out;
  if (p.m % 128 != 0 || p.n % 128 != 0 || p.k % 128 != 0) out.push_back("partial tiles");
  if (p.m == 0 || p.n == 0 || p.k == 0) out.push_back("zero-size dimensions");
  if ((p.lda != 0 && p.lda != p.k) || (p.ldb != 0 && p.ldb != p.k) || p.a_layout != Layout::row ||
      p.b_layout != Layout::col || p.n % 16 != 0)
    out.push_back("strides and alignment");
  if (p.out == DType::e4m3fn) out.push_back("overflow and saturation");
  if (is_block_scaled(p.recipe)) out.push_back("scale layout");
  // K off the recipe's natural block: for the block-scaled recipes a multiple of their 32- (MX)
  // or 16-element (NVFP4) scale blocks but not of 64; for the others not a multiple of 128 (the
  // blockwise recipes' scale blocks, the per-tensor and rowwise kernels' K tile).
  const int64_t block = p.recipe == Recipe::blockwise_1x128_128x128 || p.recipe == Recipe::blockwise_1x128_1x128 ? 128
                        : is_block_scaled(p.recipe)                                                              ? 64
                                                                                                                 : 128;
  if (p.k % block != 0) out.push_back("K and group divisibility");
  if (p.m == 1) out.push_back("M = 1 decode");
  if (p.bias || p.out_scale != 1.0) out.push_back("epilogue scales and bias");
  if (p.fast_accum || p.scale_exp != 0) out.push_back("accumulator range");
  if (p.fill == Fill::exact) out.push_back("exact fills");
  return out;
}

}  // namespace opcts::scaled_mm
