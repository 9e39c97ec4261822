// Built-in GPU impls as rows of plugin-ABI descriptors (include/opcts/plugin.h), in every build.
//
// A family's CUDA impls are declared in families/<f>/cuda/<f>_rows.cpp, which every build
// compiles: names, capabilities, whether planted, and the callbacks. The callbacks themselves
// (families/<f>/cuda/<f>_impls.cpp: the C parameter struct and tensors mapped onto the
// kernel's parameter struct, launched on the stream handed in) exist only where a GPU backend is
// built, CUDA's or HIP's (the same files: gpu/portable/runtime.hpp); OPCTS_CUDA_ONLY leaves them
// out otherwise. A row whose kernel is portable (gpu/portable/kernels.txt) also declares its
// hip.* twin (Row::hip_twin): the same callbacks and impl data on the backend "hip". A row runs
// where its backend is the one built, and is a SKIP saying so elsewhere, so every case id,
// planted ones included, is the same in every build.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/abi_impl.hpp"

#if OPCTS_HAVE_CUDA || OPCTS_HAVE_HIP_BACKEND
#define OPCTS_CUDA_ONLY(x) (x)
#else
#define OPCTS_CUDA_ONLY(x) nullptr
#endif

namespace opcts::cuda {

/// A built-in row's preparation for one problem: what its run would otherwise do while the
/// backend holds the case's stream (library handles, cuDNN plans, cuBLASLt heuristics: calls
/// that may wait for the device, and so for the stream gate). The CUDA backend calls it with the
/// row's impl_data and the parameter struct in the process that runs the case, just before it
/// holds the stream (abi_backend.cpp), with the case's tactic (opcts_run_args.tactic, or null): a
/// row with tactics prepares that tactic's plan. It must not throw: what fails there is left to
/// run, which reports it.
// `tactic`: the case's (opcts_run_args.tactic), or null: a row with tactics prepares that one's plan.
using PrepareFn = void (*)(const void* impl_data, const void* params, const char* tactic);

/// One built-in row: the descriptor (callbacks may be null in a host build), the capability
/// names it needs, and for a planted row the C++ check of which problems can show its bug
/// (returns "" when the problem can; the reason to SKIP otherwise) and, where the bug is one
/// of the inputs an unchanged kernel is given, the wrong inputs (AbiImpl::set_planted_inputs),
/// and where it is in what the kernel returns, the wrong outputs (AbiImpl::set_planted_outputs).
struct Row {
  opcts_impl_desc desc{};
  std::vector<std::string> caps;
  std::function<std::string(const Problem&)> cannot_show;
  std::function<TensorMap(const Problem&, const TensorMap&)> plant_inputs;
  std::function<TensorMap(const Problem&, TensorMap)> plant_outputs;
  BlindSpotFn blind_spot;          // a planted row's derived blind spots (Impl::blind_spot)
  bool bug_needs_bitwise = false;  // a planted row whose bug only --bitwise sees
  bool bug_needs_capture = false;  // a planted row whose bug only --capture sees
  PrepareFn prepare = nullptr;     // run's library setup, done before the stream is held (may be null)
  // The row's tactics per problem (Impl::tactics), declared in C++ in every build so that ids
  // never depend on it; run reads the case's in opcts_run_args.tactic. Null: none.
  std::function<std::vector<std::string>(const Problem&)> tactics;
  // For a row whose determinism depends on the tactic (a kernel variant with another reduction
  // order): the claim per tactic (AbiImpl::set_deterministic_tactic), used instead of
  // desc.deterministic. Null: desc.deterministic's claim holds for every tactic.
  AbiImpl::DeterministicTacticFn deterministic_tactic = nullptr;
  // A cuda.* row's hip.* twin (never a planted row's): registered by add_rows after the rows it
  // was given, named hip.<the name after "cuda.">, with the capabilities HIP needs for it.
  bool hip_twin = false;
  std::vector<std::string> hip_caps;
};

/// `r` with its hip.* twin, which needs `hip_caps` (the CUDA row's capabilities are CUDA's:
/// mma_sync_bf16 is emulated under HIP, gpu/portable/mma_tile.cuh).
inline Row with_hip_twin(Row r, std::vector<std::string> hip_caps = {}) {
  r.hip_twin = true;
  r.hip_caps = std::move(hip_caps);
  return r;
}

/// A row of `family` named `name` with its callbacks (pass them through OPCTS_CUDA_ONLY), on
/// `backend` ("cuda", or "hip" for gpu/hip/rows.cpp's rows).
Row row(const char* family, const char* name, opcts_supports_fn supports, opcts_run_fn run,
        opcts_deterministic_fn deterministic = nullptr, const void* impl_data = nullptr, const char* backend = "cuda");

/// The case's tactic (opcts_run_args.tactic), or null: none, or an args struct older than ABI
/// 1.11, which has no tactic field.
inline const char* tactic_of(const opcts_run_args* a) {
  return offsetof(opcts_run_args, tactic) + sizeof(const char*) <= a->struct_size ? a->tactic : nullptr;
}

/// What a row's run callback returns on failure: `status`, with `message` (and for
/// OPCTS_INVALID_ARGUMENT the argument's name) written into `report`, truncated to its fields.
inline opcts_status report_status(opcts_report* report, opcts_status status, const std::string& message,
                                  const std::string& argument = "") {
  std::snprintf(report->message, sizeof report->message, "%s", message.c_str());
  std::snprintf(report->argument, sizeof report->argument, "%s", argument.c_str());
  return status;
}

/// Registers the rows, then their hip.* twins: each with the GPU backend when this build's is
/// its backend (CUDA's for cuda.*, HIP's for hip.*), else as a SKIP naming what is missing
/// ("this opcts was built without CUDA", "... without the HIP backend", or `missing` for a
/// library such as cuDNN).
void add_rows(Registry& reg, std::vector<Row> rows, const std::string& missing = "");

}  // namespace opcts::cuda
