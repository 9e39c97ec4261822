// The argument checks of the SDPA launchers (sdpa_kernels.hpp: sdpa_check_arguments), host code.
#include <string>

#include "families/sdpa/cuda/sdpa_kernels.hpp"

namespace opcts::cuda {

void sdpa_check_arguments(const SdpaParams& p) {
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    throw SdpaArgumentError("heads_kv", "heads_q (" + std::to_string(p.heads_q) +
                                            ") must be a positive multiple of heads_kv (" + std::to_string(p.heads_kv) +
                                            ")");
  if (p.window_left < -1)
    throw SdpaArgumentError("window_left",
                            "window_left = " + std::to_string(p.window_left) + " (>= 0, or -1 for unbounded)");
  if (p.window_right < -1)
    throw SdpaArgumentError("window_right",
                            "window_right = " + std::to_string(p.window_right) + " (>= 0, or -1 for unbounded)");
  if (!(p.softcap >= 0)) throw SdpaArgumentError("softcap", "softcap must be >= 0 (0 = off)");
}

}  // namespace opcts::cuda
