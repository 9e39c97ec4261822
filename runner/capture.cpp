// --capture's checks (runner/capture.hpp).
#include "runner/capture.hpp"

#include "core/errors.hpp"
#include "runner/output_bytes.hpp"

namespace opcts {

namespace {

void add_note(std::string& note, const std::string& what) { note += (note.empty() ? "" : "; ") + what; }

}  // namespace

TensorMap check_capture(const Family& family, const Impl& impl, const Problem& p, const TensorMap& inputs,
                        const TensorMap& plain, const RunContext& ctx, std::string& note) {
  const std::string who(impl.name());
  const TensorMap at_capture_inputs = family.make_inputs(p, capture_seed(family, p));
  CapturedRun r = impl.run_captured(p, at_capture_inputs, inputs, ctx);
  if (same_bytes(at_capture_inputs, inputs))
    add_note(note, "capture: the capture-time inputs are the case's own bytes (a kept result not checked)");
  else if (same_bytes(r.first, r.at_capture) && !constant_outputs(r.first))
    throw ContractBreach(FailureKind::stale_capture,
                         "--capture: " + who +
                             "'s recording, replayed after the case's inputs were copied into its buffers, gave the "
                             "very bytes it gave on the inputs it was recorded with: a result computed at capture "
                             "and kept, not recomputed from the buffers");
  if (impl.deterministic(p, ctx.tactic)) {
    const auto differs = [&](const TensorMap& a, const TensorMap& b, const std::string& a_is, const std::string& b_is) {
      const std::string diff =
          first_bit_difference(a, b, [&](const std::string& at, const std::string& va, const std::string& vb) {
            return "--capture: " + at + " is " + va + " in " + a_is + " but " + vb + " in " + b_is;
          });
      if (!diff.empty())
        throw ContractBreach(FailureKind::replay_differs,
                             diff + " (" + who +
                                 " claims determinism: a value read when its run was recorded and "
                                 "baked into the recording, or a replay that races)");
    };
    differs(plain, r.first, "a plain run on the case's inputs", "the recording's replay on them");
    differs(r.first, r.second, "the first replay on the case's inputs", "the second");
  } else {
    add_note(note, "capture: replays not compared byte for byte (the impl is not deterministic on this problem)");
  }
  return std::move(r.first);
}

}  // namespace opcts
