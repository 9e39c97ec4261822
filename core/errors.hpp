// Typed errors that change how the runner treats a case.
#pragma once

#include <stdexcept>
#include <string>

#include "core/failure_kind.hpp"

namespace opcts {

/// An impl refused its arguments: `argument` names the one at fault ("K", "lda",
/// "scale_b"), the message says why. Negative cases expect it (Family::expected_error).
struct InvalidArgument : std::invalid_argument {
  InvalidArgument(std::string arg, const std::string& message)
      : std::invalid_argument("invalid argument '" + arg + "': " + message), argument(std::move(arg)) {}
  std::string argument;
};

/// A break of a family's argument contract (each family's contract_violation): the argument an
/// impl must refuse with InvalidArgument, and why.
struct Violation {
  std::string argument;
  std::string why;
};

/// A vendor library refused a combination it does not implement (cuBLASLt status 15,
/// CUBLAS_STATUS_NOT_SUPPORTED): an ERROR unless the case expects it; never a silent SKIP,
/// since the capability table said the arch supports it.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The tactic a case names (Impl::tactics, RunContext::tactic) is not one the device or library
/// offers for this problem here (cuBLASLt's heuristic returned fewer algorithms than the tactic's
/// rank): the case is a SKIP with the message. A tactic the impl does not know at all is an
/// ERROR (std::invalid_argument), never this.
struct TacticUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An impl broke the contract every impl is held to (it wrote into an input, did its work off
/// the stream it was handed, or — where nobody collects guard breaches — wrote outside an
/// output): the case FAILs with the message and `kind` (core/failure_kind.hpp), whatever its
/// outputs. `output` names the output of a written_outside breach.
struct ContractBreach : std::runtime_error {
  ContractBreach(FailureKind k, const std::string& message, std::string out = "")
      : std::runtime_error(message), kind(k), output(std::move(out)) {}
  FailureKind kind;
  std::string output;
};

/// The device context is unusable (a sticky CUDA error such as an illegal address): the
/// case is recorded as CRASH and the worker process exits so that a fresh one continues.
struct DeviceLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace opcts
