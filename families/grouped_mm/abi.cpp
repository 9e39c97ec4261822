// The grouped_mm problem as the plugin ABI's opcts_grouped_mm_params (include/opcts/plugin.h).
#include "core/abi_impl.hpp"
#include "families/grouped_mm/grouped_mm.hpp"

namespace opcts::grouped_mm {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_grouped_mm_params c{};
  c.struct_size = sizeof c;
  switch (p.mode) {
    case Mode::m2d_3d: c.mode = OPCTS_GROUPED_2D_3D; break;
    case Mode::m3d_3d: c.mode = OPCTS_GROUPED_3D_3D; break;
    case Mode::m2d_2d: c.mode = OPCTS_GROUPED_2D_2D; break;
    case Mode::m3d_2d: c.mode = OPCTS_GROUPED_3D_2D; break;
  }
  switch (p.recipe) {
    case Recipe::bf16: c.recipe = OPCTS_GROUPED_BF16; break;
    case Recipe::rowwise: c.recipe = OPCTS_GROUPED_ROWWISE; break;
    case Recipe::mxfp8: c.recipe = OPCTS_GROUPED_MXFP8; break;
    case Recipe::rowwise_fnuz: c.recipe = OPCTS_GROUPED_ROWWISE_FNUZ; break;
  }
  c.groups = p.groups;
  // The tensors' extents: the split dimension's includes the rows past the last offset.
  c.m = p.mode == Mode::m2d_3d ? p.m + p.tail : p.m;
  c.n = p.mode == Mode::m3d_2d ? p.n + p.tail : p.n;
  c.k = p.mode == Mode::m2d_2d ? p.k + p.tail : p.k;
  return abi_bytes(c);
}

}  // namespace opcts::grouped_mm
