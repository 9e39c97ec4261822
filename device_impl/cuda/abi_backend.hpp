// The CUDA backend of ABI impls: device copies of the inputs, poisoned outputs, a stream of
// their own, and the checks that the impl kept to that stream and left its inputs alone.
#pragma once

#include "core/abi_impl.hpp"

namespace opcts::cuda {

/// The process-wide CUDA backend (core/abi_impl.hpp AbiBackend).
const AbiBackend& abi_backend();

}  // namespace opcts::cuda
