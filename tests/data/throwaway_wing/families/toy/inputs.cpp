// The toy problem's input: x uniform in ±[2^-4, 2), from the case's seed (Philox, numerics/rng.hpp).
#include <bit>
#include <cmath>

#include "families/toy/toy.hpp"
#include "numerics/rng.hpp"

namespace opcts::toy {

HostTensor make_input(const Problem& p, uint64_t seed) {
  HostTensor x(DType::fp32, {p.n});
  fill_uniform(x, seed, 0, -2.0, 2.0);
  for (int64_t i = 0; i < p.n; ++i) {  // keep |x| >= 2^-4, so that a shift of -8 stays normal
    const float v = std::bit_cast<float>(static_cast<uint32_t>(x.code(i)));
    if (std::fabs(v) < 0.0625f) x.set_code(i, std::bit_cast<uint32_t>(std::copysign(0.0625f, v)));
  }
  return x;
}

}  // namespace opcts::toy
