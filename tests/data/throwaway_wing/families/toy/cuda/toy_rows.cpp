// The toy family has no CUDA impl: its rows function registers none (every build calls it).
#include "families/toy/toy.hpp"

namespace opcts {

void register_cuda_toy(Registry&) {}

}  // namespace opcts
