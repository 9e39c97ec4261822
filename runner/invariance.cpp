// The invariance contracts' checks (runner/invariance.hpp).
#include "runner/invariance.hpp"

#include <stdexcept>

#include "core/errors.hpp"
#include "runner/output_bytes.hpp"

namespace opcts {

namespace {

bool within(const SharedRun& r, const HostTensor& from, const HostTensor& to) {
  return r.count >= 0 && r.from >= 0 && r.to >= 0 && r.from + r.count <= from.numel() && r.to + r.count <= to.numel();
}

// The first shared element whose bytes differ, described; "" when none.
std::string first_difference(InvarianceAxis axis, const InvarianceCut& cut, const std::string& name,
                             const HostTensor& whole, const HostTensor& part) {
  for (const SharedRun& r : cut.outputs.at(name)) {
    if (!within(r, whole, part))
      throw std::logic_error("--invariance " + std::string(to_string(axis)) + ": a run of '" + name +
                             "' lies outside the case's or the sub-problem's output");
    for (int64_t k = 0; k < r.count; ++k) {
      const int64_t i = r.from + k, j = r.to + k;
      if (whole.code(i) == part.code(j)) continue;
      const std::string there = element_name(name, part, j), here = element_name(name, whole, i);
      return "--invariance " + std::string(to_string(axis)) + ": " + here +
             (r.entry >= 0 ? " of batch entry " + std::to_string(r.entry) : std::string()) + " is " +
             element_value(whole, i) + " in the case but " + element_value(part, j) +
             (there != here ? " at " + there : std::string()) + " with the " + cut.what;
    }
  }
  return "";
}

// The tactic axis: the case's own problem and inputs run with each other tactic the impl lists,
// every output byte compared with the case's.
void check_tactics(const Impl& impl, const Problem& p, std::string_view tactic, const TensorMap& inputs,
                   const TensorMap& out, const SubRun& run, InvarianceVerdict& v) {
  const std::vector<std::string> tactics = impl.tactics(p);
  if (tactics.size() < 2) {
    v.not_checked.push_back(std::string("tactic: the impl lists ") + (tactics.empty() ? "no tactic" : "one tactic") +
                            " for this problem");
    return;
  }
  for (const std::string& t : tactics) {
    if (t == tactic) continue;
    TensorMap other;
    try {
      other = run(p, inputs, t);
    } catch (const TacticUnavailable& e) {
      v.not_checked.push_back("tactic: " + t + " is not offered here (" + e.what() + ")");
      continue;
    }
    for (const auto& [name, mine] : out) {  // a missing output is the impl's error, not a difference
      const auto it = other.find(name);
      if (it == other.end() || it->second.numel() != mine.numel())
        throw std::runtime_error("--invariance tactic: tactic " + t + " returned no output '" + name +
                                 "' of the case's size");
    }
    v.failure = first_bit_difference(
        out, other,
        [&](const std::string& at, const std::string& mine, const std::string& theirs) {
          return "--invariance tactic: " + at + " is " + mine + " with tactic " + std::string(tactic) +
                 " (the case's) but " + theirs + " with tactic " + t;
        },
        &v.failed_output);
    if (!v.failure.empty()) return;
  }
}

}  // namespace

HostTensor copy_runs(const HostTensor& from, const std::vector<SharedRun>& runs, HostTensor into) {
  if (into.dtype() != from.dtype()) throw std::logic_error("copy_runs: the tensors' dtypes differ");
  for (const SharedRun& r : runs) {
    if (!within(r, from, into)) throw std::logic_error("copy_runs: a run lies outside a tensor");
    for (int64_t k = 0; k < r.count; ++k) into.set_code(r.to + k, from.code(r.from + k));
  }
  return into;
}

InvarianceVerdict check_invariance(const Family& family, const Impl& impl, const ArchInfo& arch, const Problem& p,
                                   std::string_view tactic, const TensorMap& inputs, const TensorMap& out,
                                   const SubRun& run) {
  InvarianceVerdict v;
  for (InvarianceAxis axis : impl.invariant_axes(p)) {
    const std::string axis_name(to_string(axis));
    if (axis == InvarianceAxis::tactic) {
      check_tactics(impl, p, tactic, inputs, out, run, v);
      if (!v.failure.empty()) return v;
      continue;
    }
    const InvarianceCut cut = family.invariance_cut(p, inputs, axis);
    if (!cut.why_not.empty()) {
      v.not_checked.push_back(axis_name + ": " + cut.why_not);
      continue;
    }
    // A planted impl's supports() says where its bug shows on a case, not what it can run: its
    // sub-problems run as the real impl's would.
    if (const Support s = impl.planted() ? Support::yes() : impl.supports(*cut.problem, arch); !s.ok) {
      v.not_checked.push_back(axis_name + ": the impl declines its sub-problem (" + s.reason + ")");
      continue;
    }
    // Each input in the sub-problem's own layout, its shared elements the case's; the rest (its
    // cu_seqlens) its own.
    TensorMap sub_inputs = family.make_inputs(*cut.problem, 0);
    for (const auto& [name, runs] : cut.inputs) {
      const auto from = inputs.find(name);
      const auto into = sub_inputs.find(name);
      if (from == inputs.end() || into == sub_inputs.end())
        throw std::logic_error("--invariance " + axis_name + ": the cut names input '" + name +
                               "', which the case or its sub-problem lacks");
      into->second = copy_runs(from->second, runs, into->second);
    }
    const TensorMap sub_out = run(*cut.problem, sub_inputs, tactic);
    for (const auto& [name, runs] : cut.outputs) {
      const auto whole = out.find(name), part = sub_out.find(name);
      if (whole == out.end()) continue;  // the case's comparison already failed on it
      if (part == sub_out.end())
        throw std::runtime_error("--invariance " + axis_name + ": the impl returned no output '" + name +
                                 "' on the sub-problem");
      const std::string diff = first_difference(axis, cut, name, whole->second, part->second);
      if (!diff.empty()) {
        v.failure = diff;
        v.failed_output = name;
        return v;
      }
    }
  }
  return v;
}

}  // namespace opcts
