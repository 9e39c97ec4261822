// The invariance contracts' checks (runner/invariance.hpp).
#include "runner/invariance.hpp"

#include <algorithm>
#include <numeric>

#include "runner/output_bytes.hpp"

namespace opcts {

namespace {

// Whether a tensor of p (shape `full`) leads with the batch of B entries where the batch-1
// problem's (shape `one`) has one: the same rank and trailing dimensions (element order, not
// storage: the sub-problem's tensors keep the layout its own inputs have).
bool leads_with_batch(const std::vector<int64_t>& full, const std::vector<int64_t>& one, int64_t B) {
  return full.size() == one.size() && !full.empty() && full[0] == B && one[0] == 1 &&
         std::equal(full.begin() + 1, full.end(), one.begin() + 1);
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The sub-problem of one axis: sub entry s is the case's entry entries[s].
struct SubCase {
  ProblemPtr problem;
  std::vector<int64_t> entries;
  std::string what;  // "entry 0 run alone (a batch of 1)", for the message
};

// The first element of the shared rows whose bytes differ, described; "" when none.
std::string first_difference(InvarianceAxis axis, const SubCase& sc, int64_t B, const std::string& name,
                             const HostTensor& whole, const HostTensor& part) {
  const int64_t per = part.dim(0) ? part.numel() / part.dim(0) : 0;
  for (size_t s = 0; s < sc.entries.size(); ++s)
    for (int64_t k = 0; k < per; ++k) {
      const int64_t i = sc.entries[s] * per + k, j = static_cast<int64_t>(s) * per + k;
      if (whole.code(i) == part.code(j)) continue;
      return "--invariance " + std::string(to_string(axis)) + ": " + element_name(name, whole, i) + " of batch entry " +
             std::to_string(sc.entries[s]) + " is " + element_value(whole, i) + " in the case's batch of " +
             std::to_string(B) + " but " + element_value(part, j) + " with the " + sc.what;
    }
  return "";
}

}  // namespace

HostTensor take_entries(const HostTensor& t, const std::vector<int64_t>& entries, HostTensor into) {
  const int64_t per = t.dim(0) ? t.numel() / t.dim(0) : 0;
  if (into.dtype() != t.dtype() || into.numel() != static_cast<int64_t>(entries.size()) * per)
    throw std::logic_error("take_entries: the target does not hold the entries taken");
  for (size_t e = 0; e < entries.size(); ++e)
    for (int64_t k = 0; k < per; ++k) into.set_code(static_cast<int64_t>(e) * per + k, t.code(entries[e] * per + k));
  return into;
}

InvarianceVerdict check_invariance(const Family& family, const Impl& impl, const ArchInfo& arch, const Problem& p,
                                   const TensorMap& inputs, const TensorMap& out, const SubRun& run) {
  InvarianceVerdict v;
  const std::vector<InvarianceAxis> axes = impl.invariant_axes(p);
  if (axes.empty()) return v;
  const auto skip_all = [&](const std::string& why) {
    for (InvarianceAxis a : axes) v.not_checked.push_back(std::string(to_string(a)) + ": " + why);
    return v;
  };
  std::string why;
  const int64_t B = family.batch_entries(p, why);
  if (B == 0) return skip_all(why.empty() ? "an empty batch" : why);
  if (B < 2) return skip_all("a batch of one entry");

  // Which tensors lead with the batch: the batch-1 problem's own tensors say (their contents
  // are not used).
  const ProblemPtr one = family.with_batch(p, 1);
  const TensorMap one_inputs = family.make_inputs(*one, 0);
  std::vector<std::string> cut;  // inputs cut along the batch
  for (const auto& [name, t] : inputs) {
    const auto it = one_inputs.find(name);
    if (it == one_inputs.end()) return skip_all("the batch of one has no input '" + name + "'");
    if (it->second.dtype() != t.dtype()) return skip_all("input '" + name + "' changes its dtype in a batch of one");
    if (leads_with_batch(t.shape(), it->second.shape(), B)) cut.push_back(name);
    else if (t.shape() != it->second.shape())
      return skip_all("input '" + name + "' " + shape_text(t.shape()) + " does not lead with the batch (" +
                      shape_text(it->second.shape()) + " in a batch of one)");
  }
  std::vector<std::string> shared;  // outputs whose rows are compared
  const std::vector<OutputSpec> specs = family.outputs(p), one_specs = family.outputs(*one);
  for (size_t o = 0; o < specs.size() && o < one_specs.size(); ++o) {
    if (leads_with_batch(specs[o].shape, one_specs[o].shape, B))
      shared.push_back(specs[o].name);  // others sum over the batch (dsinks, a broadcast dbias)
  }
  if (shared.empty()) return skip_all("no output leads with the batch");

  for (InvarianceAxis axis : axes) {
    SubCase sc;
    if (axis == InvarianceAxis::batch_size) {
      sc = {one, {0}, "entry run alone (a batch of 1)"};
    } else {
      sc.problem = family.with_batch(p, B);
      sc.entries.resize(static_cast<size_t>(B));
      std::iota(sc.entries.rbegin(), sc.entries.rend(), int64_t{0});
      sc.what = "batch reversed (entry " + std::to_string(B - 1) + " first)";
    }
    // A planted impl's supports() says where its bug shows on a case, not what it can run: its
    // sub-problems run as the real impl's would.
    if (const Support s = impl.planted() ? Support::yes() : impl.supports(*sc.problem, arch); !s.ok) {
      v.not_checked.push_back(std::string(to_string(axis)) + ": the impl declines its sub-problem (" + s.reason + ")");
      continue;
    }
    // Each input in the sub-problem's own layout (the batch of one's, or the case's for a batch
    // of the same size), its entries taken from the case's.
    const bool alone = axis == InvarianceAxis::batch_size;
    TensorMap sub_inputs;
    for (const auto& [name, t] : inputs) {
      if (std::find(cut.begin(), cut.end(), name) == cut.end()) sub_inputs.emplace(name, t);
      else sub_inputs.emplace(name, take_entries(t, sc.entries, alone ? one_inputs.at(name) : t));
    }
    const TensorMap sub_out = run(*sc.problem, sub_inputs);
    for (const std::string& name : shared) {
      const auto whole = out.find(name), part = sub_out.find(name);
      if (whole == out.end()) continue;  // the case's comparison already failed on it
      if (part == sub_out.end())
        throw std::runtime_error("--invariance " + std::string(to_string(axis)) + ": the impl returned no output '" +
                                 name + "' on the sub-problem");
      const std::string diff = first_difference(axis, sc, B, name, whole->second, part->second);
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
