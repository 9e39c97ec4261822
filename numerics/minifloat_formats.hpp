// The MiniFormat of each narrow DType, for impls that use numerics/minifloat_bits.hpp.
#pragma once

#include <stdexcept>
#include <string>

#include "numerics/dtype.hpp"
#include "numerics/minifloat_bits.hpp"

namespace opcts::bits {

/// The bit layout of a 4/6/8/16-bit float dtype; throws std::invalid_argument for others.
inline MiniFormat mini_format(DType t) {
  const auto& i = dtype_info(t);
  if (i.is_integer || t == DType::fp32 || t == DType::fp64 || t == DType::e8m0fnu)
    throw std::invalid_argument("no MiniFormat for " + std::string(name(t)));
  const FloatFormat& f = i.format;
  Kind k = kIeee;
  switch (f.specials) {
    case Specials::ieee: k = kIeee; break;
    case Specials::fn: k = kFn; break;
    case Specials::fnuz: k = kFnuz; break;
    case Specials::finite: k = kFinite; break;
    case Specials::e8m0: break;
  }
  return {static_cast<uint32_t>(f.exponent_bits), static_cast<uint32_t>(f.mantissa_bits), f.bias, k, f.is_signed};
}

}  // namespace opcts::bits
