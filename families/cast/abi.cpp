// The cast problem as the plugin ABI's opcts_cast_params (include/opcts/plugin.h).
#include "core/abi_impl.hpp"
#include "families/cast/cast.hpp"

namespace opcts::cast {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_cast_params c{};
  c.struct_size = sizeof c;
  c.from = abi_dtype(p.from);
  c.to = abi_dtype(p.to);
  c.satfinite = p.overflow == Overflow::satfinite;
  c.e8m0_rounding = p.rounding == ScaleRounding::floor  ? OPCTS_E8M0_FLOOR
                    : p.rounding == ScaleRounding::ceil ? OPCTS_E8M0_CEIL
                                                        : OPCTS_E8M0_RNE;
  c.n = input_count(p);
  return abi_bytes(c);
}

}  // namespace opcts::cast
