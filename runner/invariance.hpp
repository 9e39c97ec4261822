// The invariance contracts' checks (`opcts run --invariance`; core/invariance.hpp): for each
// axis an impl declares on a case that passed, the family cuts the sub-problem from the case's
// own problem and inputs (Family::invariance_cut: the batch cut to its first entry, the batch
// reversed, the batch in its other layout), the runner runs the impl on it and requires every
// output element it shares with the case to hold the very same bytes; the tactic axis runs the
// case itself with the impl's other tactics and requires every output byte the same.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/family.hpp"

namespace opcts {

/// What the checks found on one case.
struct InvarianceVerdict {
  /// The first difference ("" when every checked axis held): the axis, the output and element,
  /// both values and their bits.
  std::string failure;
  std::string failed_output;  // the output the first difference is in
  /// The declared axes that could not be checked on this problem, each with its reason
  /// ("batch_size: a batch of one").
  std::vector<std::string> not_checked;
};

/// How the caller runs the impl on a sub-problem with a tactic (with its own checks: inputs
/// read-only, guards).
using SubRun = std::function<TensorMap(const Problem&, const TensorMap&, std::string_view tactic)>;

/// Checks each axis `impl` declares on `p`: `tactic` is the case's (Impl::tactics; "" for an
/// impl without), `inputs` and `out` the case's inputs and the impl's outputs on them. A
/// sub-problem the impl's supports() declines, and a tactic it finds unavailable here
/// (TacticUnavailable), are not checked (said in not_checked). Throws what `run` throws.
InvarianceVerdict check_invariance(const Family& family, const Impl& impl, const ArchInfo& arch, const Problem& p,
                                   std::string_view tactic, const TensorMap& inputs, const TensorMap& out,
                                   const SubRun& run);

/// `into` with the runs of `from` copied in (element order: strides may differ). Throws
/// std::logic_error for a run outside either tensor or a dtype that differs (a family's cut is
/// wrong).
HostTensor copy_runs(const HostTensor& from, const std::vector<SharedRun>& runs, HostTensor into);

}  // namespace opcts
