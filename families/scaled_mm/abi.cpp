// The scaled_mm problem as the plugin ABI's opcts_scaled_mm_params (include/opcts/plugin.h).
#include "core/abi_impl.hpp"
#include "families/scaled_mm/scaled_mm.hpp"

namespace opcts::scaled_mm {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_scaled_mm_params c{};
  c.struct_size = sizeof c;
  c.m = p.m;
  c.n = p.n;
  c.k = p.k;
  c.a_elem = abi_dtype(p.a_elem);
  c.b_elem = abi_dtype(p.b_elem);
  c.out = abi_dtype(p.out);
  c.bias = p.bias;
  switch (p.recipe) {
    case Recipe::tensorwise: c.recipe = OPCTS_MM_TENSORWISE; break;
    case Recipe::rowwise: c.recipe = OPCTS_MM_ROWWISE; break;
    case Recipe::blockwise_1x128_128x128: c.recipe = OPCTS_MM_BLOCKWISE_1X128_128X128; break;
    case Recipe::blockwise_1x128_1x128: c.recipe = OPCTS_MM_BLOCKWISE_1X128_1X128; break;
    case Recipe::mxfp8: c.recipe = OPCTS_MM_MXFP8; break;
    case Recipe::mxfp4: c.recipe = OPCTS_MM_MXFP4; break;
    case Recipe::nvfp4: c.recipe = OPCTS_MM_NVFP4; break;
  }
  c.a_row_major = p.a_layout == Layout::row;
  c.b_col_major = p.b_layout == Layout::col;
  c.lda = p.eff_lda();
  c.ldb = p.eff_ldb();
  c.scale_layout =
      p.scale_layout == quant::ScaleLayout::row_major ? OPCTS_MM_SCALES_ROW_MAJOR : OPCTS_MM_SCALES_SWIZZLED;
  c.mx_rceil = p.mx_mode == quant::MxScaleMode::rceil;
  c.fast_accum = p.fast_accum;
  return abi_bytes(c);
}

}  // namespace opcts::scaled_mm
