// The GPU backend of ABI impls: device copies of the inputs, poisoned outputs, a stream of
// their own, and the checks that the impl kept to that stream and left its inputs alone. One
// source for both runtimes: the CUDA backend in a CUDA build, the HIP backend in a HIP build
// (abi_backend.cpp).
#pragma once

#include "core/abi_impl.hpp"
#include "gpu/cuda/rows.hpp"

namespace opcts::cuda {

/// The process-wide GPU backend of this build (core/abi_impl.hpp AbiBackend): CUDA's or HIP's.
const AbiBackend& abi_backend();

/// Makes the backend call `prepare` before it holds the stream of every run of a row whose run
/// callback is `run` (rows.hpp PrepareFn; rows sharing a run callback share their preparation).
void set_prepare(opcts_run_fn run, PrepareFn prepare);

}  // namespace opcts::cuda
