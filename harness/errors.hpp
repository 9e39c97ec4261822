// Typed errors that change how the runner treats a case.
#pragma once

#include <stdexcept>

namespace opcts {

/// The device context is unusable (a sticky CUDA error such as an illegal address): the
/// case is recorded as CRASH and the worker process exits so that a fresh one continues.
struct DeviceLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace opcts
