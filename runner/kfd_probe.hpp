// AMD GPUs as the Linux amdgpu driver's KFD topology lists them: no ROCm runtime needed.
#pragma once

#include <string>
#include <vector>

namespace opcts {

/// The gfx arch names ("gfx942", "gfx90a") of the GPU nodes under `topology` (a folder of
/// numbered node folders, each with a `properties` file of "key value" lines), in node order,
/// which is ROCm's device order (HIP_VISIBLE_DEVICES, CTest GPU ids). A node whose
/// gfx_target_version is 0 is a CPU. The name is ROCm's rocm_agent_enumerator spelling:
/// "gfx" + major (decimal) + minor and stepping (hex) of the version major·10000 + minor·100 +
/// stepping. No folder or no GPU node: empty.
std::vector<std::string> kfd_gpu_archs(const std::string& topology = "/sys/class/kfd/kfd/topology/nodes");

/// The gfx name of a gfx_target_version (90402 -> "gfx942", 90010 -> "gfx90a"); "" for 0.
std::string gfx_name(long version);

}  // namespace opcts
