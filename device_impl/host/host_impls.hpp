// Registration of the host device's implementations.
#pragma once

#include "harness/family.hpp"

namespace opcts {
/// host.flash (sdpa).
void register_host_sdpa(Registry& reg);
}  // namespace opcts
