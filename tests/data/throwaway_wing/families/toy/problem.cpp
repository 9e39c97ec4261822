// The toy problem's contract.
#include <stdexcept>

#include "families/toy/toy.hpp"

namespace opcts::toy {

void validate(const Problem& p) {
  if (p.n < 1 || p.n > (int64_t{1} << 24)) throw std::invalid_argument("n must be in [1, 2^24]");
  // |x| in [2^-4, 2) times 2^[-8, 8] stays a normal fp32: the product is exact.
  if (p.shift < -8 || p.shift > 8) throw std::invalid_argument("shift must be in [-8, 8]");
}

}  // namespace opcts::toy
