// What GPUs this process sees: the arch name of a CUDA device, the device count, the current device.
#pragma once

#include <string>

namespace opcts {

/// What the process sees: the arch name of CUDA device `device` ("sm" + major + minor) when
/// this build has CUDA and a GPU answers, else of AMD GPU `device` in the KFD topology
/// ("gfx942", kfd_probe.hpp: no ROCm runtime needed), otherwise "host". `why` receives a line
/// saying why (e.g. "no CUDA device: cudaErrorNoDevice").
std::string detect_arch(int device, std::string* why = nullptr);

/// Number of CUDA devices visible (0 without CUDA or GPU).
int cuda_device_count();

/// Number of AMD GPUs in the KFD topology (ROCm's device ids 0..n-1).
int amd_device_count();

/// Makes `device` this process's current CUDA device, so that impls' supports() checks (free
/// memory) look at the GPU the run uses; a no-op without CUDA, a GPU or with device < 0.
void use_cuda_device(int device);

}  // namespace opcts
