// Family::invariance_cut's default (core/family.hpp): a batch cut along the leading dimension of
// every tensor that leads with the batch of Family::batch_entries.
#include <numeric>

#include "core/family.hpp"

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

int64_t elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// Sub-problem entry s is the case's entries[s]: one run of `per` elements each.
std::vector<SharedRun> entry_runs(const std::vector<int64_t>& entries, int64_t per) {
  std::vector<SharedRun> runs;
  for (size_t s = 0; s < entries.size(); ++s)
    runs.push_back({static_cast<int64_t>(s) * per, entries[s] * per, per, entries[s]});
  return runs;
}

}  // namespace

InvarianceCut Family::invariance_cut(const Problem& p, const TensorMap& inputs, InvarianceAxis axis) const {
  InvarianceCut cut;
  if (axis == InvarianceAxis::packing) {
    cut.why_not = "the " + std::string(name()) + " family has one batch layout";
    return cut;
  }
  if (axis == InvarianceAxis::tactic) {
    cut.why_not = "not a cut: the runner runs the case with the impl's other tactics";
    return cut;
  }
  std::string why;
  const int64_t B = batch_entries(p, why);
  if (B < 2) {
    cut.why_not = B == 1 ? "a batch of one entry" : why.empty() ? "an empty batch" : why;
    return cut;
  }
  // Which tensors lead with the batch: the batch-1 problem's own tensors say (their contents
  // are not used).
  const ProblemPtr one = with_batch(p, 1);
  const TensorMap one_inputs = make_inputs(*one, 0);
  std::vector<int64_t> entries{0};
  if (axis == InvarianceAxis::batch_position) {
    entries.resize(static_cast<size_t>(B));
    std::iota(entries.rbegin(), entries.rend(), int64_t{0});
    cut.problem = with_batch(p, B);
    cut.what = "batch of " + std::to_string(B) + " reversed (entry " + std::to_string(B - 1) + " first)";
  } else {
    cut.problem = one;
    cut.what = "entry run alone (a batch of 1)";
  }
  for (const auto& [name, t] : inputs) {
    const auto it = one_inputs.find(name);
    if (it == one_inputs.end()) return InvarianceCut::none("the batch of one has no input '" + name + "'");
    if (it->second.dtype() != t.dtype())
      return InvarianceCut::none("input '" + name + "' changes its dtype in a batch of one");
    if (leads_with_batch(t.shape(), it->second.shape(), B)) {
      cut.inputs[name] = entry_runs(entries, t.numel() / B);
    } else if (t.shape() == it->second.shape()) {
      cut.inputs[name] = {{0, 0, t.numel(), -1}};
    } else {
      return InvarianceCut::none("input '" + name + "' " + shape_text(t.shape()) + " does not lead with the batch (" +
                                 shape_text(it->second.shape()) + " in a batch of one)");
    }
  }
  const std::vector<OutputSpec> specs = outputs(p), one_specs = outputs(*one);
  for (size_t o = 0; o < specs.size() && o < one_specs.size(); ++o)
    if (leads_with_batch(specs[o].shape, one_specs[o].shape, B))  // others sum over the batch (dsinks)
      cut.outputs[specs[o].name] = entry_runs(entries, elements(specs[o].shape) / B);
  if (cut.outputs.empty()) return InvarianceCut::none("no output leads with the batch");
  return cut;
}

}  // namespace opcts
